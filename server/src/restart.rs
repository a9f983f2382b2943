//! Loading the keyspace from the append-only file (at start, [`open_aof`]) and restarting a
//! node in place, the way an operator restarts a crashed process: the last
//! failover control (`LATCHKEY.FAILOVER RESTART [AOF|NOAOF]` over the wire,
//! `ServerHandle::restart` from Rust).
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
//! (`LocalClient`) are not disconnected.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::state::Shared;

/// Crashes the node and starts it again; with `aof`, from its append-only file.
pub(crate) async fn restart(shared: &Arc<Shared>, aof: bool) -> std::io::Result<()> {
    let master = {
        // Under the exclusive gate: no command is half-way through when the memory goes.
        // (A running script is waited for, with no busy limit.)
        let Ok(_gate) = shared.gate.exclusive(Duration::MAX).await else {
            return Err(std::io::Error::other("the gate is busy"));
        };
        shared.set_loading(true);
        shared.replication.discard_held();
        shared.clients.kill_all();
        let master = crate::promote::reset_for_restart(shared);
        // The file itself stays: every byte was written to it as it was appended.
        *shared.aof.write() = None;
        // The old keyspace is freed in the background: the restart does not wait for it.
        shared.keyspace.clear_all_async();
        shared.scripting().flush();
        shared.scripting().flush_libraries();
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
        true => open_aof(shared).await,
        false => Ok(()),
    };
    if let Some((host, port)) = master {
        crate::replica::start_replica(shared, host, port);
    }
    shared.set_loading(false);
    loaded
}

/// Replays the append-only file, then opens it for appending (and starts the everysec flush).
pub(crate) async fn open_aof(shared: &Arc<Shared>) -> std::io::Result<()> {
    let dir = shared.config.get("dir").unwrap_or_else(|| ".".into());
    let name = shared
        .config
        .get("appendfilename")
        .unwrap_or_else(|| "appendonly.aof".into());
    let path = std::path::Path::new(&dir).join(name);
    let commands = crate::aof::load(&path)?;
    let loaded = commands.len();
    replay(shared, commands).await;
    let fsync = crate::aof::Fsync::parse(&shared.config.get("appendfsync").unwrap_or_default());
    *shared.aof.write() = Some(crate::aof::Aof::open(path.clone(), fsync)?);
    tracing::info!("AOF {} loaded: {loaded} commands", path.display());
    if fsync == crate::aof::Fsync::EverySec && !shared.aof_flusher.swap(true, Ordering::AcqRel) {
        let weak = Arc::downgrade(shared);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let Some(shared) = weak.upgrade() else { return };
                let aof = shared.aof.read();
                if let Some(aof) = aof.as_ref() {
                    aof.flush_if_dirty();
                }
            }
        });
    }
    Ok(())
}

/// Runs the commands of an AOF against the server, as the link to a master would (writes
/// allowed on a replica), except that nothing blocks: a `BLPOP 0` or `WAIT` in a hostile file
/// answers at once instead of hanging the start, as Redis's AOF client does.
pub(crate) async fn replay(shared: &Arc<Shared>, commands: Vec<Vec<Bytes>>) {
    let (mut loader, _pushes) = shared.clients.register(None, None);
    loader.is_replication_link = true;
    loader.deny_blocking = true;
    for args in commands {
        crate::dispatch::execute(shared, &mut loader, args).await;
    }
    crate::state::cleanup_client(shared, &mut loader);
}
