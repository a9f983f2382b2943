//! The ground floor: the state every part of the server shares.
//!
//! [`Shared`] is what Redis keeps in its `redisServer` struct: the keyspace, the clients,
//! pub/sub, the configuration, the clock, and the state of each feature that the features
//! themselves act on (replication, the AOF, eviction, the expiry cycle, scripting). This
//! module only holds it: the code that acts on it lives in the modules above, which take a
//! `&Shared`; nothing here imports them. How a write reaches the AOF and the replicas is the
//! small module beside this one, [`crate::propagate`].

use std::any::Any;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{watch, Notify};

use crate::client::{Client, Clients};
use crate::clock::Clock;
use crate::config::Config;
use crate::db::Keyspace;
use crate::gate::Gate;
use crate::pubsub::{Kind as PubSubKind, PubSub};
use crate::tracking::Tracking;

/// Counters `INFO stats` reports.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Connections accepted since start.
    pub connections_received: AtomicU64,
    /// Commands run since start.
    pub commands_processed: AtomicU64,
    /// Connections refused because of `maxclients`.
    pub rejected_connections: AtomicU64,
    /// Keys deleted by expiry (lazy or active).
    pub expired_keys: AtomicU64,
    /// Changes since start (Redis's `dirty` counter).
    pub dirty: AtomicU64,
    /// `dirty` when the last snapshot was taken (`rdb_changes_since_last_save` is the rest).
    pub dirty_at_save: AtomicU64,
    /// Unix seconds of the last snapshot written, or of the start (`LASTSAVE`); 0 until the
    /// server sets it at start.
    pub last_save_s: AtomicU64,
    /// Whether the last `BGSAVE` failed (`rdb_last_bgsave_status:err`).
    pub last_bgsave_failed: std::sync::atomic::AtomicBool,
    /// Clients waiting in a blocking command (`BLPOP`, `WAIT`, ...) right now.
    pub blocked_clients: AtomicU64,
    /// Error replies by prefix (`INFO errorstats`, `total_error_replies`).
    pub errors: crate::errorstats::ErrorStats,
    /// Calls, time and refusals by command (`INFO commandstats`).
    pub commands: crate::cmdstats::CommandStats,
    /// The slow commands (`SLOWLOG`).
    pub slowlog: crate::slowlog::SlowLog,
    /// The latency monitor's events (`LATENCY LATEST`, `HISTORY`, ...).
    pub latency_events: crate::latency::LatencyMonitor,
    /// Per-command latency histograms (`INFO latencystats`, `LATENCY HISTOGRAM`).
    pub latency_histograms: crate::latency::LatencyHistograms,
}

impl Stats {
    /// Counts one command.
    pub(crate) fn command_processed(&self) {
        self.commands_processed.fetch_add(1, Ordering::Relaxed);
    }
}

/// Server-wide state shared by every connection and background task.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The sixteen databases.
    pub keyspace: Keyspace,
    /// The time source.
    pub clock: Clock,
    /// `CONFIG` parameters.
    pub config: Config,
    /// Shared/exclusive execution, for atomic scripts and transactions.
    pub gate: Gate,
    /// Connected clients.
    pub clients: Clients,
    /// The ACL users and the ACL log.
    pub acl: crate::acl::Acl,
    /// Channel and pattern subscriptions.
    pub pubsub: PubSub,
    /// `CLIENT TRACKING`: the keys tracking clients read, their prefixes (see
    /// [`crate::tracking`]). The keyspace calls it on every change while it is armed.
    pub tracking: Arc<Tracking>,
    /// Lua scripts and functions.
    pub(crate) scripting: Plugged,
    /// Replication: the stream to replicas, or the link to a master.
    pub replication: crate::replication::Replication,
    /// The append-only file, when `appendonly yes`.
    pub aof: crate::aof::AofSlot,
    /// Where `BGREWRITEAOF` stands (see `cmd::bgrewriteaof`).
    pub aof_rewrite: crate::aof::RewriteStatus,
    /// The background job that runs (a `BGSAVE` or an AOF rewrite), and the ones waiting.
    pub background: Background,
    /// `INFO stats` counters.
    pub stats: Stats,
    /// `maxmemory` eviction: its candidate pool and `evicted_keys`.
    pub evictor: Evictor,
    /// `CLIENT PAUSE`: whose commands wait, and until when.
    pub(crate) pause: crate::pause::ClientPause,
    /// When the server started.
    pub started: Instant,
    /// 40 hex characters identifying this run (`INFO server`'s `run_id`).
    pub run_id: String,
    /// The bound TCP address, when listening.
    pub addr: parking_lot::Mutex<Option<SocketAddr>>,
    /// Whether the active expiry cycle runs (`DEBUG SET-ACTIVE-EXPIRE 0|1`, on by default);
    /// off, keys expire only when something reads them.
    pub active_expire: AtomicBool,
    /// Whether scripts may call commands flagged `noscript` (`DEBUG SET-DISABLE-DENY-SCRIPTS
    /// 0|1`, off by default), which Redis's own tests use to call `DEBUG` or `CLIENT LIST` from
    /// a script. The commands a script can never run inside latchkey stay refused (see
    /// [`crate::command::CommandSpec::script_refusal`]).
    pub script_deny_disabled: AtomicBool,
    /// Wake-ups and progress of the active expiry cycle (see [`crate::expire::caught_up`]).
    pub expiry: ExpiryState,
    replica: AtomicBool,
    shutdown_tx: watch::Sender<bool>,
    /// `true` while a [restart](crate::restart) reloads the keyspace: new connections wait.
    loading_tx: watch::Sender<bool>,
    /// Whether the `everysec` AOF flush task runs (started once, it serves any AOF).
    pub(crate) aof_flusher: AtomicBool,
    /// Which bytes of the AOF file are on disk rather than in the page cache: kept across
    /// restarts, as the kernel keeps its page cache when a process dies.
    pub(crate) aof_durability: parking_lot::Mutex<Option<Arc<crate::durability::Durability>>>,
}

impl Shared {
    /// Publishes `event` (of `class`, a [`crate::notify`] constant) on `key` of database
    /// `db`, if `notify-keyspace-events` asks for it: Redis's `notifyKeyspaceEvent`.
    /// Subscribers get it like any published message, bounded by the pub/sub output-buffer
    /// limit. With notifications off, as by default, this is one relaxed atomic load.
    pub(crate) fn keyspace_event(&self, class: u32, event: &str, key: &[u8], db: usize) {
        self.announce_expired();
        self.publish_event(class, event, key, db);
    }

    /// Publishes `event` for `key`, then `del` if the key no longer exists: a collection the
    /// command emptied (a pop, a removal) is deleted, and Redis tells of both.
    pub(crate) fn keyspace_event_then_del_if_gone(
        &self,
        class: u32,
        event: &str,
        key: &[u8],
        db: usize,
    ) {
        if !self.config.notify.wants(class | crate::notify::GENERIC) {
            return;
        }
        self.keyspace_event(class, event, key, db);
        if !self.keyspace.db(db).map().contains_key(key) {
            self.keyspace_event(crate::notify::GENERIC, "del", key, db);
        }
    }

    /// Sends the `expired` notifications of keys this thread's command found expired and the
    /// `new` ones of keys it created (see [`crate::db::take_noted_here`]), before any other
    /// notification of the command.
    pub(crate) fn announce_expired(&self) {
        let Some(noted) = crate::db::take_noted_here() else {
            return;
        };
        for (db, key, what) in noted {
            match what {
                crate::db::Noted::Expired => {
                    self.publish_event(crate::notify::EXPIRED, "expired", &key, db)
                }
                crate::db::Noted::Created => {
                    self.publish_event(crate::notify::NEW, "new", &key, db)
                }
            }
        }
    }

    fn publish_event(&self, class: u32, event: &str, key: &[u8], db: usize) {
        let notify = &self.config.notify;
        if !notify.wants(class) {
            return;
        }
        let flags = notify.get();
        let limits = || {
            self.config
                .limits
                .output_limit(crate::config::ClientClass::PubSub)
        };
        let now_ms = self.clock.now_ms();
        let event_bytes = bytes::Bytes::copy_from_slice(event.as_bytes());
        let key = bytes::Bytes::copy_from_slice(key);
        if flags & crate::notify::KEYSPACE != 0 {
            let mut channel = format!("__keyspace@{db}__:").into_bytes();
            channel.extend_from_slice(&key);
            let channel = bytes::Bytes::from(channel);
            self.pubsub
                .publish(PubSubKind::Channel, &channel, &event_bytes, limits, now_ms);
        }
        if flags & crate::notify::KEYEVENT != 0 {
            let channel = bytes::Bytes::from(format!("__keyevent@{db}__:{event}"));
            self.pubsub
                .publish(PubSubKind::Channel, &channel, &key, limits, now_ms);
        }
    }

    pub(crate) fn new(clock: Clock, scripting: Plugged) -> Shared {
        let pause = crate::pause::ClientPause::new(clock.clone());
        let (shutdown_tx, _) = watch::channel(false);
        let hex40 = || -> String {
            (0..40)
                .map(|_| char::from_digit(rand::random_range(0..16u32), 16).unwrap_or('0'))
                .collect()
        };
        let run_id = hex40();
        let config = Config::default();
        let replication = crate::replication::Replication::new(hex40());
        replication.set_limits(config.limits.clone());
        let keyspace = Keyspace::with_limits(config.limits.clone());
        let acl = crate::acl::Acl::default();
        let clients = Clients::new(acl.default_user().clone());
        let tracking = Arc::new(Tracking::new(
            keyspace.change_hook().armed(),
            clients.directory(),
            config.limits.clone(),
            clock.clone(),
            config.tracking_max_keys.clone(),
        ));
        keyspace.change_hook().plug(tracking.clone());
        keyspace.change_hook().plug_notify(config.notify.clone());
        Shared {
            keyspace,
            clock,
            config,
            gate: Gate::default(),
            clients,
            acl,
            pubsub: PubSub::default(),
            tracking,
            scripting,
            replication,
            aof: crate::aof::AofSlot::default(),
            aof_rewrite: crate::aof::RewriteStatus::default(),
            background: Background::default(),
            stats: Stats::default(),
            evictor: Evictor::default(),
            pause,
            started: Instant::now(),
            run_id,
            addr: parking_lot::Mutex::new(None),
            active_expire: AtomicBool::new(true),
            script_deny_disabled: AtomicBool::new(false),
            expiry: ExpiryState::default(),
            replica: AtomicBool::new(false),
            shutdown_tx,
            loading_tx: watch::channel(false).0,
            aof_flusher: AtomicBool::new(false),
            aof_durability: parking_lot::Mutex::new(None),
        }
    }

    /// `CONFIG SET name value` (and a parameter given at start): the parameter, and what
    /// follows from it outside the configuration (`requirepass` is the default user's
    /// password, as in Redis; `acl-pubsub-default` what new users start with).
    pub(crate) fn set_config(
        &self,
        name: &str,
        value: &str,
    ) -> Result<(), crate::config::ConfigError> {
        self.config.set(name, value)?;
        if name.eq_ignore_ascii_case("requirepass") {
            self.acl.set_default_password(value.as_bytes());
        } else if name.eq_ignore_ascii_case("acl-pubsub-default") {
            self.acl
                .set_pubsub_default(value.eq_ignore_ascii_case("allchannels"));
        }
        Ok(())
    }

    /// Whether this server is a replica (read-only, never expires keys itself).
    pub(crate) fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Acquire)
    }

    /// Makes this server a replica or a master again.
    pub(crate) fn set_replica(&self, replica: bool) {
        self.replica.store(replica, Ordering::Release);
    }

    /// Whether reads may delete expired keys (masters do; replicas wait for the master).
    pub(crate) fn lazy_expire_deletes(&self) -> bool {
        // During a `CLIENT PAUSE` an expired key reads as missing but stays: its `DEL`
        // would be a write, which the pause promises there are none of.
        !self.is_replica() && !self.pause.holds_expiry()
    }

    /// The body of `INFO replication`.
    pub(crate) fn replication_info(&self) -> String {
        let (to_write, max_lag) = self.config.min_replicas();
        let good = (to_write > 0 && max_lag > 0)
            .then(|| self.replication.good_replicas(max_lag) * u64::from(!self.is_replica()));
        self.replication.info(good)
    }

    /// Asks the server to shut down: the listener stops and every connection closes.
    pub(crate) fn request_shutdown(&self) {
        self.shutdown_tx.send_replace(true);
        self.clients.kill_all();
    }

    /// Marks the keyspace as being reloaded (a [restart](crate::restart)), or ready again.
    pub(crate) fn set_loading(&self, loading: bool) {
        self.loading_tx.send_replace(loading);
    }

    /// Resolves once the keyspace is not being reloaded (at once, almost always).
    pub(crate) async fn wait_loaded(&self) {
        let mut rx = self.loading_tx.subscribe();
        let _ = rx.wait_for(|loading| !*loading).await;
    }

    /// Whether a [restart](crate::restart) is reloading the keyspace.
    pub(crate) fn is_loading(&self) -> bool {
        *self.loading_tx.borrow()
    }

    /// A receiver that sees `true` once shutdown was requested.
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }
}

/// A job that writes a file of the whole keyspace in the background: what Redis forks a
/// child process for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Job {
    /// A snapshot (`BGSAVE`, a save point).
    Save = 1,
    /// An AOF rewrite (`BGREWRITEAOF`, `auto-aof-rewrite-percentage`).
    AofRewrite = 2,
}

/// Which background job runs. As Redis runs at most one child process, at most one job runs
/// at a time: a `BGSAVE` asked for during a rewrite (with `SCHEDULE`), or a rewrite asked for
/// during a `BGSAVE`, waits for it, and the persistence cron (`cmd::save_points`) starts it.
#[derive(Debug, Default)]
pub(crate) struct Background {
    running: std::sync::atomic::AtomicU8,
    /// A `BGSAVE` waits for the running job or for `EXEC` to end (Redis's
    /// `rdb_bgsave_scheduled`).
    pub save_scheduled: AtomicBool,
    /// Wakes the persistence cron now rather than at its next tick (a job ended, or one was
    /// scheduled).
    pub kick: Notify,
    /// The number of the latest background save; a shutdown bumps it to give the running
    /// save up (its thread then renames nothing).
    save_job: AtomicU64,
    /// Set while a shutdown prepares (and for good once it is done): no background save
    /// renames its file from then on, so the shutdown's own snapshot is the last word.
    closing: AtomicBool,
    /// Held while a snapshot file is renamed into place by a background save, and while a
    /// shutdown writes its own: so the shutdown's newer file is never replaced by an older one.
    pub rename_lock: parking_lot::Mutex<()>,
}

impl Background {
    /// Claims the slot for `job`; the job already running, if another one is.
    pub(crate) fn try_start(&self, job: Job) -> Result<(), Job> {
        self.running
            .compare_exchange(0, job as u8, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|running| Self::decode(running).unwrap_or(job))
    }

    /// Frees the slot `job` held, and wakes the cron for whatever waits.
    pub(crate) fn finish(&self, job: Job) {
        let _ = self
            .running
            .compare_exchange(job as u8, 0, Ordering::AcqRel, Ordering::Acquire);
        self.kick.notify_one();
    }

    /// Numbers a background save that starts now.
    pub(crate) fn save_job(&self) -> u64 {
        self.save_job.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Whether background save `job` is still wanted (not given up, no shutdown under way).
    pub(crate) fn save_is_current(&self, job: u64) -> bool {
        !self.closing.load(Ordering::Acquire) && self.save_job.load(Ordering::Acquire) == job
    }

    /// A shutdown begins: the running background save, if any, stops writing and renames
    /// nothing, and none renames its file until [`reopen`](Background::reopen).
    pub(crate) fn close(&self) {
        self.closing.store(true, Ordering::Release);
        self.save_job.fetch_add(1, Ordering::AcqRel);
    }

    /// The shutdown failed and the server goes on: background saves may finish again.
    pub(crate) fn reopen(&self) {
        self.closing.store(false, Ordering::Release);
    }

    /// The job running now, if any.
    pub(crate) fn running(&self) -> Option<Job> {
        Self::decode(self.running.load(Ordering::Acquire))
    }

    fn decode(v: u8) -> Option<Job> {
        match v {
            1 => Some(Job::Save),
            2 => Some(Job::AofRewrite),
            _ => None,
        }
    }
}

/// Eviction state kept across calls: the candidate pool and the counters.
#[derive(Debug, Default)]
pub(crate) struct Evictor {
    pub(crate) pool: parking_lot::Mutex<Vec<Candidate>>,
    /// Keys evicted since start (`INFO stats`'s `evicted_keys`).
    pub evicted_keys: AtomicU64,
    /// The database the random policies take their next key from.
    pub(crate) next_db: AtomicUsize,
    /// Set while a call evicts, so that concurrent commands do not pile onto the same work.
    pub(crate) busy: AtomicBool,
    /// The highest `used_memory` seen (when `INFO` or a command under `maxmemory` looked).
    pub(crate) peak: AtomicUsize,
}

impl Evictor {
    /// Records a reading of used memory; returns the peak so far.
    pub(crate) fn note_peak(&self, used: usize) -> usize {
        self.peak.fetch_max(used, Ordering::Relaxed).max(used)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub(crate) db: usize,
    pub(crate) key: bytes::Bytes,
    pub(crate) score: u64,
}

/// Wake-ups and progress of the active expiry cycle, shared between the cycle's task and
/// whoever waits for it to catch up.
#[derive(Debug)]
pub(crate) struct ExpiryState {
    /// Wakes the cycle's task now instead of at its next tick.
    pub(crate) kick: Notify,
    /// Counts the passes completed; bumped at the end of every pass.
    pub(crate) passes: watch::Sender<u64>,
}

impl Default for ExpiryState {
    fn default() -> Self {
        ExpiryState {
            kick: Notify::new(),
            passes: watch::channel(0).0,
        }
    }
}

/// Releases everything a departing client held: subscriptions, watches, its registry entry.
pub(crate) fn cleanup_client(shared: &Shared, client: &mut Client) {
    shared.pubsub.remove_client(client);
    shared.tracking.disable(client.handle.id);
    shared.replication.remove_replica(client.handle.id);
    client.unwatch_all(&shared.keyspace);
    shared.clients.unregister(client.handle.id);
}

/// A feature's state that [`Shared`] holds without naming its type, so that this ground
/// floor imports no feature: the scripting engine, whose scripts run commands and so sits
/// above the dispatcher. The server plugs it in when it starts; the feature reads it back,
/// typed, through its own accessor (`Shared::scripting`, in [`crate::scripting`]).
pub(crate) struct Plugged(Box<dyn Any + Send + Sync>);

impl Plugged {
    /// Holds `value`.
    pub(crate) fn new<T: Any + Send + Sync>(value: T) -> Plugged {
        Plugged(Box::new(value))
    }

    /// The value, as the type it was plugged in with.
    pub(crate) fn get<T: Any>(&self) -> &T {
        self.0
            .downcast_ref()
            .expect("a plugged feature is read as the type it was plugged in with")
    }
}

impl std::fmt::Debug for Plugged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Plugged")
    }
}
