//! Restarting a node in place, the way an operator restarts a crashed process: the last
//! failover control (`LATCHKEY.FAILOVER RESTART [AOF|NOAOF]` over the wire,
//! [`ServerHandle::restart`](crate::ServerHandle::restart) from Rust).
//!
//! First the crash: writes held for paused replicas are dropped, every connection closes
//! (clients, replicas, the link to our master), and the keyspace, the script cache and the
//! function libraries are gone, as the memory of a dead process is. Then the start: with `AOF`
//! the node replays its append-only file and keeps appending to it, as `redis-server
//! --appendonly yes` does at start; with `NOAOF` it starts empty and leaves the file alone, as
//! `redis-server --appendonly no` does. A node that followed a master follows it again (its
//! history is new, so it resynchronises in full); a master starts a new replication history.
//!
//! The node keeps its port, its clock and its configuration, and the [`Shared`] state stays the
//! same object, so every handle to it stays valid. Connections that arrive while it reloads
//! wait until it is back, instead of seeing a half-loaded keyspace. Where this differs from a
//! real restart: the listening socket stays open throughout (a client connects, then waits,
//! where it would be refused), `uptime_in_seconds` keeps counting, and in-process clients
//! ([`LocalClient`](crate::LocalClient)) are not disconnected.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::server::Shared;

/// Crashes the node and starts it again; with `aof`, from its append-only file.
pub async fn restart(shared: &Arc<Shared>, aof: bool) -> std::io::Result<()> {
    let master = {
        // Under the exclusive gate: no command is half-way through when the memory goes.
        // (A running script is waited for, with no busy limit.)
        let Ok(_gate) = shared.gate.exclusive(Duration::MAX).await else {
            return Err(std::io::Error::other("the gate is busy"));
        };
        shared.set_loading(true);
        shared.replication.discard_held();
        shared.clients.kill_all();
        let master = crate::replication::reset_for_restart(shared);
        // The file itself stays: every byte was written to it as it was appended.
        *shared.aof.write() = None;
        // The old keyspace is freed in the background: the restart does not wait for it.
        shared.keyspace.clear_all_async();
        shared.scripting.flush();
        shared.scripting.flush_libraries();
        for counter in [
            &shared.stats.connections_received,
            &shared.stats.commands_processed,
            &shared.stats.rejected_connections,
            &shared.stats.expired_keys,
            &shared.stats.dirty,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
        master
    };
    let appendonly = if aof { "yes" } else { "no" };
    let _ = shared.config.set("appendonly", appendonly);
    let loaded = match aof {
        true => crate::server::open_aof(shared).await,
        false => Ok(()),
    };
    if let Some((host, port)) = master {
        crate::replication::start_replica(shared, host, port);
    }
    shared.set_loading(false);
    loaded
}
