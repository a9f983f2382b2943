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

/// Appends to `out` what a write command that just ran becomes in the stream: its effect,
/// with relative expiries made absolute, so a replica applying it later reaches the same
/// state (`SET k v PXAT t`, `PEXPIREAT k t`, or `DEL k` for a key that is gone); the command
/// itself for the rest; nothing for scripts and transactions, whose inner writes were fed
/// as they ran (wrapped in `MULTI`/`EXEC` when more than one, see `unit`). Reads the key's
/// new state in place, without copying its value.
pub(crate) fn encode_effects(
    shared: &Shared,
    db: usize,
    command: &str,
    args: &[Bytes],
    out: &mut BytesMut,
) {
    let key: &[u8] = args.get(1).map_or(&[], |k| &k[..]);
    let mut n = itoa::Buffer::new();
    match command {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "exec" => {}
        "set" | "setex" | "psetex" | "getset" | "setnx" => {
            let entry = shared.keyspace.db(db).get(key, 0, false);
            match entry.as_deref().map(|e| (&e.value, e.expires_at())) {
                Some((Value::Str(v), Some(t))) => encode(
                    &[&b"SET"[..], key, &v[..], b"PXAT", n.format(t).as_bytes()],
                    out,
                ),
                Some((Value::Str(v), None)) => encode(&[&b"SET"[..], key, &v[..]], out),
                _ => encode(&[&b"DEL"[..], key], out),
            }
        }
        "expire" | "pexpire" | "expireat" | "pexpireat" | "getex" | "persist" => {
            let expiry = shared
                .keyspace
                .db(db)
                .get(key, 0, false)
                .map(|e| e.expires_at());
            match expiry {
                Some(Some(t)) => encode(&[&b"PEXPIREAT"[..], key, n.format(t).as_bytes()], out),
                Some(None) => encode(&[&b"PERSIST"[..], key], out),
                // A time in the past deleted the key: Redis sends `UNLINK` when expired
                // values are freed lazily (`lazyfree-lazy-expire yes`), `DEL` otherwise.
                None if shared.config.limits.lazy_expire() => encode(&[&b"UNLINK"[..], key], out),
                None => encode(&[&b"DEL"[..], key], out),
            }
        }
        _ => encode(args, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Server;

    /// The stream carries a write's effect, encoded once: relative expiries made absolute,
    /// a key that is gone as `DEL`, other commands as they were sent, scripts as nothing.
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
        assert_eq!(
            effect(&["persist", "k"]),
            "*2\r\n$7\r\nPERSIST\r\n$1\r\nk\r\n"
        );
        assert_eq!(
            effect(&["SET", "gone", "x"]),
            "*2\r\n$3\r\nDEL\r\n$4\r\ngone\r\n"
        );
        assert_eq!(
            effect(&["hset", "h", "f", "v"]),
            "*4\r\n$4\r\nhset\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\nv\r\n"
        );
        assert_eq!(effect(&["evalsha", "x", "0"]), "");
    }
}
