//! `SAVE`, `BGSAVE` and `LASTSAVE`: a snapshot of every database written to
//! `dir`/`dbfilename` in Redis's RDB format (see [`crate::rdb::file`]), and when the last one
//! was written.
//!
//! Both take the snapshot while no other command runs (they hold the execution gate
//! exclusively), so the file is one moment's keyspace. `SAVE` then writes it before it
//! answers, as Redis's `SAVE` blocks; `BGSAVE` answers at once and writes it on a thread of its
//! own, where Redis forks a child. Copying the keyspace takes the pause a fork's page-table
//! copy takes in Redis, in proportion to the data.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::util::{is, syntax_error};
use super::{
    spec, CommandSpec, Ctx, ADMIN, EXCLUSIVE, FAST, LOADING, NOSCRIPT, NO_ASYNC_LOADING, NO_MULTI,
    STALE,
};
use crate::frame::Frame;
use crate::rdb::file;

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

fn save(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    if ctx.shared.stats.bgsave_in_progress.load(Ordering::Acquire) {
        return Frame::error(IN_PROGRESS);
    }
    let (data, dirty) = file::take(ctx.shared);
    let path = file::path(ctx.shared);
    match file::write(&path, &data) {
        Ok(()) => {
            file::saved(ctx.shared, dirty);
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
    if args.len() > 1 && !(args.len() == 2 && is(&args[1], "schedule")) {
        return syntax_error();
    }
    if ctx
        .shared
        .stats
        .bgsave_in_progress
        .swap(true, Ordering::AcqRel)
    {
        return Frame::error(IN_PROGRESS);
    }
    if ctx.in_exec {
        // Redis saves once the transaction is over, and says it is scheduled: the snapshot is
        // taken when `EXEC` lets the gate go, so it holds the whole transaction.
        tokio::spawn(snapshot_when_alone(ctx.shared.clone()));
        return Frame::simple("Background saving scheduled");
    }
    let (data, dirty) = file::take(ctx.shared);
    write_in_background(ctx.shared.clone(), data, dirty);
    Frame::simple("Background saving started")
}

/// Takes a snapshot as soon as no other command runs (the execution gate held exclusively),
/// then writes it on a thread of its own: a `BGSAVE` scheduled by a transaction, or one a save
/// point started ([`super::save_points`]). The caller has set `bgsave_in_progress`.
pub(crate) async fn snapshot_when_alone(shared: std::sync::Arc<crate::state::Shared>) {
    let guard = loop {
        match shared.gate.exclusive(std::time::Duration::MAX).await {
            Ok(g) => break g,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    };
    let (data, dirty) = file::take(&shared);
    drop(guard);
    write_in_background(shared, data, dirty);
}

/// Writes a taken snapshot on a thread of its own, then records how it went.
fn write_in_background(shared: std::sync::Arc<crate::state::Shared>, data: Bytes, dirty: u64) {
    let path = file::path(&shared);
    let done = move |shared: &crate::state::Shared, failed: bool| {
        shared
            .stats
            .last_bgsave_failed
            .store(failed, Ordering::Release);
        shared
            .stats
            .bgsave_in_progress
            .store(false, Ordering::Release);
    };
    let on_thread = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("latchkey-bgsave".into())
        .spawn(move || {
            let shared = on_thread;
            match file::write(&path, &data) {
                Ok(()) => {
                    file::saved(&shared, dirty);
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
