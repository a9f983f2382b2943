//! `INCRBYFLOAT` and `HINCRBYFLOAT` arithmetic in the platform's `long double`, as Redis does it.
//!
//! Redis parses both operands with `strtold`, adds them in `long double` (80-bit extended
//! precision on x86-64) and stores the sum printed with `%.17Lf`, trailing zeros removed. An
//! `f64` gets different digits for everyday values: `0.1` then `0.2` is `0.3` in Redis,
//! `0.30000000000000004` in `f64`. Rust has no `long double`, so the step is a small C
//! function compiled by the build script, and everything else stays here.

use std::os::raw::{c_char, c_int, c_long};

extern "C" {
    fn latchkey_ld_check_increment(by: *const c_char, by_len: usize) -> c_int;
    fn latchkey_ld_incr(
        current: *const c_char,
        current_len: usize,
        by: *const c_char,
        by_len: usize,
        out: *mut c_char,
        out_len: usize,
    ) -> c_long;
}

/// Why an increment was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IncrError {
    /// The stored value is not a float.
    Current,
    /// The increment is not a float.
    By,
    /// The increment is NaN or infinite (refused up front by [`check_increment`]).
    ByInfinite,
    /// The sum is NaN or infinite.
    Sum,
    /// The sum's text is longer than Redis allows.
    TooLong,
}

/// Checks an increment the way `HINCRBYFLOAT` does before it looks at the key: `By` when it
/// is not a float, `ByInfinite` when it is NaN or infinite.
pub(crate) fn check_increment(by: &[u8]) -> Result<(), IncrError> {
    // SAFETY: the pointer is valid for `by.len()` bytes for the whole call, which copies them.
    match unsafe { latchkey_ld_check_increment(by.as_ptr().cast(), by.len()) } {
        0 => Ok(()),
        -3 => Err(IncrError::ByInfinite),
        _ => Err(IncrError::By),
    }
}

/// Adds `by` to `current` (absent: zero) as Redis does, and returns the text to store. An
/// infinite increment fails as an infinite sum (`HINCRBYFLOAT` refuses it earlier, with
/// [`check_increment`]).
pub(crate) fn incr(current: Option<&[u8]>, by: &[u8]) -> Result<String, IncrError> {
    // Room for the longest text Redis produces (its MAX_LONG_DOUBLE_CHARS).
    let mut out = [0u8; 5 * 1024];
    let (cur_ptr, cur_len) = match current {
        Some(c) => (c.as_ptr().cast::<c_char>(), c.len()),
        None => (std::ptr::null(), 0),
    };
    // SAFETY: every pointer is valid for the length passed with it for the whole call; the C
    // function copies its inputs before parsing and writes at most `out.len()` bytes.
    let n = unsafe {
        latchkey_ld_incr(
            cur_ptr,
            cur_len,
            by.as_ptr().cast(),
            by.len(),
            out.as_mut_ptr().cast(),
            out.len(),
        )
    };
    match n {
        -1 => Err(IncrError::Current),
        -2 => Err(IncrError::By),
        -4 => Err(IncrError::Sum),
        n if n < 0 => Err(IncrError::TooLong),
        n => Ok(String::from_utf8_lossy(&out[..n as usize]).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_digits_are_redis_s() {
        assert_eq!(incr(None, b"0.1").unwrap(), "0.1");
        // 0.30000000000000004 in f64.
        assert_eq!(incr(Some(b"0.1"), b"0.2").unwrap(), "0.3");
        assert_eq!(
            incr(Some(b"0.10000000000000001"), b"0.2").unwrap(),
            "0.30000000000000001"
        );
        assert_eq!(incr(Some(b"10"), b"-10").unwrap(), "0");
        assert_eq!(incr(None, b"-0.0").unwrap(), "0");
        assert_eq!(incr(None, b"0x10").unwrap(), "16");
        assert_eq!(incr(None, b"1.5e3").unwrap(), "1500");
        assert_eq!(
            incr(None, b"1.23456789012345678901234").unwrap(),
            "1.23456789012345679"
        );
        assert!(incr(None, b"1e400")
            .unwrap()
            .starts_with("1000000000000000000"));
    }

    #[test]
    fn refusals_are_redis_s() {
        assert_eq!(incr(Some(b"abc"), b"1"), Err(IncrError::Current));
        assert_eq!(incr(Some(b" 1"), b"1"), Err(IncrError::Current));
        assert_eq!(incr(None, b"1 "), Err(IncrError::By));
        assert_eq!(incr(None, b""), Err(IncrError::By));
        assert_eq!(incr(None, b"nan"), Err(IncrError::By));
        assert_eq!(incr(None, b"1e-5000"), Err(IncrError::By));
        assert_eq!(incr(Some(b"abc"), b"x"), Err(IncrError::By), "by first");
        assert_eq!(incr(None, b"inf"), Err(IncrError::Sum));
        assert_eq!(check_increment(b"1.5"), Ok(()));
        assert_eq!(check_increment(b"-inf"), Err(IncrError::ByInfinite));
        assert_eq!(check_increment(b"x"), Err(IncrError::By));
        // strtold would stop at the NUL and read 1: the whole text must be the number.
        assert_eq!(incr(Some(b"1\x002"), b"1"), Err(IncrError::Current));
        assert_eq!(check_increment(b"1\x00"), Err(IncrError::By));
    }
}
