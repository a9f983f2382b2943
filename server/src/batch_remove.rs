//! Deleting a batch of expired keys from the keyspace map at once: the active expiry cycle's
//! hot loop.
//!
//! Why not one `remove_if` per key? A profile of a million keys expiring together showed
//! almost all of a deletion's time spent waiting on memory: the map's table holds a million
//! slots, the cycle visits them in deadline order (random order for the table), so
//! each deletion misses the cache (and the TLB) twice, once on the control bytes and once on
//! the slot, and a per-key `remove_if` takes and lets go of the shard's lock around each
//! lookup, whose locked instructions keep the processor from starting the next key's loads
//! early. Here a batch is handled per shard, in three passes:
//! 1. hash every key (the hashes say which shard, and where in its table to look), after
//!    asking for all their bytes at once;
//! 2. with the shard's lock taken once, ask the processor to fetch the control bytes and
//!    the home slot of every key of that shard ([`prefetch`]), so that their misses overlap
//!    instead of following one another;
//! 3. remove each key that is still expired, by now mostly from the cache.
//!
//! The lock is held for one batch of one shard (at most [`crate::expire::STEP_KEYS`] keys):
//! a command on another key of that shard, on another worker, waits that long at most.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use dashmap::DashMap;

use crate::value::Entry;
use crate::value::Key;

/// Entries [`remove_expired`] counts as it removes them: those `test` picks go into `count`.
pub(crate) struct Held<'a> {
    /// The counter (a database's keys still being freed).
    pub(crate) count: &'a AtomicUsize,
    /// Which removed entries it counts.
    pub(crate) test: fn(&Entry) -> bool,
}

/// Removes those of `keys` whose entry is expired at `now_ms` (a key that got a later
/// deadline, or none, or is absent, is left alone) and returns them with their entries, in
/// no particular order. Each key is looked up once, under one lock per shard.
///
/// `held`, when given, counts each removed entry its test picks (a big value the caller will
/// free itself) in its counter, in the same critical section as the removal: someone who
/// adds the counter to the map's length never sees such a key gone before it is freed.
pub(crate) fn remove_expired<S: std::hash::BuildHasher + Clone>(
    map: &DashMap<Key, Entry, S>,
    keys: Vec<Bytes>,
    now_ms: u64,
    held: Option<Held<'_>>,
) -> Vec<(Bytes, Entry)> {
    let mut gone = Vec::with_capacity(keys.len());
    // The keys' bytes, read next to hash them, are as scattered as the slots.
    for k in &keys {
        prefetch_line(k.as_ptr());
    }
    // (shard, hash, key), sorted by shard so each shard is locked once.
    let mut todo: Vec<(usize, u64, Bytes)> = keys
        .into_iter()
        .map(|k| {
            // The same hash dashmap computes for a lookup by `&[u8]` (`Bytes` hashes as its
            // bytes), which picks both the shard and the slot.
            let hash = map.hash_usize(&&k[..]) as u64;
            (map.determine_shard(hash as usize), hash, k)
        })
        .collect();
    todo.sort_unstable_by_key(|(shard, _, _)| *shard);
    let shards = map.shards();
    let mut rest = &todo[..];
    while let Some((shard, _, _)) = rest.first() {
        let n = rest.iter().take_while(|(s, _, _)| s == shard).count();
        let (group, tail) = rest.split_at(n);
        rest = tail;
        let mut table = shards[*shard].write();
        let (end, buckets) = (table.data_end().as_ptr(), table.buckets());
        for (_, hash, _) in group {
            prefetch(end, buckets, *hash);
        }
        for (_, hash, key) in group {
            let removed = table.remove_entry(*hash, |(k, e)| {
                k[..] == key[..] && e.get().is_expired(now_ms)
            });
            if let Some((_, e)) = removed {
                let e = e.into_inner();
                if let Some(h) = &held {
                    if (h.test)(&e) {
                        h.count.fetch_add(1, Ordering::AcqRel);
                    }
                }
                // The batch's own copy of the key, which the caller already shares.
                gone.push((key.clone(), e));
            }
        }
    }
    gone
}

/// Asks the processor to bring into the cache where a lookup of `hash` starts in a shard's
/// table of `buckets` slots ending at `end` (hashbrown's `data_end`): its group of control
/// bytes and its home slot (where the key lives unless a collision pushed it further along).
/// A hint only: the addresses are computed, never read, and a wrong guess costs nothing but
/// the fetch.
#[inline]
fn prefetch<T>(end: *mut T, buckets: usize, hash: u64) {
    let pos = (hash as usize) & (buckets - 1);
    // hashbrown's layout: the slots lie just below `data_end`, slot `i` at `data_end - i - 1`;
    // the control bytes start at `data_end`, byte `i` for slot `i`.
    let ctrl = (end as *const u8).wrapping_add(pos);
    prefetch_line(ctrl);
    // The home slot and the next two (lower in memory), where a collision often puts a key.
    let size = std::mem::size_of::<T>();
    let lowest = end.wrapping_sub(pos + 3) as *const u8;
    let mut off = 0;
    while off < 3 * size {
        prefetch_line(lowest.wrapping_add(off));
        off += 64;
    }
    prefetch_line(lowest.wrapping_add(3 * size - 1));
}

/// A prefetch of the cache line holding `p` (a no-op where there is no such instruction).
#[inline(always)]
fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address; SSE is part of x86_64.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{Str, Value};

    fn entry(deadline: Option<u64>) -> Entry {
        Entry::with_expiry(Value::Str(Str::from(&b"v"[..])), deadline)
    }

    #[test]
    fn removes_exactly_the_expired_keys_of_the_batch() {
        let map: DashMap<Key, Entry, ahash::RandomState> =
            DashMap::with_hasher(ahash::RandomState::new());
        for i in 0..1000u64 {
            // Even keys expired at 10, odd ones at 1000 or never.
            let deadline = match i % 4 {
                0 | 2 => Some(10),
                1 => Some(1000),
                _ => None,
            };
            map.insert(Key::from(format!("k{i}").as_bytes()), entry(deadline));
        }
        let batch: Vec<Bytes> = (0..1000u64)
            .step_by(3)
            .map(|i| Bytes::from(format!("k{i}")))
            .chain([Bytes::from_static(b"absent")])
            .collect();
        let mut gone: Vec<Bytes> = remove_expired(&map, batch, 500, None)
            .into_iter()
            .map(|(k, e)| {
                assert!(e.is_expired(500));
                k
            })
            .collect();
        gone.sort();
        let mut want: Vec<Bytes> = (0..1000u64)
            .step_by(3)
            .filter(|i| i % 2 == 0)
            .map(|i| Bytes::from(format!("k{i}")))
            .collect();
        want.sort();
        assert_eq!(gone, want);
        assert_eq!(map.len(), 1000 - want.len());
        for i in 0..1000u64 {
            let k = format!("k{i}");
            let should_stay = i % 3 != 0 || i % 2 == 1;
            assert_eq!(map.contains_key(k.as_bytes()), should_stay, "{k}");
        }
    }
}
