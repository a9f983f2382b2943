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
use dashmap::{DashMap, SharedValue};

/// The hasher of every keyspace map: aHash, seeded randomly per process (fast, and still
/// resistant to hash flooding), instead of the standard library's slower SipHash.
pub(crate) type KeyHasher = ahash::RandomState;
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::config::Limits;
use crate::expiry_index::ExpiryIndex;
use crate::memory::{DbMemory, EntryMut};
pub(crate) use crate::value::{key_bytes, Entry, Key, Str, Value};
use blocked::GroupReader;

mod blocked;
mod swap;
#[cfg(test)]
mod tests;
mod watch;

pub(crate) use watch::{ChangeHook, KeyChanges, WatchFlag};

/// What happened to a key that a command noted for keyspace notifications.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Noted {
    /// Found expired and deleted (`expired`).
    Expired,
    /// Added to the database (`new`).
    Created,
}

thread_local! {
    /// Keys this thread's command found expired and deleted, or created, not yet announced
    /// to keyspace notifications (see [`take_noted_here`]), in the order it happened.
    static NOTED_HERE: std::cell::RefCell<Vec<(usize, Bytes, Noted)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// Whether [`NOTED_HERE`] may hold keys: the one test every command pays.
    static ANY_NOTED_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Takes the `(database, key, what)` triples that commands on this thread noted since the
/// last call: keys found expired and deleted (Redis deletes an expired key when it looks it
/// up) and keys created (Redis's `dbAdd`). Their `expired` and `new` notifications go out
/// before the command's own, in the order Redis sends them.
pub(crate) fn take_noted_here() -> Option<Vec<(usize, Bytes, Noted)>> {
    if !ANY_NOTED_HERE.with(|a| a.replace(false)) {
        return None;
    }
    Some(NOTED_HERE.with(|e| std::mem::take(&mut *e.borrow_mut())))
}

fn note_here(db: usize, key: &Bytes, what: Noted) {
    NOTED_HERE.with(|e| e.borrow_mut().push((db, key.clone(), what)));
    ANY_NOTED_HERE.with(|a| a.set(true));
}

/// Number of logical databases (`SELECT 0` .. `SELECT 15`).
pub(crate) const NUM_DBS: usize = 16;

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
    /// This database's number (`SELECT`), for what it reports about its keys.
    index: usize,
    map: DashMap<Key, Entry, KeyHasher>,
    /// Every key with a TTL, by deadline, and how many there are (see [`ExpiryIndex`]).
    expiries: ExpiryIndex,
    /// Transactions watching keys of this database.
    watchers: DashMap<Bytes, Vec<Arc<WatchFlag>>, KeyHasher>,
    watched_count: AtomicUsize,
    /// Clients blocked in `BLPOP`/`BRPOP` (and friends) on keys of this database: each blocked
    /// client registers its own notifier under every key it waits for.
    blocked: DashMap<Bytes, Vec<Arc<Notify>>, KeyHasher>,
    /// How many notifiers `blocked` holds: what a push checks first. Asking the map itself
    /// whether it is empty read-locks each of its shards in turn, two atomic operations a
    /// shard on the path of every `LPUSH` and `ZADD`.
    blocked_count: AtomicUsize,
    /// Clients blocked in `XREADGROUP` on keys of this database, in the order they blocked,
    /// each with the group it reads as: woken by any change of the key (a deletion, a new
    /// type, a flush, a swap) so that they can answer that the stream is gone, as Redis's
    /// `signalDeletedKeyAsReady` makes them; and served new entries one reader of a group at
    /// a time, in that order (see [`Db::first_group_reader`]).
    change_watchers: DashMap<Bytes, Vec<GroupReader>, KeyHasher>,
    /// How many notifiers `change_watchers` holds: the one check every write pays.
    change_watcher_count: AtomicUsize,
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
    /// Keys the active expiry cycle has taken out of the table whose big values it is still
    /// freeing (with `lazyfree-lazy-expire no`): they count in [`len`](Db::len) until they
    /// are freed, as in Redis, whose cycle deletes and frees a key in one step nobody can
    /// watch half done (see [`active_expire`](Db::active_expire)).
    freeing: AtomicUsize,
}

impl Db {
    /// This database's memory estimate.
    pub(crate) fn memory(&self) -> &DbMemory {
        &self.mem
    }

    /// The map itself, for eviction's sampling.
    pub(crate) fn map(&self) -> &DashMap<Key, Entry, KeyHasher> {
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
    ) -> Option<Ref<'_, Key, Entry>> {
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
    /// replaced (expired or not). A key that was absent is noted as created (see
    /// [`take_noted_here`]); a caller that replaces a key as Redis does, by deleting it and
    /// adding it anew (`RENAME`, `COPY`, `RESTORE REPLACE`), removes it first.
    pub(crate) fn insert(&self, key: Bytes, entry: Entry) -> bool {
        let replaced = self.store(&key, entry);
        if !replaced {
            self.note_created(&key);
        }
        replaced
    }

    /// [`insert`](Db::insert) for a value a command has just made (`COPY`, `SORT ... STORE`,
    /// `SINTERSTORE` and the other `*STORE`s): the key is stamped as used now, as Redis stamps
    /// every object it creates, so `OBJECT IDLETIME` starts at 0 and eviction sees a new key.
    pub(crate) fn insert_new(&self, key: Bytes, entry: Entry, now_ms: u64) -> bool {
        entry.access.init(now_ms, &self.limits);
        self.insert(key, entry)
    }

    /// [`insert`](Db::insert) for a snapshot being loaded at `now_ms`: nothing is noted, and
    /// the key is stamped as created at load time, as Redis's loader creates its objects.
    pub(crate) fn insert_loaded(&self, key: Bytes, entry: Entry, now_ms: u64) {
        entry.access.init(now_ms, &self.limits);
        self.store(&key, entry);
    }

    fn store(&self, key: &Bytes, entry: Entry) -> bool {
        let new_deadline = entry.expires_at();
        self.mem.added(key, &entry);
        let stored = Key::from(&key[..]);
        // The index's pair shares the key's allocation. (When the key was present, the table
        // keeps the key it had and the pair holds this copy: rarer, and as correct.)
        let shared = new_deadline.map(|_| stored.clone());
        let old = self.map.insert(stored, entry);
        if let Some(o) = &old {
            self.mem.removed(key, o);
        }
        let old_deadline = old.as_ref().and_then(|e| e.expires_at());
        self.reindex(key, old_deadline, new_deadline, shared);
        self.signal_modified(key);
        match old {
            Some(old) => {
                crate::lazyfree::free_entry(old);
                true
            }
            None => false,
        }
    }

    /// Notes `key` as created by the running command, when `new` events are asked for (for a
    /// command that replaces a key as Redis does, by deleting it and adding it anew).
    pub(crate) fn note_created(&self, key: &Bytes) {
        if self.hook.wants_new_keys() {
            note_here(self.index, key, Noted::Created);
        }
    }

    /// Takes the pair of a removed entry out of the expiry index, if it had a deadline.
    fn unindex(&self, key: &[u8], removed: &Entry) {
        if let Some(t) = removed.expires_at() {
            self.reindex(key, Some(t), None, None);
        }
    }

    /// Moves `key`'s pair in the expiry index from its old deadline to its new one, after
    /// the entry changed (and its shard lock was let go: the index is never locked while a
    /// shard is, the order the active expiry cycle takes them in). The old pair goes first, so
    /// that a key set again with the same deadline keeps its pair. `stored`, the table's own
    /// key when the caller took it, is what the new pair holds (shared, not copied).
    fn reindex(&self, key: &[u8], old: Option<u64>, new: Option<u64>, stored: Option<Key>) {
        self.expiries.moved(key, old, new, stored);
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
        // The key's shard is locked and its table searched by the key's bytes, as dashmap's
        // own `entry` does, but without first making the `Key` that `entry` takes: only a
        // key that is absent gets one, when it is inserted. (A `SET` of a key that exists, an
        // `INCR`, an `APPEND`, ... allocate nothing for the key.)
        let hash = self.map.hash_usize(&&key[..]) as u64;
        let shard = &self.map.shards()[self.map.determine_shard(hash as usize)];
        let mut table = shard.write();
        let same_key = |(k, _): &(Key, _)| k[..] == key[..];
        // `dropped`: a replaced or deleted entry, freed once the shard is let go (where it
        // expired, when `dropped_expired`: see `lazyfree::free_expired`).
        let mut dropped_expired = false;
        // `stored`: the table's key, for the expiry index's new pair to share when the key gets
        // a new deadline.
        let mut stored = None;
        let (r, old_deadline, new_deadline, changed, dropped) = match table.get_mut(hash, same_key)
        {
            Some((k, slot)) => {
                let slot = slot.get_mut();
                let expired = slot.is_expired(now_ms);
                dropped_expired = expired;
                if !expired {
                    slot.access.touch(now_ms, &self.limits);
                }
                let before = DbMemory::measure(key, slot);
                let (update, r) = decide((!expired).then_some(&*slot));
                // Charged as the entry is now, whatever happened to it (removal, nothing).
                let after = |e: Option<&Entry>| match e {
                    Some(e) => self.mem.changed(before, key, e),
                    None => self.mem.changed_to_nothing(before),
                };
                if expired && lazy_delete {
                    self.note_lazily_expired(key.clone());
                }
                // `decide` was shown no entry: nothing of it is kept. A master deletes the
                // expired key; a replica hides it and waits for its master's DEL.
                let update = match update {
                    Update::Keep | Update::Expire(_) if expired && lazy_delete => Update::Remove,
                    Update::Keep | Update::Expire(_) if expired => Update::Keep,
                    update => update,
                };
                match update {
                    Update::Put(entry) => {
                        let new = entry.expires_at();
                        entry.access.init(now_ms, &self.limits);
                        after(Some(&entry));
                        let old = std::mem::replace(slot, entry);
                        if new.is_some() && new != old.expires_at() {
                            stored = Some(k.clone());
                        }
                        if expired {
                            self.note_created(key);
                        }
                        (r, old.expires_at(), new, true, Some(old))
                    }
                    Update::Remove => {
                        after(None);
                        let (_, old) = table
                            .remove_entry(hash, same_key)
                            .expect("the key was found under this same lock");
                        let old = old.into_inner();
                        (r, old.expires_at(), None, true, Some(old))
                    }
                    Update::Expire(deadline) => {
                        let old = slot.set_expires_at(deadline);
                        if deadline.is_some() && deadline != old {
                            stored = Some(k.clone());
                        }
                        after(Some(slot));
                        (r, old, deadline, true, None)
                    }
                    Update::Keep => (r, None, None, false, None),
                }
            }
            None => {
                let (update, r) = decide(None);
                match update {
                    Update::Put(entry) => {
                        let new = entry.expires_at();
                        entry.access.init(now_ms, &self.limits);
                        self.mem.added(key, &entry);
                        let k = Key::from(&key[..]);
                        stored = new.map(|_| k.clone());
                        let pair = (k, SharedValue::new(entry));
                        table.insert(hash, pair, |(k, _)| self.map.hash_usize(k) as u64);
                        self.note_created(key);
                        (r, None, new, true, None)
                    }
                    Update::Remove | Update::Keep | Update::Expire(_) => {
                        (r, None, None, false, None)
                    }
                }
            }
        };
        drop(table);
        self.reindex(key, old_deadline, new_deadline, stored);
        if changed {
            self.signal_modified(key);
        }
        if let Some(old) = dropped {
            if dropped_expired {
                crate::lazyfree::free_expired(old, self.limits.lazy_expire());
            } else {
                crate::lazyfree::free_entry(old);
            }
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
        let r = match self.map.entry(Key::from(&key[..])) {
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
                    self.expiries.recount(old.expires_at(), None);
                    // Under the shard's lock, which the returned entry keeps: a big value
                    // goes to the background freer whatever `lazyfree-lazy-expire` says,
                    // rather than hold every key of the shard while it is freed. (Rare: the
                    // callers' own read expired the key first, unless another client put
                    // it back meanwhile or this is a replica.)
                    crate::lazyfree::free_entry(old);
                    self.note_created(key);
                } else {
                    slot.get().access.touch(now_ms, &self.limits);
                }
                slot.into_ref()
            }
            Slot::Vacant(slot) => {
                self.note_created(key);
                slot.insert(fresh())
            }
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
                self.unindex(&k, &e);
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
        self.unindex(&k, &e);
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
                self.note_lazily_expired(key_bytes(k));
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
        self.expiries.recount(e.expires_at(), None);
        self.signal_modified(&k);
        crate::lazyfree::free_expired(e, self.limits.lazy_expire());
        true
    }

    /// Records that `key`, found expired, was deleted by a command (a read, or a `DEL` of a
    /// key that had already expired), so that the deletion is propagated.
    pub(crate) fn note_lazily_expired(&self, key: Bytes) {
        note_here(self.index, &key, Noted::Expired);
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
    ///
    /// With `hold_big`, a deleted key whose value takes long to free
    /// ([`crate::lazyfree::frees_slowly`]) still counts in [`len`](Db::len) (`DBSIZE`, `INFO
    /// keyspace`) until the caller has freed it and called [`freed`](Db::freed): the deletion
    /// is not over before then, and its time is the cycle's latency event, which a client that
    /// sees the key gone can already read (Redis's own suite counts on that).
    pub(crate) fn active_expire(
        &self,
        now_ms: u64,
        limit: usize,
        hold_big: bool,
    ) -> Vec<(Bytes, Entry)> {
        let mut due = Vec::with_capacity(limit.min(1024));
        self.expiries.pop_due(now_ms, limit, &mut due);
        // A pair whose key got a later deadline (or none) meanwhile is stale: the entry
        // decides. An entry expired under another deadline is deleted all the same; its own
        // pair, also due, is dropped as stale when popped.
        let keys: Vec<Bytes> = due.into_iter().map(|(_, k)| k).collect();
        let held = hold_big.then_some(crate::batch_remove::Held {
            count: &self.freeing,
            test: crate::lazyfree::frees_slowly,
        });
        let gone = crate::batch_remove::remove_expired(&self.map, keys, now_ms, held);
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

    /// Number of keys, counting ones that are expired but not yet deleted (as Redis's DBSIZE),
    /// and those the expiry cycle is still freeing (see [`active_expire`](Db::active_expire)).
    pub(crate) fn len(&self) -> usize {
        self.map.len() + self.freeing.load(Ordering::Acquire)
    }

    /// The expiry cycle has freed `n` of the values [`active_expire`](Db::active_expire) held
    /// in the count.
    pub(crate) fn freed(&self, n: usize) {
        if n > 0 {
            self.freeing.fetch_sub(n, Ordering::AcqRel);
        }
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
            if let Some(t) = e.expires_at() {
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
            .map(|e| key_bytes(e.key()))
            .collect()
    }

    /// A snapshot of every live entry (for replication snapshots and persistence).
    pub(crate) fn snapshot(&self, now_ms: u64) -> Vec<(Bytes, Entry)> {
        self.map
            .iter()
            .filter(|e| !e.is_expired(now_ms))
            .map(|e| (key_bytes(e.key()), e.value().clone()))
            .collect()
    }

    /// Deletes every key, dooming the transactions that watch one, and frees the values before returning
    /// (`FLUSHDB SYNC`).
    pub(crate) fn clear(&self) {
        self.clear_keys();
        self.hook.flushed();
        self.all_keys_changed();
    }

    fn clear_keys(&self) {
        self.doom_watchers_of_present_keys(None);
        self.map.clear();
        self.mem.clear();
        drop(self.expiries.take_all());
    }

    /// Deletes every key, dooming the transactions that watch one, and leaves freeing the values to the
    /// background freer (`FLUSHDB ASYNC`): each shard of the map is swapped for an empty one
    /// under its lock, so the work done here does not grow with the number of keys.
    pub(crate) fn clear_async(&self) {
        self.clear_keys_async();
        self.hook.flushed();
        self.all_keys_changed();
    }

    fn clear_keys_async(&self) {
        self.doom_watchers_of_present_keys(None);
        for shard in self.map.shards() {
            let contents = std::mem::take(&mut *shard.write());
            crate::lazyfree::free_in_background(Box::new(contents));
        }
        self.mem.clear();
        crate::lazyfree::free_in_background(Box::new(self.expiries.take_all()));
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
                .map(|index| Db {
                    index,
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
            db.all_keys_changed();
        }
        self.hook.flushed();
    }

    /// Deletes every key of every database and frees them in the background (`FLUSHALL
    /// ASYNC`): see [`Db::clear_async`].
    pub(crate) fn clear_all_async(&self) {
        for db in &self.dbs {
            db.clear_keys_async();
            db.all_keys_changed();
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
