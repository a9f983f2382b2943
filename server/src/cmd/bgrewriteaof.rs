//! `BGREWRITEAOF`: rewrite the append-only file in the background into the shortest file
//! that rebuilds the current keyspace, and swap it in without losing a write.
//!
//! How a rewrite goes, where Redis forks a child:
//!
//! 1. **The snapshot.** While no other command runs (the execution gate held exclusively, as
//!    `BGSAVE` takes its snapshot) and no write is between its change and its record (the
//!    stream-order lock), the keyspace is written out as commands ([`crate::aof_rewrite`]) and
//!    the open AOF starts a *rewrite log* ([`crate::aof::Aof::begin_rewrite`]): from this
//!    moment every write goes to the old file, as always, and to the log.
//! 2. **The new file**, on a thread of its own: the snapshot goes to
//!    `temp-rewriteaof-bg-<pid>.aof` beside the AOF, then what the log gathered meanwhile,
//!    drained a few times while writes keep coming, then an fsync.
//! 3. **The swap**, under the AOF's lock so that no write slips between: the last of the log
//!    is appended, the file fsynced, renamed over the AOF (and the folder fsynced); writes go
//!    to the new file from then on ([`crate::aof::Aof::complete_rewrite`]).
//!
//! A crash at any moment leaves a loadable AOF that holds every acknowledged write: the old
//! file until the rename (it kept receiving every write), the new one after it. A restart or a
//! shutdown gives a running rewrite up: its thread stops and deletes its temporary file.
//!
//! The log is bounded: past the `slave` hard limit of `client-output-buffer-limit` (the bound
//! a replica's stream of writes gets; 256 MB by default, and that when the limit is 0), the
//! rewrite is given up and reported failed (`aof_last_bgrewrite_status:err`) rather than let
//! memory grow while the thread falls behind; the old file still holds everything. What the
//! log holds is reported as `MEMORY STATS`' `aof.buffer`, and counts in `used_memory`.
//!
//! With `appendonly no`, Redis 7.0 still rewrites (into its base file, which a later start
//! with the AOF on loads); here the snapshot alone is written to `dir`/`appendfilename`, the
//! file `--appendonly yes` loads at start. There is no log then: no write is recorded.
//!
//! Only one background job runs at a time ([`crate::state::Background`]): asked for while a
//! `BGSAVE` runs, or inside `EXEC`, the rewrite is *scheduled* and the persistence cron
//! ([`super::save_points`]) starts it once it may. The cron also starts the automatic
//! rewrite of Redis's rule ([`auto_rewrite_due`]). `rdb-key-save-delay` (a testing knob of
//! Redis's) makes the thread pause between keys, so that a test can write while a rewrite runs.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::{spec, CommandSpec, Ctx, ADMIN, EXCLUSIVE, NOSCRIPT, NO_ASYNC_LOADING};
use crate::aof::LogLost;
use crate::aof_rewrite::Dataset;
use crate::config::ClientClass;
use crate::frame::Frame;
use crate::state::{Job, Shared};

/// `BGREWRITEAOF`.
pub(crate) const COMMANDS: &[CommandSpec] = &[spec(
    "bgrewriteaof",
    1,
    ADMIN | NOSCRIPT | NO_ASYNC_LOADING | EXCLUSIVE,
    0,
    0,
    0,
    bgrewriteaof,
)];

/// The log's bound when `client-output-buffer-limit` sets no hard limit for replicas.
const DEFAULT_LOG_LIMIT: u64 = 256 << 20;

/// Once the log holds less than this, the thread stops draining it and swaps the file (the
/// rest is written under the AOF's lock, which holds writes up while it lasts).
const SMALL_LOG: usize = 64 << 10;

/// The most times the thread drains the log before the swap, so that a steady stream of
/// writes cannot keep a rewrite from ending.
const MAX_DRAINS: usize = 16;

/// After this many rewrites failed in a row, the automatic and the scheduled rewrites wait
/// before trying again (Redis's `AOF_REWRITE_LIMITE_THRESHOLD`) ...
const LIMIT_AFTER_FAILURES: u64 = 3;
/// ... 1 minute, then 2, 4, ..., up to an hour (`AOF_REWRITE_LIMITE_MAX_MINUTES`).
const LIMIT_MAX_MINUTES: u64 = 60;

fn bgrewriteaof(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    let shared = ctx.shared;
    match shared.background.running() {
        Some(Job::AofRewrite) => {
            return Frame::error("ERR Background append only file rewriting already in progress")
        }
        Some(_) => return schedule(shared),
        None if ctx.in_exec => return schedule(shared),
        None => {}
    }
    if shared.background.try_start(Job::AofRewrite).is_err() {
        return schedule(shared);
    }
    match start(shared) {
        Ok(()) => Frame::simple("Background append only file rewriting started"),
        Err(e) => {
            tracing::warn!("Can't rewrite append only file in background: {e}");
            Frame::error(
                "ERR Can't execute an AOF background rewriting. Please check the server logs for more information.",
            )
        }
    }
}

/// Leaves the rewrite for the persistence cron, as Redis does while another job runs or
/// inside `EXEC`. Asked for by hand, it may start at once even after failures in a row.
fn schedule(shared: &Shared) -> Frame {
    let status = &shared.aof_rewrite;
    status.scheduled.store(true, Ordering::Release);
    status.consecutive_failures.store(0, Ordering::Relaxed);
    shared.background.kick.notify_one();
    Frame::simple("Background append only file rewriting scheduled")
}

/// Starts a rewrite: takes the snapshot and starts the log now, and the thread that writes
/// the new file. The caller holds the execution gate exclusively and has claimed the
/// background slot for [`Job::AofRewrite`]; on an error the slot is freed and the rewrite
/// counted as failed.
pub(crate) fn start(shared: &Arc<Shared>) -> std::io::Result<()> {
    let now_s = shared.clock.now_ms() / 1000;
    let delay = crate::rdb::file::key_save_delay(shared);
    let limit = log_limit(shared);
    let (job, data) = {
        // No write is between its change and its record while this is held: each is in the
        // snapshot, or in the log, never in both nor in neither.
        let _order = shared.replication.lock_order();
        let aof = shared.aof.read();
        let job = shared.aof_rewrite.begin(now_s);
        if let Some(aof) = aof.as_ref() {
            aof.begin_rewrite(job, limit);
        }
        (job, crate::aof_rewrite::dataset(shared, delay != 0))
    };
    tracing::info!(
        "Background append only file rewriting started ({} bytes of commands)",
        data.bytes.len()
    );
    let on_thread = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("latchkey-aofrw".into())
        .spawn(move || run(on_thread, job, now_s, data, delay));
    if let Err(e) = spawned {
        end(shared, job, now_s, false);
        return Err(e);
    }
    Ok(())
}

/// Starts a rewrite as soon as no other command runs, if the background slot is free: a
/// scheduled rewrite, or the automatic one.
pub(crate) async fn start_when_alone(shared: &Arc<Shared>) {
    if shared.background.try_start(Job::AofRewrite).is_err() {
        return;
    }
    let _gate = loop {
        match shared.gate.exclusive(Duration::MAX).await {
            Ok(g) => break g,
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    };
    if let Err(e) = start(shared) {
        tracing::warn!("Can't rewrite append only file in background: {e}");
    }
}

/// Whether the automatic rewrite is due, by Redis's rule: the AOF is on, larger than
/// `auto-aof-rewrite-min-size`, and has grown by at least `auto-aof-rewrite-percentage` percent
/// since the last rewrite (or since it was opened; 0 turns the rule off); and rewrites are not
/// held back after failing in a row.
pub(crate) fn auto_rewrite_due(shared: &Shared) -> bool {
    let percentage = config_int(shared, "auto-aof-rewrite-percentage");
    if percentage <= 0 {
        return false;
    }
    let min_size = config_int(shared, "auto-aof-rewrite-min-size");
    let (size, base) = match shared.aof.read().as_ref() {
        // An AOF waiting for its first rewrite has one running or scheduled already.
        Some(aof) if !aof.is_waiting() => (aof.size() as i128, aof.base_size().max(1) as i128),
        _ => return false,
    };
    if size <= min_size as i128 {
        return false;
    }
    let growth = size * 100 / base - 100;
    if growth < percentage as i128 || limited(shared) {
        return false;
    }
    tracing::info!("Starting automatic rewriting of AOF on {growth}% growth");
    true
}

/// Whether rewrites are held back after failing [`LIMIT_AFTER_FAILURES`] times in a row, as
/// Redis's `aofRewriteLimited`: each time the limit is reached the wait doubles, from a
/// minute up to an hour; a success ends it. The cron asks before it starts a scheduled or an
/// automatic rewrite (`BGREWRITEAOF` by hand starts one whatever it says).
pub(crate) fn limited(shared: &Shared) -> bool {
    let status = &shared.aof_rewrite;
    let mut limit = status.limit.lock();
    if status.consecutive_failures.load(Ordering::Relaxed) < LIMIT_AFTER_FAILURES {
        *limit = Default::default();
        return false;
    }
    let now_s = shared.clock.now_ms() / 1000;
    if limit.next_s != 0 {
        if now_s < limit.next_s {
            return true;
        }
        limit.next_s = 0;
        return false;
    }
    limit.minutes = (limit.minutes * 2).clamp(1, LIMIT_MAX_MINUTES);
    limit.next_s = now_s + limit.minutes * 60;
    tracing::warn!(
        "Background AOF rewrite has repeatedly failed and triggered the limit, will retry in {} minutes",
        limit.minutes
    );
    true
}

/// Gives up the running rewrite, if any, for a shutdown: its log is dropped and its
/// temporary file deleted, as Redis kills its rewriting child and removes the file.
pub(crate) fn give_up(shared: &Shared) {
    if shared.background.running() != Some(Job::AofRewrite) {
        return;
    }
    tracing::warn!("There is a child rewriting the AOF. Killing it!");
    shared.aof_rewrite.give_up();
    let _ = std::fs::remove_file(temp_path(shared));
}

/// The thread of rewrite `job`, started at `started_s`: writes the new file and swaps it in.
fn run(shared: Arc<Shared>, job: u64, started_s: u64, data: Dataset, delay: i64) {
    let tmp = temp_path(&shared);
    let result = write_and_swap(&shared, job, &tmp, data, delay);
    if let Err(e) = &result {
        let _ = std::fs::remove_file(&tmp);
        if let Some(aof) = shared.aof.read().as_ref() {
            aof.end_rewrite(job);
        }
        if shared.aof_rewrite.is_current(job) {
            tracing::warn!("Background AOF rewrite terminated with error: {e}");
        }
    } else {
        tracing::info!("Background AOF rewrite finished successfully");
    }
    end(&shared, job, started_s, result.is_ok());
}

/// Records how rewrite `job` ended (unless it was given up: a restart starts the figures
/// again) and frees the background slot. A failed rewrite that an AOF turned on at run time
/// waited for is scheduled again, as Redis does while its AOF is `AOF_WAIT_REWRITE`.
fn end(shared: &Shared, job: u64, started_s: u64, ok: bool) {
    let status = &shared.aof_rewrite;
    if status.is_current(job) {
        status.ended(started_s, shared.clock.now_ms() / 1000, ok);
        if ok {
            *status.limit.lock() = Default::default();
        } else if shared.aof.read().as_ref().is_some_and(|a| a.is_waiting()) {
            status.scheduled.store(true, Ordering::Release);
        }
    }
    shared.background.finish(Job::AofRewrite);
}

/// Steps 2 and 3 of the module's description.
fn write_and_swap(
    shared: &Shared,
    job: u64,
    tmp_path: &Path,
    data: Dataset,
    delay: i64,
) -> std::io::Result<()> {
    let gave_up = || std::io::Error::other("the rewrite was given up (a restart or a shutdown)");
    let mut file = File::create(tmp_path)?;
    crate::rdb::file::write_paced(&mut file, &data.bytes, &data.key_ends, delay, || {
        shared.aof_rewrite.is_current(job)
    })?;
    drop(data);
    // Catch up with the writes made meanwhile, so that the swap has little left to write.
    for _ in 0..MAX_DRAINS {
        if !shared.aof_rewrite.is_current(job) {
            return Err(gave_up());
        }
        let taken = match shared.aof.read().as_ref() {
            Some(aof) => aof.take_rewrite_log(job),
            None => break,
        };
        let bytes = taken.map_err(|lost| match lost {
            LogLost::Gone => gave_up(),
            LogLost::Overflowed => std::io::Error::other(
                "the writes made during the rewrite passed the bound of its buffer",
            ),
        })?;
        file.write_all(&bytes)?;
        if bytes.len() < SMALL_LOG {
            break;
        }
    }
    file.sync_all()?;
    // The swap: under the AOF slot's read lock, so that a restart (which gives the rewrite
    // up, then closes the AOF) waits for it or comes first and is seen.
    let aof = shared.aof.read();
    if !shared.aof_rewrite.is_current(job) {
        return Err(gave_up());
    }
    match aof.as_ref() {
        Some(aof) => {
            let len = aof.complete_rewrite(job, file, tmp_path)?;
            tracing::info!("Successfully renamed the temporary AOF ({len} bytes) into place");
        }
        None => {
            // `appendonly no`: the snapshot alone becomes the file a start with the AOF on
            // loads.
            let target = crate::aof::path(&shared.config);
            std::fs::rename(tmp_path, &target)?;
            crate::aof::sync_parent(&target);
        }
    }
    Ok(())
}

/// The new file while it is written: `temp-rewriteaof-bg-<pid>.aof` beside the AOF.
fn temp_path(shared: &Shared) -> PathBuf {
    let target = crate::aof::path(&shared.config);
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    dir.join(format!("temp-rewriteaof-bg-{}.aof", std::process::id()))
}

/// The log's bound: the `slave` hard limit of `client-output-buffer-limit`, or
/// [`DEFAULT_LOG_LIMIT`] when that is 0 (no limit).
fn log_limit(shared: &Shared) -> usize {
    let hard = shared.config.limits.output_limit(ClientClass::Replica).hard;
    let limit = if hard == 0 { DEFAULT_LOG_LIMIT } else { hard };
    usize::try_from(limit).unwrap_or(usize::MAX)
}

/// An integer parameter (0 when unset or not a number; the configuration validated it).
fn config_int(shared: &Shared, name: &str) -> i64 {
    shared
        .config
        .get(name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
