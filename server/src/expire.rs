//! The active expiry cycle: deletes keys whose TTL has passed even when nobody reads them.
//!
//! Like Redis it runs ten times a second; with a virtual clock it also runs each time the clock
//! is advanced, so an advanced clock leaves no expired key behind for `DBSIZE` or `SCAN`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::server::Shared;

/// Keys deleted per database per pass, before yielding to clients.
const BATCH: usize = 200;

/// Runs until the server shuts down.
pub async fn active_expiry(shared: Arc<Shared>, _done: mpsc::Sender<()>) {
    let mut shutdown = shared.shutdown_signal();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.clock.advanced() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        expire_cycle(&shared).await;
    }
}

/// One pass over every database. Replicas skip it: they wait for the master's deletes. So
/// does a server whose cycle was switched off with `DEBUG SET-ACTIVE-EXPIRE 0`.
pub async fn expire_cycle(shared: &Shared) {
    if shared.is_replica() || !shared.active_expire.load(Ordering::Acquire) {
        return;
    }
    for (i, db) in shared.keyspace.iter() {
        if db.is_empty() {
            continue;
        }
        loop {
            let gone = {
                // Never delete in the middle of a script or transaction; and feed the
                // deletions before any write to the same keys can (see `order_guard`).
                let Ok(_g) = shared.gate.shared(Duration::MAX).await else {
                    return;
                };
                let _order = shared.order_guard();
                let now = shared.clock.now_ms();
                let gone = db.active_expire(now, BATCH);
                shared.propagate_expired(i, &gone);
                gone
            };
            shared
                .stats
                .expired_keys
                .fetch_add(gone.len() as u64, Ordering::Relaxed);
            if gone.len() < BATCH {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
}
