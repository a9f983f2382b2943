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
        let redis_proc = RedisProcess::spawn(&[]);
        let latchkey_server = latchkey_server::Server::builder()
            .start_blocking()
            .expect("start latchkey");
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

    /// Sends `args` to both and asserts the replies are identical; returns the reply.
    #[track_caller]
    pub fn check<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        let (r, l) = self.both(args);
        assert_eq!(
            show(&l),
            show(&r),
            "reply differs for {:?}\n  redis:    {}\n  latchkey: {}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a.as_ref()).into_owned())
                .collect::<Vec<_>>(),
            show(&r),
            show(&l)
        );
        r
    }

    /// Like [`Diff::check`], but integer replies (top-level or inside arrays) may differ by up to
    /// `tolerance` — for TTLs read in separate commands, which real time moves between the two
    /// servers.
    #[track_caller]
    pub fn check_approx<A: AsRef<[u8]>>(&mut self, args: &[A], tolerance: i64) -> Vec<u8> {
        let (r, l) = self.both(args);
        let (rs, ls) = (show(&r), show(&l));
        let rl: Vec<&str> = rs.split("\\r\\n").collect();
        let ll: Vec<&str> = ls.split("\\r\\n").collect();
        let close = rl.len() == ll.len()
            && rl.iter().zip(&ll).all(|(a, b)| {
                a == b
                    || match (a.strip_prefix(':'), b.strip_prefix(':')) {
                        (Some(x), Some(y)) => match (x.parse::<i64>(), y.parse::<i64>()) {
                            (Ok(x), Ok(y)) => (x - y).abs() <= tolerance,
                            _ => false,
                        },
                        _ => false,
                    }
            });
        assert!(
            close,
            "reply differs for {:?}\n  redis:    {rs}\n  latchkey: {ls}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a.as_ref()).into_owned())
                .collect::<Vec<_>>()
        );
        r
    }

    /// Checks each line of a table: whitespace-separated words (use [`Diff::check`] for
    /// arguments with spaces or binary bytes).
    #[track_caller]
    pub fn table(&mut self, lines: &[&str]) {
        for line in lines {
            let args: Vec<&str> = line.split_whitespace().collect();
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
        assert_eq!(
            show(&l),
            show(&r),
            "reply differs for raw {:?}",
            show(bytes)
        );
        r
    }
}
