//! Loading a stream from Redis's RDB forms (`RDB_TYPE_STREAM_LISTPACKS`, `_2` of Redis 7.0,
//! `_3` of 7.2): the layout [`super::stream_write`] describes, read back entry by entry.
//!
//! Everything is checked as it is read (IDs ascending, counts that add up, flags known), so a
//! damaged payload is refused with an error instead of building a stream that breaks the
//! rules the commands rely on. Consumer groups follow (see [`groups`]): every count is checked
//! against the bytes that are left before anything is allocated for it, a pending entry must
//! be held by exactly one consumer, and names are unique, so that a hostile payload cannot
//! build a group the commands would trip over.

use bytes::Bytes;

use super::packed;
use super::reader::{err, Reader};
use super::{kind, RdbError};
use crate::stream::{Counters, Stream, StreamId};
use crate::stream_group::{estimate_entries_read, Consumer, Group, Groups, Nack};

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
    let counters = s.counters();
    *s.groups_mut() = groups(r, t, &counters)?;
    Ok(s)
}

/// A count read from the payload that says how many items of at least `min_bytes` bytes
/// follow: refused when the bytes left cannot hold them.
fn count(r: &mut Reader<'_>, min_bytes: usize) -> Result<usize, RdbError> {
    let n = r.len()?;
    if n.saturating_mul(min_bytes) > r.remaining() {
        return Err(err("stream: a count larger than the payload"));
    }
    Ok(n)
}

/// A 16-byte big-endian ID (a pending entry's).
fn raw_id(r: &mut Reader<'_>) -> Result<StreamId, RdbError> {
    let b = r.bytes(16)?;
    Ok(StreamId::new(
        u64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
        u64::from_be_bytes(b[8..].try_into().expect("8 bytes")),
    ))
}

/// The consumer groups of a stream of type `t` (Redis 7.2's `_3` adds each consumer's
/// active time, read and dropped; the older form has no `entries-read`, which is then
/// estimated from where the group stands, as Redis does).
fn groups(r: &mut Reader<'_>, t: u8, counters: &Counters) -> Result<Groups, RdbError> {
    let mut out = Groups::new();
    // A group takes at least its name's length, two ID parts and two counts.
    let n = count(r, 5)?;
    for _ in 0..n {
        let name = r.string()?;
        let last = id(r)?;
        let entries_read = if t == kind::STREAM_LISTPACKS {
            estimate_entries_read(counters, last)
        } else {
            u64_len(r)? as i64
        };
        let mut g = Group::new(last, entries_read);
        let pending = count(r, 16 + 8 + 1)?;
        for _ in 0..pending {
            let pid = raw_id(r)?;
            let delivery_time = r.le(8)?;
            let delivery_count = u64_len(r)?;
            let nack = Nack {
                consumer: Bytes::new(),
                delivery_time,
                delivery_count,
            };
            if g.pel.insert(pid, nack).is_some() {
                return Err(err("stream: a pending entry listed twice"));
            }
        }
        // Which pending entries a consumer claimed (a consumer's name may be empty, so the
        // entries' own holder cannot tell).
        let mut owned = std::collections::BTreeSet::new();
        let consumers = count(r, 1 + 8 + 1)?;
        for _ in 0..consumers {
            let cname = r.string()?;
            let seen_time = r.le(8)?;
            if t == kind::STREAM_LISTPACKS_3 {
                r.le(8)?; // active time (Redis 7.2)
            }
            let held = count(r, 16)?;
            let mut c = Consumer {
                seen_time,
                pel: Default::default(),
            };
            for _ in 0..held {
                let pid = raw_id(r)?;
                match g.pel.get_mut(&pid) {
                    Some(n) if owned.insert(pid) => {
                        n.consumer = cname.clone();
                        c.pel.insert(pid);
                    }
                    Some(_) => return Err(err("stream: a pending entry held twice")),
                    None => {
                        return Err(err("stream: a consumer holds an entry that is not pending"))
                    }
                }
            }
            if g.consumers.insert(cname, c).is_some() {
                return Err(err("stream: a consumer listed twice"));
            }
        }
        if owned.len() != g.pel.len() {
            return Err(err("stream: a pending entry held by no consumer"));
        }
        if out.insert(name, g).is_some() {
            return Err(err("stream: a consumer group listed twice"));
        }
    }
    Ok(out)
}
