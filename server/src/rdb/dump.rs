//! The `DUMP` payload: one value in RDB form, as `DUMP` hands it out and `RESTORE` takes it
//! back (Redis's `createDumpPayload` and `verifyDumpPayload`).
//!
//! A payload is the value's type byte and body exactly as a snapshot stores them
//! ([`write::object_type`], [`write::object`]; no key, no expiry), then a footer of ten bytes:
//! the RDB version that wrote it (two bytes, little-endian; 10 for Redis 7.0) and the CRC-64
//! of everything before the checksum (eight bytes, little-endian). A server refuses a payload
//! from a newer RDB version, whose encodings it may not know, and one whose checksum is wrong.
//!
//! A payload is whatever a client sends, so [`decode`] treats it as hostile: the reader checks
//! every length against the bytes actually present before it allocates (see [`read`]), and
//! anything that is not a well-formed value of a type latchkey holds is refused whole.

use bytes::{BufMut, Bytes, BytesMut};

use super::{encode, read, write, CRC64, VERSION};
use crate::db::Value;

/// The footer's size: the version (2 bytes) and the checksum (8).
const FOOTER: usize = 10;

/// Why a payload was refused; each is one of Redis's replies to `RESTORE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DumpError {
    /// Too short for a footer, written by a newer RDB version, or a wrong checksum.
    Footer,
    /// The footer is fine but the value is not one latchkey can read.
    Format,
}

impl DumpError {
    /// The error reply Redis 7.0 gives for this refusal.
    pub(crate) fn message(&self) -> &'static str {
        match self {
            DumpError::Footer => "ERR DUMP payload version or checksum are wrong",
            DumpError::Format => "ERR Bad data format",
        }
    }
}

/// Redis compresses a string from this length on (`rdbSaveRawString`: longer than 20 bytes),
/// when LZF saves at least 4 bytes. A string value's payload does the same, so that `DUMP` of
/// a string (a HyperLogLog too) gives Redis's bytes: the `lzf` crate is a port of the liblzf
/// Redis embeds, with the same hash table size, so it finds the same matches, and
/// [`super::lzf_room`] keeps its output only where Redis's smaller buffer would have kept it.
const REDIS_LZF_MIN_LEN: usize = 21;

/// The `DUMP` payload of `value`.
pub(crate) fn payload(value: &Value) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    out.put_u8(write::object_type(value));
    match value {
        Value::Str(s) => encode::string_compressing_from(&mut out, s, REDIS_LZF_MIN_LEN),
        other => write::object(&mut out, other),
    }
    footer(out)
}

/// The `FUNCTION DUMP` payload of these libraries: a `FUNCTION2` record for each (the opcode,
/// then its code as a string), and the same footer as a key's payload.
pub(crate) fn functions_payload(codes: &[Bytes]) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    for code in codes {
        out.put_u8(super::opcode::FUNCTION2);
        encode::string_compressing_from(&mut out, code, REDIS_LZF_MIN_LEN);
    }
    footer(out)
}

/// `out` with the footer appended: the RDB version, then the CRC-64 of all before it.
fn footer(mut out: BytesMut) -> Bytes {
    out.put_u16_le(VERSION as u16);
    let crc = CRC64.checksum(&out);
    out.put_u64_le(crc);
    out.freeze()
}

/// The library codes a `FUNCTION DUMP` payload holds, or the error Redis answers (without its
/// `ERR ` prefix).
pub(crate) fn decode_functions(payload: &[u8]) -> Result<Vec<Bytes>, &'static str> {
    verify(payload).map_err(|_| "DUMP payload version or checksum are wrong")?;
    read::function_records(payload, payload.len() - FOOTER)
}

/// Checks the footer of `payload` as Redis's `verifyDumpPayload` does.
fn verify(payload: &[u8]) -> Result<(), DumpError> {
    if payload.len() < FOOTER {
        return Err(DumpError::Footer);
    }
    let footer = &payload[payload.len() - FOOTER..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    if u32::from(version) > VERSION {
        return Err(DumpError::Footer);
    }
    let mut crc = [0u8; 8];
    crc.copy_from_slice(&footer[2..]);
    if CRC64.checksum(&payload[..payload.len() - 8]) != u64::from_le_bytes(crc) {
        return Err(DumpError::Footer);
    }
    Ok(())
}

/// The value a payload holds, shaped for this server (`max_intset` is its
/// `set-max-intset-entries`). Refuses an empty collection, as Redis does: no key holds one.
pub(crate) fn decode(payload: &[u8], max_intset: usize) -> Result<Value, DumpError> {
    verify(payload)?;
    // Read from the whole payload, footer included, as Redis does: a value that runs into
    // the footer is read (and then usually found malformed) the same way on both servers.
    let mut value = read::object(payload).map_err(|_| DumpError::Format)?;
    if value.is_empty_collection() {
        return Err(DumpError::Format);
    }
    if let Value::Set(s) = &mut value {
        s.fit(max_intset);
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::set::Set;

    /// A set, shaped for `max_intset`, from its members.
    fn set_of(members: &[&str], max_intset: usize) -> Value {
        Value::Set(Box::new(Set::from_members(
            members.iter().map(|m| Bytes::copy_from_slice(m.as_bytes())),
            max_intset,
        )))
    }

    /// What redis-server 7.0.15 answers to `SET foo bar` then `DUMP foo`.
    const REDIS_BAR: &[u8] = b"\x00\x03bar\x0a\x00\xe6\xbe\x49\x60\xee\x66\xfd\x17";

    #[test]
    fn a_string_dumps_as_redis_dumps_it() {
        assert_eq!(
            &payload(&Value::Str(crate::value::Str::from(&b"bar"[..])))[..],
            REDIS_BAR
        );
        assert!(matches!(decode(REDIS_BAR, 512), Ok(Value::Str(s)) if &s[..] == b"bar"));
    }

    #[test]
    fn a_long_string_is_compressed_as_redis_compresses_it() {
        // What redis-server 7.0.15 answers to `DUMP` of 30 `x`.
        let redis: &[u8] =
            b"\x00\xc3\x09\x1e\x01xx\xe0\x11\x00\x01xx\x0a\x00\xf0\x67\x3f\xdf\x20\x01\xeb\x95";
        let value = Value::Str(crate::value::Str::from(vec![b'x'; 30]));
        assert_eq!(&payload(&value)[..], redis);
        assert!(matches!(decode(redis, 512), Ok(Value::Str(s)) if s[..] == [b'x'; 30]));
    }

    #[test]
    fn every_refusal_is_the_right_one() {
        assert_eq!(decode(b"", 512).unwrap_err(), DumpError::Footer);
        assert_eq!(
            decode(&REDIS_BAR[..REDIS_BAR.len() - 1], 512).unwrap_err(),
            DumpError::Footer
        );
        // The CRC starts from zero, so a leading zero byte leaves it unchanged: this payload
        // passes the footer check and is then refused as malformed, on Redis too.
        assert_eq!(decode(&REDIS_BAR[1..], 512).unwrap_err(), DumpError::Format);
        let mut newer = REDIS_BAR.to_vec();
        newer[REDIS_BAR.len() - FOOTER] = 11;
        assert_eq!(decode(&newer, 512).unwrap_err(), DumpError::Footer);
        // An empty list with a correct footer: well-formed, but no key holds it.
        let mut empty = BytesMut::new();
        empty.put_u8(super::super::kind::LIST);
        empty.put_u8(0);
        empty.put_u16_le(10);
        let crc = CRC64.checksum(&empty);
        empty.put_u64_le(crc);
        assert_eq!(decode(&empty, 512).unwrap_err(), DumpError::Format);
    }

    #[test]
    fn sets_round_trip_in_both_shapes() {
        for v in [set_of(&["3", "-1", "70000"], 512), set_of(&["a", "1"], 512)] {
            let back = decode(&payload(&v), 512).unwrap();
            let (Value::Set(a), Value::Set(b)) = (&v, &back) else {
                panic!("not a set")
            };
            assert_eq!(a.ints(), b.ints());
            assert_eq!(a.len(), b.len());
        }
        // An intset larger than this server's limit becomes a hashtable.
        let big = payload(&set_of(&["1", "2", "3"], 512));
        let Value::Set(s) = decode(&big, 2).unwrap() else {
            panic!("not a set")
        };
        assert_eq!(s.ints(), None);
    }
}
