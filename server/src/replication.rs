//! Asynchronous replication, and the controls that make a failover lose a lock on purpose.
//!
//! The master turns every change into a stream of write commands (relative expiries made
//! absolute, expired keys as `DEL`), numbers its bytes with a replication offset, and sends it
//! to each replica. A replica connects like Redis's own (`PING`, `REPLCONF`, `PSYNC ? -1`),
//! loads a snapshot, applies the stream, and acknowledges offsets with `REPLCONF ACK`, which is
//! what `WAIT` counts.
//!
//! Where this differs from Redis: the snapshot after `+FULLRESYNC` is a dump of RESP commands,
//! not an RDB file, so a real `redis-server` cannot replicate from latchkey (nor latchkey from
//! it) yet; there is no backlog, so a reconnecting replica always resyncs in full.
//!
//! The failover controls (pause the stream to a replica, crash the master, promote a replica)
//! act where the real failure would: a paused stream is held on the master, so a crash loses
//! exactly the writes no replica has received.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::client::PushSender;
use crate::cmd::{self, CommandSpec};
use crate::codec::{Decoder, Parsed};
use crate::db::{Entry, Value};
use crate::frame::{Frame, Protocol};
use crate::server::Shared;

/// One replica connected to this master.
#[derive(Debug)]
struct ReplicaLink {
    client_id: u64,
    sender: PushSender,
    ack: Arc<AtomicU64>,
    addr: String,
    port: u16,
    /// Stream bytes held back while the link is paused.
    held: Vec<Bytes>,
    paused: bool,
}

/// This server's link to its master, when it is a replica.
#[derive(Debug)]
struct MasterLink {
    host: String,
    port: u16,
    stop: Arc<Notify>,
    up: Arc<AtomicBool>,
    offset: Arc<AtomicU64>,
}

/// Replication state of one server, master side and replica side.
#[derive(Debug)]
pub struct Replication {
    /// Replication id (40 hex characters).
    pub replid: String,
    offset: AtomicU64,
    last_db: AtomicI64,
    replicas: Mutex<Vec<ReplicaLink>>,
    has_replicas: AtomicBool,
    acked: Notify,
    master: Mutex<Option<MasterLink>>,
    /// Replica side: how long each command of the stream waits before it is applied.
    lag_ms: AtomicU64,
}

impl Replication {
    /// Fresh state for a master with no replicas.
    pub fn new(replid: String) -> Replication {
        Replication {
            replid,
            offset: AtomicU64::new(0),
            last_db: AtomicI64::new(-1),
            replicas: Mutex::new(Vec::new()),
            has_replicas: AtomicBool::new(false),
            acked: Notify::new(),
            master: Mutex::new(None),
            lag_ms: AtomicU64::new(0),
        }
    }

    /// Replica side: delays applying (and acknowledging) the stream by `lag`, to show a lagging
    /// replica; zero applies at once.
    pub fn set_lag(&self, lag: Duration) {
        self.lag_ms.store(lag.as_millis() as u64, Ordering::Release);
    }

    fn lag(&self) -> Duration {
        Duration::from_millis(self.lag_ms.load(Ordering::Acquire))
    }

    /// `master_repl_offset`.
    pub fn offset(&self) -> u64 {
        self.offset.load(Ordering::Acquire)
    }

    /// Whether any replica is attached (then writes take the gate exclusively, so the stream
    /// order is the order the keyspace saw).
    pub fn has_replicas(&self) -> bool {
        self.has_replicas.load(Ordering::Acquire)
    }

    /// Appends commands to the stream (emitting `SELECT` when the database changes) and sends
    /// them to every replica. Returns the new offset.
    pub fn feed(&self, db: usize, commands: &[Vec<Bytes>]) -> u64 {
        if !self.has_replicas() || commands.is_empty() {
            return self.offset();
        }
        let mut out = BytesMut::new();
        if self.last_db.swap(db as i64, Ordering::AcqRel) != db as i64 {
            encode(
                &[Bytes::from_static(b"SELECT"), Bytes::from(db.to_string())],
                &mut out,
            );
        }
        for c in commands {
            encode(c, &mut out);
        }
        self.feed_chunk(out.freeze())
    }

    /// Numbers an encoded piece of the stream and sends it to every replica (or holds it for
    /// a paused one). Returns the new offset.
    fn feed_chunk(&self, chunk: Bytes) -> u64 {
        let mut replicas = self.replicas.lock();
        let offset =
            self.offset.fetch_add(chunk.len() as u64, Ordering::AcqRel) + chunk.len() as u64;
        for r in replicas.iter_mut() {
            if r.paused {
                r.held.push(chunk.clone());
            } else {
                r.sender.send(Frame::Raw(chunk.clone()), chunk.len());
            }
        }
        offset
    }

    /// How many replicas have acknowledged `offset`.
    pub fn acked_count(&self, offset: u64) -> i64 {
        self.replicas
            .lock()
            .iter()
            .filter(|r| r.ack.load(Ordering::Acquire) >= offset)
            .count() as i64
    }

    /// Asks every replica for an acknowledgement (`REPLCONF GETACK *`). Like Redis, the
    /// request is part of the stream and counts in the offset.
    pub fn request_acks(&self) {
        if !self.has_replicas() {
            return;
        }
        let getack = [
            Bytes::from_static(b"REPLCONF"),
            Bytes::from_static(b"GETACK"),
            Bytes::from_static(b"*"),
        ];
        let mut out = BytesMut::new();
        encode(&getack, &mut out);
        self.feed_chunk(out.freeze());
    }

    /// Waits until `n` replicas acknowledged `offset` or the timeout passes; returns the count.
    pub async fn wait_for_acks(&self, n: i64, offset: u64, timeout: Option<Duration>) -> i64 {
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        loop {
            let acked = self.acked.notified();
            let count = self.acked_count(offset);
            if count >= n {
                return count;
            }
            self.request_acks();
            let tick = tokio::time::sleep(Duration::from_millis(100));
            match deadline {
                Some(d) => {
                    tokio::select! {
                        _ = acked => {}
                        _ = tick => {}
                        _ = tokio::time::sleep_until(d) => return self.acked_count(offset),
                    }
                }
                None => {
                    tokio::select! {
                        _ = acked => {}
                        _ = tick => {}
                    }
                }
            }
        }
    }

    /// Records `REPLCONF ACK offset` from the replica connected as `client_id`.
    pub fn ack(&self, client_id: u64, offset: u64) {
        for r in self.replicas.lock().iter() {
            if r.client_id == client_id {
                r.ack.fetch_max(offset, Ordering::AcqRel);
            }
        }
        self.acked.notify_waiters();
    }

    /// Forgets a replica whose connection closed.
    pub fn remove_replica(&self, client_id: u64) {
        let mut r = self.replicas.lock();
        r.retain(|l| l.client_id != client_id);
        self.has_replicas.store(!r.is_empty(), Ordering::Release);
    }

    /// Pauses or resumes the stream to every replica (held on this master meanwhile).
    pub fn set_paused(&self, paused: bool) {
        for r in self.replicas.lock().iter_mut() {
            r.paused = paused;
            if !paused {
                for chunk in r.held.drain(..) {
                    r.sender.send(Frame::Raw(chunk.clone()), chunk.len());
                }
            }
        }
    }

    /// Drops every byte held for paused replicas: what a crash loses.
    pub fn discard_held(&self) {
        for r in self.replicas.lock().iter_mut() {
            r.held.clear();
        }
    }

    /// Whether this server follows a master, and whether the link is up.
    pub fn master_link(&self) -> Option<(String, u16, bool, u64)> {
        self.master.lock().as_ref().map(|m| {
            (
                m.host.clone(),
                m.port,
                m.up.load(Ordering::Acquire),
                m.offset.load(Ordering::Acquire),
            )
        })
    }

    /// The body of `INFO replication`.
    pub fn info(&self) -> String {
        let mut s = String::new();
        match self.master_link() {
            Some((host, port, up, offset)) => {
                s.push_str(&format!(
                    "role:slave\r\nmaster_host:{host}\r\nmaster_port:{port}\r\nmaster_link_status:{}\r\nslave_repl_offset:{offset}\r\nslave_read_only:1\r\nconnected_slaves:0\r\n",
                    if up { "up" } else { "down" }
                ));
            }
            None => {
                let replicas = self.replicas.lock();
                s.push_str(&format!(
                    "role:master\r\nconnected_slaves:{}\r\n",
                    replicas.len()
                ));
                let offset = self.offset();
                for (i, r) in replicas.iter().enumerate() {
                    let ack = r.ack.load(Ordering::Acquire);
                    s.push_str(&format!(
                        "slave{i}:ip={},port={},state=online,offset={ack},lag={}\r\n",
                        r.addr,
                        r.port,
                        if ack >= offset { 0 } else { 1 }
                    ));
                }
            }
        }
        s.push_str(&format!(
            "master_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n",
            self.replid,
            self.offset()
        ));
        s
    }

    /// `ROLE`.
    pub fn role(&self) -> Frame {
        match self.master_link() {
            Some((host, port, up, offset)) => Frame::Array(vec![
                Frame::bulk("slave"),
                Frame::bulk(host),
                Frame::Integer(port as i64),
                Frame::bulk(if up { "connected" } else { "connect" }),
                Frame::Integer(offset as i64),
            ]),
            None => Frame::Array(vec![
                Frame::bulk("master"),
                Frame::Integer(self.offset() as i64),
                Frame::Array(
                    self.replicas
                        .lock()
                        .iter()
                        .map(|r| {
                            Frame::Array(vec![
                                Frame::bulk(r.addr.clone()),
                                Frame::bulk(r.port.to_string()),
                                Frame::bulk(r.ack.load(Ordering::Acquire).to_string()),
                            ])
                        })
                        .collect(),
                ),
            ]),
        }
    }
}

/// Appends one command as a RESP array of bulk strings.
pub fn encode(args: &[Bytes], out: &mut BytesMut) {
    Frame::Array(args.iter().cloned().map(Frame::Bulk).collect()).encode(Protocol::Resp2, out);
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// What a write command becomes in the stream: its effect, with relative expiries made
/// absolute, so a replica applying it later reaches the same state.
pub fn effects(shared: &Shared, db: usize, spec: &CommandSpec, args: &[Bytes]) -> Vec<Vec<Bytes>> {
    let key = || args.get(1).cloned().unwrap_or_default();
    let state = || {
        shared
            .keyspace
            .db(db)
            .get(&args[1], 0, false)
            .map(|e| e.clone())
    };
    match spec.name {
        // Their inner writes were fed one by one as they ran.
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "exec" => Vec::new(),
        "set" | "setex" | "psetex" | "getset" | "setnx" => match state() {
            Some(Entry {
                value: Value::Str(v),
                expires_at,
            }) => {
                let mut c = vec![b("SET"), key(), v];
                if let Some(t) = expires_at {
                    c.extend([b("PXAT"), b(&t.to_string())]);
                }
                vec![c]
            }
            _ => vec![vec![b("DEL"), key()]],
        },
        "expire" | "pexpire" | "expireat" | "pexpireat" | "getex" | "persist" => match state() {
            Some(Entry {
                expires_at: Some(t),
                ..
            }) => vec![vec![b("PEXPIREAT"), key(), b(&t.to_string())]],
            Some(_) => vec![vec![b("PERSIST"), key()]],
            None => vec![vec![b("DEL"), key()]],
        },
        _ => vec![args.to_vec()],
    }
}

/// Attaches the client that sent `PSYNC` as a replica: answers `+FULLRESYNC`, the snapshot,
/// and from then on every fed chunk. Runs under the exclusive gate, so no write falls between
/// the snapshot and the stream.
pub fn attach_replica(shared: &Shared, sender: PushSender, client_id: u64, port: u16) -> Frame {
    let repl = &shared.replication;
    let payload = crate::rdb::write::snapshot(
        shared,
        &crate::rdb::write::ReplInfo {
            replid: repl.replid.clone(),
            offset: repl.offset(),
            stream_db: -1,
        },
    );
    let mut out = BytesMut::new();
    out.extend_from_slice(format!("+FULLRESYNC {} {}\r\n", repl.replid, repl.offset()).as_bytes());
    out.extend_from_slice(format!("${}\r\n", payload.len()).as_bytes());
    out.extend_from_slice(&payload);
    let addr = sender
        .handle
        .addr
        .map_or_else(|| "local".to_string(), |a| a.ip().to_string());
    let mut replicas = repl.replicas.lock();
    replicas.push(ReplicaLink {
        client_id,
        sender,
        ack: Arc::new(AtomicU64::new(0)),
        addr,
        port,
        held: Vec::new(),
        paused: false,
    });
    // The stream restarts with an explicit SELECT for the new replica.
    repl.last_db.store(-1, Ordering::Release);
    repl.has_replicas.store(true, Ordering::Release);
    Frame::Raw(out.freeze())
}

/// Makes this server a replica of `host:port` (stopping any previous link).
pub fn start_replica(shared: &Arc<Shared>, host: String, port: u16) {
    stop_replica(shared);
    shared.set_replica(true);
    let stop = Arc::new(Notify::new());
    let up = Arc::new(AtomicBool::new(false));
    let offset = Arc::new(AtomicU64::new(0));
    *shared.replication.master.lock() = Some(MasterLink {
        host: host.clone(),
        port,
        stop: stop.clone(),
        up: up.clone(),
        offset: offset.clone(),
    });
    let shared = shared.clone();
    tokio::spawn(async move {
        loop {
            let r = tokio::select! {
                r = follow(&shared, &host, port, &up, &offset) => r,
                _ = stop.notified() => return,
            };
            up.store(false, Ordering::Release);
            if let Err(e) = r {
                tracing::info!("replication link to {host}:{port} down: {e}");
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = stop.notified() => return,
            }
        }
    });
}

/// `REPLICAOF NO ONE`: stops following and becomes a master.
pub fn stop_replica(shared: &Shared) {
    if let Some(link) = shared.replication.master.lock().take() {
        link.stop.notify_waiters();
        link.stop.notify_one();
    }
    shared.set_replica(false);
}

type LinkReader = BufReader<tokio::net::tcp::OwnedReadHalf>;

fn closed() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "master closed")
}

/// Reads one reply line of the handshake, skipping the bare newlines a Redis master sends to
/// keep the link alive while it prepares the snapshot.
async fn read_line(r: &mut LinkReader) -> std::io::Result<String> {
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await? == 0 {
            return Err(closed());
        }
        let line = line.trim_end();
        if !line.is_empty() {
            return Ok(line.to_string());
        }
    }
}

/// Reads the snapshot that follows `+FULLRESYNC`: `$<len>` and that many bytes (a snapshot
/// made on disk first), or `$EOF:<40-byte mark>` and bytes up to the same mark (a diskless
/// snapshot, streamed as it is made, whose length nobody knows in advance).
async fn read_snapshot(r: &mut LinkReader) -> std::io::Result<Vec<u8>> {
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
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).await?;
    Ok(payload)
}

fn command(args: &[&str]) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode(&args.iter().map(|a| b(a)).collect::<Vec<_>>(), &mut out);
    out.to_vec()
}

/// One replication session: handshake, snapshot, then the stream until the link drops.
async fn follow(
    shared: &Arc<Shared>,
    host: &str,
    port: u16,
    up: &AtomicBool,
    offset: &AtomicU64,
) -> std::io::Result<()> {
    let stream = TcpStream::connect((host, port)).await?;
    stream.set_nodelay(true)?;
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let my_port = shared.addr.lock().map_or(0, |a| a.port());
    wr.write_all(&command(&["PING"])).await?;
    read_line(&mut rd).await?;
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
    wr.write_all(&command(&["PSYNC", "?", "-1"])).await?;
    let full = read_line(&mut rd).await?;
    let start: u64 = full
        .split_whitespace()
        .nth(2)
        .and_then(|o| o.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("unexpected PSYNC reply {full:?}")))?;
    let payload = read_snapshot(&mut rd).await?;
    // Load the snapshot as the master's link client, over an empty keyspace.
    let (mut link, _pushes) = shared.clients.register(None, None);
    link.is_replication_link = true;
    cmd::execute(shared, &mut link, vec![b("FUNCTION"), b("FLUSH")]).await;
    let loaded = crate::rdb::read::load(shared, &payload)?;
    for code in loaded.functions {
        cmd::execute(
            shared,
            &mut link,
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
    let mut decoder = Decoder::default();
    offset.store(start, Ordering::Release);
    up.store(true, Ordering::Release);
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut ack_tick = tokio::time::interval(Duration::from_secs(1));
    let result = loop {
        tokio::select! {
            n = rd.read_buf(&mut buf) => {
                match n {
                    Ok(0) => break Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "master closed")),
                    Err(e) => break Err(e),
                    Ok(_) => {}
                }
                let lag = shared.replication.lag();
                if !lag.is_zero() {
                    // What just arrived is applied `lag` after it arrived.
                    tokio::time::sleep(lag).await;
                }
                loop {
                    let before = buf.len();
                    let parsed = match decoder.parse(&mut buf, u64::MAX) {
                        Ok(Some(p)) => p,
                        Ok(None) => break,
                        Err(e) => return Err(std::io::Error::other(e.to_string())),
                    };
                    let consumed = (before - buf.len()) as u64;
                    let Parsed::Command(args) = parsed else {
                        offset.fetch_add(consumed, Ordering::AcqRel);
                        continue;
                    };
                    let getack = args.len() >= 2
                        && args[0].eq_ignore_ascii_case(b"REPLCONF")
                        && args[1].eq_ignore_ascii_case(b"GETACK");
                    if getack {
                        // As in Redis, GETACK is part of the numbered stream, and the answer
                        // is the offset before it.
                        let now = offset.load(Ordering::Acquire);
                        wr.write_all(&command(&["REPLCONF", "ACK", &now.to_string()])).await?;
                        offset.fetch_add(consumed, Ordering::AcqRel);
                        continue;
                    }
                    cmd::execute(shared, &mut link, args).await;
                    offset.fetch_add(consumed, Ordering::AcqRel);
                }
            }
            _ = ack_tick.tick() => {
                let now = offset.load(Ordering::Acquire);
                wr.write_all(&command(&["REPLCONF", "ACK", &now.to_string()])).await?;
            }
        }
    };
    crate::net::cleanup_client(shared, &mut link);
    result
}
