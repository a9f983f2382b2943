//! The stream type: an append-only log of entries, each a list of field/value pairs under an ID
//! `ms-seq` that only grows.
//!
//! Entries live in a [`BTreeMap`] keyed by [`StreamId`], so finding an ID or the start of a
//! range is O(log n) and walking a range is in order either way. Beside the entries a stream
//! keeps what Redis keeps in its `stream` struct: the last ID ever handed out (which deleting
//! the newest entry does not lower, so IDs are never reused), how many entries were ever added
//! (`entries-added`), and the greatest ID ever deleted (`max-deleted-entry-id`).
//!
//! Redis stores entries in listpack "nodes" of up to `stream-node-max-entries` entries, and
//! approximate trimming (`MAXLEN ~ n`) removes whole nodes only, so how many entries a `~` trim
//! leaves depends on where node boundaries fall. Clients (and Redis's own tests) see that, so
//! [`Nodes`] models the boundaries: how many entries each node took and how many of them are
//! still live. Nothing else depends on it.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

pub(crate) use crate::stream_id::{Counters, StreamId};

/// One entry's fields and values, alternating (`field value field value ...`), as `XADD`
/// gave them and as `XRANGE` hands them back.
pub(crate) type Fields = Vec<Bytes>;

/// Redis's default `stream-node-max-entries`: how many entries one listpack node takes.
pub(crate) const NODE_MAX_ENTRIES: u64 = 100;
/// Redis's default `stream-node-max-bytes`: how large one listpack node may grow.
pub(crate) const NODE_MAX_BYTES: u64 = 4096;
/// The largest listpack Redis builds, whatever `stream-node-max-bytes` says (0 included).
const LISTPACK_MAX_SIZE: u64 = 1 << 30;

/// When a node is full: `stream-node-max-entries` (0: no bound) and `stream-node-max-bytes`
/// (0: Redis's listpack ceiling).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeLimits {
    /// Entries (live and deleted) a node takes before a new one starts.
    pub max_entries: u64,
    /// Bytes a node's listpack may reach before a new one starts.
    pub max_bytes: u64,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            max_entries: NODE_MAX_ENTRIES,
            max_bytes: NODE_MAX_BYTES,
        }
    }
}

/// Where Redis's listpack nodes would begin and end (see the module doc). Each node records
/// the last ID it took, how many entries it took in all (deleted ones stay in a listpack), how
/// many of them are still live, its master entry's field names, and the size its listpack
/// would have.
#[derive(Clone, Debug, Default)]
pub(crate) struct Nodes {
    nodes: VecDeque<Node>,
}

#[derive(Clone, Debug)]
struct Node {
    master: StreamId,
    last: StreamId,
    taken: usize,
    live: usize,
    bytes: u64,
    master_fields: Vec<Bytes>,
}

/// The size of one listpack element holding `b`: a string that reads as an integer is
/// stored as one, as a listpack does. (`DEBUG OBJECT` models a list's quicklist with it.)
pub(crate) fn lp_elem(b: &[u8]) -> u64 {
    match crate::codec::parse_int(b) {
        Some(v) => lp_int(v),
        None => lp_str(b.len()),
    }
}

/// The size of one listpack element holding `n` bytes of string: its header, the bytes, the
/// backlen.
fn lp_str(n: usize) -> u64 {
    let head = match n {
        0..=63 => 1,
        64..=4095 => 2,
        _ => 5,
    };
    let body = head + n;
    (body + lp_backlen(body)) as u64
}

/// The size of one listpack element holding the integer `v`.
fn lp_int(v: i64) -> u64 {
    let body = match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8_388_608..=8_388_607 => 4,
        -2_147_483_648..=2_147_483_647 => 5,
        _ => 9,
    };
    (body + 1) as u64
}

fn lp_backlen(n: usize) -> usize {
    match n {
        0..=127 => 1,
        128..=16383 => 2,
        16384..=2097151 => 3,
        2097152..=268435455 => 4,
        _ => 5,
    }
}

impl Node {
    /// The size the node's listpack would have: what it holds, and its live and deleted
    /// counts, whose encodings grow with them.
    fn size(&self) -> u64 {
        self.bytes + lp_int(self.live as i64) + lp_int((self.taken - self.live) as i64)
    }
}

impl Nodes {
    /// Records an entry appended with `id`: into the last node while it has room, else into
    /// a new one whose master entry takes this entry's field names, as Redis decides.
    fn push(&mut self, id: StreamId, fields: &Fields, limits: NodeLimits) {
        let raw: u64 = fields.iter().map(|f| f.len() as u64).sum();
        let max_bytes = match limits.max_bytes {
            0 => LISTPACK_MAX_SIZE,
            b => b.min(LISTPACK_MAX_SIZE),
        };
        let fits = self.nodes.back().is_some_and(|n| {
            n.size() + raw < max_bytes
                && (limits.max_entries == 0 || (n.taken as u64) < limits.max_entries)
        });
        if !fits {
            let master_fields: Vec<Bytes> = fields.iter().step_by(2).cloned().collect();
            // Header and end byte, then the master entry (its live and deleted counts are
            // added by `Node::size`): the number of fields, the fields, the terminator.
            let bytes = 7
                + lp_int(master_fields.len() as i64)
                + master_fields.iter().map(|f| lp_elem(f)).sum::<u64>()
                + lp_int(0);
            self.nodes.push_back(Node {
                master: id,
                last: id,
                taken: 0,
                live: 0,
                bytes,
                master_fields,
            });
        }
        let n = self.nodes.back_mut().expect("a node was just ensured");
        let same = fields.len() == n.master_fields.len() * 2
            && fields
                .iter()
                .step_by(2)
                .zip(&n.master_fields)
                .all(|(a, b)| a == b);
        let ms = id.ms.wrapping_sub(n.master.ms) as i64;
        let seq = id.seq.wrapping_sub(n.master.seq) as i64;
        let mut entry = lp_int(0) + lp_int(ms) + lp_int(seq);
        let elements = if same {
            entry += fields
                .iter()
                .skip(1)
                .step_by(2)
                .map(|v| lp_elem(v))
                .sum::<u64>();
            3 + fields.len() / 2
        } else {
            entry += lp_int((fields.len() / 2) as i64);
            entry += fields.iter().map(|f| lp_elem(f)).sum::<u64>();
            4 + fields.len()
        };
        entry += lp_int(elements as i64);
        n.bytes += entry;
        n.last = id;
        n.taken += 1;
        n.live += 1;
    }

    /// Records a node loaded as it was (from an RDB file): its entries and how many deleted
    /// ones it kept.
    fn push_loaded(&mut self, first: StreamId, last: StreamId, live: usize, deleted: usize) {
        self.nodes.push_back(Node {
            master: first,
            last,
            taken: live + deleted,
            live,
            bytes: 0,
            master_fields: Vec::new(),
        });
    }

    /// Records that the entry `id` was deleted; a node with nothing live left goes, as Redis
    /// frees a listpack whose entries are all deleted.
    fn delete(&mut self, id: StreamId) {
        let i = self.nodes.partition_point(|n| n.last < id);
        if let Some(n) = self.nodes.get_mut(i) {
            n.live = n.live.saturating_sub(1);
            if n.live == 0 {
                self.nodes.remove(i);
            }
        }
    }

    /// The first node: how many live entries it has and the last ID it took.
    fn front(&self) -> Option<(usize, StreamId)> {
        self.nodes.front().map(|n| (n.live, n.last))
    }

    fn pop_front(&mut self) {
        self.nodes.pop_front();
    }
}

/// How `XADD`/`XTRIM` trim: down to a length, or below an ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trim {
    /// `MAXLEN n`: keep at most `n` entries.
    MaxLen(u64),
    /// `MINID id`: drop entries below `id`.
    MinId(StreamId),
}

/// An entry at one end of a stream: its ID and fields.
pub(crate) type Edge<'a> = (&'a StreamId, &'a Fields);

/// A stream value.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stream {
    entries: BTreeMap<StreamId, Fields>,
    last_id: StreamId,
    entries_added: u64,
    max_deleted: StreamId,
    nodes: Nodes,
    groups: crate::stream_group::Groups,
}

impl Stream {
    /// How many entries the stream holds (`XLEN`).
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The last ID handed out (`last-generated-id`), `0-0` for a new stream.
    pub(crate) fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// How many entries were ever added (`entries-added`).
    pub(crate) fn entries_added(&self) -> u64 {
        self.entries_added
    }

    /// The greatest ID ever deleted (`max-deleted-entry-id`), `0-0` if none.
    pub(crate) fn max_deleted(&self) -> StreamId {
        self.max_deleted
    }

    /// The consumer groups, by name.
    pub(crate) fn groups(&self) -> &crate::stream_group::Groups {
        &self.groups
    }

    /// The consumer groups, for change.
    pub(crate) fn groups_mut(&mut self) -> &mut crate::stream_group::Groups {
        &mut self.groups
    }

    /// The entries to read and the groups to change, at once.
    pub(crate) fn entries_and_groups(
        &mut self,
    ) -> (
        &BTreeMap<StreamId, Fields>,
        &mut crate::stream_group::Groups,
    ) {
        (&self.entries, &mut self.groups)
    }

    /// The counters a group's `entries-read` and lag are worked out from.
    pub(crate) fn counters(&self) -> Counters {
        Counters {
            len: self.entries.len() as u64,
            entries_added: self.entries_added,
            last_id: self.last_id,
            first_id: self.first_id(),
            max_deleted: self.max_deleted,
        }
    }

    /// The fields of the entry `id`, `None` when there is no such entry.
    pub(crate) fn entry(&self, id: StreamId) -> Option<&Fields> {
        self.entries.get(&id)
    }

    /// How many listpack nodes Redis would hold (`radix-tree-keys`).
    pub(crate) fn node_count(&self) -> usize {
        self.nodes.nodes.len()
    }

    /// The first entry's ID, `0-0` when empty (as Redis reports `recorded-first-entry-id`).
    pub(crate) fn first_id(&self) -> StreamId {
        self.entries.keys().next().copied().unwrap_or_default()
    }

    /// The first and the last entry.
    pub(crate) fn edges(&self) -> Option<(Edge<'_>, Edge<'_>)> {
        Some((
            self.entries.first_key_value()?,
            self.entries.last_key_value()?,
        ))
    }

    /// The ID `XADD *` would give now, at `now_ms`: the clock, or one past the last ID when
    /// the clock is behind it. `None` when the last ID is the greatest there is.
    pub(crate) fn next_auto_id(&self, now_ms: u64) -> Option<StreamId> {
        if now_ms > self.last_id.ms {
            Some(StreamId::new(now_ms, 0))
        } else {
            self.last_id.next()
        }
    }

    /// The ID `XADD ms-*` gives: `ms-0` past the last ID's millisecond, the next sequence in
    /// it; `None` when `ms` is behind the last ID or its sequence is exhausted.
    pub(crate) fn next_id_in(&self, ms: u64) -> Option<StreamId> {
        if ms > self.last_id.ms {
            Some(StreamId::new(ms, 0))
        } else if ms == self.last_id.ms {
            self.last_id
                .seq
                .checked_add(1)
                .map(|s| StreamId::new(ms, s))
        } else {
            None
        }
    }

    /// Appends an entry, into the last node or a new one as `limits` say. The caller has
    /// checked that `id` is past [`Stream::last_id`].
    pub(crate) fn append(&mut self, id: StreamId, fields: Fields, limits: NodeLimits) {
        debug_assert!(id > self.last_id);
        self.nodes.push(id, &fields, limits);
        self.entries.insert(id, fields);
        self.last_id = id;
        self.entries_added += 1;
    }

    /// Appends one node's live entries as an RDB file had them (ascending, past every entry
    /// already there), with the count of deleted entries the node kept. Leaves the last ID
    /// and `entries-added` to [`Stream::set_id`].
    pub(crate) fn load_node(&mut self, entries: Vec<(StreamId, Fields)>, deleted: usize) {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return;
        };
        self.nodes
            .push_loaded(first.0, last.0, entries.len(), deleted);
        self.entries.extend(entries);
    }

    /// The entries node by node, as an RDB file stores them.
    pub(crate) fn nodes(&self) -> Vec<Vec<(StreamId, &Fields)>> {
        let mut out = Vec::new();
        let mut from = StreamId::MIN;
        for n in &self.nodes.nodes {
            let entries = self.range(from, n.last, false, usize::MAX);
            if !entries.is_empty() {
                out.push(entries);
            }
            match n.last.next() {
                Some(next) => from = next,
                None => return out,
            }
        }
        out
    }

    /// Deletes the entry `id`; whether it was there (`XDEL`).
    pub(crate) fn delete(&mut self, id: StreamId) -> bool {
        if self.entries.remove(&id).is_none() {
            return false;
        }
        self.nodes.delete(id);
        if id > self.max_deleted {
            self.max_deleted = id;
        }
        true
    }

    /// Sets the last ID, and optionally `entries-added` and `max-deleted-entry-id`
    /// (`XSETID`); the caller checked them against the entries.
    pub(crate) fn set_id(&mut self, last: StreamId, added: Option<u64>, deleted: Option<StreamId>) {
        self.last_id = last;
        if let Some(a) = added {
            self.entries_added = a;
        }
        if let Some(d) = deleted {
            self.max_deleted = d;
        }
    }

    /// The entries from `start` to `end` (both inclusive), forward or backward, at most
    /// `count` of them.
    pub(crate) fn range(
        &self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        count: usize,
    ) -> Vec<(StreamId, &Fields)> {
        if start > end {
            return Vec::new();
        }
        let it = self.entries.range(start..=end).map(|(id, f)| (*id, f));
        if rev {
            it.rev().take(count).collect()
        } else {
            it.take(count).collect()
        }
    }

    /// Trims as `XADD`/`XTRIM` ask: exactly, or (`approx`) whole nodes only, removing at most
    /// `limit` entries when `limit` is not zero (Redis stops before a node that would pass
    /// it). Returns how many entries went.
    pub(crate) fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut removed = 0u64;
        let past = |s: &Stream, id: StreamId| match how {
            Trim::MaxLen(n) => s.entries.len() as u64 > n,
            Trim::MinId(min) => id < min,
        };
        // Whole nodes first: the oldest node goes while everything in it is to go.
        while let Some((live, last)) = self.nodes.front() {
            let whole = match how {
                Trim::MaxLen(n) => (self.entries.len() - live) as u64 >= n,
                Trim::MinId(min) => last < min,
            };
            if !whole || (limit != 0 && removed + live as u64 > limit) {
                break;
            }
            let keep = self
                .entries
                .split_off(&last.next().unwrap_or(StreamId::MAX));
            let gone = std::mem::replace(&mut self.entries, keep);
            if last == StreamId::MAX {
                // `split_off(MAX)` left MAX itself behind: it belongs to this node.
                self.entries.remove(&StreamId::MAX);
                removed += 1;
            }
            removed += gone.len() as u64;
            self.nodes.pop_front();
        }
        if approx {
            return removed;
        }
        // Then entry by entry, from the oldest, as Redis marks them deleted in the first node.
        while let Some((&id, _)) = self.entries.first_key_value() {
            if !past(self, id) {
                break;
            }
            self.entries.remove(&id);
            self.nodes.delete(id);
            removed += 1;
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Fields {
        vec![Bytes::from_static(b"f"), Bytes::from_static(b"v")]
    }

    #[test]
    fn ids_step_across_the_millisecond_and_stop_at_the_ends() {
        assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::new(2, 0).prev(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(StreamId::MIN.prev(), None);
        assert_eq!(StreamId::new(5, 7).to_bytes(), Bytes::from_static(b"5-7"));
    }

    #[test]
    fn whole_nodes_go_first_and_an_exact_trim_finishes_entry_by_entry() {
        let mut s = Stream::default();
        let limits = NodeLimits {
            max_entries: 10,
            max_bytes: 0,
        };
        for i in 1..=35 {
            s.append(StreamId::new(i, 0), fields(), limits);
        }
        assert_eq!(s.node_count(), 4);
        // `~ 20`: only the first node (10 entries) can go whole; the second would leave 15.
        assert_eq!(s.trim(Trim::MaxLen(20), true, 0), 10);
        assert_eq!(s.len(), 25);
        // A limit smaller than a node stops before it.
        assert_eq!(s.trim(Trim::MaxLen(0), true, 9), 0);
        // Exact: a whole node, then entries of the next.
        assert_eq!(s.trim(Trim::MaxLen(12), false, 0), 13);
        assert_eq!(s.first_id(), StreamId::new(24, 0));
        assert_eq!(s.trim(Trim::MinId(StreamId::new(30, 0)), false, 0), 6);
        assert_eq!(s.first_id(), StreamId::new(30, 0));
        assert_eq!(s.len(), 6);
    }

    #[test]
    fn the_greatest_id_is_trimmed_with_its_node() {
        let mut s = Stream::default();
        s.append(StreamId::new(1, 0), fields(), NodeLimits::default());
        s.append(StreamId::MAX, fields(), NodeLimits::default());
        assert_eq!(s.trim(Trim::MaxLen(0), true, 0), 2);
        assert_eq!(s.len(), 0);
        assert_eq!(s.last_id(), StreamId::MAX);
        assert_eq!(s.first_id(), StreamId::MIN);
    }

    #[test]
    fn deleting_every_entry_of_a_node_drops_the_node() {
        let mut s = Stream::default();
        let limits = NodeLimits {
            max_entries: 2,
            max_bytes: 0,
        };
        for i in 1..=4 {
            s.append(StreamId::new(i, 0), fields(), limits);
        }
        assert!(s.delete(StreamId::new(1, 0)));
        assert!(!s.delete(StreamId::new(1, 0)));
        assert_eq!(s.node_count(), 2);
        assert!(s.delete(StreamId::new(2, 0)));
        assert_eq!(s.node_count(), 1);
        assert_eq!(s.max_deleted(), StreamId::new(2, 0));
        assert_eq!(s.nodes().len(), 1);
    }
}
