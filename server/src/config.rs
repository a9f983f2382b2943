//! Runtime configuration: the parameters `CONFIG GET` and `CONFIG SET` read and write.
//!
//! Values are kept as Redis prints them (strings). The few that the hot path reads on every
//! command are mirrored in atomics.

use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use parking_lot::{Mutex, RwLock};

/// The Redis release whose behaviour this server follows: its commands, replies, errors and
/// test suite. The one place the version is said (`HELLO`, `INFO server`, the RDB's
/// `redis-ver`): clients choose features by it, so it names the release the differential tests
/// compare with.
pub const REDIS_VERSION: &str = "7.0.15";

/// Parameters and their defaults (Redis 7 names and defaults, except where noted).
const DEFAULTS: &[(&str, &str)] = &[
    ("bind", "127.0.0.1"),
    ("port", "6379"),
    ("databases", "16"),
    // How many threads serve clients: the runtime's worker count (see `Server::runtime`).
    ("io-threads", "1"),
    // latchkey does not write RDB snapshots: an empty save policy says so to clients.
    ("save", ""),
    ("appendonly", "no"),
    ("appendfsync", "everysec"),
    ("appendfilename", "appendonly.aof"),
    // `BGREWRITEAOF`'s automatic rule (see `cmd::bgrewriteaof`).
    ("auto-aof-rewrite-percentage", "100"),
    ("auto-aof-rewrite-min-size", "67108864"),
    // Redis 7.0 defaults to `yes`; latchkey's AOF loader reads commands only, so a rewrite
    // writes commands, which is what `no` says (see `aof_rewrite`).
    ("aof-use-rdb-preamble", "no"),
    // What a SIGTERM or SIGINT makes the `latchkey-server` binary do (`SHUTDOWN`'s flags).
    ("shutdown-on-sigterm", "default"),
    ("shutdown-on-sigint", "default"),
    // Redis's testing knob (hidden from `CONFIG GET` patterns): microseconds a background
    // save or AOF rewrite pauses after each key.
    ("rdb-key-save-delay", "0"),
    ("dir", "."),
    ("dbfilename", "dump.rdb"),
    ("maxclients", "10000"),
    ("maxmemory", "0"),
    ("maxmemory-policy", "noeviction"),
    ("maxmemory-samples", "5"),
    ("lfu-log-factor", "10"),
    ("lfu-decay-time", "1"),
    ("lazyfree-lazy-expire", "no"),
    ("proto-max-bulk-len", "536870912"),
    ("client-query-buffer-limit", "1073741824"),
    ("busy-reply-threshold", "5000"),
    ("lua-time-limit", "5000"),
    ("timeout", "0"),
    ("tcp-keepalive", "300"),
    ("hz", "10"),
    ("notify-keyspace-events", ""),
    ("slowlog-log-slower-than", "10000"),
    ("requirepass", ""),
    ("masterauth", ""),
    ("masteruser", ""),
    ("slowlog-max-len", "128"),
    ("latency-monitor-threshold", "0"),
    ("latency-tracking", "yes"),
    ("latency-tracking-info-percentiles", "50 99 99.9"),
    ("acllog-max-len", "128"),
    ("acl-pubsub-default", "resetchannels"),
    ("aclfile", ""),
    (
        "client-output-buffer-limit",
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    ),
    ("replica-read-only", "yes"),
    ("slave-read-only", "yes"),
    ("repl-backlog-size", "1048576"),
    ("repl-backlog-ttl", "3600"),
    ("min-replicas-to-write", "0"),
    ("min-slaves-to-write", "0"),
    ("min-replicas-max-lag", "10"),
    ("min-slaves-max-lag", "10"),
    ("cluster-enabled", "no"),
    ("loglevel", "notice"),
    ("tracking-table-max-keys", "1000000"),
    ("hll-sparse-max-bytes", "3000"),
    // latchkey reads every RESTORE payload as if this were `yes`: it decodes the whole value
    // into its own structures, checking each part, before the key exists (see
    // `rdb::dump`). The setting is kept so that clients that set it are answered as Redis
    // answers them.
    ("sanitize-dump-payload", "no"),
    ("stream-node-max-bytes", "4096"),
    ("stream-node-max-entries", "100"),
];

/// Parameters Redis hides from `CONFIG GET` patterns (its `HIDDEN_CONFIG` flag): testing knobs
/// that answer only when named exactly.
const HIDDEN: &[&str] = &["rdb-key-save-delay"];

/// How `CONFIG SET` treats a parameter while the server runs. Every parameter is one of
/// these, so none is accepted and then ignored (the list, with the reason for each, is in
/// `docs/COMPATIBILITY.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runtime {
    /// A new value takes effect at once.
    Applied,
    /// Set only at start, as in Redis (`CONFIG SET` answers Redis's "can't set immutable
    /// config").
    Immutable,
    /// Set only at start unless `enable-protected-configs` allows it, which latchkey never
    /// does (Redis's default): `CONFIG SET` answers Redis's "can't set protected config".
    Protected,
    /// latchkey does not implement other values, or applies this one only at start:
    /// `CONFIG SET` accepts the current value and refuses any other, saying why.
    Fixed(&'static str),
}

/// The [`Runtime`] rule of a parameter (names lowercase).
pub(crate) fn runtime_rule(name: &str) -> Runtime {
    match name {
        "databases" | "appendfilename" | "cluster-enabled" | "aclfile" | "io-threads" => {
            Runtime::Immutable
        }
        "dir" | "dbfilename" => Runtime::Protected,
        "bind" | "port" | "appendfsync" | "loglevel" => {
            Runtime::Fixed("latchkey applies it only at start")
        }
        "tcp-keepalive" => Runtime::Fixed("latchkey does not change socket keepalive"),
        "aof-use-rdb-preamble" => Runtime::Fixed(
            "latchkey's AOF loader reads commands only, so an AOF rewrite writes commands",
        ),
        "hz" => Runtime::Fixed("latchkey's background tasks run at a fixed 10 Hz"),
        "replica-read-only" | "slave-read-only" => {
            Runtime::Fixed("latchkey replicas are always read-only")
        }
        _ => Runtime::Applied,
    }
}

/// The server's configuration parameters.
#[derive(Debug)]
pub(crate) struct Config {
    params: RwLock<IndexMap<String, String>>,
    maxclients: AtomicU64,
    proto_max_bulk_len: AtomicU64,
    busy_reply_threshold_ms: AtomicU64,
    /// `min-replicas-to-write`: writes are refused unless this many replicas are good (0:
    /// no such rule).
    min_replicas_to_write: AtomicU64,
    /// `min-replicas-max-lag`: a replica is good while its last acknowledgement is at most
    /// this many seconds old (0 turns the rule off).
    min_replicas_max_lag: AtomicU64,
    /// The memory and eviction settings the hot path reads (see [`crate::evict`]).
    pub(crate) limits: Arc<Limits>,
    /// The encoding parameters (see [`crate::encodings`]).
    pub encodings: crate::encodings::Encodings,
    /// `tracking-table-max-keys`, shared with the tracking table (see [`crate::tracking`]).
    pub(crate) tracking_max_keys: Arc<AtomicU64>,
    /// `hll-sparse-max-bytes`: past this many bytes a HyperLogLog turns dense (see
    /// [`crate::hll`]).
    hll_sparse_max_bytes: AtomicU64,
    /// `stream-node-max-bytes` and `stream-node-max-entries`: when a stream's node is full
    /// (see [`crate::stream`]).
    stream_node_max_bytes: AtomicU64,
    stream_node_max_entries: AtomicU64,
    /// `notify-keyspace-events` (see [`crate::notify`]).
    pub(crate) notify: crate::notify::NotifyFlags,
    /// `slowlog-log-slower-than`, in microseconds (see [`crate::slowlog`]).
    slowlog_slower_than: AtomicI64,
    /// `slowlog-max-len`.
    slowlog_max_len: AtomicU64,
    /// `latency-monitor-threshold`, in milliseconds (0: the monitor is off; see
    /// [`crate::latency`]).
    latency_threshold_ms: AtomicU64,
    /// `latency-tracking`: whether commands' latency histograms are kept.
    latency_tracking: AtomicBool,
    /// `latency-tracking-info-percentiles`: the percentiles `INFO latencystats` prints.
    latency_percentiles: RwLock<Vec<f64>>,
}

impl Default for Config {
    fn default() -> Self {
        let params = DEFAULTS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain(
                crate::encodings::Encodings::defaults()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v)),
            )
            .collect();
        Config {
            params: RwLock::new(params),
            maxclients: AtomicU64::new(10000),
            proto_max_bulk_len: AtomicU64::new(512 * 1024 * 1024),
            busy_reply_threshold_ms: AtomicU64::new(5000),
            min_replicas_to_write: AtomicU64::new(0),
            min_replicas_max_lag: AtomicU64::new(10),
            limits: Arc::new(Limits::default()),
            encodings: Default::default(),
            tracking_max_keys: Arc::new(AtomicU64::new(1_000_000)),
            hll_sparse_max_bytes: AtomicU64::new(3000),
            stream_node_max_bytes: AtomicU64::new(crate::stream::NODE_MAX_BYTES),
            stream_node_max_entries: AtomicU64::new(crate::stream::NODE_MAX_ENTRIES),
            notify: crate::notify::NotifyFlags::default(),
            slowlog_slower_than: AtomicI64::new(10_000),
            slowlog_max_len: AtomicU64::new(128),
            latency_threshold_ms: AtomicU64::new(0),
            latency_tracking: AtomicBool::new(true),
            latency_percentiles: RwLock::new(vec![50.0, 99.0, 99.9]),
        }
    }
}

/// Why `CONFIG SET` refused a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConfigError {
    /// The parameter does not exist.
    Unknown,
    /// The value is not acceptable for the parameter; the text explains.
    Invalid(String),
}

impl Config {
    /// The current value of a parameter, if it exists (names are case-insensitive).
    pub(crate) fn get(&self, name: &str) -> Option<String> {
        self.params.read().get(&name.to_ascii_lowercase()).cloned()
    }

    /// Every `(name, value)` whose name matches the glob `pattern`, in a stable order.
    pub(crate) fn matching(&self, pattern: &[u8]) -> Vec<(String, String)> {
        // As in Redis, a hidden parameter answers its exact name only, never a pattern.
        let is_pattern = pattern.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
        self.params
            .read()
            .iter()
            .filter(|(k, _)| !(is_pattern && HIDDEN.contains(&k.as_str())))
            .filter(|(k, _)| crate::glob::matches(pattern, k.as_bytes(), true))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Sets a parameter, validating numeric ones.
    pub(crate) fn set(&self, name: &str, value: &str) -> Result<(), ConfigError> {
        let name = name.to_ascii_lowercase();
        if !self.params.read().contains_key(&name) {
            return Err(ConfigError::Unknown);
        }
        let number = || {
            parse_memory(value).ok_or_else(|| {
                ConfigError::Invalid("argument couldn't be parsed into an integer".into())
            })
        };
        if let Some((names, stored)) = self
            .encodings
            .set(&name, value)
            .map_err(ConfigError::Invalid)?
        {
            let mut p = self.params.write();
            for n in names {
                p.insert(n.to_string(), stored.clone());
            }
            return Ok(());
        }
        if let Some(stored) = self.limits.set(&name, value)? {
            self.params.write().insert(name, stored);
            return Ok(());
        }
        match name.as_str() {
            "maxclients" => {
                let n = number()?;
                if !(1..=u32::MAX as u64).contains(&n) {
                    return Err(ConfigError::Invalid(
                        "argument must be between 1 and 4294967295 inclusive".into(),
                    ));
                }
                self.maxclients.store(n, Ordering::Release)
            }
            "proto-max-bulk-len" => {
                let n = memory_value(value, 1 << 20)?;
                self.proto_max_bulk_len.store(n, Ordering::Release);
                self.params.write().insert(name, n.to_string());
                return Ok(());
            }
            "busy-reply-threshold" | "lua-time-limit" => {
                let ms = number()?;
                self.busy_reply_threshold_ms.store(ms, Ordering::Release);
                let mut p = self.params.write();
                p.insert("busy-reply-threshold".into(), ms.to_string());
                p.insert("lua-time-limit".into(), ms.to_string());
                return Ok(());
            }
            "stream-node-max-entries" => {
                let n = int_value(value, 0, i64::MAX)?;
                self.stream_node_max_entries
                    .store(n as u64, Ordering::Release);
                self.params.write().insert(name, n.to_string());
                return Ok(());
            }
            "auto-aof-rewrite-percentage" => {
                let n = int_value(value, 0, i32::MAX as i64)?;
                self.params.write().insert(name, n.to_string());
                return Ok(());
            }
            "rdb-key-save-delay" => {
                let n = int_value(value, i32::MIN as i64, i32::MAX as i64)?;
                self.params.write().insert(name, n.to_string());
                return Ok(());
            }
            "shutdown-on-sigint" | "shutdown-on-sigterm" => {
                let flags = ShutdownFlags::parse(value)?;
                self.params.write().insert(name, flags.render());
                return Ok(());
            }
            "hll-sparse-max-bytes" | "stream-node-max-bytes" | "auto-aof-rewrite-min-size" => {
                // A memory value (`1kb`) up to 2^63 - 1, as in Redis: one that parses but is
                // larger gets the range error, not the parse error.
                let n = match parse_memory(value) {
                    Some(n) => n,
                    // Digits past 2^64 - 1 saturate there (C's `strtoull`).
                    None if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                        u64::MAX
                    }
                    None => {
                        return Err(ConfigError::Invalid(
                            "argument must be a memory value".into(),
                        ))
                    }
                };
                if n > i64::MAX as u64 {
                    return Err(ConfigError::Invalid(
                        "argument must be between 0 and 9223372036854775807 inclusive".into(),
                    ));
                }
                match name.as_str() {
                    "hll-sparse-max-bytes" => self.hll_sparse_max_bytes.store(n, Ordering::Release),
                    "stream-node-max-bytes" => {
                        self.stream_node_max_bytes.store(n, Ordering::Release)
                    }
                    // Read by the persistence cron from the text.
                    _ => {}
                }
                self.params.write().insert(name, n.to_string());
                return Ok(());
            }
            "save" => {
                let points = crate::save_params::parse(value)
                    .map_err(|why| ConfigError::Invalid(why.into()))?;
                self.params
                    .write()
                    .insert(name, crate::save_params::render(&points));
                return Ok(());
            }
            "dbfilename" => {
                // Redis keeps the file in `dir`: a path would write elsewhere.
                if value.contains('/') {
                    return Err(ConfigError::Invalid(
                        "dbfilename can't be a path, just a filename".into(),
                    ));
                }
                self.params.write().insert(name, value.to_string());
                return Ok(());
            }
            "slowlog-log-slower-than" => {
                let n = int_value(value, -1, i64::MAX)?;
                self.slowlog_slower_than.store(n, Ordering::Relaxed);
                self.params.write().insert(name, n.to_string());
                return Ok(());
            }
            "acl-pubsub-default" => {
                let lower = value.to_ascii_lowercase();
                if lower != "allchannels" && lower != "resetchannels" {
                    return Err(ConfigError::Invalid(
                        "argument(s) must be one of the following: allchannels, resetchannels"
                            .into(),
                    ));
                }
                self.params.write().insert(name, lower);
                return Ok(());
            }
            "acllog-max-len" => {
                let n = int_value(value, 0, i64::MAX)?;
                self.params.write().insert(name, n.to_string());
                return Ok(());
            }
            "slowlog-max-len" => {
                let n = int_value(value, 0, i64::MAX)?;
                self.slowlog_max_len.store(n as u64, Ordering::Relaxed);
                self.params.write().insert(name, n.to_string());
                return Ok(());
            }
            "latency-monitor-threshold" => {
                let n = int_value(value, 0, i64::MAX)?;
                self.latency_threshold_ms.store(n as u64, Ordering::Relaxed);
                self.params.write().insert(name, n.to_string());
                return Ok(());
            }
            "latency-tracking" => {
                let on = yes_no(value)?;
                self.latency_tracking.store(on, Ordering::Relaxed);
                let text = if on { "yes" } else { "no" };
                self.params.write().insert(name, text.to_string());
                return Ok(());
            }
            "latency-tracking-info-percentiles" => {
                let percentiles = parse_percentiles(value)?;
                let text: Vec<String> = percentiles
                    .iter()
                    .map(|p| crate::latency::format_percentile(*p))
                    .collect();
                *self.latency_percentiles.write() = percentiles;
                self.params.write().insert(name, text.join(" "));
                return Ok(());
            }
            "notify-keyspace-events" => {
                let flags = crate::notify::parse(value).map_err(ConfigError::Invalid)?;
                self.notify.store(flags);
                self.params
                    .write()
                    .insert(name, crate::notify::format(flags));
                return Ok(());
            }
            "sanitize-dump-payload" => {
                let lower = value.to_ascii_lowercase();
                if !matches!(lower.as_str(), "no" | "yes" | "clients") {
                    return Err(ConfigError::Invalid(
                        "argument(s) must be one of the following: no, yes, clients".into(),
                    ));
                }
                self.params.write().insert(name, lower);
                return Ok(());
            }
            "tracking-table-max-keys" => {
                let n = int_value(value, 0, i64::MAX)?;
                self.tracking_max_keys.store(n as u64, Ordering::Relaxed);
                self.params.write().insert(name, n.to_string());
                return Ok(());
            }
            "min-replicas-to-write"
            | "min-slaves-to-write"
            | "min-replicas-max-lag"
            | "min-slaves-max-lag" => {
                let n = int_value(value, 0, i32::MAX as i64)? as u64;
                let (slot, names) = if name.ends_with("to-write") {
                    (
                        &self.min_replicas_to_write,
                        ["min-replicas-to-write", "min-slaves-to-write"],
                    )
                } else {
                    (
                        &self.min_replicas_max_lag,
                        ["min-replicas-max-lag", "min-slaves-max-lag"],
                    )
                };
                slot.store(n, Ordering::Release);
                let mut p = self.params.write();
                for alias in names {
                    p.insert(alias.into(), n.to_string());
                }
                return Ok(());
            }
            "io-threads" => {
                let n = int_value(value, 1, 128)?;
                self.params.write().insert(name, n.to_string());
                return Ok(());
            }
            "timeout" => {
                let n = int_value(value, 0, i32::MAX as i64)?;
                self.params.write().insert(name, n.to_string());
                return Ok(());
            }
            "port" | "hz" | "databases" | "repl-backlog-size" | "repl-backlog-ttl" => {
                number()?;
            }
            "appendonly" | "replica-read-only" | "slave-read-only" | "cluster-enabled" => {
                // Kept as Redis prints a boolean, whatever the case it was given in.
                let text = if yes_no(value)? { "yes" } else { "no" };
                self.params.write().insert(name, text.to_string());
                return Ok(());
            }
            _ => {}
        }
        self.params.write().insert(name, value.to_string());
        Ok(())
    }

    /// `maxclients`.
    pub(crate) fn maxclients(&self) -> u64 {
        self.maxclients.load(Ordering::Acquire)
    }

    /// `proto-max-bulk-len`.
    pub(crate) fn proto_max_bulk_len(&self) -> u64 {
        self.proto_max_bulk_len.load(Ordering::Acquire)
    }

    /// `hll-sparse-max-bytes`.
    pub(crate) fn hll_sparse_max_bytes(&self) -> u64 {
        self.hll_sparse_max_bytes.load(Ordering::Acquire)
    }

    /// `stream-node-max-entries` and `stream-node-max-bytes`.
    pub(crate) fn stream_node_limits(&self) -> crate::stream::NodeLimits {
        crate::stream::NodeLimits {
            max_entries: self.stream_node_max_entries.load(Ordering::Acquire),
            max_bytes: self.stream_node_max_bytes.load(Ordering::Acquire),
        }
    }

    /// `client-query-buffer-limit` in bytes.
    pub(crate) fn query_buffer_limit(&self) -> u64 {
        self.limits.query_buffer_limit()
    }

    /// `set-max-intset-entries`.
    pub(crate) fn set_max_intset_entries(&self) -> usize {
        self.encodings.set_max_intset_entries()
    }

    /// `acllog-max-len`: how many entries the ACL log keeps.
    pub(crate) fn acllog_max_len(&self) -> usize {
        self.get("acllog-max-len")
            .and_then(|v| v.parse().ok())
            .unwrap_or(128)
    }

    /// Whether a command whose handler took `usec` goes into the slow log.
    pub(crate) fn slowlog_is_slow(&self, usec: u64) -> bool {
        let t = self.slowlog_slower_than.load(Ordering::Relaxed);
        t >= 0 && usec >= t as u64
    }

    /// `slowlog-max-len`: how many entries the slow log keeps.
    pub(crate) fn slowlog_max_len(&self) -> u64 {
        self.slowlog_max_len.load(Ordering::Relaxed)
    }

    /// `latency-monitor-threshold` in milliseconds: 0 while the latency monitor is off.
    pub(crate) fn latency_threshold_ms(&self) -> u64 {
        self.latency_threshold_ms.load(Ordering::Relaxed)
    }

    /// `slowlog-log-slower-than`, in microseconds (negative: nothing is logged).
    pub(crate) fn slowlog_slower_than(&self) -> i64 {
        self.slowlog_slower_than.load(Ordering::Relaxed)
    }

    /// `latency-tracking`: whether commands' latency histograms are kept.
    pub(crate) fn latency_tracking(&self) -> bool {
        self.latency_tracking.load(Ordering::Relaxed)
    }

    /// `latency-tracking-info-percentiles`.
    pub(crate) fn latency_percentiles(&self) -> Vec<f64> {
        self.latency_percentiles.read().clone()
    }

    /// `busy-reply-threshold` (alias `lua-time-limit`).
    pub(crate) fn busy_reply_threshold(&self) -> Duration {
        Duration::from_millis(self.busy_reply_threshold_ms.load(Ordering::Acquire))
    }

    /// `min-replicas-to-write` and `min-replicas-max-lag` (aliases `min-slaves-*`): how many
    /// replicas must be good, and how many seconds old a good replica's last
    /// acknowledgement may be. The rule is on only when both are above 0.
    pub(crate) fn min_replicas(&self) -> (u64, u64) {
        (
            self.min_replicas_to_write.load(Ordering::Acquire),
            self.min_replicas_max_lag.load(Ordering::Acquire),
        )
    }
}

/// Parses a Redis memory/number value such as `100`, `1mb`, `2gb`, `512k`.
pub(crate) fn parse_memory(v: &str) -> Option<u64> {
    let lower = v.to_ascii_lowercase();
    let (digits, mul) = [
        ("gb", 1u64 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1_000_000_000),
        ("m", 1_000_000),
        ("k", 1_000),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suffix, mul)| lower.strip_suffix(suffix).map(|d| (d.to_string(), *mul)))
    .unwrap_or((lower.clone(), 1));
    digits.parse::<u64>().ok()?.checked_mul(mul)
}

// ---------------------------------------------------------------------------------------------
// Memory and output-buffer limits

/// What `maxmemory-policy` says to do when memory runs out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
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
    pub(crate) fn volatile(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    /// Whether keys carry an access-frequency counter rather than an access time.
    pub(crate) fn lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }
}

/// The memory settings read on every command, mirrored out of the text parameters.
/// Shared (through an `Arc`) by the configuration and the keyspace, whose reads stamp keys
/// with their access time or frequency according to the policy.
#[derive(Debug)]
pub(crate) struct Limits {
    maxmemory: AtomicU64,
    policy: AtomicU8,
    pub(crate) samples: AtomicUsize,
    pub(crate) lfu_log_factor: AtomicU32,
    pub(crate) lfu_decay_time: AtomicU32,
    query_buffer_limit: AtomicU64,
    /// `lazyfree-lazy-expire`: whether an expired key's value is freed by the background
    /// freer (and its deletion propagated as `UNLINK`) rather than where the key expires.
    lazy_expire: AtomicBool,
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
            lazy_expire: AtomicBool::new(false),
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
pub(crate) struct BufferLimit {
    /// Disconnect at once past this many bytes.
    pub hard: u64,
    /// Disconnect when over this many bytes ...
    pub soft: u64,
    /// ... for this many seconds.
    pub soft_seconds: u64,
}

/// A client class of `client-output-buffer-limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClientClass {
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

/// A boolean parameter: `yes` or `no`, in any case.
fn yes_no(value: &str) -> Result<bool, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(ConfigError::Invalid(
            "argument must be 'yes' or 'no'".into(),
        )),
    }
}

/// `latency-tracking-info-percentiles`: numbers from 0 to 100 separated by single spaces
/// (Redis splits on each space, so two spaces make an empty, invalid, word), or nothing.
fn parse_percentiles(value: &str) -> Result<Vec<f64>, ConfigError> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    value
        .split(' ')
        .map(|word| {
            let p = strtod_whole(word).ok_or_else(|| {
                ConfigError::Invalid("Invalid latency-tracking-info-percentiles parameters".into())
            })?;
            if !(0.0..=100.0).contains(&p) {
                return Err(ConfigError::Invalid(
                    "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                        .into(),
                ));
            }
            Ok(p)
        })
        .collect()
}

/// A whole word read as Redis's `string2d` reads it (C's `strtod`, all of it): no leading
/// blank, no NaN, and no value out of a double's range (an overflow to infinity or an
/// underflow to zero), though `inf` itself is a number.
fn strtod_whole(word: &str) -> Option<f64> {
    if word.is_empty() || word.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if lower.len() - unsigned.len() > 1 {
        return None;
    }
    let negative = lower.starts_with('-');
    if matches!(unsigned, "inf" | "infinity") {
        return Some(if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    if let Some(hex) = unsigned.strip_prefix("0x") {
        let v = hex_float(hex)?;
        return Some(if negative { -v } else { v });
    }
    if !unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        || unsigned.contains(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-')))
    {
        return None;
    }
    let v: f64 = lower.parse().ok()?;
    let mantissa = unsigned.split('e').next().unwrap_or("");
    let underflow = v == 0.0 && mantissa.contains(|c: char| ('1'..='9').contains(&c));
    (v.is_finite() && !underflow).then_some(v)
}

/// The digits of a C hexadecimal float after its `0x`: `1f`, `1.8`, `1p4` (a power of two).
fn hex_float(hex: &str) -> Option<f64> {
    let (mantissa, exponent) = match hex.split_once('p') {
        Some((m, e)) => (m, Some(e)),
        None => (hex, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in whole.chars() {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in fraction.chars() {
        v += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    if let Some(e) = exponent {
        let digits = e.trim_start_matches(['+', '-']);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        v *= 2f64.powi(e.parse::<i32>().ok()?);
    }
    v.is_finite().then_some(v)
}

/// What a shutdown does beyond stopping: `SHUTDOWN`'s options, and the value of
/// `shutdown-on-sigterm` / `shutdown-on-sigint` (Redis's enum of flags: `default`, or any of
/// `save`, `nosave`, `now`, `force`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ShutdownFlags {
    /// Write the snapshot file even without save points.
    pub save: bool,
    /// Do not write it, even with save points.
    pub nosave: bool,
    /// Do not wait for lagging replicas (latchkey never waits for them).
    pub now: bool,
    /// Go on when the snapshot could not be written.
    pub force: bool,
}

impl ShutdownFlags {
    /// Reads the parameter's value: words separated by spaces, case-insensitive, as Redis
    /// reads a multi-argument enum; `save` with `nosave` is refused with Redis's words.
    pub(crate) fn parse(value: &str) -> Result<ShutdownFlags, ConfigError> {
        let mut f = ShutdownFlags::default();
        let words: Vec<&str> = value.split(' ').filter(|w| !w.is_empty()).collect();
        if words.is_empty() {
            return Err(Self::invalid());
        }
        for w in words {
            match w.to_ascii_lowercase().as_str() {
                "default" => {}
                "save" => f.save = true,
                "nosave" => f.nosave = true,
                "now" => f.now = true,
                "force" => f.force = true,
                _ => return Err(Self::invalid()),
            }
        }
        if f.save && f.nosave {
            return Err(ConfigError::Invalid(
                "shutdown options SAVE and NOSAVE can't be used simultaneously".into(),
            ));
        }
        Ok(f)
    }

    fn invalid() -> ConfigError {
        ConfigError::Invalid(
            "argument(s) must be one of the following: default, save, nosave, now, force".into(),
        )
    }

    /// The value as `CONFIG GET` prints it: `default`, or the flags in Redis's order.
    pub(crate) fn render(&self) -> String {
        let words: Vec<&str> = [
            (self.save, "save"),
            (self.nosave, "nosave"),
            (self.now, "now"),
            (self.force, "force"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, w)| *w)
        .collect();
        if words.is_empty() {
            "default".into()
        } else {
            words.join(" ")
        }
    }
}

fn int_value(value: &str, min: i64, max: i64) -> Result<i64, ConfigError> {
    // Redis's `string2ll`: digits with an optional `-`, no `+`.
    let n: i64 = value
        .parse()
        .ok()
        .filter(|_| !value.starts_with('+'))
        .ok_or_else(|| {
            ConfigError::Invalid("argument couldn't be parsed into an integer".into())
        })?;
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
            "lazyfree-lazy-expire" => {
                let on = yes_no(value)?;
                self.lazy_expire.store(on, Ordering::Relaxed);
                if on { "yes" } else { "no" }.to_string()
            }
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
    pub(crate) fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Acquire)
    }

    /// `maxmemory-policy`.
    pub(crate) fn policy(&self) -> Policy {
        Policy::from_index(self.policy.load(Ordering::Acquire))
    }

    /// `client-query-buffer-limit` in bytes.
    pub(crate) fn query_buffer_limit(&self) -> u64 {
        self.query_buffer_limit.load(Ordering::Acquire)
    }

    /// `lazyfree-lazy-expire`: `false` (Redis's default) frees an expired key's value where
    /// the key is deleted, in the expiry cycle or the command that found it expired; `true`
    /// hands a big one to the background freer (see [`crate::lazyfree::free_expired`]).
    pub(crate) fn lazy_expire(&self) -> bool {
        self.lazy_expire.load(Ordering::Relaxed)
    }

    /// `client-output-buffer-limit` of one class.
    pub(crate) fn output_limit(&self, class: ClientClass) -> BufferLimit {
        self.output.lock()[class as usize]
    }
}
