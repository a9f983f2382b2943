//! `maxmemory`: refusing writes (`noeviction`) or evicting keys when memory runs out.
//!
//! Before each command, when `maxmemory` is set and [`used_memory`] exceeds it, the server
//! either evicts keys chosen by `maxmemory-policy` until it is back under the limit, or, with
//! `noeviction` (or nothing left to evict), answers the commands that may grow memory (Redis's
//! `denyoom` flag, [`DENYOOM`]) with Redis's
//! `-OOM command not allowed when used memory > 'maxmemory'.` Reads, deletions and
//! administration still run, so an operator can always make room. Like Redis:
//!
//! - inside `MULTI`, every command but `EXEC`/`DISCARD`/`QUIT`/`RESET` is refused while out of
//!   memory, and the transaction is then aborted; `EXEC` of a transaction that holds a
//!   `denyoom` command is refused;
//! - a script may run a `denyoom` command only while memory is under the limit or after it
//!   already wrote something (a script must not stop half-way through its writes);
//! - replicas and the link from the master are never refused or evicted from: a replica
//!   follows its master, whose `DEL`s for evicted keys arrive like any write.
//!
//! The eviction itself follows Redis's approximation: sample `maxmemory-samples` keys of each
//! database, keep the best candidates in a small pool across calls, evict the best. "Best" is
//! the longest idle time for `*-lru`, the lowest access frequency for `*-lfu` (Redis's
//! logarithmic 8-bit counter with decay, stored with the key in [`Access`]), the nearest
//! deadline for `volatile-ttl`, and chance for `*-random`. `volatile-*` policies only ever
//! evict keys that have a TTL. Each evicted key is deleted like an expired one: watchers see
//! it change, and replicas and the AOF receive a `DEL`, counted in `INFO stats` as
//! `evicted_keys`. One call evicts at most [`MAX_EVICTIONS_PER_CALL`] keys, so a command never
//! waits for an unbounded purge; the next command continues.
//!
//! **Evicting a lock.** Under `allkeys-*` policies a lock key (`SET lock token NX PX 30000`)
//! is a key like any other: when memory runs out it may be evicted before its TTL ends, and
//! then a second client acquires the "held" lock. Under `volatile-*` policies it is worse: lock
//! keys always have a TTL, so they are exactly the keys eviction chooses from. This is one more
//! way, besides expiry, failover and clock jumps, to lose a lock. Run lock servers with
//! `noeviction` (writes then fail loudly instead) or far below `maxmemory`;
//! `tests/tests/memory_limits.rs` shows the lock key evicted.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use dashmap::DashMap;

pub(crate) use crate::config::{Limits, Policy};
use crate::db::{Db, Entry, Key, KeyHasher, Update, NUM_DBS};
use crate::memory::{human, rss_bytes};
use crate::state::{Candidate, Evictor, Shared};

/// Redis's reply to a command refused for lack of memory.
pub(crate) const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// The most keys one call of [`perform_evictions`] deletes.
pub(crate) const MAX_EVICTIONS_PER_CALL: usize = 256;

/// Size of the candidate pool kept across calls (Redis's `EVPOOL_SIZE`).
const POOL_SIZE: usize = 16;

// ---------------------------------------------------------------------------------------------
// Used memory

/// The estimate of the whole keyspace: every database's entries and hash tables.
pub(crate) fn keyspace_bytes(shared: &Shared) -> usize {
    shared
        .keyspace
        .iter()
        .map(|(_, db)| {
            db.memory().entry_bytes() + crate::memory::DbMemory::table_bytes(db.map().capacity())
        })
        .sum()
}

/// `used_memory`: the counting allocator's total when the process uses it (the binary),
/// else the keyspace estimate (see [`crate::memory`]).
pub(crate) fn used_memory(shared: &Shared) -> usize {
    crate::memory::allocated_bytes().unwrap_or_else(|| keyspace_bytes(shared))
}

// ---------------------------------------------------------------------------------------------
// Eviction

/// What [`perform_evictions`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Memory is under the limit (or there is no limit).
    Ok,
    /// Keys were evicted but memory is still over: the next command continues.
    Running,
    /// Over the limit and nothing can be evicted.
    Fail,
}

/// Visits up to `max_visits` hash-table buckets of `map`, starting at a random shard and a
/// random bucket, and offers each entry to `keep` until it has accepted `want` of them (Redis's
/// `dictGetSomeKeys`).
fn sample(
    map: &DashMap<Key, Entry, KeyHasher>,
    want: usize,
    max_visits: usize,
    mut keep: impl FnMut(&[u8], &Entry) -> bool,
) {
    let shards = map.shards();
    let first = rand::random_range(0..shards.len());
    let (mut found, mut visits) = (0, 0);
    for s in 0..shards.len() {
        let table = shards[(first + s) % shards.len()].read();
        if table.is_empty() {
            continue;
        }
        let buckets = table.buckets();
        let start = rand::random_range(0..buckets);
        for j in 0..buckets {
            let i = (start + j) % buckets;
            visits += 1;
            // SAFETY: `i < buckets()`, and the shard's read lock is held while the bucket is
            // looked at, so the table cannot change or move under us.
            let full = unsafe { table.is_bucket_full(i) };
            if full {
                // SAFETY: as above, and the bucket holds an initialised entry.
                let (k, v) = unsafe { table.bucket(i).as_ref() };
                if keep(k, v.get()) {
                    found += 1;
                    if found >= want {
                        return;
                    }
                }
            }
            if visits >= max_visits {
                return;
            }
        }
    }
}

/// The most buckets [`random_key`] draws at random before it falls back to walking from a
/// random one: enough that on a table a hundredth full, all draws miss about once in 20,000
/// calls, and few enough that one call stays a few microseconds.
const MAX_FAIR_DRAWS: usize = 1024;

/// One key of `map` picked at random and whether it is expired at `now_ms`, or `None` when
/// the map is empty.
///
/// It draws buckets uniformly over all the shards' buckets and takes the first full one, so
/// each key is as likely as any other (a bucket holds at most one key); it makes sixteen times
/// as many draws as one key takes on average at the table's fill, up to [`MAX_FAIR_DRAWS`].
/// Only when every draw finds an empty bucket does it walk from a random bucket as [`sample`]
/// does, which always finds a key but favours the keys after long empty runs.
pub(crate) fn random_key(
    map: &DashMap<Key, Entry, KeyHasher>,
    now_ms: u64,
) -> Option<(Bytes, bool)> {
    let shards = map.shards();
    let mut keys = 0;
    let sizes: Vec<usize> = shards
        .iter()
        .map(|s| {
            let table = s.read();
            keys += table.len();
            if table.is_empty() {
                0
            } else {
                table.buckets()
            }
        })
        .collect();
    let total: usize = sizes.iter().sum();
    let draws = if keys == 0 {
        0
    } else {
        (16 * total.div_ceil(keys)).min(MAX_FAIR_DRAWS)
    };
    for _ in 0..draws {
        let mut i = rand::random_range(0..total);
        let mut shard = 0;
        while i >= sizes[shard] {
            i -= sizes[shard];
            shard += 1;
        }
        let table = shards[shard].read();
        // The table may have grown or shrunk since `sizes` was read.
        if i >= table.buckets() {
            continue;
        }
        // SAFETY: `i < buckets()`, and the shard's read lock is held while the bucket is
        // looked at, so the table cannot change or move under us.
        if unsafe { table.is_bucket_full(i) } {
            // SAFETY: as above, and the bucket holds an initialised entry.
            let (k, v) = unsafe { table.bucket(i).as_ref() };
            return Some((crate::db::key_bytes(k), v.get().is_expired(now_ms)));
        }
    }
    let mut picked = None;
    sample(map, 1, usize::MAX, |k, e| {
        picked = Some((crate::db::key_bytes(k), e.is_expired(now_ms)));
        true
    });
    picked
}

/// Fills `pool` with the best candidates among a sample of `db`.
fn fill_pool(pool: &mut Vec<Candidate>, index: usize, db: &Db, limits: &Limits, now_ms: u64) {
    let policy = limits.policy();
    let samples = limits.samples.load(Ordering::Relaxed);
    let mut offer = |key: &Bytes, score: u64| {
        // A key already in the pool gets its score anew: it may have been used since.
        if let Some(c) = pool.iter_mut().find(|c| c.db == index && c.key == *key) {
            c.score = score;
            return;
        }
        if pool.len() >= POOL_SIZE {
            let worst = pool.iter().map(|c| c.score).min().unwrap_or(0);
            if score <= worst {
                return;
            }
            if let Some(i) = pool.iter().position(|c| c.score == worst) {
                pool.swap_remove(i);
            }
        }
        pool.push(Candidate {
            db: index,
            key: key.clone(),
            score,
        });
    };
    if policy == Policy::VolatileTtl {
        for key in soonest(db, samples) {
            if let Some(e) = db.get(&key, now_ms, false) {
                if let Some(t) = e.expires_at() {
                    let score = u64::MAX - t;
                    drop(e);
                    offer(&key, score);
                }
            }
        }
        return;
    }
    let mut found = Vec::with_capacity(samples.min(64));
    sample(db.map(), samples, samples * 16 + 64, |k, e| {
        if policy.volatile() && e.expires_at().is_none() {
            return false;
        }
        found.push((crate::db::key_bytes(k), e.access.score(now_ms, limits)));
        true
    });
    if found.is_empty() && policy.volatile() {
        // Keys with a TTL are rare in this database: take the ones that expire soonest.
        for key in soonest(db, samples) {
            if let Some(e) = db.get(&key, now_ms, false) {
                found.push((key.clone(), e.access.score(now_ms, limits)));
            }
        }
    }
    for (k, score) in found {
        offer(&k, score);
    }
}

/// Keys of `db` with the nearest deadlines (from the expiry index).
fn soonest(db: &Db, n: usize) -> Vec<Bytes> {
    db.due_keys(u64::MAX, n)
}

/// Picks one key to evict, or `None` when no key qualifies.
fn choose(shared: &Shared, ev: &Evictor, limits: &Limits, now_ms: u64) -> Option<(usize, Bytes)> {
    let policy = limits.policy();
    let eligible = |db: &Db| {
        if policy.volatile() {
            db.memory().volatile_keys() > 0
        } else {
            !db.is_empty()
        }
    };
    if matches!(policy, Policy::AllKeysRandom | Policy::VolatileRandom) {
        for _ in 0..NUM_DBS {
            let i = ev.next_db.fetch_add(1, Ordering::Relaxed) % NUM_DBS;
            let db = shared.keyspace.db(i);
            if !eligible(db) {
                continue;
            }
            let mut pick = None;
            sample(db.map(), 1, 1024, |k, e| {
                if policy.volatile() && e.expires_at().is_none() {
                    return false;
                }
                pick = Some(crate::db::key_bytes(k));
                true
            });
            if pick.is_none() && policy.volatile() {
                pick = soonest(db, 1).into_iter().next();
            }
            if let Some(k) = pick {
                return Some((i, k));
            }
        }
        return None;
    }
    let mut pool = ev.pool.lock();
    for (i, db) in shared.keyspace.iter() {
        if eligible(db) {
            fill_pool(&mut pool, i, db, limits, now_ms);
        }
    }
    // The best candidate first; one that left meanwhile is simply skipped by the caller.
    let best = pool
        .iter()
        .enumerate()
        .max_by_key(|(_, c)| c.score)
        .map(|(i, _)| i)?;
    let c = pool.swap_remove(best);
    Some((c.db, c.key))
}

/// Evicts keys until used memory is under `maxmemory`, at most [`MAX_EVICTIONS_PER_CALL`] of
/// them. Call it holding the execution gate (shared is enough): an eviction must not land in
/// the middle of a script or a transaction.
pub(crate) fn perform_evictions(shared: &Shared) -> Outcome {
    let limits = &shared.config.limits;
    let max = limits.maxmemory() as usize;
    if max == 0 || used_memory(shared) <= max {
        return Outcome::Ok;
    }
    let policy = limits.policy();
    if policy == Policy::NoEviction {
        return Outcome::Fail;
    }
    let ev = &shared.evictor;
    if ev.busy.swap(true, Ordering::AcqRel) {
        // Another command is evicting right now; it will get us under the limit.
        return Outcome::Running;
    }
    let now_ms = shared.clock.now_ms();
    let mut evicted = 0usize;
    let mut attempts = 0usize;
    let outcome = loop {
        if used_memory(shared) <= max {
            break Outcome::Ok;
        }
        if evicted >= MAX_EVICTIONS_PER_CALL || attempts >= MAX_EVICTIONS_PER_CALL * 4 {
            break if evicted > 0 {
                Outcome::Running
            } else {
                Outcome::Fail
            };
        }
        attempts += 1;
        let Some((i, key)) = choose(shared, ev, limits, now_ms) else {
            break if evicted > 0 {
                Outcome::Running
            } else {
                Outcome::Fail
            };
        };
        if evict_key(shared, i, &key, policy, now_ms) {
            evicted += 1;
        }
    };
    ev.busy.store(false, Ordering::Release);
    outcome
}

/// Deletes one chosen key (if it still qualifies) and propagates its deletion.
fn evict_key(shared: &Shared, index: usize, key: &Bytes, policy: Policy, now_ms: u64) -> bool {
    let db = shared.keyspace.db(index);
    let _order = shared.order_guard();
    let gone = db.update(key, now_ms, true, |e| match e {
        Some(e) if !policy.volatile() || e.expires_at().is_some() => (Update::Remove, true),
        _ => (Update::Keep, false),
    });
    shared.propagate_lazy_expired();
    if gone {
        shared.evictor.evicted_keys.fetch_add(1, Ordering::Relaxed);
        shared.propagate_expired(index, std::slice::from_ref(key));
        shared.keyspace_event(crate::notify::EVICTED, "evicted", key, index);
    }
    gone
}

/// The body of `INFO memory`: Redis's main fields, from [`used_memory`], with `scripts` (the
/// scripting engine's lines, which the caller renders) in their place among them.
pub(crate) fn info_section(shared: &Shared, scripts: &str) -> String {
    let used = used_memory(shared) as u64;
    let peak = shared.evictor.note_peak(used as usize) as u64;
    let rss = rss_bytes() as u64;
    let dataset = keyspace_bytes(shared) as u64;
    let limits = &shared.config.limits;
    let max = limits.maxmemory();
    let policy = shared
        .config
        .get("maxmemory-policy")
        .unwrap_or_else(|| "noeviction".into());
    let allocator = crate::memory::allocator_name();
    format!(
        "used_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\nused_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\nused_memory_dataset:{dataset}\r\n{scripts}maxmemory:{max}\r\nmaxmemory_human:{}\r\nmaxmemory_policy:{policy}\r\nmem_allocator:{allocator}\r\n",
        human(used),
        human(rss),
        human(peak),
        human(max),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigError;
    use crate::value::Access;
    use crate::value::LFU_INIT;

    #[test]
    fn policies_parse_and_print_like_redis() {
        let l = Limits::default();
        assert_eq!(
            l.set("maxmemory-policy", "ALLKEYS-LRU"),
            Ok(Some("allkeys-lru".into()))
        );
        assert_eq!(l.policy(), Policy::AllKeysLru);
        assert_eq!(
            l.set("maxmemory-policy", "foo"),
            Err(ConfigError::Invalid("argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction".into()))
        );
        assert_eq!(l.set("maxmemory", "100mb"), Ok(Some("104857600".into())));
        assert_eq!(
            l.set("client-output-buffer-limit", "normal 1mb 0 0"),
            Ok(Some(
                "normal 1048576 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60".into()
            ))
        );
    }

    #[test]
    fn lfu_counters_decay_and_grow_slowly() {
        let l = Limits::default();
        l.set("maxmemory-policy", "allkeys-lfu").unwrap();
        let t0 = 3_600_000; // time 0 is the server's own reads, which touch nothing
        let a = Access::default();
        a.init(t0, &l);
        assert_eq!(a.score(t0, &l), 255 - LFU_INIT as u64);
        for _ in 0..1000 {
            a.touch(t0, &l);
        }
        let hot = a.score(t0, &l);
        assert!(hot < 255 - LFU_INIT as u64, "used keys score lower: {hot}");
        // Ten minutes later (decay time 1 minute) the counter fell by ten.
        assert_eq!(a.score(t0 + 600_000, &l), (hot + 10).min(255));
    }
}
