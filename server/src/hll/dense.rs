//! The dense representation: 16384 registers of 6 bits each, packed into 12288 bytes after
//! the header, least significant bits first. Register `i` starts at bit `6 * i`: it is the
//! top bits of one byte and, when it does not fit there, the low bits of the next.
//!
//! ```text
//! byte:   |11000000|22221111|33333322|...   (digit = the register a bit belongs to,
//!                                            most significant bit on the left)
//! ```
//!
//! Any bytes of the right length are a valid dense HyperLogLog: a register may hold 0..=63,
//! though hashing never produces more than 51.

use super::{HISTOGRAM, REGISTERS};

/// Bits per register.
const BITS: usize = 6;
/// The largest value a register holds.
const MAX: u16 = (1 << BITS) - 1;

/// The bytes the registers take.
pub(crate) const REGISTER_BYTES: usize = REGISTERS * BITS / 8;

/// Register `i` of the packed registers `regs`.
pub(crate) fn get(regs: &[u8], i: usize) -> u8 {
    let (byte, shift) = (i * BITS / 8, i * BITS % 8);
    let low = u16::from(regs[byte]);
    // The last register ends inside the last byte: nothing of it lies beyond.
    let high = regs.get(byte + 1).map_or(0, |b| u16::from(*b));
    (((low >> shift) | (high << (8 - shift))) & MAX) as u8
}

/// Sets register `i` of `regs` to `value` (at most 63).
pub(crate) fn set(regs: &mut [u8], i: usize, value: u8) {
    let (byte, shift) = (i * BITS / 8, i * BITS % 8);
    let v = u16::from(value) & MAX;
    regs[byte] = (regs[byte] & !((MAX << shift) as u8)) | ((v << shift) as u8);
    if let Some(next) = regs.get_mut(byte + 1) {
        // The bits that did not fit in the first byte (none when `shift` is 0 or 2).
        let spill = 8 - shift;
        *next = (*next & !((MAX >> spill) as u8)) | ((v >> spill) as u8);
    }
}

/// Raises register `i` to `value` if it holds less; says whether it did.
pub(crate) fn raise(regs: &mut [u8], i: usize, value: u8) -> bool {
    if value > get(regs, i) {
        set(regs, i, value);
        true
    } else {
        false
    }
}

/// Counts how many registers hold each value, into `hist`.
pub(crate) fn histogram(regs: &[u8], hist: &mut [u32; HISTOGRAM]) {
    // Four registers in every three bytes.
    for c in regs[..REGISTER_BYTES].chunks_exact(3) {
        let (a, b, d) = (c[0], c[1], c[2]);
        hist[usize::from(a & 63)] += 1;
        hist[usize::from((a >> 6 | b << 2) & 63)] += 1;
        hist[usize::from((b >> 4 | d << 4) & 63)] += 1;
        hist[usize::from(d >> 2)] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registers_keep_their_values_and_leave_their_neighbours_alone() {
        let mut regs = vec![0u8; REGISTER_BYTES];
        let mut want = vec![0u8; REGISTERS];
        let mut x: u32 = 7;
        for round in 0..3 {
            for (i, w) in want.iter_mut().enumerate() {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345 + round);
                let v = ((x >> 16) & 63) as u8;
                set(&mut regs, i, v);
                *w = v;
            }
            for (i, w) in want.iter().enumerate() {
                assert_eq!(get(&regs, i), *w, "register {i}");
            }
            let mut hist = [0u32; HISTOGRAM];
            histogram(&regs, &mut hist);
            for v in 0..64u8 {
                let n = want.iter().filter(|w| **w == v).count() as u32;
                assert_eq!(hist[usize::from(v)], n);
            }
        }
        let v5 = get(&regs, 5);
        assert!(!raise(&mut regs, 5, v5));
        set(&mut regs, 5, 1);
        assert!(raise(&mut regs, 5, 2));
        assert_eq!(get(&regs, 5), 2);
    }
}
