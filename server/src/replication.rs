//! Asynchronous replication, and the controls that make a failover lose a lock on purpose.
//!
//! The master turns every change into a stream of write commands (relative expiries made
//! absolute, keys expired by the active cycle or by a read as `DEL`), numbers its bytes with a replication offset, keeps the
//! last `repl-backlog-size` bytes in a [`Backlog`] (freed after `repl-backlog-ttl` seconds
//! without a replica), and sends the stream to each replica. A
//! replica connects like Redis's own (`PING`, `REPLCONF listening-port`, `REPLCONF capa eof
//! capa psync2`, `PSYNC <replid> <offset+1>`) and gets either `+CONTINUE` and the bytes it
//! missed, when they are still in the backlog, or `+FULLRESYNC`, an RDB snapshot (see
//! [`crate::rdb`]) and the stream from there. It acknowledges offsets with `REPLCONF ACK` once
//! a second and on `REPLCONF GETACK` (which, as in Redis, is part of the numbered stream), and
//! adds `FACK <offset>` when it has an AOF; `WAIT` counts the first, `WAITAOF` the second. The
//! master sends `PING` down the stream every ten seconds, so an idle link stays alive.
//!
//! Like Redis's PSYNC2, a replica keeps the stream it applied in a backlog of its own and
//! takes its master's replication id; when promoted it gets a new id and keeps the old one as
//! `master_replid2` up to `second_repl_offset`, so the other replicas of the old master can
//! continue from it without a full resync.
//!
//! This is what makes latchkey and real `redis-server` (7.0) replicate from each other in both
//! directions, snapshot, stream, backlog and promotion included. Where this differs from
//! Redis: a replica cannot have replicas of its own (no chaining); a new `repl-backlog-size`
//! applies at the next full resync; a latchkey replica refuses, as a whole, a snapshot that holds a type
//! latchkey lacks (sets, streams, module values) and retries it once a second, where Redis
//! would load it; the snapshot latchkey writes uses the plain RDB encodings (no LZF, no
//! listpacks), which Redis converts as it loads; a replica with an AOF appends the stream to
//! it but not the snapshot (Redis rewrites its AOF after a full sync).
//!
//! The failover controls (pause the stream to a replica, crash the master, promote a replica)
//! act where the real failure would: a paused stream is held on the master, so a crash loses
//! exactly the writes no replica has received.

mod backlog;

pub use backlog::Backlog;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use parking_lot::{Mutex, ReentrantMutex, ReentrantMutexGuard};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::client::PushSender;
use crate::cmd::{self, CommandSpec};
use crate::codec::{Decoder, Parsed};
use crate::db::{Entry, Value};
use crate::frame::Frame;
use crate::server::Shared;

/// How often a master sends `PING` down the stream (Redis's `repl-ping-replica-period`), so
/// that an idle link does not look dead to a replica's `repl-timeout`.
const PING_PERIOD: Duration = Duration::from_secs(10);

/// One replica connected to this master.
#[derive(Debug)]
struct ReplicaLink {
    client_id: u64,
    sender: PushSender,
    ack: Arc<AtomicU64>,
    /// The offset the replica's own AOF has on disk (`REPLCONF ACK .. FACK offset`).
    aof_ack: AtomicU64,
    /// When it last acknowledged (milliseconds after the replication state's epoch): `INFO`'s
    /// `lag` is the seconds since.
    last_ack_ms: AtomicU64,
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
}

/// The replication ids of this server's history (Redis's PSYNC2 pair).
#[derive(Debug, Clone)]
struct Ids {
    /// The id of the stream this server serves (a replica: its master's).
    replid: String,
    /// The id of the stream it served before its last promotion, or forty zeros.
    replid2: String,
    /// The first offset that `replid2` does *not* cover, or -1.
    second_offset: i64,
}

const NO_ID: &str = "0000000000000000000000000000000000000000";

/// A fresh random replication id (40 hex characters).
pub fn new_replid() -> String {
    (0..40)
        .map(|_| char::from_digit(rand::random_range(0..16u32), 16).unwrap_or('0'))
        .collect()
}

/// Replication state of one server, master side and replica side.
#[derive(Debug)]
pub struct Replication {
    ids: Mutex<Ids>,
    offset: AtomicU64,
    last_db: AtomicI64,
    replicas: Mutex<Vec<ReplicaLink>>,
    backlog: Mutex<Option<Backlog>>,
    /// Whether the stream is recorded: a replica is attached, or a backlog is kept.
    recording: AtomicBool,
    /// Whether at least one replica is attached (`replicas` is not empty).
    attached: AtomicBool,
    /// Milliseconds after `epoch` when the last replica left (0 while one is attached): the
    /// backlog is freed `repl-backlog-ttl` seconds later.
    alone_since_ms: AtomicU64,
    /// Held by whoever changes the keyspace and feeds the change to the stream while other
    /// commands may run (see [`Shared::order_guard`](crate::server::Shared::order_guard)).
    order: ReentrantMutex<()>,
    /// Whether this server applies a master's stream (then its own writes feed nothing).
    following: AtomicBool,
    pinging: AtomicBool,
    acked: Notify,
    master: Mutex<Option<MasterLink>>,
    /// Replica side: how long each command of the stream waits before it is applied.
    lag_ms: AtomicU64,
    sync_full: AtomicU64,
    sync_partial_ok: AtomicU64,
    sync_partial_err: AtomicU64,
    /// Replica side: the master's offset up to which our AOF is on disk (what `FACK` says).
    fsynced_offset: AtomicU64,
    /// Replica side: the database the master's stream last selected, so that a continued
    /// stream (`+CONTINUE`) applies to the same one.
    stream_db: AtomicU64,
    /// Replica side: milliseconds after `epoch` when the master last sent something, and when
    /// the link went down (`INFO`'s `master_last_io_seconds_ago`, `..._down_since_seconds`).
    last_io_ms: AtomicU64,
    down_since_ms: AtomicU64,
    epoch: Instant,
    /// The server's memory limits (`client-output-buffer-limit replica`), once attached.
    limits: std::sync::OnceLock<Arc<crate::evict::Limits>>,
}

/// What a replica asked for with `PSYNC`, and what it gets.
enum Resync {
    /// `+CONTINUE`: the bytes it missed.
    Partial(Vec<Bytes>),
    /// `+FULLRESYNC`: a snapshot.
    Full,
}

impl Replication {
    /// Gives the stream the server's limits, so that a replica that stops reading is
    /// disconnected past `client-output-buffer-limit replica`.
    pub(crate) fn set_limits(&self, limits: Arc<crate::evict::Limits>) {
        let _ = self.limits.set(limits);
    }

    /// Fresh state for a master with no replicas.
    pub fn new(replid: String) -> Replication {
        Replication {
            ids: Mutex::new(Ids {
                replid,
                replid2: NO_ID.to_string(),
                second_offset: -1,
            }),
            offset: AtomicU64::new(0),
            last_db: AtomicI64::new(-1),
            replicas: Mutex::new(Vec::new()),
            backlog: Mutex::new(None),
            recording: AtomicBool::new(false),
            attached: AtomicBool::new(false),
            alone_since_ms: AtomicU64::new(0),
            order: ReentrantMutex::new(()),
            following: AtomicBool::new(false),
            pinging: AtomicBool::new(false),
            acked: Notify::new(),
            master: Mutex::new(None),
            lag_ms: AtomicU64::new(0),
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
            fsynced_offset: AtomicU64::new(0),
            stream_db: AtomicU64::new(0),
            last_io_ms: AtomicU64::new(0),
            down_since_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            limits: std::sync::OnceLock::new(),
        }
    }

    /// The replication id (`master_replid`).
    pub fn replid(&self) -> String {
        self.ids.lock().replid.clone()
    }

    /// Replica side: delays applying (and acknowledging) the stream by `lag`, to show a lagging
    /// replica; zero applies at once.
    pub fn set_lag(&self, lag: Duration) {
        self.lag_ms.store(lag.as_millis() as u64, Ordering::Release);
    }

    fn lag(&self) -> Duration {
        Duration::from_millis(self.lag_ms.load(Ordering::Acquire))
    }

    /// `master_repl_offset`: the offset of the last byte of the stream (a replica: the last
    /// byte of its master's stream it applied).
    pub fn offset(&self) -> u64 {
        self.offset.load(Ordering::Acquire)
    }

    /// Whether writes must be fed to the stream: a replica is attached, or a backlog is kept
    /// for replicas that may come back. Never on a replica, which feeds nothing: it records
    /// its master's stream as it arrives instead.
    pub fn feeds_stream(&self) -> bool {
        self.recording.load(Ordering::Acquire) && !self.following.load(Ordering::Acquire)
    }

    /// Whether a replica is attached to this master right now.
    pub fn has_attached_replicas(&self) -> bool {
        self.attached.load(Ordering::Acquire) && !self.following.load(Ordering::Acquire)
    }

    /// Takes the stream-order lock; see [`Shared::order_guard`](crate::server::Shared::order_guard),
    /// which decides when it is needed.
    pub fn lock_order(&self) -> ReentrantMutexGuard<'_, ()> {
        self.order.lock()
    }

    /// Appends commands to the stream (emitting `SELECT` when the database changes) and sends
    /// them to every replica. Returns the new offset.
    pub fn feed(&self, db: usize, commands: &[Vec<Bytes>]) -> u64 {
        if !self.feeds_stream() || commands.is_empty() {
            return self.offset();
        }
        let chunk = stream_chunk(|out| {
            for c in commands {
                encode(c, out);
            }
        });
        self.feed_encoded(db, chunk)
    }

    /// Appends commands already encoded in RESP (by [`encode_effects`], say) to the stream,
    /// after a `SELECT` when the database changes, and sends them to every replica. The
    /// same bytes go to the backlog and to each replica, shared, not copied. Returns the new
    /// offset.
    pub fn feed_encoded(&self, db: usize, commands: Bytes) -> u64 {
        if !self.feeds_stream() || commands.is_empty() {
            return self.offset();
        }
        if self.last_db.swap(db as i64, Ordering::AcqRel) != db as i64 {
            // Rare: one chunk with the SELECT in front.
            let chunk = stream_chunk(|out| {
                encode(
                    &[&b"SELECT"[..], itoa::Buffer::new().format(db).as_bytes()],
                    out,
                );
                out.put_slice(&commands);
            });
            return self.feed_chunk(chunk);
        }
        self.feed_chunk(commands)
    }

    /// Numbers an encoded piece of the stream, keeps it in the backlog and sends it to every
    /// replica (or holds it for a paused one). Returns the new offset.
    fn feed_chunk(&self, chunk: Bytes) -> u64 {
        let mut replicas = self.replicas.lock();
        if let Some(b) = self.backlog.lock().as_mut() {
            b.push(chunk.clone());
        }
        let offset =
            self.offset.fetch_add(chunk.len() as u64, Ordering::AcqRel) + chunk.len() as u64;
        for r in replicas.iter_mut() {
            if r.paused {
                r.held.push(chunk.clone());
            } else {
                let queued = r.sender.send(Frame::Raw(chunk.clone()), chunk.len());
                if let Some(l) = self.limits.get() {
                    let limit = l.output_limit(crate::evict::ClientClass::Replica);
                    crate::outbuf::enforce(&r.sender.handle, queued, limit, self.now_ms());
                }
            }
        }
        offset
    }

    /// Replica side: records bytes of the master's stream that were just applied.
    fn record_from_master(&self, chunk: Bytes) {
        let _replicas = self.replicas.lock();
        let len = chunk.len() as u64;
        if let Some(b) = self.backlog.lock().as_mut() {
            b.push(chunk);
        }
        self.offset.fetch_add(len, Ordering::AcqRel);
    }

    /// Starts a backlog if there is none (sized from `repl-backlog-size`).
    fn ensure_backlog(&self, shared: &Shared) {
        let mut b = self.backlog.lock();
        if b.is_none() {
            *b = Some(Backlog::new(backlog_size(shared), self.offset()));
        }
        self.recording.store(true, Ordering::Release);
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
        if self.replicas.lock().is_empty() || self.following.load(Ordering::Acquire) {
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

    /// How many replicas have `offset` on disk in their own AOF (what `WAITAOF` counts).
    pub fn aof_acked_count(&self, offset: u64) -> i64 {
        self.replicas
            .lock()
            .iter()
            .filter(|r| r.aof_ack.load(Ordering::Acquire) >= offset)
            .count() as i64
    }

    /// Records `REPLCONF ACK offset [FACK aof-offset]` from the replica connected as
    /// `client_id`.
    pub fn ack(&self, client_id: u64, offset: u64, fack: Option<u64>) {
        for r in self.replicas.lock().iter() {
            if r.client_id == client_id {
                r.ack.fetch_max(offset, Ordering::AcqRel);
                r.last_ack_ms.store(self.now_ms(), Ordering::Release);
                if let Some(f) = fack {
                    r.aof_ack.fetch_max(f, Ordering::AcqRel);
                }
            }
        }
        self.acked.notify_waiters();
    }

    /// Resolves when a replica acknowledges something, or after `tick` at the latest.
    pub async fn next_ack(&self, tick: Duration) {
        tokio::select! {
            _ = self.acked.notified() => {}
            _ = tokio::time::sleep(tick) => {}
        }
    }

    /// Whether the client with this id is an attached replica.
    pub fn is_replica_client(&self, client_id: u64) -> bool {
        self.attached.load(Ordering::Acquire)
            && self
                .replicas
                .lock()
                .iter()
                .any(|l| l.client_id == client_id)
    }

    /// Forgets a replica whose connection closed (the backlog stays, for its return).
    pub fn remove_replica(&self, client_id: u64) {
        let mut r = self.replicas.lock();
        r.retain(|l| l.client_id != client_id);
        self.attached.store(!r.is_empty(), Ordering::Release);
        if r.is_empty() {
            self.alone_since_ms
                .store(self.now_ms().max(1), Ordering::Release);
        }
        let keep = !r.is_empty() || self.backlog.lock().is_some();
        self.recording.store(keep, Ordering::Release);
    }

    /// Closes the connection of every replica, as `CLIENT KILL TYPE replica` does: they
    /// reconnect and resynchronise (partially, if the backlog still covers them).
    pub fn disconnect_replicas(&self) {
        for r in self.replicas.lock().iter() {
            r.sender.handle.kill();
        }
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
                self.offset(),
            )
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Whole seconds since `ms` (a time from [`now_ms`](Replication::now_ms)).
    fn seconds_since(&self, ms: u64) -> u64 {
        self.now_ms().saturating_sub(ms) / 1000
    }

    /// The replication lines of `INFO stats`: full and partial resynchronisations served.
    pub fn stats_info(&self) -> String {
        format!(
            "sync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\n",
            self.sync_full.load(Ordering::Relaxed),
            self.sync_partial_ok.load(Ordering::Relaxed),
            self.sync_partial_err.load(Ordering::Relaxed),
        )
    }

    /// Zeroes the counters of [`stats_info`](Replication::stats_info), for `CONFIG RESETSTAT`.
    pub fn reset_stats(&self) {
        self.sync_full.store(0, Ordering::Relaxed);
        self.sync_partial_ok.store(0, Ordering::Relaxed);
        self.sync_partial_err.store(0, Ordering::Relaxed);
    }

    /// The body of `INFO replication`.
    pub fn info(&self) -> String {
        let mut s = String::new();
        match self.master_link() {
            Some((host, port, up, offset)) => {
                // The fields and order of Redis 7.0's replica section.
                let last_io = match up {
                    true => self.seconds_since(self.last_io_ms.load(Ordering::Acquire)) as i64,
                    false => -1,
                };
                s.push_str(&format!(
                    "role:slave\r\nmaster_host:{host}\r\nmaster_port:{port}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{last_io}\r\nmaster_sync_in_progress:0\r\nslave_read_repl_offset:{offset}\r\nslave_repl_offset:{offset}\r\n",
                    if up { "up" } else { "down" }
                ));
                if !up {
                    // -1 until the link has been up once, as in Redis.
                    let since = match self.down_since_ms.load(Ordering::Acquire) {
                        0 => -1,
                        ms => self.seconds_since(ms) as i64,
                    };
                    s.push_str(&format!("master_link_down_since_seconds:{since}\r\n"));
                }
                s.push_str("slave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\nconnected_slaves:0\r\n");
            }
            None => {
                let replicas = self.replicas.lock();
                s.push_str(&format!(
                    "role:master\r\nconnected_slaves:{}\r\n",
                    replicas.len()
                ));
                for (i, r) in replicas.iter().enumerate() {
                    let ack = r.ack.load(Ordering::Acquire);
                    let lag = self.seconds_since(r.last_ack_ms.load(Ordering::Acquire));
                    s.push_str(&format!(
                        "slave{i}:ip={},port={},state=online,offset={ack},lag={lag}\r\n",
                        r.addr, r.port,
                    ));
                }
            }
        }
        let ids = self.ids.lock().clone();
        let (active, size, first, histlen) = match self.backlog.lock().as_ref() {
            Some(b) => (1, b.size(), b.first_byte_offset(), b.histlen()),
            None => (0, 1 << 20, 0, 0),
        };
        s.push_str(&format!(
            "master_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{active}\r\nrepl_backlog_size:{size}\r\nrepl_backlog_first_byte_offset:{first}\r\nrepl_backlog_histlen:{histlen}\r\n",
            ids.replid,
            ids.replid2,
            self.offset(),
            ids.second_offset,
        ));
        s
    }

    /// Answers a `PSYNC replid offset`: a partial resync when `replid` is this server's
    /// history (its id, or its previous id up to where that history ended) and the backlog
    /// still holds every byte from `offset` on; else a full one.
    fn try_partial(&self, replid: &str, offset: Option<u64>) -> Resync {
        let Some(offset) = offset else {
            return Resync::Full;
        };
        let ids = self.ids.lock();
        let ours =
            replid == ids.replid || (replid == ids.replid2 && offset as i64 <= ids.second_offset);
        if !ours {
            return Resync::Full;
        }
        match self.backlog.lock().as_ref().and_then(|b| b.since(offset)) {
            Some(missing) => Resync::Partial(missing),
            None => Resync::Full,
        }
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

/// How much room [`stream_chunk`]'s buffer takes at a time.
const STREAM_BUFFER: usize = 64 * 1024;

thread_local! {
    /// Where this thread encodes pieces of the stream (see [`stream_chunk`]).
    static STREAM_BUF: std::cell::RefCell<BytesMut> = std::cell::RefCell::new(BytesMut::new());
}

/// Encodes a piece of the stream with `write` and returns it. The pieces are carved one after
/// the other out of a large per-thread buffer, so encoding a command allocates nothing: a
/// new buffer is taken once the last one is used up, and an old one is freed when the last
/// piece cut from it (in the backlog, on its way to a replica) is dropped.
pub fn stream_chunk(write: impl FnOnce(&mut BytesMut)) -> Bytes {
    STREAM_BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(STREAM_BUFFER);
        }
        write(&mut buf);
        buf.split().freeze()
    })
}

/// Appends one command to `out` in RESP, as a client would send it (an array of bulk strings).
/// Written straight into the buffer: no intermediate reply value is built.
pub fn encode<A: AsRef<[u8]>>(args: &[A], out: &mut BytesMut) {
    let mut n = itoa::Buffer::new();
    out.put_u8(b'*');
    out.put_slice(n.format(args.len()).as_bytes());
    out.put_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        out.put_u8(b'$');
        out.put_slice(n.format(a.len()).as_bytes());
        out.put_slice(b"\r\n");
        out.put_slice(a);
        out.put_slice(b"\r\n");
    }
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Appends to `out` what a write command that just ran becomes in the stream: its effect,
/// with relative expiries made absolute, so a replica applying it later reaches the same
/// state (`SET k v PXAT t`, `PEXPIREAT k t`, or `DEL k` for a key that is gone); the command
/// itself for the rest; nothing for scripts and transactions, whose inner writes were fed
/// one by one as they ran. Reads the key's new state in place, without copying its value.
pub fn encode_effects(
    shared: &Shared,
    db: usize,
    spec: &CommandSpec,
    args: &[Bytes],
    out: &mut BytesMut,
) {
    let key: &[u8] = args.get(1).map_or(&[], |k| &k[..]);
    let mut n = itoa::Buffer::new();
    match spec.name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "exec" => {}
        "set" | "setex" | "psetex" | "getset" | "setnx" => {
            let entry = shared.keyspace.db(db).get(key, 0, false);
            match entry.as_deref() {
                Some(Entry {
                    value: Value::Str(v),
                    expires_at: Some(t),
                    ..
                }) => encode(
                    &[&b"SET"[..], key, &v[..], b"PXAT", n.format(*t).as_bytes()],
                    out,
                ),
                Some(Entry {
                    value: Value::Str(v),
                    expires_at: None,
                    ..
                }) => encode(&[&b"SET"[..], key, &v[..]], out),
                _ => encode(&[&b"DEL"[..], key], out),
            }
        }
        "expire" | "pexpire" | "expireat" | "pexpireat" | "getex" | "persist" => {
            let expiry = shared
                .keyspace
                .db(db)
                .get(key, 0, false)
                .map(|e| e.expires_at);
            match expiry {
                Some(Some(t)) => encode(&[&b"PEXPIREAT"[..], key, n.format(t).as_bytes()], out),
                Some(None) => encode(&[&b"PERSIST"[..], key], out),
                None => encode(&[&b"DEL"[..], key], out),
            }
        }
        _ => encode(args, out),
    }
}

/// `repl-backlog-size` in bytes (Redis's default, 1mb, if unreadable).
fn backlog_size(shared: &Shared) -> u64 {
    shared
        .config
        .get("repl-backlog-size")
        .and_then(|v| crate::config::parse_memory(&v))
        .unwrap_or(1 << 20)
}

/// What a replica asked for: `PSYNC replid offset`, or the pre-2.8 `SYNC` (a snapshot with no
/// `+FULLRESYNC` line before it, which is also how `redis-cli --rdb` downloads one).
#[derive(Debug, Clone, Copy)]
pub enum SyncRequest<'a> {
    /// `PSYNC replid offset`.
    Psync(&'a [u8], &'a [u8]),
    /// `SYNC`.
    Sync,
}

/// Attaches the client that sent `PSYNC replid offset` as a replica: `+CONTINUE` and the bytes
/// it missed when the backlog has them, else `+FULLRESYNC`, an RDB snapshot and, from then on,
/// every fed chunk (`SYNC`: the snapshot alone, then the stream). Runs under the exclusive
/// gate, so no write falls between the snapshot (or the backlog's end) and the stream.
pub fn attach_replica(
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
    let mut replicas = repl.replicas.lock();
    let mut out = BytesMut::new();
    let ack = match repl.try_partial(&asked_id, asked_offset) {
        Resync::Partial(missing) => {
            repl.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
            out.extend_from_slice(format!("+CONTINUE {}\r\n", repl.replid()).as_bytes());
            for chunk in missing {
                out.extend_from_slice(&chunk);
            }
            asked_offset.unwrap_or(1) - 1
        }
        Resync::Full => {
            repl.sync_full.fetch_add(1, Ordering::Relaxed);
            if asked_id != "?" {
                repl.sync_partial_err.fetch_add(1, Ordering::Relaxed);
            }
            repl.ensure_backlog(shared);
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
            repl.last_db.store(-1, Ordering::Release);
            offset
        }
    };
    sender.handle.info.lock().role = crate::client::ClientRole::Replica;
    let addr = sender
        .handle
        .addr
        .map_or_else(|| "local".to_string(), |a| a.ip().to_string());
    replicas.push(ReplicaLink {
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
    repl.alone_since_ms.store(0, Ordering::Release);
    drop(replicas);
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
            if repl.replicas.lock().is_empty() || repl.following.load(Ordering::Acquire) {
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
    let since = repl.alone_since_ms.load(Ordering::Acquire);
    if ttl_secs == 0 || since == 0 || repl.following.load(Ordering::Acquire) {
        return;
    }
    if repl.now_ms().saturating_sub(since) < ttl_secs * 1000 {
        return;
    }
    let replicas = repl.replicas.lock();
    if !replicas.is_empty() || repl.backlog.lock().take().is_none() {
        return;
    }
    repl.recording.store(false, Ordering::Release);
    repl.alone_since_ms.store(0, Ordering::Release);
    *repl.ids.lock() = Ids {
        replid: new_replid(),
        replid2: NO_ID.to_string(),
        second_offset: -1,
    };
    drop(replicas);
    tracing::info!("replication backlog freed after {ttl_secs} s without replicas");
}

/// Makes this server a replica of `host:port` (stopping any previous link).
pub fn start_replica(shared: &Arc<Shared>, host: String, port: u16) {
    stop_link(shared);
    shared.set_replica(true);
    shared.replication.following.store(true, Ordering::Release);
    shared.replication.down_since_ms.store(0, Ordering::Release);
    let stop = Arc::new(Notify::new());
    let up = Arc::new(AtomicBool::new(false));
    *shared.replication.master.lock() = Some(MasterLink {
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
            repl.down_since_ms
                .store(repl.now_ms().max(1), Ordering::Release);
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

/// Stops following a master, if this server does; returns whether it did.
fn stop_link(shared: &Shared) -> bool {
    let Some(link) = shared.replication.master.lock().take() else {
        return false;
    };
    link.stop.notify_waiters();
    link.stop.notify_one();
    true
}

/// What a restart does to replication (see [`crate::restart`]): the link to a master, if
/// any, is dropped and returned (to be made again once the node is back); the replicas are
/// forgotten (their connections were killed); and the node starts a fresh history, with a
/// new replication id, offset 0 and no backlog, as a restarted Redis without a snapshot does.
pub fn reset_for_restart(shared: &Shared) -> Option<(String, u16)> {
    let repl = &shared.replication;
    let master = repl
        .master
        .lock()
        .as_ref()
        .map(|m| (m.host.clone(), m.port));
    stop_link(shared);
    let mut replicas = repl.replicas.lock();
    replicas.clear();
    *repl.ids.lock() = Ids {
        replid: new_replid(),
        replid2: NO_ID.to_string(),
        second_offset: -1,
    };
    repl.offset.store(0, Ordering::Release);
    repl.last_db.store(-1, Ordering::Release);
    *repl.backlog.lock() = None;
    repl.recording.store(false, Ordering::Release);
    repl.attached.store(false, Ordering::Release);
    repl.alone_since_ms.store(0, Ordering::Release);
    repl.following.store(false, Ordering::Release);
    repl.lag_ms.store(0, Ordering::Release);
    for counter in [
        &repl.sync_full,
        &repl.sync_partial_ok,
        &repl.sync_partial_err,
        &repl.fsynced_offset,
        &repl.stream_db,
        &repl.down_since_ms,
    ] {
        counter.store(0, Ordering::Release);
    }
    drop(replicas);
    shared.set_replica(false);
    master
}

/// `REPLICAOF NO ONE`: stops following and becomes a master. Like Redis, a promoted replica
/// takes a new replication id and keeps its master's as `master_replid2`, valid up to the
/// offset it had applied, so that its fellow replicas can continue from it.
pub fn stop_replica(shared: &Shared) {
    let repl = &shared.replication;
    if stop_link(shared) {
        let mut ids = repl.ids.lock();
        ids.replid2 = std::mem::replace(&mut ids.replid, new_replid());
        ids.second_offset = repl.offset() as i64 + 1;
        repl.last_db.store(-1, Ordering::Release);
        // A new master with no replica yet: the backlog's TTL starts now.
        repl.alone_since_ms
            .store(repl.now_ms().max(1), Ordering::Release);
    }
    repl.following.store(false, Ordering::Release);
    shared.set_replica(false);
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
    if aof.synced() >= aof.appended() {
        repl.fsynced_offset
            .fetch_max(repl.offset(), Ordering::AcqRel);
    }
    let fack = repl.fsynced_offset.load(Ordering::Acquire).to_string();
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
pub async fn follow_link<R, W>(
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
    // Ask to continue our own history: the master's stream we applied so far (or, on a fresh
    // server, an id the master does not know, which gets a full resync).
    let repl = &shared.replication;
    let (replid, next) = (repl.replid(), repl.offset() + 1);
    wr.write_all(&command(&["PSYNC", &replid, &next.to_string()]))
        .await?;
    let reply = read_line(&mut rd).await?;
    let (mut link, _pushes) = shared.clients.register(None, None);
    link.is_replication_link = true;
    link.handle.info.lock().role = crate::client::ClientRole::Master;
    let result = async {
        if let Some(rest) = reply.strip_prefix("+CONTINUE") {
            continue_from(shared, rest.trim());
            link.db = repl.stream_db.load(Ordering::Acquire) as usize;
        } else if reply.starts_with("+FULLRESYNC") {
            full_resync(shared, &mut link, &mut rd, &reply).await?;
        } else {
            return Err(std::io::Error::other(format!(
                "unexpected PSYNC reply {reply:?}"
            )));
        }
        repl.last_io_ms.store(repl.now_ms(), Ordering::Release);
        up.store(true, Ordering::Release);
        apply_stream(shared, &mut link, &mut rd, &mut wr).await
    }
    .await;
    crate::net::cleanup_client(shared, &mut link);
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
    repl.ensure_backlog(shared);
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
    let loaded = crate::rdb::read::load(shared, &payload)?;
    cmd::execute(shared, link, vec![b("FUNCTION"), b("FLUSH")]).await;
    for code in loaded.functions {
        cmd::execute(
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
    repl.stream_db.store(link.db as u64, Ordering::Release);
    *repl.ids.lock() = Ids {
        replid: replid.to_string(),
        replid2: NO_ID.to_string(),
        second_offset: -1,
    };
    let _replicas = repl.replicas.lock();
    repl.offset.store(start, Ordering::Release);
    *repl.backlog.lock() = Some(Backlog::new(backlog_size(shared), start));
    repl.recording.store(true, Ordering::Release);
    Ok(())
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
                repl.last_io_ms.store(repl.now_ms(), Ordering::Release);
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
                            cmd::execute(shared, link, args).await;
                            repl.stream_db.store(link.db as u64, Ordering::Release);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Server;

    /// The stream carries a write's effect, encoded once: relative expiries made absolute,
    /// a key that is gone as `DEL`, other commands as they were sent, scripts as nothing.
    #[tokio::test]
    async fn effects_are_encoded_as_the_stream_carries_them() {
        let server = Server::builder()
            .virtual_clock()
            .no_listener()
            .start()
            .await
            .unwrap();
        let shared = server.shared().clone();
        let mut c = server.client();
        let now = server.clock().now_ms();
        let effect = |args: &[&str]| {
            let args: Vec<Bytes> = args.iter().map(|a| b(a)).collect();
            let spec = cmd::lookup(&args[0]).unwrap();
            let chunk = stream_chunk(|out| encode_effects(&shared, 0, spec, &args, out));
            String::from_utf8(chunk.to_vec()).unwrap()
        };
        c.cmd(["SET", "k", "v", "PX", "30000"]).await;
        let at = (now + 30000).to_string();
        assert_eq!(
            effect(&["set", "k", "v", "PX", "30000"]),
            format!(
                "*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$4\r\nPXAT\r\n${}\r\n{at}\r\n",
                at.len()
            )
        );
        c.cmd(["PERSIST", "k"]).await;
        assert_eq!(
            effect(&["persist", "k"]),
            "*2\r\n$7\r\nPERSIST\r\n$1\r\nk\r\n"
        );
        assert_eq!(
            effect(&["SET", "gone", "x"]),
            "*2\r\n$3\r\nDEL\r\n$4\r\ngone\r\n"
        );
        assert_eq!(
            effect(&["hset", "h", "f", "v"]),
            "*4\r\n$4\r\nhset\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\nv\r\n"
        );
        assert_eq!(effect(&["evalsha", "x", "0"]), "");
    }
}
