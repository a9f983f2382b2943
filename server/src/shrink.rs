//! Giving memory back: hash tables that deletions left mostly empty are rebuilt at the size
//! their contents need.
//!
//! A hash table only grows by itself. After a burst of leases expires (a million lock keys
//! taken together, gone together), or a set emptied by `SPOP`, the table keeps the buckets of
//! its peak: the memory stays with the process, `used_memory` says so, and whatever walks
//! the buckets (`RANDOMKEY`, eviction's sampling) walks empty ones. Redis shrinks a dict that
//! is under a tenth full (`htNeedsResize`), the keyspace from `serverCron` and a hash, set or
//! sorted set right after a delete from it; latchkey does the same:
//!
//! - a collection is checked each time a command lets go of it ([`crate::memory::EntryMut`]'s
//!   drop): a check is two loads, a rebuild costs its length and happens after at least nine
//!   tenths of its peak were deleted, so it is paid for by those deletions;
//! - the keyspace is sharded (one hash table per shard of each database); the expiry task
//!   looks at every shard ten times a second and rebuilds at most [`SHARDS_PER_TICK`] sparse
//!   ones per tick, each under its own shard lock, so a client waits for at most one shard's
//!   rebuild (a sixteenth or less of the database).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};

use dashmap::DashMap;

/// Tables with room for fewer entries than this are left alone: too small to matter.
pub(crate) const MIN_CAPACITY: usize = 128;

/// A table is sparse when fewer than one slot in this many is used (Redis: 10%).
const SPARSE_RATIO: usize = 10;

/// The most keyspace shards rebuilt in one tick of the expiry task.
pub(crate) const SHARDS_PER_TICK: usize = 2;

/// Whether a table of `capacity` slots holding `len` entries should be rebuilt smaller.
pub(crate) fn is_sparse(len: usize, capacity: usize) -> bool {
    capacity >= MIN_CAPACITY && len.saturating_mul(SPARSE_RATIO) < capacity
}

/// Something that can give back the room it does not use.
pub(crate) trait Shrink {
    /// Rebuilds at the size the contents need when mostly empty; true when it did.
    fn shrink_if_sparse(&mut self) -> bool;
}

impl<K: Hash + Eq, V, S: BuildHasher> Shrink for indexmap::IndexMap<K, V, S> {
    fn shrink_if_sparse(&mut self) -> bool {
        let sparse = is_sparse(self.len(), self.capacity());
        if sparse {
            self.shrink_to_fit();
        }
        sparse
    }
}

impl<K: Hash + Eq, S: BuildHasher> Shrink for indexmap::IndexSet<K, S> {
    fn shrink_if_sparse(&mut self) -> bool {
        let sparse = is_sparse(self.len(), self.capacity());
        if sparse {
            self.shrink_to_fit();
        }
        sparse
    }
}

impl<K: Hash + Eq, V, S: BuildHasher> Shrink for HashMap<K, V, S> {
    fn shrink_if_sparse(&mut self) -> bool {
        let sparse = is_sparse(self.len(), self.capacity());
        if sparse {
            self.shrink_to_fit();
        }
        sparse
    }
}

impl<T> Shrink for VecDeque<T> {
    fn shrink_if_sparse(&mut self) -> bool {
        let sparse = is_sparse(self.len(), self.capacity());
        if sparse {
            self.shrink_to_fit();
        }
        sparse
    }
}

impl<T> Shrink for Vec<T> {
    fn shrink_if_sparse(&mut self) -> bool {
        let sparse = is_sparse(self.len(), self.capacity());
        if sparse {
            self.shrink_to_fit();
        }
        sparse
    }
}

/// Looks at the shards of `map` from `*cursor` on (round robin, the cursor moves past each
/// shard looked at) and rebuilds the sparse ones, at most `budget` of them. Looking costs a
/// read lock and two loads per shard. Returns how many it rebuilt.
pub(crate) fn shrink_shards<K, V, S>(
    map: &DashMap<K, V, S>,
    cursor: &mut usize,
    budget: usize,
) -> usize
where
    K: Hash + Eq,
    S: BuildHasher + Clone,
{
    let shards = map.shards();
    let mut rebuilt = 0;
    for _ in 0..shards.len() {
        if rebuilt >= budget {
            break;
        }
        let shard = &shards[*cursor % shards.len()];
        *cursor = (*cursor + 1) % shards.len();
        let sparse = {
            let table = shard.read();
            is_sparse(table.len(), table.capacity())
        };
        if sparse {
            let mut table = shard.write();
            // Checked again under the write lock: the shard may have filled meanwhile.
            if is_sparse(table.len(), table.capacity()) {
                // Each entry's hash exactly as the map computes it to place it (dashmap hashes
                // with build_hasher/hash/finish, which a hasher's own hash_one may not match).
                let hasher = map.hasher();
                let len = table.len();
                #[allow(clippy::manual_hash_one)]
                table.shrink_to(len, |(k, _)| {
                    let mut h = hasher.build_hasher();
                    k.hash(&mut h);
                    h.finish()
                });
                rebuilt += 1;
            }
        }
    }
    rebuilt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_sparse_under_a_tenth_full_and_big_enough_to_matter() {
        assert!(!is_sparse(0, 64), "small tables are left alone");
        assert!(is_sparse(0, 128));
        assert!(is_sparse(12, 128));
        assert!(!is_sparse(13, 128));
        assert!(!is_sparse(1000, 1024));
    }

    #[test]
    fn collections_give_back_room_once_mostly_empty() {
        let mut m: indexmap::IndexMap<u32, u32> = (0..10_000).map(|i| (i, i)).collect();
        let peak = m.capacity();
        m.retain(|k, _| *k < 2_000);
        assert!(!m.shrink_if_sparse(), "a fifth full is not sparse");
        assert_eq!(m.capacity(), peak);
        m.retain(|k, _| *k < 100);
        assert!(m.shrink_if_sparse());
        assert!(m.capacity() < peak / 10);
        assert_eq!(m.len(), 100);
        assert!((0..100).all(|k| m.get(&k) == Some(&k)), "contents kept");
    }

    #[test]
    fn sparse_shards_are_rebuilt_within_the_budget_and_keep_their_keys() {
        let map: DashMap<u32, u32> = DashMap::with_shard_amount(4);
        for i in 0..100_000 {
            map.insert(i, i);
        }
        let peak = map.capacity();
        map.retain(|k, _| k % 1000 == 0);
        let mut cursor = 0;
        assert_eq!(
            shrink_shards(&map, &mut cursor, 1),
            1,
            "one shard per budget"
        );
        assert_eq!(shrink_shards(&map, &mut cursor, 8), 3, "the other three");
        assert_eq!(
            shrink_shards(&map, &mut cursor, 8),
            0,
            "nothing sparse is left"
        );
        assert!(map.capacity() < peak / 10);
        assert_eq!(map.len(), 100);
        assert!((0..100_000).step_by(1000).all(|k| map.get(&k).is_some()));
    }
}
