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
//!
//! A power cut ([`power_loss`], `ServerHandle::power_loss`) is the same crash and start with
//! one step between them: the AOF file is cut to the bytes that were on disk
//! ([`crate::durability`]), so the start replays only those.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::durability::{Durability, PowerLoss};
use crate::state::Shared;

/// Crashes the node and starts it again; with `aof`, from its append-only file.
pub(crate) async fn restart(shared: &Arc<Shared>, aof: bool) -> std::io::Result<()> {
    let master = crash_process(shared).await?;
    boot(shared, aof, master).await
}

/// A power cut and a boot: the process dies as in [`restart`], and the AOF loses what the page
/// cache held (it is cut to its durable length, see [`crate::durability`]); then the node
/// starts again, replaying what is left when it kept an AOF, empty when it did not.
pub(crate) async fn power_loss(shared: &Arc<Shared>) -> std::io::Result<PowerLoss> {
    let policy = shared.aof.read().as_ref().map(|a| a.policy());
    let master = crash_process(shared).await?;
    let durability = shared.aof_durability.lock().clone();
    let cut = match (policy, durability) {
        (Some(policy), Some(d)) => {
            let cut = d.cut(policy, shared.clock.now_ms());
            // What the page cache held is gone; the disk keeps the durable prefix.
            match std::fs::OpenOptions::new().write(true).open(d.path()) {
                Ok(f) => f.set_len(cut.durable)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            tracing::warn!(
                "power loss: the AOF {} keeps {} of its {} bytes",
                d.path().display(),
                cut.durable,
                cut.written
            );
            PowerLoss {
                written: cut.written,
                durable: cut.durable,
                last_fsync_ms: cut.last_fsync_ms,
            }
        }
        _ => PowerLoss {
            written: 0,
            durable: 0,
            last_fsync_ms: None,
        },
    };
    boot(shared, policy.is_some(), master).await?;
    Ok(cut)
}

/// The crash half of a restart: under the exclusive gate, every connection, the keyspace and
/// the scripts go; returns the master this node followed, if any.
async fn crash_process(shared: &Arc<Shared>) -> std::io::Result<Option<(String, u16)>> {
    // Under the exclusive gate: no command is half-way through when the memory goes.
    // (A running script is waited for, with no busy limit.)
    let Ok(_gate) = shared.gate.exclusive(Duration::MAX).await else {
        return Err(std::io::Error::other("the gate is busy"));
    };
    shared.set_loading(true);
    shared.replication.discard_held();
    shared.clients.kill_all();
    let master = crate::promote::reset_for_restart(shared);
    // A rewrite running in the background dies with the process: its thread stops and
    // leaves the file alone (given up before the file closes, which waits for a swap under
    // way to finish). What waited for the background slot is forgotten too.
    shared.aof_rewrite.reset();
    shared
        .background
        .save_scheduled
        .store(false, Ordering::Relaxed);
    // The file itself stays: every byte was written to it (to the page cache, at least) as it
    // was appended.
    shared.aof.set(None);
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
    Ok(master)
}

/// The start half of a restart: replays the AOF when `aof`, follows `master` again.
async fn boot(
    shared: &Arc<Shared>,
    aof: bool,
    master: Option<(String, u16)>,
) -> std::io::Result<()> {
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
    let path = crate::aof::path(&shared.config);
    let commands = crate::aof::load(&path)?;
    let loaded = commands.len();
    replay(shared, commands).await;
    let fsync = crate::aof::Fsync::parse(&shared.config.get("appendfsync").unwrap_or_default());
    let len = match std::fs::metadata(&path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(e),
    };
    let now = shared.clock.now_ms();
    let durability = {
        let mut slot = shared.aof_durability.lock();
        match slot.as_ref() {
            Some(d) if d.is_of(&path) => d.reopened(len, now),
            _ => *slot = Some(Arc::new(Durability::new(&path, len, now))),
        }
        slot.clone().expect("set above")
    };
    shared.aof.set(Some(crate::aof::Aof::open(
        path.clone(),
        fsync,
        shared.clock.clone(),
        durability,
    )?));
    tracing::info!("AOF {} loaded: {loaded} commands", path.display());
    start_flusher(shared);
    Ok(())
}

/// Runs the commands of an AOF against the server, as the link to a master would (writes
/// allowed on a replica), except that nothing blocks: a `BLPOP 0` or `WAIT` in a hostile file
/// answers at once instead of hanging the start, as Redis's AOF client does.
pub(crate) async fn replay(shared: &Arc<Shared>, commands: Vec<Vec<Bytes>>) {
    let (mut loader, _pushes) = shared.clients.register(None, None);
    loader.is_replication_link = true;
    loader.set_user(shared.acl.superuser().clone());
    loader.deny_blocking = true;
    for args in commands {
        crate::dispatch::execute(shared, &mut loader, args).await;
    }
    crate::state::cleanup_client(shared, &mut loader);
}

/// Loads the snapshot file (`dir`/`dbfilename`) at start, when there is one, as
/// `redis-server` does with its AOF off: its keys, then its function libraries.
pub(crate) async fn load_snapshot(shared: &Arc<Shared>) -> std::io::Result<()> {
    let Some((keys, functions)) = crate::rdb::file::load(shared)? else {
        return Ok(());
    };
    let load = functions
        .into_iter()
        .map(|code| {
            vec![
                Bytes::from_static(b"FUNCTION"),
                Bytes::from_static(b"LOAD"),
                Bytes::from_static(b"REPLACE"),
                code,
            ]
        })
        .collect();
    replay(shared, load).await;
    tracing::info!(keys, "loaded the snapshot file");
    Ok(())
}

/// How often the flush task looks at the clock: Redis's `hz 10`.
const FLUSH_TICK_MS: u64 = 100;

/// Starts the task that runs `appendfsync everysec`'s fsyncs as they come due, once per
/// server (it serves whichever AOF is open, and idles while none is). Does nothing under
/// another policy.
pub(crate) fn start_flusher(shared: &Arc<Shared>) {
    let fsync = crate::aof::Fsync::parse(&shared.config.get("appendfsync").unwrap_or_default());
    if fsync != crate::aof::Fsync::EverySec || shared.aof_flusher.swap(true, Ordering::AcqRel) {
        return;
    }
    let weak = Arc::downgrade(shared);
    let clock = shared.clock.clone();
    tokio::spawn(async move {
        loop {
            // On the server's clock: a virtual clock moves it only when advanced. Which
            // writes an fsync covers does not depend on when this runs (the model dates each
            // fsync itself); this only makes the file's real fsyncs follow.
            clock.sleep_until_ms(clock.now_ms() + FLUSH_TICK_MS).await;
            let Some(shared) = weak.upgrade() else { return };
            let aof = shared.aof.read();
            if let Some(aof) = aof.as_ref() {
                aof.catch_up();
            }
        }
    });
}
