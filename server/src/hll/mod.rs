//! HyperLogLog: a sketch that estimates how many distinct elements were added to it, in at
//! most 12 KB whatever their number (standard error 0.81%), stored as a plain string value in
//! Redis's exact format, so that a value moves between latchkey and Redis unchanged (`GET`
//! on one, `SET` on the other) and both count it the same.
//!
//! How it works: each element is hashed (see [`hash`]); 14 bits of the hash pick one of 16384
//! registers, and the position of the first 1 bit in the other 50 is offered to that register,
//! which keeps the largest it was offered. Long runs of zeros are rare, so the registers'
//! values tell how many distinct hashes went by; [`estimate`] turns them into a number.
//!
//! The value is a 16-byte header followed by the registers:
//!
//! ```text
//! +------+---+-----+----------------+-----------------------------
//! | HYLL | E | 0 0 0 | cached count |  registers (dense or sparse)
//! +------+---+-----+----------------+-----------------------------
//!    4     1    3          8
//! ```
//!
//! `E` is the encoding: 0 dense ([`dense`]: 6 bits a register, 12288 bytes), 1 sparse
//! ([`sparse`]: run-length opcodes, a few bytes for a small sketch). The cached count is the
//! last estimate, little-endian; its top bit set means "stale, compute again", which every
//! change sets.
//!
//! Values are a client's bytes (`SET`, `SETRANGE`, `RESTORE`): [`encoding_of`] checks the
//! header before anything reads further (a wrong one is `WRONGTYPE`), and every walk of the
//! sparse opcodes checks that they cover exactly the 16384 registers (a wrong count is
//! `INVALIDOBJ`). Redis had CVEs here (CVE-2019-10192/10193, CVE-2025-32023: sparse runs that
//! wrote past the registers, or summed past the end until the index overflowed); here every
//! read and write is of a slice, bounds-checked, and the walks refuse what Redis's fixed ones
//! refuse: any run that would pass register 16383.

pub(crate) mod dense;
pub(crate) mod estimate;
pub(crate) mod hash;
pub(crate) mod sparse;

/// Bits of the hash that pick a register.
pub(crate) const P: usize = 14;
/// Bits of the hash left for the run of zeros.
pub(crate) const Q: usize = 64 - P;
/// The number of registers.
pub(crate) const REGISTERS: usize = 1 << P;
/// The header's length.
pub(crate) const HEADER: usize = 16;
/// A dense value's exact length.
pub(crate) const DENSE_LEN: usize = HEADER + dense::REGISTER_BYTES;
/// Size of a histogram of register values (6-bit registers: 0..=63).
pub(crate) const HISTOGRAM: usize = 64;

/// The byte of the header that says the encoding.
const ENCODING_BYTE: usize = 4;
/// Where the cached count starts.
const CACHE: usize = 8;

/// Redis's reply to a value whose registers do not add up.
pub(crate) const CORRUPT_ERROR: &str = "INVALIDOBJ Corrupted HLL object detected";
/// Redis's reply to a string that is not a HyperLogLog.
pub(crate) const NOT_HLL_ERROR: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";

/// The registers of a value do not add up (sparse opcodes that cover more or fewer than
/// 16384 registers): Redis's `INVALIDOBJ`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Corrupt;

/// How a value stores its registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// 16384 six-bit registers.
    Dense,
    /// Run-length opcodes.
    Sparse,
}

/// The encoding of `v` if it is a HyperLogLog as far as Redis checks before use: at least a
/// header, the magic `HYLL`, a known encoding, and for a dense one the exact length. `None`
/// is Redis's `WRONGTYPE Key is not a valid HyperLogLog string value.`
pub(crate) fn encoding_of(v: &[u8]) -> Option<Encoding> {
    if v.len() < HEADER || &v[..4] != b"HYLL" {
        return None;
    }
    match v[ENCODING_BYTE] {
        0 if v.len() == DENSE_LEN => Some(Encoding::Dense),
        1 => Some(Encoding::Sparse),
        _ => None,
    }
}

/// A new, empty sketch: sparse, one `XZERO` over all registers, count cached as 0.
pub(crate) fn empty() -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER + 2);
    v.extend_from_slice(b"HYLL");
    v.push(1);
    v.extend_from_slice(&[0; 11]);
    v.extend_from_slice(&sparse::empty_body());
    v
}

/// The cached count, if it is not stale.
pub(crate) fn cached(v: &[u8]) -> Option<u64> {
    let card = u64::from_le_bytes(v[CACHE..CACHE + 8].try_into().expect("8 bytes"));
    (card >> 63 == 0).then_some(card)
}

/// Stores `card` as the cached count (a count with the top bit set stores as stale, as in
/// Redis).
pub(crate) fn store_cache(v: &mut [u8], card: u64) {
    v[CACHE..CACHE + 8].copy_from_slice(&card.to_le_bytes());
}

/// Marks the cached count stale.
pub(crate) fn invalidate(v: &mut [u8]) {
    v[CACHE + 7] |= 0x80;
}

/// Turns a sparse `v` dense in place (the header, cached count included, is kept); says
/// whether it converted (false when it was dense already).
pub(crate) fn to_dense(v: &mut Vec<u8>) -> Result<bool, Corrupt> {
    if v[ENCODING_BYTE] == 0 {
        return Ok(false);
    }
    let mut out = vec![0u8; DENSE_LEN];
    sparse::to_dense_registers(&v[HEADER..], &mut out[HEADER..])?;
    out[..HEADER].copy_from_slice(&v[..HEADER]);
    out[ENCODING_BYTE] = 0;
    *v = out;
    Ok(true)
}

/// Raises register `index` to `count` if it holds less, promoting a sparse value to dense
/// when the sparse form cannot hold the result (a value above 32, or more than `max_sparse`
/// bytes: `hll-sparse-max-bytes`). Says whether the register changed. `v` must have passed
/// [`encoding_of`].
pub(crate) fn set_register(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_sparse: u64,
) -> Result<bool, Corrupt> {
    if v[ENCODING_BYTE] == 0 {
        return Ok(dense::raise(&mut v[HEADER..], index, count));
    }
    match sparse::set(v, index, count, max_sparse)? {
        sparse::SetOutcome::Unchanged => Ok(false),
        sparse::SetOutcome::Raised => {
            invalidate(v);
            Ok(true)
        }
        sparse::SetOutcome::Promote => {
            to_dense(v)?;
            dense::raise(&mut v[HEADER..], index, count);
            // The register needed raising (that is why the value was promoted), so it
            // changed, whatever a damaged sparse form claimed.
            Ok(true)
        }
    }
}

/// Adds `element`: says whether a register changed. `v` must have passed [`encoding_of`].
pub(crate) fn add(v: &mut Vec<u8>, element: &[u8], max_sparse: u64) -> Result<bool, Corrupt> {
    let (index, count) = hash::pattern(element);
    set_register(v, index, count, max_sparse)
}

/// The estimate of `v`'s registers (not the cache). `v` must have passed [`encoding_of`].
pub(crate) fn count(v: &[u8]) -> Result<u64, Corrupt> {
    let mut hist = [0u32; HISTOGRAM];
    if v[ENCODING_BYTE] == 0 {
        dense::histogram(&v[HEADER..], &mut hist);
    } else {
        sparse::histogram(&v[HEADER..], &mut hist)?;
    }
    Ok(estimate::cardinality(&hist))
}

/// Raises each of `max` (one byte a register, 16384 of them) to `v`'s register. `v` must
/// have passed [`encoding_of`].
pub(crate) fn merge_into(max: &mut [u8], v: &[u8]) -> Result<(), Corrupt> {
    if v[ENCODING_BYTE] == 0 {
        for (i, m) in max.iter_mut().enumerate().take(REGISTERS) {
            *m = (*m).max(dense::get(&v[HEADER..], i));
        }
        Ok(())
    } else {
        sparse::merge_into(max, &v[HEADER..])
    }
}

/// The estimate of registers held one byte each (a merge of several sketches).
pub(crate) fn count_registers(max: &[u8]) -> u64 {
    let mut hist = [0u32; HISTOGRAM];
    for m in max {
        hist[usize::from(*m & 63)] += 1;
    }
    estimate::cardinality(&hist)
}

/// The registers of a dense `v`, one a byte.
pub(crate) fn registers(v: &[u8]) -> Vec<u8> {
    (0..REGISTERS)
        .map(|i| dense::get(&v[HEADER..], i))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_sketch_is_redis_s_empty_value() {
        let v = empty();
        assert_eq!(
            v,
            b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff".to_vec(),
            "an empty sketch"
        );
        assert_eq!(encoding_of(&v), Some(Encoding::Sparse));
        assert_eq!(count(&v), Ok(0));
        assert_eq!(cached(&v), Some(0));
    }

    #[test]
    fn sparse_and_dense_agree_and_the_header_is_checked() {
        let mut s = empty();
        let mut d = empty();
        to_dense(&mut d).unwrap();
        assert_eq!(d.len(), DENSE_LEN);
        for i in 0..1000u32 {
            let e = i.to_string();
            assert_eq!(
                add(&mut s, e.as_bytes(), 3000),
                add(&mut d, e.as_bytes(), 3000)
            );
        }
        assert_eq!(encoding_of(&s), Some(Encoding::Sparse));
        assert!(s.len() <= 3000);
        assert_eq!(count(&s), count(&d));
        let n = count(&d).unwrap();
        assert!((950..1050).contains(&n), "{n}");
        let mut s2 = s.clone();
        to_dense(&mut s2).unwrap();
        assert_eq!(registers(&s2), registers(&d));
        assert_eq!(encoding_of(b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\0"), None);
        assert_eq!(encoding_of(b"HYLL\x00\0\0\0\0\0\0\0\0\0\0\0"), None);
        assert_eq!(encoding_of(b"HYLL\x01\0\0"), None);
        assert_eq!(encoding_of(b"HYLX\x01\0\0\0\0\0\0\0\0\0\0\0"), None);
        invalidate(&mut s);
        assert_eq!(cached(&s), None);
        store_cache(&mut s, 42);
        assert_eq!(cached(&s), Some(42));
    }
}
