//! Writing an RDB snapshot of the keyspace, in encodings redis-server 7.0 loads.
//!
//! Values use the plain, legacy encodings (`HASH`, `LIST`, `ZSET_2`): one length, then the
//! elements one by one. They are the simplest to write, and Redis converts them to its compact
//! encodings as it loads them.

use bytes::{BufMut, Bytes, BytesMut};

use super::encode::{len, string};
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
    snapshot_keys(shared, repl, None)
}

/// [`snapshot`], also recording in `key_ends`, when given, the offset after each key's record
/// (for `rdb-key-save-delay`, which paces a background save key by key).
pub(crate) fn snapshot_keys(
    shared: &Shared,
    repl: &ReplInfo,
    mut key_ends: Option<&mut Vec<usize>>,
) -> Bytes {
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
        let expiring = entries.iter().filter(|(_, e)| e.expires_at().is_some());
        len(&mut out, expiring.count() as u64);
        for (key, entry) in entries {
            if let Some(t) = entry.expires_at() {
                out.put_u8(opcode::EXPIRETIME_MS);
                out.put_u64_le(t);
            }
            value(&mut out, &key, &entry.value);
            if let Some(ends) = key_ends.as_deref_mut() {
                ends.push(out.len());
            }
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
            for (f, v) in h.iter() {
                string(out, f);
                string(out, v);
            }
        }
        Value::List(l) => {
            len(out, l.len() as u64);
            for e in l.iter() {
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
    fn crc64_is_redis_jones() {
        // The check value Redis's own crc64 self-test uses.
        assert_eq!(CRC64.checksum(b"123456789"), 0xe9c6d914c4b8d9ca);
    }
}
