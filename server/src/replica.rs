//! Replication, the replica's side: the link to a master (`REPLICAOF host port`), the
//! handshake, the snapshot or continuation, then applying and acknowledging the master's
//! stream. Its state (offset, lag, the master link) is in [`crate::replication`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::codec::{encode, Decoder, Parsed};
use crate::master::backlog_size;
use crate::promote::stop_link;
use crate::replication::*;
use crate::state::Shared;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Makes this server a replica of `host:port` (stopping any previous link).
pub(crate) fn start_replica(shared: &Arc<Shared>, host: String, port: u16) {
    stop_link(shared);
    shared.set_replica(true);
    shared.replication.following.store(true, Ordering::Release);
    shared.replication.upstream.lock().down_since_ms = 0;
    let stop = Arc::new(Notify::new());
    let up = Arc::new(AtomicBool::new(false));
    shared.replication.upstream.lock().link = Some(MasterLink {
        host: host.clone(),
        port,
        stop: stop.clone(),
        up: up.clone(),
    });
    let shared = shared.clone();
    tokio::spawn(async move {
        loop {
            let r = tokio::select! {
                r = follow(&shared, &host, port, &up) => r,
                _ = stop.notified() => return,
            };
            up.store(false, Ordering::Release);
            let repl = &shared.replication;
            repl.upstream.lock().down_since_ms = repl.now_ms().max(1);
            // A snapshot we cannot load will not load better at once: retry once a second,
            // like a Redis replica, instead of pulling it again and again.
            let mut retry = Duration::from_millis(100);
            if let Err(e) = r {
                if e.kind() == std::io::ErrorKind::InvalidData {
                    tracing::warn!("cannot load the snapshot of {host}:{port}: {e}");
                    retry = Duration::from_secs(1);
                } else {
                    tracing::info!("replication link to {host}:{port} down: {e}");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(retry) => {}
                _ = stop.notified() => return,
            }
        }
    });
}

/// The longest handshake line (`+FULLRESYNC ...`, `$<len>`) accepted from a master: a master
/// that sends more without a newline is cut off instead of filling our memory (Redis's replica
/// reads these lines into a fixed buffer of the same order).
const MAX_LINE: usize = 64 * 1024;

/// A snapshot announced with a length (`$<len>`) is read in pieces of at most this many bytes,
/// so that memory grows with the bytes that actually arrive, never with the claimed length.
const SNAPSHOT_STEP: usize = 1 << 20;

fn closed() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "master closed")
}

/// Reads one reply line of the handshake, skipping the bare newlines a Redis master sends to
/// keep the link alive while it prepares the snapshot. A line longer than [`MAX_LINE`] drops
/// the link.
async fn read_line<R: AsyncRead + Unpin>(r: &mut BufReader<R>) -> std::io::Result<String> {
    loop {
        let mut line = Vec::new();
        // `take` bounds what one line may cost: the rest of an over-long line is never read.
        let n = (&mut *r)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await?;
        if n == 0 {
            return Err(closed());
        }
        if line.last() != Some(&b'\n') {
            if line.len() > MAX_LINE {
                return Err(std::io::Error::other("master sent an over-long line"));
            }
            return Err(closed());
        }
        let line = String::from_utf8_lossy(&line);
        let line = line.trim_end();
        if !line.is_empty() {
            return Ok(line.to_string());
        }
    }
}

/// Reads the snapshot that follows `+FULLRESYNC`: `$<len>` and that many bytes (a snapshot
/// made on disk first), or `$EOF:<40-byte mark>` and bytes up to the same mark (a diskless
/// snapshot, streamed as it is made, whose length nobody knows in advance).
async fn read_snapshot<R: AsyncRead + Unpin>(r: &mut BufReader<R>) -> std::io::Result<Vec<u8>> {
    let header = read_line(r).await?;
    let bad = || std::io::Error::other(format!("unexpected snapshot header {header:?}"));
    let spec = header.strip_prefix('$').ok_or_else(bad)?;
    if let Some(mark) = spec.strip_prefix("EOF:") {
        let mark = mark.as_bytes();
        if mark.len() != 40 {
            return Err(bad());
        }
        let mut payload = Vec::new();
        loop {
            let chunk = r.fill_buf().await?;
            if chunk.is_empty() {
                return Err(closed());
            }
            let before = payload.len();
            payload.extend_from_slice(chunk);
            let n = chunk.len();
            // The mark may straddle two reads: look from 39 bytes before this one.
            let from = before.saturating_sub(mark.len() - 1);
            if let Some(at) = payload[from..].windows(mark.len()).position(|w| w == mark) {
                let end = from + at;
                r.consume(end + mark.len() - before);
                payload.truncate(end);
                return Ok(payload);
            }
            r.consume(n);
        }
    }
    let len: usize = spec.parse().map_err(|_| bad())?;
    // Never trust the announced length for the allocation: a master that claims terabytes and
    // sends nothing must not make us reserve them. Memory follows the bytes that arrive.
    let mut payload = Vec::with_capacity(len.min(SNAPSHOT_STEP));
    let got = (&mut *r).take(len as u64).read_to_end(&mut payload).await?;
    if got < len {
        return Err(closed());
    }
    Ok(payload)
}

/// `REPLCONF ACK <offset>`, plus `FACK <offset>` when this replica has an AOF: the offset up
/// to which it is on disk (as Redis 7.2 replicas report it, for `WAITAOF`).
fn ack_command(shared: &Shared) -> Vec<u8> {
    let repl = &shared.replication;
    let offset = repl.offset().to_string();
    let aof = shared.aof.read();
    let Some(aof) = aof.as_ref() else {
        return command(&["REPLCONF", "ACK", &offset]);
    };
    let fack = {
        let mut up = repl.upstream.lock();
        if aof.all_fsynced() {
            up.fsynced_offset = up.fsynced_offset.max(repl.offset());
        }
        up.fsynced_offset.to_string()
    };
    command(&["REPLCONF", "ACK", &offset, "FACK", &fack])
}

fn command(args: &[&str]) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode(&args.iter().map(|a| b(a)).collect::<Vec<_>>(), &mut out);
    out.to_vec()
}

/// One replication session: handshake, snapshot or continuation, then the stream until the
/// link drops.
async fn follow(
    shared: &Arc<Shared>,
    host: &str,
    port: u16,
    up: &AtomicBool,
) -> std::io::Result<()> {
    let stream = TcpStream::connect((host, port)).await?;
    stream.set_nodelay(true)?;
    let (rd, wr) = stream.into_split();
    follow_link(shared, rd, wr, up).await
}

/// The replica's side of a replication link over any byte stream: the handshake, the
/// snapshot or continuation, then the master's command stream until it ends. Whatever the
/// master sends — lines without end, a snapshot length it never delivers, a broken RDB,
/// garbage in the stream — ends in an error, never in a crash or in memory that grows beyond
/// the bytes received. [`start_replica`] runs it over TCP; the fuzz target `replica_stream`
/// runs it over bytes in memory.
#[doc(hidden)]
pub(crate) async fn follow_link<R, W>(
    shared: &Arc<Shared>,
    rd: R,
    mut wr: W,
    up: &AtomicBool,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut rd = BufReader::new(rd);
    let my_port = shared.addr.lock().map_or(0, |a| a.port());
    wr.write_all(&command(&["PING"])).await?;
    // A master with a password answers -NOAUTH here, as Redis's does: the AUTH comes next.
    read_line(&mut rd).await?;
    if let Some(password) = shared.config.get("masterauth").filter(|p| !p.is_empty()) {
        let user = shared.config.get("masteruser").filter(|u| !u.is_empty());
        let auth = match &user {
            Some(u) => command(&["AUTH", u, &password]),
            None => command(&["AUTH", &password]),
        };
        wr.write_all(&auth).await?;
        let reply = read_line(&mut rd).await?;
        if reply.starts_with('-') {
            tracing::warn!("Unable to AUTH to MASTER: {reply}");
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("the master refused AUTH: {reply}"),
            ));
        }
    }
    wr.write_all(&command(&[
        "REPLCONF",
        "listening-port",
        &my_port.to_string(),
    ]))
    .await?;
    read_line(&mut rd).await?;
    wr.write_all(&command(&["REPLCONF", "capa", "eof", "capa", "psync2"]))
        .await?;
    read_line(&mut rd).await?;
    // Ask to continue our own history: the master's stream we applied so far (or, on a fresh
    // server, an id the master does not know, which gets a full resync).
    let repl = &shared.replication;
    let (replid, next) = (repl.replid(), repl.offset() + 1);
    // A master handing over in a coordinated failover asks its target to take over.
    let psync = if crate::promote::failover_in_progress(shared) {
        command(&["PSYNC", &replid, &next.to_string(), "FAILOVER"])
    } else {
        command(&["PSYNC", &replid, &next.to_string()])
    };
    wr.write_all(&psync).await?;
    let reply = read_line(&mut rd).await?;
    crate::promote::failover_psync_answered(shared, &reply);
    let (mut link, _pushes) = shared.clients.register(None, None);
    link.is_replication_link = true;
    link.set_user(shared.acl.superuser().clone());
    link.handle.info.lock().role = crate::client::ClientRole::Master;
    let result = async {
        if let Some(rest) = reply.strip_prefix("+CONTINUE") {
            continue_from(shared, rest.trim());
            link.db = repl.upstream.lock().stream_db as usize;
        } else if reply.starts_with("+FULLRESYNC") {
            full_resync(shared, &mut link, &mut rd, &reply).await?;
        } else {
            return Err(std::io::Error::other(format!(
                "unexpected PSYNC reply {reply:?}"
            )));
        }
        repl.upstream.lock().last_io_ms = repl.now_ms();
        up.store(true, Ordering::Release);
        apply_stream(shared, &mut link, &mut rd, &mut wr).await
    }
    .await;
    crate::state::cleanup_client(shared, &mut link);
    result
}

/// `+CONTINUE [replid]`: keep the keyspace; if the master's id changed (it was promoted),
/// remember the old one as our `replid2`, as the master does.
fn continue_from(shared: &Shared, new_id: &str) {
    let repl = &shared.replication;
    let mut ids = repl.ids.lock();
    if !new_id.is_empty() && new_id != ids.replid {
        ids.replid2 = std::mem::replace(&mut ids.replid, new_id.to_string());
        ids.second_offset = repl.offset() as i64 + 1;
    }
    drop(ids);
    repl.ensure_backlog(backlog_size(shared));
}

/// `+FULLRESYNC replid offset`: load the snapshot over an empty keyspace and start a fresh
/// history at the master's id and offset.
async fn full_resync<R: AsyncRead + Unpin>(
    shared: &Arc<Shared>,
    link: &mut crate::client::Client,
    rd: &mut BufReader<R>,
    reply: &str,
) -> std::io::Result<()> {
    let mut words = reply.split_whitespace().skip(1);
    let (Some(replid), Some(start)) = (words.next(), words.next().and_then(|o| o.parse().ok()))
    else {
        return Err(std::io::Error::other(format!(
            "unexpected PSYNC reply {reply:?}"
        )));
    };
    let payload = read_snapshot(rd).await?;
    // An AOF holds the keyspace the snapshot is about to replace: as in Redis 7.0
    // (`readSyncBulkPayload`), it is closed first, so that nothing of the load reaches it,
    // and turned on again once the master's data set is here (`restart_aof_after_sync`).
    // Whether it is wanted is `appendonly`, as Redis asks `aof_enabled`: an AOF that an
    // earlier sync failed to turn on again is turned on by this one.
    let wanted = shared.config.get("appendonly").as_deref() == Some("yes");
    let switch = crate::command::aof_switch().filter(|_| wanted);
    if let Some(switch) = switch {
        (switch.off)(shared);
    }
    let loaded = crate::rdb::read::load(shared, &payload);
    if let (Err(_), Some(switch)) = (&loaded, switch) {
        // Nothing was replaced (a snapshot is parsed whole before the keyspace is touched):
        // the AOF goes on from this keyspace, rewritten.
        restart_aof_after_sync(shared, switch).await;
    }
    let loaded = loaded?;
    crate::dispatch::execute(shared, link, vec![b("FUNCTION"), b("FLUSH")]).await;
    for code in loaded.functions {
        crate::dispatch::execute(
            shared,
            link,
            vec![b("FUNCTION"), b("LOAD"), b("REPLACE"), code],
        )
        .await;
    }
    link.db = loaded
        .aux
        .iter()
        .find(|(k, _)| &k[..] == b"repl-stream-db")
        .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse::<usize>().ok())
        .filter(|db| *db < crate::db::NUM_DBS)
        .unwrap_or(0);
    let repl = &shared.replication;
    repl.upstream.lock().stream_db = link.db as u64;
    *repl.ids.lock() = Ids::fresh(replid.to_string());
    let _down = repl.downstream.lock();
    repl.offset.store(start, Ordering::Release);
    *repl.backlog.lock() = Some(Backlog::new(backlog_size(shared), start));
    repl.recording.store(true, Ordering::Release);
    drop(_down);
    if let Some(switch) = switch {
        restart_aof_after_sync(shared, switch).await;
    }
    Ok(())
}

/// Turns the AOF on again after a full sync (Redis's `restartAOFAfterSYNC`): a rewrite of the
/// keyspace the master sent, which replaces the old file once done; meanwhile the master's
/// writes wait in the rewrite's log. Tried again each second, ten times, if the rewrite cannot
/// start; Redis then exits, an embedded server keeps running with its AOF off (and says so).
async fn restart_aof_after_sync(shared: &Arc<Shared>, switch: crate::command::AofSwitch) {
    for _ in 0..10 {
        let started = {
            // `on` snapshots the keyspace: no command may run between it and the switch.
            let _gate = shared.gate.exclusive(Duration::MAX).await;
            (switch.on)(shared, false)
        };
        match started {
            Ok(()) => return,
            Err(_) => {
                tracing::warn!("Failed enabling the AOF after successful master synchronization! Trying it again in one second.");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    tracing::error!("this replica finished the synchronization with its master, but the AOF can't be turned on: it stays off");
}

/// Applies the master's stream, records it in our backlog, and acknowledges: once a second
/// and whenever the master sends `REPLCONF GETACK`.
async fn apply_stream<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    shared: &Arc<Shared>,
    link: &mut crate::client::Client,
    rd: &mut BufReader<R>,
    wr: &mut W,
) -> std::io::Result<()> {
    let repl = &shared.replication;
    let mut decoder = Decoder::default();
    let mut buf = BytesMut::with_capacity(16 * 1024);
    // The bytes received since the last complete command, as they came: the decoder consumes
    // a command's first arguments in one read and its last ones in a later read, and every one
    // of those bytes counts in the offset (and goes to the backlog) once the command is
    // complete. `consumed` of them are the decoder's so far. Each read copies only its own new
    // bytes here: copying the whole read buffer on every read would take time quadratic in a
    // large argument that arrives in many small reads.
    let mut current = BytesMut::new();
    let mut consumed = 0usize;
    let mut ack_tick = tokio::time::interval(Duration::from_secs(1));
    // `CLIENT KILL TYPE master` kills the link's client: drop the link, as Redis does; the
    // replica then reconnects and continues from its offset.
    let handle = link.handle.clone();
    loop {
        tokio::select! {
            _ = handle.killed() => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "master link killed",
                ));
            }
            n = rd.read_buf(&mut buf) => {
                let n = n?;
                if n == 0 {
                    return Err(closed());
                }
                current.extend_from_slice(&buf[buf.len() - n..]);
                repl.upstream.lock().last_io_ms = repl.now_ms();
                let lag = repl.lag();
                if !lag.is_zero() {
                    // What just arrived is applied `lag` after it arrived.
                    tokio::time::sleep(lag).await;
                }
                loop {
                    let before = buf.len();
                    let parsed = decoder.parse(&mut buf, u64::MAX);
                    // Counted even when the command is not complete yet (`Ok(None)`): the
                    // decoder keeps the arguments it has taken off the buffer.
                    consumed += before - buf.len();
                    let parsed = match parsed {
                        Ok(Some(p)) => p,
                        Ok(None) => break,
                        Err(e) => return Err(std::io::Error::other(e.to_string())),
                    };
                    let chunk = current.split_to(std::mem::take(&mut consumed)).freeze();
                    if let Parsed::Command(args) = parsed {
                        let getack = args.len() >= 2
                            && args[0].eq_ignore_ascii_case(b"REPLCONF")
                            && args[1].eq_ignore_ascii_case(b"GETACK");
                        if getack {
                            // As in Redis, GETACK is part of the numbered stream, and the
                            // answer is the offset before it.
                            wr.write_all(&ack_command(shared)).await?;
                        } else {
                            crate::dispatch::execute(shared, link, args).await;
                            repl.upstream.lock().stream_db = link.db as u64;
                        }
                    }
                    repl.record_from_master(chunk);
                }
            }
            _ = ack_tick.tick() => {
                wr.write_all(&ack_command(shared)).await?;
            }
        }
    }
}
