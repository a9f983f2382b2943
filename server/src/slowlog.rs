//! The slow log (`SLOWLOG GET|LEN|RESET`): the commands whose handler took longer than
//! `slowlog-log-slower-than` microseconds (0: every command; negative: none), newest first,
//! at most `slowlog-max-len` of them, as Redis 7.0 keeps it. The two parameters live in
//! [`crate::config::Config`] (`slowlog_is_slow`, `slowlog_max_len`); this module keeps the
//! entries.
//!
//! An entry is `[id, unix time in seconds, microseconds, arguments, "ip:port", client name]`.
//! The arguments are the client's own (a command rewritten for the replicas, `SPOP` into
//! `SREM`, is logged as sent), cut as Redis cuts them so that a huge command cannot make a
//! huge log: at most [`MAX_ARGS`] arguments, the last saying how many more there were, and
//! each at most [`MAX_ARG_BYTES`] bytes, saying how many more bytes it had. The log itself is
//! bounded by `slowlog-max-len`; an entry is built only for a command that was slow.
//!
//! `EXEC` is not logged, the commands it ran are (each its own entry); a blocking command is
//! logged once it is served or times out, with the time its handler took, not the time it
//! waited.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::frame::Frame;

/// The most arguments an entry keeps (the last of them then says how many were left out).
pub(crate) const MAX_ARGS: usize = 32;
/// The most bytes an argument keeps (then followed by how many were left out).
pub(crate) const MAX_ARG_BYTES: usize = 128;

/// One logged command.
#[derive(Debug, Clone)]
struct Entry {
    id: u64,
    unix_s: u64,
    usec: u64,
    args: Vec<Bytes>,
    addr: Bytes,
    name: Bytes,
}

/// A server's slow log (part of [`crate::state::Stats`]).
#[derive(Debug, Default)]
pub(crate) struct SlowLog {
    next_id: AtomicU64,
    entries: Mutex<VecDeque<Entry>>,
}

/// Who ran a logged command, as `SLOWLOG GET` shows them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caller<'a> {
    /// `ip:port` of a network client, empty for an in-process one.
    pub(crate) addr: &'a [u8],
    /// The name set with `CLIENT SETNAME`, empty when none.
    pub(crate) name: &'a [u8],
}

impl SlowLog {
    /// Logs a slow command, ran at `unix_ms`, keeping the newest `max_len` entries.
    pub(crate) fn push(
        &self,
        args: &[Bytes],
        usec: u64,
        unix_ms: u64,
        caller: Caller<'_>,
        max_len: u64,
    ) {
        let entry = Entry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            unix_s: unix_ms / 1000,
            usec,
            args: trimmed(args),
            addr: Bytes::copy_from_slice(caller.addr),
            name: Bytes::copy_from_slice(caller.name),
        };
        let mut entries = self.entries.lock();
        entries.push_front(entry);
        entries.truncate(usize::try_from(max_len).unwrap_or(usize::MAX));
    }

    /// How many entries the log holds (`SLOWLOG LEN`), at most `max_len` (a lowered
    /// `slowlog-max-len` drops the oldest entries here, as Redis drops them at once).
    pub(crate) fn len(&self, max_len: u64) -> usize {
        let mut entries = self.entries.lock();
        entries.truncate(usize::try_from(max_len).unwrap_or(usize::MAX));
        entries.len()
    }

    /// Empties the log (`SLOWLOG RESET`); ids go on from where they were, as in Redis.
    pub(crate) fn reset(&self) {
        self.entries.lock().clear();
    }

    /// The newest `count` entries (all of them when `None`) of the newest `max_len`, as
    /// `SLOWLOG GET` replies.
    pub(crate) fn get(&self, count: Option<usize>, max_len: u64) -> Frame {
        let mut entries = self.entries.lock();
        entries.truncate(usize::try_from(max_len).unwrap_or(usize::MAX));
        let n = count.map_or(entries.len(), |c| c.min(entries.len()));
        Frame::Array(
            entries
                .iter()
                .take(n)
                .map(|e| {
                    Frame::Array(vec![
                        Frame::Integer(e.id as i64),
                        Frame::Integer(e.unix_s as i64),
                        Frame::Integer(e.usec as i64),
                        Frame::Array(e.args.iter().cloned().map(Frame::Bulk).collect()),
                        Frame::Bulk(e.addr.clone()),
                        Frame::Bulk(e.name.clone()),
                    ])
                })
                .collect(),
        )
    }
}

/// The arguments with the secrets in them replaced by `(redacted)`, as Redis's
/// `redactClientCommandArgument` does: `AUTH`'s, `HELLO ... AUTH`'s, every argument of
/// `ACL SETUSER` after the subcommand, and the value of a `CONFIG SET` of `requirepass`,
/// `masterauth` or `masteruser`.
fn redacted(args: &[Bytes]) -> Vec<Bytes> {
    let hidden = || Bytes::from_static(b"(redacted)");
    let mut out = args.to_vec();
    let name = args.first().map(|n| n.to_ascii_lowercase());
    match name.as_deref() {
        Some(b"auth") => out.iter_mut().skip(1).for_each(|a| *a = hidden()),
        Some(b"hello") => {
            let mut i = 2;
            while i < out.len() {
                if out[i].eq_ignore_ascii_case(b"auth") && i + 2 < out.len() {
                    out[i + 1] = hidden();
                    out[i + 2] = hidden();
                    i += 3;
                } else {
                    i += 1;
                }
            }
        }
        Some(b"acl")
            if args
                .get(1)
                .is_some_and(|s| s.eq_ignore_ascii_case(b"setuser")) =>
        {
            out.iter_mut().skip(2).for_each(|a| *a = hidden())
        }
        Some(b"config") if args.get(1).is_some_and(|s| s.eq_ignore_ascii_case(b"set")) => {
            let mut i = 2;
            while i + 1 < out.len() {
                let secret = [&b"requirepass"[..], b"masterauth", b"masteruser"]
                    .iter()
                    .any(|n| out[i].eq_ignore_ascii_case(n));
                if secret {
                    out[i + 1] = hidden();
                }
                i += 2;
            }
        }
        _ => {}
    }
    out
}

/// The arguments as an entry keeps them (see the module docs).
fn trimmed(args: &[Bytes]) -> Vec<Bytes> {
    let args = &redacted(args)[..];
    let kept = args.len().min(MAX_ARGS);
    let mut out = Vec::with_capacity(kept);
    for (i, a) in args.iter().take(kept).enumerate() {
        if i == MAX_ARGS - 1 && args.len() > MAX_ARGS {
            let more = args.len() - MAX_ARGS + 1;
            out.push(Bytes::from(format!("... ({more} more arguments)")));
        } else if a.len() > MAX_ARG_BYTES {
            let mut cut = a[..MAX_ARG_BYTES].to_vec();
            cut.extend_from_slice(
                format!("... ({} more bytes)", a.len() - MAX_ARG_BYTES).as_bytes(),
            );
            out.push(Bytes::from(cut));
        } else {
            out.push(Bytes::copy_from_slice(a));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<Bytes> {
        v.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn long_commands_and_arguments_are_cut_as_redis_cuts_them() {
        let many: Vec<String> = (0..35).map(|i| i.to_string()).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let t = trimmed(&args(&many));
        assert_eq!(t.len(), MAX_ARGS);
        assert_eq!(t[30], "30");
        assert_eq!(t[31], "... (4 more arguments)");
        let long = "A".repeat(129);
        let t = trimmed(&args(&["sadd", "set", &long]));
        assert_eq!(t[2], format!("{}... (1 more bytes)", "A".repeat(128)));
        let exactly = args(&["a"; 32]);
        assert_eq!(trimmed(&exactly), exactly);
    }

    #[test]
    fn secrets_never_reach_the_log() {
        assert_eq!(
            trimmed(&args(&["AUTH", "user", "pw"])),
            args(&["AUTH", "(redacted)", "(redacted)"])
        );
        assert_eq!(
            trimmed(&args(&["hello", "3", "AUTH", "u", "p", "SETNAME", "n"])),
            args(&[
                "hello",
                "3",
                "AUTH",
                "(redacted)",
                "(redacted)",
                "SETNAME",
                "n"
            ])
        );
        assert_eq!(
            trimmed(&args(&[
                "config",
                "set",
                "maxmemory",
                "1",
                "REQUIREPASS",
                "pw"
            ])),
            args(&[
                "config",
                "set",
                "maxmemory",
                "1",
                "REQUIREPASS",
                "(redacted)"
            ])
        );
    }

    #[test]
    fn the_log_keeps_the_newest_up_to_its_length() {
        let log = SlowLog::default();
        let caller = Caller {
            addr: b"127.0.0.1:1",
            name: b"",
        };
        for i in 0..5 {
            log.push(&args(&["ping", &i.to_string()]), 1, 1000, caller, 3);
        }
        assert_eq!(log.len(3), 3);
        let Frame::Array(got) = log.get(Some(1), 3) else {
            panic!("an array")
        };
        let Frame::Array(first) = &got[0] else {
            panic!("an entry")
        };
        assert_eq!(first[0], Frame::Integer(4));
        assert_eq!(log.len(1), 1);
        log.reset();
        assert_eq!(log.len(3), 0);
    }
}
