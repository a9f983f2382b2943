//! How much a command will walk, and whether that is enough to run it off its async worker.
//!
//! Some commands cost in proportion to what they go through rather than to their arguments:
//! `KEYS`, `SCAN`, `RANDOMKEY`, `FLUSHALL`, a replica's full sync (the snapshot) walk the
//! keyspace ([`WALKS_KEYSPACE`]); `LRANGE`, `HGETALL`, `ZRANGE`, `LREM` and their kind walk the
//! collection at their key ([`WALKS_VALUE`]). The command table flags them. Before such a
//! command runs, [`hand_off_if_heavy`] measures what it would walk (a length read, no walk)
//! and, past [`HEAVY_WALK`] elements, hands its worker off (see [`crate::hand_off`]) so that
//! the rest of the runtime goes on meanwhile. Commands without those flags (every command of
//! the lock path) pay one flag test.

use bytes::Bytes;

use crate::command::{CommandSpec, WALKS_KEYSPACE, WALKS_VALUE};
use crate::state::Shared;
use crate::value::Value;

/// Past this many elements (keys, or members of a collection) a flagged command is heavy
/// enough to hand its worker off before it runs. Walking this many takes in the order of a
/// millisecond in a release build, which is what the hand-off itself is worth; below it the
/// command's own work is shorter than the time a timer may be late anyway.
pub(crate) const HEAVY_WALK: usize = 16 * 1024;

/// A string value counts as one element per this many bytes (a large `GETRANGE`, say).
const BYTES_PER_ELEMENT: usize = 1024;

/// How many elements `spec` would go through for `args` in database `db`: the keys of the
/// whole keyspace, or the members of the collections at its keys. Zero for an unflagged
/// command. Reads lengths only.
pub(crate) fn walk_size(shared: &Shared, db: usize, spec: &CommandSpec, args: &[Bytes]) -> usize {
    if spec.has(WALKS_KEYSPACE) {
        let keys: usize = shared.keyspace.iter().map(|(_, d)| d.len()).sum();
        if spec.name == "scan" {
            // One page: at most `COUNT` times ten home buckets.
            return keys.min(crate::scan::page_walk(args));
        }
        return keys;
    }
    if !spec.has(WALKS_VALUE) {
        return 0;
    }
    let map = shared.keyspace.db(db).map();
    spec.keys_in(args)
        .into_iter()
        .filter_map(|i| map.get(&args[i][..]))
        .map(|entry| elements(&entry.value))
        .fold(0usize, usize::saturating_add)
}

/// How many elements walking `value` goes through.
fn elements(value: &Value) -> usize {
    match value {
        Value::Str(s) => s.len() / BYTES_PER_ELEMENT,
        Value::Hash(h) => h.len(),
        Value::List(l) => l.len(),
        Value::ZSet(z) => z.len(),
        Value::Set(s) => s.len(),
        Value::Stream(s) => s.len(),
    }
}

/// Hands the worker off (see [`crate::hand_off::before_long_step`]) when `spec` is about to
/// walk more than [`HEAVY_WALK`] elements. Call it with the command's gate held, right before
/// its handler runs, so that what was measured is what the handler will find.
#[inline]
pub(crate) fn hand_off_if_heavy(shared: &Shared, db: usize, spec: &CommandSpec, args: &[Bytes]) {
    if spec.flags & (WALKS_KEYSPACE | WALKS_VALUE) == 0 {
        return;
    }
    if walk_size(shared, db, spec, args) > HEAVY_WALK {
        crate::hand_off::before_long_step();
    }
}
