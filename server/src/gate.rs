//! The execution gate: what makes scripts and transactions atomic.
//!
//! Ordinary commands run concurrently, each holding the gate shared; they touch one key (or
//! a few, shard-locked by the map). A script, an `EXEC` or a multi-key command holds the gate
//! exclusively, so no other command runs, and no client observes its writes half-done — the
//! guarantee Redis gets from being single-threaded.
//!
//! Waiting for the gate never blocks a tokio worker for long: a command that finds the gate
//! held exclusively waits asynchronously, and gives up with `-BUSY` once the holder is a script
//! that has run past `busy-reply-threshold`.
//!
//! A waiter is woken by a notification, so every way the gate can stop turning commands away
//! must notify, and only *after* the gate is open again: an exclusive holder notifies once its
//! lock is released, and so does a would-be exclusive holder that gave up waiting for shared
//! holders (while it waited, the lock turned new shared takers away too). A notification sent
//! before the release wakes a waiter that, on another worker, may find the gate still shut,
//! wait again and sleep a whole tick (5 ms): what a lock's release script (`EVALSHA`,
//! exclusive) met when the waiters it had just woken came back with their `SET NX`es.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio::sync::Notify;

/// What kind of long-running work holds the gate, for the wording of the `-BUSY` error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BusyKind {
    /// An `EVAL`/`EVALSHA` script.
    Script,
    /// An `FCALL` function.
    Function,
}

/// Returned when the gate is held by a script that has been running too long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Busy(pub BusyKind);

impl Busy {
    /// Redis's error text for this case.
    pub(crate) fn message(self) -> &'static str {
        match self.0 {
            BusyKind::Script => {
                "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
            }
            BusyKind::Function => {
                "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
            }
        }
    }
}

/// Shared/exclusive access to the keyspace, with busy-script detection.
#[derive(Debug)]
pub(crate) struct Gate {
    lock: RwLock<()>,
    released: Notify,
    origin: Instant,
    /// Microseconds since `origin` when the current script started, or 0 when none runs.
    script_started: AtomicU64,
    script_is_function: AtomicBool,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            lock: RwLock::new(()),
            released: Notify::new(),
            origin: Instant::now(),
            script_started: AtomicU64::new(0),
            script_is_function: AtomicBool::new(false),
        }
    }
}

/// Shared access: held while an ordinary command runs.
pub(crate) type SharedGuard<'a> = RwLockReadGuard<'a, ()>;

/// Exclusive access: held while a script, a transaction or a multi-key command runs.
pub(crate) struct ExclusiveGuard<'a> {
    gate: &'a Gate,
    /// Always `Some` until the guard is dropped, which releases it before notifying.
    guard: Option<RwLockWriteGuard<'a, ()>>,
}

impl Drop for ExclusiveGuard<'_> {
    fn drop(&mut self) {
        self.gate.script_started.store(0, Ordering::Release);
        // Open the gate first, then wake the waiters: woken earlier, one could find the gate
        // still shut, register again after this very notification and sleep a whole tick.
        drop(self.guard.take());
        self.gate.released.notify_waiters();
    }
}

impl Gate {
    /// Marks the current exclusive holder as a running script, so that waiters can answer
    /// `-BUSY` once it has run longer than the threshold. Only the holder of the exclusive
    /// guard may call this; the mark is cleared when that guard is dropped.
    pub(crate) fn mark_script(&self, kind: BusyKind) {
        let us = self.origin.elapsed().as_micros() as u64 + 1;
        self.script_is_function
            .store(kind == BusyKind::Function, Ordering::Release);
        self.script_started.store(us, Ordering::Release);
    }

    /// How long the current script has been running, if one is.
    pub(crate) fn script_running_for(&self) -> Option<(BusyKind, Duration)> {
        let started = self.script_started.load(Ordering::Acquire);
        if started == 0 {
            return None;
        }
        let now = self.origin.elapsed().as_micros() as u64 + 1;
        let kind = if self.script_is_function.load(Ordering::Acquire) {
            BusyKind::Function
        } else {
            BusyKind::Script
        };
        Some((kind, Duration::from_micros(now.saturating_sub(started))))
    }

    /// Whether a script holds the gate and has run past `threshold`: then a command that may
    /// not run beside it is refused at once (Redis's `BUSY`), not queued or made to wait.
    pub(crate) fn busy_check(&self, threshold: Duration) -> Result<(), Busy> {
        match self.script_running_for() {
            Some((kind, ran)) if ran >= threshold => Err(Busy(kind)),
            _ => Ok(()),
        }
    }

    /// Takes the gate shared.
    ///
    /// A shared taker is turned away only while an exclusive holder has the lock or is
    /// waiting for the shared holders to leave; either notifies once that is over (see
    /// [`ExclusiveGuard`]'s drop and [`Gate::exclusive`]). The notification is registered
    /// before the lock is tried again, so one sent in between is not missed; the tick is there
    /// to answer `-BUSY` once a long script passes the threshold.
    pub(crate) async fn shared(&self, busy_threshold: Duration) -> Result<SharedGuard<'_>, Busy> {
        if let Some(g) = self.lock.try_read() {
            return Ok(g);
        }
        loop {
            let released = self.released.notified();
            if let Some(g) = self.lock.try_read() {
                return Ok(g);
            }
            self.busy_check(busy_threshold)?;
            tokio::select! {
                _ = released => {}
                _ = tokio::time::sleep(BUSY_TICK) => {}
            }
        }
    }

    /// Takes the gate exclusively.
    pub(crate) async fn exclusive(
        &self,
        busy_threshold: Duration,
    ) -> Result<ExclusiveGuard<'_>, Busy> {
        loop {
            if let Some(g) = self.lock.try_write() {
                return Ok(self.exclusive_guard(g));
            }
            if !self.lock.is_locked_exclusive() {
                // Only short shared holders: wait for them on this thread, briefly.
                if let Some(g) = self.lock.try_write_for(Duration::from_millis(1)) {
                    return Ok(self.exclusive_guard(g));
                }
                // While this thread waited, the lock turned new shared takers away as if it
                // were held exclusively; they wait for a notification, which nobody else
                // would send now that we give up.
                self.released.notify_waiters();
                tokio::task::yield_now().await;
                continue;
            }
            let released = self.released.notified();
            if !self.lock.is_locked_exclusive() {
                continue;
            }
            self.busy_check(busy_threshold)?;
            tokio::select! {
                _ = released => {}
                _ = tokio::time::sleep(BUSY_TICK) => {}
            }
        }
    }

    fn exclusive_guard<'a>(&'a self, guard: RwLockWriteGuard<'a, ()>) -> ExclusiveGuard<'a> {
        ExclusiveGuard {
            gate: self,
            guard: Some(guard),
        }
    }
}

/// How often a command waiting for the gate looks whether the script holding it has run past
/// `busy-reply-threshold` (and should be answered `-BUSY`). Not how a waiter learns that the
/// gate opened: that is a notification, at once.
const BUSY_TICK: Duration = Duration::from_millis(5);
