//! `ZRANGE` with all its options (`BYSCORE`, `BYLEX`, `REV`, `LIMIT`, `WITHSCORES`), its older
//! spellings (`ZREVRANGE`, `ZRANGEBYSCORE`, `ZREVRANGEBYSCORE`, `ZRANGEBYLEX`,
//! `ZREVRANGEBYLEX`) and `ZRANGESTORE`, which stores the same range at a destination.
//!
//! Every one of them goes through [`range_command`], which checks the arguments in Redis's
//! order: the options first (each spelling allows only some), then their conflicts, then the
//! range itself, and only then the key.

use bytes::Bytes;

use super::util::{is, parse_i64, syntax_error};
use super::zset_lex::LexRange;
use super::zsets::{parse_range, read, store, with_scores, Bound};
use super::{spec, CommandSpec, Ctx, DENYOOM, MULTI_KEY, READONLY, WRITE};
use crate::command::WALKS_VALUE;
use crate::frame::Frame;
use crate::zset::ZSet;

/// The range commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("zrange", -4, READONLY | WALKS_VALUE, 1, 1, 1, zrange),
    spec("zrevrange", -4, READONLY | WALKS_VALUE, 1, 1, 1, zrevrange),
    spec(
        "zrangebyscore",
        -4,
        READONLY | WALKS_VALUE,
        1,
        1,
        1,
        zrangebyscore,
    ),
    spec(
        "zrevrangebyscore",
        -4,
        READONLY | WALKS_VALUE,
        1,
        1,
        1,
        zrevrangebyscore,
    ),
    spec(
        "zrangebylex",
        -4,
        READONLY | WALKS_VALUE,
        1,
        1,
        1,
        zrangebylex,
    ),
    spec(
        "zrevrangebylex",
        -4,
        READONLY | WALKS_VALUE,
        1,
        1,
        1,
        zrevrangebylex,
    ),
    spec(
        "zrangestore",
        -5,
        WRITE | DENYOOM | MULTI_KEY | WALKS_VALUE,
        1,
        2,
        1,
        zrangestore,
    ),
];

/// What a range is counted in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Rank,
    Score,
    Lex,
}

/// A parsed range: indexes, scores or member bytes.
enum Range {
    Rank(i64, i64),
    Score(Bound, Bound),
    Lex(LexRange),
}

/// The parsed arguments of a range command.
struct Query {
    range: Range,
    rev: bool,
    offset: i64,
    /// At most this many (negative: no limit).
    limit: i64,
    scores: bool,
}

/// Parses `<min> <max> [options]` at `args[at..]` (`at` is the source key's index). `by` and
/// `rev` are fixed by the older spellings (`None`: `ZRANGE`/`ZRANGESTORE` read them from the
/// options); `store` refuses `WITHSCORES`.
fn parse(
    args: &[Bytes],
    at: usize,
    store: bool,
    by: Option<By>,
    rev: Option<bool>,
) -> Result<Query, Frame> {
    let (fixed_by, fixed_rev) = (by.is_some(), rev.is_some());
    let (mut by, mut rev) = (by, rev);
    let (mut scores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = at + 3;
    while j < args.len() {
        let a = &args[j];
        let left = args.len() - j - 1;
        if !store && is(a, "withscores") {
            scores = true;
        } else if is(a, "limit") && left >= 2 {
            offset = parse_i64(&args[j + 1])?;
            limit = parse_i64(&args[j + 2])?;
            j += 2;
        } else if !fixed_rev && rev.is_none() && is(a, "rev") {
            rev = Some(true);
        } else if !fixed_by && by.is_none() && is(a, "bylex") {
            by = Some(By::Lex);
        } else if !fixed_by && by.is_none() && is(a, "byscore") {
            by = Some(By::Score);
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    let by = by.unwrap_or(By::Rank);
    if limit != -1 && by == By::Rank {
        return Err(Frame::error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if scores && by == By::Lex {
        return Err(Frame::error(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    // By score or lex, a reversed range is given as `max min`.
    let (min, max) = if rev && by != By::Rank {
        (&args[at + 2], &args[at + 1])
    } else {
        (&args[at + 1], &args[at + 2])
    };
    let range = match by {
        By::Rank => Range::Rank(parse_i64(min)?, parse_i64(max)?),
        By::Score => {
            let (a, b) = parse_range(min, max)?;
            Range::Score(a, b)
        }
        By::Lex => Range::Lex(LexRange::parse(min, max)?),
    };
    Ok(Query {
        range,
        rev,
        offset,
        limit,
        scores,
    })
}

/// The members (with scores) that `q` selects from `z`, in reply order.
fn select(z: &ZSet, q: &Query) -> Vec<(Bytes, f64)> {
    let pick = |(m, s): (&crate::zset::Member, f64)| (m.to_bytes(), s);
    match &q.range {
        Range::Rank(start, end) => {
            let len = z.len() as i64;
            let start = if *start < 0 { len + start } else { *start }.max(0);
            let end = if *end < 0 { len + end } else { *end };
            if start > end || start >= len {
                return Vec::new();
            }
            let n = (end.min(len - 1) - start + 1) as usize;
            if q.rev {
                z.iter()
                    .rev()
                    .skip(start as usize)
                    .take(n)
                    .map(pick)
                    .collect()
            } else {
                z.iter().skip(start as usize).take(n).map(pick).collect()
            }
        }
        Range::Score(min, max) => {
            if q.offset < 0 || q.limit == 0 || (q.offset > 0 && q.offset as u64 >= z.len() as u64) {
                return Vec::new();
            }
            let take = if q.limit < 0 {
                usize::MAX
            } else {
                q.limit as usize
            };
            let above = |s: f64| {
                if min.exclusive {
                    s > min.value
                } else {
                    s >= min.value
                }
            };
            let below = |s: f64| {
                if max.exclusive {
                    s < max.value
                } else {
                    s <= max.value
                }
            };
            if q.rev {
                z.iter()
                    .rev()
                    .skip_while(|(_, s)| !below(*s))
                    .skip(q.offset as usize)
                    .take_while(|(_, s)| above(*s))
                    .take(take)
                    .map(pick)
                    .collect()
            } else {
                z.iter()
                    .skip_while(|(_, s)| !above(*s))
                    .skip(q.offset as usize)
                    .take_while(|(_, s)| below(*s))
                    .take(take)
                    .map(pick)
                    .collect()
            }
        }
        Range::Lex(range) => range.walk(z, q.rev, q.offset, q.limit),
    }
}

/// Runs a range command whose source key is `args[at]`: replies with the range, or with
/// `store`, stores it at `args[1]` and replies with its size.
fn range_command(
    ctx: &mut Ctx<'_>,
    args: &[Bytes],
    at: usize,
    store_it: bool,
    by: Option<By>,
    rev: Option<bool>,
) -> Frame {
    let q = match parse(args, at, store_it, by, rev) {
        Ok(q) => q,
        Err(e) => return e,
    };
    let items = match read(ctx, &args[at], |z| select(z, &q)) {
        Ok(v) => v.unwrap_or_default(),
        Err(e) => return e,
    };
    if store_it {
        let mut z = ZSet::new();
        for (m, s) in items {
            z.insert(m, s);
        }
        return store(ctx, &args[1], z, "zrangestore");
    }
    with_scores(items, q.scores, ctx.client.protocol)
}

fn zrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    range_command(ctx, args, 1, false, None, None)
}

fn zrangestore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    range_command(ctx, args, 2, true, None, None)
}

fn zrevrange(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    range_command(ctx, args, 1, false, Some(By::Rank), Some(true))
}

fn zrangebyscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    range_command(ctx, args, 1, false, Some(By::Score), Some(false))
}

fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    range_command(ctx, args, 1, false, Some(By::Score), Some(true))
}

fn zrangebylex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    range_command(ctx, args, 1, false, Some(By::Lex), Some(false))
}

fn zrevrangebylex(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    range_command(ctx, args, 1, false, Some(By::Lex), Some(true))
}
