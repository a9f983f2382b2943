//! Connection commands: `PING`, `ECHO`, `HELLO`, `SELECT`, `QUIT`, `RESET` and `CLIENT`.

use bytes::Bytes;

use super::util::{is, parse_i64};
use super::{spec, CommandSpec, Ctx, FAST, LOADING, NO_QUEUE, STALE, SUBSCRIBED_OK};
use crate::db::NUM_DBS;
use crate::frame::{Frame, Protocol};

/// The connection commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec("ping", -1, FAST | SUBSCRIBED_OK | STALE, 0, 0, 0, ping),
    spec("echo", 2, FAST | LOADING | STALE, 0, 0, 0, echo),
    spec("select", 2, FAST | LOADING | STALE, 0, 0, 0, select),
    spec(
        "quit",
        -1,
        FAST | LOADING | STALE | SUBSCRIBED_OK | NO_QUEUE,
        0,
        0,
        0,
        quit,
    ),
    spec(
        "hello",
        -1,
        FAST | LOADING | STALE | NO_QUEUE,
        0,
        0,
        0,
        hello,
    ),
];

fn ping(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args.len() > 2 {
        return super::arity_error("ping");
    }
    if ctx.client.in_resp2_pubsub() {
        // In RESP2 subscribed mode PING answers with a message-shaped array.
        let payload = args.get(1).cloned().unwrap_or_default();
        return Frame::Array(vec![Frame::bulk("pong"), Frame::Bulk(payload)]);
    }
    match args.get(1) {
        Some(m) => Frame::Bulk(m.clone()),
        None => Frame::simple("PONG"),
    }
}

fn echo(_ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    Frame::Bulk(args[1].clone())
}

fn select(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Ok(i) = parse_i64(&args[1]) else {
        return super::util::not_integer();
    };
    if !(0..NUM_DBS as i64).contains(&i) {
        return Frame::error("ERR DB index is out of range");
    }
    ctx.client.db = i as usize;
    Frame::ok()
}

fn quit(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    ctx.client.close_after_reply = true;
    Frame::ok()
}

fn hello(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let mut i = 1;
    if let Some(v) = args.get(1) {
        let Ok(ver) = parse_i64(v) else {
            return Frame::error("ERR Protocol version is not an integer or out of range");
        };
        if !(2..=3).contains(&ver) {
            return Frame::error("NOPROTO unsupported protocol version");
        }
        ctx.client.protocol = if ver == 3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        i = 2;
    }
    while i < args.len() {
        let opt = &args[i];
        if is(opt, "setname") && i + 1 < args.len() {
            let name = &args[i + 1];
            if name.iter().any(|c| *c <= b' ' || *c > b'~') {
                return Frame::error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            ctx.client.handle.info.lock().name = if name.is_empty() {
                None
            } else {
                Some(name.clone())
            };
            i += 2;
        } else if is(opt, "auth") && i + 2 < args.len() {
            // No ACLs: the default user needs no password, as in an unconfigured Redis.
            i += 3;
        } else {
            return Frame::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(opt)
            ));
        }
    }
    let role = if ctx.shared.is_replica() {
        "replica"
    } else {
        "master"
    };
    Frame::Map(vec![
        (Frame::bulk("server"), Frame::bulk("redis")),
        (Frame::bulk("version"), Frame::bulk(crate::REDIS_VERSION)),
        (
            Frame::bulk("proto"),
            Frame::Integer(ctx.client.protocol.number()),
        ),
        (
            Frame::bulk("id"),
            Frame::Integer(ctx.client.handle.id as i64),
        ),
        (Frame::bulk("mode"), Frame::bulk("standalone")),
        (Frame::bulk("role"), Frame::bulk(role)),
        (Frame::bulk("modules"), Frame::Array(vec![])),
    ])
}
