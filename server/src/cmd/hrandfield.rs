//! `HRANDFIELD`: random fields of a hash, with or without their values. A positive count asks
//! for distinct fields (at most the whole hash), a negative one for that many picks that may
//! repeat. Under RESP3 `WITHVALUES` pairs each field with its value in a two-element array;
//! under RESP2 the reply is flat.

use bytes::Bytes;
use indexmap::IndexMap;
use rand::Rng;

use super::util::{is, parse_i64, read_container, syntax_error};
use super::{spec, CommandSpec, Ctx, READONLY};
use crate::frame::{Frame, Protocol};

/// The `HRANDFIELD` command.
pub(crate) const COMMANDS: &[CommandSpec] =
    &[spec("hrandfield", -2, READONLY, 1, 1, 1, hrandfield)];

/// The largest negative count (fields may repeat, so the reply does not shrink to the
/// hash's size): the reply is built whole before it is sent, so an unbounded count would be
/// an unbounded allocation. Redis answers larger counts; latchkey refuses them, as it does
/// for `SRANDMEMBER`.
const MAX_REPEATED_PICKS: u64 = 1 << 24;

type Hash = IndexMap<crate::value::Str, crate::value::Str>;

fn hrandfield(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (db, now, lazy) = (ctx.db(), ctx.now_ms, ctx.lazy_delete());
    if args.len() == 2 {
        let picked = read_container::<Hash, _>(db, &args[1], now, lazy, |h| {
            let i = rand::rng().random_range(0..h.len().max(1));
            h.get_index(i).map(|(k, _)| k.clone())
        });
        return match picked {
            Ok(Some(Some(field))) => Frame::Bulk(field.into()),
            Ok(_) => Frame::Null,
            Err(e) => e,
        };
    }
    let count = match parse_i64(&args[2]) {
        Ok(i64::MIN) => {
            return Frame::error(
                "ERR value is out of range, value must between -9223372036854775807 and \
                 9223372036854775807",
            )
        }
        Ok(n) => n,
        Err(e) => return e,
    };
    let with_values = match args.len() {
        3 => false,
        4 if is(&args[3], "withvalues") => true,
        _ => return syntax_error(),
    };
    if with_values && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Frame::error("ERR value is out of range");
    }
    let (n, distinct) = (count.unsigned_abs(), count > 0);
    let resp3 = ctx.client.protocol == Protocol::Resp3;
    let picked = read_container::<Hash, _>(db, &args[1], now, lazy, |h| {
        let len = h.len();
        if n == 0 || len == 0 {
            return Ok(vec![]);
        }
        let mut rng = rand::rng();
        let indexes: Vec<usize> = if !distinct || n == 1 {
            if n > MAX_REPEATED_PICKS {
                return Err(Frame::error(format!(
                    "ERR value is out of range, latchkey answers HRANDFIELD counts down to \
                     -{MAX_REPEATED_PICKS}"
                )));
            }
            (0..n).map(|_| rng.random_range(0..len)).collect()
        } else if n >= len as u64 {
            (0..len).collect()
        } else {
            rand::seq::index::sample(&mut rng, len, n as usize).into_vec()
        };
        Ok(indexes
            .into_iter()
            .filter_map(|i| h.get_index(i))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    });
    let pairs = match picked {
        Ok(Some(Ok(p))) => p,
        Ok(None) => vec![],
        Ok(Some(Err(e))) | Err(e) => return e,
    };
    let reply = if !with_values {
        pairs
            .into_iter()
            .map(|(k, _)| Frame::Bulk(k.into()))
            .collect()
    } else if resp3 {
        pairs
            .into_iter()
            .map(|(k, v)| Frame::Array(vec![Frame::Bulk(k.into()), Frame::Bulk(v.into())]))
            .collect()
    } else {
        pairs
            .into_iter()
            .flat_map(|(k, v)| [Frame::Bulk(k.into()), Frame::Bulk(v.into())])
            .collect()
    };
    Frame::Array(reply)
}
