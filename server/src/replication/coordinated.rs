//! The state of a coordinated failover (`FAILOVER`) on this master: which phase it is in,
//! toward which replica, and until when. The steps that move it are in [`crate::failover`].

/// Where a coordinated failover stands (`INFO replication`'s `master_failover_state`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// None runs.
    #[default]
    None,
    /// Writes are held; waiting for the target (or any replica) to acknowledge the whole
    /// stream.
    WaitForSync,
    /// This server made itself a replica of the target and is asking it, with
    /// `PSYNC ... FAILOVER`, to take over as master.
    InProgress,
}

impl Phase {
    /// The name `INFO replication` shows.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Phase::None => "no-failover",
            Phase::WaitForSync => "waiting-for-sync",
            Phase::InProgress => "failover-in-progress",
        }
    }
}

/// A coordinated failover's state.
#[derive(Debug, Default, Clone)]
pub(crate) struct Failover {
    /// Its phase.
    pub(crate) phase: Phase,
    /// The replica asked for (`TO host port`), or the one chosen once it caught up.
    pub(crate) target: Option<(String, u16)>,
    /// When waiting for the replica ends (`TIMEOUT`), on the server's clock.
    pub(crate) deadline_ms: Option<u64>,
    /// `FORCE`: at the deadline, fail over to the target even if it has not caught up.
    pub(crate) force: bool,
    /// Counts the failovers started, so that the task driving one ends when it is over.
    pub(crate) generation: u64,
}
