//! Replication, the replica's side of the state: the link to a master, where its stream
//! stands (the database it selected, when it last spoke, since when the link is down), what
//! this replica's AOF holds of it, and the lag a test may impose. A restart replaces this
//! value; it is never reset field by field.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// This server's link to its master, when it is a replica.
#[derive(Debug)]
pub(crate) struct MasterLink {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) stop: Arc<Notify>,
    pub(crate) up: Arc<AtomicBool>,
}

/// The replica's side of replication.
#[derive(Debug, Default)]
pub(crate) struct Upstream {
    /// The link, while this server follows a master.
    pub(crate) link: Option<MasterLink>,
    /// How long each command of the stream waits before it is applied (a driven fault).
    pub(crate) lag: Duration,
    /// The master's offset up to which our AOF is on disk (what `FACK` says).
    pub(crate) fsynced_offset: u64,
    /// The database the master's stream last selected, so that a continued stream
    /// (`+CONTINUE`) applies to the same one.
    pub(crate) stream_db: u64,
    /// Milliseconds after the replication epoch when the master last sent something, and
    /// when the link went down (`INFO`'s `master_last_io_seconds_ago`,
    /// `master_link_down_since_seconds`; 0: never).
    pub(crate) last_io_ms: u64,
    pub(crate) down_since_ms: u64,
}
