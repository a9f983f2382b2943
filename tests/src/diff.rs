//! Differential testing: the same commands to a real `redis-server` and to latchkey, with
//! every reply compared byte for byte.

use latchkey_server::BlockingServer;

use crate::raw::{show, RawConn};
use crate::redis_proc::RedisProcess;

/// A pair of servers, one connection to each, fed identical commands.
pub struct Diff {
    /// The real Redis.
    pub redis_proc: RedisProcess,
    /// latchkey, on its own runtime, over TCP.
    pub latchkey_server: BlockingServer,
    /// Connection to real Redis.
    pub redis: RawConn,
    /// Connection to latchkey.
    pub latchkey: RawConn,
}

impl Default for Diff {
    fn default() -> Self {
        Self::new()
    }
}

impl Diff {
    /// Starts both servers and connects to each.
    pub fn new() -> Diff {
        Diff::with_redis_args(&[])
    }

    /// Like [`Diff::new`], with extra `redis-server` arguments (e.g. `--enable-debug-command
    /// yes` for a test of `DEBUG`, which Redis 7 refuses by default).
    pub fn with_redis_args(args: &[&str]) -> Diff {
        let latchkey_server = latchkey_server::Server::builder()
            .start_blocking()
            .expect("start latchkey");
        Diff::of(RedisProcess::spawn(args), latchkey_server)
    }

    /// Both servers as the caller started them (a latchkey with its own configuration, say),
    /// each with a connection.
    pub fn of(redis_proc: RedisProcess, latchkey_server: BlockingServer) -> Diff {
        let redis = RawConn::connect(redis_proc.addr()).expect("connect redis");
        let latchkey = RawConn::connect(latchkey_server.addr()).expect("connect latchkey");
        Diff {
            redis_proc,
            latchkey_server,
            redis,
            latchkey,
        }
    }

    /// Sends `args` to both and returns both replies `(redis, latchkey)` without comparing.
    pub fn both<A: AsRef<[u8]>>(&mut self, args: &[A]) -> (Vec<u8>, Vec<u8>) {
        (self.redis.cmd(args), self.latchkey.cmd(args))
    }

    /// Sends `args` to both and asserts the replies are identical, byte for byte; returns the
    /// reply.
    #[track_caller]
    pub fn check<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        let (r, l) = self.both(args);
        assert!(
            l == r,
            "reply differs for {}\n  redis:    {}\n  latchkey: {}",
            show_args(args),
            show(&r),
            show(&l)
        );
        r
    }

    /// Like [`Diff::check`] for a reply that carries a remaining TTL, read in separate
    /// commands on the two servers while real time moves: the RESP line number `ttl_line` of
    /// the reply (0 is the first line: the whole reply when it is an integer; 1 is the first
    /// element of an array) may differ by up to `tolerance` when it is an integer in both.
    /// Every other byte must be the same, and when the replies are not integers there, they
    /// must be identical.
    #[track_caller]
    pub fn check_ttl<A: AsRef<[u8]>>(
        &mut self,
        args: &[A],
        ttl_line: usize,
        tolerance: i64,
    ) -> Vec<u8> {
        let (r, l) = self.both(args);
        assert!(
            r == l || ttl_within(&r, &l, ttl_line, tolerance),
            "reply differs for {} (tolerance {tolerance} on line {ttl_line} only)\n  \
             redis:    {}\n  latchkey: {}",
            show_args(args),
            show(&r),
            show(&l)
        );
        r
    }

    /// Checks each line of a table, one command a line, its arguments split as `redis-cli`
    /// splits a line: on whitespace, except inside single or double quotes (`SET s 'a b'` is
    /// three arguments, `SETRANGE s 0 ''` sends an empty one). Use [`Diff::check`] for binary
    /// bytes.
    #[track_caller]
    pub fn table(&mut self, lines: &[&str]) {
        for line in lines {
            let args = split_args(line);
            if !args.is_empty() {
                self.check(&args);
            }
        }
    }

    /// Sends raw bytes to both and compares the next reply of each (send nothing to compare
    /// a reply that is still due, such as the second confirmation of `SUBSCRIBE a b`).
    #[track_caller]
    pub fn check_raw(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.redis.send_raw(bytes);
        self.latchkey.send_raw(bytes);
        let r = self.redis.read_reply();
        let l = self.latchkey.read_reply();
        assert!(
            l == r,
            "reply differs for raw {}\n  redis:    {}\n  latchkey: {}",
            show(bytes),
            show(&r),
            show(&l)
        );
        r
    }
}

/// Splits a table line into arguments: whitespace separates them, except inside single or
/// double quotes; panics on an unbalanced quote (a broken table line, not a test of one).
pub fn split_args(line: &str) -> Vec<String> {
    shlex::split(line).unwrap_or_else(|| panic!("unbalanced quotes in table line {line:?}"))
}

/// Whether `r` and `l` differ only on RESP line `ttl_line`, where both are integers at most
/// `tolerance` apart.
fn ttl_within(r: &[u8], l: &[u8], ttl_line: usize, tolerance: i64) -> bool {
    same_but_near_integers(r, l, tolerance, |i| i == ttl_line)
}

/// Whether two replies are the same RESP lines, except integer lines (`:n`) at most
/// `tolerance` apart on the lines `may_differ` names (by their index): for the fields that
/// are times (a remaining TTL, an idle time), and only for them.
pub fn same_but_near_integers(
    r: &[u8],
    l: &[u8],
    tolerance: i64,
    may_differ: impl Fn(usize) -> bool,
) -> bool {
    let rl: Vec<&[u8]> = r.split(|&b| b == b'\n').collect();
    let ll: Vec<&[u8]> = l.split(|&b| b == b'\n').collect();
    let int = |line: &[u8]| -> Option<i64> {
        std::str::from_utf8(line.strip_prefix(b":")?.strip_suffix(b"\r")?)
            .ok()?
            .parse()
            .ok()
    };
    rl.len() == ll.len()
        && rl.iter().zip(&ll).enumerate().all(|(i, (a, b))| {
            a == b
                || (may_differ(i)
                    && matches!((int(a), int(b)), (Some(x), Some(y)) if (x - y).abs() <= tolerance))
        })
}

/// The arguments of a command, readably, for assertion messages.
fn show_args<A: AsRef<[u8]>>(args: &[A]) -> String {
    let shown: Vec<String> = args.iter().map(|a| show(a.as_ref())).collect();
    format!("{shown:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_arguments_stay_whole() {
        assert_eq!(
            split_args("SET s 'Hello World'"),
            ["SET", "s", "Hello World"]
        );
        assert_eq!(split_args("SET n ' 1'"), ["SET", "n", " 1"]);
        assert_eq!(split_args("SETRANGE s 0 ''"), ["SETRANGE", "s", "0", ""]);
        assert_eq!(split_args(r#"ECHO "a b""#), ["ECHO", "a b"]);
        assert_eq!(split_args("  GET   k "), ["GET", "k"]);
    }

    #[test]
    fn only_the_ttl_line_has_a_tolerance() {
        assert!(ttl_within(b":29990\r\n", b":30000\r\n", 0, 50));
        assert!(!ttl_within(b":29900\r\n", b":30000\r\n", 0, 50));
        // 3 against 30: not a TTL line, no tolerance.
        assert!(!ttl_within(
            b"*2\r\n:3\r\n:5\r\n",
            b"*2\r\n:30\r\n:5\r\n",
            2,
            50
        ));
        assert!(ttl_within(
            b"*2\r\n:990\r\n:-1\r\n",
            b"*2\r\n:1000\r\n:-1\r\n",
            1,
            50
        ));
        assert!(!ttl_within(
            b"*2\r\n:1000\r\n:-1\r\n",
            b"*2\r\n:1000\r\n:-2\r\n",
            1,
            50
        ));
        // Not integers on the TTL line: no tolerance either.
        assert!(!ttl_within(b"$2\r\n", b"$3\r\n", 0, 50));
    }
}
