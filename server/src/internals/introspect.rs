//! A test's view into one running server: the counters and switches the regression tests
//! read or flip that no command shows.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::state::Shared;
use crate::ServerHandle;

/// One server's insides, cloneable and `'static` (a test's closure can own it).
#[derive(Clone, Debug)]
pub struct Node(Arc<Shared>);

/// The insides of the server behind `handle`.
pub fn node(handle: &ServerHandle) -> Node {
    Node(handle.shared().clone())
}

impl Node {
    /// Clients blocked now in a blocking command (`BLPOP`, `WAIT`, ...).
    pub fn blocked_clients(&self) -> u64 {
        self.0.stats.blocked_clients.load(Ordering::Acquire)
    }

    /// Marks the server a replica (it refuses writes with `READONLY`) or a master again,
    /// without any replication link: a node that stopped taking writes.
    pub fn set_replica(&self, replica: bool) {
        self.0.set_replica(replica);
    }

    /// Asks the server to shut down, without waiting for it.
    pub fn request_shutdown(&self) {
        self.0.request_shutdown();
    }

    /// Drops every replica's link now (they reconnect and resynchronise).
    pub fn disconnect_replicas(&self) {
        self.0.replication.disconnect_replicas();
    }

    /// Whether a replica link is attached.
    pub fn has_attached_replicas(&self) -> bool {
        self.0.replication.has_attached_replicas()
    }

    /// Whether writes are being fed into the replication stream (the backlog is kept).
    pub fn feeds_replication_stream(&self) -> bool {
        self.0.replication.feeds_stream()
    }

    /// Starts or stops recording the effects of each script run.
    pub fn record_script_effects(&self, on: bool) {
        self.0.scripting().record_effects(on);
    }

    /// The write commands the last script run propagated, as recorded.
    pub fn last_script_effects(&self) -> Vec<Vec<Bytes>> {
        self.0.scripting().last_effects()
    }

    /// Bytes the scripting engine holds between runs.
    pub fn script_retained_bytes(&self) -> usize {
        self.0.scripting().retained_bytes()
    }

    /// Each registered client's id and the bytes of push messages queued for it.
    pub fn queued_push_bytes(&self) -> Vec<(u64, usize)> {
        self.0
            .clients
            .list()
            .iter()
            .map(|c| (c.id, c.queued_push_bytes.load(Ordering::Relaxed)))
            .collect()
    }
}
