//! Bitmap commands: `SETBIT`, `GETBIT`, `BITCOUNT`, `BITPOS`, `BITOP`. A bitmap is a string
//! read as bits, bit 0 being the most significant bit of the first byte; bits past the end
//! of the string read as zero.
//!
//! The order in which arguments and the key are checked is Redis 7.0's, since it decides
//! which error a bad call gets: `BITCOUNT` and `BITPOS` look the key up before they parse
//! their range (a missing key answers 0 or -1 whatever the range says).

use bytes::Bytes;

use super::bitstring::{parse_bit_offset, with_grown_string};
use super::strings::read_string;
use super::util::{is, not_integer, parse_i64, syntax_error};
use super::{spec, CommandSpec, Ctx, DENYOOM, FAST, MULTI_KEY, READONLY, WRITE};
use crate::command::WALKS_VALUE;
use crate::db::{Entry, Str, Update, Value};
use crate::frame::Frame;

/// The bitmap commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("setbit", 4, WRITE | DENYOOM, 1, 1, 1, setbit),
    spec("getbit", 3, READONLY | FAST, 1, 1, 1, getbit),
    spec("bitcount", -2, READONLY | WALKS_VALUE, 1, 1, 1, bitcount),
    spec("bitpos", -3, READONLY | WALKS_VALUE, 1, 1, 1, bitpos),
    spec(
        "bitop",
        -4,
        WRITE | DENYOOM | MULTI_KEY | WALKS_VALUE,
        2,
        -1,
        1,
        bitop,
    ),
];

/// The bit at `offset` (0 or 1), zero past the end.
pub(crate) fn bit_at(p: &[u8], offset: u64) -> u8 {
    match p.get((offset >> 3) as usize) {
        Some(byte) => (byte >> (7 - (offset & 7))) & 1,
        None => 0,
    }
}

fn setbit(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let offset = match parse_bit_offset(ctx, &args[2], None) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let bad_bit = || Frame::error("ERR bit is not an integer or out of range");
    let on = match crate::codec::parse_int(&args[3]) {
        Some(v @ (0 | 1)) => v as u8,
        _ => return bad_bit(),
    };
    let byte = (offset >> 3) as usize;
    let shift = 7 - (offset & 7);
    let r = with_grown_string(ctx, &args[1], byte + 1, |p, grew| {
        let old = (p[byte] >> shift) & 1;
        p[byte] = (p[byte] & !(1 << shift)) | (on << shift);
        (old, grew || old != on)
    });
    match r {
        Ok(old) => Frame::Integer(i64::from(old)),
        Err(e) => e,
    }
}

fn getbit(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let offset = match parse_bit_offset(ctx, &args[2], None) {
        Ok(o) => o,
        Err(e) => return e,
    };
    match read_string(ctx, &args[1]) {
        Ok(Some(s)) => Frame::Integer(i64::from(bit_at(&s, offset))),
        Ok(None) => Frame::Integer(0),
        Err(e) => e,
    }
}

/// `BIT` or `BYTE` (true for `BIT`); anything else is a syntax error.
fn unit_is_bit(arg: &[u8]) -> Result<bool, Frame> {
    if is(arg, "bit") {
        Ok(true)
    } else if is(arg, "byte") {
        Ok(false)
    } else {
        Err(syntax_error())
    }
}

/// Redis's reading of a `start end` range over `len` units: negative counts from the end,
/// then both are clamped into the string. An empty range comes out with `start > end`.
fn clamp(mut start: i64, mut end: i64, len: i64) -> (i64, i64) {
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

/// The inclusive bit range of a clamped `start..=end` in bits or bytes.
fn bit_range(start: i64, end: i64, in_bits: bool) -> (u64, u64) {
    if in_bits {
        (start as u64, end as u64)
    } else {
        (start as u64 * 8, end as u64 * 8 + 7)
    }
}

/// How many bits are set in bits `lo..=hi` of `p` (both inside `p`).
pub(crate) fn count_bits(p: &[u8], lo: u64, hi: u64) -> u64 {
    let (first, last) = ((lo >> 3) as usize, (hi >> 3) as usize);
    let whole: u64 = p[first..=last]
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    // Take away the bits of the edge bytes that lie outside the range.
    let head = p[first] & !(0xffu8 >> (lo & 7));
    let tail = p[last] & (0x7fu8 >> (hi & 7));
    whole - u64::from(head.count_ones()) - u64::from(tail.count_ones())
}

/// The first bit equal to `bit` in bits `lo..=hi` of `p` (both inside `p`).
pub(crate) fn find_bit(p: &[u8], lo: u64, hi: u64, bit: u8) -> Option<u64> {
    let mut i = lo;
    // Up to the next byte boundary bit by bit, then whole bytes, then the last bits.
    while i <= hi && i & 7 != 0 {
        if bit_at(p, i) == bit {
            return Some(i);
        }
        i += 1;
    }
    let (first, end) = ((i >> 3) as usize, ((hi + 1) >> 3) as usize);
    if i <= hi && first < end {
        let skip = if bit == 1 { 0 } else { 0xff };
        i = match p[first..end].iter().position(|&b| b != skip) {
            Some(k) => ((first + k) as u64) << 3,
            None => (end as u64) << 3,
        };
    }
    while i <= hi {
        if bit_at(p, i) == bit {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn bitcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let s = match read_string(ctx, &args[1]) {
        Ok(Some(s)) => s,
        Ok(None) => return Frame::Integer(0),
        Err(e) => return e,
    };
    let len = s.len() as i64;
    let (start, end, in_bits) = match args.len() {
        2 => (0, len - 1, false),
        4 | 5 => {
            let (Ok(start), Ok(end)) = (parse_i64(&args[2]), parse_i64(&args[3])) else {
                return not_integer();
            };
            if start < 0 && end < 0 && start > end {
                return Frame::Integer(0);
            }
            let in_bits = match args.get(4).map(|a| unit_is_bit(a)) {
                Some(Err(e)) => return e,
                Some(Ok(b)) => b,
                None => false,
            };
            let units = if in_bits { len * 8 } else { len };
            let (start, end) = clamp(start, end, units);
            (start, end, in_bits)
        }
        _ => return syntax_error(),
    };
    if start > end {
        return Frame::Integer(0);
    }
    let (lo, hi) = bit_range(start, end, in_bits);
    Frame::Integer(count_bits(&s, lo, hi) as i64)
}

fn bitpos(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let bit = match parse_i64(&args[2]) {
        Ok(b @ (0 | 1)) => b as u8,
        Ok(_) => return Frame::error("ERR The bit argument must be 1 or 0."),
        Err(e) => return e,
    };
    let s = match read_string(ctx, &args[1]) {
        Ok(Some(s)) => s,
        // A missing key is an endless run of zeros.
        Ok(None) => return Frame::Integer(if bit == 1 { -1 } else { 0 }),
        Err(e) => return e,
    };
    let len = s.len() as i64;
    let (start, end, in_bits, end_given) = match args.len() {
        3 => (0, len - 1, false, false),
        4..=6 => {
            let Ok(start) = parse_i64(&args[3]) else {
                return not_integer();
            };
            let in_bits = match args.get(5).map(|a| unit_is_bit(a)) {
                Some(Err(e)) => return e,
                Some(Ok(b)) => b,
                None => false,
            };
            let units = if in_bits { len * 8 } else { len };
            let end = match args.get(4) {
                Some(a) => match parse_i64(a) {
                    Ok(e) => e,
                    Err(e) => return e,
                },
                None => units - 1,
            };
            let (start, end) = clamp(start, end, units);
            (start, end, in_bits, args.len() >= 5)
        }
        _ => return syntax_error(),
    };
    if start > end {
        return Frame::Integer(-1);
    }
    let (lo, hi) = bit_range(start, end, in_bits);
    match find_bit(&s, lo, hi, bit) {
        Some(pos) => Frame::Integer(pos as i64),
        // Looking for a clear bit with no end given, the string counts as zero-padded: the
        // first bit past it is clear.
        None if bit == 0 && !end_given => Frame::Integer(hi as i64 + 1),
        None => Frame::Integer(-1),
    }
}

/// A `BITOP` operation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    And,
    Or,
    Xor,
    Not,
}

fn bitop(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let op = if is(&args[1], "and") {
        Op::And
    } else if is(&args[1], "or") {
        Op::Or
    } else if is(&args[1], "xor") {
        Op::Xor
    } else if is(&args[1], "not") {
        Op::Not
    } else {
        return syntax_error();
    };
    if op == Op::Not && args.len() != 4 {
        return Frame::error("ERR BITOP NOT must be called with a single source key.");
    }
    let mut sources = Vec::with_capacity(args.len() - 3);
    for key in &args[3..] {
        match read_string(ctx, key) {
            Ok(s) => sources.push(s.unwrap_or_default()),
            Err(e) => return e,
        }
    }
    let result = combine(op, &sources);
    let len = result.len() as i64;
    let reply = ctx.update_key(&args[2], |current| {
        if result.is_empty() {
            // An empty result deletes the destination, as in Redis.
            let update = if current.is_some() {
                Update::Remove
            } else {
                Update::Keep
            };
            return (update, Frame::Integer(0));
        }
        let entry = Entry::with_expiry(Value::Str(Str::from(result)), None);
        (Update::Put(entry), Frame::Integer(len))
    });
    ctx.notify_update(crate::notify::STRING, "set", &args[2]);
    reply
}

/// The bytes of `op` over `sources`, each read as zero-padded to the longest.
fn combine(op: Op, sources: &[Bytes]) -> Vec<u8> {
    let max = sources.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![0u8; max];
    out[..sources[0].len()].copy_from_slice(&sources[0]);
    if op == Op::Not {
        out.iter_mut().for_each(|b| *b = !*b);
        return out;
    }
    for s in &sources[1..] {
        let (inside, past) = out.split_at_mut(s.len());
        match op {
            Op::And => {
                inside.iter_mut().zip(s.iter()).for_each(|(o, b)| *o &= b);
                past.fill(0);
            }
            Op::Or => inside.iter_mut().zip(s.iter()).for_each(|(o, b)| *o |= b),
            Op::Xor => inside.iter_mut().zip(s.iter()).for_each(|(o, b)| *o ^= b),
            Op::Not => unreachable!("NOT has one source"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_and_finding_bits_respects_the_edges_of_the_range() {
        let p = [0b1010_1010u8, 0xff, 0x00, 0b0000_0001];
        assert_eq!(count_bits(&p, 0, 31), 4 + 8 + 1);
        assert_eq!(count_bits(&p, 1, 6), 3);
        assert_eq!(count_bits(&p, 3, 12), 2 + 5);
        assert_eq!(find_bit(&p, 1, 31, 1), Some(2));
        assert_eq!(find_bit(&p, 8, 31, 0), Some(16));
        assert_eq!(find_bit(&p, 17, 30, 1), None);
        assert_eq!(find_bit(&p, 17, 31, 1), Some(31));
        assert_eq!(find_bit(&p, 8, 15, 0), None);
    }
}
