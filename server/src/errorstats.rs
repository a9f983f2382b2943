//! Error statistics: `INFO errorstats` (`errorstat_<PREFIX>:count=N`, one line per error
//! prefix, in byte order) and `total_error_replies` in `INFO stats`, as Redis 7.0 counts them
//! in `afterErrorReply`; `CONFIG RESETSTAT` empties both.
//!
//! Every error reply counts once, under its prefix: the first word of the text when a space
//! comes within its first 31 bytes (`WRONGTYPE`, `NOSCRIPT`, `EXECABORT`, a script's own
//! `redis.error_reply("MY_CODE ...")`), else `ERR`. Which replies are counted, and where:
//!
//! - a command's reply to its client, including the refusals before it runs (unknown
//!   command, wrong arity, `OOM`, `READONLY`) and a blocked command's late error
//!   (`UNBLOCKED`) — counted by [`crate::dispatch::execute_spec`];
//! - each failed command inside `EXEC` (the errors inside its array reply), by `EXEC`;
//! - inside a script, each `redis.call`/`redis.pcall` that fails, when it fails: the error
//!   table handed to Lua then carries `ignore_error_stats_update = true` (as in Redis), and
//!   a script that ends with such a table, raised or returned (alone or inside an array), is
//!   not counted again. Any other error table a script replies with (a Lua error,
//!   `redis.error_reply`, `{err = ...}`), at any depth, counts. The script's run counts its
//!   reply's errors itself and tells the dispatcher so ([`crate::client::Client`]'s
//!   `error_counted`).
//!
//! Redis 7.0 tracks any number of prefixes. latchkey keeps at most [`MAX_PREFIXES`] (what
//! Redis 7.2 settled on): a script can make up a prefix per call, and the table must not grow
//! without bound. Errors with a prefix past that are still counted in `total_error_replies`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::frame::Frame;

/// The most distinct prefixes `INFO errorstats` lists.
pub(crate) const MAX_PREFIXES: usize = 128;

/// The counters (part of [`crate::state::Stats`]).
#[derive(Debug, Default)]
pub(crate) struct ErrorStats {
    total: AtomicU64,
    by_prefix: Mutex<BTreeMap<Vec<u8>, u64>>,
}

/// The prefix an error text counts under (see the module docs). Redis looks for the space
/// among the first 32 bytes of `-TEXT`, the dash included.
pub(crate) fn prefix(text: &[u8]) -> &[u8] {
    match text[..text.len().min(31)].iter().position(|b| *b == b' ') {
        Some(i) => &text[..i],
        None => b"ERR",
    }
}

impl ErrorStats {
    /// Counts one error reply with this text.
    pub(crate) fn count(&self, text: &[u8]) {
        self.total.fetch_add(1, Ordering::Relaxed);
        let p = prefix(text);
        let mut map = self.by_prefix.lock();
        if let Some(n) = map.get_mut(p) {
            *n += 1;
        } else if map.len() < MAX_PREFIXES {
            map.insert(p.to_vec(), 1);
        }
    }

    /// Counts a command's reply: an error counts, unless `already_counted` (a script counts
    /// the errors of its own reply itself).
    pub(crate) fn after_reply(&self, reply: &Frame, already_counted: bool) {
        if let Frame::Error(e) = reply {
            if !already_counted {
                self.count(e);
            }
        }
    }

    /// `total_error_replies`.
    pub(crate) fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// The body of `INFO errorstats`.
    pub(crate) fn info_section(&self) -> String {
        let mut out = String::new();
        for (p, n) in self.by_prefix.lock().iter() {
            let _ = write!(
                out,
                "errorstat_{}:count={n}\r\n",
                String::from_utf8_lossy(p)
            );
        }
        out
    }

    /// `CONFIG RESETSTAT`.
    pub(crate) fn reset(&self) {
        self.total.store(0, Ordering::Relaxed);
        self.by_prefix.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_redis_s() {
        assert_eq!(prefix(b"WRONGTYPE Operation"), b"WRONGTYPE");
        assert_eq!(prefix(b"ERR syntax error"), b"ERR");
        assert_eq!(prefix(b"NOSPACE"), b"ERR");
        assert_eq!(prefix(b""), b"ERR");
        // 31 bytes then a space: found; 32: not.
        assert_eq!(
            prefix(&[b"A".repeat(30), b" x".to_vec()].concat()),
            &b"A".repeat(30)[..]
        );
        assert_eq!(prefix(&[b"A".repeat(31), b" x".to_vec()].concat()), b"ERR");
    }

    #[test]
    fn prefixes_are_bounded() {
        let s = ErrorStats::default();
        for i in 0..MAX_PREFIXES + 10 {
            s.count(format!("P{i} x").as_bytes());
        }
        s.count(b"P0 again");
        assert_eq!(s.total(), MAX_PREFIXES as u64 + 11);
        let info = s.info_section();
        assert_eq!(info.lines().count(), MAX_PREFIXES);
        assert!(info.contains("errorstat_P0:count=2\r\n"));
        s.reset();
        assert_eq!((s.total(), s.info_section()), (0, String::new()));
    }
}
