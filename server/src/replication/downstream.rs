//! Replication, the master's side of the state: the replicas attached to this server, where
//! each stands (its acknowledged offsets, the stream held while it is paused), and where the
//! stream stands for them (the database it last selected, since when no replica is
//! attached). A promotion or a restart replaces this value; it is never reset field by field.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::client::PushSender;

/// One replica connected to this master.
#[derive(Debug)]
pub(crate) struct ReplicaLink {
    pub(crate) client_id: u64,
    pub(crate) sender: PushSender,
    pub(crate) ack: Arc<AtomicU64>,
    /// The offset the replica's own AOF has on disk (`REPLCONF ACK .. FACK offset`).
    pub(crate) aof_ack: AtomicU64,
    /// When it last acknowledged (milliseconds after the replication state's epoch): `INFO`'s
    /// `lag` is the seconds since.
    pub(crate) last_ack_ms: AtomicU64,
    pub(crate) addr: String,
    pub(crate) port: u16,
    /// Stream bytes held back while the link is paused.
    pub(crate) held: Vec<Bytes>,
    pub(crate) paused: bool,
}

impl ReplicaLink {
    /// Whether the replica acknowledged `offset`.
    pub(crate) fn acked(&self, offset: u64) -> bool {
        self.ack.load(Ordering::Acquire) >= offset
    }
}

/// The master's side of replication. Held under one lock, which is also what orders the
/// stream's chunks: whoever numbers a chunk holds it.
#[derive(Debug)]
pub(crate) struct Downstream {
    /// The attached replicas.
    pub(crate) links: Vec<ReplicaLink>,
    /// The database the stream last selected (-1: none yet, the next chunk selects).
    pub(crate) last_db: i64,
    /// Milliseconds after the replication epoch when the last replica left (0 while one is
    /// attached, or before any came): the backlog is freed `repl-backlog-ttl` seconds later.
    pub(crate) alone_since_ms: u64,
}

impl Default for Downstream {
    fn default() -> Self {
        Downstream {
            links: Vec::new(),
            last_db: -1,
            alone_since_ms: 0,
        }
    }
}

/// Resynchronisations served, for `INFO stats`.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SyncCounts {
    pub(crate) full: u64,
    pub(crate) partial_ok: u64,
    pub(crate) partial_err: u64,
}
