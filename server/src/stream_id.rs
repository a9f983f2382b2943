//! A stream entry's ID (`ms-seq`) and the counts a stream keeps beside its entries: the
//! vocabulary that the stream type and its consumer groups share, below both.

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

/// What a stream counts, copied out of it: enough to work out a consumer group's
/// `entries-read` and lag while the group itself is being changed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counters {
    /// How many entries the stream holds.
    pub len: u64,
    /// How many entries were ever added.
    pub entries_added: u64,
    /// The last ID handed out.
    pub last_id: StreamId,
    /// The first entry's ID, `0-0` when empty.
    pub first_id: StreamId,
    /// The greatest ID ever deleted.
    pub max_deleted: StreamId,
}
