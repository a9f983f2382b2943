//! Decoding Redis's compact encodings, which an RDB carries as opaque strings: the *listpack*
//! (Redis 7's small hashes, sorted sets and list nodes) and the older *ziplist*.
//!
//! Both are a header, a run of entries and an end byte `0xFF`. An entry is either a string or
//! an integer, its encoding given by the top bits of its first byte; here every entry comes
//! out as the bytes Redis would reply with (integers in decimal).

use bytes::Bytes;

use super::RdbError;

fn err(what: &str) -> RdbError {
    RdbError(what.to_string())
}

/// Reads `n` bytes at `*pos`, advancing it.
fn take<'a>(data: &'a [u8], pos: &mut usize, n: usize) -> Result<&'a [u8], RdbError> {
    let end = pos
        .checked_add(n)
        .filter(|e| *e <= data.len())
        .ok_or_else(|| err("truncated packed encoding"))?;
    let s = &data[*pos..end];
    *pos = end;
    Ok(s)
}

/// A little-endian signed integer of `bytes.len()` bytes.
fn int_le(bytes: &[u8]) -> i64 {
    let mut v: u64 = 0;
    for (i, b) in bytes.iter().enumerate() {
        v |= (*b as u64) << (8 * i);
    }
    let shift = 64 - 8 * bytes.len() as u32;
    ((v << shift) as i64) >> shift
}

fn int_entry(v: i64) -> Bytes {
    Bytes::from(v.to_string())
}

/// The members of an intset: a 4-byte width (2, 4 or 8), a 4-byte count, then the integers
/// at that width, little-endian. They must be strictly ascending, as Redis checks when it loads
/// one, since set lookups binary-search them.
pub(crate) fn intset(data: &[u8]) -> Result<Vec<i64>, RdbError> {
    let mut pos = 0;
    let width = int_le(take(data, &mut pos, 4)?) as u32 as usize;
    let count = int_le(take(data, &mut pos, 4)?) as u32 as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(err("intset with an unknown integer width"));
    }
    if data.len() - pos != width * count {
        return Err(err("intset length does not match its count"));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let v = int_le(take(data, &mut pos, width)?);
        if out.last().is_some_and(|last| *last >= v) {
            return Err(err("intset members out of order"));
        }
        out.push(v);
    }
    Ok(out)
}

/// The entries of a listpack: a 4-byte total size, a 2-byte count, entries each followed by
/// its own length ("backlen", so it can be walked backwards), and `0xFF`.
pub(crate) fn listpack(data: &[u8]) -> Result<Vec<Bytes>, RdbError> {
    let mut pos = 6;
    let mut out = Vec::new();
    loop {
        let first = *data.get(pos).ok_or_else(|| err("listpack without end"))?;
        if first == 0xFF {
            return Ok(out);
        }
        let start = pos;
        pos += 1;
        let entry = match first {
            // 0xxxxxxx: a 7-bit unsigned integer.
            b if b & 0x80 == 0 => int_entry(b as i64),
            // 10xxxxxx: a string of up to 63 bytes.
            b if b & 0xC0 == 0x80 => {
                Bytes::copy_from_slice(take(data, &mut pos, (b & 0x3F) as usize)?)
            }
            // 110xxxxx yyyyyyyy: a 13-bit signed integer.
            b if b & 0xE0 == 0xC0 => {
                let lo = take(data, &mut pos, 1)?[0] as i64;
                let v = (((b & 0x1F) as i64) << 8) | lo;
                int_entry(if v >= 1 << 12 { v - (1 << 13) } else { v })
            }
            // 1110xxxx yyyyyyyy: a string of up to 4095 bytes.
            b if b & 0xF0 == 0xE0 => {
                let lo = take(data, &mut pos, 1)?[0] as usize;
                let n = (((b & 0x0F) as usize) << 8) | lo;
                Bytes::copy_from_slice(take(data, &mut pos, n)?)
            }
            0xF0 => {
                let n = int_le(take(data, &mut pos, 4)?) as u32 as usize;
                Bytes::copy_from_slice(take(data, &mut pos, n)?)
            }
            0xF1 => int_entry(int_le(take(data, &mut pos, 2)?)),
            0xF2 => int_entry(int_le(take(data, &mut pos, 3)?)),
            0xF3 => int_entry(int_le(take(data, &mut pos, 4)?)),
            0xF4 => int_entry(int_le(take(data, &mut pos, 8)?)),
            _ => return Err(err("unknown listpack entry encoding")),
        };
        // Skip the backlen: 1 to 5 bytes, 7 bits of the entry's size per byte.
        let size = pos - start;
        let backlen = match size {
            0..=127 => 1,
            128..=16383 => 2,
            16384..=2097151 => 3,
            2097152..=268435455 => 4,
            _ => 5,
        };
        take(data, &mut pos, backlen)?;
        out.push(entry);
    }
}

/// The entries of a ziplist: a 10-byte header, entries each led by the previous entry's
/// length and its own encoding, and `0xFF`.
pub(crate) fn ziplist(data: &[u8]) -> Result<Vec<Bytes>, RdbError> {
    let mut pos = 10;
    let mut out = Vec::new();
    loop {
        let first = *data.get(pos).ok_or_else(|| err("ziplist without end"))?;
        if first == 0xFF {
            return Ok(out);
        }
        // The previous entry's length: one byte, or 0xFE and four more.
        pos += if first == 0xFE { 5 } else { 1 };
        let enc = take(data, &mut pos, 1)?[0];
        let entry = match enc >> 6 {
            0 => Bytes::copy_from_slice(take(data, &mut pos, (enc & 0x3F) as usize)?),
            1 => {
                let lo = take(data, &mut pos, 1)?[0] as usize;
                let n = (((enc & 0x3F) as usize) << 8) | lo;
                Bytes::copy_from_slice(take(data, &mut pos, n)?)
            }
            2 => {
                let b = take(data, &mut pos, 4)?;
                let n = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
                Bytes::copy_from_slice(take(data, &mut pos, n)?)
            }
            _ => match enc {
                0xC0 => int_entry(int_le(take(data, &mut pos, 2)?)),
                0xD0 => int_entry(int_le(take(data, &mut pos, 4)?)),
                0xE0 => int_entry(int_le(take(data, &mut pos, 8)?)),
                0xF0 => int_entry(int_le(take(data, &mut pos, 3)?)),
                0xFE => int_entry(int_le(take(data, &mut pos, 1)?)),
                // 1111xxxx: an immediate 0..12, stored as xxxx - 1.
                0xF1..=0xFD => int_entry((enc & 0x0F) as i64 - 1),
                _ => return Err(err("unknown ziplist entry encoding")),
            },
        };
        out.push(entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpack_entries_of_every_kind() {
        // Built by hand following listpack.c: "a", 5, -2 (13-bit), 300 (13-bit), int16 -30000.
        let mut lp = vec![0u8; 6];
        lp.extend([0x81, b'a', 2]);
        lp.extend([0x05, 1]);
        let m2 = (1i64 << 13) - 2;
        lp.extend([0xC0 | (m2 >> 8) as u8, m2 as u8, 2]);
        lp.extend([0xC0 | (300 >> 8) as u8, (300 & 0xFF) as u8, 2]);
        lp.push(0xF1);
        lp.extend((-30000i16).to_le_bytes());
        lp.push(3);
        lp.push(0xFF);
        let got = listpack(&lp).unwrap();
        let want: Vec<Bytes> = ["a", "5", "-2", "300", "-30000"]
            .iter()
            .map(|s| Bytes::from(*s))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn ziplist_immediates_and_strings() {
        let mut zl = vec![0u8; 10];
        zl.extend([0, 0x02, b'h', b'i']);
        zl.extend([4, 0xF1 + 7]);
        zl.extend([2, 0xFE, 0x9C]);
        zl.push(0xFF);
        assert_eq!(
            ziplist(&zl).unwrap(),
            vec![Bytes::from("hi"), Bytes::from("7"), Bytes::from("-100")]
        );
        assert!(ziplist(&zl[..12]).is_err());
    }
}
