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
use std::fmt;

use bytes::Bytes;

/// A stream entry ID: milliseconds, then a sequence number within the millisecond. Ordered
/// as the pair, as Redis orders its 128-bit big-endian keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct StreamId {
    /// The milliseconds part.
    pub ms: u64,
    /// The sequence part.
    pub seq: u64,
}

impl StreamId {
    /// `0-0`, the smallest ID (`-`).
    pub(crate) const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    /// `18446744073709551615-18446744073709551615`, the greatest ID (`+`).
    pub(crate) const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// An ID from its two parts.
    pub(crate) const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    /// The ID right after this one, `None` past [`StreamId::MAX`].
    pub(crate) fn next(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId::new(self.ms, seq)),
            None => self.ms.checked_add(1).map(|ms| StreamId::new(ms, 0)),
        }
    }

    /// The ID right before this one, `None` before [`StreamId::MIN`].
    pub(crate) fn prev(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId::new(self.ms, seq)),
            None => self.ms.checked_sub(1).map(|ms| StreamId::new(ms, u64::MAX)),
        }
    }

    /// The ID as a client reads it, `ms-seq`.
    pub(crate) fn to_bytes(self) -> Bytes {
        Bytes::from(self.to_string())
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// One entry's fields and values, alternating (`field value field value ...`), as `XADD`
/// gave them and as `XRANGE` hands them back.
pub(crate) type Fields = Vec<Bytes>;

/// Redis's default `stream-node-max-entries`: how many entries one listpack node takes.
pub(crate) const NODE_MAX_ENTRIES: usize = 100;
/// Redis's default `stream-node-max-bytes`: how large one listpack node may grow.
pub(crate) const NODE_MAX_BYTES: usize = 4096;

/// Where Redis's listpack nodes would begin and end (see the module doc). Each node records
/// the last ID it took, how many entries it took in all, how many of them are still live, and
/// roughly how many bytes they filled.
#[derive(Clone, Debug, Default)]
pub(crate) struct Nodes {
    nodes: VecDeque<Node>,
}

#[derive(Clone, Debug)]
struct Node {
    last: StreamId,
    taken: usize,
    live: usize,
    bytes: usize,
}

impl Nodes {
    /// Records an entry appended with `id` and `bytes` of fields and values: into the last
    /// node while it has room, else into a new one.
    fn push(&mut self, id: StreamId, bytes: usize) {
        match self.nodes.back_mut() {
            Some(n) if n.taken < NODE_MAX_ENTRIES && n.bytes + bytes <= NODE_MAX_BYTES => {
                n.last = id;
                n.taken += 1;
                n.live += 1;
                n.bytes += bytes;
            }
            _ => self.nodes.push_back(Node {
                last: id,
                taken: 1,
                live: 1,
                bytes,
            }),
        }
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

/// A stream value.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stream {
    entries: BTreeMap<StreamId, Fields>,
    last_id: StreamId,
    entries_added: u64,
    max_deleted: StreamId,
    nodes: Nodes,
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

    /// The first entry's ID, `0-0` when empty (as Redis reports `recorded-first-entry-id`).
    pub(crate) fn first_id(&self) -> StreamId {
        self.entries.keys().next().copied().unwrap_or_default()
    }

    /// The first and the last entry.
    pub(crate) fn edges(&self) -> Option<((&StreamId, &Fields), (&StreamId, &Fields))> {
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

    /// Appends an entry. The caller has checked that `id` is past [`Stream::last_id`].
    pub(crate) fn append(&mut self, id: StreamId, fields: Fields) {
        debug_assert!(id > self.last_id || (self.entries_added == 0 && id > StreamId::MIN));
        let bytes = fields.iter().map(|f| f.len() + 2).sum::<usize>() + 8;
        self.nodes.push(id, bytes);
        self.entries.insert(id, fields);
        self.last_id = id;
        self.entries_added += 1;
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
