//! The geo searches: `GEOSEARCH`, `GEOSEARCHSTORE`, and the older `GEORADIUS`,
//! `GEORADIUSBYMEMBER` (with `STORE`/`STOREDIST`) and their `_RO` forms, parsed with Redis
//! 7.0's rules and error texts and answered in Redis's order: the cells of
//! [`crate::geo::Search::cells`] in turn, each in score order, unless `ASC`/`DESC` (or a
//! `COUNT` without `ANY`, which implies `ASC`) sorts by distance.

use bytes::Bytes;

use super::geo::{coordinate, long_lat, unit};
use super::util::{is, parse_double, parse_i64, syntax_error};
use super::zsets::{read, store as store_zset};
use super::{spec, CommandSpec, Ctx, DENYOOM, READONLY, WRITE};
use crate::frame::Frame;
use crate::geo::{self, Search, Shape};
use crate::zset::ZSet;

/// The search commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("georadius", -6, WRITE | DENYOOM, 1, 1, 1, georadius).with_keys_of(radius_keys),
    spec("georadius_ro", -6, READONLY, 1, 1, 1, georadius_ro),
    spec(
        "georadiusbymember",
        -5,
        WRITE | DENYOOM,
        1,
        1,
        1,
        georadiusbymember,
    )
    .with_keys_of(radius_keys),
    spec(
        "georadiusbymember_ro",
        -5,
        READONLY,
        1,
        1,
        1,
        georadiusbymember_ro,
    ),
    spec("geosearch", -7, READONLY, 1, 1, 1, geosearch),
    spec(
        "geosearchstore",
        -8,
        WRITE | DENYOOM,
        1,
        2,
        1,
        geosearchstore,
    ),
];

/// The keys of `GEORADIUS`/`GEORADIUSBYMEMBER`: the source, and the `STORE`/`STOREDIST`
/// destination when there is one.
fn radius_keys(args: &[Bytes]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut i = 2;
    while i + 1 < args.len() {
        if is(&args[i], "store") || is(&args[i], "storedist") {
            keys.push(i + 1);
            i += 1;
        }
        i += 1;
    }
    keys
}

/// Which command is parsing (Redis's `RADIUS_*` and `GEOSEARCH*` flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Radius { by_member: bool, store_ok: bool },
    Search { store: bool },
}

/// One member found.
struct Found {
    member: Bytes,
    score: f64,
    dist: f64,
    long: f64,
    lat: f64,
}

fn georadius(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(
        ctx,
        args,
        Kind::Radius {
            by_member: false,
            store_ok: true,
        },
    )
}

fn georadius_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(
        ctx,
        args,
        Kind::Radius {
            by_member: false,
            store_ok: false,
        },
    )
}

fn georadiusbymember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(
        ctx,
        args,
        Kind::Radius {
            by_member: true,
            store_ok: true,
        },
    )
}

fn georadiusbymember_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(
        ctx,
        args,
        Kind::Radius {
            by_member: true,
            store_ok: false,
        },
    )
}

fn geosearch(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(ctx, args, Kind::Search { store: false })
}

fn geosearchstore(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(ctx, args, Kind::Search { store: true })
}

/// A radius and its unit: `<radius> <unit>`.
fn radius_arg(r: &[u8], u: &[u8]) -> Result<(f64, f64), Frame> {
    let r = parse_double(r).ok_or_else(|| Frame::error("ERR need numeric radius"))?;
    if r < 0.0 {
        return Err(Frame::error("ERR radius cannot be negative"));
    }
    Ok((r, unit(u)?))
}

/// A box and its unit: `<width> <height> <unit>`.
fn box_arg(w: &[u8], h: &[u8], u: &[u8]) -> Result<(f64, f64, f64), Frame> {
    let w = parse_double(w).ok_or_else(|| Frame::error("ERR need numeric width"))?;
    let h = parse_double(h).ok_or_else(|| Frame::error("ERR need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(Frame::error("ERR height or width cannot be negative"));
    }
    Ok((w, h, unit(u)?))
}

const COULD_NOT_DECODE: &str = "ERR could not decode requested zset member";

/// The whole of Redis's `georadiusGeneric`.
fn run(ctx: &mut Ctx<'_>, args: &[Bytes], kind: Kind) -> Frame {
    let src = match kind {
        Kind::Search { store: true } => &args[2],
        _ => &args[1],
    };
    let exists = match read(ctx, src, |_| ()) {
        Ok(e) => e.is_some(),
        Err(e) => return e,
    };
    let score_of = |ctx: &Ctx<'_>, member: &[u8]| -> Option<f64> {
        read(ctx, src, |z| z.score(member)).ok().flatten().flatten()
    };
    let mut center: Option<(f64, f64)> = None;
    let mut shape: Option<(Shape, f64)> = None;
    let base = match kind {
        Kind::Radius {
            by_member: false, ..
        } => {
            match long_lat(&args[2], &args[3]) {
                Ok(p) => center = Some(p),
                Err(e) => return e,
            }
            match radius_arg(&args[4], &args[5]) {
                Ok((r, u)) => shape = Some((Shape::Radius(r), u)),
                Err(e) => return e,
            }
            6
        }
        Kind::Radius {
            by_member: true, ..
        } if !exists => 5,
        Kind::Radius {
            by_member: true, ..
        } => {
            match score_of(ctx, &args[2]) {
                Some(s) => center = Some(geo::position(s)),
                None => return Frame::error(COULD_NOT_DECODE),
            }
            match radius_arg(&args[3], &args[4]) {
                Ok((r, u)) => shape = Some((Shape::Radius(r), u)),
                Err(e) => return e,
            }
            5
        }
        Kind::Search { store } => 2 + usize::from(store),
    };
    let mut store: Option<(Bytes, bool)> = match kind {
        Kind::Search { store: true } => Some((args[1].clone(), false)),
        _ => None,
    };
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut from_member, mut from_lonlat, mut by_radius, mut by_box) =
        (false, false, false, false);
    let mut sort: Option<bool> = None; // Some(true): ascending
    let mut count: i64 = 0;
    let opts = &args[base..];
    let mut i = 0;
    while i < opts.len() {
        let a = &opts[i];
        let left = opts.len() - i - 1;
        let search = matches!(kind, Kind::Search { .. });
        let radius_store = matches!(kind, Kind::Radius { store_ok: true, .. });
        if is(a, "withdist") {
            withdist = true;
        } else if is(a, "withhash") {
            withhash = true;
        } else if is(a, "withcoord") {
            withcoord = true;
        } else if is(a, "any") {
            any = true;
        } else if is(a, "asc") {
            sort = Some(true);
        } else if is(a, "desc") {
            sort = Some(false);
        } else if is(a, "count") && left >= 1 {
            count = match parse_i64(&opts[i + 1]) {
                Ok(n) => n,
                Err(e) => return e,
            };
            if count <= 0 {
                return Frame::error("ERR COUNT must be > 0");
            }
            i += 1;
        } else if (is(a, "store") || is(a, "storedist")) && left >= 1 && radius_store {
            store = Some((opts[i + 1].clone(), is(a, "storedist")));
            i += 1;
        } else if is(a, "storedist") && matches!(kind, Kind::Search { store: true }) {
            if let Some(s) = store.as_mut() {
                s.1 = true;
            }
        } else if is(a, "frommember") && left >= 1 && search && !from_lonlat {
            if exists {
                match score_of(ctx, &opts[i + 1]) {
                    Some(s) => center = Some(geo::position(s)),
                    None => return Frame::error(COULD_NOT_DECODE),
                }
            }
            from_member = true;
            i += 1;
        } else if is(a, "fromlonlat") && left >= 2 && search && !from_member {
            match long_lat(&opts[i + 1], &opts[i + 2]) {
                Ok(p) => center = Some(p),
                Err(e) => return e,
            }
            from_lonlat = true;
            i += 2;
        } else if is(a, "byradius") && left >= 2 && search && !by_box {
            match radius_arg(&opts[i + 1], &opts[i + 2]) {
                Ok((r, u)) => shape = Some((Shape::Radius(r), u)),
                Err(e) => return e,
            }
            by_radius = true;
            i += 2;
        } else if is(a, "bybox") && left >= 3 && search && !by_radius {
            match box_arg(&opts[i + 1], &opts[i + 2], &opts[i + 3]) {
                Ok((w, h, u)) => shape = Some((Shape::Box(w, h), u)),
                Err(e) => return e,
            }
            by_box = true;
            i += 3;
        } else {
            return syntax_error();
        }
        i += 1;
    }
    let name = String::from_utf8_lossy(&args[0]).into_owned();
    if store.is_some() && (withdist || withhash || withcoord) {
        let who = if matches!(kind, Kind::Search { store: true }) {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Frame::error(format!(
            "ERR {who} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        ));
    }
    if matches!(kind, Kind::Search { .. }) && !(from_member || from_lonlat) {
        return Frame::error(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        ));
    }
    if matches!(kind, Kind::Search { .. }) && !(by_radius || by_box) {
        return Frame::error(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        ));
    }
    if any && count == 0 {
        return Frame::error("ERR the ANY argument requires COUNT argument");
    }
    if !exists {
        return match store {
            // An empty result deletes the destination, as `ZUNIONSTORE` and friends do.
            Some((dst, _)) => store_zset(ctx, &dst, ZSet::new(), "del"),
            None => Frame::Array(vec![]),
        };
    }
    let (Some((long, lat)), Some((shape, to_meters))) = (center, shape) else {
        return syntax_error();
    };
    if count != 0 && sort.is_none() && !any {
        sort = Some(true);
    }
    let search = Search {
        long,
        lat,
        shape,
        to_meters,
    };
    let limit = if any { count as usize } else { 0 };
    let mut found = match read(ctx, src, |z| collect(z, &search, limit)) {
        Ok(f) => f.unwrap_or_default(),
        Err(e) => return e,
    };
    if let Some(ascending) = sort {
        // Stable, as glibc's `qsort` (a merge sort) is: equal distances keep the scan order.
        found.sort_by(|a, b| {
            let o = a
                .dist
                .partial_cmp(&b.dist)
                .unwrap_or(std::cmp::Ordering::Equal);
            if ascending {
                o
            } else {
                o.reverse()
            }
        });
    }
    if count > 0 {
        found.truncate(usize::try_from(count).unwrap_or(usize::MAX));
    }
    match store {
        None => reply(ctx, found, to_meters, withdist, withhash, withcoord),
        Some((dst, storedist)) => store_result(ctx, &dst, found, to_meters, storedist, kind),
    }
}

/// The members inside the search, cell by cell in Redis's order; at most `limit` (0: all).
fn collect(z: &ZSet, search: &Search, limit: usize) -> Vec<Found> {
    let mut found = Vec::new();
    for cell in search.cells() {
        if limit != 0 && found.len() >= limit {
            break;
        }
        let (min, max) = cell.score_range();
        for (member, score) in z.range_from(min, max) {
            let (long, lat) = geo::position(score);
            if let Some(dist) = search.within(long, lat) {
                found.push(Found {
                    member: member.to_bytes(),
                    score,
                    dist,
                    long,
                    lat,
                });
            }
            if limit != 0 && found.len() >= limit {
                break;
            }
        }
    }
    found
}

fn reply(
    ctx: &Ctx<'_>,
    found: Vec<Found>,
    to_meters: f64,
    withdist: bool,
    withhash: bool,
    withcoord: bool,
) -> Frame {
    let plain = !(withdist || withhash || withcoord);
    Frame::Array(
        found
            .into_iter()
            .map(|f| {
                if plain {
                    return Frame::Bulk(f.member);
                }
                let mut item = vec![Frame::Bulk(f.member)];
                if withdist {
                    item.push(Frame::Bulk(Bytes::from(geo::format_distance(
                        f.dist / to_meters,
                    ))));
                }
                if withhash {
                    item.push(Frame::Integer(f.score as i64));
                }
                if withcoord {
                    item.push(Frame::Array(vec![
                        coordinate(ctx, f.long),
                        coordinate(ctx, f.lat),
                    ]));
                }
                Frame::Array(item)
            })
            .collect(),
    )
}

/// Stores the result as a sorted set at `dst` (scores: the positions, or the distances with
/// `STOREDIST`) as the sorted-set `*STORE` commands do: an empty one deletes `dst`. Replies
/// with the number stored.
fn store_result(
    ctx: &mut Ctx<'_>,
    dst: &Bytes,
    found: Vec<Found>,
    to_meters: f64,
    storedist: bool,
    kind: Kind,
) -> Frame {
    let n = found.len() as u64;
    let mut z = ZSet::new();
    for f in found {
        let score = if storedist {
            f.dist / to_meters
        } else {
            f.score
        };
        z.insert(f.member, score);
    }
    let event = match kind {
        Kind::Search { .. } => "geosearchstore",
        Kind::Radius { .. } => "georadiusstore",
    };
    let reply = store_zset(ctx, dst, z, event);
    // Redis counts each member stored as a change.
    ctx.dirty += n.saturating_sub(1);
    reply
}
