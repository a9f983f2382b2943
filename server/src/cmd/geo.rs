//! `GEOADD`, `GEOPOS`, `GEODIST`, `GEOHASH`: positions kept in a sorted set, each member's
//! score the 52-bit geohash of its longitude and latitude (see [`crate::geo`]). The searches
//! are in [`super::geo_search`].
//!
//! `GEOADD` is a `ZADD` of the encoded scores, as in Redis: it replies as `ZADD` does, and
//! replicas and the AOF receive the `ZADD`.

use bytes::Bytes;

use super::util::{is, parse_double, syntax_error};
use super::zsets::{read, zadd_pairs, AddFlags};
use super::{spec, CommandSpec, Ctx, DENYOOM, READONLY, WRITE};
use crate::frame::{Frame, Protocol};
use crate::geo;

/// The geo commands but the searches.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("geoadd", -5, WRITE | DENYOOM, 1, 1, 1, geoadd),
    spec("geopos", -2, READONLY, 1, 1, 1, geopos),
    spec("geodist", -4, READONLY, 1, 1, 1, geodist),
    spec("geohash", -2, READONLY, 1, 1, 1, geohash),
];

/// Reads a longitude and a latitude, refusing what cannot be stored with Redis's texts.
pub(super) fn long_lat(long: &[u8], lat: &[u8]) -> Result<(f64, f64), Frame> {
    let (Some(long), Some(lat)) = (parse_double(long), parse_double(lat)) else {
        return Err(super::util::not_float());
    };
    if !geo::valid(long, lat) {
        return Err(Frame::error(format!(
            "ERR invalid longitude,latitude pair {long:.6},{lat:.6}"
        )));
    }
    Ok((long, lat))
}

/// Metres per unit (`m`, `km`, `ft`, `mi`), or Redis's refusal.
pub(super) fn unit(arg: &[u8]) -> Result<f64, Frame> {
    match arg.to_ascii_lowercase().as_slice() {
        b"m" => Ok(1.0),
        b"km" => Ok(1000.0),
        b"ft" => Ok(0.3048),
        b"mi" => Ok(1609.34),
        _ => Err(Frame::error(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        )),
    }
}

/// A coordinate as Redis replies with it: a bulk string under RESP2, a double under RESP3,
/// both with 17 decimals less the trailing zeros.
pub(super) fn coordinate(ctx: &Ctx<'_>, v: f64) -> Frame {
    let text = geo::format_coordinate(v);
    match ctx.client.protocol {
        Protocol::Resp2 => Frame::Bulk(Bytes::from(text)),
        // A script reads a double as a number: its digits do not matter there.
        Protocol::Resp3 if ctx.in_script => Frame::Double(v),
        Protocol::Resp3 => Frame::Raw(Bytes::from(format!(",{text}\r\n"))),
    }
}

/// `GEOADD key [NX|XX] [CH] longitude latitude member ...`
fn geoadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let mut f = AddFlags::default();
    let mut i = 2;
    while i < args.len() {
        if is(&args[i], "nx") {
            f.nx = true;
        } else if is(&args[i], "xx") {
            f.xx = true;
        } else if is(&args[i], "ch") {
            f.ch = true;
        } else {
            break;
        }
        i += 1;
    }
    let rest = &args[i..];
    if !rest.len().is_multiple_of(3) || (f.nx && f.xx) {
        return syntax_error();
    }
    let mut pairs = Vec::with_capacity(rest.len() / 3);
    for triple in rest.chunks(3) {
        let (long, lat) = match long_lat(&triple[0], &triple[1]) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let Some(score) = geo::score_of(long, lat) else {
            return syntax_error();
        };
        pairs.push((score as f64, triple[2].clone()));
    }
    let reply = zadd_pairs(ctx, &args[1], &pairs, &f);
    // Replicas and the AOF see the ZADD it is, with the options it was given.
    let mut zadd = Vec::with_capacity(i + pairs.len() * 2);
    zadd.push(Bytes::from_static(b"zadd"));
    zadd.extend(args[1..i].iter().cloned());
    for (score, member) in &pairs {
        zadd.push(Bytes::from((*score as u64).to_string()));
        zadd.push(member.clone());
    }
    ctx.propagate_as(vec![zadd]);
    reply
}

/// One reply per member named after the key (`GEOPOS`, `GEOHASH`), made by `reply` from the
/// member's stored score (`None`: the member, or the whole key, is missing).
fn per_member(ctx: &Ctx<'_>, args: &[Bytes], reply: impl Fn(Option<f64>) -> Frame) -> Frame {
    let scores = match read(ctx, &args[1], |z| {
        args[2..].iter().map(|m| z.score(m)).collect::<Vec<_>>()
    }) {
        Ok(s) => s.unwrap_or_else(|| vec![None; args.len() - 2]),
        Err(e) => return e,
    };
    Frame::Array(scores.into_iter().map(reply).collect())
}

/// `GEOPOS key member ...`
fn geopos(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    per_member(ctx, args, |s| match s {
        None => Frame::NullArray,
        Some(score) => {
            let (long, lat) = geo::position(score);
            Frame::Array(vec![coordinate(ctx, long), coordinate(ctx, lat)])
        }
    })
}

/// `GEODIST key member1 member2 [M|KM|FT|MI]`
fn geodist(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let to_meters = match args.len() {
        4 => 1.0,
        5 => match unit(&args[4]) {
            Ok(u) => u,
            Err(e) => return e,
        },
        _ => return syntax_error(),
    };
    let scores = match read(ctx, &args[1], |z| (z.score(&args[2]), z.score(&args[3]))) {
        Ok(Some(s)) => s,
        Ok(None) => return Frame::Null,
        Err(e) => return e,
    };
    let (Some(a), Some(b)) = scores else {
        return Frame::Null;
    };
    let ((l1, la1), (l2, la2)) = (geo::position(a), geo::position(b));
    let d = geo::distance(l1, la1, l2, la2) / to_meters;
    Frame::Bulk(Bytes::from(geo::format_distance(d)))
}

/// `GEOHASH key member ...`
fn geohash(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    per_member(ctx, args, |s| {
        s.map_or(Frame::Null, |s| {
            Frame::Bulk(Bytes::from(geo::standard_hash(s)))
        })
    })
}
