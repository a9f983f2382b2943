//! `CONFIG SET appendonly yes|no`: the append-only file turned on and off while the server
//! runs, as Redis 7.0 does it (`startAppendOnly`, `stopAppendOnly` in its `aof.c`).
//!
//! **On.** The keyspace is in no file yet, and appending the next writes to an old or empty
//! file would make a file that rebuilds only part of it. So turning the AOF on starts a
//! rewrite ([`super::bgrewriteaof`]): its snapshot is the keyspace now, and the writes made
//! while it runs wait in its log. Until it finishes the AOF is on but *waiting*
//! ([`crate::aof::Aof::waiting`], Redis's `AOF_WAIT_REWRITE`): `INFO` says `aof_enabled:1`
//! and `aof_rewrite_in_progress:1`, and the file at `dir`/`appendfilename` is left as it was.
//! When the rewrite is done, its file (snapshot, then log) is renamed there and every later
//! write is appended to it, as always. When a `BGSAVE` runs, or inside `EXEC`, the rewrite is
//! scheduled instead and starts once it may, as in Redis; a rewrite that fails while the AOF
//! waits is scheduled again (after three failures in a row the cron waits, as Redis's
//! `aofRewriteLimited` does). A `BGREWRITEAOF` already running (the AOF was off) is given up
//! and a new one scheduled: its snapshot started no log, so it cannot become the AOF.
//!
//! **Off.** A running rewrite is given up, as Redis kills its child, and a scheduled one
//! forgotten; the file is fsynced and closed. From then on no write reaches it.
//!
//! `CONFIG SET appendonly` runs with the keyspace to itself (see `config_flags` in
//! [`super::server`]): the rewrite's snapshot must be one moment's keyspace, and a write must
//! not fall between the switch and the snapshot.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::aof::{Aof, Fsync};
use crate::durability::Durability;
use crate::state::{Job, Shared};

/// Redis's words when the AOF could not be turned on (the reason is in the log).
pub(crate) const CANNOT_START: &str = "Unable to turn on AOF. Check server logs.";

/// Turns the AOF on (`appendonly` was `no`): it waits for a rewrite, started now or
/// scheduled. `in_exec`: the command runs inside `EXEC` (the rewrite is then scheduled). The
/// caller holds the execution gate exclusively. `Err` when the rewrite cannot start: the AOF
/// stays off.
pub(crate) fn turn_on(shared: &Arc<Shared>, in_exec: bool) -> Result<(), &'static str> {
    if shared.aof.is_open() {
        return Ok(());
    }
    let running = shared.background.running();
    if running == Some(Job::AofRewrite) {
        // Its snapshot started no log (the AOF was off): it cannot become the AOF.
        tracing::warn!("AOF was enabled but there is already an AOF rewriting in background. Stopping background AOF and starting a rewrite now.");
        shared.aof_rewrite.give_up();
    }
    let path = crate::aof::path(&shared.config);
    let fsync = Fsync::parse(&shared.config.get("appendfsync").unwrap_or_default());
    let now = shared.clock.now_ms();
    // What is on the disk at `path` now (a file an earlier AOF left, fsynced when it was
    // closed, or one a rewrite renamed there, fsynced before): durable, as at a start.
    let len = std::fs::metadata(&path).map_or(0, |m| m.len());
    let durability = Arc::new(Durability::new(&path, len, now));
    *shared.aof_durability.lock() = Some(durability.clone());
    let sizes = shared.aof.closed_sizes();
    shared.aof.set(Some(Aof::waiting(
        path,
        fsync,
        shared.clock.clone(),
        durability,
        sizes,
    )));
    crate::restart::start_flusher(shared);
    if running.is_some() || in_exec || shared.background.try_start(Job::AofRewrite).is_err() {
        let why = if in_exec {
            "during a transaction"
        } else {
            "but there is already another background operation"
        };
        tracing::warn!(
            "AOF was enabled {why}. An AOF background was scheduled to start when possible."
        );
        shared.aof_rewrite.scheduled.store(true, Ordering::Release);
        shared.background.kick.notify_one();
        return Ok(());
    }
    if let Err(e) = super::bgrewriteaof::start(shared) {
        tracing::warn!("Redis needs to enable the AOF but can't trigger a background AOF rewrite operation: {e}");
        shared.aof.set(None);
        shared.aof_rewrite.scheduled.store(false, Ordering::Release);
        return Err(CANNOT_START);
    }
    Ok(())
}

/// Turns the AOF off (`appendonly` was `yes`): gives up a running rewrite, forgets a scheduled
/// one, fsyncs and closes the file.
pub(crate) fn turn_off(shared: &Shared) {
    if shared.background.running() == Some(Job::AofRewrite) {
        tracing::info!("Killing running AOF rewrite");
        // Its thread stops at its next step and deletes its temporary file; a swap it is
        // making now finishes first (the slot's lock below waits for it).
        shared.aof_rewrite.give_up();
    }
    shared.aof_rewrite.scheduled.store(false, Ordering::Release);
    let Some(aof) = shared.aof.take() else {
        return;
    };
    if let Err(e) = aof.fsync_now() {
        tracing::warn!("Fail to fsync the AOF file: {e}");
    }
}
