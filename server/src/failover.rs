//! A coordinated failover (`FAILOVER`, Redis 6.2+): the master hands its role to a replica
//! without losing a write.
//!
//! It is the manual failover this project teaches, done by the server itself:
//! 1. the master holds every write (as `CLIENT PAUSE WRITE` would, but with no end of its
//!    own, and `CLIENT UNPAUSE` does not lift it), so the stream stops growing;
//! 2. it waits until the target (`TO host port`, or else the first replica to get there) has
//!    acknowledged the whole stream, asking for acknowledgements meanwhile;
//! 3. it makes itself a replica of the target, and its `PSYNC` carries `FAILOVER`: the target,
//!    finding its own replication id in the request, promotes itself and continues the old
//!    master's stream from where both stand ([`crate::promote`], the target's side is in
//!    `PSYNC`);
//! 4. once the target accepted, the writes held on the old master run, and are refused with
//!    `READONLY`: it is a replica now. Nothing was acknowledged that the new master lacks.
//!
//! `TIMEOUT ms` bounds step 2: past it the failover is aborted and the writes run on the old
//! master, unless `FORCE` was given, in which case the master fails over anyway — and what the
//! target had not received is lost, which is exactly the lesson of an unsafe failover.
//! `FAILOVER ABORT` stops it at any step before the target accepts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::frame::Frame;
use crate::promote::end_failover;
use crate::replication::{Phase, ReplicaLink};
use crate::state::Shared;

/// What `FAILOVER` was asked to do.
#[derive(Debug, Default)]
pub(crate) struct Request {
    /// `TO host port`.
    pub(crate) target: Option<(String, i64)>,
    /// `TIMEOUT ms`.
    pub(crate) timeout_ms: Option<u64>,
    /// `FORCE`.
    pub(crate) force: bool,
}

/// How often the failover asks the replicas for an acknowledgement while it waits. Each
/// request is part of the stream (it moves the master's offset), so it is not sent again
/// before the previous one had time to be answered.
const ACK_EVERY: Duration = Duration::from_millis(100);

/// Starts a failover with Redis's checks and errors, in Redis's order; the caller replies
/// `+OK` on success.
pub(crate) fn start(shared: &Arc<Shared>, req: Request) -> Result<(), Frame> {
    let repl = &shared.replication;
    let mut f = repl.failover.lock();
    if f.phase != Phase::None {
        return Err(Frame::error("ERR FAILOVER already in progress."));
    }
    if repl.upstream.lock().link.is_some() {
        return Err(Frame::error(
            "ERR FAILOVER is not valid when server is a replica.",
        ));
    }
    let target = {
        let down = repl.downstream.lock();
        if down.links.is_empty() {
            return Err(Frame::error("ERR FAILOVER requires connected replicas."));
        }
        if req.force && (req.timeout_ms.is_none() || req.target.is_none()) {
            return Err(Frame::error(
                "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
            ));
        }
        match &req.target {
            None => None,
            Some((host, port)) => {
                let Some(link) = down.links.iter().find(|l| is_at(l, host, *port)) else {
                    return Err(Frame::error(
                        "ERR FAILOVER target HOST and PORT is not a replica.",
                    ));
                };
                Some((host.clone(), link.port))
            }
        }
    };
    f.phase = Phase::WaitForSync;
    f.target = target;
    f.deadline_ms = req
        .timeout_ms
        .map(|t| shared.clock.now_ms().saturating_add(t));
    f.force = req.force;
    f.generation += 1;
    let generation = f.generation;
    drop(f);
    shared.pause.hold_writes_for_failover(true);
    tokio::spawn(drive(shared.clone(), generation));
    Ok(())
}

/// Whether `link` is the replica at `host:port`, as `FAILOVER TO` names it (Redis's
/// `findReplica`: its address, case-insensitively, and the port it listens on).
fn is_at(link: &ReplicaLink, host: &str, port: i64) -> bool {
    link.addr.eq_ignore_ascii_case(host) && i64::from(link.port) == port
}

/// `FAILOVER ABORT`: `false` when no failover runs.
pub(crate) fn abort(shared: &Shared) -> bool {
    if shared.replication.failover.lock().phase == Phase::None {
        return false;
    }
    tracing::info!("FAILOVER aborted: Failover manually aborted");
    end_failover(shared, true);
    true
}

/// Waits for the target to catch up (or the deadline), then hands over; ends when the
/// failover `generation` is over, whoever ended it.
async fn drive(shared: Arc<Shared>, generation: u64) {
    let repl = &shared.replication;
    let mut shutdown = shared.shutdown_signal();
    let mut asked: Option<Instant> = None;
    loop {
        let hand_over = {
            let mut f = repl.failover.lock();
            if f.generation != generation || f.phase != Phase::WaitForSync {
                return;
            }
            let offset = repl.offset();
            let synced = {
                let down = repl.downstream.lock();
                down.links
                    .iter()
                    .filter(|l| match &f.target {
                        Some((host, port)) => is_at(l, host, i64::from(*port)),
                        None => true,
                    })
                    .find(|l| l.acked(offset))
                    .map(|l| {
                        (
                            f.target.clone().map_or_else(|| l.addr.clone(), |t| t.0),
                            l.port,
                        )
                    })
            };
            let late = f.deadline_ms.is_some_and(|d| shared.clock.now_ms() >= d);
            match synced {
                Some(target) => {
                    tracing::info!(
                        "Failover target {}:{} is synced, failing over.",
                        target.0,
                        target.1
                    );
                    f.target = Some(target.clone());
                    f.phase = Phase::InProgress;
                    Some(target)
                }
                // FORCE comes with a target (`start` checks it).
                None if late && f.force && f.target.is_some() => {
                    let target = f.target.clone().unwrap_or_default();
                    tracing::info!(
                        "FAILOVER to {}:{} time out exceeded, failing over.",
                        target.0,
                        target.1
                    );
                    f.phase = Phase::InProgress;
                    Some(target)
                }
                None if late => {
                    drop(f);
                    tracing::info!("FAILOVER aborted: Replica never caught up before timeout");
                    end_failover(&shared, true);
                    return;
                }
                None => None,
            }
        };
        if let Some((host, port)) = hand_over {
            // As Redis's replicationSetMaster: the replicas are let go (they come back to
            // whoever is master now), and this server follows the target, whose PSYNC carries
            // FAILOVER (see `crate::replica`).
            repl.disconnect_replicas();
            crate::replica::start_replica(&shared, host, port);
            return;
        }
        if asked.is_none_or(|t| t.elapsed() >= ACK_EVERY) {
            repl.request_acks();
            asked = Some(Instant::now());
        }
        tokio::select! {
            _ = repl.acked.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
            _ = shared.clock.advanced() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
}
