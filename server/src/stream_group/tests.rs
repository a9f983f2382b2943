//! Unit tests of consumer groups: delivery, acknowledgement, claims, lag.

use super::*;
use crate::stream::{NodeLimits, Stream};

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[test]
fn delivering_again_moves_the_entry_to_the_new_consumer() {
    let mut g = Group::new(StreamId::MIN, 0);
    g.consumer(&b("a"), 1);
    g.consumer(&b("b"), 1);
    let id = StreamId::new(1, 1);
    g.deliver(id, &b("a"), 5);
    g.pel.get_mut(&id).unwrap().delivery_count = 7;
    g.deliver(id, &b("b"), 6);
    assert_eq!(g.pel[&id].delivery_count, 1);
    assert!(g.consumers[&b("a")].pel.is_empty());
    assert!(g.consumers[&b("b")].pel.contains(&id));
    assert_eq!(g.delete_consumer(b"b"), Some(1));
    assert!(g.pel.is_empty());
    assert_eq!(g.delete_consumer(b"b"), None);
}

#[test]
fn lag_is_counted_and_unknown_behind_a_deletion() {
    let mut s = Stream::default();
    for i in 1..=5 {
        s.append(
            StreamId::new(i, 0),
            vec![b("f"), b("v")],
            NodeLimits::default(),
        );
    }
    let mut g = Group::new(StreamId::MIN, INVALID_ENTRIES_READ);
    assert_eq!(lag(&s.counters(), &g), Some(5));
    g.advance(&s.counters(), StreamId::new(1, 0));
    assert_eq!(g.entries_read, 1);
    assert_eq!(lag(&s.counters(), &g), Some(4));
    s.delete(StreamId::new(3, 0));
    assert_eq!(lag(&s.counters(), &g), None);
    // A read past the deletion counts on by one, as Redis's does (no tombstone lies at or
    // after the entry read), whatever it skipped.
    g.advance(&s.counters(), StreamId::new(5, 0));
    assert_eq!(g.entries_read, 2);
    assert_eq!(lag(&s.counters(), &g), Some(3));
}
