//! Writing the primitives of an RDB payload: lengths and strings (integer-encoded when
//! canonical, LZF-compressed when Redis would compress them). The snapshot writer
//! ([`super::write`]), the stream writer ([`super::stream_write`]) and `DUMP` write through it.

use bytes::{BufMut, BytesMut};

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
}
