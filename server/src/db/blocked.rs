//! Blocked clients' side of the keyspace: who waits on which key, and who is woken when.
//!
//! A client blocked in `BLPOP`, `BZPOPMIN`, `XREAD BLOCK` and the like registers a notifier
//! under each key it waits for, in the order clients blocked. Redis serves them in that order,
//! so a push wakes only the first in line, and each client passes the turn on when it leaves
//! the line (served, timed out, unblocked, or unable to take what the key holds).
//!
//! A client blocked in `XREADGROUP` also registers as a reader of its group
//! ([`watch_changes`](Db::watch_changes)). Every change of the stream wakes all of them (an
//! `XADD`, or the stream's deletion, which each answers), but new entries go to the readers
//! of one group one at a time, in the order they blocked, as Redis serves them: only the
//! first blocked reader of a group may take them ([`first_group_reader`](Db::first_group_reader)),
//! and when it leaves, the next reader of its group is woken to take what is left.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Notify;

use super::Db;

impl Db {
    /// Wakes the client that has been blocked on `key` the longest (after a push onto a list,
    /// say), as Redis serves blocked clients in the order they blocked. It gets a permit, so a
    /// client that is between its last check and its wait does not miss the wake-up.
    ///
    /// Only that one: it passes the baton when it leaves the queue, served or not (its
    /// [`unblock`](Db::unblock) wakes the next), so each waiter checks the key in turn and one
    /// push onto a key with ten thousand waiters costs one wake-up, not ten thousand.
    pub(crate) fn signal_ready(&self, key: &[u8]) {
        if self.blocked_count.load(Ordering::SeqCst) == 0 {
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
        if self.blocked_count.load(Ordering::SeqCst) == 0 {
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
    ///
    /// Counted before the caller looks at the key again, with the push's check in
    /// [`signal_ready`](Db::signal_ready) sequentially consistent with it: either the pusher
    /// sees this client, or this client sees what was pushed.
    pub(crate) fn block_on(&self, key: Bytes, notify: Arc<Notify>) {
        self.blocked.entry(key).or_default().push(notify);
        self.blocked_count.fetch_add(1, Ordering::SeqCst);
    }

    /// Removes a notifier registered with [`block_on`](Db::block_on), and wakes the client
    /// next in line for `key` when the leaving one was first: the key may hold what the
    /// leaving client was woken for and did not take (it timed out, was unblocked, got an
    /// error, or took only part of it).
    pub(crate) fn unblock(&self, key: &[u8], notify: &Arc<Notify>) {
        let mut was_first = false;
        if let Some(mut list) = self.blocked.get_mut(key) {
            was_first = list.first().is_some_and(|n| Arc::ptr_eq(n, notify));
            let before = list.len();
            list.retain(|n| !Arc::ptr_eq(n, notify));
            self.blocked_count
                .fetch_sub(before - list.len(), Ordering::SeqCst);
        }
        self.blocked.remove_if(key, |_, l| l.is_empty());
        if was_first {
            self.signal_ready(key);
        }
    }

    /// Registers a client blocked in `XREADGROUP` on `key` as a reader of `group`, behind
    /// those that blocked before it: it hears of any change of `key`, its deletion included
    /// (see [`key_changed`](Db::key_changed)), and takes new entries in its turn (see
    /// [`first_group_reader`](Db::first_group_reader)).
    pub(crate) fn watch_changes(&self, key: Bytes, group: Bytes, notify: Arc<Notify>) {
        self.change_watchers
            .entry(key)
            .or_default()
            .push(GroupReader { group, notify });
        self.change_watcher_count.fetch_add(1, Ordering::AcqRel);
    }

    /// Removes a reader registered with [`watch_changes`](Db::watch_changes). When it was
    /// the first blocked reader of its group, the next one of that group is woken: the
    /// stream may hold entries the leaving reader did not take (it took only `COUNT` of
    /// them, timed out, or was unblocked), and they are now the next one's to take.
    pub(crate) fn unwatch_changes(&self, key: &[u8], notify: &Arc<Notify>) {
        if let Some(mut list) = self.change_watchers.get_mut(key) {
            let before = list.len();
            let leaving = list.iter().position(|r| Arc::ptr_eq(&r.notify, notify));
            if let Some(i) = leaving {
                let group = list[i].group.clone();
                let was_first = !list[..i].iter().any(|r| r.group == group);
                list.retain(|r| !Arc::ptr_eq(&r.notify, notify));
                if was_first {
                    if let Some(next) = list.iter().find(|r| r.group == group) {
                        next.notify.notify_one();
                    }
                }
            }
            self.change_watcher_count
                .fetch_sub(before - list.len(), Ordering::AcqRel);
        }
        self.change_watchers.remove_if(key, |_, l| l.is_empty());
    }

    /// Whether the reader whose notifier is `notify` is the first blocked reader of `group`
    /// on `key` (or is not registered there: a reader that has not blocked yet), and so may
    /// take the stream's new entries now. The others of its group wait for their turn, as
    /// Redis serves a group's blocked readers one after the other in the order they blocked.
    pub(crate) fn first_group_reader(
        &self,
        key: &[u8],
        group: &[u8],
        notify: &Arc<Notify>,
    ) -> bool {
        let Some(list) = self.change_watchers.get(key) else {
            return true;
        };
        match list.iter().find(|r| r.group == group) {
            Some(first) => {
                Arc::ptr_eq(&first.notify, notify)
                    || !list.iter().any(|r| Arc::ptr_eq(&r.notify, notify))
            }
            None => true,
        }
    }

    /// Wakes the clients watching `key` for changes. Called for every change of a key (with
    /// nobody watching, one atomic load).
    #[inline]
    pub(crate) fn key_changed(&self, key: &[u8]) {
        if self.change_watcher_count.load(Ordering::Acquire) == 0 {
            return;
        }
        self.wake_change_watchers_of(key);
    }

    /// The slow part of [`key_changed`](Db::key_changed), out of line: it runs only while
    /// some client waits for a change, and every write passes `key_changed`.
    #[cold]
    #[inline(never)]
    fn wake_change_watchers_of(&self, key: &[u8]) {
        if let Some(list) = self.change_watchers.get(key) {
            for r in list.iter() {
                r.notify.notify_one();
            }
        }
    }

    /// Wakes every client watching a key of this database for changes: the database was
    /// flushed or swapped, and each checks what its key holds now.
    pub(crate) fn all_keys_changed(&self) {
        if self.change_watcher_count.load(Ordering::Acquire) == 0 {
            return;
        }
        for watching in self.change_watchers.iter() {
            for r in watching.value() {
                r.notify.notify_one();
            }
        }
    }
}

/// A client blocked in `XREADGROUP` on a key: the group it reads as, and its notifier.
#[derive(Debug)]
pub(crate) struct GroupReader {
    group: Bytes,
    notify: Arc<Notify>,
}
