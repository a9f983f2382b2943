//! A script's run: the record of who runs it (which client, which command context), the
//! time and kill checks while it runs, its writes recorded for replication, and the shape of
//! the error it ends with. `EVAL`, `EVALSHA` and `FCALL` all come through [`Scripting::execute`].

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, Value, VmState};

use super::shebang::ScriptFlags;
use super::{functions, kill, lowercase_sha, lua_to_frame, Scripting};
use crate::command::Ctx;
use crate::frame::Frame;
use crate::gate::BusyKind;

/// Everything a running script needs from the command that started it.
pub(super) struct Run {
    /// The context of the `EVAL`/`FCALL` command; valid for the whole run (see `run_script`).
    pub(super) ctx: *mut Ctx<'static>,
    /// Replies converted with RESP3 rules (`redis.setresp(3)`).
    pub(super) resp3: bool,
    /// Started by `EVAL_RO`/`EVALSHA_RO`/`FCALL_RO` or a `no-writes` function.
    pub(super) read_only: bool,
    /// Declared `allow-oom`: its writes are not refused for memory.
    pub(super) allow_oom: bool,
    /// Whether the script has written (then `SCRIPT KILL` must refuse).
    pub(super) wrote: bool,
    /// The write commands that changed data, in order, kept only while
    /// [`Scripting::record_effects`] is on (tests): replication and the AOF do not need them,
    /// they receive each write as it happens.
    pub(super) effects: Option<Effects>,
    /// Large string arguments already passed to `redis.call` in this run (see
    /// [`shared_argument`]): passing one value to many commands stores it once.
    pub(super) large_args: Vec<Bytes>,
}

/// A run's recorded writes and their size in bytes (bounded by [`MAX_RECORDED_EFFECTS`]).
#[derive(Default)]
pub(super) struct Effects {
    commands: Vec<Vec<Bytes>>,
    bytes: usize,
}

/// At most this many argument bytes of one run's writes are recorded while
/// [`Scripting::record_effects`] is on; past it the run keeps going but stops recording, and
/// [`Scripting::last_effects`] reports the overflow as a single `["EFFECTS-TRUNCATED"]`.
pub(super) const MAX_RECORDED_EFFECTS: usize = 64 << 20;

/// A run that grew the Lua heap by more than this gets a full garbage collection when it ends.
pub(super) const COLLECT_AFTER_GROWTH: usize = 1 << 20;

/// Arguments at least this long are looked up among the run's earlier large arguments before
/// being copied out of Lua: short ones cost less to copy than to look up.
pub(super) const SHARE_ARGUMENT_MIN: usize = 1024;

/// How many distinct large arguments one run remembers for sharing (the oldest is forgotten
/// first): bounds the lookup of each argument and what the run holds alive.
pub(super) const SHARED_ARGUMENTS: usize = 16;

/// Turns a string argument of `redis.call` into bytes. A large one that this run has already
/// passed (the same Lua string: one value written under many keys, say) becomes a clone of the
/// earlier bytes instead of a fresh copy, so `SET`ting one 4 MiB value under 64 keys stores
/// 4 MiB, not 256. Equal content is checked, not just the address: Lua may have collected the
/// earlier string and reused its memory for another.
pub(crate) fn shared_argument(arg: &[u8]) -> Bytes {
    if arg.len() < SHARE_ARGUMENT_MIN {
        return Bytes::copy_from_slice(arg);
    }
    RUN.with(|r| {
        let mut guard = r.borrow_mut();
        let Some(run) = guard.as_mut() else {
            return Bytes::copy_from_slice(arg);
        };
        if let Some(known) = run
            .large_args
            .iter()
            .find(|b| b.len() == arg.len() && b.as_ref() == arg)
        {
            return known.clone();
        }
        let fresh = Bytes::copy_from_slice(arg);
        if run.large_args.len() == SHARED_ARGUMENTS {
            run.large_args.remove(0);
        }
        run.large_args.push(fresh.clone());
        fresh
    })
}

/// Records a write of the running script, when recording is on (see [`Effects`]).
pub(crate) fn record_effect(argv: Vec<Bytes>) {
    RUN.with(|r| {
        let mut guard = r.borrow_mut();
        let Some(effects) = guard.as_mut().and_then(|run| run.effects.as_mut()) else {
            return;
        };
        let size: usize = argv.iter().map(Bytes::len).sum();
        if effects.bytes.saturating_add(size) > MAX_RECORDED_EFFECTS {
            effects.bytes = usize::MAX;
            return;
        }
        effects.bytes += size;
        effects.commands.push(argv);
    });
}

thread_local! {
    pub(super) static RUN: RefCell<Option<Run>> = const { RefCell::new(None) };
}

/// The check a script's declared flags make before it runs: one that may write cannot be
/// sent with a read-only command (`EVAL_RO`, `FCALL_RO`), as in Redis 7.0.
pub(super) fn check_declared(flags: ScriptFlags, read_only_call: bool) -> Result<(), Frame> {
    if read_only_call && !flags.compat && !flags.no_writes {
        return Err(Frame::error(
            "ERR Can not execute a script with write flag using *_ro command.",
        ));
    }
    Ok(())
}

/// Pushes a Lua array of strings (`KEYS` or `ARGV`).
///
/// # Safety
/// `state` must be a live Lua state with room for two more stack slots.
pub(super) unsafe fn push_string_array(state: *mut mlua::ffi::lua_State, items: &[Bytes]) {
    use mlua::ffi;
    ffi::lua_createtable(state, items.len() as std::os::raw::c_int, 0);
    for (i, item) in items.iter().enumerate() {
        ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
    }
}

/// The Lua heap's size in bytes, as Lua itself counts it: the same count as mlua's
/// `Lua::used_memory` (every allocation goes through mlua's allocator, which Lua's count
/// mirrors), read without taking mlua's lock, from inside a trip into Lua that holds it.
///
/// # Safety
///
/// `state` must be a live Lua state of the interpreter, used on the thread that runs it.
unsafe fn heap_bytes(state: *mut mlua::ffi::lua_State) -> usize {
    use mlua::ffi;
    let kbytes = ffi::lua_gc(state, ffi::LUA_GCCOUNT, 0).max(0) as usize;
    let rest = ffi::lua_gc(state, ffi::LUA_GCCOUNTB, 0).max(0) as usize;
    kbytes * 1024 + rest
}

/// Installs the instruction hook every script runs under: every 100k instructions (about a
/// millisecond) it looks at the clock (see [`crate::hand_off`]) and at the kill switch. Lua
/// counts instructions across runs, so the hook may fire early in a short script: harmless,
/// since what it decides by is the time this run has taken.
///
/// Once the script is killed the hook raises the kill error and, as Redis does, from then on
/// fires on every line: a script that catches the error with `pcall` meets it again at its
/// next line, outside the `pcall`, instead of looping on for another 100k instructions.
pub(super) fn install_count_hook(
    lua: &Lua,
    kill: Arc<kill::KillSwitch>,
    line_hook: Arc<AtomicBool>,
) {
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(100_000),
        move |lua, _debug| {
            // A long script hands this worker's other tasks to another thread, so that other
            // clients are served (and answered -BUSY) and the runtime's timers fire while it
            // runs. Retried at each firing until it took.
            crate::hand_off::if_long();
            if functions::load_timed_out() {
                return Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".into()));
            }
            if kill.is_killed() {
                line_hook.store(true, Ordering::Release);
                let kill = kill.clone();
                lua.set_hook(HookTriggers::EVERY_LINE, move |_lua, _debug| {
                    if kill.is_killed() {
                        return Err(mlua::Error::RuntimeError(kill::KILLED_MESSAGE.into()));
                    }
                    Ok(VmState::Continue)
                });
                return Err(mlua::Error::RuntimeError(kill::KILLED_MESSAGE.into()));
            }
            Ok(VmState::Continue)
        },
    );
}

/// Wraps a run's writes the way Redis 7 propagates them.
pub(super) fn wrap_effects(effects: Vec<Vec<Bytes>>) -> Vec<Vec<Bytes>> {
    if effects.len() <= 1 {
        return effects;
    }
    let mut out = Vec::with_capacity(effects.len() + 2);
    out.push(vec![Bytes::from_static(b"MULTI")]);
    out.extend(effects);
    out.push(vec![Bytes::from_static(b"EXEC")]);
    out
}

/// Formats a script failure as Redis 7 does.
pub(super) fn script_error(err: &Value, sha: &str) -> Frame {
    let t = match err {
        Value::Table(t) => t,
        // Not shaped by the error handler: Lua 5.1 reports running out of memory (and an
        // error inside the handler) without calling it. Redis 7.0 then answers
        // `Error running script <sha>, <message cut to 100 bytes>`.
        Value::String(s) => {
            let msg = s.as_bytes();
            let msg =
                String::from_utf8_lossy(&msg[..msg.len().min(100)]).replace(['\r', '\n'], " ");
            return Frame::error(format!("ERR Error running script {sha}, {msg}"));
        }
        _ => return Frame::error("ERR execution failure"),
    };
    let msg = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => s.to_string_lossy().to_string(),
        _ => "ERR execution failure".into(),
    };
    // Errors raised from Rust (the kill hook) arrive wrapped; keep only their message.
    let msg = if msg.contains("Script killed by user with SCRIPT KILL") {
        "ERR Script killed by user with SCRIPT KILL...".to_string()
    } else {
        msg
    };
    let source: Option<String> = t.raw_get("source").ok();
    let line: Option<i64> = t.raw_get("line").ok();
    match (source, line) {
        (Some(src), Some(line)) => Frame::error(format!("{msg} script: {sha}, on {src}:{line}.")),
        _ => Frame::error(msg),
    }
}

impl Scripting {
    /// Runs a cached script with `KEYS` and `ARGV`. `None` when the SHA1 is unknown. The SHA1
    /// may be in either case, as `EVALSHA` accepts it.
    pub(crate) fn run(
        &self,
        ctx: &mut Ctx<'_>,
        sha: &[u8],
        keys: &[Bytes],
        argv: &[Bytes],
        read_only: bool,
    ) -> Option<Frame> {
        let lower = lowercase_sha(sha)?;
        let sha = std::str::from_utf8(&lower).ok()?;
        let (function, flags) = {
            let cache = self.cache.lock();
            let script = cache.get(sha)?;
            (
                self.lua.registry_value::<Function>(&script.function).ok()?,
                script.flags,
            )
        };
        if let Err(e) = check_declared(flags, read_only) {
            return Some(e);
        }
        ctx.shared.gate.mark_script(BusyKind::Script);
        Some(self.execute(
            ctx,
            sha,
            &function,
            keys,
            argv,
            read_only || flags.no_writes,
            flags.allow_oom,
            false,
        ))
    }

    /// Compiles (or finds in the cache) and runs a script body, as `EVAL` does.
    pub(crate) fn eval(
        &self,
        ctx: &mut Ctx<'_>,
        body: &[u8],
        keys: &[Bytes],
        argv: &[Bytes],
        read_only: bool,
    ) -> Frame {
        match self.load_function(body) {
            Ok((sha, function, flags)) => {
                if let Err(e) = check_declared(flags, read_only) {
                    return e;
                }
                ctx.shared.gate.mark_script(BusyKind::Script);
                self.execute(
                    ctx,
                    &sha,
                    &function,
                    keys,
                    argv,
                    read_only || flags.no_writes,
                    flags.allow_oom,
                    false,
                )
            }
            Err(e) => e,
        }
    }

    /// After a run: drops the run's `KEYS` and `ARGV` unless the run's own trip into Lua
    /// already did (`globals_left`: globals that would otherwise keep the last run's
    /// arguments, a large value among them, alive until the next run), and when the run left
    /// the Lua heap (`used` bytes, `None` when unknown) much larger than it found it (`before`),
    /// collects the garbage now rather than whenever Lua's incremental collector gets to it.
    fn release_run_memory(&self, globals_left: bool, before: usize, used: Option<usize>) {
        if globals_left {
            // Through mlua: each call is a protected call of its own (and, in Lua 5.1, a new C
            // closure for the collector to free), so this is the rare path, after a run whose
            // trip into Lua failed before it could clear them itself.
            let _ = self.visible.raw_set("KEYS", Value::Nil);
            let _ = self.visible.raw_set("ARGV", Value::Nil);
        }
        let used = match used {
            Some(used) if !globals_left => used,
            _ => self.lua.used_memory(),
        };
        if used > before.saturating_add(COLLECT_AFTER_GROWTH) {
            let _ = self.lua.gc_collect();
        }
    }

    /// Runs a script (as `KEYS`/`ARGV` globals) or a function (as its two parameters).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn execute(
        &self,
        ctx: &mut Ctx<'_>,
        name: &str,
        function: &Function,
        keys: &[Bytes],
        argv: &[Bytes],
        read_only: bool,
        allow_oom: bool,
        as_function: bool,
    ) -> Frame {
        self.kill.start();
        // More than one write reaches the replicas and the AOF as one transaction.
        let _unit = ctx.shared.begin_unit();
        // Hands the worker off once the run is long (see `crate::hand_off`); ends with it.
        let _span = crate::hand_off::start();
        // SAFETY: the pointer is only dereferenced by `redis_call`, which runs synchronously on
        // this thread, inside `run_fn.call` below, while `ctx` is still mutably borrowed by this
        // function. It is cleared before this function returns (the guard runs on unwind too).
        // A `SELECT` inside the script changes the database for the rest of the script only,
        // never for the client that sent it (as in Redis).
        let db_before = ctx.client.db;
        // The commands the script calls know they run in one (`SORT ... BY nosort` of a set
        // sorts, `SPOP` sends its `SREM`s without a `MULTI` of their own).
        let script_before = std::mem::replace(&mut ctx.in_script, true);
        let ptr = (ctx as *mut Ctx<'_>).cast::<Ctx<'static>>();
        RUN.with(|r| {
            *r.borrow_mut() = Some(Run {
                ctx: ptr,
                resp3: false,
                read_only,
                allow_oom,
                wrote: false,
                effects: self
                    .recording
                    .load(Ordering::Acquire)
                    .then(Effects::default),
                large_args: Vec::new(),
            })
        });
        /// Ends the run, on unwind too. `globals_left`: the run's `KEYS` and `ARGV` may
        /// still be set (until the trip into Lua says it cleared them). `heap_before` and
        /// `heap_after`: the Lua heap's size in bytes when the run started (`usize::MAX` while
        /// unknown: then it is not compared) and as it ended (`None`: read it again).
        struct ClearRun<'a> {
            scripting: &'a Scripting,
            globals_left: bool,
            heap_before: usize,
            heap_after: Option<usize>,
        }
        impl Drop for ClearRun<'_> {
            fn drop(&mut self) {
                if let Some(run) = RUN.with(|r| r.borrow_mut().take()) {
                    if let Some(effects) = run.effects {
                        *self.scripting.last_effects.lock() = if effects.bytes == usize::MAX {
                            vec![vec![Bytes::from_static(b"EFFECTS-TRUNCATED")]]
                        } else {
                            wrap_effects(effects.commands)
                        };
                    }
                }
                self.scripting.release_run_memory(
                    self.globals_left,
                    self.heap_before,
                    self.heap_after,
                );
                self.scripting.kill.end();
                if self.scripting.line_hook.swap(false, Ordering::AcqRel) {
                    // The run was killed: back to the hook that fires every 100k instructions.
                    install_count_hook(
                        &self.scripting.lua,
                        self.scripting.kill.clone(),
                        self.scripting.line_hook.clone(),
                    );
                }
            }
        }
        let mut clear = ClearRun {
            scripting: self,
            globals_left: !as_function,
            heap_before: usize::MAX,
            heap_after: None,
        };
        // The heap's size before and after the run, read on the raw stack during the trip
        // into Lua: `Lua::used_memory` takes mlua's lock, a pair of atomic read-modify-writes,
        // and a run used to ask four times (perf put them at 2% of a lock script's CPU).
        let mut heap_before = usize::MAX;
        let mut heap_after = None;
        let runner = if as_function {
            &self.run_with_fn
        } else {
            &self.run_fn
        };
        // One trip into Lua, on the raw stack: build `KEYS` and `ARGV`, publish them as
        // globals (scripts) or pass them (functions), call the runner, which returns
        // `(ok, value)`, and (scripts) set the two globals back to nil. Done through mlua's
        // handles, each table and string would be a registry reference of its own, taken
        // and released under mlua's lock, and each step a protected call of its own, which
        // in Lua 5.1 allocates a C closure every time: clearing the globals that way cost a
        // lock script's run a fifth of its instructions, collector included.
        // SAFETY: the closure runs inside mlua's protected call, so a Lua error raised in it
        // is caught there; it holds nothing with a destructor (only borrowed slices), so
        // the `longjmp` of such an error skips nothing. `lua_call` cannot leave more than the
        // two results, and the stack is sized for what is pushed. Clearing the globals after
        // the call allocates nothing (the names are still on the stack, and both keys are
        // in the table: a script cannot write the table it reads its globals from), so it
        // cannot fail and lose a reply the script already produced.
        let result = unsafe {
            self.lua
                .exec_raw::<(bool, Value)>((runner, function, &self.visible), |state| {
                    use mlua::ffi;
                    // Stack: 1 runner, 2 function, 3 visible.
                    heap_before = heap_bytes(state);
                    ffi::luaL_checkstack(state, 6, std::ptr::null());
                    push_string_array(state, keys); // 4
                    push_string_array(state, argv); // 5
                    if as_function {
                        ffi::lua_remove(state, 3);
                        ffi::lua_call(state, 3, 2);
                        heap_after = Some(heap_bytes(state));
                    } else {
                        ffi::lua_pushlstring(state, c"KEYS".as_ptr(), 4); // 6
                        ffi::lua_pushlstring(state, c"ARGV".as_ptr(), 4); // 7
                        ffi::lua_pushvalue(state, 6);
                        ffi::lua_pushvalue(state, 4);
                        ffi::lua_rawset(state, 3);
                        ffi::lua_pushvalue(state, 7);
                        ffi::lua_pushvalue(state, 5);
                        ffi::lua_rawset(state, 3);
                        // 1 runner, 2 function, 3 visible, 4 "KEYS", 5 "ARGV" (the tables
                        // stay reachable through the globals while the script runs).
                        ffi::lua_remove(state, 4);
                        ffi::lua_remove(state, 4);
                        ffi::lua_pushvalue(state, 1);
                        ffi::lua_pushvalue(state, 2);
                        ffi::lua_call(state, 1, 2); // 6 ok, 7 value
                        ffi::lua_pushvalue(state, 4);
                        ffi::lua_pushnil(state);
                        ffi::lua_rawset(state, 3);
                        ffi::lua_pushvalue(state, 5);
                        ffi::lua_pushnil(state);
                        ffi::lua_rawset(state, 3);
                        // Leave only `(ok, value)`.
                        ffi::lua_replace(state, 2);
                        ffi::lua_replace(state, 1);
                        ffi::lua_settop(state, 2);
                        heap_after = Some(heap_bytes(state));
                    }
                })
        };
        // The trip cleared the globals unless it failed before it could.
        clear.globals_left = !as_function && result.is_err();
        clear.heap_before = heap_before;
        ctx.client.db = db_before;
        ctx.in_script = script_before;
        // A script that ends with the error of one of its calls (raised, or returned alone or
        // in an array) does not count it again: the call counted it. Every other error of its
        // reply counts, here (see `crate::errorstats`).
        let raised_and_counted = match &result {
            Ok((false, Value::Table(t))) => matches!(
                t.raw_get::<Value>("ignore_error_stats_update"),
                Ok(Value::Boolean(true))
            ),
            _ => false,
        };
        // A returned reply's errors are noted while it is converted.
        let returned_ok = matches!(&result, Ok((true, _)));
        drop(super::reply::take_uncounted_errors());
        let reply = match result {
            Ok((ok, value)) => {
                if ok {
                    let lua_resp3 = RUN.with(|r| r.borrow().as_ref().is_some_and(|r| r.resp3));
                    lua_to_frame(&self.lua, &value, ctx.client.protocol, lua_resp3)
                } else {
                    script_error(&value, name)
                }
            }
            Err(mlua::Error::MemoryError(msg)) => {
                Frame::error(format!("ERR Error running script {name}, {msg}"))
            }
            Err(e) => Frame::error(format!("ERR Error running script {name}: {e}")),
        };
        let errors = &ctx.shared.stats.errors;
        for text in super::reply::take_uncounted_errors() {
            errors.count(&text);
        }
        if let (Frame::Error(text), false, false) = (&reply, raised_and_counted, returned_ok) {
            errors.count(text);
        }
        ctx.client.error_counted = true;
        // What the run left, as the trip read it (a failed trip may not have got that far).
        let used = match heap_after {
            Some(used) => used,
            _ => self.lua.used_memory(),
        };
        clear.heap_after = Some(self.step_collector(self.collect_if_full(used)));
        reply
    }
}
