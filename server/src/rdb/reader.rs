//! A cursor over an RDB payload and its primitives: lengths, strings (integer-encoded and
//! LZF-compressed ones too), the numbers in their fixed widths. Every read checks that the
//! bytes are there before it takes them. The record walker ([`super::read`]) and the stream
//! reader ([`super::stream_read`]) both read through it.

use bytes::Bytes;

use super::RdbError;

/// The most plain bytes one compressed byte can stand for in LZF (a 3-byte back reference
/// copies at most 264 bytes).
const LZF_MAX_RATIO: usize = 88;

/// A cursor over the payload.
pub(super) struct Reader<'a> {
    /// The whole payload.
    pub(super) data: &'a [u8],
    /// Where the next read starts.
    pub(super) pos: usize,
}

pub(super) fn err(what: impl Into<String>) -> RdbError {
    RdbError(what.into())
}

impl<'a> Reader<'a> {
    pub(super) fn bytes(&mut self, n: usize) -> Result<&'a [u8], RdbError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.data.len())
            .ok_or_else(|| err("unexpected end of file"))?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// Bytes not read yet: what a claimed element count is capped at for preallocation, as
    /// every element takes at least one byte.
    pub(super) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    pub(super) fn u8(&mut self) -> Result<u8, RdbError> {
        Ok(self.bytes(1)?[0])
    }

    pub(super) fn le(&mut self, n: usize) -> Result<u64, RdbError> {
        let b = self.bytes(n)?;
        Ok(b.iter().rev().fold(0u64, |v, x| (v << 8) | *x as u64))
    }

    /// A length, or (second value true) the marker of a specially encoded string.
    pub(super) fn len_or_special(&mut self) -> Result<(u64, bool), RdbError> {
        let first = self.u8()?;
        Ok(match first >> 6 {
            0 => ((first & 0x3F) as u64, false),
            1 => ((((first & 0x3F) as u64) << 8) | self.u8()? as u64, false),
            2 => match first {
                0x80 => (u32::from_be_bytes(self.array()?) as u64, false),
                0x81 => (u64::from_be_bytes(self.array()?), false),
                _ => return Err(err(format!("unknown length encoding {first:#x}"))),
            },
            _ => ((first & 0x3F) as u64, true),
        })
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RdbError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    pub(super) fn len(&mut self) -> Result<usize, RdbError> {
        match self.len_or_special()? {
            (n, false) => usize::try_from(n).map_err(|_| err("length too large")),
            _ => Err(err("expected a length, found a string encoding")),
        }
    }

    /// A string: plain, an 8/16/32-bit integer, or LZF-compressed.
    pub(super) fn string(&mut self) -> Result<Bytes, RdbError> {
        match self.len_or_special()? {
            (n, false) => Ok(Bytes::copy_from_slice(self.bytes(n as usize)?)),
            (0, true) => Ok(Bytes::from((self.u8()? as i8).to_string())),
            (1, true) => Ok(Bytes::from((self.le(2)? as u16 as i16).to_string())),
            (2, true) => Ok(Bytes::from((self.le(4)? as u32 as i32).to_string())),
            (3, true) => {
                let compressed = self.len()?;
                let plain = self.len()?;
                let data = self.bytes(compressed)?;
                // The decompressor allocates the claimed plain length up front: refuse a
                // claim no LZF stream of this size can meet (one 3-byte back reference makes
                // at most 264 bytes) before it becomes an allocation of any size.
                if plain > compressed.saturating_mul(LZF_MAX_RATIO) {
                    return Err(err(format!(
                        "LZF string claims {plain} bytes from {compressed} compressed"
                    )));
                }
                let out =
                    lzf::decompress(data, plain).map_err(|e| err(format!("LZF string: {e:?}")))?;
                if out.len() != plain {
                    return Err(err("LZF string shorter than its stated length"));
                }
                Ok(Bytes::from(out))
            }
            (n, true) => Err(err(format!("unknown string encoding {n}"))),
        }
    }

    /// A sorted-set score written as text (`ZSET`, the oldest form).
    pub(super) fn text_double(&mut self) -> Result<f64, RdbError> {
        match self.u8()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => parse_score(self.bytes(n as usize)?),
        }
    }
}

/// A sorted-set score written as text, checked as [`score`] checks it.
pub(super) fn parse_score(s: &[u8]) -> Result<f64, RdbError> {
    std::str::from_utf8(s)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| err("bad sorted-set score"))
        .and_then(score)
}

/// A score as a sorted set may hold it: not NaN, which has no place in the order (Redis
/// refuses it too, "Zset with NAN score detected").
pub(super) fn score(s: f64) -> Result<f64, RdbError> {
    if s.is_nan() {
        return Err(err("sorted-set score is NaN"));
    }
    Ok(s)
}
