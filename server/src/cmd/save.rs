//! `SAVE`, `BGSAVE` and `LASTSAVE`: a snapshot of every database written to
//! `dir`/`dbfilename` in Redis's RDB format (see [`crate::rdb::file`]), and when the last one
//! was written.
//!
//! Both take the snapshot while no other command runs (they hold the execution gate
//! exclusively), so the file is one moment's keyspace. `SAVE` then writes it before it
//! answers, as Redis's `SAVE` blocks; `BGSAVE` answers at once and writes it on a thread of its
//! own, where Redis forks a child. Copying the keyspace takes the pause a fork's page-table
//! copy takes in Redis, in proportion to the data.
//!
//! One background job runs at a time, as Redis runs one child ([`crate::state::Background`]):
//! during an AOF rewrite a `BGSAVE` is refused, unless `SCHEDULE` (or `EXEC`) asks it to wait,
//! and the persistence cron ([`super::save_points`]) starts it once the rewrite is done.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::util::{is, syntax_error};
use super::{
    spec, CommandSpec, Ctx, ADMIN, EXCLUSIVE, FAST, LOADING, NOSCRIPT, NO_ASYNC_LOADING, NO_MULTI,
    STALE,
};
use crate::frame::Frame;
use crate::rdb::file;
use crate::state::Job;

/// `SAVE`, `BGSAVE` and `LASTSAVE`.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec(
        "save",
        1,
        ADMIN | NOSCRIPT | NO_MULTI | NO_ASYNC_LOADING | EXCLUSIVE,
        0,
        0,
        0,
        save,
    ),
    spec(
        "bgsave",
        -1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING | EXCLUSIVE,
        0,
        0,
        0,
        bgsave,
    ),
    spec("lastsave", 1, LOADING | STALE | FAST, 0, 0, 0, lastsave),
];

/// Redis's answer while a `BGSAVE` is still writing.
const IN_PROGRESS: &str = "ERR Background save already in progress";

/// Redis's answer to a plain `BGSAVE` while an AOF rewrite runs.
const OTHER_JOB: &str = "ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.";

fn save(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    // As in Redis, only a running `BGSAVE` stops `SAVE`; a running AOF rewrite does not.
    if ctx.shared.background.running() == Some(Job::Save) {
        return Frame::error(IN_PROGRESS);
    }
    // In the foreground, unpaced: `rdb-key-save-delay` paces background jobs only (a pause
    // here would hold a worker of the embedding runtime).
    let taken = file::take(ctx.shared);
    let path = file::path(ctx.shared);
    match file::write(&path, &taken.data) {
        Ok(()) => {
            file::saved(ctx.shared, taken.dirty);
            Frame::ok()
        }
        Err(e) => {
            tracing::warn!("SAVE to {} failed: {e}", path.display());
            // Redis answers a bare `-ERR` and says why in its log.
            Frame::error("ERR")
        }
    }
}

fn bgsave(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let schedule = match args.len() {
        1 => false,
        2 if is(&args[1], "schedule") => true,
        _ => return syntax_error(),
    };
    let background = &ctx.shared.background;
    match background.running() {
        Some(Job::Save) => return Frame::error(IN_PROGRESS),
        // Another job (an AOF rewrite) runs: with `SCHEDULE`, or inside a transaction, the
        // save waits for it; otherwise Redis refuses.
        Some(_) if !(schedule || ctx.in_exec) => return Frame::error(OTHER_JOB),
        Some(_) => return schedule_save(ctx.shared),
        // Inside `EXEC`, Redis saves once the transaction is over and says it is scheduled:
        // the cron takes the snapshot when `EXEC` lets the gate go, so it holds the whole
        // transaction.
        None if ctx.in_exec => return schedule_save(ctx.shared),
        None => {}
    }
    if background.try_start(Job::Save).is_err() {
        return schedule_save(ctx.shared);
    }
    // Numbered before the snapshot: a shutdown from here on gives this save up.
    let job = background.save_job();
    write_in_background(ctx.shared.clone(), job, file::take(ctx.shared));
    Frame::simple("Background saving started")
}

/// Leaves a `BGSAVE` for the persistence cron to start when nothing else runs.
fn schedule_save(shared: &crate::state::Shared) -> Frame {
    shared
        .background
        .save_scheduled
        .store(true, Ordering::Release);
    shared.background.kick.notify_one();
    Frame::simple("Background saving scheduled")
}

/// Takes a snapshot as soon as no other command runs (the execution gate held exclusively),
/// then writes it on a thread of its own: a scheduled `BGSAVE`, or one a save point started
/// ([`super::save_points`]). The caller has claimed the background slot for [`Job::Save`].
pub(crate) async fn snapshot_when_alone(shared: std::sync::Arc<crate::state::Shared>) {
    let guard = loop {
        match shared.gate.exclusive(std::time::Duration::MAX).await {
            Ok(g) => break g,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    };
    let job = shared.background.save_job();
    let taken = file::take(&shared);
    drop(guard);
    write_in_background(shared, job, taken);
}

/// Writes a taken snapshot (of background save `job`) on a thread of its own, paced by
/// `rdb-key-save-delay`, then records how it went.
fn write_in_background(shared: std::sync::Arc<crate::state::Shared>, job: u64, taken: file::Taken) {
    let path = file::path(&shared);
    let done = move |shared: &crate::state::Shared, failed: bool| {
        shared
            .stats
            .last_bgsave_failed
            .store(failed, Ordering::Release);
        shared.background.finish(Job::Save);
    };
    let on_thread = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("latchkey-bgsave".into())
        .spawn(move || {
            let shared = on_thread;
            let delay = file::key_save_delay(&shared);
            let background = &shared.background;
            // A temporary file of its own: a `SHUTDOWN` may save in the foreground meanwhile.
            let tmp = format!("temp-bg-{}.rdb", std::process::id());
            let written = file::write_with(
                &path,
                &tmp,
                |f| {
                    file::write_paced(f, &taken.data, &taken.key_ends, delay, || {
                        background.save_is_current(job)
                    })
                },
                || {
                    // A shutdown that gave this save up, then saved, must keep its newer file.
                    let held = background.rename_lock.lock();
                    match background.save_is_current(job) {
                        true => Ok(held),
                        false => Err(std::io::Error::other("the save was given up")),
                    }
                },
            );
            match written {
                Ok(()) => {
                    file::saved(&shared, taken.dirty);
                    done(&shared, false);
                }
                Err(e) => {
                    tracing::warn!("BGSAVE to {} failed: {e}", path.display());
                    done(&shared, true);
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("BGSAVE could not start its thread: {e}");
        done(&shared, true);
    }
}

fn lastsave(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    Frame::Integer(last_save_s(ctx.shared) as i64)
}

/// Unix seconds of the last snapshot written, or of the start while there is none, as Redis
/// counts it (`LASTSAVE`, `rdb_last_save_time`).
pub(crate) fn last_save_s(shared: &crate::state::Shared) -> u64 {
    match shared.stats.last_save_s.load(Ordering::Relaxed) {
        0 => shared.clock.now_ms() / 1000 - shared.started.elapsed().as_secs(),
        saved => saved,
    }
}
