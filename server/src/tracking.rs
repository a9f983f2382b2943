//! Client-side caching: `CLIENT TRACKING`, the table of which client read which key, and the
//! invalidation messages sent when a key changes (Redis 7.0's `tracking.c`).
//!
//! Two modes, as in Redis:
//!
//! - **Default**: every key a tracking client reads (the keys of a read-only command) is put in
//!   the *tracking table*, key → client ids. The first change of the key by anyone (a write,
//!   an expiry, an eviction) sends each of those clients one invalidation and forgets the
//!   key: a client that wants to hear of the next change reads the key again. The table is
//!   keyed by name alone, across the sixteen databases, as Redis's is. `OPTIN` remembers only
//!   the reads of the command right after `CLIENT CACHING YES`; `OPTOUT` all reads but those
//!   after `CLIENT CACHING NO`.
//! - **Broadcast** (`BCAST`): nothing is remembered; a client subscribes to key prefixes (the
//!   empty prefix: every key) and hears of every change of a key under them. The keys changed
//!   are gathered per prefix and sent together once the command that changed them is done
//!   (Redis sends them from `beforeSleep`), sorted, each key once.
//!
//! `NOLOOP` leaves out the changes the client made itself. `REDIRECT id` sends the messages to
//! another connection. A message is a RESP3 push `>2 invalidate [keys]`; a RESP2 client can
//! only hear them through a redirection to a connection in subscribed mode, as a message on the
//! `__redis__:invalidate` channel. `FLUSHDB`/`FLUSHALL` send every tracking client a null
//! instead of keys and empty the table.
//!
//! The table is bounded by `tracking-table-max-keys` (a million by default; 0 for no bound):
//! when reads (or `CONFIG SET`) leave it over, keys picked at random are invalidated until it
//! fits, as Redis's `trackingLimitUsedSlots` does.
//!
//! The cost for everyone else: the keyspace calls in here through
//! [`ChangeHook`](crate::db::ChangeHook), which while no client tracks and the table is empty
//! costs one relaxed atomic load per change (a `SET`), and nothing for a read (a `GET`). The
//! dispatcher notes whose command runs in a thread-local and, after it, reads a thread-local
//! flag that says whether this module left it work.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use indexmap::IndexMap;
use parking_lot::Mutex;

use crate::client::{ClientDirectory, ClientHandle, TrackingMode};
use crate::clock::Clock;
use crate::config::{ClientClass, Limits};
use crate::db::KeyChanges;
use crate::frame::Frame;

/// The channel a RESP2 redirection target hears invalidations on.
pub(crate) const CHANNEL: &str = "__redis__:invalidate";

/// What `CLIENT TRACKING ON` asks for, already checked by [`Tracking::enable`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Request {
    /// The options.
    pub mode: TrackingMode,
    /// `REDIRECT id` (0: none).
    pub redirect: u64,
    /// `PREFIX p` (only with `BCAST`).
    pub prefixes: Vec<Bytes>,
}

/// One tracking client, as the table knows it.
#[derive(Debug)]
struct Tracker {
    handle: Arc<ClientHandle>,
    mode: TrackingMode,
    redirect: u64,
    /// The redirection target was gone when a message was due (`broken_redirect`).
    broken: bool,
    prefixes: BTreeSet<Bytes>,
}

/// A `BCAST` prefix: who listens, and the keys changed under it since the last flush, each
/// with the client that changed it last (0: nobody's command, an expiry say), for `NOLOOP`.
#[derive(Debug, Default)]
struct Prefix {
    clients: BTreeSet<u64>,
    pending: BTreeMap<Bytes, u64>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Key → the ids of the clients that read it.
    table: IndexMap<Bytes, HashSet<u64>, ahash::RandomState>,
    /// Sum of the id sets' sizes (`tracking_total_items`).
    items: usize,
    trackers: HashMap<u64, Tracker>,
    prefixes: BTreeMap<Bytes, Prefix>,
    /// Whether some prefix has keys pending.
    bcast_pending: bool,
}

/// The tracking state of a server: the table, the prefixes, the tracking clients.
#[derive(Debug)]
pub(crate) struct Tracking {
    /// Set while anything could need a message: a client tracks, or the table holds keys.
    /// Shared with the keyspace's [`ChangeHook`](crate::db::ChangeHook).
    armed: Arc<AtomicBool>,
    inner: Mutex<Inner>,
    clients: ClientDirectory,
    limits: Arc<Limits>,
    clock: Clock,
    /// `tracking-table-max-keys` (0: no bound), the configuration's.
    max_keys: Arc<AtomicU64>,
}

thread_local! {
    /// The client whose command runs on this thread right now (0: none), for `NOLOOP` and
    /// for holding its own invalidations until its reply has gone.
    static CURRENT: Cell<u64> = const { Cell::new(0) };
    /// Invalidations for the running client, sent after its reply (`None`: a flush).
    static HELD: RefCell<Vec<Option<Bytes>>> = const { RefCell::new(Vec::new()) };
    /// Whether the running command left work for [`Tracking::after_command`]: held
    /// invalidations, or keys gathered for a broadcast.
    static WORK: Cell<bool> = const { Cell::new(false) };
}

/// Keeps invalidations for the running client until its reply has gone.
fn hold(held: Vec<Option<Bytes>>) {
    if !held.is_empty() {
        HELD.with(|h| h.borrow_mut().extend(held));
        WORK.with(|w| w.set(true));
    }
}

/// Marks a client's command as running on this thread until dropped (see [`Tracking::running`]).
#[derive(Debug)]
pub(crate) struct Running {
    previous: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

impl Tracking {
    /// Whether the keyspace calls in on changes: a client tracks, or the table holds keys.
    #[cfg(test)]
    fn armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }

    /// An empty table; `armed` is the keyspace's hook flag, `clients` the registry, `limits`
    /// and `clock` what output-buffer limits are enforced with, `max_keys` the configured
    /// bound.
    pub(crate) fn new(
        armed: Arc<AtomicBool>,
        clients: ClientDirectory,
        limits: Arc<Limits>,
        clock: Clock,
        max_keys: Arc<AtomicU64>,
    ) -> Self {
        Tracking {
            armed,
            inner: Mutex::default(),
            clients,
            limits,
            clock,
            max_keys,
        }
    }

    /// `tracking-table-max-keys`.
    pub(crate) fn max_keys(&self) -> u64 {
        self.max_keys.load(Ordering::Relaxed)
    }

    fn rearm(&self, inner: &Inner) {
        let on = !inner.trackers.is_empty() || !inner.table.is_empty();
        self.armed.store(on, Ordering::Relaxed);
    }

    /// Marks `id`'s command as running on this thread until the guard drops: a thread-local
    /// write, no atomic, so that every command may do it.
    pub(crate) fn running(id: u64) -> Running {
        Running {
            previous: CURRENT.with(|c| c.replace(id)),
        }
    }

    /// Turns tracking on for `handle`'s client (or changes its options, adding prefixes),
    /// once the command has checked the request. Returns the mode to keep on the client.
    pub(crate) fn enable(&self, handle: &Arc<ClientHandle>, req: Request) -> TrackingMode {
        let mut inner = self.inner.lock();
        let id = handle.id;
        let mut prefixes = match inner.trackers.remove(&id) {
            Some(t) => t.prefixes,
            None => BTreeSet::new(),
        };
        if req.mode.bcast {
            let mut new = req.prefixes;
            if new.is_empty() {
                new.push(Bytes::new());
            }
            for p in new {
                inner
                    .prefixes
                    .entry(p.clone())
                    .or_default()
                    .clients
                    .insert(id);
                prefixes.insert(p);
            }
        }
        inner.trackers.insert(
            id,
            Tracker {
                handle: handle.clone(),
                mode: req.mode,
                redirect: req.redirect,
                broken: false,
                prefixes,
            },
        );
        self.rearm(&inner);
        req.mode
    }

    /// Turns tracking off for client `id` (`CLIENT TRACKING OFF`, `RESET`, a disconnection).
    /// Keys it read stay in the table until they change or are evicted, as in Redis.
    pub(crate) fn disable(&self, id: u64) {
        let mut inner = self.inner.lock();
        let Some(t) = inner.trackers.remove(&id) else {
            return;
        };
        for p in &t.prefixes {
            let empty = inner.prefixes.get_mut(p).is_some_and(|s| {
                s.clients.remove(&id);
                s.clients.is_empty()
            });
            if empty {
                inner.prefixes.remove(p);
            }
        }
        inner.bcast_pending = inner.prefixes.values().any(|p| !p.pending.is_empty());
        self.rearm(&inner);
    }

    /// The prefixes client `id` listens to (`BCAST`), in order.
    pub(crate) fn prefixes_of(&self, id: u64) -> Vec<Bytes> {
        let inner = self.inner.lock();
        inner
            .trackers
            .get(&id)
            .map(|t| t.prefixes.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether client `id` already listens to a prefix overlapping `p` (one is a prefix of the
    /// other): the existing prefix, if so.
    pub(crate) fn overlapping_prefix(&self, id: u64, p: &[u8]) -> Option<Bytes> {
        let inner = self.inner.lock();
        let t = inner.trackers.get(&id)?;
        t.prefixes.iter().find(|q| overlap(q, p)).cloned()
    }

    /// `(redirect, broken redirect)` of client `id` if its tracking is on: what `CLIENT
    /// LIST`, `GETREDIR` and `TRACKINGINFO` show.
    pub(crate) fn redirect_of(&self, id: u64) -> Option<(u64, bool)> {
        let inner = self.inner.lock();
        inner.trackers.get(&id).map(|t| (t.redirect, t.broken))
    }

    /// `(redirect, broken redirect, broadcast)` of client `id` if its tracking is on: what
    /// another client's `CLIENT LIST` line shows of it.
    pub(crate) fn list_info(&self, id: u64) -> Option<(u64, bool, bool)> {
        let inner = self.inner.lock();
        inner
            .trackers
            .get(&id)
            .map(|t| (t.redirect, t.broken, t.mode.bcast))
    }

    /// `INFO`'s counts: tracking clients, keys in the table, items (key-client pairs),
    /// prefixes.
    pub(crate) fn counts(&self) -> (usize, usize, usize, usize) {
        let inner = self.inner.lock();
        (
            inner.trackers.len(),
            inner.table.len(),
            inner.items,
            inner.prefixes.len(),
        )
    }

    /// Remembers that client `id` read `keys` (a read-only command in default mode), then
    /// brings the table back within `tracking-table-max-keys`. Called while `id`'s command
    /// runs: invalidations of its own keys go after its reply.
    pub(crate) fn remember<'k>(&self, id: u64, keys: impl Iterator<Item = &'k Bytes>) {
        let mut inner = self.inner.lock();
        let mut added = 0;
        for k in keys {
            if inner.table.entry(k.clone()).or_default().insert(id) {
                added += 1;
            }
        }
        inner.items += added;
        let mut held = Vec::new();
        self.fit_locked(&mut inner, id, &mut held);
        hold(held);
        self.rearm(&inner);
    }

    /// Brings the table back within `tracking-table-max-keys` (after `CONFIG SET` lowered
    /// it), on behalf of client `current`.
    pub(crate) fn fit(&self, current: u64) {
        let mut inner = self.inner.lock();
        let mut held = Vec::new();
        self.fit_locked(&mut inner, current, &mut held);
        hold(held);
        self.rearm(&inner);
    }

    /// Invalidates keys picked at random until the table fits its bound, as Redis's
    /// `trackingLimitUsedSlots` does. Redis runs it before every command with an effort that
    /// grows while the table stays over, so the table may overshoot for a few commands;
    /// here it runs where the table grows, to the end: the table never holds more than the
    /// bound once a command is done, and each remembered key is evicted at most once, so the
    /// work stays proportional to the reads.
    fn fit_locked(&self, inner: &mut Inner, current: u64, held: &mut Vec<Option<Bytes>>) {
        let max = self.max_keys() as usize;
        if max == 0 {
            return;
        }
        while inner.table.len() > max {
            let i = rand::random_range(0..inner.table.len());
            let Some(key) = inner.table.get_index(i).map(|(k, _)| k.clone()) else {
                break;
            };
            self.invalidate_locked(inner, &key, current, Some(&mut *held));
        }
    }

    /// The default-mode half of a key change: every client that read `key` is told, and the
    /// key is forgotten. `current` is the client whose command runs (`NOLOOP` spares it);
    /// with `held`, its own message is kept there, to go after its reply.
    fn invalidate_locked(
        &self,
        inner: &mut Inner,
        key: &Bytes,
        current: u64,
        mut held: Option<&mut Vec<Option<Bytes>>>,
    ) {
        let Some(ids) = inner.table.swap_remove(key.as_ref()) else {
            return;
        };
        inner.items -= ids.len();
        for id in ids {
            let Some(t) = inner.trackers.get(&id) else {
                continue;
            };
            if t.mode.bcast || (t.mode.noloop && id == current) {
                continue;
            }
            match held.as_deref_mut() {
                Some(held) if id == current => held.push(Some(key.clone())),
                _ => self.send(inner, id, Payload::Keys(std::slice::from_ref(key))),
            }
        }
    }

    /// Sends client `id` one invalidation message, through its redirection if it has one,
    /// as Redis's `sendTrackingMessage`. Returns the frame when it is for the client's own
    /// connection and `own` asked to keep it (to go after a reply) instead of queueing it.
    fn deliver(
        &self,
        inner: &mut Inner,
        id: u64,
        payload: Payload<'_>,
        own: bool,
    ) -> Option<Frame> {
        let t = inner.trackers.get_mut(&id)?;
        let tracker_resp3 = t.handle.info.lock().resp > 2;
        let mut target = t.handle.clone();
        let mut redirected = false;
        if t.redirect != 0 {
            match self.clients.get(&t.redirect).map(|h| h.clone()) {
                Some(h) if !h.is_killed() => {
                    target = h;
                    redirected = true;
                }
                _ => {
                    t.broken = true;
                    if !tracker_resp3 {
                        return None;
                    }
                    let frame = Frame::Push(vec![
                        Frame::bulk("tracking-redir-broken"),
                        Frame::Integer(t.redirect as i64),
                    ]);
                    let handle = t.handle.clone();
                    return self.queue(&handle, frame, own);
                }
            }
        }
        let (target_resp3, target_subscribed) = {
            let info = target.info.lock();
            (info.resp > 2, info.sub + info.psub + info.ssub > 0)
        };
        let value = match payload {
            Payload::Keys(keys) => Frame::Array(keys.iter().cloned().map(Frame::Bulk).collect()),
            // A flush: the null of the tracking client's own protocol, as Redis sends it
            // (even to a redirection target that speaks the other one).
            Payload::Null => Frame::Raw(Bytes::from_static(if tracker_resp3 {
                b"_\r\n"
            } else {
                b"$-1\r\n"
            })),
        };
        let frame = if target_resp3 {
            Frame::Push(vec![Frame::bulk("invalidate"), value])
        } else if redirected && target_subscribed {
            Frame::Push(vec![Frame::bulk("message"), Frame::bulk(CHANNEL), value])
        } else {
            // RESP2 without a subscribed redirection: nowhere to say it.
            return None;
        };
        // Kept for after the reply when it goes to the running connection itself (a
        // redirection to oneself included).
        self.queue(&target, frame, own && target.id == id)
    }

    fn send(&self, inner: &mut Inner, id: u64, payload: Payload<'_>) {
        self.deliver(inner, id, payload, false);
    }

    /// Queues `frame` to `to`, or hands it back when `keep` (the caller writes it after the
    /// current reply). A client over its output-buffer limit is disconnected, as a slow
    /// subscriber is.
    fn queue(&self, to: &Arc<ClientHandle>, frame: Frame, keep: bool) -> Option<Frame> {
        if keep {
            return Some(frame);
        }
        if to.is_killed() {
            return None;
        }
        let sender = to.pusher()?;
        let size = crate::pubsub::approx_size(&frame);
        let queued = sender.send(frame, size);
        if queued >= 1 << 20 {
            let subscribed = {
                let i = to.info.lock();
                i.sub + i.psub + i.ssub > 0
            };
            let class = if subscribed {
                ClientClass::PubSub
            } else {
                ClientClass::Normal
            };
            let now_ms = self.clock.now_ms();
            crate::outbuf::enforce(to, queued, self.limits.output_limit(class), now_ms);
        }
        None
    }

    /// After client `id`'s command: the invalidations held for it (its own changes) and the
    /// broadcasts gathered meanwhile go out; the ones for its own connection are returned, to
    /// be written after its reply.
    pub(crate) fn after_command(&self, id: u64) -> Vec<Frame> {
        if !WORK.with(|w| w.replace(false)) {
            return Vec::new();
        }
        let held = HELD.with(|h| std::mem::take(&mut *h.borrow_mut()));
        let mut own = Vec::new();
        let mut inner = self.inner.lock();
        for key in held {
            let payload = match &key {
                Some(k) => Payload::Keys(std::slice::from_ref(k)),
                None => Payload::Null,
            };
            own.extend(self.deliver(&mut inner, id, payload, true));
        }
        if inner.bcast_pending {
            self.flush_broadcasts(&mut inner, id, &mut own);
        }
        own
    }

    /// Sends every prefix's gathered keys to its clients (Redis's
    /// `trackingBroadcastInvalidationMessages`); messages for client `me`'s own connection
    /// are pushed onto `own`.
    fn flush_broadcasts(&self, inner: &mut Inner, me: u64, own: &mut Vec<Frame>) {
        inner.bcast_pending = false;
        let prefixes: Vec<Bytes> = inner
            .prefixes
            .iter()
            .filter(|(_, p)| !p.pending.is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        for name in prefixes {
            let Some(p) = inner.prefixes.get_mut(&name) else {
                continue;
            };
            let pending = std::mem::take(&mut p.pending);
            let clients: Vec<u64> = p.clients.iter().copied().collect();
            for id in clients {
                let noloop = inner.trackers.get(&id).is_some_and(|t| t.mode.noloop);
                let keys: Vec<Bytes> = pending
                    .iter()
                    .filter(|(_, writer)| !(noloop && **writer == id))
                    .map(|(k, _)| k.clone())
                    .collect();
                if keys.is_empty() {
                    continue;
                }
                own.extend(self.deliver(inner, id, Payload::Keys(&keys), id == me));
            }
        }
    }
}

/// What an invalidation carries: keys, or the null of a flush.
#[derive(Debug, Clone, Copy)]
enum Payload<'a> {
    Keys(&'a [Bytes]),
    Null,
}

/// Whether one of two prefixes starts with the other (Redis's `stringCheckPrefix`).
pub(crate) fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

impl KeyChanges for Tracking {
    fn changed(&self, key: &[u8]) {
        let current = CURRENT.with(Cell::get);
        let mut inner = self.inner.lock();
        let broadcast = inner.prefixes.keys().any(|p| key.starts_with(p));
        if !broadcast && !inner.table.contains_key(key) {
            // Nobody reads it, no prefix covers it: no copy of the key, nothing to send.
            return;
        }
        let key = Bytes::copy_from_slice(key);
        let mut any_bcast = false;
        for (prefix, p) in inner.prefixes.iter_mut() {
            if key.starts_with(prefix) {
                p.pending.insert(key.clone(), current);
                any_bcast = true;
            }
        }
        inner.bcast_pending |= any_bcast;
        let mut held = Vec::new();
        self.invalidate_locked(&mut inner, &key, current, Some(&mut held));
        hold(held);
        if any_bcast && current != 0 {
            WORK.with(|w| w.set(true));
        }
        // A change outside any command (the expiry cycle, a blocked command's wake-up) has no
        // `after_command` to flush its broadcast: it goes now.
        if current == 0 && inner.bcast_pending {
            self.flush_broadcasts(&mut inner, 0, &mut Vec::new());
        }
        self.rearm(&inner);
    }

    fn flushed(&self) {
        let current = CURRENT.with(Cell::get);
        let mut inner = self.inner.lock();
        let ids: Vec<u64> = inner.trackers.keys().copied().collect();
        let mut held = Vec::new();
        for id in ids {
            if id == current {
                held.push(None);
            } else {
                self.send(&mut inner, id, Payload::Null);
            }
        }
        hold(held);
        inner.table = IndexMap::default();
        inner.items = 0;
        self.rearm(&inner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(max: u64) -> Tracking {
        Tracking::new(
            Arc::default(),
            ClientDirectory::default(),
            Arc::default(),
            Clock::system(),
            Arc::new(AtomicU64::new(max)),
        )
    }

    #[test]
    fn prefixes_overlap_when_one_starts_the_other() {
        assert!(overlap(b"user:", b"user:1"));
        assert!(overlap(b"user:1", b"user:"));
        assert!(
            overlap(b"", b"anything"),
            "the empty prefix covers every key"
        );
        assert!(overlap(b"a", b"a"));
        assert!(!overlap(b"ab", b"ac"));
    }

    #[test]
    fn the_table_never_stays_over_its_bound() {
        let t = table(10);
        let keys: Vec<Bytes> = (0..1000).map(|i| Bytes::from(format!("k{i}"))).collect();
        t.remember(7, keys[..5].iter());
        assert_eq!(t.counts(), (0, 5, 5, 0));
        assert!(t.armed(), "a table with keys listens to changes");
        // A burst of reads past the bound: random keys go until it fits.
        t.remember(8, keys.iter());
        let (_, keys_left, items, _) = t.counts();
        assert_eq!(keys_left, 10);
        assert!((10..=15).contains(&items), "{items} items for 10 keys");
        // Lowering the bound fits the table at once.
        t.max_keys.store(3, Ordering::Relaxed);
        t.fit(0);
        assert_eq!(t.counts().1, 3);
        // No bound: nothing is evicted.
        t.max_keys.store(0, Ordering::Relaxed);
        t.remember(9, keys.iter());
        assert_eq!(t.counts().1, 1000);
        // A change forgets the key; with nobody tracking and the table empty, the hook is off.
        let left: Vec<Bytes> = t.inner.lock().table.keys().cloned().collect();
        for k in &left {
            t.changed(k);
        }
        assert_eq!(t.counts(), (0, 0, 0, 0));
        assert!(!t.armed());
    }
}
