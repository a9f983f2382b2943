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
//!
//! This module is the replication *state* ([`Replication`]: ids, offset, the stream to the
//! replicas, the backlog, acknowledgements, the replica-side counters) and never imports the
//! server; what acts on it lives above: [`crate::master`] (attaching replicas, the master's
//! cron), [`crate::replica`] (the link to a master: handshake, snapshot, stream) and
//! [`crate::promote`] (promotion, and what a restart does to replication).

mod backlog;
mod coordinated;
mod downstream;
mod faults;
mod upstream;

pub(crate) use backlog::Backlog;
pub(crate) use coordinated::{Failover, Phase};
pub(crate) use downstream::{Downstream, ReplicaLink, SyncCounts};
pub(crate) use upstream::{MasterLink, Upstream};

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use parking_lot::{Mutex, ReentrantMutex, ReentrantMutexGuard};
use tokio::sync::Notify;

use crate::codec::{encode, stream_chunk};
use crate::frame::Frame;

/// How often a master sends `PING` down the stream (Redis's `repl-ping-replica-period`), so
/// that an idle link does not look dead to a replica's `repl-timeout`.
pub(crate) const PING_PERIOD: Duration = Duration::from_secs(10);

/// The replication ids of this server's history (Redis's PSYNC2 pair).
#[derive(Debug, Clone)]
pub(crate) struct Ids {
    /// The id of the stream this server serves (a replica: its master's).
    pub(crate) replid: String,
    /// The id of the stream it served before its last promotion, or forty zeros.
    pub(crate) replid2: String,
    /// The first offset that `replid2` does *not* cover, or -1.
    pub(crate) second_offset: i64,
}

pub(crate) const NO_ID: &str = "0000000000000000000000000000000000000000";

impl Ids {
    /// A history that starts now, under `replid`, with no previous one.
    pub(crate) fn fresh(replid: String) -> Ids {
        Ids {
            replid,
            replid2: NO_ID.to_string(),
            second_offset: -1,
        }
    }
}

/// A fresh random replication id (40 hex characters).
pub(crate) fn new_replid() -> String {
    (0..40)
        .map(|_| char::from_digit(rand::random_range(0..16u32), 16).unwrap_or('0'))
        .collect()
}

/// Replication state of one server, master side and replica side.
#[derive(Debug)]
pub(crate) struct Replication {
    /// This server's history: its replication ids.
    pub(crate) ids: Mutex<Ids>,
    /// The offset of the last byte of the stream (fed as a master, applied as a replica).
    pub(crate) offset: AtomicU64,
    /// The last `repl-backlog-size` bytes of the stream, while kept.
    pub(crate) backlog: Mutex<Option<Backlog>>,
    /// The master's side: attached replicas, the stream's database, the backlog's idle time.
    pub(crate) downstream: Mutex<Downstream>,
    /// The replica's side: the link to a master and where its stream stands.
    pub(crate) upstream: Mutex<Upstream>,
    /// Resynchronisations served (`INFO stats`).
    pub(crate) sync: Mutex<SyncCounts>,
    /// Whether the stream is recorded: a replica is attached, or a backlog is kept.
    pub(crate) recording: AtomicBool,
    /// Whether at least one replica is attached (`downstream.links` is not empty).
    pub(crate) attached: AtomicBool,
    /// Held by whoever changes the keyspace and feeds the change to the stream while other
    /// commands may run (see [`Shared::order_guard`](crate::state::Shared::order_guard)).
    pub(crate) order: ReentrantMutex<()>,
    /// Whether this server applies a master's stream (then its own writes feed nothing).
    pub(crate) following: AtomicBool,
    /// Whether the master's cron task runs (started once, it serves any later role).
    pub(crate) pinging: AtomicBool,
    pub(crate) acked: Notify,
    pub(crate) epoch: Instant,
    /// The server's memory limits (`client-output-buffer-limit replica`), once attached.
    pub(crate) limits: std::sync::OnceLock<Arc<crate::config::Limits>>,
    /// A coordinated failover (`FAILOVER`), when one runs.
    pub(crate) failover: Mutex<Failover>,
}

/// What a replica asked for with `PSYNC`, and what it gets.
pub(crate) enum Resync {
    /// `+CONTINUE`: the bytes it missed.
    Partial(Vec<Bytes>),
    /// `+FULLRESYNC`: a snapshot.
    Full,
}

impl Replication {
    /// Gives the stream the server's limits, so that a replica that stops reading is
    /// disconnected past `client-output-buffer-limit replica`.
    pub(crate) fn set_limits(&self, limits: Arc<crate::config::Limits>) {
        let _ = self.limits.set(limits);
    }

    /// Fresh state for a master with no replicas.
    pub(crate) fn new(replid: String) -> Replication {
        Replication {
            ids: Mutex::new(Ids::fresh(replid)),
            offset: AtomicU64::new(0),
            backlog: Mutex::new(None),
            downstream: Mutex::new(Downstream::default()),
            upstream: Mutex::new(Upstream::default()),
            sync: Mutex::new(SyncCounts::default()),
            recording: AtomicBool::new(false),
            attached: AtomicBool::new(false),
            order: ReentrantMutex::new(()),
            following: AtomicBool::new(false),
            pinging: AtomicBool::new(false),
            acked: Notify::new(),
            epoch: Instant::now(),
            limits: std::sync::OnceLock::new(),
            failover: Mutex::new(Failover::default()),
        }
    }

    /// The replication id (`master_replid`).
    pub(crate) fn replid(&self) -> String {
        self.ids.lock().replid.clone()
    }

    /// `master_repl_offset`: the offset of the last byte of the stream (a replica: the last
    /// byte of its master's stream it applied).
    pub(crate) fn offset(&self) -> u64 {
        self.offset.load(Ordering::Acquire)
    }

    /// Whether writes must be fed to the stream: a replica is attached, or a backlog is kept
    /// for replicas that may come back. Never on a replica, which feeds nothing: it records
    /// its master's stream as it arrives instead.
    pub(crate) fn feeds_stream(&self) -> bool {
        self.recording.load(Ordering::Acquire) && !self.following.load(Ordering::Acquire)
    }

    /// Whether a replica is attached to this master right now.
    #[cfg(feature = "internals")]
    pub(crate) fn has_attached_replicas(&self) -> bool {
        self.attached.load(Ordering::Acquire) && !self.following.load(Ordering::Acquire)
    }

    /// Takes the stream-order lock; see [`Shared::order_guard`](crate::state::Shared::order_guard),
    /// which decides when it is needed.
    pub(crate) fn lock_order(&self) -> ReentrantMutexGuard<'_, ()> {
        self.order.lock()
    }

    /// Appends commands already encoded in RESP (by [`encode_effects`], say) to the stream,
    /// after a `SELECT` when the database changes, and sends them to every replica. The
    /// same bytes go to the backlog and to each replica, shared, not copied. Returns the new
    /// offset.
    pub(crate) fn feed_encoded(&self, db: usize, commands: Bytes) -> u64 {
        if !self.feeds_stream() || commands.is_empty() {
            return self.offset();
        }
        let mut down = self.downstream.lock();
        if std::mem::replace(&mut down.last_db, db as i64) != db as i64 {
            // Rare: one chunk with the SELECT in front.
            let chunk = stream_chunk(|out| {
                encode(
                    &[&b"SELECT"[..], itoa::Buffer::new().format(db).as_bytes()],
                    out,
                );
                out.put_slice(&commands);
            });
            return self.feed_locked(&mut down, chunk);
        }
        self.feed_locked(&mut down, commands)
    }

    /// Numbers an encoded piece of the stream, keeps it in the backlog and sends it to every
    /// replica (or holds it for a paused one). Returns the new offset.
    pub(crate) fn feed_chunk(&self, chunk: Bytes) -> u64 {
        let mut down = self.downstream.lock();
        self.feed_locked(&mut down, chunk)
    }

    /// [`feed_chunk`](Replication::feed_chunk), under the lock of the master's side.
    fn feed_locked(&self, down: &mut Downstream, chunk: Bytes) -> u64 {
        if let Some(b) = self.backlog.lock().as_mut() {
            b.push(chunk.clone());
        }
        let offset =
            self.offset.fetch_add(chunk.len() as u64, Ordering::AcqRel) + chunk.len() as u64;
        for r in down.links.iter_mut() {
            if r.paused {
                r.held.push(chunk.clone());
            } else {
                let queued = r.sender.send(Frame::Raw(chunk.clone()), chunk.len());
                if let Some(l) = self.limits.get() {
                    let limit = l.output_limit(crate::config::ClientClass::Replica);
                    crate::outbuf::enforce(&r.sender.handle, queued, limit, self.now_ms());
                }
            }
        }
        offset
    }

    /// Replica side: records bytes of the master's stream that were just applied.
    pub(crate) fn record_from_master(&self, chunk: Bytes) {
        let _down = self.downstream.lock();
        let len = chunk.len() as u64;
        if let Some(b) = self.backlog.lock().as_mut() {
            b.push(chunk);
        }
        self.offset.fetch_add(len, Ordering::AcqRel);
    }

    /// Starts a backlog of `size` bytes (`repl-backlog-size`) if there is none.
    pub(crate) fn ensure_backlog(&self, size: u64) {
        let mut b = self.backlog.lock();
        if b.is_none() {
            *b = Some(Backlog::new(size, self.offset()));
        }
        self.recording.store(true, Ordering::Release);
    }

    /// How many replicas have acknowledged `offset`.
    pub(crate) fn acked_count(&self, offset: u64) -> i64 {
        self.downstream
            .lock()
            .links
            .iter()
            .filter(|r| r.acked(offset))
            .count() as i64
    }

    /// Asks every replica for an acknowledgement (`REPLCONF GETACK *`). Like Redis, the
    /// request is part of the stream and counts in the offset.
    pub(crate) fn request_acks(&self) {
        if self.downstream.lock().links.is_empty() || self.following.load(Ordering::Acquire) {
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
    pub(crate) async fn wait_for_acks(
        &self,
        n: i64,
        offset: u64,
        timeout: Option<Duration>,
    ) -> i64 {
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut asked = false;
        loop {
            let acked = self.acked.notified();
            let count = self.acked_count(offset);
            if count >= n {
                return count;
            }
            // One `GETACK` per blocked `WAIT`, as Redis sends (its offset counts in the
            // stream, so a resent one would make the offsets depend on timing); the
            // replicas' once-a-second acknowledgements cover the rest.
            if !asked {
                self.request_acks();
                asked = true;
            }
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
    pub(crate) fn aof_acked_count(&self, offset: u64) -> i64 {
        self.downstream
            .lock()
            .links
            .iter()
            .filter(|r| r.aof_ack.load(Ordering::Acquire) >= offset)
            .count() as i64
    }

    /// How many attached replicas acknowledged within the last `max_lag_s` seconds (Redis's
    /// "good" replicas, which `min-replicas-to-write` counts).
    pub(crate) fn good_replicas(&self, max_lag_s: u64) -> u64 {
        let down = self.downstream.lock();
        down.links
            .iter()
            .filter(|r| self.seconds_since(r.last_ack_ms.load(Ordering::Acquire)) <= max_lag_s)
            .count() as u64
    }

    /// Records `REPLCONF ACK offset [FACK aof-offset]` from the replica connected as
    /// `client_id`.
    pub(crate) fn ack(&self, client_id: u64, offset: u64, fack: Option<u64>) {
        for r in self.downstream.lock().links.iter() {
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
    pub(crate) async fn next_ack(&self, tick: Duration) {
        tokio::select! {
            _ = self.acked.notified() => {}
            _ = tokio::time::sleep(tick) => {}
        }
    }

    /// Whether the client with this id is an attached replica.
    pub(crate) fn is_replica_client(&self, client_id: u64) -> bool {
        self.attached.load(Ordering::Acquire)
            && self
                .downstream
                .lock()
                .links
                .iter()
                .any(|l| l.client_id == client_id)
    }

    /// Forgets a replica whose connection closed (the backlog stays, for its return).
    pub(crate) fn remove_replica(&self, client_id: u64) {
        let mut down = self.downstream.lock();
        down.links.retain(|l| l.client_id != client_id);
        let alone = down.links.is_empty();
        self.attached.store(!alone, Ordering::Release);
        if alone {
            down.alone_since_ms = self.now_ms().max(1);
        }
        let keep = !alone || self.backlog.lock().is_some();
        self.recording.store(keep, Ordering::Release);
    }

    /// Whether this server follows a master, and whether the link is up.
    pub(crate) fn master_link(&self) -> Option<(String, u16, bool, u64)> {
        self.upstream.lock().link.as_ref().map(|m| {
            (
                m.host.clone(),
                m.port,
                m.up.load(Ordering::Acquire),
                self.offset(),
            )
        })
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Whole seconds since `ms` (a time from [`now_ms`](Replication::now_ms)).
    pub(crate) fn seconds_since(&self, ms: u64) -> u64 {
        self.now_ms().saturating_sub(ms) / 1000
    }

    /// The replication lines of `INFO stats`: full and partial resynchronisations served.
    pub(crate) fn stats_info(&self) -> String {
        let sync = *self.sync.lock();
        format!(
            "sync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\n",
            sync.full, sync.partial_ok, sync.partial_err,
        )
    }

    /// Zeroes the counters of [`stats_info`](Replication::stats_info), for `CONFIG RESETSTAT`.
    pub(crate) fn reset_stats(&self) {
        *self.sync.lock() = SyncCounts::default();
    }

    /// The body of `INFO replication`.
    ///
    /// `good_replicas` is the count `min-replicas-to-write` compares with, shown as
    /// `min_slaves_good_slaves` when that rule is on.
    pub(crate) fn info(&self, good_replicas: Option<u64>) -> String {
        let mut s = String::new();
        match self.master_link() {
            Some((host, port, up, offset)) => {
                // The fields and order of Redis 7.0's replica section.
                let last_io = match up {
                    true => self.seconds_since(self.upstream.lock().last_io_ms) as i64,
                    false => -1,
                };
                s.push_str(&format!(
                    "role:slave\r\nmaster_host:{host}\r\nmaster_port:{port}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{last_io}\r\nmaster_sync_in_progress:0\r\nslave_read_repl_offset:{offset}\r\nslave_repl_offset:{offset}\r\n",
                    if up { "up" } else { "down" }
                ));
                if !up {
                    // -1 until the link has been up once, as in Redis.
                    let since = match self.upstream.lock().down_since_ms {
                        0 => -1,
                        ms => self.seconds_since(ms) as i64,
                    };
                    s.push_str(&format!("master_link_down_since_seconds:{since}\r\n"));
                }
                s.push_str("slave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\nconnected_slaves:0\r\n");
                if let Some(good) = good_replicas {
                    s.push_str(&format!("min_slaves_good_slaves:{good}\r\n"));
                }
            }
            None => {
                let down = self.downstream.lock();
                s.push_str(&format!(
                    "role:master\r\nconnected_slaves:{}\r\n",
                    down.links.len()
                ));
                if let Some(good) = good_replicas {
                    s.push_str(&format!("min_slaves_good_slaves:{good}\r\n"));
                }
                for (i, r) in down.links.iter().enumerate() {
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
            "master_failover_state:{}\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:{}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{active}\r\nrepl_backlog_size:{size}\r\nrepl_backlog_first_byte_offset:{first}\r\nrepl_backlog_histlen:{histlen}\r\n",
            self.failover.lock().phase.name(),
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
    pub(crate) fn try_partial(&self, replid: &str, offset: Option<u64>) -> Resync {
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
    pub(crate) fn role(&self) -> Frame {
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
                    self.downstream
                        .lock()
                        .links
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
