//! What `SORT`'s patterns read and how it orders what they give: the pieces of
//! [`super::sort`] that follow C's rules rather than Rust's.
//!
//! Redis's `SORT` is written against C strings. Three of its rules therefore look at a value
//! only up to its first NUL byte, and latchkey keeps them so that replies match byte for byte:
//!
//! - a pattern is found by `strchr`/`strstr` ([`Pattern`]): the `*` and the `->` of a hash
//!   field count only before a NUL;
//! - a weight is read by `strtod` ([`c_strtod`]): leading blanks are skipped, hex (`0x1p3`),
//!   `inf` and `infinity` are numbers, an empty value is 0, and anything after a NUL is not
//!   seen;
//! - `ALPHA` without `STORE` compares with `strcoll` ([`collate`]). Redis calls
//!   `setlocale(LC_COLLATE, "")`, so its order follows the locale of its environment;
//!   latchkey always orders as the C locale does (byte order, up to the first NUL), which is
//!   what Redis gives when it runs with no locale set (`LANG`/`LC_ALL` unset, or `C`). With
//!   `STORE`, Redis compares whole strings byte by byte so that a replica stores the same
//!   list whatever its locale; latchkey does the same.

use std::cmp::Ordering;

use bytes::Bytes;

use crate::command::Ctx;
use crate::db::Value;

/// The bytes of `b` up to its first NUL: what C's string functions see of it.
pub(crate) fn c_str(b: &[u8]) -> &[u8] {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    &b[..end]
}

/// A `BY` or `GET` pattern, taken apart once: `#`, or a key name around a `*` with an
/// optional hash field after `->`.
#[derive(Debug, Clone)]
pub(crate) enum Pattern {
    /// `#`: the element itself.
    Element,
    /// No `*` (before a NUL): names no key, finds nothing.
    Constant,
    /// `prefix*suffix`, or `prefix*suffix->field`.
    Key {
        prefix: Bytes,
        suffix: Bytes,
        field: Option<Bytes>,
    },
}

impl Pattern {
    /// Takes a pattern apart as Redis's `lookupKeyByPattern` does: the first `*` is where the
    /// element goes; a `->` after it followed by at least one byte names a hash field (the
    /// rest of the pattern, NULs included). A pattern ending in `->` names a plain key whose
    /// name ends in `->`.
    pub(crate) fn parse(p: &Bytes) -> Pattern {
        let c = c_str(p);
        if c == b"#" {
            return Pattern::Element;
        }
        let Some(star) = c.iter().position(|b| *b == b'*') else {
            return Pattern::Constant;
        };
        let after = &c[star + 1..];
        let arrow = after
            .windows(2)
            .position(|w| w == b"->")
            .map(|i| star + 1 + i)
            // `*(f+2) != '\0'`: something (not a NUL) follows the arrow.
            .filter(|&f| c.len() > f + 2);
        match arrow {
            Some(f) => Pattern::Key {
                prefix: p.slice(..star),
                suffix: p.slice(star + 1..f),
                field: Some(p.slice(f + 2..)),
            },
            None => Pattern::Key {
                prefix: p.slice(..star),
                suffix: p.slice(star + 1..),
                field: None,
            },
        }
    }

    /// Whether the pattern reads other keys (anything but `#`).
    pub(crate) fn reads_keys(&self) -> bool {
        !matches!(self, Pattern::Element)
    }

    /// What the pattern finds for `element` in the client's database: the element itself for
    /// `#`, the string at the key (or the field of the hash at the key) named by putting the
    /// element in place of `*`; `None` when that key is missing or of another type, or the
    /// field is missing. Reads one key at a time and lets it go before returning, so callers
    /// may hold no other entry of the database meanwhile.
    pub(crate) fn lookup(&self, ctx: &Ctx<'_>, element: &Bytes) -> Option<Bytes> {
        let (prefix, suffix, field) = match self {
            Pattern::Element => return Some(element.clone()),
            Pattern::Constant => return None,
            Pattern::Key {
                prefix,
                suffix,
                field,
            } => (prefix, suffix, field),
        };
        let mut key = Vec::with_capacity(prefix.len() + element.len() + suffix.len());
        key.extend_from_slice(prefix);
        key.extend_from_slice(element);
        key.extend_from_slice(suffix);
        let entry = ctx.db().get(&key, ctx.now_ms, ctx.lazy_delete())?;
        match (&entry.value, field) {
            (Value::Str(s), None) => Some(s.to_bytes()),
            (Value::Hash(h), Some(f)) => h.get(&f[..]).map(|v| v.to_bytes()),
            _ => None,
        }
    }
}

/// C's `strtod` as `SORT` uses it: the number a weight reads as, or `None` when Redis refuses
/// it (`One or more scores can't be converted into double`): bytes left over, a value out of
/// a double's range (`ERANGE`, overflow or underflow), or NaN. An empty value is 0 (`strtod`
/// converts nothing and stops at the terminating NUL), as is one that starts with a NUL.
pub(crate) fn c_strtod(b: &[u8]) -> Option<f64> {
    let s = c_str(b);
    if s.is_empty() {
        return Some(0.0);
    }
    let body = s.trim_ascii_start();
    let (neg, unsigned) = match body.first() {
        Some(b'-') => (true, &body[1..]),
        Some(b'+') => (false, &body[1..]),
        _ => (false, body),
    };
    let lower = unsigned.to_ascii_lowercase();
    let magnitude = if lower == b"inf" || lower == b"infinity" {
        f64::INFINITY
    } else if lower.starts_with(b"0x") {
        hex_float(&lower[2..])?
    } else {
        decimal(unsigned)?
    };
    Some(if neg { -magnitude } else { magnitude })
}

/// A decimal number with optional fraction and exponent, all of `t` (no sign: taken before);
/// `None` past a double's range, as `strtod` sets `ERANGE` there.
fn decimal(t: &[u8]) -> Option<f64> {
    // Rust's parser takes `inf`, `nan` and a second sign, which `strtod` would not take here.
    if t.is_empty()
        || !t
            .iter()
            .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
        || matches!(t[0], b'+' | b'-')
    {
        return None;
    }
    let v: f64 = std::str::from_utf8(t).ok()?.parse().ok()?;
    let nonzero_digits = t
        .iter()
        .take_while(|c| !matches!(c, b'e' | b'E'))
        .any(|c| matches!(c, b'1'..=b'9'));
    if v.is_infinite() || (nonzero_digits && (v == 0.0 || v.abs() < f64::MIN_POSITIVE)) {
        return None;
    }
    Some(v)
}

/// A hex float after its `0x` (`1f`, `1.8`, `1p-3`), as `strtod` reads C99 hex floats; `None`
/// when there are no digits or bytes are left over.
fn hex_float(t: &[u8]) -> Option<f64> {
    let (mantissa, exp) = match t.iter().position(|c| *c == b'p') {
        Some(p) => (&t[..p], Some(&t[p + 1..])),
        None => (t, None),
    };
    let mut value = 0f64;
    let mut scale = 0i32;
    let mut digits = 0;
    let mut seen_point = false;
    for &c in mantissa {
        if c == b'.' && !seen_point {
            seen_point = true;
            continue;
        }
        let d = (c as char).to_digit(16)?;
        value = value * 16.0 + d as f64;
        digits += 1;
        if seen_point {
            scale -= 4;
        }
    }
    if digits == 0 {
        return None;
    }
    if let Some(e) = exp {
        let e: i32 = std::str::from_utf8(e).ok()?.parse().ok()?;
        scale = scale.saturating_add(e);
    }
    let v = ldexp(value, scale);
    // An exact subnormal (`0x1p-1074`) is no underflow for glibc; rounding to zero is.
    if v.is_infinite() || (value != 0.0 && v == 0.0) {
        return None;
    }
    Some(v)
}

/// `x * 2^e`, in steps that neither overflow nor underflow on the way (C's `ldexp`).
fn ldexp(mut x: f64, mut e: i32) -> f64 {
    while e > 1000 {
        x *= 2f64.powi(1000);
        e -= 1000;
    }
    while e < -1000 {
        x *= 2f64.powi(-1000);
        e += 1000;
    }
    x * 2f64.powi(e)
}

/// `strcoll` in the C locale: byte order of the two strings up to their first NUL.
pub(crate) fn collate(a: &[u8], b: &[u8]) -> Ordering {
    c_str(a).cmp(c_str(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_reads_what_c_reads() {
        assert_eq!(c_strtod(b"1.5"), Some(1.5));
        assert_eq!(c_strtod(b"  -2e3"), Some(-2000.0));
        assert_eq!(c_strtod(b""), Some(0.0));
        assert_eq!(c_strtod(b"7\0junk"), Some(7.0));
        assert_eq!(c_strtod(b"0x10"), Some(16.0));
        assert_eq!(c_strtod(b"0x1p3"), Some(8.0));
        assert_eq!(c_strtod(b"0x1p-1074"), Some(f64::from_bits(1)));
        assert_eq!(c_strtod(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(c_strtod(b"Infinity"), Some(f64::INFINITY));
        assert_eq!(c_strtod(b".5"), Some(0.5));
        assert_eq!(c_strtod(b"5."), Some(5.0));
        for bad in [
            &b"nan"[..],
            b"1e400",
            b"1e-400",
            b"1 ",
            b" ",
            b"abc",
            b"0x",
            b"--1",
            b"+-1",
            b".",
            b"1e",
        ] {
            assert_eq!(c_strtod(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn patterns_split_as_redis_splits_them() {
        let p = |s: &'static [u8]| Pattern::parse(&Bytes::from_static(s));
        assert!(matches!(p(b"#"), Pattern::Element));
        assert!(matches!(p(b"nosort"), Pattern::Constant));
        assert!(matches!(p(b"a\0*"), Pattern::Constant));
        match p(b"w_*->f") {
            Pattern::Key {
                prefix,
                suffix,
                field,
            } => {
                assert_eq!(&prefix[..], b"w_");
                assert_eq!(&suffix[..], b"");
                assert_eq!(field.as_deref(), Some(&b"f"[..]));
            }
            other => panic!("{other:?}"),
        }
        // Ending in `->`: a plain key whose name ends so.
        match p(b"x:*->") {
            Pattern::Key { suffix, field, .. } => {
                assert_eq!(&suffix[..], b"->");
                assert!(field.is_none());
            }
            other => panic!("{other:?}"),
        }
        // An arrow before the star is part of the key name.
        match p(b"a->b*c") {
            Pattern::Key { prefix, field, .. } => {
                assert_eq!(&prefix[..], b"a->b");
                assert!(field.is_none());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn collation_stops_at_nul() {
        assert_eq!(collate(b"a\0b", b"a\0c"), Ordering::Equal);
        assert_eq!(collate(b"B", b"a"), Ordering::Less);
        assert_eq!(collate(b"ab", b"a"), Ordering::Greater);
    }
}
