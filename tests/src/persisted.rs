//! What a server hands on about its writes, read the way the tests compare it: the
//! replication stream (a connection that said `SYNC`), the AOF each server keeps, and a
//! temporary folder for a server's files.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use latchkey_server::{BlockingServer, Server};

/// A temporary folder named after the test (`latchkey-<name>-…`), removed when dropped.
pub fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("latchkey-{name}-"))
        .tempdir()
        .expect("a temporary folder")
}

/// A latchkey server with its AOF on in `dir`, every write fsynced before its reply
/// (`appendfsync always`), so the file can be read as soon as a command is answered.
pub fn latchkey_aof(dir: &Path) -> BlockingServer {
    Server::builder()
        .config("dir", dir.to_str().expect("a UTF-8 path"))
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .start_blocking()
        .expect("start latchkey with an AOF")
}

/// The AOF redis-server 7.0 keeps in `dir`: its base file, then its increments, in the order
/// its manifest lists them (one file's worth of commands, as latchkey keeps it).
pub fn redis_aof(dir: &Path) -> Vec<u8> {
    let folder = dir.join("appendonlydir");
    let manifest = std::fs::read_to_string(folder.join("appendonly.aof.manifest"))
        .expect("redis-server's AOF manifest");
    let mut out = Vec::new();
    for line in manifest.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        // `file <name> seq <n> type <b|i|h>`: history files are no longer part of it.
        if words.len() == 6 && words[0] == "file" && words[5] != "h" {
            out.extend(std::fs::read(folder.join(words[1])).expect("an AOF file"));
        }
    }
    out
}

/// A connection that asked a master for its replication stream (`SYNC`) and skipped the
/// snapshot: what it reads next are the master's writes, as a replica gets them.
pub struct ReplicationStream(BufReader<TcpStream>);

impl ReplicationStream {
    /// Says `SYNC` to the master at `addr` and skips the snapshot (the master may send
    /// newlines first, to keep the link alive while it prepares the file).
    pub fn open(addr: SocketAddr) -> ReplicationStream {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(b"SYNC\r\n").unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        loop {
            line.clear();
            r.read_line(&mut line).expect("the snapshot header");
            if line.starts_with('$') {
                break;
            }
            assert_eq!(line.trim(), "", "unexpected line before the snapshot");
        }
        let len: usize = line[1..].trim().parse().expect("snapshot length");
        let mut rdb = vec![0; len];
        r.read_exact(&mut rdb).expect("the snapshot");
        ReplicationStream(r)
    }

    /// The next command of the stream, byte for byte as the master sent it.
    pub fn next_raw(&mut self) -> Vec<u8> {
        self.next_command().0
    }

    /// The next command of the stream, its arguments.
    pub fn next_args(&mut self) -> Vec<Vec<u8>> {
        self.next_command().1
    }

    /// The next command: its bytes and its arguments.
    fn next_command(&mut self) -> (Vec<u8>, Vec<Vec<u8>>) {
        let mut raw = Vec::new();
        let head = self.line(&mut raw);
        let n: usize = head
            .strip_prefix('*')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not a command in the stream: {head:?}"));
        let mut args = Vec::with_capacity(n);
        for _ in 0..n {
            let len: usize = self.line(&mut raw)[1..].parse().expect("a bulk length");
            let mut b = vec![0; len + 2];
            self.0.read_exact(&mut b).expect("a bulk");
            raw.extend_from_slice(&b);
            b.truncate(len);
            args.push(b);
        }
        (raw, args)
    }

    /// One line, its bytes appended to `raw`, without its line end.
    fn line(&mut self, raw: &mut Vec<u8>) -> String {
        let mut line = String::new();
        self.0.read_line(&mut line).expect("a stream line");
        raw.extend_from_slice(line.as_bytes());
        line.trim_end().to_string()
    }
}
