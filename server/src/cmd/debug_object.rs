//! `DEBUG OBJECT key`: Redis's one-line description of how a key's value is kept.
//!
//! Redis 7.0.15 answers a status line:
//!
//! ```text
//! Value at:0x7f.. refcount:1 encoding:embstr serializedlength:6 lru:722245 lru_seconds_idle:0
//! ```
//!
//! and, for a list (a quicklist in 7.0), ` ql_nodes:.. ql_avg_node:.. ql_listpack_max:..
//! ql_compressed:.. ql_uncompressed_size:..` after it. latchkey fills each field from what it
//! has:
//!
//! - `at` is the address of the value in latchkey's keyspace (it means as little to a client
//!   as Redis's pointer does);
//! - `refcount` and `encoding` are what `OBJECT REFCOUNT` and `OBJECT ENCODING` answer;
//! - `serializedlength` is the length of the value's body as latchkey's own RDB writer writes
//!   it for `DUMP` (the bytes between the type byte and the footer, strings compressed as
//!   Redis compresses them). It is Redis's number for strings and intsets; for other
//!   collections latchkey writes the plain RDB forms, not Redis's listpacks, so the number
//!   differs (see `docs/COMPATIBILITY.md`);
//! - `lru` is Redis's 24-bit LRU clock (seconds) of the key's last use, or under an LFU policy
//!   the minute stamp and counter Redis keeps in the same field; `lru_seconds_idle` is
//!   Redis's estimate from it;
//! - the `ql_*` fields describe the quicklist Redis would have built by pushing the list's
//!   elements in order under the `list-max-listpack-size` and `list-compress-depth` the list
//!   was made with (as Redis's quicklist, each list keeps its own; `SORT ... STORE` makes
//!   its list with Redis's built-in -2 and 0, as Redis does):
//!   latchkey keeps its own chunks (see [`crate::list`]), so a list built in another order
//!   (`LPUSH`, `LINSERT`) may have other node boundaries on Redis.
//!
//! As in Redis, the key is looked up without checking its expiry and without counting as a
//! use, and a missing key answers `ERR no such key`.

use bytes::Bytes;

use super::Ctx;
use crate::db::Value;
use crate::frame::Frame;
use crate::list::List;

/// Redis's `SIZE_SAFETY_LIMIT`: no quicklist node grows past this many bytes by count alone.
const SIZE_SAFETY_LIMIT: usize = 8192;
/// Redis's `SIZE_ESTIMATE_OVERHEAD`: what an insertion is assumed to add beyond the element.
const SIZE_ESTIMATE_OVERHEAD: usize = 8;
/// Redis's quicklist node sizes for `list-max-listpack-size` -1 to -5.
const OPTIMIZATION_LEVEL: [usize; 5] = [4096, 8192, 16384, 32768, 65536];
/// The bytes of an empty listpack: its 6-byte header and its end byte.
const LISTPACK_EMPTY: usize = 7;

/// Runs `DEBUG OBJECT key` (the dispatcher of `DEBUG` checked the argument count).
pub(crate) fn debug_object(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    // A time of 0 neither judges expiry nor touches the access stamp (Redis's `dictFind`).
    let Some(e) = ctx.db().get(&args[2], 0, false) else {
        return Frame::error("ERR no such key");
    };
    let limits = &ctx.shared.config.limits;
    let now_ms = ctx.now_ms;
    let clock = ((now_ms / 1000) & 0xFF_FFFF) as u32;
    let score = e.access.score(now_ms, limits);
    let lru = if limits.policy().lfu() {
        let minutes = ((now_ms / 60_000) & 0xFFFF) as u32;
        (minutes << 8) | (255u64.saturating_sub(score) as u32)
    } else {
        (((now_ms.saturating_sub(score)) / 1000) & 0xFF_FFFF) as u32
    };
    // Redis's estimateObjectIdleTime, in seconds, wrapping as its 24-bit clock does.
    let idle = if clock >= lru {
        (clock - lru) as u64
    } else {
        clock as u64 + (0xFF_FFFF - lru as u64)
    };
    // The payload `DUMP` answers, less its type byte and its footer (the RDB version, two
    // bytes, and the CRC-64, eight): the body as written with Redis's string compression.
    let serialized = crate::rdb::dump::payload(&e.value).len().saturating_sub(11);
    let mut line = format!(
        "Value at:{:p} refcount:{} encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}",
        &e.value as *const Value,
        super::object::refcount(&e.value),
        super::object::encoding(ctx, &e.value),
        serialized,
        lru,
        idle
    );
    if let Value::List(list) = &e.value {
        line.push_str(&quicklist_fields(list));
    }
    Frame::Simple(Bytes::from(line))
}

/// The `ql_*` fields of a list: the quicklist Redis 7.0 builds by pushing `list`'s elements
/// one after the other at its tail.
/// The list's own options are used, as Redis's quicklist keeps the ones it was made with
/// (`CONFIG SET` changes only the lists made afterwards; see [`List::set_options`]).
fn quicklist_fields(list: &List) -> String {
    let fill = list.fill();
    let compressed = list.compress_depth() != 0;
    let mut nodes: Vec<(usize, usize)> = Vec::new(); // (bytes, count) of each node
    for elem in list.iter() {
        let added = crate::stream::lp_elem(elem) as usize;
        match nodes.last_mut() {
            Some(last) if allow_insert(last.0, last.1, fill, elem.len()) => {
                last.0 += added;
                last.1 += 1;
            }
            _ => nodes.push((LISTPACK_EMPTY + added, 1)),
        }
    }
    let count: usize = nodes.iter().map(|n| n.1).sum();
    let size: usize = nodes.iter().map(|n| n.0).sum();
    // A C division of a count by zero nodes, as Redis prints it (an empty list never exists).
    let avg = count as f64 / nodes.len() as f64;
    format!(
        " ql_nodes:{} ql_avg_node:{:.2} ql_listpack_max:{} ql_compressed:{} ql_uncompressed_size:{}",
        nodes.len(),
        avg,
        fill,
        u8::from(compressed),
        size
    )
}

/// Redis's `_quicklistNodeAllowInsert`: whether a node of `bytes` bytes and `count` elements
/// takes one more element of `len` bytes under `fill`.
fn allow_insert(bytes: usize, count: usize, fill: i64, len: usize) -> bool {
    let new_sz = bytes + len + SIZE_ESTIMATE_OVERHEAD;
    if fill < 0 {
        let level = (-fill - 1) as usize;
        if OPTIMIZATION_LEVEL
            .get(level)
            .is_some_and(|&max| new_sz <= max)
        {
            return true;
        }
    }
    new_sz <= SIZE_SAFETY_LIMIT && (count as i64) < fill
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_nodes_hold_8_kib() {
        // Under -2 a node takes an element while its size plus the element and 8 stays
        // within 8192 bytes; by count (a positive fill) only below the safety limit.
        assert!(allow_insert(8000, 10, -2, 184));
        assert!(!allow_insert(8000, 10, -2, 185));
        assert!(allow_insert(100, 4, 5, 10));
        assert!(!allow_insert(100, 5, 5, 10));
        assert!(!allow_insert(8190, 1, 100, 1));
    }
}
