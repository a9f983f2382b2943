//! Key-space commands: existence, deletion, type, iteration, renaming and expiry.

use bytes::Bytes;

use super::{spec, CommandSpec, Ctx, FAST, READONLY, WRITE};
use crate::frame::Frame;

/// The key-space commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec("del", -2, WRITE, 1, -1, 1, del),
    spec("exists", -2, READONLY | FAST, 1, -1, 1, exists),
];

fn del(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let mut n = 0;
    for k in &args[1..] {
        // An expired key counts as absent; removing it still tidies the map.
        let live = ctx.db().contains(k, ctx.now_ms);
        if ctx.db().remove(k).is_some() && live {
            n += 1;
            ctx.changed();
        }
    }
    Frame::Integer(n)
}

fn exists(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let n = args[1..]
        .iter()
        .filter(|k| ctx.db().get(k, ctx.now_ms, ctx.lazy_delete()).is_some())
        .count();
    Frame::Integer(n as i64)
}
