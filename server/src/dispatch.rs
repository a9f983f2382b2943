//! Running a command: from the name to the reply, and into the replication stream.
//!
//! [`execute`] is the whole path of one request: lookup, arity, the `maxmemory` check,
//! transaction queueing, subscribed-mode rules, then the handler under the execution
//! [gate](crate::gate), then [propagation](crate::propagate). [`call`] is the path of a
//! command inside a script or a transaction, which already holds the gate.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::acl::log::{Context as AclContext, Entry as AclLogEntry, Reason as AclReason};
use crate::acl::{commands as acl_commands, Denied};
use crate::client::Client;
use crate::cmdstats::{Outcome, StatKey};
use crate::command::*;
use crate::frame::Frame;
use crate::oom;
use crate::pause::PauseMode;
use crate::state::Shared;
use crate::tracking::Tracking;

/// Runs one command for a client, from start to reply: lookup, arity, transaction queueing,
/// subscribed-mode and busy-script rules, then the handler under the gate.
pub(crate) async fn execute(shared: &Arc<Shared>, client: &mut Client, args: Vec<Bytes>) -> Frame {
    let spec = lookup(&args[0]);
    execute_spec(shared, client, spec, args).await
}

/// [`execute`] for a caller that has already looked the command up (`None`: unknown), so
/// that the name is not lowercased and hashed twice per request.
pub(crate) async fn execute_spec(
    shared: &Arc<Shared>,
    client: &mut Client,
    spec: Option<&'static CommandSpec>,
    args: Vec<Bytes>,
) -> Frame {
    let stat = spec.and_then(|s| stat_key(s, &args));
    client.handler_usec = None;
    let reply = run_command(shared, client, spec, args).await;
    // See `crate::errorstats`.
    let counted = std::mem::take(&mut client.error_counted);
    shared.stats.errors.after_reply(&reply, counted);
    if let (Some(stat), Some(spec)) = (stat, spec) {
        count_command(shared, spec, &stat, client.handler_usec.take(), &reply);
    }
    reply
}

/// Counts a command in `INFO commandstats` (see [`crate::cmdstats`]): a call when its handler
/// ran (`usec`), failed when it replied with an error; a refusal when it did not run and
/// replied with an error. A command queued in `MULTI` counts when `EXEC` runs it; a
/// subcommand its container did not know counts nowhere. A call also goes into the latency
/// monitor and the command's latency histogram (see [`crate::latency`]).
fn count_command(
    shared: &Shared,
    spec: &CommandSpec,
    stat: &StatKey,
    usec: Option<u64>,
    reply: &Frame,
) {
    let failed = matches!(reply, Frame::Error(_));
    let mut usec = usec;
    if let (StatKey::Subcommand(_), Frame::Error(e)) = (stat, reply) {
        if e.starts_with(b"ERR unknown subcommand '") {
            return;
        }
        // A subcommand's arity is checked by its container's handler here, by the dispatcher
        // in Redis: a refusal either way.
        if e.starts_with(b"ERR wrong number of arguments for '") {
            usec = None;
        }
    }
    let outcome = match usec {
        Some(usec) => Outcome::Called { usec, failed },
        None if failed => Outcome::Rejected,
        None => return,
    };
    shared.stats.commands.record(stat, outcome);
    if let Some(usec) = usec {
        record_latency(shared, spec, stat, usec);
    }
}

/// A call's latency: a `command` (or `fast-command`) event when it reached
/// `latency-monitor-threshold`, and a sample of its histogram while `latency-tracking` is on
/// (two relaxed loads when both are off).
fn record_latency(shared: &Shared, spec: &CommandSpec, stat: &StatKey, usec: u64) {
    let threshold = shared.config.latency_threshold_ms();
    let ms = usec / 1000;
    if threshold > 0 && ms >= threshold {
        let event = if spec.has(FAST) {
            "fast-command"
        } else {
            "command"
        };
        let now_s = (shared.clock.now_ms() / 1000) as i64;
        shared.stats.latency_events.add_sample(event, ms, now_s);
    }
    if shared.config.latency_tracking() {
        shared.stats.latency_histograms.record(stat, usec);
    }
}

/// Counts `spec` as refused in `INFO commandstats`: for the refusals of a command a script
/// calls (arity, `NOSCRIPT`, a write from a read-only script, `OOM`, ...), which Redis counts
/// as the dispatcher's.
pub(crate) fn count_refusal(shared: &Shared, spec: &CommandSpec, args: &[Bytes]) {
    if let Some(stat) = stat_key(spec, args) {
        shared.stats.commands.record(&stat, Outcome::Rejected);
    }
}

/// Logs a command whose handler took `usec` in the slow log, if that is slow enough (see
/// [`crate::slowlog`]).
fn log_if_slow(shared: &Shared, client: &Client, args: &[Bytes], usec: u64) {
    if !shared.config.slowlog_is_slow(usec) {
        return;
    }
    let addr = client
        .handle
        .addr
        .map(|a| a.to_string())
        .unwrap_or_default();
    let name = client.handle.info.lock().name.clone().unwrap_or_default();
    let caller = crate::slowlog::Caller {
        addr: addr.as_bytes(),
        name: &name,
    };
    let max_len = shared.config.slowlog_max_len();
    let unix_ms = shared.clock.now_ms();
    shared
        .stats
        .slowlog
        .push(args, usec, unix_ms, caller, max_len);
}

/// [`execute_spec`] but for the error statistics.
async fn run_command(
    shared: &Arc<Shared>,
    client: &mut Client,
    spec: Option<&'static CommandSpec>,
    mut args: Vec<Bytes>,
) -> Frame {
    let Some(spec) = spec else {
        if let Some(m) = client.multi.as_mut() {
            m.errored = true;
        }
        return unknown_command_error(&args);
    };
    if !spec.arity_ok(args.len()) {
        if let Some(m) = client.multi.as_mut() {
            m.errored = true;
        }
        return arity_error(spec.name);
    }
    shared.stats.command_processed();
    // `requirepass`: a client that has not authenticated runs only `AUTH`, `HELLO`, `QUIT`
    // and `RESET` (one flag test while no password is set).
    if !client.authenticated && shared.acl.auth_required() && !spec.has(NO_AUTH) {
        return Frame::error("NOAUTH Authentication required.");
    }
    // ACLs: one atomic load for a user allowed everything (the default user, normally).
    // Redis refuses a command not allowed in `MULTI` before asking the ACLs.
    if !client.user.unrestricted() {
        if let Some(refusal) = acl_refusal(shared, client, spec, &args) {
            return refusal;
        }
    }
    // A script that declared its flags is judged by them (see `CommandSpec::flags_of`).
    let adjusted;
    let spec: &CommandSpec = match spec.for_args(shared, &args) {
        Some(s) => {
            adjusted = s;
            &adjusted
        }
        None => spec,
    };
    // Out of memory: evict, or refuse a command that may grow memory (see `evict`).
    if let Some(oom) = oom::check_command(shared, client, spec).await {
        return oom;
    }
    if spec.has(DENYOOM) {
        // The keyspace keeps its keys as copies of their own, and every other place a write
        // hands a key to (notifications, tracking, WATCH, the expiry index, propagation)
        // copies the bytes it is given: the key arguments need no copy, unless the
        // arguments themselves are kept, by a command that may wait (its wait holds them)
        // or one queued in `MULTI`. Keys found by a function (`keys_of`) are copied too.
        //
        // A handler that copies whatever it stores (`COPIES_ARGS`: `LPUSH`, `ZADD`, `SADD`,
        // `HSET`, ...) needs no copy of any argument, on the same condition.
        let kept = spec.has(BLOCKING) || client.multi.is_some();
        if kept || !spec.has(COPIES_ARGS) {
            let keys = match spec.keys_of.is_none() && !kept {
                true => KeySpan::of(spec, args.len()),
                false => KeySpan::NONE,
            };
            crate::memory::detach_args(&mut args, |i| keys.has(i));
        }
    }
    let now_ms = shared.clock.now_ms();
    client.sync_info(spec.name, now_ms);
    if client.in_resp2_pubsub() && !spec.has(SUBSCRIBED_OK) {
        return Frame::error(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        ));
    }
    if shared.pause.current().is_some() && pausable(client) {
        shared
            .pause
            .wait_while(|mode| mode == PauseMode::All || may_replicate(shared, client, spec))
            .await;
    }
    // A script past its time limit refuses, at once, every command that may not run beside
    // it, as Redis's `processCommand` does: inside `MULTI` that refusal dooms the transaction
    // (a command that was never queued must not leave the rest to run without it). Not the
    // master's stream on a replica: it waits for the script to end, as Redis stops reading
    // its master while a script is busy. A `BUSY` would be lost (the link reads no reply),
    // and with it the master's write.
    let threshold = match client.is_replication_link {
        false => shared.config.busy_reply_threshold(),
        true => Duration::MAX,
    };
    if !spec.has(ALLOW_BUSY) {
        if let Err(busy) = shared.gate.busy_check(threshold) {
            return refuse_in_transaction(shared, client, spec, busy.message());
        }
    }
    if client.multi.is_some() && !spec.has(NO_QUEUE) {
        if spec.has(NO_MULTI) {
            if let Some(m) = client.multi.as_mut() {
                m.errored = true;
            }
            return Frame::error("ERR Command not allowed inside a transaction");
        }
        // Refused now, as Redis refuses it before queueing (a write on a replica, not enough
        // good replicas): the transaction is then discarded at EXEC.
        if let Some(err) = shared.precheck(client, spec) {
            if let Some(m) = client.multi.as_mut() {
                m.errored = true;
            }
            return err;
        }
        if let Some(m) = client.multi.as_mut() {
            m.queue.push(args);
        }
        return Frame::simple("QUEUED");
    }
    if let Some(err) = shared.precheck(client, spec) {
        return err;
    }
    let blocked = if spec.has(ALLOW_BUSY) {
        run_handler(shared, client, spec, &args, now_ms)
    } else if spec.has(EXCLUSIVE) || (spec.has(MULTI_KEY) && args.len() > 2) {
        // Writes of one key only share the gate, replicas attached or not: run_handler holds
        // the stream-order lock from the change to its feed, so the stream carries them in the
        // order the keyspace saw them.
        let guard = match shared.gate.exclusive(threshold).await {
            Ok(g) => g,
            Err(busy) => return refuse_in_transaction(shared, client, spec, busy.message()),
        };
        if killed_while_waiting(client) {
            return Frame::error("ERR connection killed");
        }
        let r = run_handler(shared, client, spec, &args, now_ms);
        drop(guard);
        r
    } else {
        let guard = match shared.gate.shared(threshold).await {
            Ok(g) => g,
            Err(busy) => return Frame::error(busy.message()),
        };
        if killed_while_waiting(client) {
            return Frame::error("ERR connection killed");
        }
        let r = run_handler(shared, client, spec, &args, now_ms);
        drop(guard);
        r
    };
    let reply = match blocked {
        Ok(frame) => frame,
        Err(fut) => {
            // A blocking command (not `DEBUG SLEEP`) counts in `INFO`'s `blocked_clients`
            // while it waits, until it answers or its connection drops the wait.
            let _counted = spec
                .has(BLOCKING)
                .then(|| BlockedCount::start(&shared.stats.blocked_clients));
            let started = quanta::Instant::now();
            let reply = fut.await;
            // A command that waits as its work, not for a key or a replica (`DEBUG SLEEP`,
            // which holds the whole server in Redis), ran for as long as it waited.
            if !spec.has(BLOCKING) {
                let waited = started.elapsed().as_micros() as u64;
                client.handler_usec = client.handler_usec.map(|u| u + waited);
            }
            reply
        }
    };
    if spec.has(SUBSCRIBED_OK) {
        // (Un)subscribing changes what `CLIENT LIST` and `CLIENT KILL TYPE pubsub` see now,
        // not at this client's next command.
        client.sync_info(spec.name, now_ms);
    }
    // `EXEC` is not logged (`skip_slowlog`): the commands it ran were, one by one.
    if let Some(usec) = client.handler_usec.filter(|_| !spec.has(SKIP_SLOWLOG)) {
        log_if_slow(shared, client, &args, usec);
    }
    reply
}

/// The fixed key positions of a command (`first_key`, `last_key`, `step`), as a test of one
/// position without the list [`CommandSpec::key_positions`] allocates.
#[derive(Clone, Copy)]
struct KeySpan {
    first: usize,
    last: usize,
    step: usize,
}

impl KeySpan {
    /// No position is a key.
    const NONE: KeySpan = KeySpan {
        first: usize::MAX,
        last: 0,
        step: 1,
    };

    /// The key positions of `spec` for a call with `argc` arguments.
    fn of(spec: &CommandSpec, argc: usize) -> KeySpan {
        if spec.first_key <= 0 {
            return KeySpan::NONE;
        }
        let last = if spec.last_key < 0 {
            argc as i64 + spec.last_key as i64
        } else {
            spec.last_key as i64
        };
        KeySpan {
            first: spec.first_key as usize,
            last: last.max(0) as usize,
            step: spec.step.max(1) as usize,
        }
    }

    /// Whether argument `i` is a key.
    fn has(&self, i: usize) -> bool {
        i >= self.first && i <= self.last && (i - self.first).is_multiple_of(self.step)
    }
}

/// Refuses `spec` with `error` (a `BUSY`). Inside `MULTI`, the transaction is doomed, and a
/// refused `EXEC` ends it: Redis answers `EXECABORT Transaction discarded because of: <error>`
/// and the client leaves the transaction, its `WATCH`es dropped.
fn refuse_in_transaction(
    shared: &Shared,
    client: &mut Client,
    spec: &CommandSpec,
    error: &str,
) -> Frame {
    let Some(m) = client.multi.as_mut() else {
        return Frame::error(error);
    };
    if spec.name != "exec" {
        m.errored = true;
        return Frame::error(error);
    }
    client.multi = None;
    client.unwatch_all(&shared.keyspace);
    Frame::error(format!(
        "EXECABORT Transaction discarded because of: {error}"
    ))
}

/// One client counted as blocked, for as long as this lives.
struct BlockedCount<'a>(&'a std::sync::atomic::AtomicU64);

impl<'a> BlockedCount<'a> {
    fn start(counter: &'a std::sync::atomic::AtomicU64) -> Self {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        BlockedCount(counter)
    }
}

impl Drop for BlockedCount<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether a connection was killed (by `CLIENT KILL` or a restart, say) while its command
/// waited for the gate: then it runs nothing more, as its connection is closing. In-process
/// clients and the link to our master have no connection to close and always run.
fn killed_while_waiting(client: &Client) -> bool {
    client.handle.addr.is_some() && client.handle.is_killed()
}

fn run_handler(
    shared: &Arc<Shared>,
    client: &mut Client,
    spec: &CommandSpec,
    args: &[Bytes],
    now_ms: u64,
) -> Result<Frame, Blocked> {
    // A write and its feed are one step for the stream, even next to other writes sharing
    // the gate (no cost when nothing is fed).
    let _order = match spec.has(WRITE) || spec.has(MAY_RECORD) {
        true => shared.order_guard(),
        false => None,
    };
    // A command about to walk a large collection or the keyspace first moves this worker's
    // other tasks to another thread (one flag test for every other command).
    crate::walk::hand_off_if_heavy(shared, client.db, spec, args);
    // Client-side caching (see `crate::tracking`): which client's command runs on this thread
    // (a thread-local write: no atomic, no lock).
    let running = Tracking::running(client.handle.id);
    let mut ctx = Ctx::at(shared, client, now_ms);
    let started = quanta::Instant::now();
    let frame = (spec.handler)(&mut ctx, args);
    let usec = started.elapsed().as_micros() as u64;
    let dirty = ctx.dirty;
    let blocked = ctx.blocked.take();
    let rewritten = ctx.rewritten.take();
    client.handler_usec = Some(usec);
    shared.propagate_lazy_expired();
    if dirty > 0 {
        client.repl_offset = match rewritten {
            Some(cmds) => shared.after_write_as(client.db, &cmds, dirty),
            None => shared.after_write(client.db, spec.name, args, dirty),
        };
    }
    if client.tracking.is_some() {
        remember_reads(shared, client, spec, args);
    }
    // Invalidations of this command's own changes, and the broadcasts it gathered (nothing to
    // do, at the cost of a thread-local read, unless the tracking table found some).
    let own = shared.tracking.after_command(client.handle.id);
    client.after_reply.extend(own);
    drop(running);
    // `CLIENT CACHING` applies to the next command only (a transaction counts as one).
    if client.caching && client.multi.is_none() && spec.name != "client" {
        client.caching = false;
    }
    match blocked {
        Some(fut) => Err(fut),
        None => Ok(frame),
    }
}

/// Runs an already looked-up command inside a script or a transaction.
pub(crate) fn call_spec(ctx: &mut Ctx<'_>, spec: &CommandSpec, args: &[Bytes]) -> Frame {
    let before = ctx.dirty;
    crate::walk::hand_off_if_heavy(ctx.shared, ctx.client.db, spec, args);
    ctx.rewritten = None;
    let started = quanta::Instant::now();
    let frame = (spec.handler)(ctx, args);
    let usec = started.elapsed().as_micros() as u64;
    // Counted as a call of its own; logged when slow, unless a script ran it (the script's
    // own command is what its client sent).
    if let Some(stat) = stat_key(spec, args) {
        count_command(ctx.shared, spec, &stat, Some(usec), &frame);
    }
    if !ctx.in_script && !spec.has(SKIP_SLOWLOG) {
        log_if_slow(ctx.shared, ctx.client, args, usec);
    }
    if ctx.client.tracking.is_some() {
        remember_reads(ctx.shared, ctx.client, spec, args);
    }
    // A blocking command inside MULTI or a script never blocks: drop any future it left.
    ctx.blocked = None;
    let rewritten = ctx.rewritten.take();
    let dirty = ctx.dirty - before;
    ctx.shared.propagate_lazy_expired();
    if dirty > 0 {
        ctx.client.repl_offset = match rewritten {
            Some(cmds) => ctx.shared.after_write_as(ctx.client.db, &cmds, dirty),
            None => ctx
                .shared
                .after_write(ctx.client.db, spec.name, args, dirty),
        };
    }
    frame
}

/// `CLIENT TRACKING` in default mode: remembers the keys a read-only command read, so that
/// their next change tells the client (Redis's `trackingRememberKeys`). `OPTIN` remembers only
/// after `CLIENT CACHING YES`, `OPTOUT` always but after `CLIENT CACHING NO`. A read-only
/// script's own keys are not remembered, only those of the commands it runs.
fn remember_reads(shared: &Shared, client: &Client, spec: &CommandSpec, args: &[Bytes]) {
    let Some(mode) = client.tracking else {
        return;
    };
    if mode.bcast
        || !spec.has(READONLY)
        || matches!(spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro")
        || (mode.optin && !client.caching)
        || (mode.optout && client.caching)
    {
        return;
    }
    let positions = spec.keys_in(args);
    if !positions.is_empty() {
        shared
            .tracking
            .remember(client.handle.id, positions.iter().map(|&i| &args[i]));
    }
}

/// Whether `CLIENT PAUSE` holds this client's commands: the links of replication (our master,
/// our replicas) are never paused, as in Redis.
fn pausable(client: &Client) -> bool {
    !client.is_replication_link
        && client.handle.info.lock().role != crate::client::ClientRole::Replica
}

/// Whether a command is one a `CLIENT PAUSE WRITE` holds: it may write, or may send something
/// down the replication stream ([`MAY_REPLICATE`]: scripts, `PUBLISH`), or it is the `EXEC`
/// of a transaction that queued one of those.
fn may_replicate(shared: &Shared, client: &Client, spec: &CommandSpec) -> bool {
    let one = |spec: &CommandSpec| spec.has(WRITE) || spec.has(MAY_REPLICATE);
    if one(spec) {
        return true;
    }
    // A queued command's flags may depend on its arguments (`FUNCTION LOAD` writes).
    let queued = |args: &Vec<Bytes>| {
        lookup(&args[0]).is_some_and(|s| one(&s.for_args(shared, args).unwrap_or(*s)))
    };
    spec.name == "exec"
        && client
            .multi
            .as_ref()
            .is_some_and(|m| m.queue.iter().any(queued))
}

/// The dispatcher's ACL check for a user not allowed everything: `-NOPERM`, which dooms a
/// transaction being queued. Redis refuses a command not allowed in `MULTI` before asking
/// the ACLs, so that one is left to its own refusal.
#[cold]
fn acl_refusal(
    shared: &Shared,
    client: &mut Client,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Option<Frame> {
    if client.multi.is_some() && spec.has(NO_MULTI) {
        return None;
    }
    let context = match client.multi {
        Some(_) => AclContext::Multi,
        None => AclContext::Toplevel,
    };
    let (denied, name) = acl_check(shared, client, args, context).err()?;
    if let Some(m) = client.multi.as_mut() {
        m.errored = true;
    }
    Some(Frame::error(denied.noperm(name)))
}

/// Checks `args` against the client's ACL user (Redis's `ACLCheckAllPerm`), logging a
/// refusal in the ACL log: `Err` carries the refusal and the command's full name
/// (`config|get`). A command Redis would not find (an unknown subcommand, a subcommand of the
/// wrong arity) is left to its own error, which Redis answers before the ACLs; a command
/// Redis's table does not have (latchkey's own) runs only for a user allowed every command.
pub(crate) fn acl_check(
    shared: &Shared,
    client: &Client,
    args: &[Bytes],
    context: AclContext,
) -> Result<(), (Denied, &'static str)> {
    let user = &client.user;
    if user.unrestricted() {
        return Ok(());
    }
    let id = match acl_commands::of_args(args) {
        Some(id) => id,
        None if acl_commands::lookup(&args[0]).is_some() => return Ok(()),
        None if user.allows_every_command() => return Ok(()),
        None => {
            let name = lookup(&args[0]).map_or("", |s| s.name);
            acl_log(
                shared,
                client,
                AclReason::Command,
                context,
                Bytes::copy_from_slice(name.as_bytes()),
                None,
            );
            return Err((Denied::Command, name));
        }
    };
    let name = acl_commands::all()[id].name;
    user.check(id, args).map_err(|denied| {
        let (reason, object) = match denied {
            Denied::Command => (AclReason::Command, Bytes::from_static(name.as_bytes())),
            Denied::Key(i) => (AclReason::Key, args[i].clone()),
            Denied::Channel(i) => (AclReason::Channel, args[i].clone()),
        };
        acl_log(shared, client, reason, context, object, None);
        (denied, name)
    })
}

/// Adds an event to the ACL log (Redis's `addACLLogEntry`): `username` is the client's user
/// unless given (a failed `AUTH` logs the name it tried).
pub(crate) fn acl_log(
    shared: &Shared,
    client: &Client,
    reason: AclReason,
    context: AclContext,
    object: Bytes,
    username: Option<Bytes>,
) {
    let entry = AclLogEntry {
        count: 1,
        reason,
        context,
        object,
        username: username.unwrap_or_else(|| client.user.name.clone()),
        ctime_ms: shared.clock.now_ms(),
        client_info: client_info(shared, client),
    };
    let max_len = shared.config.acllog_max_len();
    shared.acl.log.lock().add(entry, max_len);
}

/// The client's `CLIENT INFO` line, as the ACL log keeps it.
fn client_info(shared: &Shared, client: &Client) -> String {
    let h = &client.handle;
    let info = h.info.lock().clone();
    let addr = h
        .addr
        .map_or_else(|| "local".to_string(), |a| a.to_string());
    let laddr = h
        .laddr
        .map_or_else(|| "local".to_string(), |a| a.to_string());
    let last = h
        .last_interaction_ms
        .load(std::sync::atomic::Ordering::Relaxed);
    let idle = shared.clock.now_ms().saturating_sub(last.max(1)) / 1000;
    let idle = if last == 0 { 0 } else { idle };
    let flags = if info.sub + info.psub + info.ssub > 0 {
        "P"
    } else if client.multi.is_some() {
        "x"
    } else {
        "N"
    };
    let name = info
        .name
        .as_ref()
        .map_or(String::new(), |n| String::from_utf8_lossy(n).into_owned());
    format!(
        "id={} addr={addr} laddr={laddr} fd=-1 name={name} age={} idle={idle} flags={flags} db={} sub={} psub={} ssub={} multi={} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user={} redir=-1 resp={}",
        h.id,
        h.created.elapsed().as_secs(),
        info.db,
        info.sub,
        info.psub,
        info.ssub,
        info.multi,
        if info.last_cmd.is_empty() { "NULL" } else { &info.last_cmd },
        String::from_utf8_lossy(&client.user.name),
        info.resp,
    )
}
