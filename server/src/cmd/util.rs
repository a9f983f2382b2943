//! Small helpers shared by command handlers: argument parsing with Redis's error texts.

use crate::memory::EntryMut;
use bytes::Bytes;

use crate::codec;
use crate::db::{Db, Value};
use crate::frame::Frame;

/// `-WRONGTYPE Operation against a key holding the wrong kind of value`.
pub(crate) fn wrongtype() -> Frame {
    Frame::error("WRONGTYPE Operation against a key holding the wrong kind of value")
}

/// `-ERR syntax error`.
pub(crate) fn syntax_error() -> Frame {
    Frame::error("ERR syntax error")
}

/// `-ERR value is not an integer or out of range`.
pub(crate) fn not_integer() -> Frame {
    Frame::error("ERR value is not an integer or out of range")
}

/// `-ERR value is not a valid float`.
pub(crate) fn not_float() -> Frame {
    Frame::error("ERR value is not a valid float")
}

/// Parses an argument as a 64-bit signed integer, strictly as Redis does.
pub(crate) fn parse_i64(arg: &[u8]) -> Result<i64, Frame> {
    codec::parse_int(arg).ok_or_else(not_integer)
}

/// Parses an argument as a double as Redis's `getDoubleFromObject` does (`inf`, `-inf` allowed,
/// no NaN, no surrounding spaces); the caller chooses the error text.
pub(crate) fn parse_double(arg: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    // The common case, a number in digits (every `ZADD` score): ASCII with no letter but an
    // exponent's. Neither a spelling of infinity nor any letter test below can apply to it,
    // so it goes straight to the parse, after one pass over its bytes.
    let digits =
        |b: &u8| b.is_ascii() && (!b.is_ascii_alphabetic() || b.eq_ignore_ascii_case(&b'e'));
    if arg.iter().all(digits) {
        return s.parse::<f64>().ok().filter(|v| !v.is_nan());
    }
    // The spellings of infinity, compared without a lowercased copy: a score is parsed on
    // every `ZADD`, and the copy was an allocation each time.
    let named = |names: &[&str]| names.iter().any(|n| s.eq_ignore_ascii_case(n));
    let v = if named(&["inf", "+inf", "infinity", "+infinity"]) {
        f64::INFINITY
    } else if named(&["-inf", "-infinity"]) {
        f64::NEG_INFINITY
    } else {
        if s.contains(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E') {
            return None;
        }
        s.parse::<f64>().ok()?
    };
    if v.is_nan() {
        None
    } else {
        Some(v)
    }
}

/// ASCII case-insensitive comparison of an argument with an option name.
pub(crate) fn is(arg: &[u8], option: &str) -> bool {
    arg.eq_ignore_ascii_case(option.as_bytes())
}

/// The decimal form of an integer as bytes.
pub(crate) fn int_bytes(i: i64) -> Bytes {
    let mut b = itoa::Buffer::new();
    Bytes::copy_from_slice(b.format(i).as_bytes())
}

/// Lowercased UTF-8 (lossy) text of an argument, for error messages and subcommand matching.
pub(crate) fn lower(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).to_ascii_lowercase()
}

/// A container value type (hash, list, sorted set) that commands read and write in place.
pub(crate) trait Container: Sized {
    /// The container inside `v`, if `v` holds this type.
    fn of(v: &Value) -> Option<&Self>;
    /// The same, mutably.
    fn of_mut(v: &mut Value) -> Option<&mut Self>;
    /// A new, empty value of this type.
    fn empty() -> Value;
}

impl Container for indexmap::IndexMap<crate::value::Str, crate::value::Str> {
    fn of(v: &Value) -> Option<&Self> {
        match v {
            Value::Hash(h) => Some(h),
            _ => None,
        }
    }
    fn of_mut(v: &mut Value) -> Option<&mut Self> {
        match v {
            Value::Hash(h) => Some(h),
            _ => None,
        }
    }
    fn empty() -> Value {
        Value::Hash(Box::default())
    }
}

impl Container for crate::list::List {
    fn of(v: &Value) -> Option<&Self> {
        match v {
            Value::List(l) => Some(l),
            _ => None,
        }
    }
    fn of_mut(v: &mut Value) -> Option<&mut Self> {
        match v {
            Value::List(l) => Some(l),
            _ => None,
        }
    }
    fn empty() -> Value {
        Value::List(Default::default())
    }
}

impl Container for crate::zset::ZSet {
    fn of(v: &Value) -> Option<&Self> {
        match v {
            Value::ZSet(z) => Some(z),
            _ => None,
        }
    }
    fn of_mut(v: &mut Value) -> Option<&mut Self> {
        match v {
            Value::ZSet(z) => Some(z),
            _ => None,
        }
    }
    fn empty() -> Value {
        Value::ZSet(Box::default())
    }
}

impl Container for crate::set::Set {
    fn of(v: &Value) -> Option<&Self> {
        match v {
            Value::Set(s) => Some(s),
            _ => None,
        }
    }
    fn of_mut(v: &mut Value) -> Option<&mut Self> {
        match v {
            Value::Set(s) => Some(s),
            _ => None,
        }
    }
    fn empty() -> Value {
        Value::Set(Box::default())
    }
}

/// Runs `f` on the container at `key`: `Ok(None)` when the key is absent, WRONGTYPE when it
/// holds another type.
pub(crate) fn read_container<C: Container, R>(
    db: &Db,
    key: &[u8],
    now_ms: u64,
    lazy: bool,
    f: impl FnOnce(&C) -> R,
) -> Result<Option<R>, Frame> {
    match db.get(key, now_ms, lazy) {
        None => Ok(None),
        Some(e) => C::of(&e.value).map(f).map(Some).ok_or_else(wrongtype),
    }
}

/// The entry at `key` for in-place modification of its container, created empty when absent
/// and `create` is set. WRONGTYPE when it holds another type.
pub(crate) fn write_container<'a, C: Container>(
    db: &'a Db,
    key: &Bytes,
    now_ms: u64,
    lazy: bool,
    create: bool,
) -> Result<Option<EntryMut<'a>>, Frame> {
    if let Some(e) = db.get_mut(key, now_ms, lazy) {
        return match C::of(&e.value) {
            Some(_) => Ok(Some(e)),
            None => Err(wrongtype()),
        };
    }
    if !create {
        return Ok(None);
    }
    // Created in one step: another client may be creating the same key right now.
    let e = db.get_or_create(key, now_ms, lazy, C::empty);
    match C::of(&e.value) {
        Some(_) => Ok(Some(e)),
        None => Err(wrongtype()),
    }
}

/// The container inside an entry returned by [`write_container`].
pub(crate) fn container_mut<'e, C: Container>(e: &'e mut EntryMut<'_>) -> &'e mut C {
    C::of_mut(&mut e.value).expect("write_container only returns entries of its type")
}

/// A container's `HELP` reply as Redis shapes it (`addReplyHelp`): a first line naming the
/// command, then `entries` (each subcommand's synopsis, followed by its description lines
/// indented by four spaces), then the entry for `HELP` itself; every line a status reply.
/// A container lists only the subcommands latchkey runs, in Redis's words.
pub(crate) fn help(command: &str, entries: &[&'static str]) -> Frame {
    let first = format!("{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    let rest = entries
        .iter()
        .copied()
        .chain(["HELP", "    Prints this help."])
        .map(Frame::simple);
    Frame::Array(
        std::iter::once(Frame::Simple(Bytes::from(first)))
            .chain(rest)
            .collect(),
    )
}

/// Redis's reply to a subcommand it does not know (`OBJECT FOO`), naming the first 128
/// characters of what was sent and the parent command's `HELP`.
pub(crate) fn unknown_subcommand(args: &[Bytes], parent: &str) -> Frame {
    subcommand_error("unknown subcommand", args, parent)
}

/// Redis's error for a known subcommand given the wrong number of arguments where Redis
/// words it this way (`addReplySubcommandSyntaxError`): the name cut at 128 characters too.
pub(crate) fn subcommand_syntax_error(args: &[Bytes], parent: &str) -> Frame {
    subcommand_error(
        "unknown subcommand or wrong number of arguments for",
        args,
        parent,
    )
}

fn subcommand_error(what: &str, args: &[Bytes], parent: &str) -> Frame {
    Frame::error(format!(
        "ERR {what} '{}'. Try {} HELP.",
        String::from_utf8_lossy(&args[1])
            .chars()
            .take(128)
            .collect::<String>(),
        parent.to_ascii_uppercase()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scores in digits take the short path; every other spelling the full checks, with the
    /// answers Redis's `getDoubleFromObject` gives.
    #[test]
    fn parse_double_accepts_and_refuses_what_redis_does() {
        let ok = [
            ("1.5", 1.5),
            ("-2e3", -2000.0),
            ("1E5", 100_000.0),
            ("+7", 7.0),
            ("inf", f64::INFINITY),
            ("+Infinity", f64::INFINITY),
            ("-INF", f64::NEG_INFINITY),
        ];
        for (text, want) in ok {
            assert_eq!(parse_double(text.as_bytes()), Some(want), "{text}");
        }
        for bad in [
            "", " 1", "1 ", "1 2", "nan", "NaN", "1x", "0x10", "e", "--1", "\u{e9}1",
        ] {
            assert_eq!(parse_double(bad.as_bytes()), None, "{bad:?}");
        }
    }
}
