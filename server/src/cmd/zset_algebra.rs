//! Sorted-set algebra: `ZUNION`, `ZINTER`, `ZDIFF`, their `STORE` forms and `ZINTERCARD`.
//!
//! The inputs may be sorted sets or plain sets (whose members count with score 1). Each
//! input's scores are multiplied by its `WEIGHTS` entry and combined with `AGGREGATE SUM`
//! (the default), `MIN` or `MAX`, with Redis's rules for the sums that are not a number:
//! a product or a sum that comes out NaN (`0 * inf`, `inf + -inf`) counts as 0.
//!
//! The arguments are checked in Redis's order: the key count, then the type of every key,
//! then the options. The commands carry [`MULTI_KEY`], so they run alone: they read several
//! keys (and may write one) as one step. Their keys follow a count: the table names them
//! with a [`keys_of`](super::CommandSpec::keys_of) function, which client tracking, `COMMAND
//! GETKEYS` and the hand-off before a long walk (see [`crate::walk`]) read.

use std::collections::HashMap;

use bytes::Bytes;

use super::util::{is, parse_double, parse_i64, syntax_error};
use super::zsets::{store, with_scores};
use super::{counted_keys, spec, CommandSpec, Ctx, DENYOOM, MULTI_KEY, READONLY, WRITE};
use crate::command::WALKS_VALUE;
use crate::db::Value;
use crate::frame::Frame;
use crate::zset::ZSet;

/// The algebra commands. The `STORE` forms name their destination as their one fixed key, as
/// Redis's table does; the inputs follow a count (Redis's `movablekeys`).
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("zunion", -3, READ, 0, 0, 0, zunion).with_keys_of(input_keys),
    spec("zinter", -3, READ, 0, 0, 0, zinter).with_keys_of(input_keys),
    spec("zdiff", -3, READ, 0, 0, 0, zdiff).with_keys_of(input_keys),
    spec("zintercard", -3, READ, 0, 0, 0, zintercard).with_keys_of(input_keys),
    spec("zunionstore", -4, STORE, 1, 1, 1, zunionstore).with_keys_of(store_keys),
    spec("zinterstore", -4, STORE, 1, 1, 1, zinterstore).with_keys_of(store_keys),
    spec("zdiffstore", -4, STORE, 1, 1, 1, zdiffstore).with_keys_of(store_keys),
];

/// The flags of the commands that reply with the result.
const READ: u32 = READONLY | MULTI_KEY | WALKS_VALUE;
/// The flags of the `STORE` forms.
const STORE: u32 = WRITE | DENYOOM | MULTI_KEY | WALKS_VALUE;

/// `ZUNION numkeys key...`: the keys after the count.
fn input_keys(args: &[Bytes]) -> Vec<usize> {
    counted_keys(args, 1)
}

/// `ZUNIONSTORE dst numkeys key...`: the destination and the keys after the count (none at
/// all when the count is wrong, as Redis finds none).
fn store_keys(args: &[Bytes]) -> Vec<usize> {
    let inputs = counted_keys(args, 2);
    if inputs.is_empty() {
        return inputs;
    }
    std::iter::once(1).chain(inputs).collect()
}

/// Which combination.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

/// How the scores of a member found in several inputs combine.
#[derive(Clone, Copy)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Folds `value` into `target` as Redis does: a sum that is not a number is 0; `MIN` and
    /// `MAX` keep `target` when the comparison fails.
    fn fold(self, target: &mut f64, value: f64) {
        match self {
            Aggregate::Sum => {
                *target += value;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if value < *target {
                    *target = value;
                }
            }
            Aggregate::Max => {
                if value > *target {
                    *target = value;
                }
            }
        }
    }
}

/// One input: its members with their scores (a set's members score 1), and its weight.
struct Input {
    members: Vec<(Bytes, f64)>,
    weight: f64,
}

impl Input {
    /// The members by name, to find one.
    fn index(&self) -> HashMap<&[u8], f64> {
        self.members.iter().map(|(m, s)| (&m[..], *s)).collect()
    }
}

/// The parsed command: which inputs, what to do with them, and how to answer.
struct Plan {
    inputs: Vec<Input>,
    aggregate: Aggregate,
    scores: bool,
    /// `ZINTERCARD`'s `LIMIT` (0: none).
    limit: usize,
}

/// What the command answers: the combined set, or (for `ZINTERCARD`) only its size.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Output {
    Reply,
    Store,
    Cardinality,
}

/// Reads the key count at `args[at]`, the keys' values and the options, in Redis's order.
fn plan(
    ctx: &Ctx<'_>,
    args: &[Bytes],
    at: usize,
    op: Op,
    out: Output,
    name: &str,
) -> Result<Plan, Frame> {
    let numkeys = parse_i64(&args[at])?;
    if numkeys < 1 {
        return Err(Frame::error(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    let first = at + 1;
    if numkeys as u64 > (args.len() - first) as u64 {
        return Err(syntax_error());
    }
    let n = numkeys as usize;
    let keys = &args[first..first + n];
    let db = ctx.db();
    let mut inputs = Vec::with_capacity(n);
    for key in keys {
        let members = match db.get(key, ctx.now_ms, ctx.lazy_delete()) {
            None => Vec::new(),
            Some(e) => match &e.value {
                Value::ZSet(z) => z.iter().map(|(m, s)| (m.to_bytes(), s)).collect(),
                Value::Set(s) => s.members().into_iter().map(|m| (m, 1.0)).collect(),
                _ => return Err(super::util::wrongtype()),
            },
        };
        inputs.push(Input {
            members,
            weight: 1.0,
        });
    }
    let mut p = Plan {
        inputs,
        aggregate: Aggregate::Sum,
        scores: false,
        limit: 0,
    };
    let mut j = first + n;
    while j < args.len() {
        let a = &args[j];
        let remaining = args.len() - j;
        let combines = op != Op::Diff && out != Output::Cardinality;
        if combines && remaining > n && is(a, "weights") {
            for (i, input) in p.inputs.iter_mut().enumerate() {
                input.weight = parse_double(&args[j + 1 + i])
                    .ok_or_else(|| Frame::error("ERR weight value is not a float"))?;
            }
            j += 1 + n;
        } else if combines && remaining >= 2 && is(a, "aggregate") {
            let how = &args[j + 1];
            p.aggregate = if is(how, "sum") {
                Aggregate::Sum
            } else if is(how, "min") {
                Aggregate::Min
            } else if is(how, "max") {
                Aggregate::Max
            } else {
                return Err(syntax_error());
            };
            j += 2;
        } else if out == Output::Reply && is(a, "withscores") {
            p.scores = true;
            j += 1;
        } else if out == Output::Cardinality && remaining >= 2 && is(a, "limit") {
            p.limit = match parse_i64(&args[j + 1]) {
                Ok(l) if l >= 0 => l as usize,
                _ => return Err(Frame::error("ERR LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(syntax_error());
        }
    }
    Ok(p)
}

/// A weighted score: NaN (`0 * inf`) counts as 0.
fn weighted(score: f64, weight: f64) -> f64 {
    let s = score * weight;
    if s.is_nan() {
        0.0
    } else {
        s
    }
}

/// The union of the inputs.
fn union(p: &Plan) -> ZSet {
    let mut acc: HashMap<Bytes, f64> = HashMap::new();
    for input in &p.inputs {
        for (m, s) in &input.members {
            let score = weighted(*s, input.weight);
            match acc.get_mut(m) {
                Some(t) => p.aggregate.fold(t, score),
                None => {
                    acc.insert(m.clone(), score);
                }
            }
        }
    }
    let mut out = ZSet::new();
    for (m, s) in acc {
        out.insert(m, s);
    }
    out
}

/// The intersection of the inputs, walking the smallest; with `count_only`, only how many
/// members it has (stopping at `p.limit` when set), the set itself left empty.
fn inter(p: &Plan, count_only: bool) -> (ZSet, usize) {
    let mut order: Vec<&Input> = p.inputs.iter().collect();
    order.sort_by_key(|i| i.members.len());
    let mut out = ZSet::new();
    let mut count = 0usize;
    let Some((first, rest)) = order.split_first() else {
        return (out, 0);
    };
    let indexes: Vec<HashMap<&[u8], f64>> = rest.iter().map(|i| i.index()).collect();
    'members: for (m, s) in &first.members {
        let mut score = weighted(*s, first.weight);
        for (input, index) in rest.iter().zip(&indexes) {
            let Some(found) = index.get(&m[..]) else {
                continue 'members;
            };
            // Only the first input's product is cleared of NaN, as in Redis.
            p.aggregate.fold(&mut score, found * input.weight);
        }
        count += 1;
        if count_only {
            if p.limit > 0 && count >= p.limit {
                break;
            }
        } else {
            out.insert(m.clone(), score);
        }
    }
    (out, count)
}

/// The members of the first input found in none of the others, with their first scores.
fn diff(p: &Plan) -> ZSet {
    let mut out = ZSet::new();
    let Some((first, rest)) = p.inputs.split_first() else {
        return out;
    };
    let indexes: Vec<HashMap<&[u8], f64>> = rest.iter().map(|i| i.index()).collect();
    for (m, s) in &first.members {
        if !indexes.iter().any(|ix| ix.contains_key(&m[..])) {
            out.insert(m.clone(), *s);
        }
    }
    out
}

/// Runs one of the commands: the key count is at `args[at]`; `dst` is the destination of a
/// `STORE` form.
fn algebra(ctx: &mut Ctx<'_>, args: &[Bytes], at: usize, op: Op, out: Output, name: &str) -> Frame {
    let p = match plan(ctx, args, at, op, out, name) {
        Ok(p) => p,
        Err(e) => return e,
    };
    if out == Output::Cardinality {
        return Frame::Integer(inter(&p, true).1 as i64);
    }
    let result = match op {
        Op::Union => union(&p),
        Op::Inter => inter(&p, false).0,
        Op::Diff => diff(&p),
    };
    if out == Output::Store {
        return store(ctx, &args[1], result, name);
    }
    let items = result.iter().map(|(m, s)| (m.to_bytes(), s)).collect();
    with_scores(items, p.scores, ctx.client.protocol)
}

fn zunion(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    algebra(ctx, args, 1, Op::Union, Output::Reply, "zunion")
}

fn zinter(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    algebra(ctx, args, 1, Op::Inter, Output::Reply, "zinter")
}

fn zdiff(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    algebra(ctx, args, 1, Op::Diff, Output::Reply, "zdiff")
}

fn zintercard(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    algebra(ctx, args, 1, Op::Inter, Output::Cardinality, "zintercard")
}

fn zunionstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    algebra(ctx, args, 2, Op::Union, Output::Store, "zunionstore")
}

fn zinterstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    algebra(ctx, args, 2, Op::Inter, Output::Store, "zinterstore")
}

fn zdiffstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    algebra(ctx, args, 2, Op::Diff, Output::Store, "zdiffstore")
}
