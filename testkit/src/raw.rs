//! A raw RESP connection that returns each reply's exact bytes, for byte-for-byte comparison.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A blocking connection that sends commands and returns replies as raw bytes.
#[derive(Debug)]
pub struct RawConn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl RawConn {
    /// Connects with a 10-second read timeout.
    pub fn connect(addr: SocketAddr) -> std::io::Result<RawConn> {
        let s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.set_nodelay(true)?;
        Ok(RawConn {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
        })
    }

    /// Wraps a connection a test accepted itself, when the test plays a server's part (a
    /// master answering a replica's handshake, say): its reads get a 20-second timeout, a
    /// hang guard, and what [`read_reply`](RawConn::read_reply) returns is then the peer's
    /// next command.
    pub fn from_stream(s: TcpStream) -> std::io::Result<RawConn> {
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        s.set_nodelay(true)?;
        Ok(RawConn {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
        })
    }

    /// Encodes a command as a RESP array of bulk strings.
    pub fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            let a = a.as_ref();
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("write to server");
    }

    /// Sends a command and returns its reply's bytes.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.send_raw(&Self::encode(args));
        self.read_reply()
    }

    /// Like [`cmd`](RawConn::cmd) but reports a failed write or read instead of panicking, for
    /// probing a server that may not be up yet.
    pub fn try_cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> std::io::Result<Vec<u8>> {
        self.writer.write_all(&Self::encode(args))?;
        self.try_read_reply()
    }

    /// Reads one complete reply (any RESP2/RESP3 type) and returns its exact bytes.
    pub fn read_reply(&mut self) -> Vec<u8> {
        self.try_read_reply().expect("read a reply")
    }

    /// Like [`read_reply`](RawConn::read_reply) but reports errors (timeout, closed).
    pub fn try_read_reply(&mut self) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.read_into(&mut out)?;
        Ok(out)
    }

    /// Reads one whole reply, counting the values still to come instead of recursing: a
    /// script's cyclic table comes back as 7995 nested arrays, too deep for a recursive
    /// reader on a test thread's stack.
    fn read_into(&mut self, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut pending: u64 = 1;
        while pending > 0 {
            pending -= 1;
            let mut line = Vec::new();
            let n = self.reader.read_until(b'\n', &mut line)?;
            if n == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "closed",
                ));
            }
            out.extend_from_slice(&line);
            let body = std::str::from_utf8(&line[1..line.len().saturating_sub(2)]).unwrap_or("");
            let len: i64 = body.parse().unwrap_or(-1);
            match line[0] {
                b'$' | b'=' | b'!' if len >= 0 => {
                    let mut buf = vec![0; len as usize + 2];
                    self.reader.read_exact(&mut buf)?;
                    out.extend_from_slice(&buf);
                }
                b'*' | b'~' | b'>' => pending += len.max(0) as u64,
                b'%' | b'|' => pending += 2 * len.max(0) as u64,
                _ => {}
            }
        }
        Ok(())
    }
}

/// Shows reply bytes readably in assertion messages: printable ASCII as is, every other byte
/// escaped (`\r\n` as `\\r\\n`, `0xff` as `\\xff`), so two different byte strings never show
/// the same.
pub fn show(b: &[u8]) -> String {
    b.escape_ascii().to_string()
}

/// Waits until the server at `addr` counts `n` blocked clients in `INFO clients`
/// (`blocked_clients:n`), so that what a test does next happens after they blocked. A hang
/// guard (30 s), not a timing assertion: it only bounds a wait.
#[track_caller]
pub fn wait_blocked_clients(addr: SocketAddr, n: usize) {
    let mut c = RawConn::connect(addr).expect("connect");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let want = format!("blocked_clients:{n}\r\n");
    loop {
        let info = String::from_utf8_lossy(&c.cmd(&["INFO", "clients"])).into_owned();
        if info.contains(&want) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "expected {want} in {info}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The payload of a RESP bulk-string reply (`$3\r\nabc\r\n` gives `abc`); panics on any other
/// reply, naming it.
pub fn bulk_payload(reply: &[u8]) -> Vec<u8> {
    assert_eq!(
        reply.first(),
        Some(&b'$'),
        "not a bulk reply: {}",
        show(reply)
    );
    let nl = reply
        .iter()
        .position(|b| *b == b'\n')
        .expect("a bulk reply's header line");
    let len: usize = std::str::from_utf8(&reply[1..nl - 1])
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("bad bulk length in {}", show(reply)));
    reply[nl + 1..nl + 1 + len].to_vec()
}

/// Waits until exactly `n` clients of the server at `addr` are in command `name` (`cmd=name`
/// in `CLIENT LIST`: the command each is running, or last ran), so that what a test does next
/// happens after they blocked, or after they left. A hang guard (30 s), not a timing
/// assertion: it only bounds a wait.
#[track_caller]
pub fn wait_clients_in(addr: SocketAddr, name: &str, n: usize) {
    let mut c = RawConn::connect(addr).expect("connect");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let needle = format!("cmd={name} ");
    loop {
        let list = c.cmd(&["CLIENT", "LIST"]);
        let inside = String::from_utf8_lossy(&list).matches(&needle).count();
        if inside == n {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{inside} clients in {name}, expected {n}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Makes the server behind `c` evict: sets `maxmemory-policy allkeys-random` and a
/// `maxmemory` 20 KiB below what `INFO memory` says it uses now, then writes one key
/// (`trigger`), which must make room first. For tests of what an eviction does (latchkey
/// alone: which key Redis evicts, and when, depends on its allocator).
#[track_caller]
pub fn evict_some(c: &mut RawConn) {
    let info = String::from_utf8(c.cmd(&["INFO", "memory"])).expect("INFO is text");
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory");
    c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
    let limit = (used - 20 * 1024).to_string();
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", &limit]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "trigger", "x"]), b"+OK\r\n");
}
