//! Loading a stream from Redis's RDB forms (`RDB_TYPE_STREAM_LISTPACKS`, `_2` of Redis 7.0,
//! `_3` of 7.2): the layout [`super::stream_write`] describes, read back entry by entry.
//!
//! Everything is checked as it is read (IDs ascending, counts that add up, flags known), so a
//! damaged payload is refused with an error instead of building a stream that breaks the
//! rules the commands rely on. Consumer groups are not held by latchkey yet: a stream that has
//! any is refused, naming the reason, rather than loaded without them.

use bytes::Bytes;

use super::packed;
use super::reader::{err, Reader};
use super::{kind, RdbError};
use crate::stream::{Stream, StreamId};

/// An entry flag: the entry was deleted (it stays in the listpack, skipped).
const DELETED: i64 = 1;
/// An entry flag: the entry has the master entry's fields, so only its values follow.
const SAME_FIELDS: i64 = 2;

/// A length read as a 64-bit number (IDs are written as RDB lengths).
fn u64_len(r: &mut Reader<'_>) -> Result<u64, RdbError> {
    match r.len_or_special()? {
        (n, false) => Ok(n),
        _ => Err(err("stream: expected a number")),
    }
}

fn id(r: &mut Reader<'_>) -> Result<StreamId, RdbError> {
    Ok(StreamId::new(u64_len(r)?, u64_len(r)?))
}

/// Walks a node's listpack elements in order.
struct Elements {
    items: std::vec::IntoIter<Bytes>,
}

impl Elements {
    fn next(&mut self) -> Result<Bytes, RdbError> {
        self.items
            .next()
            .ok_or_else(|| err("stream: listpack node ends inside an entry"))
    }

    fn int(&mut self) -> Result<i64, RdbError> {
        let b = self.next()?;
        std::str::from_utf8(&b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| err("stream: listpack element is not an integer"))
    }

    fn count(&mut self) -> Result<usize, RdbError> {
        usize::try_from(self.int()?).map_err(|_| err("stream: negative count"))
    }
}

/// The stream of a value of type `t`.
pub(super) fn stream(r: &mut Reader<'_>, t: u8) -> Result<Stream, RdbError> {
    let mut s = Stream::default();
    let nodes = r.len()?;
    let mut last_seen: Option<StreamId> = None;
    for _ in 0..nodes {
        let key = r.string()?;
        if key.len() != 16 {
            return Err(err("stream: node key is not a 16-byte ID"));
        }
        let master = StreamId::new(
            u64::from_be_bytes(key[..8].try_into().expect("8 bytes")),
            u64::from_be_bytes(key[8..].try_into().expect("8 bytes")),
        );
        let mut el = Elements {
            items: packed::listpack(&r.string()?)?.into_iter(),
        };
        let live = el.count()?;
        let deleted = el.count()?;
        let nfields = el.count()?;
        let mut master_fields = Vec::with_capacity(nfields.min(1024));
        for _ in 0..nfields {
            master_fields.push(el.next()?);
        }
        if el.int()? != 0 {
            return Err(err("stream: master entry without its terminator"));
        }
        let mut kept = Vec::with_capacity(live.min(4096));
        for _ in 0..live.saturating_add(deleted) {
            let flags = el.int()?;
            if flags & !(DELETED | SAME_FIELDS) != 0 {
                return Err(err("stream: unknown entry flags"));
            }
            let ms = master
                .ms
                .checked_add(el.int()? as u64)
                .ok_or_else(|| err("stream: entry ID overflows"))?;
            // The sequence difference may be negative (a later millisecond, a lower
            // sequence): Redis writes it as the wrapped 64-bit difference.
            let seq = master.seq.wrapping_add(el.int()? as u64);
            let id = StreamId::new(ms, seq);
            let fields = if flags & SAME_FIELDS != 0 {
                let mut f = Vec::with_capacity(nfields * 2);
                for name in &master_fields {
                    f.push(name.clone());
                    f.push(el.next()?);
                }
                f
            } else {
                let n = el.count()?;
                let mut f = Vec::with_capacity(n.min(1024) * 2);
                for _ in 0..n * 2 {
                    f.push(el.next()?);
                }
                f
            };
            el.int()?; // lp-count
            if last_seen.is_some_and(|l| id <= l) {
                return Err(err("stream: entry IDs out of order"));
            }
            last_seen = Some(id);
            if flags & DELETED == 0 {
                kept.push((id, fields));
            }
        }
        if kept.len() != live {
            return Err(err("stream: node's live count does not match its entries"));
        }
        s.load_node(kept, deleted);
    }
    let length = u64_len(r)?;
    if length != s.len() as u64 {
        return Err(err("stream: length does not match the entries"));
    }
    let last = id(r)?;
    let (max_deleted, added) = if t == kind::STREAM_LISTPACKS {
        (StreamId::MIN, length)
    } else {
        let _first = id(r)?;
        let max_deleted = id(r)?;
        (max_deleted, u64_len(r)?)
    };
    if last_seen.is_some_and(|l| last < l) {
        return Err(err("stream: last ID below an entry's"));
    }
    s.set_id(last, Some(added), Some(max_deleted));
    if r.len()? != 0 {
        return Err(err(
            "stream with consumer groups, which latchkey does not hold yet",
        ));
    }
    Ok(s)
}
