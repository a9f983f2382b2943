//! The sorted-set value: members ordered by `(score, member)`, with O(1) score lookup.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use bytes::Bytes;
use indexmap::IndexMap;

use crate::thin::Thin;

/// A sorted-set member as both tables hold it: one thin pointer to a single allocation of the
/// member's bytes, shared by the two (see [`Thin`]).
pub(crate) type Member = Thin;

/// A score with a total order (scores are never NaN: commands reject NaN before storing).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Score(pub f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// A sorted set: each member once, ordered by score and then by member bytes.
///
/// A member's bytes are kept once, in one allocation that both tables point to (a
/// [`Member`], 8 bytes in each), as Redis's skiplist points at its dictionary's `sds`. Keeping
/// a copy in each table as an inline 32-byte string cost 64 bytes of every member twice over
/// (a hash table's bucket and a B-tree's slot, both partly empty): 1.44 times Redis's memory
/// for a million members, against about 1.1 with the one shared allocation. The table's
/// bucket is then 24 bytes (hash, pointer, score) and the B-tree's slot 16.
#[derive(Clone, Debug, Default)]
pub(crate) struct ZSet {
    /// Each member's score; in a table with positions, so that `ZSCAN` can page through it
    /// (see [`crate::scan::index_page`]).
    scores: IndexMap<Member, f64>,
    order: BTreeSet<(Score, Member)>,
}

impl ZSet {
    /// An empty sorted set.
    pub(crate) fn new() -> ZSet {
        ZSet::default()
    }

    /// Number of members.
    pub(crate) fn len(&self) -> usize {
        self.scores.len()
    }

    /// Whether there are no members.
    pub(crate) fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// The score of `member`, if present.
    pub(crate) fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Adds or updates a member; returns its previous score.
    pub(crate) fn insert(&mut self, member: Bytes, score: f64) -> Option<f64> {
        // -0.0 and 0.0 are the same score to Redis; store one of them.
        let score = if score == 0.0 { 0.0 } else { score };
        match self.scores.get_full_mut(&member[..]) {
            // A member already present keeps its allocation: only its score and its place in
            // the order change (no allocation, as before).
            Some((_, m, s)) => {
                let old = std::mem::replace(s, score);
                if old != score {
                    let m = self
                        .order
                        .take(&(Score(old), m.clone()))
                        .expect("every member is in both tables")
                        .1;
                    self.order.insert((Score(score), m));
                }
                Some(old)
            }
            None => {
                let m = Member::new(&member);
                self.scores.insert(m.clone(), score);
                self.order.insert((Score(score), m));
                None
            }
        }
    }

    /// Removes a member; returns its score if it was present.
    pub(crate) fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (m, s) = self.scores.swap_remove_entry(member)?;
        self.order.remove(&(Score(s), m));
        Some(s)
    }

    /// Members in ascending order with their scores.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (&Member, f64)> {
        self.order.iter().map(|(s, m)| (m, s.0))
    }

    /// The member at `position` of the member table (not the rank: see
    /// [`crate::scan::index_page`]) with its score.
    pub(crate) fn at_position(&self, position: usize) -> Option<(&Member, f64)> {
        self.scores.get_index(position).map(|(m, s)| (m, *s))
    }

    /// Members whose score is in `[min, max)`, ascending, with their scores (a geo search
    /// scans one cell's range this way).
    pub(crate) fn range_from(&self, min: f64, max: f64) -> impl Iterator<Item = (&Member, f64)> {
        self.order
            .range((Score(min), Member::new(b""))..)
            .take_while(move |(s, _)| s.0 < max)
            .map(|(s, m)| (m, s.0))
    }

    /// 0-based rank of `member` in ascending order.
    pub(crate) fn rank(&self, member: &[u8]) -> Option<usize> {
        let s = self.score(member)?;
        let key = (Score(s), Member::new(member));
        Some(self.order.range(..key).count())
    }
}

impl crate::shrink::Shrink for ZSet {
    /// The member table shrinks; the ordered index frees its nodes as members go.
    fn shrink_if_sparse(&mut self) -> bool {
        self.scores.shrink_if_sparse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each member's bytes are one allocation that both tables hold, through every change of
    /// its score; the order and the scores agree.
    #[test]
    fn a_member_is_stored_once_for_both_tables() {
        let mut z = ZSet::new();
        for i in 0..100 {
            assert_eq!(z.insert(Bytes::from(format!("member:{i}")), i as f64), None);
        }
        assert_eq!(z.insert(Bytes::from_static(b"member:7"), -1.0), Some(7.0));
        assert_eq!(z.insert(Bytes::from_static(b"member:8"), 8.0), Some(8.0));
        for (m, s) in z.iter() {
            assert_eq!(m.holders(), 2, "{m:?}");
            assert_eq!(z.score(m), Some(s));
        }
        let first: Vec<_> = z.iter().take(2).map(|(m, s)| (m.to_vec(), s)).collect();
        assert_eq!(
            first,
            vec![(b"member:7".to_vec(), -1.0), (b"member:0".to_vec(), 0.0)]
        );
        assert_eq!(z.rank(b"member:8"), Some(8));
        assert_eq!(z.remove(b"member:7"), Some(-1.0));
        assert_eq!((z.len(), z.iter().count()), (99, 99));
        assert_eq!(z.rank(b"member:0"), Some(0));
        let (m, s) = z.at_position(0).expect("a member");
        assert_eq!((m.holders(), z.score(m)), (2, Some(s)));
    }

    #[test]
    fn a_zset_slot_is_small() {
        assert_eq!(std::mem::size_of::<(Score, Member)>(), 16);
    }
}
