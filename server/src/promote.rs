//! Leaving a role: a replica promoted to master (`REPLICAOF NO ONE`, [`stop_replica`]), and
//! what a restart does to replication ([`reset_for_restart`]).

use std::sync::atomic::Ordering;

use crate::replication::*;
use crate::state::Shared;

/// Stops following a master, if this server does; returns whether it did.
pub(crate) fn stop_link(shared: &Shared) -> bool {
    let Some(link) = shared.replication.master.lock().take() else {
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
pub fn reset_for_restart(shared: &Shared) -> Option<(String, u16)> {
    let repl = &shared.replication;
    let master = repl
        .master
        .lock()
        .as_ref()
        .map(|m| (m.host.clone(), m.port));
    stop_link(shared);
    let mut replicas = repl.replicas.lock();
    replicas.clear();
    *repl.ids.lock() = Ids {
        replid: new_replid(),
        replid2: NO_ID.to_string(),
        second_offset: -1,
    };
    repl.offset.store(0, Ordering::Release);
    repl.last_db.store(-1, Ordering::Release);
    *repl.backlog.lock() = None;
    repl.recording.store(false, Ordering::Release);
    repl.attached.store(false, Ordering::Release);
    repl.alone_since_ms.store(0, Ordering::Release);
    repl.following.store(false, Ordering::Release);
    repl.lag_ms.store(0, Ordering::Release);
    for counter in [
        &repl.sync_full,
        &repl.sync_partial_ok,
        &repl.sync_partial_err,
        &repl.fsynced_offset,
        &repl.stream_db,
        &repl.down_since_ms,
    ] {
        counter.store(0, Ordering::Release);
    }
    drop(replicas);
    shared.set_replica(false);
    master
}

/// `REPLICAOF NO ONE`: stops following and becomes a master. Like Redis, a promoted replica
/// takes a new replication id and keeps its master's as `master_replid2`, valid up to the
/// offset it had applied, so that its fellow replicas can continue from it.
pub fn stop_replica(shared: &Shared) {
    let repl = &shared.replication;
    if stop_link(shared) {
        let mut ids = repl.ids.lock();
        ids.replid2 = std::mem::replace(&mut ids.replid, new_replid());
        ids.second_offset = repl.offset() as i64 + 1;
        repl.last_db.store(-1, Ordering::Release);
        // A new master with no replica yet: the backlog's TTL starts now.
        repl.alone_since_ms
            .store(repl.now_ms().max(1), Ordering::Release);
    }
    repl.following.store(false, Ordering::Release);
    shared.set_replica(false);
}
