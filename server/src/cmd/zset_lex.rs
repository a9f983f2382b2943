//! Lexicographic ranges of a sorted set: `ZLEXCOUNT`, `ZREMRANGEBYLEX`, and the range type
//! that `ZRANGEBYLEX`, `ZREVRANGEBYLEX` and `ZRANGE ... BYLEX` use (see
//! [`super::zset_range`]).
//!
//! A lex range is meant for a sorted set whose members all have the same score, where the
//! order is the order of the member bytes. Each end is `[member` (inclusive), `(member`
//! (exclusive), `-` (below everything) or `+` (above everything). Like Redis, a range is
//! walked in the set's order from the first member at or past the minimum, and stops at the
//! first member past the maximum; on a set of mixed scores the answer is whatever that walk
//! finds, as in Redis.

use bytes::Bytes;

use super::zsets::{read, remove_picked};
use super::{spec, CommandSpec, Ctx, FAST, READONLY, WRITE};
use crate::command::WALKS_VALUE;
use crate::frame::Frame;
use crate::zset::ZSet;

/// `ZLEXCOUNT`, `ZREMRANGEBYLEX`.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec(
        "zlexcount",
        4,
        READONLY | FAST | WALKS_VALUE,
        1,
        1,
        1,
        zlexcount,
    ),
    spec(
        "zremrangebylex",
        4,
        WRITE | WALKS_VALUE,
        1,
        1,
        1,
        zremrangebylex,
    ),
];

/// One end of a lex range.
#[derive(Clone, Debug)]
enum LexBound {
    /// `-`: below every member.
    Lowest,
    /// `+`: above every member.
    Highest,
    /// `[member`.
    Inclusive(Bytes),
    /// `(member`.
    Exclusive(Bytes),
}

/// A parsed `min max` lex range.
#[derive(Clone, Debug)]
pub(crate) struct LexRange {
    min: LexBound,
    max: LexBound,
}

/// Redis's error for a lex range end it cannot read.
fn invalid() -> Frame {
    Frame::error("ERR min or max not valid string range item")
}

fn parse_bound(arg: &Bytes) -> Option<LexBound> {
    match arg.first()? {
        b'-' if arg.len() == 1 => Some(LexBound::Lowest),
        b'+' if arg.len() == 1 => Some(LexBound::Highest),
        b'[' => Some(LexBound::Inclusive(arg.slice(1..))),
        b'(' => Some(LexBound::Exclusive(arg.slice(1..))),
        _ => None,
    }
}

impl LexRange {
    /// Parses `min max`, with Redis's error when either end is malformed.
    pub(crate) fn parse(min: &Bytes, max: &Bytes) -> Result<LexRange, Frame> {
        match (parse_bound(min), parse_bound(max)) {
            (Some(min), Some(max)) => Ok(LexRange { min, max }),
            _ => Err(invalid()),
        }
    }

    /// Whether `m` is at or past the minimum.
    pub(crate) fn above_min(&self, m: &[u8]) -> bool {
        match &self.min {
            LexBound::Lowest => true,
            LexBound::Highest => false,
            LexBound::Inclusive(b) => m >= &b[..],
            LexBound::Exclusive(b) => m > &b[..],
        }
    }

    /// Whether `m` is at or before the maximum.
    pub(crate) fn below_max(&self, m: &[u8]) -> bool {
        match &self.max {
            LexBound::Lowest => false,
            LexBound::Highest => true,
            LexBound::Inclusive(b) => m <= &b[..],
            LexBound::Exclusive(b) => m < &b[..],
        }
    }

    /// The members in range with their scores, walking forwards (or backwards with `rev`,
    /// from the last member at or before the maximum), after skipping `offset` of them and
    /// taking at most `limit` (negative: no limit). A negative offset finds nothing, as in
    /// Redis.
    pub(crate) fn walk(&self, z: &ZSet, rev: bool, offset: i64, limit: i64) -> Vec<(Bytes, f64)> {
        if offset < 0 || limit == 0 {
            return Vec::new();
        }
        let take = if limit < 0 {
            usize::MAX
        } else {
            limit as usize
        };
        let pick = |(m, s): (&crate::zset::Member, f64)| (m.to_bytes(), s);
        if rev {
            z.iter()
                .rev()
                .skip_while(|(m, _)| !self.below_max(m))
                .skip(offset as usize)
                .take_while(|(m, _)| self.above_min(m))
                .take(take)
                .map(pick)
                .collect()
        } else {
            z.iter()
                .skip_while(|(m, _)| !self.above_min(m))
                .skip(offset as usize)
                .take_while(|(m, _)| self.below_max(m))
                .take(take)
                .map(pick)
                .collect()
        }
    }

    /// How many members the forward walk finds.
    fn count(&self, z: &ZSet) -> usize {
        z.iter()
            .skip_while(|(m, _)| !self.above_min(m))
            .take_while(|(m, _)| self.below_max(m))
            .count()
    }
}

fn zlexcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let range = match LexRange::parse(&args[2], &args[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match read(ctx, &args[1], |z| range.count(z)) {
        Ok(n) => Frame::Integer(n.unwrap_or(0) as i64),
        Err(e) => e,
    }
}

fn zremrangebylex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let range = match LexRange::parse(&args[2], &args[3]) {
        Ok(r) => r,
        Err(e) => return e,
    };
    remove_picked(ctx, &args[1], "zremrangebylex", |z| {
        range
            .walk(z, false, 0, -1)
            .into_iter()
            .map(|(m, _)| m)
            .collect()
    })
}
