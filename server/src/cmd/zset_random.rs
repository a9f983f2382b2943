//! `ZRANDMEMBER key [count [WITHSCORES]]`: random members of a sorted set.
//!
//! Without a count, one member (a null when the key is missing). A positive count gives
//! distinct members, the whole set (highest first) when the count reaches its size; a negative
//! count gives that many picks that may repeat. `WITHSCORES` pairs each with its score: flat
//! under RESP2, `[member, score]` arrays under RESP3.

use bytes::Bytes;
use rand::Rng;

use super::util::{is, parse_i64, syntax_error};
use super::zsets::{read, with_scores};
use super::{spec, CommandSpec, Ctx, READONLY};
use crate::command::WALKS_VALUE;
use crate::frame::Frame;

/// `ZRANDMEMBER`.
pub(crate) const COMMANDS: &[CommandSpec] = &[spec(
    "zrandmember",
    -2,
    READONLY | WALKS_VALUE,
    1,
    1,
    1,
    zrandmember,
)];

/// The largest negative count latchkey answers (members may repeat, so the reply does not
/// shrink to the set's size): the reply is built whole before it is sent, so an unbounded
/// count would be an unbounded allocation. Redis answers larger counts; latchkey refuses them,
/// as it does for `SRANDMEMBER`.
const MAX_REPEATED_PICKS: u64 = 1 << 24;

fn zrandmember(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args.len() == 2 {
        return match read(ctx, &args[1], |z| {
            let n = rand::rng().random_range(0..z.len().max(1));
            z.iter().nth(n).map(|(m, _)| m.to_bytes())
        }) {
            Ok(Some(Some(m))) => Frame::Bulk(m),
            Ok(_) => Frame::Null,
            Err(e) => e,
        };
    }
    let count = match parse_i64(&args[2]) {
        Ok(i64::MIN) => {
            return Frame::error(
                "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
            )
        }
        Ok(n) => n,
        Err(e) => return e,
    };
    if args.len() > 4 || (args.len() == 4 && !is(&args[3], "withscores")) {
        return syntax_error();
    }
    let scores = args.len() == 4;
    // Redis refuses counts whose reply (member and score) would overflow its length.
    if scores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Frame::error("ERR value is out of range");
    }
    let (n, distinct) = (count.unsigned_abs(), count >= 0);
    if !distinct && n > MAX_REPEATED_PICKS {
        return Frame::error(format!(
            "ERR value is out of range, latchkey answers ZRANDMEMBER counts down to -{MAX_REPEATED_PICKS}"
        ));
    }
    // A large set is handed off before the command runs (`WALKS_VALUE`); a large count of
    // picks from a small one is as long a step.
    if n > crate::walk::HEAVY_WALK as u64 {
        crate::hand_off::before_long_step();
    }
    let picked = read(ctx, &args[1], |z| {
        let len = z.len();
        if n == 0 || len == 0 {
            return Vec::new();
        }
        let all: Vec<(&crate::zset::Member, f64)> = z.iter().collect();
        let mut rng = rand::rng();
        if !distinct {
            return (0..n)
                .map(|_| {
                    let (m, s) = all[rng.random_range(0..len)];
                    (m.to_bytes(), s)
                })
                .collect();
        }
        if n >= len as u64 {
            // The whole set, from the highest member down: Redis walks it from its tail.
            return all
                .into_iter()
                .rev()
                .map(|(m, s)| (m.to_bytes(), s))
                .collect();
        }
        let mut idx = rand::seq::index::sample(&mut rng, len, n as usize).into_vec();
        idx.sort_unstable();
        idx.into_iter()
            .map(|i| (all[i].0.to_bytes(), all[i].1))
            .collect()
    });
    match picked {
        Ok(v) => with_scores(v.unwrap_or_default(), scores, ctx.client.protocol),
        Err(e) => e,
    }
}
