//! In-process measurements of the server's internals (the `expire_cost` example prints them).

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::db::{Entry, Keyspace, Str, Update, Value};
use crate::expire::STEP_KEYS;

/// What reclaiming `keys` expired lock keys cost, in total.
#[derive(Clone, Copy, Debug)]
pub struct ExpireCost {
    /// Storing the keys, as `SET lock:N token NX PX ttl` stores them.
    pub load: Duration,
    /// Deleting them with the active expiry cycle's step.
    pub delete: Duration,
    /// Freeing what each step returned.
    pub free: Duration,
}

/// Fills a database with `keys` lock keys whose deadlines spread over a second and a half (as
/// a burst of `SET ... NX PX` lays them out), then deletes them all with the active expiry
/// cycle's step, [`STEP_KEYS`] at a time, and frees what each step returns, as the cycle does.
pub fn expire_cost(keys: u64) -> ExpireCost {
    let ks = Keyspace::default();
    let db = ks.db(0);
    let t0 = Instant::now();
    for i in 0..keys {
        let key = Bytes::copy_from_slice(format!("lock:{i}").as_bytes());
        let deadline = 1_000 + i * 1_500 / keys.max(1);
        db.update(&key, 0, true, |old| {
            let put = Update::Put(Entry::with_expiry(
                Value::Str(Str::copy_from_slice(b"token")),
                Some(deadline),
            ));
            (if old.is_none() { put } else { Update::Keep }, ())
        });
    }
    let load = t0.elapsed();
    let (mut delete, mut free) = (Duration::ZERO, Duration::ZERO);
    let mut gone_total = 0u64;
    loop {
        let t = Instant::now();
        let gone = db.active_expire(u64::MAX / 2, STEP_KEYS, false);
        delete += t.elapsed();
        if gone.is_empty() {
            break;
        }
        gone_total += gone.len() as u64;
        let t = Instant::now();
        // Small values: what the cycle's lazy free drops at once.
        drop(gone);
        free += t.elapsed();
    }
    assert_eq!(gone_total, keys, "every key expired");
    assert_eq!(db.len(), 0);
    ExpireCost { load, delete, free }
}
