//! `BITFIELD` and `BITFIELD_RO`: signed and unsigned integers of 1 to 64 bits (unsigned up to
//! 63, so that every value fits Redis's integer reply) at any bit offset of a string, read,
//! written and incremented with a chosen overflow rule (`WRAP`, `SAT`, `FAIL`).
//!
//! All the subcommands are parsed and checked before the key is looked up, then run in
//! order on one string grown once to the highest bit any `SET`/`INCRBY` writes.

use bytes::Bytes;

use super::bitmaps::bit_at;
use super::bitstring::{parse_bit_offset, with_grown_string};
use super::strings::read_string;
use super::util::{is, parse_i64, syntax_error};
use super::{spec, CommandSpec, Ctx, DENYOOM, FAST, READONLY, WRITE};
use crate::frame::Frame;

/// The bitfield commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("bitfield", -2, WRITE | DENYOOM, 1, 1, 1, bitfield),
    spec("bitfield_ro", -2, READONLY | FAST, 1, 1, 1, bitfield_ro),
];

/// What happens when a `SET` or `INCRBY` does not fit its type.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Overflow {
    /// Keep the low bits (two's complement for signed types).
    Wrap,
    /// Stop at the type's largest or smallest value.
    Sat,
    /// Write nothing and answer nil for this operation.
    Fail,
}

/// One operation of the command line.
#[derive(Clone, Copy)]
enum Kind {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// A parsed operation: what to do, on which integer, under which overflow rule.
struct Op {
    kind: Kind,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

fn bitfield(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(ctx, args, false)
}

fn bitfield_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(ctx, args, true)
}

/// Parses a type such as `i16` or `u8`.
fn parse_type(arg: &[u8]) -> Result<(bool, u32), Frame> {
    let bad = || {
        Frame::error(
            "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not \
             supported but i64 is.",
        )
    };
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(bad()),
    };
    let bits = crate::codec::parse_int(&arg[1..]).ok_or_else(bad)?;
    let max = if signed { 64 } else { 63 };
    if !(1..=max).contains(&bits) {
        return Err(bad());
    }
    Ok((signed, bits as u32))
}

/// Parses the subcommands, in Redis's order of checks.
fn parse(ctx: &Ctx<'_>, args: &[Bytes]) -> Result<Vec<Op>, Frame> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < args.len() {
        let remaining = args.len() - j - 1;
        let sub = &args[j];
        let kind_args = if is(sub, "get") && remaining >= 2 {
            2
        } else if (is(sub, "set") || is(sub, "incrby")) && remaining >= 3 {
            3
        } else if is(sub, "overflow") && remaining >= 1 {
            let t = &args[j + 1];
            overflow = if is(t, "wrap") {
                Overflow::Wrap
            } else if is(t, "sat") {
                Overflow::Sat
            } else if is(t, "fail") {
                Overflow::Fail
            } else {
                return Err(Frame::error("ERR Invalid OVERFLOW type specified"));
            };
            j += 2;
            continue;
        } else {
            return Err(syntax_error());
        };
        let (signed, bits) = parse_type(&args[j + 1])?;
        let offset = parse_bit_offset(ctx, &args[j + 2], Some(bits))?;
        let kind = if kind_args == 2 {
            Kind::Get
        } else {
            let v = parse_i64(&args[j + 3])?;
            if is(sub, "set") {
                Kind::Set(v)
            } else {
                Kind::IncrBy(v)
            }
        };
        ops.push(Op {
            kind,
            signed,
            bits,
            offset,
            overflow,
        });
        j += kind_args + 1;
    }
    Ok(ops)
}

fn run(ctx: &mut Ctx<'_>, args: &[Bytes], read_only: bool) -> Frame {
    let ops = match parse(ctx, args) {
        Ok(ops) => ops,
        Err(e) => return e,
    };
    let highest = ops
        .iter()
        .filter(|op| !matches!(op.kind, Kind::Get))
        .map(|op| op.offset + u64::from(op.bits) - 1)
        .max();
    let Some(highest) = highest else {
        // Only reads: a missing key reads as zeros.
        return match read_string(ctx, &args[1]) {
            Ok(s) => {
                let s = s.unwrap_or_default();
                Frame::Array(ops.iter().map(|op| get(&s, op)).collect())
            }
            Err(e) => e,
        };
    };
    if read_only {
        return Frame::error("ERR BITFIELD_RO only supports the GET subcommand");
    }
    let min_len = (highest >> 3) as usize + 1;
    let r = with_grown_string(ctx, &args[1], min_len, |p, grew| {
        let mut changed = false;
        let replies = ops
            .iter()
            .map(|op| match op.kind {
                Kind::Get => get(p, op),
                Kind::Set(_) | Kind::IncrBy(_) => {
                    let (reply, old, new) = write(p, op);
                    if let Some((old, new)) = old.zip(new) {
                        changed |= grew || old != new;
                    }
                    reply
                }
            })
            .collect();
        (Frame::Array(replies), changed)
    });
    r.unwrap_or_else(|e| e)
}

/// The unsigned integer of `bits` bits at `offset` (bits past the end read as zero).
fn get_unsigned(p: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0, |v, i| (v << 1) | u64::from(bit_at(p, offset + i)))
}

/// The signed integer of `bits` bits at `offset`, its top bit being the sign.
fn get_signed(p: &[u8], offset: u64, bits: u32) -> i64 {
    let mut v = get_unsigned(p, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        v |= u64::MAX << bits;
    }
    v as i64
}

/// Writes the low `bits` bits of `value` at `offset` (inside `p`).
fn set_bits(p: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..u64::from(bits) {
        let bit = (value >> (u64::from(bits) - 1 - i)) & 1;
        let at = offset + i;
        let (byte, shift) = ((at >> 3) as usize, 7 - (at & 7));
        p[byte] = (p[byte] & !(1 << shift)) | ((bit as u8) << shift);
    }
}

fn get(p: &[u8], op: &Op) -> Frame {
    if op.signed {
        Frame::Integer(get_signed(p, op.offset, op.bits))
    } else {
        Frame::Integer(get_unsigned(p, op.offset, op.bits) as i64)
    }
}

/// Whether `value + incr` fits an unsigned integer of `bits` bits; when it does not, the value
/// the rule makes of it (`None` for `FAIL`).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, rule: Overflow) -> Option<Option<u64>> {
    let max = (1u64 << bits) - 1;
    let too_big = value > max || (incr > 0 && incr as u64 > max - value);
    let too_small = !too_big && incr < 0 && incr.unsigned_abs() > value;
    if !too_big && !too_small {
        return None;
    }
    Some(match rule {
        Overflow::Wrap => Some(value.wrapping_add(incr as u64) & max),
        Overflow::Sat if too_big => Some(max),
        Overflow::Sat => Some(0),
        Overflow::Fail => None,
    })
}

/// Whether `value + incr` fits a signed integer of `bits` bits; when it does not, the value
/// the rule makes of it (`None` for `FAIL`).
fn signed_overflow(value: i64, incr: i64, bits: u32, rule: Overflow) -> Option<Option<i64>> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    // Exact arithmetic: no overflow of the check itself.
    let sum = i128::from(value) + i128::from(incr);
    let too_big = value > max || sum > i128::from(max);
    let too_small = !too_big && (value < min || sum < i128::from(min));
    if !too_big && !too_small {
        return None;
    }
    Some(match rule {
        Overflow::Wrap => {
            let mut c = (value as u64).wrapping_add(incr as u64);
            if bits < 64 {
                let mask = u64::MAX << bits;
                if c & (1 << (bits - 1)) != 0 {
                    c |= mask;
                } else {
                    c &= !mask;
                }
            }
            Some(c as i64)
        }
        Overflow::Sat if too_big => Some(max),
        Overflow::Sat => Some(min),
        Overflow::Fail => None,
    })
}

/// Runs a `SET` or `INCRBY`: its reply, and the old and new values when it wrote.
fn write(p: &mut [u8], op: &Op) -> (Frame, Option<u64>, Option<u64>) {
    let (arg, incr) = match op.kind {
        Kind::Set(v) => (v, false),
        Kind::IncrBy(v) => (v, true),
        Kind::Get => unreachable!("only writes come here"),
    };
    let (old, new, reply) = if op.signed {
        let old = get_signed(p, op.offset, op.bits);
        let (value, by) = if incr { (old, arg) } else { (arg, 0) };
        let new = match signed_overflow(value, by, op.bits, op.overflow) {
            None => value + by,
            Some(Some(limited)) => limited,
            Some(None) => return (Frame::Null, None, None),
        };
        let reply = if incr { new } else { old };
        (old as u64, new as u64, reply)
    } else {
        let old = get_unsigned(p, op.offset, op.bits);
        let (value, by) = if incr { (old, arg) } else { (arg as u64, 0) };
        let new = match unsigned_overflow(value, by, op.bits, op.overflow) {
            None => value.wrapping_add(by as u64),
            Some(Some(limited)) => limited,
            Some(None) => return (Frame::Null, None, None),
        };
        let reply = if incr { new } else { old };
        (old, new, reply as i64)
    };
    set_bits(p, op.offset, op.bits, new);
    (Frame::Integer(reply), Some(old), Some(new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_rules_match_redis() {
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Wrap), Some(Some(4)));
        assert_eq!(
            unsigned_overflow(250, 10, 8, Overflow::Sat),
            Some(Some(255))
        );
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Sat), Some(Some(0)));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Fail), Some(None));
        assert_eq!(unsigned_overflow(5, 10, 8, Overflow::Fail), None);
        assert_eq!(
            signed_overflow(120, 10, 8, Overflow::Wrap),
            Some(Some(-126))
        );
        assert_eq!(
            signed_overflow(-120, -10, 8, Overflow::Sat),
            Some(Some(-128))
        );
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            Some(Some(i64::MIN))
        );
        assert_eq!(signed_overflow(-1, 1, 64, Overflow::Fail), None);
    }

    #[test]
    fn bits_round_trip_at_unaligned_offsets() {
        let mut p = [0u8; 3];
        set_bits(&mut p, 7, 5, 23);
        assert_eq!(p, [0b0000_0001, 0b0111_0000, 0]);
        assert_eq!(get_unsigned(&p, 7, 5), 23);
        assert_eq!(get_signed(&p, 7, 5), 23 - 32);
    }
}
