//! The cardinality estimate from the registers: Otmar Ertl's improved estimator ("New
//! cardinality estimation algorithms for HyperLogLog sketches", arXiv:1702.01284), which
//! Redis 7.0 uses. It needs only the histogram of register values (how many registers hold
//! 0, 1, ... 51), and corrects both ends: many empty registers (small sets, through `sigma`)
//! and registers at the 51 cap (huge sets, through `tau`).
//!
//! The arithmetic follows the same order of operations as Redis's, in `f64`, so that the
//! rounded result is the very number Redis answers.

use super::{HISTOGRAM, Q, REGISTERS};

/// 0.5 / ln 2: the bias correction of the estimator as the number of registers grows.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// Ertl's sigma(x) = x + sum over k >= 1 of x^(2^k) * 2^(k-1), summed until it stops changing.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

/// Ertl's tau(x), summed until it stops changing.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        // (1 - x)^2 as one multiplication: what a C compiler makes of `pow(1 - x, 2)`.
        z -= (1.0 - x) * (1.0 - x) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

/// The estimate from a histogram of register values. Values above 51 (only a crafted dense
/// value holds them) are left out of the sum, as in Redis.
pub(crate) fn cardinality(hist: &[u32; HISTOGRAM]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(hist[Q + 1])) / m);
    for j in (1..=Q).rev() {
        z += f64::from(hist[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(hist[0]) / m);
    let e = ALPHA_INF * m * m / z;
    // Rounded half away from zero (C's `llroundl`). When every register is at 51 or above,
    // `z` is 0 and the estimate infinite: there x86's conversion gives the "integer
    // indefinite" value 2^63, which Redis then answers as a negative number.
    let r = e.round();
    if r.is_finite() && r < (1u64 << 63) as f64 {
        r as u64
    } else {
        1 << 63
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_sketch_counts_zero_and_a_full_one_saturates() {
        let mut hist = [0u32; HISTOGRAM];
        hist[0] = REGISTERS as u32;
        assert_eq!(cardinality(&hist), 0);
        let mut hist = [0u32; HISTOGRAM];
        hist[51] = REGISTERS as u32;
        assert_eq!(cardinality(&hist), 1 << 63);
    }

    #[test]
    fn one_register_at_one_counts_one() {
        let mut hist = [0u32; HISTOGRAM];
        hist[0] = REGISTERS as u32 - 1;
        hist[1] = 1;
        assert_eq!(cardinality(&hist), 1);
    }
}
