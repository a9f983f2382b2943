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

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use dashmap::DashMap;
use parking_lot::Mutex;

use crate::client::Client;
use crate::cmd::{CommandSpec, Ctx, DENYOOM};
use crate::config::ConfigError;
use crate::db::{Db, Entry, KeyHasher, Update, NUM_DBS};
use crate::frame::Frame;
use crate::server::Shared;

/// Redis's reply to a command refused for lack of memory.
pub const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// The most keys one call of [`perform_evictions`] deletes.
pub const MAX_EVICTIONS_PER_CALL: usize = 256;

/// Size of the candidate pool kept across calls (Redis's `EVPOOL_SIZE`).
const POOL_SIZE: usize = 16;

/// What `maxmemory-policy` says to do when memory runs out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Refuse writes that may grow memory.
    NoEviction,
    /// Evict the least recently used key.
    AllKeysLru,
    /// Evict the least frequently used key.
    AllKeysLfu,
    /// Evict any key.
    AllKeysRandom,
    /// Evict the least recently used key that has a TTL.
    VolatileLru,
    /// Evict the least frequently used key that has a TTL.
    VolatileLfu,
    /// Evict any key that has a TTL.
    VolatileRandom,
    /// Evict the key with a TTL that expires soonest.
    VolatileTtl,
}

/// The policies in the order Redis lists them in its error message.
const POLICIES: [(&str, Policy); 8] = [
    ("volatile-lru", Policy::VolatileLru),
    ("volatile-lfu", Policy::VolatileLfu),
    ("volatile-random", Policy::VolatileRandom),
    ("volatile-ttl", Policy::VolatileTtl),
    ("allkeys-lru", Policy::AllKeysLru),
    ("allkeys-lfu", Policy::AllKeysLfu),
    ("allkeys-random", Policy::AllKeysRandom),
    ("noeviction", Policy::NoEviction),
];

impl Policy {
    fn from_index(i: u8) -> Policy {
        POLICIES.get(i as usize).map_or(Policy::NoEviction, |p| p.1)
    }

    fn index(self) -> u8 {
        POLICIES.iter().position(|p| p.1 == self).unwrap_or(7) as u8
    }

    /// Whether the policy only evicts keys with a TTL.
    pub fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    /// Whether keys carry an access-frequency counter rather than an access time.
    pub fn lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }
}

/// The memory settings read on every command, mirrored out of the text parameters.
/// Shared (through an `Arc`) by the configuration and the keyspace, whose reads stamp keys
/// with their access time or frequency according to the policy.
#[derive(Debug)]
pub struct Limits {
    maxmemory: AtomicU64,
    policy: AtomicU8,
    samples: AtomicUsize,
    lfu_log_factor: AtomicU32,
    lfu_decay_time: AtomicU32,
    query_buffer_limit: AtomicU64,
    /// `client-output-buffer-limit`, per class: normal, replica, pubsub.
    output: Mutex<[BufferLimit; 3]>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            maxmemory: AtomicU64::new(0),
            policy: AtomicU8::new(Policy::NoEviction.index()),
            samples: AtomicUsize::new(5),
            lfu_log_factor: AtomicU32::new(10),
            lfu_decay_time: AtomicU32::new(1),
            query_buffer_limit: AtomicU64::new(1 << 30),
            output: Mutex::new([
                BufferLimit::default(),
                BufferLimit {
                    hard: 256 << 20,
                    soft: 64 << 20,
                    soft_seconds: 60,
                },
                BufferLimit {
                    hard: 32 << 20,
                    soft: 8 << 20,
                    soft_seconds: 60,
                },
            ]),
        }
    }
}

/// One class's `client-output-buffer-limit`: a hard limit, and a soft limit that may only be
/// exceeded for `soft_seconds` (0 everywhere: no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferLimit {
    /// Disconnect at once past this many bytes.
    pub hard: u64,
    /// Disconnect when over this many bytes ...
    pub soft: u64,
    /// ... for this many seconds.
    pub soft_seconds: u64,
}

/// A client class of `client-output-buffer-limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientClass {
    /// Ordinary clients.
    Normal = 0,
    /// Replicas.
    Replica = 1,
    /// Subscribers.
    PubSub = 2,
}

/// Parses a Redis memory value (`100mb`, `1gb`, `512`) that must be at least `min`.
pub(crate) fn memory_value(value: &str, min: u64) -> Result<u64, ConfigError> {
    let n = crate::config::parse_memory(value)
        .filter(|n| *n <= i64::MAX as u64)
        .ok_or_else(|| ConfigError::Invalid("argument must be a memory value".into()))?;
    if n < min {
        return Err(ConfigError::Invalid(format!(
            "argument must be between {min} and 9223372036854775807 inclusive"
        )));
    }
    Ok(n)
}

fn int_value(value: &str, min: i64, max: i64) -> Result<i64, ConfigError> {
    let n: i64 = value
        .parse()
        .map_err(|_| ConfigError::Invalid("argument couldn't be parsed into an integer".into()))?;
    if n < min || n > max {
        return Err(ConfigError::Invalid(format!(
            "argument must be between {min} and {max} inclusive"
        )));
    }
    Ok(n)
}

impl Limits {
    /// Applies `CONFIG SET name value` if `name` is one of these settings: `Ok(Some(text))`
    /// gives the value as `CONFIG GET` prints it, `Ok(None)` says the name is not ours.
    pub(crate) fn set(&self, name: &str, value: &str) -> Result<Option<String>, ConfigError> {
        let stored = match name {
            "maxmemory" => {
                let n = memory_value(value, 0)?;
                self.maxmemory.store(n, Ordering::Release);
                n.to_string()
            }
            "maxmemory-policy" => {
                let lower = value.to_ascii_lowercase();
                let Some((name, p)) = POLICIES.iter().find(|(n, _)| *n == lower) else {
                    let all: Vec<&str> = POLICIES.iter().map(|p| p.0).collect();
                    return Err(ConfigError::Invalid(format!(
                        "argument(s) must be one of the following: {}",
                        all.join(", ")
                    )));
                };
                self.policy.store(p.index(), Ordering::Release);
                name.to_string()
            }
            "maxmemory-samples" => {
                let n = int_value(value, 1, i32::MAX as i64)?;
                self.samples.store(n as usize, Ordering::Release);
                n.to_string()
            }
            "lfu-log-factor" => {
                let n = int_value(value, 0, i32::MAX as i64)?;
                self.lfu_log_factor.store(n as u32, Ordering::Release);
                n.to_string()
            }
            "lfu-decay-time" => {
                let n = int_value(value, 0, i32::MAX as i64)?;
                self.lfu_decay_time.store(n as u32, Ordering::Release);
                n.to_string()
            }
            "client-query-buffer-limit" => {
                let n = memory_value(value, 1 << 20)?;
                self.query_buffer_limit.store(n, Ordering::Release);
                n.to_string()
            }
            "client-output-buffer-limit" => self.set_output_limits(value)?,
            _ => return Ok(None),
        };
        Ok(Some(stored))
    }

    /// `client-output-buffer-limit <class> <hard> <soft> <soft seconds> ...`: the classes
    /// named change, the others keep their limits.
    fn set_output_limits(&self, value: &str) -> Result<String, ConfigError> {
        let words: Vec<&str> = value.split_whitespace().collect();
        if words.is_empty() || !words.len().is_multiple_of(4) {
            return Err(ConfigError::Invalid(
                "Wrong number of arguments in buffer limit configuration.".into(),
            ));
        }
        let mut limits = *self.output.lock();
        for w in words.chunks(4) {
            let class = match w[0].to_ascii_lowercase().as_str() {
                "normal" => ClientClass::Normal,
                "replica" | "slave" => ClientClass::Replica,
                "pubsub" => ClientClass::PubSub,
                _ => {
                    return Err(ConfigError::Invalid(
                        "Invalid client class specified in buffer limit configuration.".into(),
                    ))
                }
            };
            let n = |s: &str| crate::config::parse_memory(s).filter(|n| *n <= i64::MAX as u64);
            let (Some(hard), Some(soft), Some(secs)) = (n(w[1]), n(w[2]), w[3].parse().ok()) else {
                return Err(ConfigError::Invalid(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .into(),
                ));
            };
            limits[class as usize] = BufferLimit {
                hard,
                soft,
                soft_seconds: secs,
            };
        }
        *self.output.lock() = limits;
        let text = |l: BufferLimit| format!("{} {} {}", l.hard, l.soft, l.soft_seconds);
        Ok(format!(
            "normal {} slave {} pubsub {}",
            text(limits[0]),
            text(limits[1]),
            text(limits[2])
        ))
    }

    /// `maxmemory` in bytes (0: no limit).
    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Acquire)
    }

    /// `maxmemory-policy`.
    pub fn policy(&self) -> Policy {
        Policy::from_index(self.policy.load(Ordering::Acquire))
    }

    /// `client-query-buffer-limit` in bytes.
    pub fn query_buffer_limit(&self) -> u64 {
        self.query_buffer_limit.load(Ordering::Acquire)
    }

    /// `client-output-buffer-limit` of one class.
    pub fn output_limit(&self, class: ClientClass) -> BufferLimit {
        self.output.lock()[class as usize]
    }
}

// ---------------------------------------------------------------------------------------------
// Access time and frequency

/// Redis's starting frequency for a new key (`LFU_INIT_VAL`), so that a key just written is not
/// the first evicted.
const LFU_INIT: u32 = 5;

/// When a key was last used (milliseconds, wrapping every 49 days) or, under an LFU policy,
/// how often: a 16-bit minute stamp of the last decrement and an 8-bit logarithmic counter,
/// the layout of Redis's `lru` field.
#[derive(Debug, Default)]
pub struct Access(AtomicU32);

impl Clone for Access {
    fn clone(&self) -> Self {
        Access(AtomicU32::new(self.0.load(Ordering::Relaxed)))
    }
}

fn minutes(now_ms: u64) -> u32 {
    ((now_ms / 60_000) & 0xFFFF) as u32
}

impl Access {
    /// Stamps a key that was just created.
    pub(crate) fn init(&self, now_ms: u64, limits: &Limits) {
        let v = if limits.policy().lfu() {
            (minutes(now_ms) << 8) | LFU_INIT
        } else {
            now_ms as u32
        };
        self.0.store(v, Ordering::Relaxed);
    }

    /// Records a use of the key (any read or write that found it). A read at time 0 is the
    /// server's own look at a key (encoding a write for the replication stream, say), not a
    /// use: it leaves the stamp alone, as Redis's `LOOKUP_NOTOUCH` does.
    pub(crate) fn touch(&self, now_ms: u64, limits: &Limits) {
        if now_ms == 0 {
            return;
        }
        let old = self.0.load(Ordering::Relaxed);
        let new = if limits.policy().lfu() {
            let counter = log_incr(decayed(old, now_ms, limits), limits);
            (minutes(now_ms) << 8) | counter
        } else {
            now_ms as u32
        };
        if new != old {
            self.0.store(new, Ordering::Relaxed);
        }
    }

    /// How good an eviction candidate the key is under `policy` (higher: evict first).
    fn score(&self, now_ms: u64, limits: &Limits) -> u64 {
        let v = self.0.load(Ordering::Relaxed);
        if limits.policy().lfu() {
            255 - decayed(v, now_ms, limits) as u64
        } else {
            (now_ms as u32).wrapping_sub(v) as u64
        }
    }
}

/// The counter of an LFU stamp after the decay of the minutes since it was stamped: one step
/// down per `lfu-decay-time` minutes.
fn decayed(v: u32, now_ms: u64, limits: &Limits) -> u32 {
    let counter = v & 0xFF;
    let period = limits.lfu_decay_time.load(Ordering::Relaxed);
    if period == 0 {
        return counter;
    }
    let then = v >> 8;
    let now = minutes(now_ms);
    let elapsed = if now >= then {
        now - then
    } else {
        0xFFFF - then + now
    };
    counter.saturating_sub(elapsed / period)
}

/// Redis's logarithmic increment: the higher the counter, the less likely a use raises it.
fn log_incr(counter: u32, limits: &Limits) -> u32 {
    if counter >= 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT) as f64;
    let factor = limits.lfu_log_factor.load(Ordering::Relaxed) as f64;
    let p = 1.0 / (base * factor + 1.0);
    if rand::random::<f64>() < p {
        counter + 1
    } else {
        counter
    }
}

// ---------------------------------------------------------------------------------------------
// Used memory

/// The estimate of the whole keyspace: every database's entries and hash tables.
pub fn keyspace_bytes(shared: &Shared) -> usize {
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
pub fn used_memory(shared: &Shared) -> usize {
    crate::memory::allocated_bytes().unwrap_or_else(|| keyspace_bytes(shared))
}

// ---------------------------------------------------------------------------------------------
// Eviction

/// Eviction state kept across calls: the candidate pool and the counters.
#[derive(Debug, Default)]
pub struct Evictor {
    pool: Mutex<Vec<Candidate>>,
    /// Keys evicted since start (`INFO stats`'s `evicted_keys`).
    pub evicted_keys: AtomicU64,
    /// The database the random policies take their next key from.
    next_db: AtomicUsize,
    /// Set while a call evicts, so that concurrent commands do not pile onto the same work.
    busy: AtomicBool,
    /// The highest `used_memory` seen (when `INFO` or a command under `maxmemory` looked).
    peak: AtomicUsize,
}

impl Evictor {
    /// Records a reading of used memory; returns the peak so far.
    pub fn note_peak(&self, used: usize) -> usize {
        self.peak.fetch_max(used, Ordering::Relaxed).max(used)
    }
}

#[derive(Debug, Clone)]
struct Candidate {
    db: usize,
    key: Bytes,
    score: u64,
}

/// What [`perform_evictions`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
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
    map: &DashMap<Bytes, Entry, KeyHasher>,
    want: usize,
    max_visits: usize,
    mut keep: impl FnMut(&Bytes, &Entry) -> bool,
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
                if let Some(t) = e.expires_at {
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
        if policy.volatile() && e.expires_at.is_none() {
            return false;
        }
        found.push((k.clone(), e.access.score(now_ms, limits)));
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
                if policy.volatile() && e.expires_at.is_none() {
                    return false;
                }
                pick = Some(k.clone());
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
pub fn perform_evictions(shared: &Shared) -> Outcome {
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
        Some(e) if !policy.volatile() || e.expires_at.is_some() => (Update::Remove, true),
        _ => (Update::Keep, false),
    });
    shared.propagate_lazy_expired();
    if gone {
        shared.evictor.evicted_keys.fetch_add(1, Ordering::Relaxed);
        shared.propagate_expired(index, std::slice::from_ref(key));
    }
    gone
}

/// Whether the memory check applies to this client at all: not on a replica (it follows its
/// master) and not for the link from the master or a loading AOF.
fn exempt(shared: &Shared, client: &Client) -> bool {
    shared.is_replica() || client.is_replication_link
}

/// The check Redis makes before running a command while `maxmemory` is set: evicts what the
/// policy allows, then answers Redis's OOM error to a command that may not run out of memory.
/// Inside `MULTI` the refusal also dooms the transaction, as in Redis.
pub(crate) async fn check_command(
    shared: &Arc<Shared>,
    client: &mut Client,
    spec: &CommandSpec,
) -> Option<Frame> {
    let limits = &shared.config.limits;
    let max = limits.maxmemory() as usize;
    if max == 0 || exempt(shared, client) {
        return None;
    }
    let used = used_memory(shared);
    shared.evictor.note_peak(used);
    if used <= max {
        return None;
    }
    let outcome = if limits.policy() == Policy::NoEviction {
        Outcome::Fail
    } else {
        // Wait for a running script or transaction: eviction must not change keys under it.
        // A script that stays busy means no eviction now; the command then gets `BUSY`.
        match shared
            .gate
            .shared(shared.config.busy_reply_threshold())
            .await
        {
            Ok(guard) => {
                let r = perform_evictions(shared);
                drop(guard);
                r
            }
            Err(_) => return None,
        }
    };
    if outcome != Outcome::Fail {
        return None;
    }
    let in_multi = client.multi.is_some();
    let refuse = spec.has(DENYOOM)
        || (in_multi && !matches!(spec.name, "exec" | "discard" | "quit" | "reset"))
        || (spec.name == "exec" && queued_denyoom(client));
    if !refuse {
        return None;
    }
    if let Some(m) = client.multi.as_mut() {
        if spec.name != "exec" {
            m.errored = true;
        }
    }
    Some(Frame::error(OOM_ERROR))
}

/// Whether a transaction being executed holds a command that may grow memory.
fn queued_denyoom(client: &Client) -> bool {
    client.multi.as_ref().is_some_and(|m| {
        m.queue
            .iter()
            .any(|args| crate::cmd::lookup(&args[0]).is_some_and(|s| s.has(DENYOOM)))
    })
}

/// The check of a command called by a script (`redis.call`): Redis refuses a `denyoom` command
/// while memory is over the limit, unless the script already wrote (it must not stop half-way
/// through its writes). `wrote` says whether it did.
pub(crate) fn check_script_call(ctx: &Ctx<'_>, spec: &CommandSpec, wrote: bool) -> Option<String> {
    let max = ctx.shared.config.limits.maxmemory() as usize;
    if max == 0 || wrote || !spec.has(DENYOOM) || exempt(ctx.shared, ctx.client) {
        return None;
    }
    (used_memory(ctx.shared) > max).then(|| OOM_ERROR.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

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
