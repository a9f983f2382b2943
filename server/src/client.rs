//! Clients: the per-connection state commands read and change, and the registry that lets
//! `CLIENT LIST` and `CLIENT KILL` see every connection.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use dashmap::DashMap;
use parking_lot::Mutex;
use tokio::sync::{mpsc, Notify};

use crate::db::WatchFlag;
use crate::frame::{Frame, Protocol};

/// The part of a client that other connections may look at or act on (`CLIENT LIST`,
/// `CLIENT KILL`, a publisher delivering a message).
#[derive(Debug)]
pub(crate) struct ClientHandle {
    /// `CLIENT ID`: unique, increasing.
    pub id: u64,
    /// The peer address, when the client came over TCP.
    pub addr: Option<SocketAddr>,
    /// The local address it connected to.
    pub laddr: Option<SocketAddr>,
    /// When the connection was accepted.
    pub created: Instant,
    /// Mutable details shown by `CLIENT LIST`.
    pub info: Mutex<ClientInfo>,
    killed: AtomicBool,
    kill_notify: Notify,
    /// Bytes of push messages queued for this client but not yet written to its socket.
    pub queued_push_bytes: AtomicUsize,
    /// Milliseconds (server clock) when the queue first went over the soft limit, or 0.
    pub soft_limit_since: AtomicU64,
    /// When the client last ran a command (server clock, Unix milliseconds), for `idle=`.
    pub last_interaction_ms: AtomicU64,
    /// Bytes in the query buffer not yet parsed (`qbuf=`), as the connection last saw them.
    pub qbuf: AtomicUsize,
    /// Free room in the query buffer (`qbuf-free=`).
    pub qbuf_free: AtomicUsize,
    /// The reply buffer's size (`rbs=`).
    pub reply_buf: AtomicUsize,
    /// Whether the client waits in a blocking command (or a `CLIENT PAUSE`): not idle.
    pub waiting: AtomicBool,
    /// Whether a [`poke`](ClientHandle::poke) is on its way and not yet seen.
    pub poke_pending: AtomicBool,
    /// The sending end of this client's push queue, so that any part of the server that
    /// finds the client by id (a tracking redirection, say) can send it a message. Weak, so
    /// that the queue still closes when the client is gone (its receiver then sees the end).
    push_tx: mpsc::WeakUnboundedSender<Frame>,
    /// While the client waits in a blocking list or sorted-set command: how `CLIENT UNBLOCK`
    /// ends that wait (taken by the first `CLIENT UNBLOCK`, so it acts once per wait).
    unblock: Mutex<Option<Arc<Unblock>>>,
}

/// Whether a pushed message is a [`ClientHandle::poke`].
pub(crate) fn is_poke(f: &Frame) -> bool {
    matches!(f, Frame::Raw(b) if b.is_empty())
}

/// A client's wait that `CLIENT UNBLOCK` may end (see [`ClientHandle::begin_unblockable`]).
#[derive(Debug)]
pub(crate) struct UnblockableWait {
    handle: Arc<ClientHandle>,
    unblock: Arc<Unblock>,
}

impl UnblockableWait {
    /// Resolves when another client ends this wait: `true` when it asked for an error
    /// (`ERROR`), `false` for an end as if the wait had timed out (`TIMEOUT`, the default).
    pub(crate) async fn unblocked(&self) -> bool {
        self.unblock.wake.notified().await;
        self.unblock.error.load(Ordering::Acquire)
    }
}

impl Drop for UnblockableWait {
    fn drop(&mut self) {
        let mut current = self.handle.unblock.lock();
        if current
            .as_ref()
            .is_some_and(|u| Arc::ptr_eq(u, &self.unblock))
        {
            *current = None;
        }
    }
}

/// The error a client ended by `CLIENT UNBLOCK id ERROR` answers with.
pub(crate) const UNBLOCKED_ERROR: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";

/// How another client ends a blocked client's wait (`CLIENT UNBLOCK id [TIMEOUT|ERROR]`).
#[derive(Debug, Default)]
pub(crate) struct Unblock {
    /// Wakes the waiting command.
    pub(crate) wake: Notify,
    /// `ERROR`: the command answers `-UNBLOCKED ...` instead of as if it had timed out.
    pub(crate) error: AtomicBool,
}

/// Whether a connection sends the replies of its commands (`CLIENT REPLY`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplyMode {
    /// Every reply is sent.
    #[default]
    On,
    /// No reply is sent (pushed messages still are).
    Off,
    /// `CLIENT REPLY SKIP` just ran: its own reply and the next command's are not sent.
    SkipNext,
    /// This command's reply is not sent; the one after it is.
    Skip,
}

impl ReplyMode {
    /// Whether the reply of the command that just ran is sent, moving a `SKIP` on by one
    /// command.
    pub(crate) fn take_reply(&mut self) -> bool {
        match *self {
            ReplyMode::On => true,
            ReplyMode::Off => false,
            ReplyMode::SkipNext => {
                *self = ReplyMode::Skip;
                false
            }
            ReplyMode::Skip => {
                *self = ReplyMode::On;
                false
            }
        }
    }
}

/// What a connection is to this server, as `CLIENT KILL TYPE` and `CLIENT LIST` see it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientRole {
    /// An ordinary client (or a subscriber: that is read from its subscriptions).
    #[default]
    Normal,
    /// Our link to the master we replicate (Redis's `CLIENT_MASTER`, `flags=M`).
    Master,
    /// A replica that attached with `PSYNC`/`SYNC` (Redis's `CLIENT_SLAVE`, `flags=S`).
    Replica,
}

/// Details of a client that change over its life.
#[derive(Debug, Default, Clone)]
pub(crate) struct ClientInfo {
    /// Whether it is an ordinary client, our master, or a replica of ours.
    pub role: ClientRole,
    /// `CLIENT SETNAME`.
    pub name: Option<Bytes>,
    /// Selected database.
    pub db: usize,
    /// Protocol version (2 or 3).
    pub resp: i64,
    /// Last command name, lowercase.
    pub last_cmd: String,
    /// Number of channel subscriptions.
    pub sub: usize,
    /// Number of pattern subscriptions.
    pub psub: usize,
    /// Number of shard-channel subscriptions.
    pub ssub: usize,
    /// Commands queued in `MULTI`, or -1 outside a transaction.
    pub multi: i64,
    /// The ACL user it is authenticated as, `None` for the default user (`CLIENT LIST`'s
    /// `user=`; `ACL DELUSER` finds the user's clients by it).
    pub user: Option<Arc<crate::acl::User>>,
}

impl ClientHandle {
    /// Marks the client as waiting in a command `CLIENT UNBLOCK` may end, until the returned
    /// guard is dropped; the guard says when and how the wait was ended.
    pub(crate) fn begin_unblockable(self: &Arc<Self>) -> UnblockableWait {
        let unblock = Arc::new(Unblock::default());
        *self.unblock.lock() = Some(unblock.clone());
        UnblockableWait {
            handle: self.clone(),
            unblock,
        }
    }

    /// `CLIENT UNBLOCK`: ends the client's wait if it is in one that may be ended (as a
    /// timeout, or with an error when `error`); whether it was.
    pub(crate) fn unblock(&self, error: bool) -> bool {
        let Some(u) = self.unblock.lock().take() else {
            return false;
        };
        u.error.store(error, Ordering::Release);
        u.wake.notify_one();
        true
    }

    /// Asks the connection to close (`CLIENT KILL`, output-buffer overrun, shutdown).
    pub(crate) fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        self.kill_notify.notify_waiters();
        self.kill_notify.notify_one();
    }

    /// Asks the connection to look at its buffers and its idle `timeout` (see
    /// [`crate::clients_cron`]): a message with nothing to write, through the push queue the
    /// connection already listens to, so that listening for it costs nothing per request. At
    /// most one is on its way at a time.
    pub(crate) fn poke(self: &Arc<Self>) {
        if self.poke_pending.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(p) = self.pusher() {
            p.send(Frame::Raw(Bytes::new()), 0);
        }
    }

    /// Whether [`kill`](ClientHandle::kill) was called.
    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// A sender of push messages to this client (see [`PushSender`]), while its connection
    /// lives.
    pub(crate) fn pusher(self: &Arc<Self>) -> Option<PushSender> {
        Some(PushSender {
            tx: self.push_tx.upgrade()?,
            handle: self.clone(),
        })
    }

    /// Resolves once the client has been killed.
    pub(crate) async fn killed(&self) {
        loop {
            let n = self.kill_notify.notified();
            if self.is_killed() {
                return;
            }
            n.await;
        }
    }
}

/// Sends out-of-band messages (pub/sub) to one client and accounts for the bytes waiting.
#[derive(Debug, Clone)]
pub(crate) struct PushSender {
    tx: mpsc::UnboundedSender<Frame>,
    /// The receiving client.
    pub handle: Arc<ClientHandle>,
}

impl PushSender {
    /// Queues a push message. Returns the number of bytes now waiting for this client.
    pub(crate) fn send(&self, frame: Frame, approx_bytes: usize) -> usize {
        if self.tx.send(frame).is_err() {
            return 0;
        }
        self.handle
            .queued_push_bytes
            .fetch_add(approx_bytes, Ordering::AcqRel)
            + approx_bytes
    }
}

/// Receives a client's push messages; owned by its connection.
#[derive(Debug)]
pub(crate) struct PushReceiver {
    rx: mpsc::UnboundedReceiver<Frame>,
    handle: Arc<ClientHandle>,
}

impl PushReceiver {
    /// Waits for the next push message.
    pub(crate) async fn recv(&mut self) -> Option<Frame> {
        let f = self.rx.recv().await;
        self.seen(f.as_ref());
        f
    }

    /// Takes a push message if one is ready.
    pub(crate) fn try_recv(&mut self) -> Option<Frame> {
        let f = self.rx.try_recv().ok();
        self.seen(f.as_ref());
        f
    }

    /// A [`ClientHandle::poke`] taken off the queue, wherever it is taken (it writes
    /// nothing), lets the cron poke again: one drained between two commands must not leave
    /// the client unpoked for good.
    fn seen(&self, f: Option<&Frame>) {
        if f.is_some_and(is_poke) {
            self.handle.poke_pending.store(false, Ordering::Release);
        }
    }

    /// A receiver fed by nothing (for a client whose real receiver was handed elsewhere).
    pub(crate) fn detached(
        rx: mpsc::UnboundedReceiver<Frame>,
        handle: Arc<ClientHandle>,
    ) -> PushReceiver {
        PushReceiver { rx, handle }
    }

    /// Records that `n` queued bytes have been written out. Nothing to do for none, the
    /// usual case (a connection calls this after each write, pushes or not), which then
    /// costs no compare-and-swap.
    pub(crate) fn written(&self, n: usize) {
        if n == 0 {
            return;
        }
        let _ =
            self.handle
                .queued_push_bytes
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                    Some(v.saturating_sub(n))
                });
    }
}

/// The options of a client whose `CLIENT TRACKING` is on (the table is
/// [`crate::tracking`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TrackingMode {
    /// `BCAST`: prefixes instead of remembered reads.
    pub bcast: bool,
    /// `OPTIN`: remember reads only after `CLIENT CACHING YES`.
    pub optin: bool,
    /// `OPTOUT`: remember reads except after `CLIENT CACHING NO`.
    pub optout: bool,
    /// `NOLOOP`: no message for the client's own changes.
    pub noloop: bool,
}

/// A `MULTI` in progress.
#[derive(Debug, Default)]
pub(crate) struct MultiState {
    /// Commands queued so far.
    pub queue: Vec<Vec<Bytes>>,
    /// Set when a queued command was rejected (unknown, wrong arity): `EXEC` then aborts.
    pub errored: bool,
}

/// Everything the server knows about one connection, owned by that connection's task.
#[derive(Debug)]
pub(crate) struct Client {
    /// What other clients may see of this one.
    pub handle: Arc<ClientHandle>,
    /// Selected database (`SELECT`).
    pub db: usize,
    /// RESP version (`HELLO`).
    pub protocol: Protocol,
    /// A transaction in progress.
    pub multi: Option<MultiState>,
    /// Keys under `WATCH`: `(db, key, expiry the key had when watched)`; a key that was alive
    /// with a TTL at `WATCH` and has expired by `EXEC` aborts the transaction.
    pub watched: Vec<(usize, Bytes, Option<u64>)>,
    /// Set when a watched key changes; replaced by `UNWATCH`/`EXEC`.
    pub watch_flag: Arc<WatchFlag>,
    /// Channels subscribed to.
    pub channels: HashSet<Bytes>,
    /// Patterns subscribed to.
    pub patterns: HashSet<Bytes>,
    /// Shard channels subscribed to.
    pub shard_channels: HashSet<Bytes>,
    /// Where publishers send this client's messages.
    pub push: PushSender,
    /// Close the connection after the current reply is written (`QUIT`, protocol errors).
    pub close_after_reply: bool,
    /// Whether the connection sends replies (`CLIENT REPLY`).
    pub reply_mode: ReplyMode,
    /// `CLIENT TRACKING`: this client's mode while tracking is on (the tracking table itself
    /// is [`crate::tracking::Tracking`]); kept here too so that a read checks it for free.
    pub tracking: Option<TrackingMode>,
    /// `CLIENT CACHING YES|NO` was given for the next command (OPTIN/OPTOUT tracking).
    pub caching: bool,
    /// Push messages that go out right after the current command's reply (an invalidation
    /// of a key the command itself changed, as Redis sends it).
    pub after_reply: Vec<Frame>,
    /// Close the connection at once, without writing the current reply: a `SHUTDOWN` that
    /// succeeds is never answered, as Redis exits first.
    pub close_without_reply: bool,
    /// This connection is our link to a master (its writes bypass the read-only check).
    pub is_replication_link: bool,
    /// Blocking commands answer at once instead of waiting (Redis's `CLIENT_DENY_BLOCKING`):
    /// set for the client that replays the AOF at start, which nobody could ever unblock.
    pub deny_blocking: bool,
    /// The error this command replies with was counted already (a script ending with the
    /// error of a `redis.call`): see [`crate::errorstats`].
    pub error_counted: bool,
    /// Whether this client may run commands while `requirepass` is set: true for clients that
    /// connected while the default user had no password (they stay so, as in Redis), for
    /// in-process clients and the server's own; a network client connecting while a
    /// password is set starts false, until `AUTH` or `HELLO ... AUTH`.
    pub authenticated: bool,
    /// The ACL user the client runs commands as (the default user until `AUTH`).
    pub user: Arc<crate::acl::User>,
    /// How long this command's handler ran, in microseconds, once it ran (`None`: it was
    /// refused or queued): for `INFO commandstats` and the slow log.
    pub handler_usec: Option<u64>,
    /// Replication offset right after this client's last write (what `WAIT` waits for).
    pub repl_offset: u64,
    /// The port a replica said it listens on (`REPLCONF listening-port`).
    pub replica_port: u16,
    /// This connection is a replica of ours (it sent `PSYNC` or `SYNC`): what it is sent from
    /// then on is the replication stream, which its connection writes in batches.
    pub is_replica: bool,
    /// What `sync_info` last published, to skip the lock when nothing changed.
    info_fingerprint: Option<(usize, usize, i64, usize, i64)>,
}

impl Client {
    /// Releases every `WATCH` and gives the client a fresh flag (after `EXEC`, `DISCARD`,
    /// `UNWATCH`, `RESET`, or when it disconnects).
    pub(crate) fn unwatch_all(&mut self, keyspace: &crate::db::Keyspace) {
        for (db, key, _) in self.watched.drain(..) {
            keyspace.db(db).unwatch(&key, &self.watch_flag);
        }
        self.watch_flag = Arc::new(WatchFlag::default());
    }

    /// Makes the client run as `user`, authenticated (`AUTH`, `HELLO ... AUTH`).
    pub(crate) fn set_user(&mut self, user: Arc<crate::acl::User>) {
        self.authenticated = true;
        self.handle.info.lock().user = Some(user.clone());
        self.user = user;
    }

    /// Whether the connection is in RESP2 subscribed mode, where only pub/sub commands run.
    pub(crate) fn in_resp2_pubsub(&self) -> bool {
        self.protocol == Protocol::Resp2 && self.subscription_count() > 0
    }

    /// Total subscriptions of all kinds.
    pub(crate) fn subscription_count(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard_channels.len()
    }

    /// Refreshes the details `CLIENT LIST` shows. Called for every command, so it takes the
    /// info lock only when something `CLIENT LIST` shows has changed.
    pub(crate) fn sync_info(&mut self, last_cmd: &'static str, now_ms: u64) {
        self.handle
            .last_interaction_ms
            .store(now_ms, Ordering::Relaxed);
        let fingerprint = (
            last_cmd.as_ptr() as usize,
            self.db,
            self.protocol.number(),
            self.subscription_count(),
            self.multi.as_ref().map_or(-1, |m| m.queue.len() as i64),
        );
        if self.info_fingerprint == Some(fingerprint) {
            return;
        }
        self.info_fingerprint = Some(fingerprint);
        let mut info = self.handle.info.lock();
        info.db = self.db;
        info.resp = self.protocol.number();
        info.sub = self.channels.len();
        info.psub = self.patterns.len();
        info.ssub = self.shard_channels.len();
        info.multi = self.multi.as_ref().map_or(-1, |m| m.queue.len() as i64);
        if info.last_cmd != last_cmd {
            info.last_cmd = last_cmd.to_string();
        }
    }
}

/// Every connected client, by id.
#[derive(Debug)]
pub(crate) struct Clients {
    next_id: AtomicU64,
    all: ClientDirectory,
    /// The user a new connection starts as.
    default_user: Arc<crate::acl::User>,
}

/// The clients by id, shareable: what the tracking table looks its targets up in.
pub(crate) type ClientDirectory = Arc<DashMap<u64, Arc<ClientHandle>>>;

impl Clients {
    /// No clients yet; new ones start as `default_user`.
    pub(crate) fn new(default_user: Arc<crate::acl::User>) -> Clients {
        Clients {
            next_id: AtomicU64::new(0),
            all: ClientDirectory::default(),
            default_user,
        }
    }

    /// Registers a new connection and returns its state plus the receiving end of its pushes.
    pub(crate) fn register(
        &self,
        addr: Option<SocketAddr>,
        laddr: Option<SocketAddr>,
    ) -> (Client, PushReceiver) {
        let id = self.next_id.fetch_add(1, Ordering::AcqRel) + 1;
        let (tx, rx) = mpsc::unbounded_channel();
        let handle = Arc::new(ClientHandle {
            id,
            addr,
            laddr,
            created: Instant::now(),
            info: Mutex::new(ClientInfo {
                resp: 2,
                multi: -1,
                ..Default::default()
            }),
            killed: AtomicBool::new(false),
            kill_notify: Notify::new(),
            unblock: Mutex::new(None),
            queued_push_bytes: AtomicUsize::new(0),
            soft_limit_since: AtomicU64::new(0),
            last_interaction_ms: AtomicU64::new(0),
            qbuf: AtomicUsize::new(0),
            qbuf_free: AtomicUsize::new(0),
            reply_buf: AtomicUsize::new(0),
            waiting: AtomicBool::new(false),
            poke_pending: AtomicBool::new(false),
            push_tx: tx.downgrade(),
        });
        self.all.insert(id, handle.clone());
        let client = Client {
            handle: handle.clone(),
            db: 0,
            protocol: Protocol::Resp2,
            multi: None,
            watched: Vec::new(),
            watch_flag: Arc::new(WatchFlag::default()),
            channels: HashSet::new(),
            patterns: HashSet::new(),
            shard_channels: HashSet::new(),
            push: PushSender {
                tx,
                handle: handle.clone(),
            },
            close_after_reply: false,
            reply_mode: ReplyMode::On,
            tracking: None,
            caching: false,
            after_reply: Vec::new(),
            close_without_reply: false,
            is_replication_link: false,
            deny_blocking: false,
            error_counted: false,
            authenticated: true,
            user: self.default_user.clone(),
            handler_usec: None,
            repl_offset: 0,
            replica_port: 0,
            is_replica: false,
            info_fingerprint: None,
        };
        (client, PushReceiver { rx, handle })
    }

    /// The registry itself, for parts that look clients up by id on their own.
    pub(crate) fn directory(&self) -> ClientDirectory {
        self.all.clone()
    }

    /// Forgets a closed connection.
    pub(crate) fn unregister(&self, id: u64) {
        self.all.remove(&id);
    }

    /// Number of connected clients.
    pub(crate) fn len(&self) -> usize {
        self.all.len()
    }

    /// A client by id.
    pub(crate) fn get(&self, id: u64) -> Option<Arc<ClientHandle>> {
        self.all.get(&id).map(|h| h.clone())
    }

    /// Every client, ordered by id.
    pub(crate) fn list(&self) -> Vec<Arc<ClientHandle>> {
        let mut v: Vec<_> = self.all.iter().map(|h| h.clone()).collect();
        v.sort_by_key(|h| h.id);
        v
    }

    /// Calls `f` on every client, in no particular order, without collecting them.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Arc<ClientHandle>)) {
        for h in self.all.iter() {
            f(h.value());
        }
    }

    /// Kills every client (shutdown).
    pub(crate) fn kill_all(&self) {
        for h in self.all.iter() {
            h.kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A poke drained between two commands (where the connection writes what is queued
    /// without looking at it) still lets the cron poke the client again.
    #[test]
    fn a_poke_taken_anywhere_allows_the_next() {
        let acl = crate::acl::Acl::default();
        let clients = Clients::new(acl.default_user().clone());
        let (client, mut pushes) = clients.register(None, None);
        client.handle.poke();
        client.handle.poke();
        assert!(pushes.try_recv().is_some_and(|f| is_poke(&f)));
        assert!(
            pushes.try_recv().is_none(),
            "a second poke while one was on its way"
        );
        client.handle.poke();
        assert!(
            pushes.try_recv().is_some_and(|f| is_poke(&f)),
            "no poke after one was taken"
        );
    }
}
