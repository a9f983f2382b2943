//! The keyspace: sixteen logical databases of typed values with optional expiry.
//!
//! Each [`Db`] is a concurrent map (`dashmap`) from key to [`Entry`]. Expiry is kept two ways,
//! as in Redis: every entry carries its deadline, so a read can expire it lazily, and each
//! database keeps an ordered index of deadlines so the active expiry cycle can find keys that
//! nobody reads.
//!
//! A word of caution for command authors: a [`dashmap::mapref::one::Ref`] or `RefMut` locks its
//! shard. Drop it before touching another key of the same database, or the thread deadlocks.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use dashmap::mapref::one::Ref;
use dashmap::DashMap;

/// The hasher of every keyspace map: aHash, seeded randomly per process (fast, and still
/// resistant to hash flooding), instead of the standard library's slower SipHash.
pub(crate) type KeyHasher = ahash::RandomState;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::config::Limits;
use crate::expiry_index::ExpiryIndex;
use crate::memory::{DbMemory, EntryMut};
pub(crate) use crate::value::{Entry, Value};

mod swap;

/// Number of logical databases (`SELECT 0` .. `SELECT 15`).
pub(crate) const NUM_DBS: usize = 16;

/// A flag that `WATCH` leaves on a key: set when the key is modified, read by `EXEC`.
#[derive(Debug, Default)]
pub(crate) struct WatchFlag {
    dirty: AtomicBool,
}

impl WatchFlag {
    /// Marks the transaction that watches this flag as doomed.
    pub(crate) fn set_dirty(&self) {
        self.dirty.store(true, Ordering::Release);
    }

    /// Whether a watched key changed since `WATCH`.
    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }
}

/// What hears of every change of a key besides `WATCH`: client-side caching's tracking
/// table ([`crate::tracking`]), which sits above this module and is plugged in when a
/// server starts.
pub(crate) trait KeyChanges: Send + Sync + std::fmt::Debug {
    /// `key` (of any database) was changed, deleted, expired or evicted.
    fn changed(&self, key: &[u8]);
    /// A whole database, or every one, was emptied (`FLUSHDB`, `FLUSHALL`, a full sync).
    fn flushed(&self);
}

/// The slot the keyspace calls [`KeyChanges`] through. While nobody listens, a change costs
/// one relaxed atomic load here.
#[derive(Debug, Default)]
pub(crate) struct ChangeHook {
    armed: Arc<AtomicBool>,
    hook: std::sync::OnceLock<Arc<dyn KeyChanges>>,
}

impl ChangeHook {
    /// Plugs the listener in (once; later calls change nothing).
    pub(crate) fn plug(&self, hook: Arc<dyn KeyChanges>) {
        let _ = self.hook.set(hook);
    }

    /// The flag that turns the calls on: the listener holds it and sets it while it has
    /// something to hear about.
    pub(crate) fn armed(&self) -> Arc<AtomicBool> {
        self.armed.clone()
    }

    fn changed(&self, key: &[u8]) {
        if self.armed.load(Ordering::Relaxed) {
            if let Some(h) = self.hook.get() {
                h.changed(key);
            }
        }
    }

    fn flushed(&self) {
        if self.armed.load(Ordering::Relaxed) {
            if let Some(h) = self.hook.get() {
                h.flushed();
            }
        }
    }
}

/// What [`Db::update`] does with a key once its decision is made.
#[derive(Debug)]
pub(crate) enum Update {
    /// Leave the key as it is.
    Keep,
    /// Store this entry (value and TTL) under the key.
    Put(Entry),
    /// Delete the key.
    Remove,
    /// Keep the value and give the key this deadline (`None`: no TTL).
    Expire(Option<u64>),
}

/// Where [`Db::shrink_step`] looks next in each of a database's tables.
#[derive(Debug, Default, Clone)]
pub(crate) struct ShrinkCursor {
    keys: usize,
    watchers: usize,
    blocked: usize,
}

/// One logical database.
#[derive(Debug, Default)]
pub(crate) struct Db {
    map: DashMap<Bytes, Entry, KeyHasher>,
    /// Every key with a TTL, by deadline, and how many there are (see [`ExpiryIndex`]).
    expiries: ExpiryIndex,
    /// Transactions watching keys of this database.
    watchers: DashMap<Bytes, Vec<Arc<WatchFlag>>, KeyHasher>,
    watched_count: AtomicUsize,
    /// Clients blocked in `BLPOP`/`BRPOP` (and friends) on keys of this database: each blocked
    /// client registers its own notifier under every key it waits for.
    blocked: DashMap<Bytes, Vec<Arc<Notify>>, KeyHasher>,
    /// Keys a read found expired and deleted (lazy expiry), waiting to be sent to replicas
    /// and the AOF as `DEL`s; see [`take_lazily_expired`](Db::take_lazily_expired).
    lazily_expired: Mutex<Vec<Bytes>>,
    /// Whether `lazily_expired` may hold keys: a lock-free check for the common case.
    has_lazily_expired: AtomicBool,
    /// How many databases of the keyspace have `has_lazily_expired` set: shared by the
    /// sixteen, so that the check after every command reads one counter instead of sixteen
    /// flags.
    keyspace_lazily_expired: Arc<AtomicUsize>,
    /// The running estimate of this database's bytes (see [`crate::memory`]).
    mem: DbMemory,
    /// The memory settings; reads stamp keys by the eviction policy's rules.
    limits: Arc<Limits>,
    /// Who else hears of changes (the tracking table), shared by the sixteen databases.
    hook: Arc<ChangeHook>,
}

impl Db {
    /// This database's memory estimate.
    pub(crate) fn memory(&self) -> &DbMemory {
        &self.mem
    }

    /// The map itself, for eviction's sampling.
    pub(crate) fn map(&self) -> &DashMap<Bytes, Entry, KeyHasher> {
        &self.map
    }

    /// Rebuilds, at most `budget` of them, the shards of this database's tables (the keys,
    /// and the registries of watched and blocked-on keys) that deletions left mostly empty;
    /// `cursor` remembers where to look next (see [`crate::shrink`]). Returns how many.
    pub(crate) fn shrink_step(&self, cursor: &mut ShrinkCursor, budget: usize) -> usize {
        use crate::shrink::shrink_shards;
        let mut done = shrink_shards(&self.map, &mut cursor.keys, budget);
        done += shrink_shards(
            &self.watchers,
            &mut cursor.watchers,
            budget - done.min(budget),
        );
        done += shrink_shards(
            &self.blocked,
            &mut cursor.blocked,
            budget - done.min(budget),
        );
        done
    }

    /// Reads a key, expiring it first if its time has passed. `lazy_delete` is false on a
    /// replica, which hides an expired key but leaves its deletion to the master.
    pub(crate) fn get(
        &self,
        key: &[u8],
        now_ms: u64,
        lazy_delete: bool,
    ) -> Option<Ref<'_, Bytes, Entry>> {
        let r = self.map.get(key)?;
        if !r.is_expired(now_ms) {
            r.access.touch(now_ms, &self.limits);
            return Some(r);
        }
        drop(r);
        if lazy_delete {
            self.expire_lazily(key, now_ms);
        }
        None
    }

    /// Like [`get`](Db::get) but for modification.
    pub(crate) fn get_mut(
        &self,
        key: &[u8],
        now_ms: u64,
        lazy_delete: bool,
    ) -> Option<EntryMut<'_>> {
        let r = self.map.get_mut(key)?;
        if !r.is_expired(now_ms) {
            r.access.touch(now_ms, &self.limits);
            return Some(EntryMut::new(r, &self.mem));
        }
        drop(r);
        if lazy_delete {
            self.expire_lazily(key, now_ms);
        }
        None
    }

    /// Whether a live key exists.
    pub(crate) fn contains(&self, key: &[u8], now_ms: u64) -> bool {
        self.map.get(key).is_some_and(|e| !e.is_expired(now_ms))
    }

    /// Stores an entry, replacing whatever was there (TTL included); the replaced value is
    /// freed off the hot path when big (see [`crate::lazyfree`]). Returns whether a key was
    /// replaced (expired or not).
    pub(crate) fn insert(&self, key: Bytes, entry: Entry) -> bool {
        let new_deadline = entry.expires_at;
        self.mem.added(&key, &entry);
        let old = self.map.insert(key.clone(), entry);
        if let Some(o) = &old {
            self.mem.removed(&key, o);
        }
        self.reindex(&key, old.as_ref().and_then(|e| e.expires_at), new_deadline);
        self.signal_modified(&key);
        match old {
            Some(old) => {
                crate::lazyfree::free_entry(old);
                true
            }
            None => false,
        }
    }

    /// Moves `key`'s pair in the expiry index from its old deadline to its new one, after
    /// the entry changed (and its shard lock was let go: the index is never locked while a
    /// shard is, the order the active expiry cycle takes them in). The old pair goes first, so
    /// that a key set again with the same deadline keeps its pair.
    fn reindex(&self, key: &Bytes, old: Option<u64>, new: Option<u64>) {
        self.expiries.moved(key, old, new);
    }

    /// Reads and writes `key` as one step: `decide` sees the live entry (`None` when the key
    /// is absent or expired) and says what becomes of it, while no other command can touch
    /// the key. Commands run in parallel, so every read-modify-write of one key (`SET NX`,
    /// `INCR`, `APPEND`, ...) goes through here; a read followed by a separate write would let
    /// two clients both take a lock, or lose an increment.
    ///
    /// An expired entry found here is deleted whatever `decide` says, and with `lazy_delete`
    /// noted for propagation as a `DEL` (before the command's own effect), as a read would.
    pub(crate) fn update<R>(
        &self,
        key: &Bytes,
        now_ms: u64,
        lazy_delete: bool,
        decide: impl FnOnce(Option<&Entry>) -> (Update, R),
    ) -> R {
        use dashmap::mapref::entry::Entry as Slot;
        // `dropped`: a replaced or deleted entry, freed once the shard is let go.
        let (r, old_deadline, new_deadline, changed, dropped) = match self.map.entry(key.clone()) {
            Slot::Occupied(mut slot) => {
                let expired = slot.get().is_expired(now_ms);
                if !expired {
                    slot.get().access.touch(now_ms, &self.limits);
                }
                let before = DbMemory::measure(key, slot.get());
                let (update, r) = decide((!expired).then(|| slot.get()));
                // Charged as the entry is now, whatever happened to it (removal, nothing).
                let after = |e: Option<&Entry>| match e {
                    Some(e) => self.mem.changed(before, key, e),
                    None => self.mem.changed_to_nothing(before),
                };
                if expired && lazy_delete {
                    self.note_lazily_expired(key.clone());
                }
                match update {
                    Update::Put(entry) => {
                        let new = entry.expires_at;
                        entry.access.init(now_ms, &self.limits);
                        after(Some(&entry));
                        let old = slot.insert(entry);
                        (r, old.expires_at, new, true, Some(old))
                    }
                    Update::Remove => {
                        after(None);
                        let old = slot.remove();
                        (r, old.expires_at, None, true, Some(old))
                    }
                    // `decide` was shown no entry: nothing of it is kept. A master deletes the
                    // expired key; a replica hides it and waits for its master's DEL.
                    Update::Keep | Update::Expire(_) if expired && lazy_delete => {
                        after(None);
                        let old = slot.remove();
                        (r, old.expires_at, None, true, Some(old))
                    }
                    Update::Keep | Update::Expire(_) if expired => (r, None, None, false, None),
                    Update::Expire(deadline) => {
                        let old = std::mem::replace(&mut slot.get_mut().expires_at, deadline);
                        after(Some(slot.get()));
                        (r, old, deadline, true, None)
                    }
                    Update::Keep => (r, None, None, false, None),
                }
            }
            Slot::Vacant(slot) => {
                let (update, r) = decide(None);
                match update {
                    Update::Put(entry) => {
                        let new = entry.expires_at;
                        entry.access.init(now_ms, &self.limits);
                        self.mem.added(key, &entry);
                        slot.insert(entry);
                        (r, None, new, true, None)
                    }
                    Update::Remove | Update::Keep | Update::Expire(_) => {
                        (r, None, None, false, None)
                    }
                }
            }
        };
        self.reindex(key, old_deadline, new_deadline);
        if changed {
            self.signal_modified(key);
        }
        if let Some(old) = dropped {
            crate::lazyfree::free_entry(old);
        }
        r
    }

    /// The live entry of `key` for modification, created with `make()`'s value (no TTL) when
    /// the key is absent or expired, in one step: two clients creating the same hash or list
    /// at once both end up adding to the one that exists.
    pub(crate) fn get_or_create(
        &self,
        key: &Bytes,
        now_ms: u64,
        lazy_delete: bool,
        make: impl FnOnce() -> Value,
    ) -> EntryMut<'_> {
        use dashmap::mapref::entry::Entry as Slot;
        let fresh = || {
            let e = Entry::new(make());
            e.access.init(now_ms, &self.limits);
            self.mem.added(key, &e);
            e
        };
        let r = match self.map.entry(key.clone()) {
            Slot::Occupied(mut slot) => {
                if slot.get().is_expired(now_ms) {
                    if lazy_delete {
                        self.note_lazily_expired(key.clone());
                    }
                    // The shard is locked, so the index is not touched: the old deadline's
                    // pair stays until the expiry cycle pops it and finds it stale. The
                    // count of keys with a TTL is fixed at once.
                    self.mem.removed(key, slot.get());
                    let old = slot.insert(fresh());
                    self.expiries.recount(old.expires_at, None);
                    crate::lazyfree::free_entry(old);
                } else {
                    slot.get().access.touch(now_ms, &self.limits);
                }
                slot.into_ref()
            }
            Slot::Vacant(slot) => slot.insert(fresh()),
        };
        EntryMut::new(r, &self.mem)
    }

    /// Deletes `key` if it holds an empty hash, list or sorted set: what a command that took
    /// out the last element does next. Checked again under the key's lock, since another
    /// client may have added an element in between. Returns whether it deleted.
    pub(crate) fn remove_if_empty(&self, key: &[u8]) -> bool {
        match self
            .map
            .remove_if(key, |_, e| e.value.is_empty_collection())
        {
            Some((k, e)) => {
                self.mem.removed(&k, &e);
                self.reindex(&k, e.expires_at, None);
                self.signal_modified(&k);
                true
            }
            None => false,
        }
    }

    /// Removes a key; returns the entry if there was one (expired or not).
    pub(crate) fn remove(&self, key: &[u8]) -> Option<Entry> {
        let (k, e) = self.map.remove(key)?;
        self.mem.removed(&k, &e);
        self.reindex(&k, e.expires_at, None);
        self.signal_modified(&k);
        Some(e)
    }

    /// Deletes `key` if it is expired, as a read that found it so does (lazy expiry), and
    /// remembers it: like Redis, a master tells its replicas and its AOF with a `DEL`, since
    /// they never expire keys themselves. Returns whether it deleted.
    pub(crate) fn expire_lazily(&self, key: &[u8], now_ms: u64) -> bool {
        // Noted while the key's shard is still locked, so that a write which recreates the
        // key afterwards finds the note when it feeds its own effect (the `DEL` goes first).
        let removed = self.map.remove_if(key, |k, e| {
            let expired = e.is_expired(now_ms);
            if expired {
                self.note_lazily_expired(k.clone());
            }
            expired
        });
        let Some((k, e)) = removed else {
            return false;
        };
        self.mem.removed(&k, &e);
        // The key's pair stays in the index: it is due, so the expiry cycle pops it soon (a
        // cheap pop from the front) and drops it as stale. Searching the index for it here
        // would cost every read that meets an expired key a logarithmic walk with key
        // comparisons, just when a storm of expiries makes such reads common.
        self.expiries.recount(e.expires_at, None);
        self.signal_modified(&k);
        crate::lazyfree::free_entry(e);
        true
    }

    /// Records that `key`, found expired, was deleted by a command (a read, or a `DEL` of a
    /// key that had already expired), so that the deletion is propagated.
    pub(crate) fn note_lazily_expired(&self, key: Bytes) {
        self.lazily_expired.lock().push(key);
        if !self.has_lazily_expired.swap(true, Ordering::AcqRel) {
            self.keyspace_lazily_expired.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Whether [`take_lazily_expired`](Db::take_lazily_expired) may return keys (a lock-free
    /// check for the common case, where it would not).
    pub(crate) fn may_have_lazily_expired(&self) -> bool {
        self.has_lazily_expired.load(Ordering::Acquire)
    }

    /// Takes the keys lazily expired since the last call (the dispatcher sends them on as
    /// `DEL`s before the effects of the command that expired them).
    pub(crate) fn take_lazily_expired(&self) -> Vec<Bytes> {
        if !self.has_lazily_expired.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        self.keyspace_lazily_expired.fetch_sub(1, Ordering::AcqRel);
        std::mem::take(&mut *self.lazily_expired.lock())
    }

    /// Keys whose deadline has passed, at most `limit` of them, without deleting them.
    pub(crate) fn due_keys(&self, now_ms: u64, limit: usize) -> Vec<Bytes> {
        self.expiries.peek_due(now_ms, limit)
    }

    /// Whether some key's deadline is at or before `now_ms` (a stale index pair counts too,
    /// until the expiry cycle drops it): what the cycle has left to do.
    pub(crate) fn has_due(&self, now_ms: u64) -> bool {
        self.expiries.next_deadline().is_some_and(|t| t <= now_ms)
    }

    /// Runs one bounded step of active expiry: pops up to `limit` due pairs from the front
    /// of the expiry index and deletes each key that is still expired. Returns the deleted
    /// keys with their entries, so the caller can propagate the deletions and then free the
    /// values (see [`crate::lazyfree`]) outside its locks. Costs `O(limit · log n)`, whatever
    /// the number of keys with a TTL.
    ///
    /// The keys are deleted as one batch ([`crate::batch_remove`]: one lock per shard, their
    /// lookups overlapped), and the memory estimate and the TTL count are adjusted once for
    /// the whole step. The deleted keys come back in no particular order; a key is only
    /// deleted once, so the order of their `DEL`s does not matter to anyone.
    pub(crate) fn active_expire(&self, now_ms: u64, limit: usize) -> Vec<(Bytes, Entry)> {
        let mut due = Vec::with_capacity(limit.min(1024));
        self.expiries.pop_due(now_ms, limit, &mut due);
        // A pair whose key got a later deadline (or none) meanwhile is stale: the entry
        // decides. An entry expired under another deadline is deleted all the same; its own
        // pair, also due, is dropped as stale when popped.
        let keys: Vec<Bytes> = due.into_iter().map(|(_, k)| k).collect();
        let gone = crate::batch_remove::remove_expired(&self.map, keys, now_ms);
        self.mem.removed_all(gone.iter().map(|(k, e)| (&k[..], e)));
        // Every entry deleted here had a deadline.
        self.expiries.uncount(gone.len());
        // Watchers and client-side caches (CLIENT TRACKING) hear of each deletion; with
        // neither, `signal_modified` costs two atomic loads a key.
        for (k, _) in &gone {
            self.signal_modified(k);
        }
        gone
    }

    /// Number of keys, counting ones that are expired but not yet deleted (as Redis's DBSIZE).
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the database holds no keys at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Number of keys with a TTL (for `INFO keyspace`).
    pub(crate) fn expires_count(&self) -> usize {
        self.expiries.count()
    }

    /// Checks that every key with a TTL has its `(deadline, key)` pair in the expiry index,
    /// without which the active expiry cycle would never find it, and that the index's TTL
    /// count is right. (The index may also hold
    /// stale pairs; those are checked against the entry before anything is deleted.) For the
    /// fuzz targets and tests, which call it while nothing else runs.
    #[doc(hidden)]
    #[cfg(any(test, feature = "internals"))]
    pub(crate) fn check_expiry_index(&self) -> Result<(), String> {
        let mut with_ttl = 0;
        for e in self.map.iter() {
            if let Some(t) = e.expires_at {
                with_ttl += 1;
                if !self.expiries.contains(t, e.key()) {
                    return Err(format!(
                        "key {:?} expires at {t} but is not in the expiry index",
                        e.key()
                    ));
                }
            }
        }
        if with_ttl != self.expiries.count() {
            return Err(format!(
                "{with_ttl} keys have a TTL but the index counts {}",
                self.expiries.count()
            ));
        }
        Ok(())
    }

    /// Every live key (for `KEYS` and `SCAN`), in no particular order.
    pub(crate) fn keys(&self, now_ms: u64) -> Vec<Bytes> {
        self.map
            .iter()
            .filter(|e| !e.is_expired(now_ms))
            .map(|e| e.key().clone())
            .collect()
    }

    /// A snapshot of every live entry (for replication snapshots and persistence).
    pub(crate) fn snapshot(&self, now_ms: u64) -> Vec<(Bytes, Entry)> {
        self.map
            .iter()
            .filter(|e| !e.is_expired(now_ms))
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect()
    }

    /// Deletes every key, signalling every watcher, and frees the values before returning
    /// (`FLUSHDB SYNC`).
    pub(crate) fn clear(&self) {
        self.clear_keys();
        self.hook.flushed();
    }

    fn clear_keys(&self) {
        self.map.clear();
        self.mem.clear();
        drop(self.expiries.take_all());
        self.signal_all_watchers();
    }

    /// Deletes every key, signalling every watcher, and leaves freeing the values to the
    /// background freer (`FLUSHDB ASYNC`): each shard of the map is swapped for an empty one
    /// under its lock, so the work done here does not grow with the number of keys.
    pub(crate) fn clear_async(&self) {
        self.clear_keys_async();
        self.hook.flushed();
    }

    fn clear_keys_async(&self) {
        for shard in self.map.shards() {
            let contents = std::mem::take(&mut *shard.write());
            crate::lazyfree::free_in_background(Box::new(contents));
        }
        self.mem.clear();
        crate::lazyfree::free_in_background(Box::new(self.expiries.take_all()));
        self.signal_all_watchers();
    }

    fn signal_all_watchers(&self) {
        for w in self.watchers.iter() {
            for f in w.value() {
                f.set_dirty();
            }
        }
    }

    /// Registers a `WATCH` on `key`.
    pub(crate) fn watch(&self, key: Bytes, flag: Arc<WatchFlag>) {
        self.watchers.entry(key).or_default().push(flag);
        self.watched_count.fetch_add(1, Ordering::AcqRel);
    }

    /// Removes a `WATCH` registered with [`watch`](Db::watch).
    pub(crate) fn unwatch(&self, key: &[u8], flag: &Arc<WatchFlag>) {
        let mut empty = false;
        if let Some(mut list) = self.watchers.get_mut(key) {
            let before = list.len();
            list.retain(|f| !Arc::ptr_eq(f, flag));
            let removed = before - list.len();
            self.watched_count.fetch_sub(removed, Ordering::AcqRel);
            empty = list.is_empty();
        }
        if empty {
            self.watchers.remove_if(key, |_, l| l.is_empty());
        }
    }

    /// Tells transactions watching `key` that it changed, and the tracking table (see
    /// [`ChangeHook`]). Every write goes through here.
    pub(crate) fn signal_modified(&self, key: &[u8]) {
        self.hook.changed(key);
        if self.watched_count.load(Ordering::Acquire) == 0 {
            return;
        }
        if let Some(list) = self.watchers.get(key) {
            for f in list.iter() {
                f.set_dirty();
            }
        }
    }

    /// Wakes the client that has been blocked on `key` the longest (after a push onto a list,
    /// say), as Redis serves blocked clients in the order they blocked. It gets a permit, so a
    /// client that is between its last check and its wait does not miss the wake-up.
    ///
    /// Only that one: it passes the baton when it leaves the queue, served or not (its
    /// [`unblock`](Db::unblock) wakes the next), so each waiter checks the key in turn and one
    /// push onto a key with ten thousand waiters costs one wake-up, not ten thousand.
    pub(crate) fn signal_ready(&self, key: &[u8]) {
        if self.blocked.is_empty() {
            return;
        }
        if let Some(list) = self.blocked.get(key) {
            if let Some(first) = list.first() {
                first.notify_one();
            }
        }
    }

    /// Wakes every client blocked on `key` (after an `XADD`: every `XREAD` reader gets the
    /// new entries, so none waits for another's turn). Each gets a permit, as with
    /// [`signal_ready`](Db::signal_ready).
    pub(crate) fn signal_all(&self, key: &[u8]) {
        if self.blocked.is_empty() {
            return;
        }
        if let Some(list) = self.blocked.get(key) {
            for n in list.iter() {
                n.notify_one();
            }
        }
    }

    /// Wakes the client blocked on `key` right after the one whose notifier is `notify`: a
    /// woken client that could not be served by what `key` holds (a `BZPOPMIN` first in line
    /// for a key that became a list, say) passes the turn on, so the clients behind it are not
    /// stuck behind a client that will never take anything.
    pub(crate) fn signal_after(&self, key: &[u8], notify: &Arc<Notify>) {
        if let Some(list) = self.blocked.get(key) {
            if let Some(i) = list.iter().position(|n| Arc::ptr_eq(n, notify)) {
                // Never itself: a client that named the key twice is in the line twice.
                if let Some(next) = list[i + 1..].iter().find(|n| !Arc::ptr_eq(n, notify)) {
                    next.notify_one();
                }
            }
        }
    }

    /// Registers a blocked client's notifier under `key`.
    pub(crate) fn block_on(&self, key: Bytes, notify: Arc<Notify>) {
        self.blocked.entry(key).or_default().push(notify);
    }

    /// Removes a notifier registered with [`block_on`](Db::block_on), and wakes the client
    /// next in line for `key` when the leaving one was first: the key may hold what the
    /// leaving client was woken for and did not take (it timed out, was unblocked, got an
    /// error, or took only part of it).
    pub(crate) fn unblock(&self, key: &[u8], notify: &Arc<Notify>) {
        let mut was_first = false;
        if let Some(mut list) = self.blocked.get_mut(key) {
            was_first = list.first().is_some_and(|n| Arc::ptr_eq(n, notify));
            list.retain(|n| !Arc::ptr_eq(n, notify));
        }
        self.blocked.remove_if(key, |_, l| l.is_empty());
        if was_first {
            self.signal_ready(key);
        }
    }
}

/// All sixteen databases.
#[derive(Debug)]
pub(crate) struct Keyspace {
    dbs: Vec<Db>,
    /// How many databases hold lazily expired keys not yet taken (see
    /// [`may_have_lazily_expired`](Keyspace::may_have_lazily_expired)).
    any_lazily_expired: Arc<AtomicUsize>,
    hook: Arc<ChangeHook>,
}

impl Default for Keyspace {
    fn default() -> Self {
        Keyspace::with_limits(Arc::default())
    }
}

impl Keyspace {
    /// Sixteen empty databases following these memory settings (the configuration's).
    pub(crate) fn with_limits(limits: Arc<Limits>) -> Keyspace {
        let any_lazily_expired = Arc::new(AtomicUsize::new(0));
        let hook = Arc::new(ChangeHook::default());
        // One hasher for every database's map: a key lands in the same shard in each, which
        // lets `SWAPDB` exchange whole shards (see `swap`).
        let hasher = KeyHasher::default();
        Keyspace {
            dbs: (0..NUM_DBS)
                .map(|_| Db {
                    map: DashMap::with_hasher(hasher.clone()),
                    keyspace_lazily_expired: any_lazily_expired.clone(),
                    limits: limits.clone(),
                    hook: hook.clone(),
                    ..Db::default()
                })
                .collect(),
            any_lazily_expired,
            hook,
        }
    }

    /// The slot through which every change of a key is heard (by the tracking table).
    pub(crate) fn change_hook(&self) -> &ChangeHook {
        &self.hook
    }

    /// Database number `i` (0..16).
    pub(crate) fn db(&self, i: usize) -> &Db {
        &self.dbs[i]
    }

    /// Whether some database may hold lazily expired keys not yet taken: a single load
    /// that saves looking at each database's
    /// [`may_have_lazily_expired`](Db::may_have_lazily_expired) after every command. It
    /// stays true until those keys are taken, so a write that recreates such a key still
    /// finds them and sends their `DEL`s first.
    pub(crate) fn may_have_lazily_expired(&self) -> bool {
        self.any_lazily_expired.load(Ordering::Acquire) > 0
    }

    /// Iterates over `(index, db)`.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &Db)> {
        self.dbs.iter().enumerate()
    }

    /// Deletes every key of every database (`FLUSHALL`).
    pub(crate) fn clear_all(&self) {
        for db in &self.dbs {
            db.clear_keys();
        }
        self.hook.flushed();
    }

    /// Deletes every key of every database and frees them in the background (`FLUSHALL
    /// ASYNC`): see [`Db::clear_async`].
    pub(crate) fn clear_all_async(&self) {
        for db in &self.dbs {
            db.clear_keys_async();
        }
        self.hook.flushed();
    }

    /// Whether some database has a key whose deadline is at or before `now_ms` and that the
    /// active expiry cycle has not deleted yet.
    pub(crate) fn has_due(&self, now_ms: u64) -> bool {
        self.dbs.iter().any(|db| db.has_due(now_ms))
    }

    /// Key counts per non-empty database: `(index, keys, expires)`.
    pub(crate) fn stats(&self) -> Vec<(usize, usize, usize)> {
        self.iter()
            .filter(|(_, db)| !db.is_empty())
            .map(|(i, db)| (i, db.len(), db.expires_count()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;

    fn string(v: &str, expires_at: Option<u64>) -> Entry {
        Entry::with_expiry(Value::Str(Bytes::copy_from_slice(v.as_bytes())), expires_at)
    }

    #[test]
    fn a_key_set_again_with_the_same_deadline_is_still_expired_actively() {
        let db = Db::default();
        let key = Bytes::from_static(b"k");
        db.insert(key.clone(), string("a", Some(100)));
        db.insert(key.clone(), string("b", Some(100)));
        assert_eq!(db.due_keys(100, 10), vec![key.clone()]);
        db.update(&key, 0, true, |_| (Update::Put(string("c", Some(100))), ()));
        assert_eq!(gone_keys(db.active_expire(100, 10)), vec![key]);
        assert!(db.is_empty());
        assert_eq!(db.expires_count(), 0);
    }

    #[test]
    fn update_sees_an_expired_key_as_absent_and_deletes_it() {
        let db = Db::default();
        let key = Bytes::from_static(b"k");
        db.insert(key.clone(), string("old", Some(10)));
        let seen = db.update(&key, 20, true, |e| (Update::Keep, e.is_some()));
        assert!(!seen);
        assert!(db.is_empty(), "deleted, as a read would");
        assert_eq!(
            db.take_lazily_expired(),
            vec![key.clone()],
            "and noted for a DEL"
        );
        // On a replica (no lazy delete) it is hidden but left for the master's DEL.
        db.insert(key.clone(), string("old", Some(10)));
        let seen = db.update(&key, 20, false, |e| (Update::Keep, e.is_some()));
        assert!(!seen);
        assert_eq!(db.len(), 1);
    }

    #[test]
    fn update_changes_a_deadline_in_place() {
        let db = Db::default();
        let key = Bytes::from_static(b"k");
        db.insert(key.clone(), string("v", Some(100)));
        db.update(&key, 0, true, |_| (Update::Expire(Some(50)), ()));
        assert_eq!(db.get(&key, 0, true).unwrap().expires_at, Some(50));
        assert_eq!(gone_keys(db.active_expire(60, 10)), vec![key]);
    }

    fn gone_keys(gone: Vec<(Bytes, Entry)>) -> Vec<Bytes> {
        gone.into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn the_ttl_count_is_kept_through_every_change() {
        let db = Db::default();
        let (a, b) = (Bytes::from_static(b"a"), Bytes::from_static(b"b"));
        db.insert(a.clone(), string("v", Some(100)));
        db.insert(b.clone(), string("v", None));
        assert_eq!(db.expires_count(), 1);
        db.update(&b, 0, true, |_| (Update::Expire(Some(200)), ()));
        assert_eq!(db.expires_count(), 2);
        db.update(&a, 0, true, |_| (Update::Expire(None), ()));
        assert_eq!(db.expires_count(), 1);
        // An expired key recreated as a fresh hash loses its TTL; its stale pair is dropped
        // by the next pass without deleting the new key.
        drop(db.get_or_create(&b, 300, true, || Value::Hash(IndexMap::new())));
        assert_eq!(db.expires_count(), 0);
        assert!(db.has_due(300), "the stale pair is still due");
        assert!(db.active_expire(300, 10).is_empty());
        assert!(!db.has_due(300));
        assert_eq!(db.len(), 2);
        db.remove(&a);
        db.insert(a.clone(), string("v", Some(10)));
        db.clear();
        assert_eq!(db.expires_count(), 0);
        assert!(!db.has_due(u64::MAX));
    }

    #[test]
    fn a_read_that_expires_a_key_leaves_its_pair_to_the_cycle() {
        let db = Db::default();
        let key = Bytes::from_static(b"k");
        db.insert(key.clone(), string("v", Some(10)));
        assert!(db.get(&key, 20, true).is_none());
        assert_eq!(db.len(), 0);
        assert_eq!(db.expires_count(), 0, "counted out at once");
        assert!(db.has_due(20), "the pair is left, due");
        // Recreated meanwhile: the stale pair must not delete the new key.
        db.insert(key.clone(), string("new", None));
        assert!(db.active_expire(20, 10).is_empty());
        assert!(!db.has_due(u64::MAX));
        assert_eq!(db.get(&key, 20, true).unwrap().value.type_name(), "string");
    }

    #[test]
    fn an_async_flush_leaves_nothing_behind() {
        let db = Db::default();
        for i in 0..1000u32 {
            db.insert(Bytes::from(i.to_string()), string("v", Some(u64::from(i))));
        }
        db.clear_async();
        assert_eq!(db.len(), 0);
        assert_eq!(db.expires_count(), 0);
        assert!(!db.has_due(u64::MAX));
        assert!(db.get(b"1", 0, true).is_none());
    }

    #[test]
    fn a_step_deletes_at_most_its_limit_in_deadline_order() {
        let db = Db::default();
        for i in 0..100u64 {
            db.insert(Bytes::from(format!("k{i:03}")), string("v", Some(i)));
        }
        // The earliest ten, deleted as one batch (in no particular order within it).
        let mut gone = gone_keys(db.active_expire(1_000, 10));
        gone.sort();
        let want: Vec<Bytes> = (0..10).map(|i| Bytes::from(format!("k{i:03}"))).collect();
        assert_eq!(gone, want);
        assert_eq!(db.len(), 90);
        assert_eq!(db.expires_count(), 90);
    }

    #[test]
    fn a_batch_step_keeps_the_counts_and_tells_watchers() {
        let db = Db::default();
        db.insert(Bytes::from_static(b"plain"), string("v", None));
        let baseline = db.memory().entry_bytes();
        for i in 0..1000u64 {
            let deadline = if i % 2 == 0 { Some(10) } else { Some(1_000) };
            db.insert(Bytes::from(format!("k{i}")), string("value", deadline));
        }
        // A key renewed after its pair was laid: its old pair is due, the entry is not.
        db.update(&Bytes::from_static(b"k0"), 0, true, |_| {
            (Update::Expire(Some(5_000)), ())
        });
        let watched = Arc::new(WatchFlag::default());
        db.watch(Bytes::from_static(b"k2"), watched.clone());
        let spare = Arc::new(WatchFlag::default());
        db.watch(Bytes::from_static(b"k1"), spare.clone());
        let mut gone = 0;
        loop {
            let step = db.active_expire(100, 128);
            if step.is_empty() {
                break;
            }
            assert!(step.len() <= 128);
            gone += step.len();
        }
        assert_eq!(gone, 499, "the even keys but the renewed one");
        assert_eq!(db.len(), 502);
        assert_eq!(db.expires_count(), 501);
        assert_eq!(db.memory().volatile_keys(), 501);
        assert!(watched.is_dirty(), "a watcher of an expired key is told");
        assert!(!spare.is_dirty(), "a watcher of a live key is not");
        assert!(db.contains(b"k0", 100));
        db.check_expiry_index().unwrap();
        // Every key gone, the estimate is back where it started.
        while !db.active_expire(u64::MAX, 128).is_empty() {}
        assert_eq!(db.len(), 1);
        assert_eq!(db.expires_count(), 0);
        assert_eq!(db.memory().entry_bytes(), baseline);
    }
}
