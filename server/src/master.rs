//! Replication, the master's side: attaching a replica (`PSYNC`/`SYNC`: continuation from
//! the backlog or a full snapshot), and the master's cron that pings the stream and frees a
//! backlog nobody needs. The stream itself, the backlog and the acknowledgements are state,
//! in [`crate::replication`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::client::PushSender;
use crate::codec::encode;
use crate::frame::Frame;
use crate::replication::*;
use crate::state::Shared;

/// `repl-backlog-size` in bytes (Redis's default, 1mb, if unreadable).
pub(crate) fn backlog_size(shared: &Shared) -> u64 {
    shared
        .config
        .get("repl-backlog-size")
        .and_then(|v| crate::config::parse_memory(&v))
        .unwrap_or(1 << 20)
}

/// What a replica asked for: `PSYNC replid offset`, or the pre-2.8 `SYNC` (a snapshot with no
/// `+FULLRESYNC` line before it, which is also how `redis-cli --rdb` downloads one).
#[derive(Debug, Clone, Copy)]
pub(crate) enum SyncRequest<'a> {
    /// `PSYNC replid offset`.
    Psync(&'a [u8], &'a [u8]),
    /// `SYNC`.
    Sync,
}

/// Attaches the client that sent `PSYNC replid offset` as a replica: `+CONTINUE` and the bytes
/// it missed when the backlog has them, else `+FULLRESYNC`, an RDB snapshot and, from then on,
/// every fed chunk (`SYNC`: the snapshot alone, then the stream). Runs under the exclusive
/// gate, so no write falls between the snapshot (or the backlog's end) and the stream.
pub(crate) fn attach_replica(
    shared: &Arc<Shared>,
    sender: PushSender,
    client_id: u64,
    port: u16,
    request: SyncRequest<'_>,
) -> Frame {
    let repl = &shared.replication;
    let (replid, offset, legacy) = match request {
        SyncRequest::Psync(id, offset) => (id, offset, false),
        SyncRequest::Sync => (&b"?"[..], &b"-1"[..], true),
    };
    let asked_id = String::from_utf8_lossy(replid).into_owned();
    let asked_offset = std::str::from_utf8(offset)
        .ok()
        .and_then(|o| o.parse::<u64>().ok());
    // Held until the replica is in the list: a chunk fed meanwhile (a GETACK, a PING) must
    // be either in what it gets now or in what it gets next.
    let mut down = repl.downstream.lock();
    let mut out = BytesMut::new();
    let ack = match repl.try_partial(&asked_id, asked_offset) {
        Resync::Partial(missing) => {
            repl.sync.lock().partial_ok += 1;
            out.extend_from_slice(format!("+CONTINUE {}\r\n", repl.replid()).as_bytes());
            for chunk in missing {
                out.extend_from_slice(&chunk);
            }
            asked_offset.unwrap_or(1) - 1
        }
        Resync::Full => {
            {
                let mut sync = repl.sync.lock();
                sync.full += 1;
                if asked_id != "?" {
                    sync.partial_err += 1;
                }
            }
            repl.ensure_backlog(backlog_size(shared));
            if let Some(b) = repl.backlog.lock().as_mut() {
                b.resize(backlog_size(shared));
            }
            let (replid, offset) = (repl.replid(), repl.offset());
            let payload = crate::rdb::write::snapshot(
                shared,
                &crate::rdb::write::ReplInfo {
                    replid: replid.clone(),
                    offset,
                    stream_db: -1,
                },
            );
            if !legacy {
                out.extend_from_slice(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes());
            }
            out.extend_from_slice(format!("${}\r\n", payload.len()).as_bytes());
            out.extend_from_slice(&payload);
            // The stream restarts with an explicit SELECT for the new replica.
            down.last_db = -1;
            offset
        }
    };
    sender.handle.info.lock().role = crate::client::ClientRole::Replica;
    let addr = sender
        .handle
        .addr
        .map_or_else(|| "local".to_string(), |a| a.ip().to_string());
    down.links.push(ReplicaLink {
        client_id,
        sender,
        ack: Arc::new(AtomicU64::new(ack)),
        aof_ack: AtomicU64::new(0),
        last_ack_ms: AtomicU64::new(repl.now_ms()),
        addr,
        port,
        held: Vec::new(),
        paused: false,
    });
    repl.recording.store(true, Ordering::Release);
    repl.attached.store(true, Ordering::Release);
    down.alone_since_ms = 0;
    drop(down);
    start_pinging(shared);
    Frame::Raw(out.freeze())
}

/// Starts (once) the master's replication cron: every second it frees a backlog nobody has
/// needed for `repl-backlog-ttl` seconds, and every [`PING_PERIOD`] it sends `PING` down the
/// stream.
fn start_pinging(shared: &Arc<Shared>) {
    if shared.replication.pinging.swap(true, Ordering::AcqRel) {
        return;
    }
    let weak = Arc::downgrade(shared);
    tokio::spawn(async move {
        let mut since_ping = Duration::ZERO;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            since_ping += Duration::from_secs(1);
            let Some(shared) = weak.upgrade() else { return };
            let repl = &shared.replication;
            free_idle_backlog(&shared);
            if since_ping < PING_PERIOD {
                continue;
            }
            since_ping = Duration::ZERO;
            if repl.downstream.lock().links.is_empty() || repl.following.load(Ordering::Acquire) {
                continue;
            }
            let mut out = BytesMut::new();
            encode(&[Bytes::from_static(b"PING")], &mut out);
            repl.feed_chunk(out.freeze());
        }
    });
}

/// Redis's `repl-backlog-ttl`: once a master has had no replica for that many seconds (0:
/// never), it frees its backlog and takes a new replication id, so that nobody continues from
/// a history it no longer keeps. Its writes then feed nothing, as before any replica came.
fn free_idle_backlog(shared: &Shared) {
    let repl = &shared.replication;
    let ttl_secs = shared
        .config
        .get("repl-backlog-ttl")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(3600);
    let mut down = repl.downstream.lock();
    let since = down.alone_since_ms;
    if ttl_secs == 0 || since == 0 || repl.following.load(Ordering::Acquire) {
        return;
    }
    if repl.now_ms().saturating_sub(since) < ttl_secs * 1000 {
        return;
    }
    if !down.links.is_empty() || repl.backlog.lock().take().is_none() {
        return;
    }
    repl.recording.store(false, Ordering::Release);
    down.alone_since_ms = 0;
    *repl.ids.lock() = Ids::fresh(new_replid());
    drop(down);
    tracing::info!("replication backlog freed after {ttl_secs} s without replicas");
}
