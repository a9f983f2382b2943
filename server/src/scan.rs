//! The `SCAN` cursor over the keyspace: each call costs what it returns, not the size of the
//! database, and the iteration keeps Redis's promise.
//!
//! Redis's promise (`SCAN`'s documentation): a key present from the start to the end of a full
//! iteration is returned at least once; a key added or removed meanwhile may or may not be;
//! a key may come back twice when the table was resized. Redis keeps it with the cursor of its
//! `dictScan`: the cursor names a bucket of a power-of-two table, and it counts with its bits
//! reversed, so that the buckets already visited stay visited when the table doubles or
//! halves (a bucket `b` of a table of `n` buckets becomes `b` and `b + n` of the doubled one,
//! both of which come after `b` in reversed-bit order, and the other way round when halving).
//!
//! latchkey's keyspace is a [`DashMap`]: a fixed number of shards, each an open-addressing
//! hashbrown table whose size is a power of two. An entry there does not always sit in the
//! bucket its hash names (its *home* bucket): when that one was taken it sits further along
//! its probe sequence. So the cursor here names home buckets, not slots: visiting home bucket
//! `h` means finding every entry whose hash, masked to the table's size, is `h`. The table's
//! own lookup finds them (`iter_hash` walks the probe sequence that starts at `h`, once for
//! each of the 128 tags an entry can carry), and each candidate's hash is checked. Where an
//! entry lies does not matter, only its hash, so tables that grow, shrink or rehash in place
//! keep the promise exactly as Redis's do.
//!
//! The cursor is the shard in its top bits and the reversed-bit count within that shard's
//! table in the rest; shards are walked in order. Cursor 0 starts, and 0 comes back at the end.

use std::hash::{BuildHasher, Hash};

use dashmap::DashMap;

/// Where the shard number starts in a cursor: tables up to 2^48 buckets, up to 2^16 shards.
const SHARD_SHIFT: u32 = 48;

/// The bits of a cursor that count within a shard's table.
const IN_SHARD: u64 = (1 << SHARD_SHIFT) - 1;

/// How many home buckets one call may visit per key it was asked for, as Redis's `SCAN`
/// bounds its visits of empty buckets (`COUNT` times ten), so that a sparse table costs one
/// call a bounded walk and the client simply calls again.
const VISITS_PER_COUNT: usize = 10;

/// hashbrown keeps the top seven bits of an entry's hash as its tag (its `h2`).
const TAG_SHIFT: u32 = 57;

/// About how many home buckets one `SCAN cursor [MATCH p] [COUNT n] [TYPE t]` call walks at
/// most (`args[0]` is `SCAN`), for the check that hands a heavy command's worker off before
/// it runs: [`VISITS_PER_COUNT`] per key its `COUNT` asks for (10 when absent). Arguments
/// that do not parse walk nothing (the command answers with an error).
pub(crate) fn page_walk(args: &[bytes::Bytes]) -> usize {
    let mut count = 10usize;
    let mut options = args.iter().skip(2);
    while let (Some(name), Some(value)) = (options.next(), options.next()) {
        if name.eq_ignore_ascii_case(b"count") {
            match std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
                Some(n) => count = n,
                None => return 0,
            }
        }
    }
    count.saturating_mul(VISITS_PER_COUNT)
}

/// What one call of [`scan`] found, and where the next call starts.
#[derive(Debug)]
pub(crate) struct Page<T> {
    /// What `take` kept, in visiting order.
    pub items: Vec<T>,
    /// The cursor to hand the client: 0 when the iteration is over.
    pub next: u64,
}

/// Visits home buckets of `map` from `cursor` until `take` has kept about `count` items or
/// `count` times [`VISITS_PER_COUNT`] buckets were visited, and returns what it kept with the
/// next cursor. `take` sees each entry whose home bucket is visited, under its shard's read
/// lock (do not touch the map from it); it returns what to keep, if anything. A cursor that
/// names no shard (a client's made-up number) ends the iteration.
pub(crate) fn scan<K, V, S, T>(
    map: &DashMap<K, V, S>,
    cursor: u64,
    count: usize,
    mut take: impl FnMut(&K, &V) -> Option<T>,
) -> Page<T>
where
    K: Hash + Eq,
    S: BuildHasher + Clone,
{
    let shards = map.shards();
    let mut shard = (cursor >> SHARD_SHIFT) as usize;
    let mut at = cursor & IN_SHARD;
    let mut items = Vec::new();
    let budget = count.max(1).saturating_mul(VISITS_PER_COUNT);
    let mut visits = 0;
    while shard < shards.len() && items.len() < count && visits < budget {
        let table = shards[shard].read();
        if table.is_empty() {
            visits += 1;
            at = 0;
        } else {
            let mask = (table.buckets() - 1) as u64;
            loop {
                let home = at & mask;
                for tag in 0..128u64 {
                    // SAFETY: the shard's read lock is held for as long as the buckets are
                    // looked at, so the table cannot change or move under us.
                    for bucket in unsafe { table.iter_hash((tag << TAG_SHIFT) | home) } {
                        // SAFETY: as above; `iter_hash` yields full buckets only.
                        let (key, value) = unsafe { bucket.as_ref() };
                        if map.hash_usize(key) as u64 & mask == home {
                            if let Some(t) = take(key, value.get()) {
                                items.push(t);
                            }
                        }
                    }
                }
                visits += 1;
                at = next_home(at, mask);
                if at == 0 || items.len() >= count || visits >= budget {
                    break;
                }
            }
        }
        if at == 0 {
            shard += 1;
        }
    }
    let next = if shard >= shards.len() {
        0
    } else {
        ((shard as u64) << SHARD_SHIFT) | at
    };
    Page { items, next }
}

/// The home bucket after `at` in reversed-bit order for a table of `mask + 1` buckets, or 0
/// after the last one (Redis's cursor increment in `dictScan`).
fn next_home(at: u64, mask: u64) -> u64 {
    // Set the bits above the mask so that the increment carries straight through them.
    let reversed = (at | !mask).reverse_bits().wrapping_add(1);
    reversed.reverse_bits() & IN_SHARD
}

/// One page of a collection kept in a table with positions (an `IndexMap` or `IndexSet`, as
/// hashes, sets and sorted sets are): the positions to visit, highest first, and the next
/// cursor (0 when done).
///
/// Walking down from the end keeps Redis's promise, because of how such a table changes: a
/// new element is added at the end; a deletion either moves the last element into the hole
/// (`swap_remove`) or shifts every later element down by one (`shift_remove`). Either way an
/// element only ever moves down from a position not yet visited to another not yet visited,
/// or from one already visited (the last) to anywhere, which at worst returns it twice.
pub(crate) fn index_page(len: usize, cursor: u64, count: usize) -> (std::ops::Range<usize>, u64) {
    // Cursor 0 starts at the end; any other is the position just above the next to visit,
    // which deletions since may have put past the end.
    let top = if cursor == 0 {
        len
    } else {
        usize::try_from(cursor).unwrap_or(usize::MAX).min(len)
    };
    let bottom = top.saturating_sub(count.max(1));
    (bottom..top, bottom as u64)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    fn full_scan(map: &DashMap<u32, u32>, count: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let mut cursor = 0;
        loop {
            let page = scan(map, cursor, count, |k, _| Some(*k));
            out.extend(page.items);
            cursor = page.next;
            if cursor == 0 {
                return out;
            }
        }
    }

    #[test]
    fn the_cursor_visits_every_home_bucket_once() {
        for bits in 0..10 {
            let mask = (1u64 << bits) - 1;
            let mut seen = BTreeSet::new();
            let mut at = 0;
            loop {
                assert!(seen.insert(at), "bucket {at} twice for mask {mask}");
                at = next_home(at, mask);
                if at == 0 {
                    break;
                }
            }
            assert_eq!(seen.len() as u64, mask + 1);
        }
    }

    #[test]
    fn a_still_map_is_returned_exactly_once_at_any_count() {
        let map: DashMap<u32, u32> = DashMap::with_shard_amount(4);
        for i in 0..5000 {
            map.insert(i, i);
        }
        for count in [1, 7, 100, 100_000] {
            let mut keys = full_scan(&map, count);
            keys.sort_unstable();
            assert_eq!(keys, (0..5000).collect::<Vec<_>>(), "COUNT {count}");
        }
    }

    #[test]
    fn keys_present_throughout_survive_growth_and_shrinking_mid_scan() {
        let map: DashMap<u32, u32> = DashMap::with_shard_amount(4);
        for i in 0..2000 {
            map.insert(i, i);
        }
        let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
        let mut cursor = 0;
        let mut step = 0u32;
        loop {
            let page = scan(&map, cursor, 5, |k, _| Some(*k));
            for k in page.items {
                *seen.entry(k).or_default() += 1;
            }
            cursor = page.next;
            if cursor == 0 {
                break;
            }
            step += 1;
            // Grow every table several times over, then empty most of it again and shrink
            // it, while the iteration is under way.
            if step < 200 {
                for j in 0..100 {
                    map.insert(100_000 + step * 100 + j, 0);
                }
            } else if step == 200 {
                map.retain(|k, _| *k < 2000);
                map.shrink_to_fit();
            }
        }
        for k in 0..2000 {
            assert!(
                seen.contains_key(&k),
                "key {k} present throughout, never returned"
            );
        }
    }

    #[test]
    fn a_sparse_table_costs_a_bounded_walk_per_call() {
        let map: DashMap<u32, u32> = DashMap::with_shard_amount(2);
        for i in 0..200_000 {
            map.insert(i, i);
        }
        map.retain(|k, _| *k < 3);
        let mut calls = 0;
        let mut cursor = 0;
        let mut found = 0;
        loop {
            let page = scan(&map, cursor, 1, |_, _| Some(()));
            found += page.items.len();
            calls += 1;
            cursor = page.next;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(found, 3);
        // About 100,000 keys in each shard left it 131,072 buckets: ten of them a call (a
        // call that finds its one key stops there). A shard left empty is passed over in one
        // step (the three keys may all be in one shard).
        let buckets: Vec<usize> = map.shards().iter().map(|s| s.read().buckets()).collect();
        assert_eq!(buckets, [131_072, 131_072]);
        let walked: usize = map
            .shards()
            .iter()
            .filter(|s| !s.read().is_empty())
            .map(|s| s.read().buckets())
            .sum();
        assert!(
            (walked / 10..=walked / 10 + 4).contains(&calls),
            "{calls} calls for {walked} buckets"
        );
    }

    #[test]
    fn index_pages_keep_elements_present_throughout_despite_removals() {
        let mut set: indexmap::IndexSet<u32> = (0..1000).collect();
        let mut seen = BTreeSet::new();
        let mut cursor = 0;
        let mut step = 0;
        loop {
            let (range, next) = index_page(set.len(), cursor, 7);
            for i in range.rev() {
                seen.insert(*set.get_index(i).unwrap());
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
            step += 1;
            // Even elements stay; odd ones go, by both kinds of removal, so that the element
            // moved into a hole is often one that stays; new ones come now and then.
            let gone = (step * 74 + 1) % 1000;
            if step % 2 == 0 {
                set.swap_remove(&gone);
            } else {
                set.shift_remove(&gone);
            }
            if step % 3 == 0 {
                set.insert(10_000 + step);
            }
        }
        for k in (0..1000).step_by(2) {
            assert!(
                seen.contains(&k),
                "element {k} present throughout, never returned"
            );
        }
        // A cursor past the end (deletions since) restarts from the end; the end is 0.
        assert_eq!(index_page(3, 10, 2), (1..3, 1));
        assert_eq!(index_page(3, 1, 2), (0..1, 0));
    }

    #[test]
    fn a_page_walks_ten_buckets_per_key_asked_for() {
        let args = |s: &str| -> Vec<bytes::Bytes> {
            s.split(' ')
                .map(|a| bytes::Bytes::from(a.to_string()))
                .collect()
        };
        assert_eq!(page_walk(&args("SCAN 0")), 100);
        assert_eq!(page_walk(&args("SCAN 0 MATCH * count 1000000")), 10_000_000);
        assert_eq!(page_walk(&args("SCAN 0 COUNT x")), 0);
        assert_eq!(
            page_walk(&args("SCAN 0 COUNT 18446744073709551615")),
            usize::MAX
        );
    }

    #[test]
    fn a_made_up_cursor_ends_the_iteration() {
        let map: DashMap<u32, u32> = DashMap::with_shard_amount(4);
        map.insert(1, 1);
        let page = scan(&map, u64::MAX, 10, |k, _| Some(*k));
        assert!(page.items.is_empty());
        assert_eq!(page.next, 0);
    }
}
