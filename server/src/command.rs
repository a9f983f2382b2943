//! What a command is: its [`CommandSpec`] (name, arity, flags, keys, handler), the [`Ctx`] a
//! handler runs with, and the registry that finds a spec by name ([`lookup`]). Running one
//! (the gate, propagation) is [`crate::dispatch`].
//!
//! The registry is filled when a server starts ([`install`], with the table of
//! [`crate::cmd`]): the command families sit above this module (some of them run commands
//! themselves: `EVAL`, `EXEC`, the replication link), so this module names none of them.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::client::Client;
use crate::db::{Db, Entry, Update};
use crate::frame::Frame;
use crate::state::Shared;

/// The command changes data (refused on a read-only replica, propagated to replicas).
pub(crate) const WRITE: u32 = 1 << 0;
/// The command only reads data.
pub(crate) const READONLY: u32 = 1 << 1;
/// The command may allocate memory (`denyoom`).
pub(crate) const DENYOOM: u32 = 1 << 2;
/// The command is administrative.
pub(crate) const ADMIN: u32 = 1 << 3;
/// The command is pub/sub related.
pub(crate) const PUBSUB: u32 = 1 << 4;
/// Scripts may not call the command.
pub(crate) const NOSCRIPT: u32 = 1 << 5;
/// The command may block the client.
pub(crate) const BLOCKING: u32 = 1 << 6;
/// O(1) or O(log N) command.
pub(crate) const FAST: u32 = 1 << 7;
/// Runs while the keyspace is still loading.
pub(crate) const LOADING: u32 = 1 << 8;
/// Runs on a replica whose link to the master is down.
pub(crate) const STALE: u32 = 1 << 9;
/// Runs even while a script is busy, without taking the gate (e.g. `SCRIPT KILL`).
pub(crate) const ALLOW_BUSY: u32 = 1 << 10;
/// Needs the keyspace to itself: no other command may run concurrently.
pub(crate) const EXCLUSIVE: u32 = 1 << 11;
/// Runs at once inside `MULTI` instead of being queued (`EXEC`, `DISCARD`, `WATCH`, ...).
pub(crate) const NO_QUEUE: u32 = 1 << 12;
/// Allowed in RESP2 subscribed mode.
pub(crate) const SUBSCRIBED_OK: u32 = 1 << 13;
/// Not allowed inside `MULTI`.
pub(crate) const NO_MULTI: u32 = 1 << 14;
/// Runs exclusively when given more than one key (`DEL`, `MGET`, `EXISTS`, ...): on one key
/// it is a single atomic step anyway, but over several it must be one step too, so that no
/// client sees some of the keys before and some after another client's writes.
pub(crate) const MULTI_KEY: u32 = 1 << 15;
/// May send something down the replication stream though it is no write (Redis's
/// `may-replicate`: scripts, `PUBLISH`); a `CLIENT PAUSE WRITE` holds it like a write.
pub(crate) const MAY_REPLICATE: u32 = 1 << 16;
/// Walks the whole keyspace (`KEYS`, `SCAN`, `FLUSHALL`, a full sync's snapshot): run off its
/// async worker when the keyspace is large (see [`crate::walk`]).
pub(crate) const WALKS_KEYSPACE: u32 = 1 << 17;
/// Walks the collection at its key(s) (`LRANGE`, `HGETALL`, `ZRANGE`, ...): run off its async
/// worker when that collection is large (see [`crate::walk`]).
pub(crate) const WALKS_VALUE: u32 = 1 << 18;

// Flags that change nothing here but what `COMMAND INFO` says: Redis's table declares them,
// and clients read them (a cluster client asks which commands have `movablekeys`).

/// Where the keys are depends on the arguments (`EVAL`'s numkeys, `LMPOP`'s count).
pub(crate) const MOVABLEKEYS: u32 = 1 << 19;
/// May be called with no key at all though it takes keys (`EVAL ... 0`).
pub(crate) const NO_MANDATORY_KEYS: u32 = 1 << 20;
/// Not shown to `MONITOR` as such (scripts show their calls instead).
pub(crate) const SKIP_MONITOR: u32 = 1 << 21;
/// Not logged in the slow log as such (`EXEC`: its commands are).
pub(crate) const SKIP_SLOWLOG: u32 = 1 << 22;
/// Allowed before authentication (`HELLO`, `QUIT`, `RESET`).
pub(crate) const NO_AUTH: u32 = 1 << 23;
/// Not allowed while a replica loads its master's snapshot asynchronously.
pub(crate) const NO_ASYNC_LOADING: u32 = 1 << 24;
/// A container of subcommands (`CLIENT`, `CONFIG`, `SCRIPT`, ...): Redis's table gives the
/// container no flags and no keys of its own (each subcommand has them), so `COMMAND INFO`
/// shows none, whatever the flags here say about how its subcommands run.
pub(crate) const CONTAINER: u32 = 1 << 25;
/// Blocks (counted in `blocked_clients`) though Redis's table does not flag it `blocking`
/// (`WAIT`).
pub(crate) const BLOCKS_UNLISTED: u32 = 1 << 26;

/// A read that may change its key and record the change in the replication stream and the
/// AOF (`PFCOUNT` stores the count it computed in the value, as Redis does): it takes the
/// stream-order lock as a write does (see `Shared::order_guard`), so that its record keeps
/// the keyspace's order. Not shown by `COMMAND INFO`.
pub(crate) const MAY_RECORD: u32 = 1 << 27;
/// A write whose handler keeps none of its arguments' buffers: what it stores it copies
/// (into a list's packed chunk, a sorted-set member's own allocation, an inline string, or
/// through [`crate::memory::detached`]). The dispatcher then skips the copy it otherwise
/// gives a `DENYOOM` write's arguments ([`crate::memory::detach_args`]), which such a
/// handler would copy a second time and throw the first away (an allocation and a free an
/// argument). Not shown by `COMMAND INFO`.
pub(crate) const COPIES_ARGS: u32 = 1 << 28;

/// The flags of the writes that add the elements they are given to a collection (`LPUSH`,
/// `SADD`, `HSET`, `ZADD`, ...): may use memory, fast, and each copies what it stores itself
/// ([`COPIES_ARGS`]).
pub(crate) const ADDS_ELEMENTS: u32 = WRITE | DENYOOM | FAST | COPIES_ARGS;

/// How a command runs.
pub(crate) type Handler = fn(&mut Ctx<'_>, &[Bytes]) -> Frame;

/// A future a blocking command waits on before its reply is known.
pub(crate) type Blocked = Pin<Box<dyn Future<Output = Frame> + Send + 'static>>;

/// One entry of the command table.
#[derive(Clone, Copy)]
pub(crate) struct CommandSpec {
    /// Lowercase name.
    pub name: &'static str,
    /// Redis arity: `N` means exactly N arguments including the name, `-N` at least N.
    pub arity: i32,
    /// Bit set of the flags above.
    pub flags: u32,
    /// Index of the first key argument (0 when the command has no keys).
    pub first_key: i32,
    /// Index of the last key argument (-1 means the last argument).
    pub last_key: i32,
    /// Step between key arguments.
    pub step: i32,
    /// The function that runs it.
    pub handler: Handler,
    /// For a command whose flags depend on its arguments (`EVAL` of a script that declares
    /// its flags, `FCALL` of a function): given the arguments and the command's own flags,
    /// the flags for these arguments, `None` to keep [`flags`](CommandSpec::flags). Read before the checks that flags decide (memory,
    /// read-only replica, `min-replicas-to-write`, `CLIENT PAUSE WRITE`).
    pub flags_of: Option<FlagsOf>,
    /// For a command whose keys follow a count (Redis's `movablekeys`: `ZUNION numkeys
    /// key...`, `ZUNIONSTORE dst numkeys key...`): given the arguments, the positions of its
    /// keys, which the fixed `first_key`/`last_key`/`step` cannot say. Read by
    /// [`CommandSpec::keys_in`].
    pub keys_of: Option<KeysOf>,
}

/// See [`CommandSpec::flags_of`].
pub(crate) type FlagsOf = fn(&Shared, &[Bytes], u32) -> Option<u32>;

/// See [`CommandSpec::keys_of`].
pub(crate) type KeysOf = fn(&[Bytes]) -> Vec<usize>;

/// The positions of the `n` keys that follow a count at `args[at]` (`numkeys key...`), none
/// when the count is not a positive number or names more keys than there are arguments (the
/// command then refuses its arguments anyway). The building block of the
/// [`CommandSpec::keys_of`] functions.
pub(crate) fn counted_keys(args: &[Bytes], at: usize) -> Vec<usize> {
    let Some(n) = args
        .get(at)
        .and_then(|a| crate::codec::parse_int(a))
        .filter(|n| *n > 0)
    else {
        return Vec::new();
    };
    let first = at + 1;
    if n as u64 > args.len().saturating_sub(first) as u64 {
        return Vec::new();
    }
    (first..first + n as usize).collect()
}

impl std::fmt::Debug for CommandSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandSpec")
            .field("name", &self.name)
            .field("arity", &self.arity)
            .finish()
    }
}

impl CommandSpec {
    /// Why a script may not run `args` (this spec's command), as Redis 7.0's `scriptCall`
    /// refuses it, or `None` when it may. A container's subcommand is judged on its own, as
    /// Redis judges it: an unknown one is an unknown command, a wrong count of arguments is
    /// the subcommand's, and a container refused in scripts (`CONFIG`, `LATENCY`, `ACL`,
    /// `CLIENT`, `FUNCTION`, `SCRIPT`) still lets a script ask for its `HELP`, the one
    /// subcommand Redis 7.0.15 does not flag `noscript`.
    ///
    /// `deny_disabled` is `DEBUG SET-DISABLE-DENY-SCRIPTS 1`: the `noscript` flag is then not
    /// judged, as in Redis, except for the commands that cannot run inside a script here at
    /// all (another script, a transaction, a subscription, a wait, a replication handshake):
    /// Redis's own tests never call those from a script, and latchkey refuses them still.
    pub(crate) fn script_refusal(
        &self,
        args: &[Bytes],
        deny_disabled: bool,
    ) -> Option<&'static str> {
        use crate::acl::commands as table;
        if self.has(CONTAINER) && args.len() >= 2 {
            if let Some(parent) = table::lookup(self.name.as_bytes()) {
                if table::subcommands(parent).next().is_some() {
                    let Some(id) = table::find(args) else {
                        return Some("ERR Unknown Redis command called from script");
                    };
                    if !table::arity_ok(id, args) {
                        return Some("ERR Wrong number of args calling Redis command from script");
                    }
                    if self.has(NOSCRIPT) && args[1].eq_ignore_ascii_case(b"help") {
                        return None;
                    }
                }
            }
        }
        let refused = self.has(NOSCRIPT) && (!deny_disabled || self.never_in_scripts());
        refused.then_some("ERR This Redis command is not allowed from script")
    }

    /// The `noscript` commands a script may not run even with the deny check off: each
    /// would reenter the script engine, the transaction or the connection's own state.
    fn never_in_scripts(&self) -> bool {
        const NEVER: &[&str] = &[
            "eval",
            "evalsha",
            "eval_ro",
            "evalsha_ro",
            "fcall",
            "fcall_ro",
            "script",
            "function",
            "multi",
            "exec",
            "discard",
            "watch",
            "unwatch",
            "subscribe",
            "unsubscribe",
            "psubscribe",
            "punsubscribe",
            "ssubscribe",
            "sunsubscribe",
            "reset",
            "hello",
            "auth",
            "monitor",
            "sync",
            "psync",
            "replconf",
            "replicaof",
            "slaveof",
            "failover",
            "shutdown",
            "wait",
            "waitaof",
            "quit",
            "blpop",
            "brpop",
            "brpoplpush",
            "blmove",
            "blmpop",
            "bzpopmin",
            "bzpopmax",
            "bzmpop",
            "xread",
            "xreadgroup",
        ];
        NEVER.contains(&self.name)
    }

    /// Whether the spec has flag `f`.
    pub(crate) fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// Whether `argc` arguments satisfy the arity.
    pub(crate) fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        (a > 0 && argc as i32 == a) || (a < 0 && argc as i32 >= -a)
    }

    /// The flag names `COMMAND INFO` shows, in the order Redis 7.0 lists them.
    pub(crate) fn flag_names(&self) -> Vec<&'static str> {
        if self.has(CONTAINER) {
            return Vec::new();
        }
        let names = [
            (WRITE, "write"),
            (READONLY, "readonly"),
            (DENYOOM, "denyoom"),
            (ADMIN, "admin"),
            (PUBSUB, "pubsub"),
            (NOSCRIPT, "noscript"),
            (BLOCKING, "blocking"),
            (LOADING, "loading"),
            (STALE, "stale"),
            (SKIP_MONITOR, "skip_monitor"),
            (SKIP_SLOWLOG, "skip_slowlog"),
            (FAST, "fast"),
            (NO_AUTH, "no_auth"),
            (NO_MANDATORY_KEYS, "no_mandatory_keys"),
            (NO_ASYNC_LOADING, "no_async_loading"),
            (NO_MULTI, "no_multi"),
            (ALLOW_BUSY, "allow_busy"),
        ];
        let mut out: Vec<&'static str> = names
            .iter()
            .filter(|(f, _)| self.has(*f))
            .filter(|(f, _)| *f != BLOCKING || !self.has(BLOCKS_UNLISTED))
            .map(|(_, n)| *n)
            .collect();
        // Redis lists it last, after the flags of the table.
        if self.keys_of.is_some() || self.has(MOVABLEKEYS) {
            out.push("movablekeys");
        }
        out
    }

    /// Positions of the key arguments in `args`: the ones [`CommandSpec::keys_of`] finds
    /// for a command whose keys follow a count, else the fixed range
    /// ([`CommandSpec::key_positions`]).
    pub(crate) fn keys_in(&self, args: &[Bytes]) -> Vec<usize> {
        match self.keys_of {
            Some(f) => f(args),
            None => self.key_positions(args.len()),
        }
    }

    /// Positions of the key arguments in `args`.
    pub(crate) fn key_positions(&self, argc: usize) -> Vec<usize> {
        if self.first_key <= 0 || argc == 0 {
            return Vec::new();
        }
        let last = if self.last_key < 0 {
            argc as i32 + self.last_key
        } else {
            self.last_key
        };
        let step = self.step.max(1) as usize;
        (self.first_key as usize..=last.max(0) as usize)
            .step_by(step)
            .filter(|i| *i < argc)
            .collect()
    }
}

/// Builds a [`CommandSpec`] tersely: `spec("get", 2, READONLY | FAST, 1, 1, 1, get)`.
pub(crate) const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    first_key: i32,
    last_key: i32,
    step: i32,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key,
        last_key,
        step,
        handler,
        flags_of: None,
        keys_of: None,
    }
}

impl CommandSpec {
    /// This command, with flags that depend on its arguments (see
    /// [`CommandSpec::flags_of`]).
    pub(crate) const fn with_flags_of(self, f: FlagsOf) -> CommandSpec {
        CommandSpec {
            flags_of: Some(f),
            ..self
        }
    }

    /// This command, with keys that follow a count (see [`CommandSpec::keys_of`]).
    pub(crate) const fn with_keys_of(self, f: KeysOf) -> CommandSpec {
        CommandSpec {
            keys_of: Some(f),
            ..self
        }
    }

    /// This command as it runs with these arguments: its flags adjusted by
    /// [`CommandSpec::flags_of`], or itself.
    pub(crate) fn for_args(&self, shared: &Shared, args: &[Bytes]) -> Option<CommandSpec> {
        let flags = (self.flags_of?)(shared, args, self.flags)?;
        Some(CommandSpec { flags, ..*self })
    }
}

/// Everything a handler may use while it runs.
pub(crate) struct Ctx<'a> {
    /// Server-wide state.
    pub shared: &'a Arc<Shared>,
    /// The calling client.
    pub client: &'a mut Client,
    /// The time this command (or the whole script / transaction it is part of) runs at, in
    /// Unix milliseconds. Frozen so that a key cannot expire half-way through a script.
    pub now_ms: u64,
    /// Running inside `EXEC`.
    pub in_exec: bool,
    /// Running inside a script (`redis.call`).
    pub in_script: bool,
    /// Number of changes made (Redis's `server.dirty`): replication propagates a command that
    /// changed something.
    pub dirty: u64,
    pub(crate) blocked: Option<Blocked>,
    /// What the command propagates instead of itself, when it is not deterministic (`SPOP`
    /// becomes the `SREM` of what it popped): set with [`Ctx::propagate_as`].
    pub(crate) rewritten: Option<Vec<Vec<Bytes>>>,
    /// What the last [`update_key`](Ctx::update_key) did to its key: a command reads it to
    /// publish the keyspace notification of what happened.
    pub(crate) last_update: Written,
}

/// What an [`Update`] did, once applied (see [`Ctx::last_update`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// Nothing changed.
    Nothing,
    /// A value was stored.
    Put,
    /// The key was deleted.
    Removed,
    /// The key's deadline changed.
    Expire,
}

impl<'a> Ctx<'a> {
    /// A context for one command of `client`, at a time already read from the clock.
    pub(crate) fn at(shared: &'a Arc<Shared>, client: &'a mut Client, now_ms: u64) -> Ctx<'a> {
        Ctx {
            shared,
            client,
            now_ms,
            in_exec: false,
            in_script: false,
            dirty: 0,
            blocked: None,
            rewritten: None,
            last_update: Written::Nothing,
        }
    }

    /// The client's selected database.
    pub(crate) fn db(&self) -> &'a Db {
        let shared: &'a Arc<Shared> = self.shared;
        shared.keyspace.db(self.client.db)
    }

    /// Whether reads delete expired keys (false on a replica, which waits for the master's
    /// `DEL`).
    pub(crate) fn lazy_delete(&self) -> bool {
        self.shared.lazy_expire_deletes()
    }

    /// Whether the command may block (it may not inside `MULTI` or a script, where blocking
    /// commands answer at once as if their timeout had passed).
    pub(crate) fn may_block(&self) -> bool {
        !self.in_exec && !self.in_script && !self.client.deny_blocking
    }

    /// Makes the command wait for `fut`, whose output becomes the reply. The handler's own
    /// return value is then ignored.
    pub(crate) fn block(&mut self, fut: impl Future<Output = Frame> + Send + 'static) {
        self.blocked = Some(Box::pin(fut));
    }

    /// Makes the replication stream and the AOF carry `commands` instead of this command (as
    /// Redis's `rewriteClientCommandVector`/`alsoPropagate` do for `SPOP`, whose effect the
    /// command line does not determine).
    pub(crate) fn propagate_as(&mut self, commands: Vec<Vec<Bytes>>) {
        self.rewritten = Some(commands);
    }

    /// Records that a write changed something.
    pub(crate) fn changed(&mut self) {
        self.dirty += 1;
    }

    /// Reads and writes one key of the current database as a single step (see
    /// [`Db::update`]): `decide` sees the live entry and returns what to do with it and the
    /// command's result. Counts the command as a write when it changed the key. Every
    /// read-modify-write of one key goes through here, since commands run in parallel: `SET NX`
    /// read then written separately would let two clients take one lock.
    pub(crate) fn update_key<R>(
        &mut self,
        key: &Bytes,
        decide: impl FnOnce(Option<&Entry>) -> (Update, R),
    ) -> R {
        let (now, lazy) = (self.now_ms, self.lazy_delete());
        let (written, r) = self.db().update(key, now, lazy, |current| {
            let (update, r) = decide(current);
            let written = match update {
                Update::Keep => Written::Nothing,
                Update::Put(_) => Written::Put,
                Update::Remove => Written::Removed,
                Update::Expire(_) => Written::Expire,
            };
            (update, (written, r))
        });
        self.last_update = written;
        if written != Written::Nothing {
            self.changed();
        }
        r
    }

    /// Publishes `event` for `key` when the last [`update_key`](Ctx::update_key) stored a
    /// value, and `del` when it deleted the key: the notification of most one-key writes.
    pub(crate) fn notify_update(&self, class: u32, event: &str, key: &[u8]) {
        match self.last_update {
            Written::Put => self.notify(class, event, key),
            Written::Removed => self.notify(crate::notify::GENERIC, "del", key),
            Written::Expire | Written::Nothing => {}
        }
    }

    /// Records that `key` was changed in place (through `get_mut`): tells transactions that
    /// `WATCH` it and counts the change. `Db::insert`/`Db::remove` signal watchers themselves;
    /// calling this after them as well is harmless.
    pub(crate) fn modified(&mut self, key: &[u8]) {
        self.db().signal_modified(key);
        self.dirty += 1;
    }

    /// Publishes the keyspace notification `event` (of `class`, a [`crate::notify`]
    /// constant) for `key` of the current database, with Redis's event name for what the
    /// command did (`incrby` for `INCR`, `del` when a pop emptied a list): see
    /// [`Shared::keyspace_event`].
    pub(crate) fn notify(&self, class: u32, event: &str, key: &[u8]) {
        self.shared
            .keyspace_event(class, event, key, self.client.db);
    }

    /// [`notify`](Ctx::notify), then `del` if the command emptied (and so deleted) the key:
    /// see [`Shared::keyspace_event_then_del_if_gone`].
    pub(crate) fn notify_then_del_if_gone(&self, class: u32, event: &str, key: &[u8]) {
        self.shared
            .keyspace_event_then_del_if_gone(class, event, key, self.client.db);
    }
}

impl Shared {
    /// Checks that apply before a command runs (read-only replica, not enough good
    /// replicas). `Some(error)` refuses.
    ///
    /// The link to our master and the AOF being loaded (`is_replication_link`) are obeyed,
    /// never refused, as Redis obeys them: what they carry was already accepted once.
    pub(crate) fn precheck(&self, client: &Client, spec: &CommandSpec) -> Option<Frame> {
        if spec.has(WRITE) && !client.is_replication_link {
            if self.is_replica() {
                return Some(Frame::error(
                    "READONLY You can't write against a read only replica.",
                ));
            }
            if !self.enough_good_replicas() {
                return Some(Frame::error(NOREPLICAS));
            }
        }
        None
    }

    /// Whether `min-replicas-to-write` lets writes through now: the rule is off, this server
    /// is a replica, or enough replicas acknowledged within `min-replicas-max-lag` seconds.
    /// This is what keeps a master cut off from its replicas from taking writes (a lock
    /// among them) that a failover would lose — for as long as the lag allows.
    pub(crate) fn enough_good_replicas(&self) -> bool {
        let (to_write, max_lag) = self.config.min_replicas();
        if to_write == 0 || max_lag == 0 || self.is_replica() {
            return true;
        }
        self.replication.good_replicas(max_lag) >= to_write
    }
}

/// Redis's refusal of a write when `min-replicas-to-write` is not met.
pub(crate) const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// Redis's reply to a command name it does not know.
pub(crate) fn unknown_command_error(args: &[Bytes]) -> Frame {
    let name = cstr(&args[0]);
    let name: String = name.chars().take(128).collect();
    let mut rest = String::new();
    for a in &args[1..] {
        if rest.len() >= 128 {
            break;
        }
        let room = 128 - rest.len();
        let a = cstr(a);
        let a: String = truncate_bytes(&a, room);
        rest.push('\'');
        rest.push_str(&a);
        rest.push_str("' ");
    }
    Frame::error(format!(
        "ERR unknown command '{name}', with args beginning with: {rest}"
    ))
}

/// Text up to the first NUL byte, as C's `%s` would print it.
fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn truncate_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Redis's wrong-arity reply for `name` (use `parent|sub` for subcommands).
pub(crate) fn arity_error(name: &str) -> Frame {
    Frame::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// Specs by lowercase name, as bytes: a request's name is looked up without a UTF-8 check.
type Table = std::collections::HashMap<&'static [u8], &'static CommandSpec, ahash::RandomState>;

static TABLE: OnceLock<Table> = OnceLock::new();

/// How to turn the append-only file off and on again, which `CONFIG SET appendonly` owns
/// (in the command families, above this floor) and a replica's full sync needs (below them):
/// the families hand it over with the table when a server starts ([`install_aof_switch`]).
#[derive(Clone, Copy)]
pub(crate) struct AofSwitch {
    /// Fsyncs and closes the AOF, giving up a running rewrite.
    pub off: fn(&Shared),
    /// Turns the AOF on from the keyspace as it is now: a rewrite, started or scheduled
    /// (`in_exec` false). The caller holds the execution gate exclusively.
    pub on: fn(&Arc<Shared>, bool) -> Result<(), &'static str>,
}

static AOF_SWITCH: OnceLock<AofSwitch> = OnceLock::new();

/// Registers the [`AofSwitch`] (once), with the table.
pub(crate) fn install_aof_switch(switch: AofSwitch) {
    AOF_SWITCH.get_or_init(|| switch);
}

/// The [`AofSwitch`], once a server started.
pub(crate) fn aof_switch() -> Option<AofSwitch> {
    AOF_SWITCH.get().copied()
}

/// Registers the command table (once; later calls change nothing): every spec of `tables`,
/// by name. Called when a server starts, before any command runs.
pub(crate) fn install(tables: impl FnOnce() -> Vec<&'static [CommandSpec]>) {
    TABLE.get_or_init(|| {
        let mut m = Table::default();
        for t in tables() {
            for s in t {
                let prev = m.insert(s.name.as_bytes(), s);
                assert!(prev.is_none(), "command {} registered twice", s.name);
            }
        }
        m
    });
}

/// Every command's name, ordered by the address of its text: [`stat_key`] finds a spec's
/// place for `INFO commandstats` by a binary search on the address of its name, which a
/// spec copied for its arguments (`CommandSpec::for_args`) keeps.
static STAT_NAMES: OnceLock<Vec<(usize, &'static str)>> = OnceLock::new();

fn stat_names() -> &'static [(usize, &'static str)] {
    STAT_NAMES.get_or_init(|| {
        let mut names: Vec<(usize, &'static str)> = table()
            .values()
            .map(|s| (s.name.as_ptr() as usize, s.name))
            .collect();
        names.sort_unstable();
        assert!(names.len() <= crate::cmdstats::MAX_COMMANDS);
        names
    })
}

/// Where a command with these arguments counts in `INFO commandstats`: its own line, or,
/// for a container (`CONFIG GET`), its subcommand's (see [`crate::cmdstats`]). `None` for a
/// subcommand name too long to be one.
pub(crate) fn stat_key(spec: &CommandSpec, args: &[Bytes]) -> Option<crate::cmdstats::StatKey> {
    use crate::cmdstats::StatKey;
    if spec.has(CONTAINER) && args.len() >= 2 {
        let sub = &args[1];
        if sub.len() > 32 {
            return None;
        }
        let sub = String::from_utf8_lossy(sub).to_ascii_lowercase();
        return Some(StatKey::Subcommand(format!("{}|{sub}", spec.name)));
    }
    let at = spec.name.as_ptr() as usize;
    stat_names()
        .binary_search_by_key(&at, |(p, _)| *p)
        .ok()
        .map(StatKey::Command)
}

/// The name of the command at `index` of [`stat_key`]'s order.
pub(crate) fn stat_name(index: usize) -> Option<&'static str> {
    stat_names().get(index).map(|(_, n)| *n)
}

fn table() -> &'static Table {
    TABLE
        .get()
        .expect("the command table is installed when a server starts")
}

/// Looks a command up by name, case-insensitively.
pub(crate) fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.len() > 32 {
        return None;
    }
    let mut buf = [0u8; 32];
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    table().get(&*lower).copied()
}
