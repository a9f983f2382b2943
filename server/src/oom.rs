//! The `maxmemory` checks a command passes before it runs: evict what the policy allows, or
//! refuse a command that may grow memory with Redis's OOM error (see [`crate::evict`]).

use std::sync::Arc;

use crate::client::Client;
use crate::command::{CommandSpec, Ctx, DENYOOM};
use crate::config::Policy;
use crate::evict::{perform_evictions, used_memory, Outcome, OOM_ERROR};
use crate::frame::Frame;
use crate::state::Shared;

/// Whether the memory check applies to this client at all: not on a replica (it follows its
/// master) and not for the link from the master or a loading AOF.
fn exempt(shared: &Shared, client: &Client) -> bool {
    shared.is_replica() || client.is_replication_link
}

/// The check Redis makes before running a command while `maxmemory` is set: evicts what the
/// policy allows, then answers Redis's OOM error to a command that may not run out of memory.
/// Inside `MULTI` the refusal also dooms the transaction, as in Redis.
pub(crate) async fn check_command(
    shared: &Arc<Shared>,
    client: &mut Client,
    spec: &CommandSpec,
) -> Option<Frame> {
    let limits = &shared.config.limits;
    let max = limits.maxmemory() as usize;
    if max == 0 || exempt(shared, client) {
        return None;
    }
    let used = used_memory(shared);
    shared.evictor.note_peak(used);
    if used <= max {
        return None;
    }
    let outcome = if limits.policy() == Policy::NoEviction {
        Outcome::Fail
    } else {
        // Wait for a running script or transaction: eviction must not change keys under it.
        // A script that stays busy means no eviction now; the command then gets `BUSY`.
        match shared
            .gate
            .shared(shared.config.busy_reply_threshold())
            .await
        {
            Ok(guard) => {
                let r = perform_evictions(shared);
                drop(guard);
                r
            }
            Err(_) => return None,
        }
    };
    if outcome != Outcome::Fail {
        return None;
    }
    let in_multi = client.multi.is_some();
    let refuse = spec.has(DENYOOM)
        || (in_multi && !matches!(spec.name, "exec" | "discard" | "quit" | "reset"))
        || (spec.name == "exec" && queued_denyoom(client));
    if !refuse {
        return None;
    }
    if let Some(m) = client.multi.as_mut() {
        if spec.name != "exec" {
            m.errored = true;
        }
    }
    Some(Frame::error(OOM_ERROR))
}

/// Whether a transaction being executed holds a command that may grow memory.
fn queued_denyoom(client: &Client) -> bool {
    client.multi.as_ref().is_some_and(|m| {
        m.queue
            .iter()
            .any(|args| crate::command::lookup(&args[0]).is_some_and(|s| s.has(DENYOOM)))
    })
}

/// The check of a command called by a script (`redis.call`): Redis refuses a `denyoom` command
/// while memory is over the limit, unless the script already wrote (it must not stop half-way
/// through its writes). `wrote` says whether it did.
pub(crate) fn check_script_call(ctx: &Ctx<'_>, spec: &CommandSpec, wrote: bool) -> Option<String> {
    let max = ctx.shared.config.limits.maxmemory() as usize;
    if max == 0 || wrote || !spec.has(DENYOOM) || exempt(ctx.shared, ctx.client) {
        return None;
    }
    (used_memory(ctx.shared) > max).then(|| OOM_ERROR.to_string())
}

/// The check of one command that is about to grow memory by `extra` bytes in a single step
/// (`SETBIT` far past a string's end, `BITFIELD` at a large offset, the transient table of
/// `LCS`). Redis checks `maxmemory` only before a command runs, so a command let in just under
/// the limit may then allocate up to `proto-max-bulk-len` (512 MB) at once; an embedded server
/// shares its process with the application, so latchkey also refuses, with Redis's OOM error,
/// a single step that would by itself take used memory past `maxmemory`. Without
/// `maxmemory`, on a replica and for the master's link nothing changes.
pub(crate) fn check_growth(ctx: &Ctx<'_>, extra: usize) -> Result<(), Frame> {
    let max = ctx.shared.config.limits.maxmemory() as usize;
    if max == 0 || extra == 0 || exempt(ctx.shared, ctx.client) {
        return Ok(());
    }
    if used_memory(ctx.shared).saturating_add(extra) > max {
        return Err(Frame::error(OOM_ERROR));
    }
    Ok(())
}
