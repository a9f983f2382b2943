//! The set value, in the two shapes Redis 7.0 keeps a set in: an *intset* (the members are
//! all integers, few enough: a sorted array of 64-bit integers) or a *hashtable* (anything
//! else). The shape is what `OBJECT ENCODING` answers, and what orders `SMEMBERS`: an intset
//! replies in ascending numeric order, as Redis's does, so small integer sets give the same
//! bytes on both servers. As in Redis, a set leaves the intset shape when a non-integer member
//! arrives or when it outgrows `set-max-intset-entries`, and never goes back.

use bytes::Bytes;
use indexmap::IndexSet;

use crate::codec::parse_int;

/// A set of byte strings.
#[derive(Clone, Debug)]
pub(crate) enum Set {
    /// Integer members, ascending, each once (Redis's `intset` encoding).
    Ints(Vec<i64>),
    /// Any members (Redis's `hashtable` encoding); positions give O(1) random picks.
    Table(IndexSet<Bytes>),
}

impl Default for Set {
    fn default() -> Self {
        Set::Ints(Vec::new())
    }
}

fn int_bytes(i: i64) -> Bytes {
    let mut b = itoa::Buffer::new();
    Bytes::copy_from_slice(b.format(i).as_bytes())
}

impl Set {
    /// An empty set (an intset until a member says otherwise).
    pub(crate) fn new() -> Set {
        Set::default()
    }

    /// A set holding `members`, shaped as Redis would shape a set built by adding them one by
    /// one with `max_intset` as `set-max-intset-entries`.
    pub(crate) fn from_members(members: impl IntoIterator<Item = Bytes>, max_intset: usize) -> Set {
        let mut s = Set::new();
        for m in members {
            s.insert(m, max_intset);
        }
        s
    }

    /// The set a snapshot or a `RESTORE` payload spells out member by member, shaped as
    /// [`Set::from_members`] shapes it with no intset limit (the caller applies its own with
    /// [`Set::fit`]), but in O(n log n): the integers are sorted once instead of inserted one
    /// by one, since a hostile payload may list a million of them in descending order.
    pub(crate) fn from_loaded(members: Vec<Bytes>) -> Set {
        let ints: Option<Vec<i64>> = members.iter().map(|m| parse_int(m)).collect();
        match ints {
            Some(mut v) => {
                v.sort_unstable();
                v.dedup();
                Set::Ints(v)
            }
            None => Set::Table(members.into_iter().collect()),
        }
    }

    /// Number of members.
    pub(crate) fn len(&self) -> usize {
        match self {
            Set::Ints(v) => v.len(),
            Set::Table(t) => t.len(),
        }
    }

    /// Whether the set has no members.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The name `OBJECT ENCODING` answers.
    pub(crate) fn encoding(&self) -> &'static str {
        match self {
            Set::Ints(_) => "intset",
            Set::Table(_) => "hashtable",
        }
    }

    /// Moves every member into the hashtable shape.
    fn become_table(&mut self) {
        if let Set::Ints(v) = self {
            let t: IndexSet<Bytes> = v.iter().map(|i| int_bytes(*i)).collect();
            *self = Set::Table(t);
        }
    }

    /// Adds `member`; false when it was there already. `max_intset` is the current
    /// `set-max-intset-entries`.
    pub(crate) fn insert(&mut self, member: Bytes, max_intset: usize) -> bool {
        if let Set::Ints(v) = self {
            match parse_int(&member) {
                Some(i) => {
                    return match v.binary_search(&i) {
                        Ok(_) => false,
                        Err(pos) => {
                            v.insert(pos, i);
                            if v.len() > max_intset {
                                self.become_table();
                            }
                            true
                        }
                    };
                }
                None => self.become_table(),
            }
        }
        match self {
            Set::Table(t) => t.insert(member),
            Set::Ints(_) => unreachable!("converted above"),
        }
    }

    /// Removes `member`; false when it was not there.
    pub(crate) fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            Set::Ints(v) => match parse_int(member).map(|i| v.binary_search(&i)) {
                Some(Ok(pos)) => {
                    v.remove(pos);
                    true
                }
                _ => false,
            },
            Set::Table(t) => t.swap_remove(member),
        }
    }

    /// Whether `member` is in the set.
    pub(crate) fn contains(&self, member: &[u8]) -> bool {
        match self {
            Set::Ints(v) => parse_int(member).is_some_and(|i| v.binary_search(&i).is_ok()),
            Set::Table(t) => t.contains(member),
        }
    }

    /// The member at position `i` (`i < len`): any fixed order, for random picks.
    pub(crate) fn get_index(&self, i: usize) -> Option<Bytes> {
        match self {
            Set::Ints(v) => v.get(i).map(|n| int_bytes(*n)),
            Set::Table(t) => t.get_index(i).cloned(),
        }
    }

    /// Removes and returns the member at position `i`.
    pub(crate) fn remove_index(&mut self, i: usize) -> Option<Bytes> {
        match self {
            Set::Ints(v) => (i < v.len()).then(|| int_bytes(v.remove(i))),
            Set::Table(t) => t.swap_remove_index(i),
        }
    }

    /// Every member, in the set's order (ascending for an intset).
    pub(crate) fn members(&self) -> Vec<Bytes> {
        match self {
            Set::Ints(v) => v.iter().map(|i| int_bytes(*i)).collect(),
            Set::Table(t) => t.iter().cloned().collect(),
        }
    }

    /// The integer members of an intset, ascending (`None` for a hashtable).
    pub(crate) fn ints(&self) -> Option<&[i64]> {
        match self {
            Set::Ints(v) => Some(v),
            Set::Table(_) => None,
        }
    }

    /// Converts an intset that holds more than `max_intset` members (loading a snapshot
    /// written under a larger setting does this, as Redis does).
    pub(crate) fn fit(&mut self, max_intset: usize) {
        if matches!(self, Set::Ints(v) if v.len() > max_intset) {
            self.become_table();
        }
    }

    /// Bytes the members take (for the memory estimate): each member's length.
    pub(crate) fn sample_member_len(&self, i: usize) -> usize {
        match self {
            Set::Ints(_) => 8,
            Set::Table(t) => t.get_index(i).map_or(0, |m| m.len()),
        }
    }
}

impl crate::shrink::Shrink for Set {
    fn shrink_if_sparse(&mut self) -> bool {
        match self {
            Set::Ints(v) => v.shrink_if_sparse(),
            Set::Table(t) => t.shrink_if_sparse(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn integers_stay_an_ascending_intset_until_a_string_arrives() {
        let mut s = Set::new();
        for m in ["5", "-3", "17", "5"] {
            s.insert(b(m), 512);
        }
        assert_eq!(s.encoding(), "intset");
        assert_eq!(s.members(), vec![b("-3"), b("5"), b("17")]);
        // "007" is not Redis's canonical form of 7: it is a string member.
        assert!(s.insert(b("007"), 512));
        assert_eq!(s.encoding(), "hashtable");
        assert!(s.contains(b"007") && s.contains(b"17") && !s.contains(b"7"));
        assert!(s.remove(b"-3"));
        assert_eq!(s.len(), 3);
        // Emptying a hashtable does not make it an intset again.
        s.remove(b"5");
        s.remove(b"17");
        s.remove(b"007");
        assert!(s.is_empty());
        assert_eq!(s.encoding(), "hashtable");
    }

    #[test]
    fn an_intset_past_its_limit_becomes_a_hashtable() {
        let mut s = Set::new();
        for i in 0..3 {
            s.insert(int_bytes(i), 3);
        }
        assert_eq!(s.encoding(), "intset");
        s.insert(b("3"), 3);
        assert_eq!(s.encoding(), "hashtable");
        let mut t = Set::from_members((0..10).map(int_bytes), 512);
        assert_eq!(t.encoding(), "intset");
        t.fit(5);
        assert_eq!(t.encoding(), "hashtable");
        assert_eq!(t.len(), 10);
    }
}
