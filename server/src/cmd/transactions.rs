//! Transactions: `MULTI`, `EXEC`, `DISCARD`, `WATCH`, `UNWATCH`.
//!
//! Between `MULTI` and `EXEC` the dispatcher queues commands instead of running them. `EXEC`
//! holds the gate exclusively and runs the whole queue, so no other client sees the
//! transaction half-done. `WATCH` turns it into an optimistic lock: if a watched key changes
//! before `EXEC`, the transaction does not run and `EXEC` answers with a nil array.

use crate::command::SKIP_SLOWLOG;
use bytes::Bytes;

use super::{
    call_spec, lookup, spec, CommandSpec, Ctx, ALLOW_BUSY, EXCLUSIVE, FAST, LOADING, NOSCRIPT,
    NO_QUEUE, STALE, WRITE,
};
use crate::client::MultiState;
use crate::frame::Frame;

/// The transaction commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec(
        "multi",
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_QUEUE | ALLOW_BUSY,
        0,
        0,
        0,
        multi,
    ),
    spec(
        "exec",
        1,
        NOSCRIPT | LOADING | STALE | NO_QUEUE | EXCLUSIVE | SKIP_SLOWLOG,
        0,
        0,
        0,
        exec,
    ),
    spec(
        "discard",
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_QUEUE | ALLOW_BUSY,
        0,
        0,
        0,
        discard,
    ),
    spec(
        "watch",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | NO_QUEUE,
        1,
        -1,
        1,
        watch,
    ),
    spec(
        "unwatch",
        1,
        NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY,
        0,
        0,
        0,
        unwatch,
    ),
];

fn multi(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    if ctx.client.multi.is_some() {
        return Frame::error("ERR MULTI calls can not be nested");
    }
    ctx.client.multi = Some(MultiState::default());
    Frame::ok()
}

fn discard(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    if ctx.client.multi.take().is_none() {
        return Frame::error("ERR DISCARD without MULTI");
    }
    ctx.client.unwatch_all(&ctx.shared.keyspace);
    Frame::ok()
}

fn watch(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if ctx.client.multi.is_some() {
        return Frame::error("ERR WATCH inside MULTI is not allowed");
    }
    let db_index = ctx.client.db;
    for key in &args[1..] {
        if ctx
            .client
            .watched
            .iter()
            .any(|(d, k, _)| *d == db_index && k == key)
        {
            continue;
        }
        let expiry = ctx
            .db()
            .get(key, ctx.now_ms, ctx.lazy_delete())
            .and_then(|e| e.expires_at());
        ctx.db().watch(key.clone(), ctx.client.watch_flag.clone());
        ctx.client.watched.push((db_index, key.clone(), expiry));
    }
    Frame::ok()
}

fn unwatch(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    ctx.client.unwatch_all(&ctx.shared.keyspace);
    Frame::ok()
}

/// Whether the transaction must not run: a watched key changed, or a key that was alive with a
/// TTL when watched has expired since.
fn watch_broken(ctx: &Ctx<'_>) -> bool {
    if ctx.client.watch_flag.is_dirty() {
        return true;
    }
    ctx.client.watched.iter().any(|(db, key, expiry)| {
        expiry.is_some()
            && ctx
                .shared
                .keyspace
                .db(*db)
                .get(key, ctx.now_ms, false)
                .is_none()
    })
}

fn exec(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    let Some(state) = ctx.client.multi.take() else {
        return Frame::error("ERR EXEC without MULTI");
    };
    if state.errored {
        ctx.client.unwatch_all(&ctx.shared.keyspace);
        return Frame::error("EXECABORT Transaction discarded because of previous errors.");
    }
    if watch_broken(ctx) {
        ctx.client.unwatch_all(&ctx.shared.keyspace);
        return Frame::NullArray;
    }
    // Unwatch before running: our own writes must not count as a change.
    ctx.client.unwatch_all(&ctx.shared.keyspace);
    // A transaction that writes is checked as one write when it runs, as Redis checks the
    // EXEC by what it queued: the replicas that were good at queueing time may be gone.
    let specs: Vec<_> = state.queue.iter().map(|args| lookup(&args[0])).collect();
    // A command's flags may depend on its arguments (`FUNCTION LOAD` writes, `FUNCTION LIST`
    // does not).
    let write = state.queue.iter().zip(&specs).find_map(|(args, spec)| {
        let spec = spec.as_ref()?;
        let adjusted = spec.for_args(ctx.shared, args).unwrap_or(**spec);
        adjusted.has(WRITE).then_some(adjusted)
    });
    if let Some(write) = write {
        if let Some(Frame::Error(e)) = ctx.shared.precheck(ctx.client, &write) {
            return Frame::error(format!(
                "EXECABORT Transaction discarded because of: {}",
                String::from_utf8_lossy(&e)
            ));
        }
    }
    let was_in_exec = ctx.in_exec;
    ctx.in_exec = true;
    let mut replies = Vec::with_capacity(state.queue.len());
    // A long transaction hands its worker off, as a long script does (see `crate::hand_off`).
    let _span = crate::hand_off::start();
    // More than one write reaches the replicas and the AOF as one transaction.
    let _unit = ctx.shared.begin_unit();
    for (args, spec) in state.queue.iter().zip(specs) {
        crate::hand_off::if_long();
        // Queued commands were looked up, arity-checked and prechecked when queued.
        // The ACLs are asked again: the user's rules may have changed since the queueing.
        let denied = match ctx.client.user.unrestricted() {
            true => None,
            false => {
                let context = crate::acl::log::Context::Multi;
                crate::dispatch::acl_check(ctx.shared, ctx.client, args, context).err()
            }
        };
        let reply = match spec {
            Some(_) if denied.is_some() => {
                let reason = denied.map_or("no permission", |(d, _)| d.exec_reason());
                Frame::error(format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"))
            }
            Some(spec) => call_spec(ctx, spec, args),
            None => super::unknown_command_error(args),
        };
        // Each failed command is an error reply of its own (see `crate::errorstats`).
        let counted = std::mem::take(&mut ctx.client.error_counted);
        ctx.shared.stats.errors.after_reply(&reply, counted);
        replies.push(reply);
    }
    ctx.in_exec = was_in_exec;
    Frame::Array(replies)
}
