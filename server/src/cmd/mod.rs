//! Commands: the table of every command the server knows, and the dispatcher that runs one.
//!
//! Each command family lives in its own module and exports a `COMMANDS` table of
//! [`CommandSpec`]s. A spec names the command, its arity (Redis's convention: `N` exactly,
//! `-N` at least), its flags, where its keys are, and the handler that runs it.
//!
//! A handler is a plain function from a [`Ctx`] and the arguments (the command name first) to a
//! reply [`Frame`]. It runs while the dispatcher holds the execution [gate](crate::gate): shared
//! for ordinary commands, exclusive for those flagged [`EXCLUSIVE`]. A handler that must wait
//! (`BLPOP`, `WAIT`, `DEBUG SLEEP`) hands a future to [`Ctx::block`] instead of waiting itself.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::client::Client;
use crate::db::{Db, Entry, Update};
use crate::frame::Frame;
use crate::pause::PauseMode;
use crate::server::Shared;

pub mod connection;
pub mod hashes;
pub mod keys;
pub mod lists;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod strings;
pub mod transactions;
pub mod util;
pub mod zsets;

/// The command changes data (refused on a read-only replica, propagated to replicas).
pub const WRITE: u32 = 1 << 0;
/// The command only reads data.
pub const READONLY: u32 = 1 << 1;
/// The command may allocate memory (`denyoom`).
pub const DENYOOM: u32 = 1 << 2;
/// The command is administrative.
pub const ADMIN: u32 = 1 << 3;
/// The command is pub/sub related.
pub const PUBSUB: u32 = 1 << 4;
/// Scripts may not call the command.
pub const NOSCRIPT: u32 = 1 << 5;
/// The command may block the client.
pub const BLOCKING: u32 = 1 << 6;
/// O(1) or O(log N) command.
pub const FAST: u32 = 1 << 7;
/// Runs while the keyspace is still loading.
pub const LOADING: u32 = 1 << 8;
/// Runs on a replica whose link to the master is down.
pub const STALE: u32 = 1 << 9;
/// Runs even while a script is busy, without taking the gate (e.g. `SCRIPT KILL`).
pub const ALLOW_BUSY: u32 = 1 << 10;
/// Needs the keyspace to itself: no other command may run concurrently.
pub const EXCLUSIVE: u32 = 1 << 11;
/// Runs at once inside `MULTI` instead of being queued (`EXEC`, `DISCARD`, `WATCH`, ...).
pub const NO_QUEUE: u32 = 1 << 12;
/// Allowed in RESP2 subscribed mode.
pub const SUBSCRIBED_OK: u32 = 1 << 13;
/// Not allowed inside `MULTI`.
pub const NO_MULTI: u32 = 1 << 14;
/// Runs exclusively when given more than one key (`DEL`, `MGET`, `EXISTS`, ...): on one key
/// it is a single atomic step anyway, but over several it must be one step too, so that no
/// client sees some of the keys before and some after another client's writes.
pub const MULTI_KEY: u32 = 1 << 15;

/// How a command runs.
pub type Handler = fn(&mut Ctx<'_>, &[Bytes]) -> Frame;

/// A future a blocking command waits on before its reply is known.
pub type Blocked = Pin<Box<dyn Future<Output = Frame> + Send + 'static>>;

/// One entry of the command table.
#[derive(Clone, Copy)]
pub struct CommandSpec {
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
    /// Whether the spec has flag `f`.
    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// Whether `argc` arguments satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        (a > 0 && argc as i32 == a) || (a < 0 && argc as i32 >= -a)
    }

    /// The flag names `COMMAND INFO` shows.
    pub fn flag_names(&self) -> Vec<&'static str> {
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
            (FAST, "fast"),
            (ALLOW_BUSY, "allow_busy"),
            (NO_MULTI, "no_multi"),
        ];
        names
            .iter()
            .filter(|(f, _)| self.has(*f))
            .map(|(_, n)| *n)
            .collect()
    }

    /// Positions of the key arguments in `args`.
    pub fn key_positions(&self, argc: usize) -> Vec<usize> {
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
pub const fn spec(
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
    }
}

/// Every command table, in the order `COMMAND` lists them.
fn tables() -> [&'static [CommandSpec]; 11] {
    [
        replication::COMMANDS,
        connection::COMMANDS,
        server::COMMANDS,
        strings::COMMANDS,
        keys::COMMANDS,
        hashes::COMMANDS,
        lists::COMMANDS,
        zsets::COMMANDS,
        pubsub::COMMANDS,
        transactions::COMMANDS,
        scripting::COMMANDS,
    ]
}

type Table = std::collections::HashMap<&'static str, &'static CommandSpec, ahash::RandomState>;

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut m = Table::default();
        for t in tables() {
            for s in t {
                let prev = m.insert(s.name, s);
                assert!(prev.is_none(), "command {} registered twice", s.name);
            }
        }
        m
    })
}

/// Looks a command up by name, case-insensitively.
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.len() > 32 {
        return None;
    }
    let mut buf = [0u8; 32];
    let lower = &mut buf[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    let s = std::str::from_utf8(lower).ok()?;
    table().get(s).copied()
}

/// Every command, for `COMMAND` and `COMMAND COUNT`.
pub fn all_commands() -> Vec<&'static CommandSpec> {
    tables().iter().flat_map(|t| t.iter()).collect()
}

/// Everything a handler may use while it runs.
pub struct Ctx<'a> {
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
    blocked: Option<Blocked>,
}

impl<'a> Ctx<'a> {
    /// A context for one command of `client`, at the current time.
    pub fn new(shared: &'a Arc<Shared>, client: &'a mut Client) -> Ctx<'a> {
        let now_ms = shared.clock.now_ms();
        Ctx::at(shared, client, now_ms)
    }

    /// A context for one command of `client`, at a time already read from the clock.
    pub fn at(shared: &'a Arc<Shared>, client: &'a mut Client, now_ms: u64) -> Ctx<'a> {
        Ctx {
            shared,
            client,
            now_ms,
            in_exec: false,
            in_script: false,
            dirty: 0,
            blocked: None,
        }
    }

    /// The client's selected database.
    pub fn db(&self) -> &'a Db {
        let shared: &'a Arc<Shared> = self.shared;
        shared.keyspace.db(self.client.db)
    }

    /// Whether reads delete expired keys (false on a replica, which waits for the master's
    /// `DEL`).
    pub fn lazy_delete(&self) -> bool {
        self.shared.lazy_expire_deletes()
    }

    /// Whether the command may block (it may not inside `MULTI` or a script, where blocking
    /// commands answer at once as if their timeout had passed).
    pub fn may_block(&self) -> bool {
        !self.in_exec && !self.in_script && !self.client.deny_blocking
    }

    /// Makes the command wait for `fut`, whose output becomes the reply. The handler's own
    /// return value is then ignored.
    pub fn block(&mut self, fut: impl Future<Output = Frame> + Send + 'static) {
        self.blocked = Some(Box::pin(fut));
    }

    /// Records that a write changed something.
    pub fn changed(&mut self) {
        self.dirty += 1;
    }

    /// Reads and writes one key of the current database as a single step (see
    /// [`Db::update`]): `decide` sees the live entry and returns what to do with it and the
    /// command's result. Counts the command as a write when it changed the key. Every
    /// read-modify-write of one key goes through here, since commands run in parallel: `SET NX`
    /// read then written separately would let two clients take one lock.
    pub fn update_key<R>(
        &mut self,
        key: &Bytes,
        decide: impl FnOnce(Option<&Entry>) -> (Update, R),
    ) -> R {
        let (now, lazy) = (self.now_ms, self.lazy_delete());
        let (wrote, r) = self.db().update(key, now, lazy, |current| {
            let (update, r) = decide(current);
            let wrote = !matches!(update, Update::Keep);
            (update, (wrote, r))
        });
        if wrote {
            self.changed();
        }
        r
    }

    /// Records that `key` was changed in place (through `get_mut`): tells transactions that
    /// `WATCH` it and counts the change. `Db::insert`/`Db::remove` signal watchers themselves;
    /// calling this after them as well is harmless.
    pub fn modified(&mut self, key: &[u8]) {
        self.db().signal_modified(key);
        self.dirty += 1;
    }
}

/// Redis's reply to a command name it does not know.
pub fn unknown_command_error(args: &[Bytes]) -> Frame {
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
pub fn arity_error(name: &str) -> Frame {
    Frame::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// Runs one command for a client, from start to reply: lookup, arity, transaction queueing,
/// subscribed-mode and busy-script rules, then the handler under the gate.
pub async fn execute(shared: &Arc<Shared>, client: &mut Client, args: Vec<Bytes>) -> Frame {
    let spec = lookup(&args[0]);
    execute_spec(shared, client, spec, args).await
}

/// [`execute`] for a caller that has already looked the command up (`None`: unknown), so
/// that the name is not lowercased and hashed twice per request.
pub async fn execute_spec(
    shared: &Arc<Shared>,
    client: &mut Client,
    spec: Option<&'static CommandSpec>,
    mut args: Vec<Bytes>,
) -> Frame {
    let Some(spec) = spec else {
        if let Some(m) = client.multi.as_mut() {
            m.errored = true;
        }
        return unknown_command_error(&args);
    };
    if !spec.arity_ok(args.len()) {
        if let Some(m) = client.multi.as_mut() {
            m.errored = true;
        }
        return arity_error(spec.name);
    }
    shared.stats.command_processed();
    // Out of memory: evict, or refuse a command that may grow memory (see `evict`).
    if let Some(oom) = crate::evict::check_command(shared, client, spec).await {
        return oom;
    }
    if spec.has(DENYOOM) {
        crate::memory::detach_args(&mut args);
    }
    let now_ms = shared.clock.now_ms();
    client.sync_info(spec.name, now_ms);
    if client.in_resp2_pubsub() && !spec.has(SUBSCRIBED_OK) {
        return Frame::error(format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        ));
    }
    if shared.pause.current().is_some() && pausable(client) {
        shared
            .pause
            .wait_while(|mode| mode == PauseMode::All || may_replicate(client, spec))
            .await;
    }
    if client.multi.is_some() && !spec.has(NO_QUEUE) {
        if spec.has(NO_MULTI) {
            if let Some(m) = client.multi.as_mut() {
                m.errored = true;
            }
            return Frame::error("ERR Command not allowed inside a transaction");
        }
        if let Some(m) = client.multi.as_mut() {
            m.queue.push(args);
        }
        return Frame::simple("QUEUED");
    }
    if let Some(err) = shared.precheck(client, spec) {
        return err;
    }
    let threshold = shared.config.busy_reply_threshold();
    let blocked = if spec.has(ALLOW_BUSY) {
        run_handler(shared, client, spec, &args, now_ms)
    } else if spec.has(EXCLUSIVE) || (spec.has(MULTI_KEY) && args.len() > 2) {
        // Writes of one key only share the gate, replicas attached or not: run_handler holds
        // the stream-order lock from the change to its feed, so the stream carries them in the
        // order the keyspace saw them.
        let guard = match shared.gate.exclusive(threshold).await {
            Ok(g) => g,
            Err(busy) => return Frame::error(busy.message()),
        };
        if killed_while_waiting(client) {
            return Frame::error("ERR connection killed");
        }
        let r = run_handler(shared, client, spec, &args, now_ms);
        drop(guard);
        r
    } else {
        let guard = match shared.gate.shared(threshold).await {
            Ok(g) => g,
            Err(busy) => return Frame::error(busy.message()),
        };
        if killed_while_waiting(client) {
            return Frame::error("ERR connection killed");
        }
        let r = run_handler(shared, client, spec, &args, now_ms);
        drop(guard);
        r
    };
    let reply = match blocked {
        Ok(frame) => frame,
        Err(fut) => {
            // A blocking command (not `DEBUG SLEEP`) counts in `INFO`'s `blocked_clients`
            // while it waits, until it answers or its connection drops the wait.
            let _counted = spec
                .has(BLOCKING)
                .then(|| BlockedCount::start(&shared.stats.blocked_clients));
            fut.await
        }
    };
    if spec.has(SUBSCRIBED_OK) {
        // (Un)subscribing changes what `CLIENT LIST` and `CLIENT KILL TYPE pubsub` see now,
        // not at this client's next command.
        client.sync_info(spec.name, now_ms);
    }
    reply
}

/// One client counted as blocked, for as long as this lives.
struct BlockedCount<'a>(&'a std::sync::atomic::AtomicU64);

impl<'a> BlockedCount<'a> {
    fn start(counter: &'a std::sync::atomic::AtomicU64) -> Self {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        BlockedCount(counter)
    }
}

impl Drop for BlockedCount<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether a connection was killed (by `CLIENT KILL` or a restart, say) while its command
/// waited for the gate: then it runs nothing more, as its connection is closing. In-process
/// clients and the link to our master have no connection to close and always run.
fn killed_while_waiting(client: &Client) -> bool {
    client.handle.addr.is_some() && client.handle.is_killed()
}

fn run_handler(
    shared: &Arc<Shared>,
    client: &mut Client,
    spec: &CommandSpec,
    args: &[Bytes],
    now_ms: u64,
) -> Result<Frame, Blocked> {
    // A write and its feed are one step for the stream, even next to other writes sharing
    // the gate (no cost when nothing is fed).
    let _order = match spec.has(WRITE) {
        true => shared.order_guard(),
        false => None,
    };
    let mut ctx = Ctx::at(shared, client, now_ms);
    let frame = (spec.handler)(&mut ctx, args);
    let dirty = ctx.dirty;
    let blocked = ctx.blocked.take();
    shared.propagate_lazy_expired();
    if dirty > 0 {
        client.repl_offset = shared.after_write(client.db, spec, args, dirty);
    }
    match blocked {
        Some(fut) => Err(fut),
        None => Ok(frame),
    }
}

/// Runs a command from inside a script or a transaction, which already holds the gate
/// exclusively. Checks lookup and arity; the caller decides which commands it permits.
pub fn call(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Some(spec) = lookup(&args[0]) else {
        return unknown_command_error(args);
    };
    if !spec.arity_ok(args.len()) {
        return arity_error(spec.name);
    }
    call_spec(ctx, spec, args)
}

/// Runs an already looked-up command inside a script or a transaction.
pub fn call_spec(ctx: &mut Ctx<'_>, spec: &CommandSpec, args: &[Bytes]) -> Frame {
    let before = ctx.dirty;
    let frame = (spec.handler)(ctx, args);
    // A blocking command inside MULTI or a script never blocks: drop any future it left.
    ctx.blocked = None;
    let dirty = ctx.dirty - before;
    ctx.shared.propagate_lazy_expired();
    if dirty > 0 {
        ctx.client.repl_offset = ctx.shared.after_write(ctx.client.db, spec, args, dirty);
    }
    frame
}

/// Whether `CLIENT PAUSE` holds this client's commands: the links of replication (our master,
/// our replicas) are never paused, as in Redis.
fn pausable(client: &Client) -> bool {
    !client.is_replication_link
        && client.handle.info.lock().role != crate::client::ClientRole::Replica
}

/// Whether a command is one a `CLIENT PAUSE WRITE` holds: it may write, or may send something
/// down the replication stream (Redis's `may-replicate` commands: scripts, `PUBLISH`,
/// `PFCOUNT`), or it is the `EXEC` of a transaction that queued one of those.
fn may_replicate(client: &Client, spec: &CommandSpec) -> bool {
    let one = |spec: &CommandSpec| {
        spec.has(WRITE)
            || matches!(
                spec.name,
                "eval" | "evalsha" | "fcall" | "publish" | "spublish" | "pfcount"
            )
    };
    if one(spec) {
        return true;
    }
    spec.name == "exec"
        && client
            .multi
            .as_ref()
            .is_some_and(|m| m.queue.iter().any(|args| lookup(&args[0]).is_some_and(one)))
}
