//! `SORT` and `SORT_RO`: the elements of a list, set or sorted set, sorted, cut, and
//! optionally replaced by what patterns find for them, or stored as a list.
//!
//! ```text
//! SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA] [STORE dst]
//! ```
//!
//! - By default elements sort as numbers (a value that is not one is the error `One or more
//!   scores can't be converted into double`); equal numbers fall back to byte order, so the
//!   result never depends on the input's order. `ALPHA` sorts them as strings (see
//!   [`super::sort_keys`] for the collation).
//! - `BY pattern` sorts by the value at the key the pattern names for each element (`w_*`:
//!   the string at `w_<element>`; `h_*->f`: field `f` of the hash at `h_<element>`); a missing
//!   weight is 0 (numbers) or sorts first (`ALPHA`). A pattern without `*` (`BY nosort`)
//!   skips sorting: a list or sorted set keeps its own order (`DESC` reverses it), a set its
//!   iteration order — except under `STORE` or in a script, where a set is sorted `ALPHA`
//!   anyway so that replicas and the AOF store the same list.
//! - `LIMIT offset count` keeps a window of the sorted elements (a negative count: all the
//!   rest); out-of-range numbers are clamped to the collection, never an error.
//! - `GET pattern` (repeatable) replies, for each element, with what each pattern finds (`#`
//!   is the element itself; a missing key is a null) instead of the element.
//! - `STORE dst` replaces `dst` (TTL included) with the result as a list and replies with its
//!   length; an empty result deletes `dst`. The command reaches replicas and the AOF as it was
//!   sent: what it stores depends only on the data, which they hold too. `SORT_RO` has no
//!   `STORE` (it is a syntax error there) and runs on a read-only replica.
//!
//! Options are read in order and the first bad one answers (a non-integer `LIMIT` with
//! Redis's integer error, an unknown word with `ERR syntax error`), before the key's type is
//! checked. Redis's table marks both commands `movablekeys`: the keys `BY` and `GET` read are
//! made from the data and no key-spec can name them, and `STORE` may come anywhere;
//! [`sort_keys`] gives the sorted key and `STORE`'s destination, as Redis's `sortGetKeys`
//! does. A `SORT` that reads other keys or writes one runs alone (its flags gain
//! [`EXCLUSIVE`] for those arguments) so that it sees and leaves the keyspace as one step.

use std::cmp::Ordering;

use bytes::Bytes;

use super::sort_keys::{c_strtod, collate, Pattern};
use super::util::{is, parse_i64, syntax_error, wrongtype};
use super::{spec, CommandSpec, Ctx, DENYOOM, EXCLUSIVE, MOVABLEKEYS, READONLY, WRITE};
use crate::command::WALKS_VALUE;
use crate::db::{Entry, Value};
use crate::frame::Frame;
use crate::list::List;
use crate::state::Shared;

/// `SORT` and `SORT_RO`.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("sort", -2, WRITE | DENYOOM | WALKS_VALUE, 1, 1, 1, sort)
        .with_keys_of(sort_keys)
        .with_flags_of(alone_when_patterned),
    spec(
        "sort_ro",
        -2,
        READONLY | MOVABLEKEYS | WALKS_VALUE,
        1,
        1,
        1,
        sort_ro,
    )
    .with_flags_of(alone_when_patterned),
];

/// The most elements one reply or stored list may have (elements times `GET` patterns): the
/// result is built whole before it is sent or stored, so an unbounded one would be an
/// unbounded allocation. Redis has no such limit; latchkey refuses larger results.
const MAX_RESULT: u64 = 1 << 24;

/// `SORT`'s keys, as Redis's `sortGetKeys` finds them: the sorted key, and the argument after
/// the last `STORE` (options known to take arguments are skipped: `LIMIT` two, `BY` and `GET`
/// one).
fn sort_keys(args: &[Bytes]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if is(a, "limit") {
            i += 2;
        } else if is(a, "get") || is(a, "by") {
            i += 1;
        } else if is(a, "store") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    keys.extend(store);
    keys
}

/// Runs a `SORT` alone when an option may read or write keys other than the sorted one
/// (`BY`, `GET`, `STORE`), so that no other command's write lands half-way through.
fn alone_when_patterned(_: &Shared, args: &[Bytes], flags: u32) -> Option<u32> {
    args[2..]
        .iter()
        .any(|a| is(a, "by") || is(a, "get") || is(a, "store"))
        .then_some(flags | EXCLUSIVE)
}

fn sort(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(ctx, args, true)
}

/// The options of one `SORT`, as read from its arguments.
struct Options {
    desc: bool,
    alpha: bool,
    offset: i64,
    count: i64,
    /// `BY`'s pattern, kept even when it is constant (Redis remembers both).
    by: Option<Pattern>,
    /// A constant `BY` was given: no sorting. Sticks once set, as in Redis.
    dont_sort: bool,
    gets: Vec<Pattern>,
    store: Option<Bytes>,
}

/// Reads the options in order; the first bad one is the reply. `full_key_access`: the ACL
/// user may read every key (the keys `BY` and `GET` patterns read are not named in the
/// command, so Redis refuses them to anyone else).
fn parse(args: &[Bytes], readonly: bool, full_key_access: bool) -> Result<Options, Frame> {
    let mut o = Options {
        desc: false,
        alpha: false,
        offset: 0,
        count: -1,
        by: None,
        dont_sort: false,
        gets: Vec::new(),
        store: None,
    };
    let mut j = 2;
    while j < args.len() {
        let left = args.len() - j - 1;
        let a = &args[j];
        if is(a, "asc") {
            o.desc = false;
        } else if is(a, "desc") {
            o.desc = true;
        } else if is(a, "alpha") {
            o.alpha = true;
        } else if is(a, "limit") && left >= 2 {
            o.offset = parse_i64(&args[j + 1])?;
            o.count = parse_i64(&args[j + 2])?;
            j += 2;
        } else if !readonly && is(a, "store") && left >= 1 {
            o.store = Some(args[j + 1].clone());
            j += 1;
        } else if is(a, "by") && left >= 1 {
            let p = Pattern::parse(&args[j + 1]);
            if !matches!(p, Pattern::Key { .. }) {
                o.dont_sort = true;
            } else if !full_key_access {
                return Err(Frame::error(
                    "ERR BY option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            o.by = Some(p);
            j += 1;
        } else if is(a, "get") && left >= 1 {
            if !full_key_access {
                return Err(Frame::error(
                    "ERR GET option of SORT denied due to insufficient ACL permissions.",
                ));
            }
            o.gets.push(Pattern::parse(&args[j + 1]));
            j += 1;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    Ok(o)
}

/// The elements of the sorted key that `SORT` starts from, as Redis loads them.
enum Input {
    /// A list or a sorted set, in its own order, or a set, in its iteration order.
    All(Vec<Bytes>),
    /// A list or a sorted set that is not sorted (`BY nosort`): only the window `LIMIT`
    /// keeps, read in place, already in the order asked for.
    Window(Vec<Bytes>),
}

/// The window `[start, end]` (inclusive; empty when `end < start`) Redis keeps of `len`
/// elements for `LIMIT offset count`, clamping instead of failing.
fn window(len: i64, offset: i64, count: i64) -> (i64, i64) {
    let mut start = offset.clamp(0, len);
    let count = count.clamp(-1, len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    (start, end.min(len - 1))
}

/// Reads the elements of the sorted key (none when it is missing), copied so that no entry is
/// held while the patterns read other keys of the same database.
fn load(ctx: &Ctx<'_>, key: &[u8], o: &Options) -> Result<(Input, bool), Frame> {
    let Some(entry) = ctx.db().get(key, ctx.now_ms, ctx.lazy_delete()) else {
        return Ok((Input::All(Vec::new()), false));
    };
    let len = match &entry.value {
        Value::List(l) => l.len(),
        Value::Set(s) => s.len(),
        Value::ZSet(z) => z.len(),
        _ => return Err(wrongtype()),
    } as i64;
    let (start, end) = window(len, o.offset, o.count);
    let n = (end - start + 1).max(0) as usize;
    let start = start.max(0) as usize;
    let input = match &entry.value {
        Value::List(l) if o.dont_sort => Input::Window(list_window(l, start, n, o.desc)),
        Value::ZSet(z) if o.dont_sort => {
            let members = |it: &mut dyn Iterator<Item = (&crate::zset::Member, f64)>| {
                it.skip(start).take(n).map(|(m, _)| m.to_bytes()).collect()
            };
            Input::Window(if o.desc {
                members(&mut z.iter().rev())
            } else {
                members(&mut z.iter())
            })
        }
        Value::List(l) => Input::All(l.iter().map(Bytes::copy_from_slice).collect()),
        Value::ZSet(z) => Input::All(z.iter().map(|(m, _)| m.to_bytes()).collect()),
        Value::Set(s) => Input::All(s.members()),
        _ => unreachable!("checked above"),
    };
    Ok((input, matches!(entry.value, Value::Set(_))))
}

/// `n` elements of a list from `start`, counted from the tail and walking towards the head
/// when `desc`.
fn list_window(l: &List, start: usize, n: usize, desc: bool) -> Vec<Bytes> {
    if desc {
        l.iter()
            .rev()
            .skip(start)
            .take(n)
            .map(Bytes::copy_from_slice)
            .collect()
    } else if n == 0 || start >= l.len() {
        Vec::new()
    } else {
        let last = (start + n).min(l.len()) - 1;
        l.range(start..=last).map(Bytes::copy_from_slice).collect()
    }
}

/// One element with what it sorts by.
struct Item {
    element: Bytes,
    /// The number it sorts by (numeric sorting; 0 when its weight is missing).
    score: f64,
    /// The string it sorts by (`ALPHA` with `BY`; `None` when the weight is missing).
    weight: Option<Bytes>,
}

/// Compares two items as Redis's `sortCompare` does (before `DESC` is applied).
fn compare(a: &Item, b: &Item, alpha: bool, by: bool, store: bool) -> Ordering {
    if !alpha {
        return a
            .score
            .partial_cmp(&b.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.element.cmp(&b.element));
    }
    let strings = |x: &[u8], y: &[u8]| {
        if store {
            x.cmp(y)
        } else {
            collate(x, y)
        }
    };
    if by {
        match (&a.weight, &b.weight) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(x), Some(y)) => strings(x, y),
        }
    } else {
        strings(&a.element, &b.element)
    }
}

fn run(ctx: &mut Ctx<'_>, args: &[Bytes], readonly: bool) -> Frame {
    let user = &ctx.client.user;
    let full_key_access = user.unrestricted()
        || crate::acl::commands::find(args).is_some_and(|id| user.all_keys_readable(id, args));
    let mut o = match parse(args, readonly, full_key_access) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let (input, is_set) = match load(ctx, &args[1], &o) {
        Ok(x) => x,
        Err(e) => return e,
    };
    // A set has no order of its own: sorted anyway where the result must be the same
    // everywhere (stored, or in a script whose writes replicas replay).
    if o.dont_sort && is_set && (o.store.is_some() || ctx.in_script) {
        o.dont_sort = false;
        o.alpha = true;
        o.by = None;
    }
    let (elements, windowed) = match input {
        Input::All(v) => (v, false),
        Input::Window(v) => (v, true),
    };
    let len = elements.len() as i64;
    let (start, end) = if windowed {
        (0, len - 1)
    } else {
        window(len, o.offset, o.count)
    };
    let kept = (end - start + 1).max(0) as u64;
    let per_element = o.gets.len().max(1) as u64;
    if kept.saturating_mul(per_element) > MAX_RESULT {
        return Frame::error(format!(
            "ERR latchkey answers SORT results of at most {MAX_RESULT} elements"
        ));
    }
    // Every element's weight, then every kept element's patterns, is one key read each: past
    // a walk's worth, let the worker's other tasks go elsewhere first (see `crate::walk`).
    let reads = len as u64 * u64::from(o.by.is_some()) + kept * o.gets.len() as u64;
    if reads > crate::walk::HEAVY_WALK as u64 {
        crate::hand_off::before_long_step();
    }

    let sorting_by = o.by.as_ref().filter(|p| p.reads_keys());
    let mut items: Vec<Item> = Vec::with_capacity(elements.len());
    let mut bad_score = false;
    for element in elements {
        let mut item = Item {
            element,
            score: 0.0,
            weight: None,
        };
        if !o.dont_sort {
            let by_value = match sorting_by {
                Some(p) => p.lookup(ctx, &item.element),
                None => Some(item.element.clone()),
            };
            if let Some(v) = by_value {
                if o.alpha {
                    if sorting_by.is_some() {
                        item.weight = Some(v);
                    }
                } else {
                    match c_strtod(&v) {
                        Some(s) => item.score = s,
                        None => bad_score = true,
                    }
                }
            }
        }
        items.push(item);
    }
    if !o.dont_sort {
        let (alpha, by, store, desc) = (o.alpha, sorting_by.is_some(), o.store.is_some(), o.desc);
        items.sort_by(|a, b| {
            let c = compare(a, b, alpha, by, store);
            if desc {
                c.reverse()
            } else {
                c
            }
        });
    }
    if bad_score {
        return Frame::error("ERR One or more scores can't be converted into double");
    }
    let kept_items = if end >= start {
        &items[start as usize..=end as usize]
    } else {
        &items[..0]
    };
    match o.store.take() {
        None => reply(ctx, kept_items, &o.gets),
        Some(dst) => store(ctx, &dst, kept_items, &o.gets),
    }
}

/// The reply without `STORE`: the elements, or for each what each `GET` finds (nulls for
/// what is missing).
fn reply(ctx: &Ctx<'_>, items: &[Item], gets: &[Pattern]) -> Frame {
    if gets.is_empty() {
        return Frame::Array(
            items
                .iter()
                .map(|i| Frame::Bulk(i.element.clone()))
                .collect(),
        );
    }
    let mut out = Vec::with_capacity(items.len() * gets.len());
    for item in items {
        for g in gets {
            out.push(match g.lookup(ctx, &item.element) {
                Some(v) => Frame::Bulk(v),
                None => Frame::Null,
            });
        }
    }
    Frame::Array(out)
}

/// `STORE dst`: the result becomes the list at `dst` (what a `GET` does not find is stored
/// as an empty string), replacing it and its TTL; an empty result deletes `dst`. Replies with
/// the list's length. Counts one change per stored element, as Redis does.
fn store(ctx: &mut Ctx<'_>, dst: &Bytes, items: &[Item], gets: &[Pattern]) -> Frame {
    let mut list = List::new();
    for item in items {
        if gets.is_empty() {
            list.push_back(&item.element);
        }
        for g in gets {
            list.push_back(&g.lookup(ctx, &item.element).unwrap_or_default());
        }
    }
    let n = list.len();
    if n == 0 {
        if ctx.db().remove(dst).is_some() {
            ctx.modified(dst);
            ctx.notify(crate::notify::GENERIC, "del", dst);
        }
        return Frame::Integer(0);
    }
    ctx.db().insert_new(
        dst.clone(),
        Entry::new(Value::List(Box::new(list))),
        ctx.now_ms,
    );
    ctx.notify(crate::notify::LIST, "sortstore", dst);
    ctx.db().signal_ready(dst);
    ctx.dirty += n as u64;
    Frame::Integer(n as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_windows_clamp_as_redis_does() {
        assert_eq!(window(5, 0, -1), (0, 4));
        assert_eq!(window(5, 1, 2), (1, 2));
        assert_eq!(window(5, -10, 100), (0, 4));
        assert_eq!(window(5, 5, 10), (4, 3));
        assert_eq!(window(5, 2, 0), (2, 1));
        assert_eq!(window(0, 0, -1), (-1, -2));
        assert_eq!(window(3, 2, i64::MAX), (2, 2));
        assert_eq!(window(3, i64::MAX, i64::MAX), (2, 1));
    }

    #[test]
    fn store_is_found_where_redis_finds_it() {
        let a = |s: &str| -> Vec<Bytes> {
            s.split(' ')
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect()
        };
        assert_eq!(sort_keys(&a("sort abc store def")), [1, 3]);
        assert_eq!(
            sort_keys(&a("sort abc store invalid store stillbad store def")),
            [1, 7]
        );
        assert_eq!(sort_keys(&a("sort abc by store get store")), [1]);
        assert_eq!(sort_keys(&a("sort abc limit store store store x")), [1, 6]);
        assert_eq!(sort_keys(&a("sort abc store")), [1]);
    }
}
