//! The active expiry cycle: deletes keys whose TTL has passed even when nobody reads them.
//!
//! Like Redis it wakes ten times a second; with a virtual clock it also wakes each time the
//! clock is advanced, and whenever someone awaits [`caught_up`] (so an advanced clock leaves no
//! expired key behind for `DBSIZE` or `SCAN` once that resolves).
//!
//! How it keeps up with a burst (a million leases taken together expire together):
//! - due keys are popped from the front of each database's deadline-ordered index
//!   ([`crate::expiry_index`]): each deletion costs a logarithmic step, never a rescan;
//! - a pass is a series of small steps. Each step deletes at most [`STEP_KEYS`] keys while
//!   holding the execution gate shared and the stream-order lock, feeds all their `DEL`s to the
//!   replicas and the AOF as one encoded chunk, lets both go, frees the values (itself, as
//!   Redis does by default, or big ones on the background freer with `lazyfree-lazy-expire
//!   yes`: [`crate::lazyfree::free_expired`]), and yields to the scheduler, so clients are served
//!   between steps and an exclusive command (a script, `EXEC`) waits at most one step;
//! - a pass runs until nothing is due, but while clients are busy it takes
//!   [`BUSY_SHARE_PERCENT`] of the worker, by account: it yields until the clients have had
//!   the rest of the time (measured, not guessed: a yield returns once the ready tasks ran),
//!   and when a turn of the clients ran longer than their due, it works correspondingly
//!   longer next time, in bursts of at most [`MAX_BURST`] and [`MAX_BURST_STEPS`]. When clients are idle a yield
//!   comes back at once, and the steps run back to back, so the backlog clears at full
//!   speed. Redis instead caps each pass at a share of the CPU and leaves the rest of the
//!   backlog to later passes.
//!
//! This is unlike Redis's `activeExpireCycle`, which samples random keys with a TTL and adapts
//! its effort to the share it finds expired: with an ordered index there is nothing to
//! sample, the next due key is always at the front.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::db::ShrinkCursor;
use crate::state::Shared;

/// Keys deleted in one step, under the gate, before yielding to clients. Small enough that a
/// step takes well under a millisecond, large enough that the `DEL`s of a step fill one chunk
/// and the step's fixed costs (the gate, the locks, the yield) are spread thin.
pub(crate) const STEP_KEYS: usize = 128;

/// The share of a busy worker (in percent) the cycle takes while clients want the rest.
/// The cycle keeps an account: each time it comes back from letting clients run for `away`,
/// it may work for `away · share / (100 - share)` (at most [`MAX_BURST`]) before it lets them
/// run again, and it lets them run at least `spent · (100 - share) / share` after working
/// for `spent`. Idle clients are not waited for.
///
/// Measured with the `expiry_storm` example (`bench/results/expiry.md`, a million leases
/// expiring together, 50 clients reading): before the account, the cycle only waited after
/// each step and never made up for a wait that ran long (a yield lasts a whole turn of the
/// busy clients, far longer than a step), so a nominal 20% came to about 10% of the worker.
/// With the account kept, 20% cleared the keys within 0.1–0.5 s of the last deadline but held
/// the clients' `GET` rate at 0.81–0.85 of normal (the share it takes is what they lose);
/// 12% gave 0.97–0.99 but took 2.0–2.4 s, over twice redis-server's time; 15% gives 0.90–0.92
/// and clears them within 0.05–1.0 s of the last deadline, as fast as redis-server (0.8–1.1 s,
/// whose own rate falls to 0.67–0.77). The keys got cheaper to delete too
/// ([`crate::batch_remove`]).
const BUSY_SHARE_PERCENT: u32 = 15;

/// The longest the cycle works in one go while clients are busy, however long they had the
/// worker before: a request that arrives meanwhile waits at most this (plus one step).
const MAX_BURST: Duration = Duration::from_micros(250);

/// The most steps the cycle runs in one go before it yields, whatever its account says: a
/// burst deletes at most `MAX_BURST_STEPS · STEP_KEYS` keys between two turns of the
/// clients (or of an in-process caller after a virtual clock's `advance`).
pub(crate) const MAX_BURST_STEPS: usize = 4;

/// A yield that comes back sooner than this found no other task ready to run.
const IDLE_YIELD: Duration = Duration::from_micros(20);

/// Runs until the server shuts down.
pub(crate) async fn active_expiry(shared: Arc<Shared>, _done: mpsc::Sender<()>) {
    let mut shutdown = shared.shutdown_signal();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shrink = vec![ShrinkCursor::default(); crate::db::NUM_DBS];
    loop {
        let ticked = tokio::select! {
            _ = tick.tick() => true,
            _ = shared.clock.advanced() => false,
            _ = shared.expiry.kick.notified() => false,
            _ = shutdown.wait_for(|s| *s) => return,
        };
        expire_cycle(&shared).await;
        shared.expiry.passes.send_modify(|n| *n += 1);
        if ticked {
            shrink_tables(&shared, &mut shrink);
        }
    }
}

/// Rebuilds a few of the keyspace's shards that expiry and deletions left mostly empty, at
/// most [`SHARDS_PER_TICK`](crate::shrink::SHARDS_PER_TICK) per call (see [`crate::shrink`]).
fn shrink_tables(shared: &Shared, cursors: &mut [ShrinkCursor]) {
    let mut budget = crate::shrink::SHARDS_PER_TICK;
    for ((_, db), cursor) in shared.keyspace.iter().zip(cursors.iter_mut()) {
        if budget == 0 {
            return;
        }
        budget -= db.shrink_step(cursor, budget);
    }
}

/// One pass over every database, until no key is due. Replicas skip it: they wait for the
/// master's deletes. So does a paused server (`CLIENT PAUSE`), and one whose cycle was switched off with
/// `DEBUG SET-ACTIVE-EXPIRE 0`. Returns how many keys it deleted.
///
/// The longest the pass worked without yielding (its steps' own work between two yields,
/// the freeing of what they deleted included) is its `expire-cycle` latency event when it
/// reaches `latency-monitor-threshold` (see [`crate::latency`]).
pub(crate) async fn expire_cycle(shared: &Shared) -> usize {
    let mut total = 0;
    // Work done since the cycle last let clients run, and how much it may do in this burst.
    let (mut spent, mut allowed, mut steps) = (Duration::ZERO, Duration::ZERO, 0);
    // The steps' own work since the last yield, and the longest such stretch of the pass.
    let (mut busy, mut longest) = (Duration::ZERO, Duration::ZERO);
    for (i, db) in shared.keyspace.iter() {
        // Checked again before each step: `DEBUG SET-ACTIVE-EXPIRE 0` or a `REPLICAOF`
        // stops a pass between two steps.
        while cycle_runs(shared) && db.has_due(shared.clock.now_ms()) {
            let started = Instant::now();
            let Some((gone, worked)) = step(shared, i, busy).await else {
                return total;
            };
            total += gone;
            spent += started.elapsed();
            busy += worked;
            steps += 1;
            if spent < allowed && steps < MAX_BURST_STEPS {
                continue;
            }
            longest = longest.max(busy);
            busy = Duration::ZERO;
            let away = yield_to_clients(spent).await;
            allowed = (away * BUSY_SHARE_PERCENT / (100 - BUSY_SHARE_PERCENT)).min(MAX_BURST);
            (spent, steps) = (Duration::ZERO, 0);
        }
    }
    record_latency(shared, longest.max(busy));
    total
}

/// Records `worked` as an `expire-cycle` latency event when it reaches
/// `latency-monitor-threshold` (several in one second keep the largest, as in Redis).
fn record_latency(shared: &Shared, worked: Duration) {
    let threshold = shared.config.latency_threshold_ms();
    let ms = worked.as_millis() as u64;
    if threshold > 0 && ms >= threshold {
        let now_s = (shared.clock.now_ms() / 1000) as i64;
        shared
            .stats
            .latency_events
            .add_sample("expire-cycle", ms, now_s);
    }
}

/// Lets other tasks (clients) run for their share after the cycle worked for `spent`: yields
/// until they have had `spent · (100 - share) / share`, or until a yield finds nobody else
/// ready (idle clients are not waited for). Returns how long they had.
async fn yield_to_clients(spent: Duration) -> Duration {
    let owed = spent * (100 - BUSY_SHARE_PERCENT) / BUSY_SHARE_PERCENT;
    let mut given = Duration::ZERO;
    loop {
        let before = Instant::now();
        tokio::task::yield_now().await;
        let took = before.elapsed();
        given += took;
        if given >= owed || took < IDLE_YIELD {
            return given;
        }
    }
}

/// Whether this server runs the active expiry cycle now (not on a replica, nor while a
/// `CLIENT PAUSE` holds expiry, nor when switched off).
fn cycle_runs(shared: &Shared) -> bool {
    !shared.is_replica()
        && !shared.pause.holds_expiry()
        && shared.active_expire.load(Ordering::Acquire)
}

/// Deletes up to [`STEP_KEYS`] due keys of database `i` and records their deletions. Returns
/// how many it deleted and how long it worked once it had the gate, or `None` when the server
/// is going away (the gate is closed). `busy` is what the pass worked since it last let
/// clients run, which a big value's free adds to (see below).
async fn step(shared: &Shared, i: usize, busy: Duration) -> Option<(usize, Duration)> {
    let db = shared.keyspace.db(i);
    // Read once: what `active_expire` counted as held is what is let go of below.
    let lazy = shared.config.limits.lazy_expire();
    let started;
    let gone = {
        // Never delete in the middle of a script or transaction; and feed the deletions
        // before any write to the same keys can (see `order_guard`).
        let Ok(_gate) = shared.gate.shared(Duration::MAX).await else {
            return None;
        };
        started = Instant::now();
        let order = shared.order_guard();
        let now = shared.clock.now_ms();
        // With `lazyfree-lazy-expire no` a big value is freed here, and its key counts in
        // `DBSIZE` until then (see `Db::active_expire`).
        let gone = db.active_expire(now, STEP_KEYS, !lazy);
        // `order` is held exactly when writes are recorded (replicas or an AOF): otherwise
        // there is nothing to feed, and the keys need not be gathered.
        if order.is_some() && !gone.is_empty() {
            let keys: Vec<Bytes> = gone.iter().map(|(k, _)| k.clone()).collect();
            shared.propagate_expired(i, &keys);
        }
        gone
    };
    let n = gone.len();
    for (key, _) in &gone {
        shared.keyspace_event(crate::notify::EXPIRED, "expired", key, i);
    }
    shared
        .stats
        .expired_keys
        .fetch_add(n as u64, Ordering::Relaxed);
    // Freed outside the locks, but by the cycle itself with `lazyfree-lazy-expire no`
    // (Redis's default and its place): the time a big value takes to free is the step's,
    // and counts in the pass's `expire-cycle` event as in Redis. With `yes`, big values go
    // to the background freer.
    //
    // A big value freed here was counted as still there (`Db::active_expire`): once freed,
    // the stretch's time goes into the latency events before the count lets go of the key,
    // so a client that sees `DBSIZE` drop can read the event, as after Redis's cycle, where
    // both happen before any client runs. The pass records its longest stretch again at its
    // end; within one second the larger sample stays.
    let mut held = 0;
    for (_, entry) in gone {
        held += usize::from(!lazy && crate::lazyfree::frees_slowly(&entry));
        crate::lazyfree::free_expired(entry, lazy);
    }
    let worked = started.elapsed();
    if held > 0 {
        record_latency(shared, busy + worked);
        db.freed(held);
    }
    Some((n, worked))
}

/// Resolves once no key whose deadline is at or before the current time is left for the
/// active expiry cycle: every such key has been deleted and its deletion fed to replicas and
/// the AOF. Wakes the cycle instead of waiting for its next tick, and never sleeps.
///
/// Resolves at once on a replica, or with the cycle switched off (`DEBUG SET-ACTIVE-EXPIRE
/// 0`), since no pass will run there; and when the server shuts down.
pub(crate) async fn caught_up(shared: &Shared) {
    let mut passes = shared.expiry.passes.subscribe();
    let mut shutdown = shared.shutdown_signal();
    loop {
        passes.mark_unchanged();
        if !cycle_runs(shared)
            || *shutdown.borrow()
            || !shared.keyspace.has_due(shared.clock.now_ms())
        {
            return;
        }
        shared.expiry.kick.notify_one();
        tokio::select! {
            r = passes.changed() => if r.is_err() { return },
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}

#[cfg(test)]
mod tests;
