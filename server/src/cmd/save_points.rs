//! The save points at work, and the other background jobs' cron: a cron that starts a
//! background save (as `BGSAVE` does) when one of the `save` parameter's points is reached, as
//! Redis's `serverCron` does: at least `changes` writes since the last snapshot and more than
//! `seconds` since it was written (or since the start). After a failed save it waits five
//! seconds before trying again, as Redis does (`CONFIG_BGSAVE_RETRY_DELAY`). The parameter
//! itself is read and printed in [`crate::save_params`]; `SHUTDOWN` also writes a snapshot
//! while save points are set (see `cmd/server.rs`).
//!
//! The same cron starts what waits for the one background job slot
//! ([`crate::state::Background`]): a `BGREWRITEAOF` or `BGSAVE SCHEDULE` asked for while the
//! other job ran (or inside `EXEC`), and the automatic AOF rewrite
//! ([`super::bgrewriteaof::auto_rewrite_due`]). Nothing starts while a job runs.
//!
//! The cron looks ten times a second (latchkey's `hz`) and judges time by the server's
//! [`Clock`](crate::clock::Clock), so a virtual clock moved forward reaches a save point
//! without waiting.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::save_params::SavePoint;
use crate::state::{Job, Shared};

/// How often the cron looks (Redis's `serverCron` runs at `hz`, 10).
const TICK: Duration = Duration::from_millis(100);
/// Seconds to wait after a failed background save before a save point may try again.
const RETRY_DELAY_S: u64 = 5;

/// The save points now in force (none while `save` is `""`).
pub(crate) fn points(shared: &Shared) -> Vec<SavePoint> {
    shared
        .config
        .get("save")
        .and_then(|v| crate::save_params::parse(&v).ok())
        .unwrap_or_default()
}

/// The first save point reached, given the writes and the seconds since the last snapshot.
fn reached(points: &[SavePoint], changes: u64, elapsed_s: u64) -> Option<SavePoint> {
    points
        .iter()
        .copied()
        .find(|p| changes >= p.changes.max(0) as u64 && elapsed_s as i64 > p.seconds)
}

/// Runs until the server shuts down: Redis's `serverCron` for the background jobs. Each tick,
/// when no job runs, in Redis's order: a rewrite that was scheduled, then the save points,
/// then the automatic rewrite (`auto-aof-rewrite-percentage`), then a scheduled `BGSAVE`.
pub(crate) async fn run(shared: Arc<Shared>, _done: mpsc::Sender<()>) {
    let mut shutdown = shared.shutdown_signal();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Unix seconds of the cron's last attempt at a save (Redis's `lastbgsave_try`).
    let mut last_try_s = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.background.kick.notified() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        if shared.background.running().is_some() {
            continue;
        }
        if shared.aof_rewrite.scheduled.load(Ordering::Acquire)
            && !super::bgrewriteaof::limited(&shared)
        {
            super::bgrewriteaof::start_when_alone(&shared).await;
            continue;
        }
        let stats = &shared.stats;
        let now_s = shared.clock.now_ms() / 1000;
        let may_retry = now_s.saturating_sub(last_try_s) > RETRY_DELAY_S
            || !stats.last_bgsave_failed.load(Ordering::Acquire);
        let points = points(&shared);
        if !points.is_empty() {
            let changes = stats
                .dirty
                .load(Ordering::Relaxed)
                .saturating_sub(stats.dirty_at_save.load(Ordering::Relaxed));
            let elapsed = now_s.saturating_sub(super::save::last_save_s(&shared));
            if let Some(point) = reached(&points, changes, elapsed).filter(|_| may_retry) {
                if shared.background.try_start(Job::Save).is_ok() {
                    tracing::info!(
                        "{} changes in {} seconds. Saving...",
                        point.changes,
                        point.seconds
                    );
                    last_try_s = now_s;
                    super::save::snapshot_when_alone(shared.clone()).await;
                    continue;
                }
            }
        }
        if super::bgrewriteaof::auto_rewrite_due(&shared) {
            super::bgrewriteaof::start_when_alone(&shared).await;
            continue;
        }
        if shared.background.save_scheduled.load(Ordering::Acquire)
            && may_retry
            && shared.background.try_start(Job::Save).is_ok()
        {
            shared
                .background
                .save_scheduled
                .store(false, Ordering::Release);
            last_try_s = now_s;
            super::save::snapshot_when_alone(shared.clone()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_point_needs_its_changes_and_more_than_its_seconds() {
        let points = crate::save_params::parse("3600 1 300 100 60 10000").unwrap();
        assert_eq!(reached(&points, 0, 100_000), None);
        assert_eq!(reached(&points, 1, 3600), None);
        assert_eq!(reached(&points, 1, 3601).map(|p| p.seconds), Some(3600));
        assert_eq!(reached(&points, 100, 301).map(|p| p.seconds), Some(300));
        assert_eq!(reached(&points, 9999, 299), None);
        assert_eq!(reached(&points, 10000, 61).map(|p| p.seconds), Some(60));
    }
}
