//! Leaving a role: a replica promoted to master (`REPLICAOF NO ONE`, [`stop_replica`]), the
//! end of a coordinated failover ([`end_failover`]), and what a restart does to replication
//! ([`reset_for_restart`]).

use std::sync::atomic::Ordering;

use crate::replication::*;
use crate::state::Shared;

/// Stops following a master, if this server does; returns whether it did.
pub(crate) fn stop_link(shared: &Shared) -> bool {
    let Some(link) = shared.replication.upstream.lock().link.take() else {
        return false;
    };
    link.stop.notify_waiters();
    link.stop.notify_one();
    true
}

/// What a restart does to replication (see [`crate::restart`]): the link to a master, if
/// any, is dropped and returned (to be made again once the node is back); the replicas are
/// forgotten (their connections were killed); and the node starts a fresh history, with a
/// new replication id, offset 0 and no backlog, as a restarted Redis without a snapshot does.
pub(crate) fn reset_for_restart(shared: &Shared) -> Option<(String, u16)> {
    let repl = &shared.replication;
    let master = repl
        .upstream
        .lock()
        .link
        .as_ref()
        .map(|m| (m.host.clone(), m.port));
    stop_link(shared);
    // Each side's state is replaced whole: nothing of the old history survives by accident.
    let mut down = repl.downstream.lock();
    *down = Downstream::default();
    *repl.upstream.lock() = Upstream::default();
    *repl.sync.lock() = SyncCounts::default();
    *repl.ids.lock() = Ids::fresh(new_replid());
    repl.offset.store(0, Ordering::Release);
    *repl.backlog.lock() = None;
    repl.recording.store(false, Ordering::Release);
    repl.attached.store(false, Ordering::Release);
    repl.following.store(false, Ordering::Release);
    drop(down);
    shared.set_replica(false);
    master
}

/// `REPLICAOF NO ONE`: stops following and becomes a master. Like Redis, a promoted replica
/// takes a new replication id and keeps its master's as `master_replid2`, valid up to the
/// offset it had applied, so that its fellow replicas can continue from it.
pub(crate) fn stop_replica(shared: &Shared) {
    let repl = &shared.replication;
    if stop_link(shared) {
        let mut ids = repl.ids.lock();
        ids.replid2 = std::mem::replace(&mut ids.replid, new_replid());
        ids.second_offset = repl.offset() as i64 + 1;
        // A new master with no replica yet: its stream selects anew, and the backlog's TTL
        // starts now.
        let mut down = repl.downstream.lock();
        down.last_db = -1;
        down.alone_since_ms = repl.now_ms().max(1);
    }
    repl.following.store(false, Ordering::Release);
    shared.set_replica(false);
}

/// Ends the coordinated failover that runs, if one does, and lifts its hold on writes. When
/// this server had already made itself a replica of the target (`failover-in-progress`),
/// `back_to_master` undoes that (an abort, or a target that refused to take over); after a
/// target accepted, this server stays its replica.
pub(crate) fn end_failover(shared: &Shared, back_to_master: bool) {
    let phase = {
        let mut f = shared.replication.failover.lock();
        let phase = f.phase;
        *f = Failover {
            generation: f.generation,
            ..Failover::default()
        };
        phase
    };
    if phase == Phase::None {
        return;
    }
    if phase == Phase::InProgress && back_to_master {
        stop_replica(shared);
    }
    shared.pause.hold_writes_for_failover(false);
}

/// What the replica's side does with the target's answer to `PSYNC ... FAILOVER`: a
/// continuation or a full resync means the target took over, and the failover is done; any
/// other answer aborts it, and this server is a master again.
pub(crate) fn failover_psync_answered(shared: &Shared, reply: &str) {
    if shared.replication.failover.lock().phase != Phase::InProgress {
        return;
    }
    let accepted = reply.starts_with("+CONTINUE") || reply.starts_with("+FULLRESYNC");
    if !accepted {
        tracing::warn!("FAILOVER aborted: the target rejected the psync request ({reply})");
    }
    end_failover(shared, !accepted);
}

/// Whether this server's next `PSYNC` asks its master to take over (`PSYNC ... FAILOVER`).
pub(crate) fn failover_in_progress(shared: &Shared) -> bool {
    shared.replication.failover.lock().phase == Phase::InProgress
}
