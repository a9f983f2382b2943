//! `CLIENT PAUSE`: holding clients' commands for a while, as an operator does in a manual
//! failover.
//!
//! The procedure this project teaches — stop the writes on the master, let the replica catch
//! up, promote it — starts with `CLIENT PAUSE <ms> WRITE`. While a pause lasts, the commands
//! it covers are not refused: each waits, like a blocked client, until the pause ends (its
//! timeout passes or `CLIENT UNPAUSE`), then runs. Meanwhile keys do not expire (a read finds
//! an expired key missing but does not delete it, and the active cycle stands still): a `DEL`
//! sent to the replicas now would be a write during the very pause that promises none.
//!
//! As in Redis 7.0, a second pause while one lasts keeps the later end and the stronger mode
//! (`ALL` over `WRITE`), and the connections of replicas and of our own master are never
//! paused.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use crate::clock::Clock;

/// Which commands a pause holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PauseMode {
    /// Commands that may write or replicate (`SET`, `EVAL`, `PUBLISH`, an `EXEC` of
    /// writes...); reads run.
    Write,
    /// Every command.
    All,
}

/// A pause in force: its mode and when it ends, on the server's clock (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pause {
    mode: PauseMode,
    until: u64,
}

/// What holds commands now: a `CLIENT PAUSE`, and the write pause of a coordinated
/// `FAILOVER`, which has no end of its own and which `CLIENT UNPAUSE` does not lift (Redis
/// keeps the two apart the same way: `PAUSE_BY_CLIENT_COMMAND`, `PAUSE_DURING_FAILOVER`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Holds {
    client: Option<Pause>,
    failover: bool,
}

/// The server's pause state, shared by every connection.
#[derive(Debug)]
pub(crate) struct ClientPause {
    state: watch::Sender<Holds>,
    /// Whether a pause may be in force: set after `pause`, cleared by `unpause` and by the
    /// first look that finds the pause over. Every command and every key read asks, so the
    /// common answer ("no pause") costs one atomic load instead of a lock and a clock read.
    armed: AtomicBool,
    /// The server's clock: a pause of a server on a virtual clock ends when that clock is
    /// moved past its end, as its keys' TTLs do.
    clock: Clock,
}

impl ClientPause {
    /// No pause, on `clock`.
    pub(crate) fn new(clock: Clock) -> ClientPause {
        ClientPause {
            state: watch::channel(Holds::default()).0,
            armed: AtomicBool::new(false),
            clock,
        }
    }
}

impl ClientPause {
    /// Starts a pause of `mode` for `duration`, or extends the one in force: the later end and
    /// the stronger mode win.
    pub(crate) fn pause(&self, mode: PauseMode, duration: Duration) {
        let now = self.clock.now_ms();
        let until = now.saturating_add(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX));
        self.state.send_modify(|h| {
            h.client = Some(match h.client {
                Some(old) if old.until > now => Pause {
                    mode: old.mode.max(mode),
                    until: old.until.max(until),
                },
                _ => Pause { mode, until },
            });
        });
        // After the state: a look that found the old pause over, and cleared the flag while
        // holding the state, cannot clear it after this.
        self.armed.store(true, Ordering::Release);
    }

    /// Ends the `CLIENT PAUSE` in force, if any (`CLIENT UNPAUSE`): every command it held
    /// runs, unless a failover still holds writes.
    pub(crate) fn unpause(&self) {
        self.state.send_modify(|h| {
            h.client = None;
            if !h.failover {
                self.armed.store(false, Ordering::Release);
            }
        });
    }

    /// Holds every write, with no end, while a coordinated `FAILOVER` runs; `false` lifts it.
    pub(crate) fn hold_writes_for_failover(&self, hold: bool) {
        self.state.send_modify(|h| h.failover = hold);
        if hold {
            self.armed.store(true, Ordering::Release);
        }
    }

    /// The mode of the pause in force now, if one is.
    pub(crate) fn current(&self) -> Option<PauseMode> {
        if !self.armed.load(Ordering::Acquire) {
            return None;
        }
        let state = self.state.borrow();
        let client = state
            .client
            .filter(|p| p.until > self.clock.now_ms())
            .map(|p| p.mode);
        let failover = state.failover.then_some(PauseMode::Write);
        let mode = client.max(failover);
        if mode.is_none() {
            self.armed.store(false, Ordering::Release);
        }
        mode
    }

    /// Whether keys may not expire now (any pause holds expiry).
    pub(crate) fn holds_expiry(&self) -> bool {
        self.current().is_some()
    }

    /// Waits while a pause in force holds a command; `held(mode)` says whether a pause of that
    /// mode holds it. Returns at once when nothing does.
    pub(crate) async fn wait_while(&self, held: impl Fn(PauseMode) -> bool) {
        let mut rx = self.state.subscribe();
        loop {
            let holds = *rx.borrow_and_update();
            let client = holds
                .client
                .filter(|p| p.until > self.clock.now_ms() && held(p.mode));
            let by_failover = holds.failover && held(PauseMode::Write);
            if client.is_none() && !by_failover {
                return;
            }
            // A failover's hold ends only with a change of state; a client pause at its end.
            let wake = match client {
                Some(p) if !by_failover => p.until,
                _ => u64::MAX,
            };
            tokio::select! {
                // A new pause, an extension, an unpause, a failover's end: look again.
                r = rx.changed() => if r.is_err() { return },
                _ = self.clock.sleep_until_ms(wake) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_later_end_and_a_stronger_mode_win() {
        let p = ClientPause::new(Clock::system());
        assert_eq!(p.current(), None);
        p.pause(PauseMode::All, Duration::from_secs(100));
        p.pause(PauseMode::Write, Duration::from_secs(200));
        assert_eq!(p.current(), Some(PauseMode::All));
        // A shorter pause does not shorten the one in force.
        p.pause(PauseMode::Write, Duration::ZERO);
        assert_eq!(p.current(), Some(PauseMode::All));
        assert!(p.holds_expiry());
        p.unpause();
        assert_eq!(p.current(), None);
        // A pause that already ended holds nothing.
        p.pause(PauseMode::All, Duration::ZERO);
        assert_eq!(p.current(), None);
        assert!(!p.holds_expiry());
    }

    #[tokio::test]
    async fn a_held_command_waits_until_an_unpause() {
        let p = std::sync::Arc::new(ClientPause::new(Clock::system()));
        p.pause(PauseMode::Write, Duration::from_secs(100));
        // A read is not held by a WRITE pause.
        p.wait_while(|m| m == PauseMode::All).await;
        let waiter = {
            let p = p.clone();
            tokio::spawn(async move { p.wait_while(|_| true).await })
        };
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!waiter.is_finished());
        p.unpause();
        waiter.await.unwrap();
        // A huge timeout is a pause without end, not an overflow.
        p.pause(PauseMode::All, Duration::MAX);
        assert_eq!(p.current(), Some(PauseMode::All));
    }

    #[tokio::test]
    async fn a_failover_holds_writes_until_it_ends_whatever_client_unpause_does() {
        let p = std::sync::Arc::new(ClientPause::new(Clock::system()));
        p.hold_writes_for_failover(true);
        assert_eq!(p.current(), Some(PauseMode::Write));
        // Reads go on.
        p.wait_while(|m| m == PauseMode::All).await;
        p.pause(PauseMode::All, Duration::from_secs(100));
        assert_eq!(p.current(), Some(PauseMode::All));
        p.unpause();
        assert_eq!(
            p.current(),
            Some(PauseMode::Write),
            "CLIENT UNPAUSE keeps the failover's"
        );
        let write = {
            let p = p.clone();
            tokio::spawn(async move { p.wait_while(|_| true).await })
        };
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!write.is_finished());
        p.hold_writes_for_failover(false);
        write.await.unwrap();
        assert_eq!(p.current(), None);
    }
}
