//! Where an element lands in a HyperLogLog: its 64-bit hash, split into a register index (the
//! low 14 bits) and a "pattern length" (how far up the remaining 50 bits the first 1 is).
//!
//! The hash is MurmurHash64A (Austin Appleby's MurmurHash2, 64-bit variant) with Redis's
//! seed, reading 8-byte words little-endian whatever the machine, as Redis does: an element
//! must land in the same register, with the same value, on latchkey and on Redis, or a value
//! moved between them would count differently. Written here rather than taken from a crate
//! because the exact function (seed type, tail handling) is part of the format, and it is
//! twenty lines.

use super::{P, REGISTERS};

/// The seed Redis hashes HyperLogLog elements with.
const SEED: u64 = 0xadc8_3b19;

/// MurmurHash64A of `data` with `seed`.
pub(crate) fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        let mut k = u64::from_le_bytes(w.try_into().expect("chunks of 8"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        // The last 1..7 bytes, as a little-endian number.
        for (i, b) in tail.iter().enumerate() {
            h ^= u64::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register `element` updates and the value it offers it: 1 plus the number of zeros
/// below the lowest 1 bit of the hash's upper 50 bits (at most 51, when all 50 are zero).
pub(crate) fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, SEED);
    let index = (hash as usize) & (REGISTERS - 1);
    // A 1 just above the 50 bits used makes an all-zero hash end the count at 51.
    let rest = (hash >> P) | (1u64 << (64 - P));
    (index, rest.trailing_zeros() as u8 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_stay_in_range() {
        for i in 0..10_000u32 {
            let (index, count) = pattern(&i.to_le_bytes());
            assert!(index < REGISTERS);
            assert!((1..=51).contains(&count));
        }
    }

    #[test]
    fn every_tail_length_is_hashed_differently() {
        let data = b"0123456789abcdef";
        let hashes: Vec<u64> = (0..=data.len())
            .map(|n| murmur64a(&data[..n], SEED))
            .collect();
        for (i, a) in hashes.iter().enumerate() {
            for b in &hashes[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
