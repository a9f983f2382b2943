//! Replication commands: `REPLICAOF`, `ROLE`, `WAIT`, the handshake a replica sends
//! (`REPLCONF`, `PSYNC`), `FAILOVER` (a coordinated failover, see [`crate::failover`]), and
//! `LATCHKEY.FAILOVER`, the wire form of the failover controls.

use crate::command::{BLOCKS_UNLISTED, NO_ASYNC_LOADING, NO_MULTI};
use std::time::Duration;

use bytes::Bytes;

use super::util::{is, lower, not_integer, parse_i64};
use super::{
    spec, CommandSpec, Ctx, ADMIN, ALLOW_BUSY, BLOCKING, EXCLUSIVE, FAST, LOADING, NOSCRIPT, STALE,
};
use crate::command::WALKS_KEYSPACE;
use crate::frame::Frame;

/// The replication commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec(
        "replicaof",
        3,
        ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING,
        0,
        0,
        0,
        replicaof,
    ),
    spec(
        "slaveof",
        3,
        ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING,
        0,
        0,
        0,
        replicaof,
    ),
    spec("role", 1, NOSCRIPT | LOADING | STALE | FAST, 0, 0, 0, role),
    spec(
        "wait",
        3,
        NOSCRIPT | BLOCKING | BLOCKS_UNLISTED,
        0,
        0,
        0,
        wait,
    ),
    spec("waitaof", 4, NOSCRIPT | BLOCKING, 0, 0, 0, waitaof),
    spec(
        "replconf",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY,
        0,
        0,
        0,
        replconf,
    ),
    spec(
        "psync",
        -3,
        ADMIN | NOSCRIPT | EXCLUSIVE | WALKS_KEYSPACE | NO_ASYNC_LOADING | NO_MULTI,
        0,
        0,
        0,
        psync,
    ),
    spec(
        "sync",
        1,
        ADMIN | NOSCRIPT | EXCLUSIVE | WALKS_KEYSPACE | NO_ASYNC_LOADING | NO_MULTI,
        0,
        0,
        0,
        sync,
    ),
    spec(
        "failover",
        -1,
        ADMIN | NOSCRIPT | STALE,
        0,
        0,
        0,
        failover_command,
    ),
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
        crate::promote::stop_replica(ctx.shared);
        return Frame::ok();
    }
    let Ok(port) = parse_i64(&args[2]) else {
        return Frame::error("ERR Invalid master port");
    };
    if !(0..=65535).contains(&port) {
        return Frame::error("ERR Invalid master port");
    }
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    crate::replica::start_replica(ctx.shared, host, port as u16);
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
    let handle = ctx.client.handle.clone();
    ctx.block(async move {
        // `CLIENT UNBLOCK` ends it early: with the acknowledgements so far, as a timeout.
        let unblockable = handle.begin_unblockable();
        tokio::select! {
            n = shared.replication.wait_for_acks(n, offset, timeout) => Frame::Integer(n),
            error = unblockable.unblocked() => if error {
                Frame::error(crate::client::UNBLOCKED_ERROR)
            } else {
                Frame::Integer(shared.replication.acked_count(offset))
            },
        }
    });
    Frame::Integer(acked)
}

/// How many of `WAITAOF`'s acknowledgements hold now: `[local, replicas]`. Local is 1 when
/// everything appended to this server's AOF so far (so this client's writes too) is covered by
/// its fsyncs (never under `appendfsync no`, as in Redis).
fn aof_acks(shared: &crate::state::Shared, offset: u64) -> (i64, i64) {
    let local = shared
        .aof
        .read()
        .as_ref()
        .is_some_and(|aof| aof.all_fsynced());
    (local as i64, shared.replication.aof_acked_count(offset))
}

fn pair(local: i64, replicas: i64) -> Frame {
    Frame::Array(vec![Frame::Integer(local), Frame::Integer(replicas)])
}

/// `WAITAOF numlocal numreplicas timeout` (Redis 7.2): blocks until this client's writes are
/// on disk in the local AOF (`numlocal` 0 or 1) and in the AOF of `numreplicas` replicas, or
/// the timeout (milliseconds; 0 waits forever) passes. Replies `[local, replicas]`.
fn waitaof(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Ok(numlocal) = parse_i64(&args[1]) else {
        return not_integer();
    };
    if !(0..=1).contains(&numlocal) {
        return Frame::error("ERR value is out of range, value must between 0 and 1");
    }
    let Ok(numreplicas) = parse_i64(&args[2]) else {
        return not_integer();
    };
    if numreplicas < 0 {
        return Frame::error("ERR value is out of range, must be positive");
    }
    let Ok(timeout) = parse_i64(&args[3]) else {
        return Frame::error("ERR timeout is not an integer or out of range");
    };
    if timeout < 0 {
        return Frame::error("ERR timeout is negative");
    }
    if ctx.shared.is_replica() {
        return Frame::error("ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.");
    }
    if numlocal > 0 && ctx.shared.aof.read().is_none() {
        return Frame::error(
            "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.",
        );
    }
    let offset = ctx.client.repl_offset;
    let (local, replicas) = aof_acks(ctx.shared, offset);
    if (local >= numlocal && replicas >= numreplicas) || !ctx.may_block() {
        return pair(local, replicas);
    }
    let shared = ctx.shared.clone();
    let deadline =
        (timeout > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(timeout as u64));
    ctx.block(async move {
        loop {
            let (local, replicas) = aof_acks(&shared, offset);
            let expired = deadline.is_some_and(|d| tokio::time::Instant::now() >= d);
            if (local >= numlocal && replicas >= numreplicas) || expired {
                return pair(local, replicas);
            }
            if replicas < numreplicas {
                shared.replication.request_acks();
            }
            // The local AOF has no wake-up of its own: look again every few milliseconds.
            let tick = Duration::from_millis(if local < numlocal { 10 } else { 100 });
            let tick = match deadline {
                Some(d) => tick.min(d.saturating_duration_since(tokio::time::Instant::now())),
                None => tick,
            };
            shared.replication.next_ack(tick).await;
        }
    });
    pair(local, replicas)
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
                // `ACK offset [FACK aof-offset]`, from a replica; never answered.
                let fack = match args.get(i + 2) {
                    Some(f) if is(f, "fack") => args
                        .get(i + 3)
                        .and_then(|o| crate::codec::parse_int(o))
                        .map(|o| o.max(0) as u64),
                    _ => None,
                };
                if let Some(offset) = crate::codec::parse_int(&args[i + 1]) {
                    ctx.shared
                        .replication
                        .ack(ctx.client.handle.id, offset.max(0) as u64, fack);
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

/// `FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]`, parsed as Redis 7.0 parses it
/// (each option once; `ABORT` alone).
fn failover_command(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args.len() == 2 && is(&args[1], "abort") {
        return if crate::failover::abort(ctx.shared) {
            Frame::ok()
        } else {
            Frame::error("ERR No failover in progress.")
        };
    }
    let mut req = crate::failover::Request::default();
    let mut j = 1;
    while j < args.len() {
        if is(&args[j], "timeout") && j + 1 < args.len() && req.timeout_ms.is_none() {
            let Ok(ms) = parse_i64(&args[j + 1]) else {
                return not_integer();
            };
            if ms <= 0 {
                return Frame::error("ERR FAILOVER timeout must be greater than 0");
            }
            req.timeout_ms = Some(ms as u64);
            j += 2;
        } else if is(&args[j], "to") && j + 2 < args.len() && req.target.is_none() {
            let Ok(port) = parse_i64(&args[j + 2]) else {
                return not_integer();
            };
            req.target = Some((String::from_utf8_lossy(&args[j + 1]).into_owned(), port));
            j += 3;
        } else if is(&args[j], "force") && !req.force {
            req.force = true;
            j += 1;
        } else {
            return Frame::error("ERR syntax error");
        }
    }
    match crate::failover::start(ctx.shared, req) {
        Ok(()) => Frame::ok(),
        Err(e) => e,
    }
}

/// `PSYNC replid offset [FAILOVER]`: `+CONTINUE` and what the replica missed when the backlog
/// still has it, else `+FULLRESYNC` and an RDB snapshot. With `FAILOVER`, sent by our own
/// master in a coordinated failover, this replica first takes over as master (if the request
/// continues its own history), then answers as one.
fn psync(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args.len() > 3 && is(&args[3], "failover") {
        tracing::info!(
            "Failover request received for replid {}.",
            String::from_utf8_lossy(&args[1])
        );
        if ctx.shared.replication.upstream.lock().link.is_none() {
            return Frame::error("ERR PSYNC FAILOVER can't be sent to a master.");
        }
        if args[1] != ctx.shared.replication.replid().as_bytes() {
            return Frame::error("ERR PSYNC FAILOVER replid must match my replid.");
        }
        crate::promote::stop_replica(ctx.shared);
        tracing::info!("MASTER MODE enabled (failover request)");
    }
    if ctx.shared.replication.failover.lock().phase != crate::replication::Phase::None {
        return Frame::error("NOMASTERLINK Can't SYNC while failing over");
    }
    if ctx.shared.is_replica() {
        return Frame::error("ERR Replica chaining is not supported by latchkey");
    }
    let sender = ctx.client.push.clone();
    let id = ctx.client.handle.id;
    let port = ctx.client.replica_port;
    let request = crate::master::SyncRequest::Psync(&args[1], &args[2]);
    ctx.client.is_replica = true;
    crate::master::attach_replica(ctx.shared, sender, id, port, request)
}

/// `SYNC`: the pre-PSYNC handshake, a snapshot with no `+FULLRESYNC` line, then the stream.
/// `redis-cli --rdb` uses it to download a snapshot.
fn sync(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    if ctx.shared.replication.failover.lock().phase != crate::replication::Phase::None {
        return Frame::error("NOMASTERLINK Can't SYNC while failing over");
    }
    if ctx.shared.is_replica() {
        return Frame::error("ERR Replica chaining is not supported by latchkey");
    }
    let sender = ctx.client.push.clone();
    let id = ctx.client.handle.id;
    let port = ctx.client.replica_port;
    ctx.client.is_replica = true;
    crate::master::attach_replica(
        ctx.shared,
        sender,
        id,
        port,
        crate::master::SyncRequest::Sync,
    )
}

/// `LATCHKEY.FAILOVER PAUSE|RESUME|CRASH|RESTART [AOF|NOAOF]|PROMOTE|DISCONNECT|LAG ms`:
/// drive a failover over the wire. `LAG ms` (on a replica) applies the stream that much late.
/// `DISCONNECT` (on a master) cuts every replica's link, as `CLIENT KILL TYPE replica` does in
/// Redis; they come back with `PSYNC` and continue from the backlog.
/// `PAUSE`/`RESUME` hold or release the replication stream on this master, `CRASH` drops what
/// was held and every connection (the process stays up but serves nothing), `PROMOTE` makes a
/// replica a master. `RESTART` crashes the node and starts it again on the same port (see
/// [`crate::restart`]): `AOF` replays its append-only file, `NOAOF` starts empty, and with
/// neither it does what its `appendonly` setting says. The caller gets `+OK` once the node
/// serves again, then its connection closes, as every other one did.
fn failover(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    match lower(&args[1]).as_str() {
        "pause" => ctx.shared.replication.set_paused(true),
        "resume" => ctx.shared.replication.set_paused(false),
        "crash" => {
            ctx.shared.replication.discard_held();
            ctx.shared.request_shutdown();
            ctx.client.close_after_reply = true;
        }
        "restart" if args.len() <= 3 => {
            let aof = match args.get(2) {
                None => ctx.shared.config.get("appendonly").as_deref() == Some("yes"),
                Some(a) if is(a, "aof") => true,
                Some(a) if is(a, "noaof") => false,
                Some(_) => return super::util::syntax_error(),
            };
            let shared = ctx.shared.clone();
            let restart = async move {
                match crate::restart::restart(&shared, aof).await {
                    Ok(()) => Frame::ok(),
                    Err(e) => Frame::error(format!("ERR restart failed: {e}")),
                }
            };
            // The caller waits until the node serves again, so that whatever it does after the
            // reply meets the restarted node (inside MULTI, where nothing may wait, the restart
            // runs on its own once EXEC lets go of the keyspace).
            if ctx.may_block() {
                ctx.block(restart);
            } else {
                tokio::spawn(restart);
            }
            ctx.client.close_after_reply = true;
        }
        "promote" => crate::promote::stop_replica(ctx.shared),
        "disconnect" => ctx.shared.replication.disconnect_replicas(),
        "lag" if args.len() == 3 => match parse_i64(&args[2]) {
            Ok(ms) if ms >= 0 => ctx
                .shared
                .replication
                .set_lag(Duration::from_millis(ms as u64)),
            _ => return not_integer(),
        },
        _ => {
            return Frame::error(format!(
            "ERR unknown subcommand '{}'. Try PAUSE, RESUME, CRASH, RESTART, PROMOTE, DISCONNECT or LAG.",
            String::from_utf8_lossy(&args[1])
        ))
        }
    }
    Frame::ok()
}
