//! The clients' cron (Redis's `clientsCron`): four times a second, a look at every client's
//! published state, asking a connection to act only when there is something to do, so that
//! a request pays nothing for it.
//!
//! - A client idle more than two seconds that still holds buffers, or one whose query buffer
//!   is over 32 KiB, is poked: its connection looks at its buffers (see [`crate::querybuf`]).
//! - With `timeout` set, a client idle longer than that is poked, and its connection closes
//!   itself unless it is a subscriber, a replica or our master, as Redis spares those.
//!
//! A client waiting in a blocking command is left alone: it is not idle. A poke is a message
//! with nothing to write, sent through the push queue the connection already listens to (see
//! [`ClientHandle::poke`]).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::client::{ClientHandle, ClientRole};
use crate::querybuf::{BUSY_CHECK, IDLE, RESIZE_THRESHOLD};
use crate::state::Shared;

/// Runs until the server shuts down.
pub(crate) async fn run(shared: Arc<Shared>, _done: mpsc::Sender<()>) {
    let mut shutdown = shared.shutdown_signal();
    let mut tick = tokio::time::interval(BUSY_CHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
        let timeout = timeout_secs(&shared);
        shared.clients.for_each(|h| {
            // Only connections over TCP have buffers and a loop that answers pokes; an
            // in-process client is its embedder's to keep or drop.
            if h.addr.is_none() || h.waiting.load(Ordering::Relaxed) {
                return;
            }
            let idle = idle_for(&shared, h);
            let held = h.qbuf.load(Ordering::Relaxed)
                + h.qbuf_free.load(Ordering::Relaxed)
                + h.reply_buf.load(Ordering::Relaxed);
            let big = h.qbuf.load(Ordering::Relaxed) + h.qbuf_free.load(Ordering::Relaxed)
                > RESIZE_THRESHOLD;
            let due = timeout.is_some_and(|t| idle.as_secs() > t);
            if (idle > IDLE && held > 0) || big || due {
                h.poke();
            }
        });
    }
}

/// How long the client has sent no command (the server's clock, as `CLIENT LIST`'s `idle`).
pub(crate) fn idle_for(shared: &Shared, handle: &ClientHandle) -> Duration {
    match handle.last_interaction_ms.load(Ordering::Relaxed) {
        0 => handle.created.elapsed(),
        last => Duration::from_millis(shared.clock.now_ms().saturating_sub(last)),
    }
}

/// `timeout`: the seconds after which an idle client is closed, when set.
fn timeout_secs(shared: &Shared) -> Option<u64> {
    shared
        .config
        .get("timeout")
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|t| *t > 0)
}

/// Whether `timeout` closes this client now: an ordinary client (not a replica or our master,
/// not a subscriber) idle longer than it.
pub(crate) fn timed_out(shared: &Shared, handle: &ClientHandle, idle: Duration) -> bool {
    let Some(secs) = timeout_secs(shared) else {
        return false;
    };
    if idle.as_secs() <= secs {
        return false;
    }
    let info = handle.info.lock();
    info.role == ClientRole::Normal && info.sub + info.psub + info.ssub == 0
}
