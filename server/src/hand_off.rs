//! Keeping long synchronous work off the async workers of the runtime the server lives in.
//!
//! A command runs synchronously inside the task of its connection (or of an in-process
//! client). Redis is single-threaded and may stand still for a slow command; an embedded
//! server may not, since the tokio runtime it runs in belongs to someone else: while a worker
//! thread is inside a long synchronous step, the tasks queued on that worker (other clients,
//! `BLPOP` deadlines, the expiry tick, the embedding program's own timers) wait with it.
//!
//! So long work *hands its worker off* first ([`hand_off_worker`]): the worker's core (its
//! queue of tasks) moves to another thread and the long step goes on here, on a thread that
//! no longer owns anything else. Two rules decide when:
//!
//! - **Before a step known to be long**: a command whose work grows with a collection or with
//!   the keyspace, when what it would walk is large (see [`crate::walk`]), hands off before it
//!   runs, whether it comes from a socket, an in-process client, a script or `EXEC`.
//! - **After a span of time**: a script or a transaction that has run for [`HAND_OFF_AFTER`]
//!   (checked by the Lua instruction hook, around every `redis.call`, and between the commands
//!   of `EXEC`) hands off, however that time was spent.
//!
//! Short work never pays: the lock path (`SET NX PX`, `GET`, a lock script) neither reads the
//! clock nor touches this module's state outside scripts and transactions.

use std::cell::Cell;
use std::time::Duration;

// The TSC clock: a script reads it around every `redis.call`, where `std::time::Instant` cost a
// system clock read each time.
use quanta::Instant;

/// How long a script or a transaction runs on its tokio worker before that worker's other
/// tasks are handed to another thread. Short scripts (every lock script) never pay for the
/// hand-off; one that has run this long, whether in Lua instructions or inside slow
/// `redis.call`s, stops holding up the timers and tasks of the runtime it is embedded in.
pub(crate) const HAND_OFF_AFTER: Duration = Duration::from_millis(1);

/// Where the running script or transaction stands with respect to its worker.
#[derive(Clone, Copy)]
enum State {
    /// No script or transaction is running on this thread.
    Idle,
    /// One started at this instant and still holds its worker.
    Holding(Instant),
    /// The worker's other tasks have moved to another thread (or cannot: a current-thread
    /// runtime): nothing more to do for this run.
    Done,
}

thread_local! {
    static STATE: Cell<State> = const { Cell::new(State::Idle) };
}

/// Notes that a script or a transaction starts on this thread now. Returns what was there
/// before, for [`end`] to put back (a script inside `EXEC` is a run inside a run).
pub(crate) fn start() -> Span {
    let outer = STATE.with(|s| s.get());
    if matches!(outer, State::Idle) {
        STATE.with(|s| s.set(State::Holding(Instant::now())));
    }
    Span { outer }
}

/// A run in progress on this thread (see [`start`]); ends it when dropped.
pub(crate) struct Span {
    outer: State,
}

impl Drop for Span {
    fn drop(&mut self) {
        if matches!(self.outer, State::Idle) {
            STATE.with(|s| s.set(State::Idle));
        }
    }
}

/// Called from the instruction hook, around every `redis.call` and between the commands of
/// `EXEC`: once the running script or transaction has run for [`HAND_OFF_AFTER`] (by the
/// clock, however that time was spent), hands its worker's other tasks away.
pub(crate) fn if_long() {
    STATE.with(|s| {
        if let State::Holding(started) = s.get() {
            if started.elapsed() >= HAND_OFF_AFTER && hand_off_worker() {
                s.set(State::Done);
            }
        }
    });
}

/// Called before a step known to be long (a command about to walk a large collection or the
/// keyspace): hands the worker off now, unless the running script or transaction already
/// did.
pub(crate) fn before_long_step() {
    STATE.with(|s| match s.get() {
        State::Done => {}
        State::Holding(_) => {
            if hand_off_worker() {
                s.set(State::Done);
            }
        }
        // A single command: its task yields when the command ends, so there is no state to
        // keep; the next command of the connection starts on whichever worker picks it up.
        State::Idle => {
            hand_off_worker();
        }
    });
}

/// Moves the tokio worker this code runs on (its queue of other clients' tasks) to a fresh
/// thread, and returns whether that took, so that the long work can go on here without
/// holding up those tasks. Returns false, having changed nothing, outside a multi-thread
/// runtime.
///
/// `block_in_place` hands the worker's core to a new thread, but takes the core back when
/// its closure returns before that thread has picked it up: a bare sleep inside loses that
/// race on a loaded machine, and the tasks queued here then wait for the whole step. So the
/// closure waits for a marker task spawned just before, which sits in this worker's own
/// queue and so runs only once the core has moved: in its LIFO slot, which other workers
/// cannot steal, or, on a runtime of one worker with that slot off (`Server::runtime`), in
/// its queue, which no other worker exists to steal from. Once moved, the core stays with the other thread: this task goes on here, coreless,
/// until it next yields.
///
/// On a current-thread runtime there is no other thread to hand anything to
/// (`block_in_place` would panic there): the work runs to its end on the only thread, as
/// everything does in Redis itself.
pub(crate) fn hand_off_worker() -> bool {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if !multi_thread {
        return false;
    }
    let (moved, picked_up) = std::sync::mpsc::sync_channel::<()>(1);
    tokio::spawn(async move {
        let _ = moved.send(());
    });
    tokio::task::block_in_place(|| picked_up.recv_timeout(Duration::from_millis(50)).is_ok())
}
