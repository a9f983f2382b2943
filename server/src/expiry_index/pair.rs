//! One `(deadline, key)` pair of the expiry index, and how the index finds a pair from a
//! borrowed key without copying it.
//!
//! The index holds a pair for every key with a TTL, so the pair is kept small: the deadline
//! and the key as the keyspace table stores it (a [`Key`], one thin pointer: 16 bytes in a
//! B-tree node), normally the very allocation the table holds, shared rather than copied.
//! Looking a pair up by a key the caller only borrows goes through [`Probe`], a view both a
//! stored [`Pair`] and a borrowed `(u64, &[u8])` give, which the B-tree compares through
//! `Borrow`.

use std::borrow::Borrow;
use std::cmp::Ordering;

use crate::value::Key;

/// A key's deadline (Unix milliseconds) and the key, ordered by deadline, then key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pair {
    /// When the key expires.
    pub(crate) deadline: u64,
    /// The key (normally sharing the keyspace table's allocation).
    pub(crate) key: Key,
}

impl Pair {
    /// The pair of `key` (copied) expiring at `deadline`.
    pub(crate) fn new(deadline: u64, key: &[u8]) -> Pair {
        Pair::shared(deadline, Key::from(key))
    }

    /// The pair of `key` expiring at `deadline`, holding `key` itself (another holder of the
    /// table's allocation, not a copy).
    pub(crate) fn shared(deadline: u64, key: Key) -> Pair {
        Pair { deadline, key }
    }
}

/// A pair as the index compares it: its deadline and its key's bytes.
pub(crate) trait Probe {
    /// The deadline and the key.
    fn parts(&self) -> (u64, &[u8]);
}

impl Probe for Pair {
    fn parts(&self) -> (u64, &[u8]) {
        (self.deadline, &self.key)
    }
}

impl Probe for (u64, &[u8]) {
    fn parts(&self) -> (u64, &[u8]) {
        *self
    }
}

impl PartialEq for dyn Probe + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn Probe + '_ {}

impl PartialOrd for dyn Probe + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn Probe + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl<'a> Borrow<dyn Probe + 'a> for Pair {
    fn borrow(&self) -> &(dyn Probe + 'a) {
        self
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn a_borrowed_key_finds_its_pair() {
        let mut set = BTreeSet::new();
        set.insert(Pair::new(5, b"b"));
        set.insert(Pair::new(5, b"a"));
        set.insert(Pair::new(3, b"z"));
        assert!(set.contains(&(5u64, &b"a"[..]) as &dyn Probe));
        assert!(!set.contains(&(4u64, &b"a"[..]) as &dyn Probe));
        assert!(set.remove(&(5u64, &b"b"[..]) as &dyn Probe));
        let order: Vec<_> = set.iter().map(|p| p.parts()).collect();
        assert_eq!(order, vec![(3, &b"z"[..]), (5, &b"a"[..])]);
    }

    #[test]
    fn a_pair_is_a_deadline_and_a_thin_key() {
        assert_eq!(std::mem::size_of::<Pair>(), 16);
    }
}
