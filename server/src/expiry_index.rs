//! The expiry index of one database: every key with a TTL, ordered by deadline.
//!
//! The active expiry cycle pops due keys from the front of this index, so finding the next
//! key to delete costs a logarithmic step, never a scan: a burst of a million leases that
//! expire together costs a million pops, spread over many small steps.
//!
//! Two facts are kept separately:
//! - the *pairs* `(deadline, key)`, which may briefly include a stale pair (a key whose entry
//!   has since got another deadline, or none): whoever pops a pair checks it against the entry
//!   before deleting anything, and drops a stale one at no further cost;
//! - the *count* of entries that have a TTL (`expires=` in `INFO keyspace`), kept exact on every
//!   change instead of recomputed by walking the keyspace.
//!
//! Lock order: the index's mutex is never taken while a shard of the keyspace map is locked,
//! and the map is never touched while the index is locked.

mod pair;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::value::Key;
pub(crate) use pair::Pair;
use pair::Probe;

/// Deadline-ordered pairs and the count of keys with a TTL, for one database.
#[derive(Debug, Default)]
pub(crate) struct ExpiryIndex {
    /// `(deadline_ms, key)`; see the module docs for why a pair may be stale.
    pairs: Mutex<BTreeSet<Pair>>,
    /// How many entries of the database have a deadline.
    with_ttl: AtomicUsize,
}

impl ExpiryIndex {
    /// Records that `key`'s entry went from deadline `old` to deadline `new` (`None`: no TTL,
    /// or no entry). Moves the key's pair and adjusts the count. The old pair goes first, so a
    /// key set again with the same deadline keeps its pair. `stored` is the keyspace table's
    /// own [`Key`] for `key`, when the caller has it: the new pair shares it rather than
    /// copying the bytes.
    pub(crate) fn moved(
        &self,
        key: &[u8],
        old: Option<u64>,
        new: Option<u64>,
        stored: Option<Key>,
    ) {
        if old == new {
            return;
        }
        self.recount(old, new);
        let mut pairs = self.pairs.lock();
        if let Some(t) = old {
            pairs.remove(&(t, key) as &dyn Probe);
        }
        if let Some(t) = new {
            pairs.insert(match stored {
                Some(k) => Pair::shared(t, k),
                None => Pair::new(t, key),
            });
        }
    }

    /// Adjusts only the count, leaving any pair in place: for a caller that holds a shard
    /// lock and so may not take the index's (the pair left behind is stale, and is dropped by
    /// whoever pops it).
    pub(crate) fn recount(&self, old: Option<u64>, new: Option<u64>) {
        match (old.is_some(), new.is_some()) {
            (false, true) => {
                self.with_ttl.fetch_add(1, Ordering::AcqRel);
            }
            (true, false) => {
                self.with_ttl.fetch_sub(1, Ordering::AcqRel);
            }
            _ => {}
        }
    }

    /// Counts out `n` entries that had a TTL and are gone (a step of the expiry cycle).
    pub(crate) fn uncount(&self, n: usize) {
        if n != 0 {
            self.with_ttl.fetch_sub(n, Ordering::AcqRel);
        }
    }

    /// Takes up to `limit` pairs whose deadline is at or before `now_ms`, earliest first,
    /// appending them to `out`. Costs `O(limit + log n)`.
    ///
    /// The front is cut off the set in one piece (`split_off` at the first pair that stays)
    /// rather than popped a pair at a time: each `pop_first` shifts the rest of its leaf and
    /// may rebalance the tree, which a profile of a million expiring keys showed as a good
    /// part of a step's cost.
    pub(crate) fn pop_due(&self, now_ms: u64, limit: usize, out: &mut Vec<(u64, Bytes)>) {
        let mut pairs = self.pairs.lock();
        // The first pair that stays: the one after the `limit` first, unless a pair that is
        // not due comes sooner. `(now_ms + 1, empty key)` sorts before every pair due later.
        let due_end = now_ms.checked_add(1).map(|t| Pair::new(t, &[]));
        let bound = match pairs.iter().nth(limit) {
            Some(p) if due_end.as_ref().is_none_or(|d| p < d) => Some(p.clone()),
            _ => due_end,
        };
        let front = match bound {
            Some(b) => {
                let rest = pairs.split_off(&b);
                std::mem::replace(&mut *pairs, rest)
            }
            // Everything is due (a deadline at the end of time).
            None => std::mem::take(&mut *pairs),
        };
        drop(pairs);
        out.extend(
            front
                .into_iter()
                .map(|p| (p.deadline, Bytes::copy_from_slice(&p.key))),
        );
    }

    /// Up to `limit` keys whose deadline has passed, earliest first, left in the index.
    pub(crate) fn peek_due(&self, now_ms: u64, limit: usize) -> Vec<Bytes> {
        self.pairs
            .lock()
            .iter()
            .take_while(|p| p.deadline <= now_ms)
            .take(limit)
            .map(|p| Bytes::copy_from_slice(&p.key))
            .collect()
    }

    /// The earliest deadline in the index (possibly of a stale pair), if any.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.pairs.lock().first().map(|p| p.deadline)
    }

    /// Whether the pair `(deadline, key)` is in the index (for consistency checks).
    #[cfg(any(test, feature = "internals"))]
    pub(crate) fn contains(&self, deadline: u64, key: &[u8]) -> bool {
        self.pairs.lock().contains(&(deadline, key) as &dyn Probe)
    }

    /// How many entries have a TTL.
    pub(crate) fn count(&self) -> usize {
        self.with_ttl.load(Ordering::Acquire)
    }

    /// Exchanges this index with `other`, pairs and count (`SWAPDB`). Locks `self` first:
    /// callers take the lower database first.
    pub(crate) fn swap_with(&self, other: &ExpiryIndex) {
        let (mut a, mut b) = (self.pairs.lock(), other.pairs.lock());
        std::mem::swap(&mut *a, &mut *b);
        let n = self.with_ttl.load(Ordering::Acquire);
        let m = other.with_ttl.swap(n, Ordering::AcqRel);
        self.with_ttl.store(m, Ordering::Release);
    }

    /// Empties the index and returns its pairs, for the caller to free (a big set takes a
    /// while to drop: `FLUSHALL ASYNC` hands it to the background freer).
    pub(crate) fn take_all(&self) -> BTreeSet<Pair> {
        self.with_ttl.store(0, Ordering::Release);
        std::mem::take(&mut *self.pairs.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn pops_in_deadline_order_and_only_what_is_due() {
        let idx = ExpiryIndex::default();
        idx.moved(&k("c"), None, Some(30), None);
        idx.moved(&k("a"), None, Some(10), None);
        idx.moved(&k("b"), None, Some(20), None);
        let mut out = Vec::new();
        idx.pop_due(20, 10, &mut out);
        assert_eq!(out, vec![(10, k("a")), (20, k("b"))]);
        assert_eq!(idx.next_deadline(), Some(30));
    }

    #[test]
    fn the_count_follows_entries_not_pairs() {
        let idx = ExpiryIndex::default();
        idx.moved(&k("a"), None, Some(10), None);
        idx.moved(&k("a"), Some(10), Some(50), None);
        assert_eq!(idx.count(), 1);
        idx.recount(Some(50), None);
        assert_eq!(
            idx.count(),
            0,
            "the pair stays, stale, but the entry has no TTL"
        );
        assert_eq!(idx.peek_due(50, 10), vec![k("a")]);
        idx.moved(&k("b"), None, Some(5), None);
        idx.moved(&k("b"), Some(5), None, None);
        assert_eq!(idx.count(), 0);
        assert_eq!(idx.peek_due(50, 10), vec![k("a")]);
    }

    #[test]
    fn a_step_pops_at_most_its_limit() {
        let idx = ExpiryIndex::default();
        for i in 0..100u64 {
            idx.moved(&Bytes::from(i.to_string()), None, Some(i), None);
        }
        let mut out = Vec::new();
        idx.pop_due(1_000, 16, &mut out);
        assert_eq!(out.len(), 16);
        assert_eq!(idx.next_deadline(), Some(16));
    }

    #[test]
    fn a_step_cut_among_keys_that_share_a_deadline_takes_each_pair_once() {
        let idx = ExpiryIndex::default();
        for i in 0..1000u64 {
            // Ten deadlines, a hundred keys each: every cut falls among equal deadlines.
            idx.moved(
                &Bytes::from(format!("k{i:04}")),
                None,
                Some(10 + i % 10),
                None,
            );
        }
        idx.moved(&k("later"), None, Some(50), None);
        let mut taken = Vec::new();
        loop {
            let mut out = Vec::new();
            idx.pop_due(19, 128, &mut out);
            if out.is_empty() {
                break;
            }
            assert!(out.len() <= 128);
            assert!(out.windows(2).all(|w| w[0] < w[1]), "earliest first");
            assert!(taken.last().is_none_or(|last| last < &out[0]));
            taken.extend(out);
        }
        assert_eq!(taken.len(), 1000, "every due pair once, the later one left");
        assert_eq!(idx.next_deadline(), Some(50));
        let mut out = Vec::new();
        idx.pop_due(u64::MAX, 5, &mut out);
        assert_eq!(out, vec![(50, k("later"))], "a clock at the end of time");
        assert_eq!(idx.next_deadline(), None);
    }

    #[test]
    fn nothing_due_takes_nothing() {
        let idx = ExpiryIndex::default();
        idx.moved(&k("a"), None, Some(10), None);
        let mut out = Vec::new();
        idx.pop_due(9, 128, &mut out);
        assert!(out.is_empty());
        idx.pop_due(10, 0, &mut out);
        assert!(out.is_empty(), "a limit of 0 takes nothing");
        assert_eq!(idx.next_deadline(), Some(10));
    }
}
