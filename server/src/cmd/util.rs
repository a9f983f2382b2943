//! Small helpers shared by command handlers: argument parsing with Redis's error texts.

use bytes::Bytes;

use crate::codec;
use crate::frame::Frame;

/// `-WRONGTYPE Operation against a key holding the wrong kind of value`.
pub fn wrongtype() -> Frame {
    Frame::error("WRONGTYPE Operation against a key holding the wrong kind of value")
}

/// `-ERR syntax error`.
pub fn syntax_error() -> Frame {
    Frame::error("ERR syntax error")
}

/// `-ERR value is not an integer or out of range`.
pub fn not_integer() -> Frame {
    Frame::error("ERR value is not an integer or out of range")
}

/// `-ERR value is not a valid float`.
pub fn not_float() -> Frame {
    Frame::error("ERR value is not a valid float")
}

/// Parses an argument as a 64-bit signed integer, strictly as Redis does.
pub fn parse_i64(arg: &[u8]) -> Result<i64, Frame> {
    codec::parse_int(arg).ok_or_else(not_integer)
}

/// Parses an argument as a double as Redis's `getDoubleFromObject` does (`inf`, `-inf` allowed,
/// no NaN, no surrounding spaces).
pub fn parse_f64(arg: &[u8]) -> Result<f64, Frame> {
    parse_double(arg).ok_or_else(not_float)
}

/// The parsing behind [`parse_f64`], without choosing an error text.
pub fn parse_double(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let v = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        _ => {
            if s.contains(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E') {
                return None;
            }
            s.parse::<f64>().ok()?
        }
    };
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

/// ASCII case-insensitive comparison of an argument with an option name.
pub fn is(arg: &[u8], option: &str) -> bool {
    arg.eq_ignore_ascii_case(option.as_bytes())
}

/// The decimal form of an integer as bytes.
pub fn int_bytes(i: i64) -> Bytes {
    let mut b = itoa::Buffer::new();
    Bytes::copy_from_slice(b.format(i).as_bytes())
}

/// Lowercased UTF-8 (lossy) text of an argument, for error messages and subcommand matching.
pub fn lower(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).to_ascii_lowercase()
}
