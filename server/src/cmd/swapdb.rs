//! `SWAPDB index1 index2`: two databases exchange their keys, at once for every client.
//!
//! A client that has `SELECT`ed one of them sees the other's keys from then on. Transactions
//! watching a key that exists in either database fail at `EXEC`; clients blocked on a list or
//! sorted-set key that now exists are served (see [`crate::db::Keyspace::swap`]). The command
//! reaches replicas and the AOF as sent, even when both indexes are the same (Redis counts it
//! as a change then too). It runs alone ([`EXCLUSIVE`]): no command sees half a swap.
//!
//! Errors as in Redis 7.0: an index that is not an integer (or not a 32-bit one) is
//! `ERR invalid first DB index` / `ERR invalid second DB index`; one outside `0..16` is
//! `ERR DB index is out of range`.

use bytes::Bytes;

use super::{spec, CommandSpec, Ctx, EXCLUSIVE, FAST, WRITE};
use crate::db::NUM_DBS;
use crate::frame::Frame;

/// `SWAPDB`.
pub(crate) const COMMANDS: &[CommandSpec] =
    &[spec("swapdb", 3, WRITE | FAST | EXCLUSIVE, 0, 0, 0, swapdb)];

/// A database index as Redis's `getIntFromObjectOrReply` reads it: a 32-bit integer, or the
/// error `ERR <what>`.
fn index(arg: &[u8], what: &str) -> Result<i64, Frame> {
    crate::codec::parse_int(arg)
        .filter(|i| i32::try_from(*i).is_ok())
        .ok_or_else(|| Frame::error(format!("ERR {what}")))
}

fn swapdb(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let a = match index(&args[1], "invalid first DB index") {
        Ok(i) => i,
        Err(e) => return e,
    };
    let b = match index(&args[2], "invalid second DB index") {
        Ok(i) => i,
        Err(e) => return e,
    };
    let range = 0..NUM_DBS as i64;
    if !range.contains(&a) || !range.contains(&b) {
        return Frame::error("ERR DB index is out of range");
    }
    ctx.shared.keyspace.swap(a as usize, b as usize);
    ctx.changed();
    Frame::ok()
}
