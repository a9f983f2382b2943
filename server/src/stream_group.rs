//! Consumer groups of a stream: what each group has delivered, to whom, and what is still
//! waiting for an acknowledgement.
//!
//! A group remembers the last ID it delivered (`last-delivered-id`) and how many entries it
//! has read since the stream began (`entries-read`, `-1` when that cannot be known). Every
//! entry delivered and not yet acknowledged (`XACK`) is *pending*: it sits in the group's
//! pending entries list (the PEL), keyed by its ID, with the consumer that holds it, when it was
//! last delivered and how many times. Each consumer keeps the IDs it holds, so that it can read
//! its own history and `XINFO CONSUMERS` can count them. Redis keeps all of these in radix
//! trees ordered by the bytes of the name or the big-endian ID; [`BTreeMap`]s keyed by [`Bytes`]
//! and [`StreamId`] walk in the same order.
//!
//! The lag of a group (how many entries it has yet to read) is worked out from the stream's
//! counters as Redis 7.0 does: exactly when no deleted entry lies ahead of the group, else
//! estimated from where the group stands, else unknown (see [`lag`]).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::stream_id::{Counters, StreamId};

/// `entries-read` when it cannot be known (Redis's `SCG_INVALID_ENTRIES_READ`).
pub(crate) const INVALID_ENTRIES_READ: i64 = -1;

/// One pending entry: who holds it, when it was last delivered, how many times it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Nack {
    /// The consumer the entry was last delivered to.
    pub consumer: Bytes,
    /// When it was last delivered, in Unix milliseconds.
    pub delivery_time: u64,
    /// How many times it was delivered.
    pub delivery_count: u64,
}

/// A consumer of a group: when it was last seen, and the IDs it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Consumer {
    /// When it last read or claimed (or was created), in Unix milliseconds.
    pub seen_time: u64,
    /// The IDs of the pending entries it holds (each is also in the group's PEL).
    pub pel: BTreeSet<StreamId>,
}

/// A consumer group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Group {
    /// The last ID delivered to the group (`last-delivered-id`).
    pub last_id: StreamId,
    /// How many entries the group read (`entries-read`), [`INVALID_ENTRIES_READ`] if unknown.
    pub entries_read: i64,
    /// The pending entries, by ID.
    pub pel: BTreeMap<StreamId, Nack>,
    /// The consumers, by name.
    pub consumers: BTreeMap<Bytes, Consumer>,
}

/// A stream's groups, by name.
pub(crate) type Groups = BTreeMap<Bytes, Group>;

impl Group {
    /// A group with nothing delivered yet past `last_id`.
    pub(crate) fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            pel: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }

    /// The consumer `name`, created (seen at `now`) when missing; whether it was created.
    pub(crate) fn consumer(&mut self, name: &Bytes, now: u64) -> (&mut Consumer, bool) {
        let created = !self.consumers.contains_key(name);
        let c = self
            .consumers
            .entry(name.clone())
            .or_insert_with(|| Consumer {
                seen_time: now,
                pel: BTreeSet::new(),
            });
        (c, created)
    }

    /// Records that `id` was delivered to `consumer` at `now` by a read of new entries: a new
    /// pending entry, or (the group's last ID was moved back) the existing one handed to
    /// `consumer` with its count started again at 1. The consumer must exist.
    pub(crate) fn deliver(&mut self, id: StreamId, consumer: &Bytes, now: u64) {
        if let Some(old) = self.pel.get(&id).map(|n| n.consumer.clone()) {
            if let Some(c) = self.consumers.get_mut(&old) {
                c.pel.remove(&id);
            }
        }
        self.pel.insert(
            id,
            Nack {
                consumer: consumer.clone(),
                delivery_time: now,
                delivery_count: 1,
            },
        );
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.pel.insert(id);
        }
    }

    /// Hands the pending entry `id` to `consumer` (which must exist), or creates it held by
    /// `consumer` (`XCLAIM ... FORCE`). Its delivery time and count are then the caller's.
    pub(crate) fn assign(&mut self, id: StreamId, consumer: &Bytes) -> &mut Nack {
        let old = self.pel.get(&id).map(|n| n.consumer.clone());
        if old.as_ref() != Some(consumer) {
            if let Some(c) = old.and_then(|o| self.consumers.get_mut(&o)) {
                c.pel.remove(&id);
            }
            if let Some(c) = self.consumers.get_mut(consumer) {
                c.pel.insert(id);
            }
        }
        let nack = self.pel.entry(id).or_insert_with(|| Nack {
            consumer: consumer.clone(),
            delivery_time: 0,
            delivery_count: 1,
        });
        nack.consumer = consumer.clone();
        nack
    }

    /// Removes the pending entry `id` (acknowledged, or its entry deleted); whether it was
    /// pending.
    pub(crate) fn remove(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(n) => {
                if let Some(c) = self.consumers.get_mut(&n.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Deletes the consumer `name` and the entries it held; how many it held, `None` when
    /// there was no such consumer.
    pub(crate) fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    /// Notes that the group read `id`, past its last ID (`>` reads): moves the last ID and
    /// keeps `entries-read` counting when it can, as Redis does.
    pub(crate) fn advance(&mut self, s: &Counters, id: StreamId) {
        if self.entries_read != INVALID_ENTRIES_READ && !has_tombstones_from(s, id) {
            self.entries_read += 1;
        } else if s.entries_added > 0 {
            self.entries_read = estimate_entries_read(s, id);
        }
        self.last_id = id;
    }
}

/// Whether a deleted entry may lie at or after `start` (Redis's `streamRangeHasTombstones`
/// with no end): the greatest deleted ID is not behind `start` nor before the first entry.
pub(crate) fn has_tombstones_from(s: &Counters, start: StreamId) -> bool {
    let deleted = s.max_deleted;
    if s.len == 0 || deleted == StreamId::MIN {
        return false;
    }
    if s.first_id > deleted {
        return false;
    }
    start <= deleted
}

/// How many entries come up to `id` since the stream began, when that can be known from the
/// counters (Redis's `streamEstimateDistanceFromFirstEverEntry`), else
/// [`INVALID_ENTRIES_READ`].
pub(crate) fn estimate_entries_read(s: &Counters, id: StreamId) -> i64 {
    let added = s.entries_added as i64;
    if added == 0 {
        return 0;
    }
    if s.len == 0 && id <= s.last_id {
        return added;
    }
    if id == s.last_id {
        return added;
    } else if id > s.last_id {
        return INVALID_ENTRIES_READ;
    }
    let deleted = s.max_deleted;
    if deleted == StreamId::MIN || deleted < s.first_id {
        let first = s.first_id;
        if id < first {
            return added - s.len as i64;
        } else if id == first {
            return added - s.len as i64 + 1;
        }
    }
    INVALID_ENTRIES_READ
}

/// The lag of `g` (entries added that it has not read), `None` when unknown (Redis's
/// `streamReplyWithCGLag`).
pub(crate) fn lag(s: &Counters, g: &Group) -> Option<i64> {
    let added = s.entries_added as i64;
    if added == 0 {
        return Some(0);
    }
    if g.entries_read != INVALID_ENTRIES_READ && !has_tombstones_from(s, g.last_id) {
        return Some(added - g.entries_read);
    }
    match estimate_entries_read(s, g.last_id) {
        INVALID_ENTRIES_READ => None,
        read => Some(added - read),
    }
}

#[cfg(test)]
mod tests;
