//! How a write propagates: every change the keyspace takes is encoded once and handed to
//! the append-only file and to the replication stream (which feeds the backlog and every
//! replica), in the order the keyspace took it.
//!
//! Commands call [`Shared::after_write`] once they changed something; the expiry cycle, lazy
//! expiry and eviction call [`Shared::propagate_expired`] for the keys they deleted. Whoever
//! changes the keyspace under the shared gate holds [`Shared::order_guard`] from the change
//! until it is recorded. A script, a function or `EXEC` that wrote more than once goes out
//! between `MULTI` and `EXEC`, as in Redis 7.0 (`unit`).

use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};

use crate::codec::{encode, stream_chunk};
use crate::db::Value;
use crate::state::Shared;

mod unit;

impl Shared {
    /// The stream-order lock, while writes are recorded anywhere: fed to replicas or a
    /// backlog, or appended to the AOF (else `None`, at no cost). Whoever changes the keyspace
    /// under the *shared* gate and records the change (a write on the fast path, a read that
    /// expired a key, the expiry cycle, a woken `BLPOP`) holds it from the change until the
    /// change is recorded. So the replicas, the backlog a returning replica continues from,
    /// and the AOF a restart replays all get the keyspace's order: two clients' `SET`s of one
    /// key are recorded in the order they were applied. It is re-entrant: a write that holds
    /// it may expire keys and record them under it.
    pub(crate) fn order_guard(&self) -> Option<parking_lot::ReentrantMutexGuard<'_, ()>> {
        self.records_writes().then(|| self.replication.lock_order())
    }

    /// Whether writes are recorded anywhere: fed to replicas or a backlog, or appended to
    /// the AOF. A few atomic loads and no lock, so that a write on a server that
    /// records nothing (no replica, no backlog, no AOF: the common embedded case) pays almost
    /// nothing to find out.
    #[inline]
    pub(crate) fn records_writes(&self) -> bool {
        self.aof.is_open() || self.replication.feeds_stream()
    }

    /// Called after a command (`command`: its lowercase name) changed something: counts the
    /// change and feeds its effect to the AOF and the replicas. Returns the replication offset after it (what `WAIT` waits for).
    #[inline]
    pub(crate) fn after_write(&self, db: usize, command: &str, args: &[Bytes], dirty: u64) -> u64 {
        self.stats.dirty.fetch_add(dirty, Ordering::Relaxed);
        if !self.records_writes() {
            return self.replication.offset();
        }
        self.record_write(db, command, args)
    }

    /// The part of [`after_write`](Shared::after_write) that runs only when something
    /// records writes. Kept out of line: every write command's path runs through
    /// `after_write`, and on a server that records nothing this code would only take room
    /// in the instruction cache that the write path needs (issue 17: a pipelined `SET`
    /// missed that cache several times more often than a `GET`).
    #[inline(never)]
    fn record_write(&self, db: usize, command: &str, args: &[Bytes]) -> u64 {
        let aof = self.aof.read();
        if !self.replication.feeds_stream() && aof.is_none() {
            return self.replication.offset();
        }
        // Encoded once; the AOF writes these bytes, and the backlog and every replica share
        // them.
        let effects = stream_chunk(|out| encode_effects(self, db, command, args, out));
        if effects.is_empty() {
            return self.replication.offset();
        }
        // Inside a script or `EXEC`, the unit decides (see `unit`).
        if let Some(offset) = unit::route(self, aof.as_ref(), db, &effects) {
            return offset;
        }
        if let Some(aof) = aof.as_ref() {
            aof.append_encoded(db, &effects);
        }
        self.replication.feed_encoded(db, effects)
    }

    /// [`after_write`](Shared::after_write) for a command that propagates as other commands
    /// (see [`crate::command::Ctx::propagate_as`]): those go to the AOF and the replicas as
    /// they are.
    pub(crate) fn after_write_as(&self, db: usize, commands: &[Vec<Bytes>], dirty: u64) -> u64 {
        self.stats.dirty.fetch_add(dirty, Ordering::Relaxed);
        let aof = self.aof.read();
        if !self.replication.feeds_stream() && aof.is_none() {
            return self.replication.offset();
        }
        // Inside a script or `EXEC`, each command is one write of the unit, as Redis's
        // `alsoPropagate` adds each to the transaction it sends (see `unit`).
        if unit::is_open() {
            let mut offset = self.replication.offset();
            for c in commands {
                let chunk = stream_chunk(|out| encode(c, out));
                offset = unit::route(self, aof.as_ref(), db, &chunk).unwrap_or(offset);
            }
            return offset;
        }
        let effects = stream_chunk(|out| {
            for c in commands {
                encode(c, out);
            }
        });
        if let Some(aof) = aof.as_ref() {
            aof.append_encoded(db, &effects);
        }
        self.replication.feed_encoded(db, effects)
    }

    /// Called after keys expired (the expiry cycle's, or those a read found expired):
    /// replicas and the AOF receive a `DEL` for each, since replicas never expire keys
    /// themselves. The whole batch is encoded once, as one chunk that the AOF writes and the
    /// replicas share. The caller holds [`order_guard`](Shared::order_guard).
    pub(crate) fn propagate_expired(&self, db: usize, keys: &[Bytes]) {
        let aof = self.aof.read();
        let feeds = self.replication.feeds_stream();
        if keys.is_empty() || (!feeds && aof.is_none()) {
            return;
        }
        // Redis's `propagateDeletion`: an `UNLINK` when expired values are freed lazily.
        let verb: &[u8] = if self.config.limits.lazy_expire() {
            b"UNLINK"
        } else {
            b"DEL"
        };
        let dels = stream_chunk(|out| {
            for k in keys {
                encode(&[verb, &k[..]], out);
            }
        });
        // Keys a script or `EXEC` found expired belong to its transaction, as in Redis 7.0.
        if unit::route(self, aof.as_ref(), db, &dels).is_some() {
            return;
        }
        if let Some(aof) = aof.as_ref() {
            aof.append_encoded(db, &dels);
        }
        if feeds {
            self.replication.feed_encoded(db, dels);
        }
    }

    /// Called after each command: the keys its reads found expired and deleted (lazy
    /// expiry) go to the replicas and the AOF as `DEL`s, as the expiry cycle's do, and count
    /// in `expired_keys`. Runs before the command's own effects are fed, so a write that
    /// recreates such a key reaches the replicas after its `DEL`.
    pub(crate) fn propagate_lazy_expired(&self) {
        self.announce_expired();
        if !self.keyspace.may_have_lazily_expired() {
            return;
        }
        for (i, db) in self.keyspace.iter() {
            if !db.may_have_lazily_expired() {
                continue;
            }
            // Taken, then fed, in stream order: a write that recreated one of these keys
            // meanwhile drains them itself, under the same lock, before feeding its own effect.
            let _order = self.order_guard();
            let gone = db.take_lazily_expired();
            if gone.is_empty() {
                continue;
            }
            self.stats
                .expired_keys
                .fetch_add(gone.len() as u64, Ordering::Relaxed);
            self.propagate_expired(i, &gone);
        }
    }
}

/// Appends to `out` what a write command that just ran becomes in the stream, byte for byte
/// as Redis 7.0 propagates it: the command as the client sent it (its name's case kept), except
/// where Redis rewrites it so that a replica applying it later, or an AOF replayed at a start,
/// reaches the same state. Those rewrites (Redis's `rewriteClientCommandVector`):
///
/// - a relative or absolute expiry becomes an absolute one in milliseconds: `SET k v EX 10 NX`
///   (or `PX`, `EXAT`, `PXAT`, with any other option), `SETEX` and `PSETEX` become
///   `SET k v PXAT t`; `EXPIRE`, `PEXPIRE` and `EXPIREAT` become `PEXPIREAT k t` with their
///   `NX`/`XX`/`GT`/`LT` kept; `GETEX k EX 10` becomes `PEXPIREAT k t`, `GETEX k PERSIST`
///   `PERSIST k`; an expiry already past, which deleted the key, becomes `DEL k` (`UNLINK k`
///   under `lazyfree-lazy-expire yes`);
/// - `SET ... GET` loses its `GET`s, `GETSET k v` becomes `SET k v`, `GETDEL k` `DEL k`;
/// - the float increments become the value they stored: `INCRBYFLOAT` as `SET k v KEEPTTL`,
///   `HINCRBYFLOAT` as `HSET k f v` (a replica must not round differently);
/// - scripts and transactions are nothing here: their inner writes were fed as they ran
///   (wrapped in `MULTI`/`EXEC` when more than one, see `unit`).
///
/// The absolute deadline is read back from the key (without touching its LRU clock, and even
/// if it has already passed), so it is exactly the one the command stored.
pub(crate) fn encode_effects(
    shared: &Shared,
    db: usize,
    command: &str,
    args: &[Bytes],
    out: &mut BytesMut,
) {
    let key: &[u8] = args.get(1).map_or(&[], |k| &k[..]);
    let mut n = itoa::Buffer::new();
    // The key's deadline as the command left it: `None` for no key, `Some(None)` for no TTL.
    // (`now` 0 reads the entry whatever its deadline, and leaves its access time alone.)
    let deadline = || {
        shared
            .keyspace
            .db(db)
            .get(key, 0, false)
            .map(|e| e.expires_at())
    };
    // What Redis sends for a key an expiry in the past deleted.
    let deleted: &[u8] = if shared.config.limits.lazy_expire() {
        b"UNLINK"
    } else {
        b"DEL"
    };
    match command {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "exec" => {}
        "set" => {
            if !set_has_expiry(args) {
                // Without an expiry: as sent, less any `GET` (an option only from the fourth
                // argument on, so a key or a value named `get` stays).
                let kept: Vec<&[u8]> = args
                    .iter()
                    .enumerate()
                    .filter(|(i, a)| *i < 3 || !a.eq_ignore_ascii_case(b"get"))
                    .map(|(_, a)| &a[..])
                    .collect();
                encode(&kept, out);
                return;
            }
            set_pxat(key, &args[2], deadline(), out);
        }
        "setex" | "psetex" => set_pxat(key, &args[3], deadline(), out),
        "getset" => {
            let mut renamed: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
            renamed[0] = b"SET";
            encode(&renamed, out);
        }
        // Redis sends `UNLINK` here only under `lazyfree-lazy-user-del yes`, a parameter
        // latchkey does not have (its default is `no`).
        "getdel" => encode(&[&b"DEL"[..], key], out),
        "getex" => match deadline() {
            Some(Some(t)) => encode(&[&b"PEXPIREAT"[..], key, n.format(t).as_bytes()], out),
            Some(None) => encode(&[&b"PERSIST"[..], key], out),
            None => encode(&[deleted, key], out),
        },
        "expire" | "pexpire" | "expireat" | "pexpireat" => match deadline() {
            // `PEXPIREAT` with a time in milliseconds since the epoch: as sent.
            Some(Some(_)) if command == "pexpireat" => encode(args, out),
            Some(Some(t)) => {
                let mut rewritten: Vec<&[u8]> = args.iter().map(|a| &a[..]).collect();
                rewritten[0] = b"PEXPIREAT";
                rewritten[2] = n.format(t).as_bytes();
                encode(&rewritten, out);
            }
            // On a replica an expiry in the past leaves the key (the master's `DEL` comes),
            // with its time as sent; a key with no deadline cannot follow a change of it.
            Some(None) => encode(args, out),
            None => encode(&[deleted, key], out),
        },
        "incrbyfloat" => {
            let entry = shared.keyspace.db(db).get(key, 0, false);
            match entry.as_deref().map(|e| &e.value) {
                Some(Value::Str(v)) => encode(&[&b"SET"[..], key, &v[..], b"KEEPTTL"], out),
                _ => encode(args, out),
            }
        }
        "hincrbyfloat" => {
            let entry = shared.keyspace.db(db).get(key, 0, false);
            let field = args.get(2).map_or(&[][..], |f| &f[..]);
            match entry.as_deref().map(|e| &e.value) {
                Some(Value::Hash(h)) => match h.get(field) {
                    Some(v) => encode(&[&b"HSET"[..], key, field, &v[..]], out),
                    None => encode(args, out),
                },
                _ => encode(args, out),
            }
        }
        _ => encode(args, out),
    }
}

/// Whether a `SET` was given an expiry (`EX`, `PX`, `EXAT` or `PXAT`, from its fourth argument
/// on): Redis then propagates it as `SET k v PXAT t` whatever its other options.
fn set_has_expiry(args: &[Bytes]) -> bool {
    args.iter().skip(3).any(|a| {
        [&b"ex"[..], b"px", b"exat", b"pxat"]
            .iter()
            .any(|o| a.eq_ignore_ascii_case(o))
    })
}

/// `SET key value PXAT t`, what a `SET` with an expiry, `SETEX` and `PSETEX` propagate
/// (`deadline`: the key's, read back after the write).
fn set_pxat(key: &[u8], value: &[u8], deadline: Option<Option<u64>>, out: &mut BytesMut) {
    let mut n = itoa::Buffer::new();
    match deadline {
        Some(Some(t)) => encode(
            &[&b"SET"[..], key, value, b"PXAT", n.format(t).as_bytes()],
            out,
        ),
        // Not reached: the command just stored the key with that deadline, under the
        // stream-order lock. Kept total rather than trusted.
        Some(None) => encode(&[&b"SET"[..], key, value], out),
        None => encode(&[&b"DEL"[..], key], out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Server;

    /// The stream carries a write's effect, encoded once: relative expiries made absolute,
    /// `GET` dropped from a `SET`, `GETSET` as `SET`, other commands as they were sent (their
    /// case kept), scripts as nothing.
    #[tokio::test]
    async fn effects_are_encoded_as_the_stream_carries_them() {
        let server = Server::builder()
            .virtual_clock()
            .no_listener()
            .start()
            .await
            .unwrap();
        let shared = server.shared().clone();
        let mut c = server.client();
        let now = server.clock().now_ms();
        let effect = |args: &[&str]| {
            let args: Vec<Bytes> = args
                .iter()
                .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                .collect();
            let spec = crate::command::lookup(&args[0]).unwrap();
            let chunk = stream_chunk(|out| encode_effects(&shared, 0, spec.name, &args, out));
            String::from_utf8(chunk.to_vec()).unwrap()
        };
        c.cmd(["SET", "k", "v", "PX", "30000"]).await;
        let at = (now + 30000).to_string();
        assert_eq!(
            effect(&["set", "k", "v", "PX", "30000"]),
            format!(
                "*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$4\r\nPXAT\r\n${}\r\n{at}\r\n",
                at.len()
            )
        );
        c.cmd(["PERSIST", "k"]).await;
        // Not rewritten: as the client sent it, its case kept.
        assert_eq!(
            effect(&["persist", "k"]),
            "*2\r\n$7\r\npersist\r\n$1\r\nk\r\n"
        );
        c.cmd(["set", "k", "v", "nx", "get"]).await;
        assert_eq!(
            effect(&["set", "k", "v", "xx", "get"]),
            "*4\r\n$3\r\nset\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nxx\r\n"
        );
        c.cmd(["GETSET", "k", "w"]).await;
        assert_eq!(
            effect(&["getset", "k", "w"]),
            "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nw\r\n"
        );
        c.cmd(["EXPIRE", "k", "10", "NX"]).await;
        let at = (now + 10000).to_string();
        assert_eq!(
            effect(&["expire", "k", "10", "NX"]),
            format!(
                "*4\r\n$9\r\nPEXPIREAT\r\n$1\r\nk\r\n${}\r\n{at}\r\n$2\r\nNX\r\n",
                at.len()
            )
        );
        assert_eq!(
            effect(&["hset", "h", "f", "v"]),
            "*4\r\n$4\r\nhset\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\nv\r\n"
        );
        assert_eq!(effect(&["evalsha", "x", "0"]), "");
    }
}
