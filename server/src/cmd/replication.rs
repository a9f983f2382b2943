//! Replication commands: `REPLICAOF`, `ROLE`, `WAIT`, the handshake a replica sends
//! (`REPLCONF`, `PSYNC`), and `LATCHKEY.FAILOVER`, the wire form of the failover controls.

use std::time::Duration;

use bytes::Bytes;

use super::util::{is, lower, not_integer, parse_i64};
use super::{
    spec, CommandSpec, Ctx, ADMIN, ALLOW_BUSY, BLOCKING, EXCLUSIVE, FAST, LOADING, NOSCRIPT, STALE,
};
use crate::frame::Frame;
use crate::replication;

/// The replication commands.
pub const COMMANDS: &[CommandSpec] = &[
    spec("replicaof", 3, ADMIN | NOSCRIPT | STALE, 0, 0, 0, replicaof),
    spec("slaveof", 3, ADMIN | NOSCRIPT | STALE, 0, 0, 0, replicaof),
    spec("role", 1, NOSCRIPT | LOADING | STALE | FAST, 0, 0, 0, role),
    spec("wait", 3, NOSCRIPT | BLOCKING, 0, 0, 0, wait),
    spec(
        "replconf",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY,
        0,
        0,
        0,
        replconf,
    ),
    spec("psync", -3, ADMIN | NOSCRIPT | EXCLUSIVE, 0, 0, 0, psync),
    spec(
        "latchkey.failover",
        -2,
        ADMIN | NOSCRIPT | ALLOW_BUSY,
        0,
        0,
        0,
        failover,
    ),
];

fn replicaof(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if is(&args[1], "no") && is(&args[2], "one") {
        replication::stop_replica(ctx.shared);
        return Frame::ok();
    }
    let Ok(port) = parse_i64(&args[2]) else {
        return Frame::error("ERR Invalid master port");
    };
    if !(0..=65535).contains(&port) {
        return Frame::error("ERR Invalid master port");
    }
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    replication::start_replica(ctx.shared, host, port as u16);
    Frame::ok()
}

fn role(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    ctx.shared.replication.role()
}

/// `WAIT numreplicas timeout`: blocks until that many replicas acknowledged this client's
/// last write, or the timeout (milliseconds, real time; 0 waits forever) passes.
fn wait(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (Ok(n), Ok(timeout)) = (parse_i64(&args[1]), parse_i64(&args[2])) else {
        return not_integer();
    };
    if timeout < 0 {
        return Frame::error("ERR timeout is negative");
    }
    let repl = &ctx.shared.replication;
    let offset = ctx.client.repl_offset;
    let acked = repl.acked_count(offset);
    if n <= acked || !ctx.may_block() {
        return Frame::Integer(acked);
    }
    let shared = ctx.shared.clone();
    let timeout = (timeout > 0).then(|| Duration::from_millis(timeout as u64));
    ctx.block(
        async move { Frame::Integer(shared.replication.wait_for_acks(n, offset, timeout).await) },
    );
    Frame::Integer(acked)
}

/// `REPLCONF`: the options a replica announces, and its acknowledgements (which get no reply).
fn replconf(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args.len().is_multiple_of(2) {
        return super::util::syntax_error();
    }
    let mut i = 1;
    while i < args.len() {
        let opt = lower(&args[i]);
        match opt.as_str() {
            "ack" => {
                if let Some(offset) = crate::codec::parse_int(&args[i + 1]) {
                    ctx.shared
                        .replication
                        .ack(ctx.client.handle.id, offset.max(0) as u64);
                }
                return Frame::Multi(vec![]);
            }
            "getack" => return Frame::Multi(vec![]),
            "listening-port" => {
                ctx.client.replica_port = parse_i64(&args[i + 1]).unwrap_or(0) as u16;
            }
            "capa" | "ip-address" | "rdb-only" | "rdb-filter-only" => {}
            _ => {
                return Frame::error(format!(
                    "ERR Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(&args[i])
                ))
            }
        }
        i += 2;
    }
    Frame::ok()
}

/// `PSYNC replid offset`: `+CONTINUE` and what the replica missed when the backlog still
/// has it, else `+FULLRESYNC` and an RDB snapshot.
fn psync(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if ctx.shared.is_replica() {
        return Frame::error("ERR Replica chaining is not supported by latchkey");
    }
    let sender = ctx.client.push.clone();
    let id = ctx.client.handle.id;
    let port = ctx.client.replica_port;
    replication::attach_replica(ctx.shared, sender, id, port, &args[1], &args[2])
}

/// `LATCHKEY.FAILOVER PAUSE|RESUME|CRASH|PROMOTE|LAG ms`: drive a failover over the wire.
/// `LAG ms` (on a replica) applies the stream that much late.
/// `PAUSE`/`RESUME` hold or release the replication stream on this master, `CRASH` drops what
/// was held and every connection (the process stays up but serves nothing), `PROMOTE` makes a
/// replica a master.
fn failover(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match lower(&args[1]).as_str() {
        "pause" => ctx.shared.replication.set_paused(true),
        "resume" => ctx.shared.replication.set_paused(false),
        "crash" => {
            ctx.shared.replication.discard_held();
            ctx.shared.request_shutdown();
            ctx.client.close_after_reply = true;
        }
        "promote" => replication::stop_replica(ctx.shared),
        "lag" if args.len() == 3 => match parse_i64(&args[2]) {
            Ok(ms) if ms >= 0 => ctx
                .shared
                .replication
                .set_lag(Duration::from_millis(ms as u64)),
            _ => return not_integer(),
        },
        _ => {
            return Frame::error(format!(
                "ERR unknown subcommand '{}'. Try PAUSE, RESUME, CRASH, PROMOTE or LAG.",
                String::from_utf8_lossy(&args[1])
            ))
        }
    }
    Frame::ok()
}
