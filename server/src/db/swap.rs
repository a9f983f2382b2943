//! `SWAPDB`'s step: two databases exchange their keys, while each index keeps the clients
//! that watch or wait on it.
//!
//! Redis swaps the two databases' dictionaries and leaves `watched_keys` and
//! `blocking_keys` where they were: a client keeps its `SELECT`ed index and sees the other
//! database's data from then on. latchkey does the same with its [`Db`]s, which stay in place
//! (commands hold references to them): the key maps' shards are exchanged one pair at a time
//! under both write locks (the sixteen maps share one hasher, so a key's shard is the same in
//! every database and a whole shard may move across), then the expiry indexes and the memory
//! counts. The caller holds the execution gate alone, so no command sees half a swap.
//!
//! Around the exchange, as Redis 7.0's `swapdbCommand` does: before it, a transaction
//! watching a key that exists in either database is doomed (the key's value may change under
//! it); after it, clients blocked on a key that now exists are woken, and serve themselves if
//! the value is one they wait for.

use super::{Db, Keyspace};

impl Keyspace {
    /// Exchanges the keys of databases `a` and `b` (see the module docs). Nothing happens when
    /// `a == b`.
    pub(crate) fn swap(&self, a: usize, b: usize) {
        if a == b {
            return;
        }
        // Always the lower index first, so two swaps could never wait on each other.
        let (x, y) = (&self.dbs[a.min(b)], &self.dbs[a.max(b)]);
        x.doom_watchers_of_present_keys(Some(y));
        y.doom_watchers_of_present_keys(Some(x));
        let (xs, ys) = (x.map.shards(), y.map.shards());
        assert_eq!(xs.len(), ys.len(), "the databases' maps are built alike");
        for (sx, sy) in xs.iter().zip(ys.iter()) {
            let (mut gx, mut gy) = (sx.write(), sy.write());
            std::mem::swap(&mut *gx, &mut *gy);
        }
        x.expiries.swap_with(&y.expiries);
        x.mem.swap_with(&y.mem);
        x.wake_blocked_on_present_keys();
        y.wake_blocked_on_present_keys();
        x.all_keys_changed();
        y.all_keys_changed();
    }
}

impl Db {
    /// Wakes every client blocked on a key this database now holds (Redis's
    /// `scanDatabaseForReadyKeys`); each checks the value's type itself.
    fn wake_blocked_on_present_keys(&self) {
        for waiting in self.blocked.iter() {
            if self.map.contains_key(&waiting.key()[..]) {
                for n in waiting.value() {
                    n.notify_one();
                }
            }
        }
    }
}
