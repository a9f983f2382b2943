//! `MIGRATE`'s conversation with the target server: connecting (or reusing a cached
//! connection), sending `AUTH`, `SELECT` and one `RESTORE` per key, and reading the target's
//! one-line replies, as Redis 7.0's `migrateCommand` does (`src/cluster.c`).
//!
//! Everything here is plain blocking I/O on a [`std::net::TcpStream`]. The command runs it on
//! tokio's blocking pool (see [`super::migrate`]), so no async worker and no lock of the
//! keyspace is held while it waits; inside `MULTI` or a script, where Redis blocks the whole
//! server, it runs where it is called.
//!
//! The target is another server, and nothing says it is friendly: every connect, every write
//! of a 64 KiB chunk and every reply line is bounded by the command's timeout, and a reply line
//! is read only up to Redis's 1023 bytes (a longer one is cut there, as Redis cuts it).
//!
//! ## The connection cache
//!
//! As Redis does (`migrate_cached_sockets`), a connection that served a `MIGRATE` is kept for
//! the next one to the same `host:port`, with the database it last selected, so that a series
//! of `MIGRATE`s does not pay a connection (and a `SELECT`) each. A connection idle for more
//! than ten seconds is closed by a sweeper task; at most 64 are kept per server. The cache
//! lives here, keyed by the server's run id, rather than in the server's shared state: it is
//! private to this command. A connection in use is taken out of the cache, so two `MIGRATE`s
//! to one target at once (which Redis, single-threaded, never runs) use two connections.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::codec::encode;
use crate::frame::Frame;

/// How long a cached connection may stay unused before it is closed (Redis's
/// `MIGRATE_SOCKET_CACHE_TTL`).
const CACHE_TTL: Duration = Duration::from_secs(10);

/// How many connections one server keeps (Redis's `MIGRATE_SOCKET_CACHE_ITEMS`).
const CACHE_ITEMS: usize = 64;

/// The longest reply line read from the target, as Redis's 1024-byte buffer reads it.
const MAX_LINE: usize = 1023;

/// How much of the request is written with one timeout (Redis writes 64 KiB chunks).
const CHUNK: usize = 64 * 1024;

/// One `MIGRATE`'s request to its target, built while the keys were read.
pub(crate) struct Request {
    /// The host argument, as given.
    pub host: Bytes,
    /// The port argument, as given (read as C's `atoi` reads it).
    pub port: Bytes,
    /// The timeout for the connect, each write and each reply line.
    pub timeout: Duration,
    /// `AUTH password` or `AUTH2 username password`: the username, then the password.
    pub auth: Option<(Option<Bytes>, Bytes)>,
    /// The target database.
    pub db: i64,
    /// One encoded `RESTORE key ttl payload [REPLACE]` per key, in order.
    pub restores: Vec<Bytes>,
}

/// What the target did: the reply for the client and which of the request's `RESTORE`s it
/// accepted (by index), whose keys the source deletes unless `COPY` was given.
pub(crate) struct Outcome {
    /// `+OK`, the target's error, or an `IOERR`.
    pub reply: Frame,
    /// The indexes of the `RESTORE`s the target acknowledged.
    pub accepted: Vec<usize>,
}

/// A connection to a target, with the database it has selected (-1: unknown).
struct Link {
    conn: BufReader<TcpStream>,
    last_db: i64,
    last_use: Instant,
}

/// One server's cached connections, by `host:port`, and whether its sweeper runs.
#[derive(Default)]
struct ServerCache {
    links: HashMap<Bytes, Link>,
    sweeping: bool,
}

/// Every server's cache in this process, by run id.
fn caches() -> &'static Mutex<HashMap<String, ServerCache>> {
    static CACHES: OnceLock<Mutex<HashMap<String, ServerCache>>> = OnceLock::new();
    CACHES.get_or_init(Default::default)
}

/// How many connections the server with this run id keeps open (`INFO`'s
/// `migrate_cached_sockets`).
pub(crate) fn cached_sockets(run_id: &str) -> usize {
    let mut all = caches().lock().unwrap_or_else(|e| e.into_inner());
    all.get_mut(run_id).map_or(0, |c| {
        c.links.retain(|_, l| l.last_use.elapsed() <= CACHE_TTL);
        c.links.len()
    })
}

/// Takes the cached connection to `name`, if one is there and still young enough.
fn take_cached(run_id: &str, name: &Bytes) -> Option<Link> {
    let mut all = caches().lock().unwrap_or_else(|e| e.into_inner());
    let link = all.get_mut(run_id)?.links.remove(name)?;
    (link.last_use.elapsed() <= CACHE_TTL).then_some(link)
}

/// Puts a connection (back) into the cache, and starts the sweeper that closes it once idle.
fn put_cached(run_id: &str, name: Bytes, mut link: Link) {
    link.last_use = Instant::now();
    let start_sweeper = {
        let mut all = caches().lock().unwrap_or_else(|e| e.into_inner());
        let cache = all.entry(run_id.to_string()).or_default();
        if !cache.links.contains_key(&name) && cache.links.len() >= CACHE_ITEMS {
            // Full: one goes, as Redis drops one at random.
            if let Some(k) = cache.links.keys().next().cloned() {
                cache.links.remove(&k);
            }
        }
        // A connection another `MIGRATE` cached meanwhile is replaced (and closed).
        cache.links.insert(name, link);
        !std::mem::replace(&mut cache.sweeping, true)
    };
    if start_sweeper {
        let id = run_id.to_string();
        let sweep = async move {
            let run_id = id;
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let mut all = caches().lock().unwrap_or_else(|e| e.into_inner());
                let Some(cache) = all.get_mut(&run_id) else {
                    return;
                };
                cache.links.retain(|_, l| l.last_use.elapsed() <= CACHE_TTL);
                if cache.links.is_empty() {
                    all.remove(&run_id);
                    return;
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(sweep);
            }
            // No runtime to sweep on: keep nothing rather than keep it forever.
            Err(_) => {
                let mut all = caches().lock().unwrap_or_else(|e| e.into_inner());
                all.remove(run_id);
            }
        }
    }
}

/// C's `atoi`: leading blanks, a sign, the digits up to the first other byte; 0 for none.
fn atoi(s: &[u8]) -> i64 {
    let s = match s.iter().position(|b| !b.is_ascii_whitespace()) {
        Some(i) => &s[i..],
        None => return 0,
    };
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut n: i64 = 0;
    for d in digits.iter().take_while(|b| b.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add(i64::from(d - b'0'));
    }
    if neg {
        -n
    } else {
        n
    }
}

/// The instant `timeout` from now, `None` when that is beyond what the clock can say (a
/// timeout of years: no bound).
fn deadline(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

/// What is left until `deadline`, or a timeout error once it has passed.
fn remaining(deadline: Option<Instant>) -> io::Result<Option<Duration>> {
    match deadline {
        None => Ok(None),
        Some(d) => match d.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Ok(Some(left)),
            _ => Err(io::ErrorKind::TimedOut.into()),
        },
    }
}

/// Opens a connection to `host:port` within `timeout`.
fn connect(host: &[u8], port: &[u8], timeout: Duration) -> io::Result<Link> {
    let host = std::str::from_utf8(host).map_err(|_| io::ErrorKind::InvalidInput)?;
    // The port as C passes an int through `htons`: 70000 is port 4464.
    let port = atoi(port) as u16;
    let until = deadline(timeout);
    let mut last = io::Error::from(io::ErrorKind::AddrNotAvailable);
    for addr in (host, port).to_socket_addrs()? {
        let attempt = match remaining(until)? {
            Some(left) => TcpStream::connect_timeout(&addr, left),
            None => TcpStream::connect(addr),
        };
        match attempt {
            Ok(stream) => {
                stream.set_nodelay(true)?;
                return Ok(Link {
                    conn: BufReader::new(stream),
                    last_db: -1,
                    last_use: Instant::now(),
                });
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Whether an I/O error is a timeout (Redis does not retry after one).
fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// Writes all of `data`, each 64 KiB chunk within `timeout`.
fn write_all(link: &mut Link, data: &[u8], timeout: Duration) -> io::Result<()> {
    for chunk in data.chunks(CHUNK) {
        let until = deadline(timeout);
        let mut rest = chunk;
        while !rest.is_empty() {
            let stream = link.conn.get_mut();
            stream.set_write_timeout(remaining(until)?)?;
            match stream.write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Reads one reply line within `timeout`, as Redis's `syncReadLine` reads it: up to `\n`, a
/// final `\r` dropped, at most [`MAX_LINE`] bytes (the rest of a longer line stays for the
/// next read). A line with nothing before its `\n` counts as a failed read, as in Redis.
fn read_line(link: &mut Link, timeout: Duration) -> io::Result<Vec<u8>> {
    let until = deadline(timeout);
    let mut line = Vec::new();
    while line.len() < MAX_LINE {
        if link.conn.buffer().is_empty() {
            link.conn.get_ref().set_read_timeout(remaining(until)?)?;
        }
        let byte = match link.conn.fill_buf() {
            Ok([]) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(buf) => buf[0],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        link.conn.consume(1);
        if byte == b'\n' {
            if line.is_empty() {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(line);
        }
        line.push(byte);
    }
    Ok(line)
}

/// `Target instance replied with error: ...`: the target's line without its `-`, up to a NUL
/// byte, as Redis formats it with `%s` (its bytes as they are, a stray `\r` made a space).
fn target_error(line: &[u8]) -> Frame {
    let text = &line[1..];
    let text = &text[..text.iter().position(|b| *b == 0).unwrap_or(text.len())];
    let mut out = b"ERR Target instance replied with error: ".to_vec();
    out.extend(text.iter().map(|b| if *b == b'\r' { b' ' } else { *b }));
    Frame::Error(Bytes::from(out))
}

/// The request's bytes: `AUTH` when asked, `SELECT` unless the connection has the database
/// selected already, then the `RESTORE`s.
fn request_bytes(req: &Request, select: bool) -> BytesMut {
    let mut out = BytesMut::new();
    match &req.auth {
        Some((Some(user), pass)) => encode(&[&b"AUTH"[..], user, pass], &mut out),
        Some((None, pass)) => encode(&[&b"AUTH"[..], pass], &mut out),
        None => {}
    }
    if select {
        encode(&[&b"SELECT"[..], req.db.to_string().as_bytes()], &mut out);
    }
    for r in &req.restores {
        out.extend_from_slice(r);
    }
    out
}

/// Why one attempt failed on the socket: writing or reading, and whether by a timeout.
struct SocketError {
    writing: bool,
    timed_out: bool,
}

/// One attempt over one connection. `Err` is a socket error before any `RESTORE` reply was
/// read (the attempt may be retried); `Ok` carries the outcome, the link to keep (none after
/// a socket error) and, for a socket error after some replies, that error.
fn attempt(req: &Request, link: &mut Link) -> Result<(Outcome, Option<SocketError>), SocketError> {
    let select = link.last_db != req.db;
    let data = request_bytes(req, select);
    if let Err(e) = write_all(link, &data, req.timeout) {
        return Err(SocketError {
            writing: true,
            timed_out: timed_out(&e),
        });
    }
    let read_err = |e: io::Error| SocketError {
        writing: false,
        timed_out: timed_out(&e),
    };
    let auth_line = match &req.auth {
        Some(_) => Some(read_line(link, req.timeout).map_err(read_err)?),
        None => None,
    };
    let select_line = match select {
        true => Some(read_line(link, req.timeout).map_err(read_err)?),
        false => None,
    };
    let failed = |l: &Option<Vec<u8>>| l.as_ref().is_some_and(|l| l.first() == Some(&b'-'));
    let mut error: Option<Frame> = None;
    let mut accepted = Vec::new();
    for j in 0..req.restores.len() {
        let line = match read_line(link, req.timeout) {
            Ok(l) => l,
            Err(e) if j == 0 => return Err(read_err(e)),
            Err(e) => {
                let reply = error.unwrap_or_else(|| io_error(false));
                return Ok((Outcome { reply, accepted }, Some(read_err(e))));
            }
        };
        if failed(&auth_line) || failed(&select_line) || line.first() == Some(&b'-') {
            if error.is_none() {
                link.last_db = -1;
                let culprit = [&auth_line, &select_line]
                    .into_iter()
                    .flatten()
                    .find(|l| l.first() == Some(&b'-'))
                    .unwrap_or(&line);
                error = Some(target_error(culprit));
            }
        } else {
            accepted.push(j);
        }
    }
    let reply = match error {
        Some(e) => e,
        None => {
            link.last_db = req.db;
            Frame::ok()
        }
    };
    Ok((Outcome { reply, accepted }, None))
}

/// `IOERR error or timeout writing to target instance` (or `reading`), Redis's words.
fn io_error(writing: bool) -> Frame {
    Frame::error(format!(
        "IOERR error or timeout {} to target instance",
        if writing { "writing" } else { "reading" }
    ))
}

/// Runs one `MIGRATE`'s conversation with its target, for the server with this run id. Like
/// Redis, a socket error before any `RESTORE` reply that is not a timeout (typically a cached
/// connection the target closed) is retried once over a new connection.
pub(crate) fn run(run_id: &str, req: &Request) -> Outcome {
    let mut name = BytesMut::from(&req.host[..]);
    name.extend_from_slice(b":");
    name.extend_from_slice(&req.port);
    let name = name.freeze();
    let mut may_retry = true;
    loop {
        let mut link = match take_cached(run_id, &name) {
            Some(link) => Some(link),
            None => match connect(&req.host, &req.port, req.timeout) {
                Ok(link) => Some(link),
                // Redis connects without blocking and takes a socket that became writable
                // as connected: a refused connection shows up as a failed write.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => None,
                Err(_) => {
                    return Outcome {
                        reply: Frame::error("IOERR error or timeout connecting to the client"),
                        accepted: Vec::new(),
                    }
                }
            },
        };
        let tried = match link.as_mut() {
            Some(link) => attempt(req, link),
            None => Err(SocketError {
                writing: true,
                timed_out: false,
            }),
        };
        match tried {
            Ok((outcome, None)) => {
                if let Some(link) = link {
                    put_cached(run_id, name, link);
                }
                return outcome;
            }
            // The connection is dropped (closed) with the error.
            Ok((outcome, Some(_))) => return outcome,
            Err(e) if may_retry && !e.timed_out => may_retry = false,
            Err(e) => {
                return Outcome {
                    reply: io_error(e.writing),
                    accepted: Vec::new(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_reads_as_c_does() {
        assert_eq!(atoi(b"6379"), 6379);
        assert_eq!(atoi(b"  12ab"), 12);
        assert_eq!(atoi(b"-3"), -3);
        assert_eq!(atoi(b"x"), 0);
        assert_eq!(atoi(b""), 0);
    }

    #[test]
    fn a_target_error_is_quoted_up_to_a_nul() {
        let Frame::Error(e) = target_error(b"-BUSYKEY Target key\0 rest") else {
            panic!("not an error");
        };
        assert_eq!(
            &e[..],
            b"ERR Target instance replied with error: BUSYKEY Target key"
        );
    }
}
