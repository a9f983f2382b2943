//! Writing an RDB snapshot of the keyspace, in encodings redis-server 7.0 loads.
//!
//! Values use the plain, legacy encodings (`HASH`, `LIST`, `ZSET_2`): one length, then the
//! elements one by one. They are the simplest to write, and Redis converts them to its compact
//! encodings as it loads them.

use bytes::{BufMut, Bytes, BytesMut};

use super::{kind, opcode, CRC64, VERSION};
use crate::db::Value;
use crate::frame::Frame;
use crate::state::Shared;

/// Where the replication stream stands when the snapshot is taken; goes into the `AUX` fields
/// so that a loader can pick the stream up from there.
#[derive(Debug, Clone)]
pub(crate) struct ReplInfo {
    /// The master's replication id.
    pub replid: String,
    /// The master's replication offset at the snapshot.
    pub offset: u64,
    /// The database the stream's next command applies to (`-1`: unknown, a `SELECT` follows).
    pub stream_db: i64,
}

/// Appends an RDB length: 6 bits in one byte, 14 bits in two, else a marker byte and 32 or 64
/// bits big-endian.
pub(crate) fn len(out: &mut BytesMut, n: u64) {
    if n < 1 << 6 {
        out.put_u8(n as u8);
    } else if n < 1 << 14 {
        out.put_u8(0x40 | (n >> 8) as u8);
        out.put_u8(n as u8);
    } else if n <= u32::MAX as u64 {
        out.put_u8(0x80);
        out.put_u32(n as u32);
    } else {
        out.put_u8(0x81);
        out.put_u64(n);
    }
}

/// Strings from this length on are LZF-compressed. Redis compresses from 21 bytes, but the
/// `lzf` crate allocates and clears a 512 KB hash table on every call, which costs far more than it saves on
/// short strings, and the snapshot is taken while every client waits.
const LZF_MIN_LEN: usize = 4096;

/// Appends a string. Like Redis, a string that is the canonical decimal form of a small
/// integer is stored as that integer (one to four bytes after a marker), and a long one is
/// LZF-compressed when Redis would compress it (saving at least 4 bytes, see `lzf_room`).
pub(crate) fn string(out: &mut BytesMut, s: &[u8]) {
    string_compressing_from(out, s, LZF_MIN_LEN);
}

/// Like [`string`], but compressing from `min_len` bytes on (Redis compresses from 21).
pub(crate) fn string_compressing_from(out: &mut BytesMut, s: &[u8], min_len: usize) {
    if let Some(v) = small_int(s) {
        if let Ok(v) = i8::try_from(v) {
            out.put_u8(0xC0);
            out.put_i8(v);
        } else if let Ok(v) = i16::try_from(v) {
            out.put_u8(0xC1);
            out.put_i16_le(v);
        } else {
            out.put_u8(0xC2);
            out.put_i32_le(v);
        }
        return;
    }
    if s.len() >= min_len.max(5) {
        if let Ok(packed) = lzf::compress(s) {
            // Kept when Redis would keep it: liblzf into `len - 4` bytes, finishing (see
            // `lzf_room`), so the bytes are Redis's.
            if super::lzf_room::fits(&packed, s.len(), s.len() - 4) {
                out.put_u8(0xC3);
                len(out, packed.len() as u64);
                len(out, s.len() as u64);
                out.put_slice(&packed);
                return;
            }
        }
    }
    len(out, s.len() as u64);
    out.put_slice(s);
}

/// The value of `s` when it is exactly how Redis prints an `i32` (no sign on zero, no leading
/// zeros), so that the integer encoding reads back as the same bytes.
fn small_int(s: &[u8]) -> Option<i32> {
    if s.is_empty() || s.len() > 11 {
        return None;
    }
    let v: i32 = std::str::from_utf8(s).ok()?.parse().ok()?;
    (v.to_string().as_bytes() == s).then_some(v)
}

fn aux(out: &mut BytesMut, key: &str, value: &str) {
    out.put_u8(opcode::AUX);
    string(out, key.as_bytes());
    string(out, value.as_bytes());
}

/// The code of every loaded function library, for the `FUNCTION2` records (of a snapshot,
/// or of `FUNCTION DUMP`).
pub(crate) fn function_libraries(shared: &Shared) -> Vec<Bytes> {
    let Frame::Array(libs) = shared.scripting().list_libraries(None, true) else {
        return Vec::new();
    };
    libs.into_iter()
        .filter_map(|lib| match lib {
            Frame::Map(fields) => fields.into_iter().find_map(|(k, v)| match (k, v) {
                (Frame::Bulk(k), Frame::Bulk(code)) if &k[..] == b"library_code" => Some(code),
                _ => None,
            }),
            _ => None,
        })
        .collect()
}

/// Serialises every live key of every database (and the function libraries) as an RDB file.
pub(crate) fn snapshot(shared: &Shared, repl: &ReplInfo) -> Bytes {
    let mut out = BytesMut::with_capacity(4096);
    out.put_slice(format!("REDIS{VERSION:04}").as_bytes());
    let now = shared.clock.now_ms();
    aux(&mut out, "redis-ver", crate::config::REDIS_VERSION);
    aux(&mut out, "redis-bits", "64");
    aux(&mut out, "ctime", &(now / 1000).to_string());
    aux(&mut out, "used-mem", "0");
    aux(&mut out, "repl-stream-db", &repl.stream_db.to_string());
    aux(&mut out, "repl-id", &repl.replid);
    aux(&mut out, "repl-offset", &repl.offset.to_string());
    aux(&mut out, "aof-base", "0");
    for code in function_libraries(shared) {
        out.put_u8(opcode::FUNCTION2);
        string(&mut out, &code);
    }
    for (i, db) in shared.keyspace.iter() {
        let entries = db.snapshot(now);
        if entries.is_empty() {
            continue;
        }
        out.put_u8(opcode::SELECTDB);
        len(&mut out, i as u64);
        out.put_u8(opcode::RESIZEDB);
        len(&mut out, entries.len() as u64);
        let expiring = entries.iter().filter(|(_, e)| e.expires_at.is_some());
        len(&mut out, expiring.count() as u64);
        for (key, entry) in entries {
            if let Some(t) = entry.expires_at {
                out.put_u8(opcode::EXPIRETIME_MS);
                out.put_u64_le(t);
            }
            value(&mut out, &key, &entry.value);
        }
    }
    out.put_u8(opcode::EOF);
    let crc = CRC64.checksum(&out);
    out.put_u64_le(crc);
    out.freeze()
}

/// Appends one key: its type byte, the key, the value.
fn value(out: &mut BytesMut, key: &[u8], v: &Value) {
    out.put_u8(object_type(v));
    string(out, key);
    object(out, v);
}

/// The type byte that says how [`object`] encodes `v` (Redis's `rdbSaveObjectType`).
pub(crate) fn object_type(v: &Value) -> u8 {
    match v {
        Value::Str(_) => kind::STRING,
        Value::Hash(_) => kind::HASH,
        Value::List(_) => kind::LIST,
        // An intset travels as Redis keeps it; any other set member by member.
        Value::Set(set) if set.ints().is_some() => kind::SET_INTSET,
        Value::Set(_) => kind::SET,
        Value::ZSet(_) => kind::ZSET_2,
        Value::Stream(_) => kind::STREAM_LISTPACKS_2,
    }
}

/// Appends the body of a value, without its type byte or key (Redis's `rdbSaveObject`): what
/// both a snapshot and a `DUMP` payload carry after the type byte of [`object_type`].
pub(crate) fn object(out: &mut BytesMut, v: &Value) {
    match v {
        Value::Str(s) => string(out, s),
        Value::Hash(h) => {
            len(out, h.len() as u64);
            for (f, v) in h {
                string(out, f);
                string(out, v);
            }
        }
        Value::List(l) => {
            len(out, l.len() as u64);
            for e in l {
                string(out, e);
            }
        }
        Value::Set(set) => match set.ints() {
            // One string holding the header (the width of each integer, the count) and the
            // integers, ascending, little-endian.
            Some(ints) => string(out, &intset_blob(ints)),
            None => {
                len(out, set.len() as u64);
                for m in set.members() {
                    string(out, &m);
                }
            }
        },
        Value::Stream(s) => super::stream_write::stream(out, s),
        Value::ZSet(z) => {
            len(out, z.len() as u64);
            for (m, s) in z.iter() {
                string(out, m);
                out.put_f64_le(s);
            }
        }
    }
}

/// Redis's intset layout: a 32-bit width (2, 4 or 8 bytes, the smallest that holds every
/// member), a 32-bit count, then the integers at that width; all little-endian.
pub(crate) fn intset_blob(ints: &[i64]) -> Vec<u8> {
    let fits = |lo: i64, hi: i64| ints.iter().all(|i| (lo..=hi).contains(i));
    let width: usize = if fits(i16::MIN as i64, i16::MAX as i64) {
        2
    } else if fits(i32::MIN as i64, i32::MAX as i64) {
        4
    } else {
        8
    };
    let mut blob = Vec::with_capacity(8 + width * ints.len());
    blob.extend_from_slice(&(width as u32).to_le_bytes());
    blob.extend_from_slice(&(ints.len() as u32).to_le_bytes());
    for i in ints {
        blob.extend_from_slice(&i.to_le_bytes()[..width]);
    }
    blob
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_take_one_two_five_or_nine_bytes() {
        for (n, size) in [
            (0u64, 1),
            (63, 1),
            (64, 2),
            (16383, 2),
            (16384, 5),
            (1 << 33, 9),
        ] {
            let mut out = BytesMut::new();
            len(&mut out, n);
            assert_eq!(out.len(), size, "length {n}");
        }
    }

    #[test]
    fn canonical_integers_are_stored_as_integers() {
        let mut out = BytesMut::new();
        string(&mut out, b"-5");
        assert_eq!(&out[..], &[0xC0, 0xFB]);
        let mut out = BytesMut::new();
        string(&mut out, &[b'z'; LZF_MIN_LEN]);
        assert_eq!(out[0], 0xC3, "a long repetitive string is compressed");
        assert!(out.len() < 200);
        for not_canonical in [&b"007"[..], b"+1", b"-0", b"1 ", b"99999999999"] {
            assert_eq!(small_int(not_canonical), None, "{not_canonical:?}");
        }
    }

    #[test]
    fn crc64_is_redis_jones() {
        // The check value Redis's own crc64 self-test uses.
        assert_eq!(CRC64.checksum(b"123456789"), 0xe9c6d914c4b8d9ca);
    }
}
