//! Freeing big values off the hot path.
//!
//! Dropping a hash of a million fields, a long list or a whole flushed database frees memory
//! piece by piece, which can take long enough to stall every client waiting for the worker
//! that does it. Like Redis's lazy free, a value whose freeing costs more than a few dozen
//! steps is handed to one background thread that drops it there; small values are dropped at
//! once, where a hand-off would cost more than the free.
//!
//! The key is gone from the keyspace before its value is handed over, so no command can see
//! the value again: only the memory lingers until the freer gets to it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::OnceLock;

use crate::value::{Entry, Value};

/// Above this many freeing steps (elements of a collection, 64 KiB pieces of a string), a
/// value is freed in the background. Redis uses the same 64 (`LAZYFREE_THRESHOLD`).
const THRESHOLD: usize = 64;

/// Something to be dropped by the background freer.
type Garbage = Box<dyn Send>;

/// Objects handed to the freer and not yet dropped (Redis's `lazyfree_pending_objects`).
static PENDING: AtomicU64 = AtomicU64::new(0);

/// The background freer's inbox, started on first use.
fn freer() -> &'static mpsc::Sender<Garbage> {
    static FREER: OnceLock<mpsc::Sender<Garbage>> = OnceLock::new();
    FREER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Garbage>();
        let spawned = std::thread::Builder::new()
            .name("latchkey-lazyfree".into())
            .spawn(move || {
                for garbage in rx {
                    drop(garbage);
                    PENDING.fetch_sub(1, Ordering::AcqRel);
                }
            });
        if let Err(e) = spawned {
            // Without the thread the receiver is dropped and `send` fails: values are then
            // freed inline, slower but still correct.
            tracing::warn!("could not start the lazy-free thread: {e}");
        }
        tx
    })
}

/// Roughly how many steps freeing `value` takes.
fn effort(value: &Value) -> usize {
    match value {
        Value::Str(s) => 1 + s.len() / (64 * 1024),
        Value::Hash(h) => h.len(),
        Value::List(l) => l.len(),
        Value::ZSet(z) => z.len(),
        Value::Set(s) => s.len(),
        Value::Stream(s) => s.len(),
    }
}

/// Frees a value: in the background when that takes many steps, here otherwise.
pub(crate) fn free_value(value: Value) {
    if effort(&value) > THRESHOLD {
        free_in_background(Box::new(value));
    }
}

/// Frees a deleted entry's value (see [`free_value`]).
pub(crate) fn free_entry(entry: Entry) {
    free_value(entry.into_value());
}

/// Above this many freeing steps, a value freed where it expired (`lazyfree-lazy-expire
/// no`) first hands its tokio worker's other tasks to another thread (see
/// [`crate::hand_off`]): dropping a set of a million members takes a few hundred
/// milliseconds, which the runtime the server is embedded in should not wait for. The same
/// count as a walk that hands off (`walk::HEAVY_WALK`): about a millisecond of work.
const HAND_OFF_EFFORT: usize = 16 * 1024;

/// Frees the value of a key that expired, where Redis 7.0 frees it: with
/// `lazyfree-lazy-expire no` (`lazy` false, Redis's default) right here, in the expiry cycle
/// or in the command that found the key expired, so the time it takes is theirs (the
/// cycle's `expire-cycle` latency event counts it, as Redis's does); with `yes`, as any
/// other deletion, big values on the background freer.
pub(crate) fn free_expired(entry: Entry, lazy: bool) {
    if lazy {
        return free_entry(entry);
    }
    let value = entry.into_value();
    if effort(&value) > HAND_OFF_EFFORT {
        crate::hand_off::before_long_step();
    }
    drop(value);
}

/// Whether freeing `entry`'s value takes long enough to hand the worker off first (and, in
/// the expiry cycle, to count the key until it is freed: see `Db::active_expire`).
pub(crate) fn frees_slowly(entry: &Entry) -> bool {
    effort(&entry.value) > HAND_OFF_EFFORT
}

/// Hands anything (a whole flushed database, say) to the background freer.
pub(crate) fn free_in_background(garbage: Garbage) {
    PENDING.fetch_add(1, Ordering::AcqRel);
    if let Err(mpsc::SendError(garbage)) = freer().send(garbage) {
        drop(garbage);
        PENDING.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use indexmap::IndexMap;

    #[test]
    fn a_big_hash_is_freed_in_the_background_and_the_count_returns_to_zero() {
        let mut h = IndexMap::new();
        for i in 0..10_000u32 {
            h.insert(
                Bytes::from(i.to_string()).into(),
                Bytes::from_static(b"v").into(),
            );
        }
        assert!(effort(&Value::Hash(Box::new(h.clone()))) > THRESHOLD);
        free_value(Value::Hash(Box::new(h)));
        // The freer drops it soon; other tests may hand it work too, so wait for idle.
        let start = std::time::Instant::now();
        while PENDING.load(Ordering::Acquire) != 0 {
            assert!(start.elapsed().as_secs() < 30, "the freer never caught up");
            std::thread::yield_now();
        }
    }

    #[test]
    fn small_values_cost_one_step() {
        assert_eq!(
            effort(&Value::Str(crate::value::Str::from(&b"token"[..]))),
            1
        );
    }
}
