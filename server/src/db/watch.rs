//! `WATCH`'s side of the keyspace: the flags transactions leave on keys, and the hook through
//! which the tracking table hears of every change.
//!
//! Every write of a key ends in [`Db::signal_modified`]: it dooms the transactions watching the
//! key (their `EXEC` will answer a null array) and tells the tracking table, so client-side
//! caches get their invalidation. Both cost one atomic load while nobody watches or tracks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use super::Db;

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
    /// The server's `notify-keyspace-events`, to learn whether created keys are announced.
    notify: std::sync::OnceLock<crate::notify::NotifyFlags>,
}

impl ChangeHook {
    /// Plugs the listener in (once; later calls change nothing).
    pub(crate) fn plug(&self, hook: Arc<dyn KeyChanges>) {
        let _ = self.hook.set(hook);
    }

    /// Gives the keyspace the server's notification flags (once), so that it notes the keys
    /// commands create while `new` events are asked for.
    pub(crate) fn plug_notify(&self, flags: crate::notify::NotifyFlags) {
        let _ = self.notify.set(flags);
    }

    /// Whether keys created by commands are to be announced (`notify-keyspace-events` has
    /// `n`): one relaxed load.
    pub(super) fn wants_new_keys(&self) -> bool {
        self.notify.get().is_some_and(|n| n.wants_new_keys())
    }

    /// The flag that turns the calls on: the listener holds it and sets it while it has
    /// something to hear about.
    pub(crate) fn armed(&self) -> Arc<AtomicBool> {
        self.armed.clone()
    }

    #[inline]
    pub(super) fn changed(&self, key: &[u8]) {
        if self.armed.load(Ordering::Relaxed) {
            self.call_changed(key);
        }
    }

    /// The call itself, out of line: every write passes [`changed`](ChangeHook::changed),
    /// and while nobody tracks, only its one load should take room in the instruction cache.
    #[cold]
    #[inline(never)]
    fn call_changed(&self, key: &[u8]) {
        if let Some(h) = self.hook.get() {
            h.changed(key);
        }
    }

    pub(super) fn flushed(&self) {
        if self.armed.load(Ordering::Relaxed) {
            if let Some(h) = self.hook.get() {
                h.flushed();
            }
        }
    }
}

impl Db {
    /// Dooms the transactions watching a key that exists in this database, or in `other`
    /// (the database `SWAPDB` brings in): what Redis's `touchAllWatchedKeysInDb` does before a
    /// flush or a swap. It looks at the maps as they are, expired or not, as Redis looks at its
    /// dictionaries; a watched key that does not exist is not changed by emptying the database,
    /// so its transaction still runs.
    pub(super) fn doom_watchers_of_present_keys(&self, other: Option<&Db>) {
        if self.watched_count.load(Ordering::Acquire) == 0 {
            return;
        }
        for w in self.watchers.iter() {
            let present = self.map.contains_key(&w.key()[..])
                || other.is_some_and(|o| o.map.contains_key(&w.key()[..]));
            if present {
                for f in w.value() {
                    f.set_dirty();
                }
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
    ///
    /// Each of the three listeners (the tracking table, blocked clients waiting for a change,
    /// `WATCH`) costs one load here while it has nothing to hear; what it does when it has
    /// is kept out of line, so that this, on the path of every write, stays a few
    /// instructions long.
    #[inline]
    pub(crate) fn signal_modified(&self, key: &[u8]) {
        self.hook.changed(key);
        self.key_changed(key);
        if self.watched_count.load(Ordering::Acquire) == 0 {
            return;
        }
        self.doom_watchers_of(key);
    }

    /// Dooms the transactions watching `key` (the slow part of
    /// [`signal_modified`](Db::signal_modified), while someone watches something).
    #[cold]
    #[inline(never)]
    fn doom_watchers_of(&self, key: &[u8]) {
        if let Some(list) = self.watchers.get(key) {
            for f in list.iter() {
                f.set_dirty();
            }
        }
    }
}
