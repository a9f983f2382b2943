//! Runtime configuration: the parameters `CONFIG GET` and `CONFIG SET` read and write.
//!
//! Values are kept as Redis prints them (strings). The few that the hot path reads on every
//! command are mirrored in atomics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use crate::evict::Limits;

use indexmap::IndexMap;
use parking_lot::RwLock;

/// Parameters and their defaults (Redis 7 names and defaults, except where noted).
const DEFAULTS: &[(&str, &str)] = &[
    ("bind", "127.0.0.1"),
    ("port", "6379"),
    ("databases", "16"),
    // latchkey does not write RDB snapshots: an empty save policy says so to clients.
    ("save", ""),
    ("appendonly", "no"),
    ("appendfsync", "everysec"),
    ("appendfilename", "appendonly.aof"),
    ("dir", "."),
    ("maxclients", "10000"),
    ("maxmemory", "0"),
    ("maxmemory-policy", "noeviction"),
    ("maxmemory-samples", "5"),
    ("lfu-log-factor", "10"),
    ("lfu-decay-time", "1"),
    ("proto-max-bulk-len", "536870912"),
    ("client-query-buffer-limit", "1073741824"),
    ("busy-reply-threshold", "5000"),
    ("lua-time-limit", "5000"),
    ("timeout", "0"),
    ("tcp-keepalive", "300"),
    ("hz", "10"),
    ("notify-keyspace-events", ""),
    (
        "client-output-buffer-limit",
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    ),
    ("replica-read-only", "yes"),
    ("slave-read-only", "yes"),
    ("repl-backlog-size", "1048576"),
    ("repl-backlog-ttl", "3600"),
    ("min-replicas-to-write", "0"),
    ("min-replicas-max-lag", "10"),
    ("cluster-enabled", "no"),
    ("loglevel", "notice"),
];

/// How `CONFIG SET` treats a parameter while the server runs. Every parameter is one of
/// these, so none is accepted and then ignored (the list, with the reason for each, is in
/// `docs/COMPATIBILITY.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// A new value takes effect at once.
    Applied,
    /// Set only at start, as in Redis (`CONFIG SET` answers Redis's "can't set immutable
    /// config").
    Immutable,
    /// latchkey does not implement other values, or applies this one only at start:
    /// `CONFIG SET` accepts the current value and refuses any other, saying why.
    Fixed(&'static str),
}

/// The [`Runtime`] rule of a parameter (names lowercase).
pub fn runtime_rule(name: &str) -> Runtime {
    match name {
        "databases" | "appendfilename" | "cluster-enabled" => Runtime::Immutable,
        "bind" | "port" | "dir" | "appendonly" | "appendfsync" | "loglevel" => {
            Runtime::Fixed("latchkey applies it only at start")
        }
        "save" => Runtime::Fixed("latchkey writes no RDB snapshots"),
        "timeout" => Runtime::Fixed("latchkey does not close idle clients"),
        "tcp-keepalive" => Runtime::Fixed("latchkey does not change socket keepalive"),
        "hz" => Runtime::Fixed("latchkey's background tasks run at a fixed 10 Hz"),
        "notify-keyspace-events" => Runtime::Fixed("latchkey does not send keyspace notifications"),
        "replica-read-only" | "slave-read-only" => {
            Runtime::Fixed("latchkey replicas are always read-only")
        }
        "min-replicas-to-write" | "min-replicas-max-lag" => {
            Runtime::Fixed("latchkey does not implement min-replicas-to-write")
        }
        _ => Runtime::Applied,
    }
}

/// The server's configuration parameters.
#[derive(Debug)]
pub struct Config {
    params: RwLock<IndexMap<String, String>>,
    maxclients: AtomicU64,
    proto_max_bulk_len: AtomicU64,
    busy_reply_threshold_ms: AtomicU64,
    /// The memory and eviction settings the hot path reads (see [`crate::evict`]).
    pub(crate) limits: Arc<Limits>,
}

impl Default for Config {
    fn default() -> Self {
        let params = DEFAULTS
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config {
            params: RwLock::new(params),
            maxclients: AtomicU64::new(10000),
            proto_max_bulk_len: AtomicU64::new(512 * 1024 * 1024),
            busy_reply_threshold_ms: AtomicU64::new(5000),
            limits: Arc::new(Limits::default()),
        }
    }
}

/// Why `CONFIG SET` refused a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The parameter does not exist.
    Unknown,
    /// The value is not acceptable for the parameter; the text explains.
    Invalid(String),
}

impl Config {
    /// The current value of a parameter, if it exists (names are case-insensitive).
    pub fn get(&self, name: &str) -> Option<String> {
        self.params.read().get(&name.to_ascii_lowercase()).cloned()
    }

    /// Every `(name, value)` whose name matches the glob `pattern`, in a stable order.
    pub fn matching(&self, pattern: &[u8]) -> Vec<(String, String)> {
        self.params
            .read()
            .iter()
            .filter(|(k, _)| crate::glob::matches(pattern, k.as_bytes(), true))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Sets a parameter, validating numeric ones.
    pub fn set(&self, name: &str, value: &str) -> Result<(), ConfigError> {
        let name = name.to_ascii_lowercase();
        if !self.params.read().contains_key(&name) {
            return Err(ConfigError::Unknown);
        }
        let number = || {
            parse_memory(value).ok_or_else(|| {
                ConfigError::Invalid("argument couldn't be parsed into an integer".into())
            })
        };
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
                let n = crate::evict::memory_value(value, 1 << 20)?;
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
            "port" | "timeout" | "hz" | "databases" | "repl-backlog-size" | "repl-backlog-ttl" => {
                number()?;
            }
            "appendonly" | "replica-read-only" | "slave-read-only" | "cluster-enabled"
                if !matches!(value.to_ascii_lowercase().as_str(), "yes" | "no") =>
            {
                return Err(ConfigError::Invalid(
                    "argument must be 'yes' or 'no'".into(),
                ));
            }
            _ => {}
        }
        self.params.write().insert(name, value.to_string());
        Ok(())
    }

    /// `maxclients`.
    pub fn maxclients(&self) -> u64 {
        self.maxclients.load(Ordering::Acquire)
    }

    /// `proto-max-bulk-len`.
    pub fn proto_max_bulk_len(&self) -> u64 {
        self.proto_max_bulk_len.load(Ordering::Acquire)
    }

    /// `maxmemory` in bytes (0: no limit).
    pub fn maxmemory(&self) -> u64 {
        self.limits.maxmemory()
    }

    /// `client-query-buffer-limit` in bytes.
    pub fn query_buffer_limit(&self) -> u64 {
        self.limits.query_buffer_limit()
    }

    /// `busy-reply-threshold` (alias `lua-time-limit`).
    pub fn busy_reply_threshold(&self) -> Duration {
        Duration::from_millis(self.busy_reply_threshold_ms.load(Ordering::Acquire))
    }
}

/// Parses a Redis memory/number value such as `100`, `1mb`, `2gb`, `512k`.
pub fn parse_memory(v: &str) -> Option<u64> {
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
