//! Lua scripting: the interpreter, its Redis-shaped sandbox, the cache of scripts by SHA1, and
//! the conversions between Lua values and replies.
//!
//! One Lua 5.1 state serves every script. It is built once with exactly the environment Redis 7
//! gives a script (`string`, `table`, `math`, `bit`, `cjson`, and the `redis` table), behind a
//! read-only global table, so that a script can neither create globals nor reach anything
//! outside. Scripts run while the execution gate is held exclusively, which is what makes them
//! atomic; while one runs, a thread-local "run" record tells `redis.call` which client and which
//! command context it belongs to.
//!
//! Errors are shaped the way Redis 7 shapes them: a Lua-level error handler turns whatever was
//! raised into `{err=..., source=..., line=...}`, and the reply becomes
//! `-<err> script: <sha>, on @user_script:<line>.`
//!
//! Where each concern lives: this file is the engine (the one Lua state, the script cache,
//! `SCRIPT LOAD`/`FLUSH`, memory settings); [`sandbox`] decides what a script may reach;
//! [`run`] is a script's life (the run record, time limit and kill checks, recorded writes,
//! the error it ends with); [`bridge`] is `redis.call` and its siblings; [`reply`] converts
//! between Lua values and replies; [`functions`] is `FUNCTION`/`FCALL`; the rest are the
//! libraries Redis bundles (`cjson`, `cmsgpack`, `struct`, `bit`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use mlua::{Function, Lua, LuaOptions, StdLib, Table, Value};
use parking_lot::Mutex;
use sha1::{Digest, Sha1};

use crate::frame::Frame;

mod bridge;
mod cjson;
pub(crate) mod functions;
#[cfg(test)]
mod hostile_tests;
mod kill;
mod libs;
mod msgpack;
mod reply;
mod run;
mod sandbox;
mod shebang;
mod structlib;

pub(crate) use reply::lua_to_frame;

use bridge::{lua_redis_call, lua_redis_pcall};
use run::script_error;
use run::{install_count_hook, RUN};
pub(crate) use run::{record_effect, shared_argument};

pub(crate) use shebang::{parse as parse_shebang, ScriptFlags};

/// How much memory the Lua interpreter may use, all scripts together, unless
/// [`Scripting::set_memory_limit`] says otherwise. Redis 7.0 sets no limit of its own on Lua
/// (a script can grow until the machine runs out); here an allocation past the limit fails
/// the script with Lua's `not enough memory`, which `pcall` can catch as in Redis, and the
/// server goes on. A lock script uses a few kilobytes.
pub(crate) const DEFAULT_MEMORY_LIMIT: usize = 512 * 1024 * 1024;

/// How large a step the collector takes after runs, in the kilobytes of allocation it stands
/// for: Redis 7.0's `LUA_GC_CYCLE_PERIOD`. See [`Scripting::step_collector`].
const GC_STEP_PERIOD: u32 = 50;

/// How much the Lua heap grows, after the last step of the collector, before runs take the
/// next one. See [`Scripting::step_collector`].
const GC_STEP_AFTER_GROWTH: usize = 24 * 1024;

/// The interpreter's memory limit, kept in its app data for the libraries that bound their
/// output by it.
struct MemoryLimit(usize);

/// The memory limit of `lua` in bytes (0: none).
fn current_memory_limit(lua: &Lua) -> usize {
    lua.app_data_ref::<MemoryLimit>().map_or(0, |m| m.0)
}

/// The Lua code that wraps calls into Rust and shapes errors like Redis's error handler.
const PRELUDE: &str = r#"
local dbg = debug
local xpcall, error, type, tostring = xpcall, error, type, tostring

local function handler(err)
  local level = 2
  local i = dbg.getinfo(level, 'nSl')
  while i and (i.what == 'C' or i.source == '=latchkey') do
    level = level + 1
    i = dbg.getinfo(level, 'nSl')
  end
  if type(err) == 'userdata' then
    -- An error raised by a Rust function: keep its message, drop mlua's decorations.
    local s = tostring(err)
    s = s:gsub('^runtime error: ', '')
    s = s:match('^(.-)\nstack traceback:') or s
    err = {err = 'ERR ' .. s}
  elseif type(err) ~= 'table' then
    err = {err = 'ERR ' .. tostring(err)}
  end
  if i then
    err['source'] = i.source
    err['line'] = i.currentline
  end
  return err
end

__lk_run = function(f)
  return xpcall(f, handler)
end

__lk_run_with = function(f, keys, args)
  return xpcall(function() return f(keys, args) end, handler)
end

"#;

/// A compiled script in the cache.
///
/// The function is kept in Lua's registry, not as an mlua `Function`: every live mlua handle
/// takes one of about 8000 slots, and a client sending 8000 different scripts ran mlua out of
/// them, which aborted the process (found by the `lua_eval` fuzz target after 20,000 inputs).
#[derive(Debug)]
struct Script {
    function: mlua::RegistryKey,
    /// What its shebang declared ([`ScriptFlags::COMPAT`] without one).
    flags: ScriptFlags,
    /// The length of its body, for `INFO memory`'s `used_memory_scripts_eval`.
    body_len: usize,
}

/// The server's scripting engine: one Lua state, the script cache, and the kill switch.
pub(crate) struct Scripting {
    lua: Lua,
    /// The read-only proxy scripts use as their globals.
    env: Table,
    /// The table behind that proxy (where `KEYS` and `ARGV` are set for each run).
    visible: Table,
    run_fn: Function,
    run_with_fn: Function,
    /// Function libraries (`FUNCTION LOAD`).
    libraries: Mutex<functions::Libraries>,
    /// Globals seen while a library loads: the sandbox plus `redis.register_function`.
    load_env: functions::LibraryEnv,
    /// Compiled scripts by SHA1 (lowercase hex). aHash: `EVALSHA` looks a script up on
    /// every call, and SipHash over forty bytes costs more than the lookup needs.
    cache: Mutex<HashMap<String, Script, ahash::RandomState>>,
    /// Whether some cached script has a shebang: until one does, `EVALSHA` (the lock path)
    /// needs no second cache lookup for its declared flags.
    any_declared: AtomicBool,
    /// Whether a script runs, has written, or was killed (see [`kill`]).
    kill: Arc<kill::KillSwitch>,
    /// Set once a killed script's hook fires on every line (see [`install_count_hook`]);
    /// the end of that run puts the count hook back.
    line_hook: Arc<AtomicBool>,
    /// The effects of the last script or function run, while [`Scripting::record_effects`]
    /// is on (see [`Scripting::last_effects`]).
    last_effects: Mutex<Vec<Vec<Bytes>>>,
    /// Whether runs record their writes for [`Scripting::last_effects`].
    recording: AtomicBool,
    /// The interpreter's memory limit in bytes (0: none).
    memory_limit: std::sync::atomic::AtomicUsize,
    /// The Lua heap's size after the last garbage-collection step (see
    /// [`Scripting::step_collector`]).
    heap_after_gc_step: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Scripting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scripting")
            .field("scripts", &self.cache.lock().len())
            .finish()
    }
}

impl Default for Scripting {
    fn default() -> Self {
        Scripting::new().expect("the Lua sandbox builds")
    }
}

impl crate::state::Shared {
    /// The server's scripting engine (plugged into the shared state when the server starts).
    pub(crate) fn scripting(&self) -> &Scripting {
        self.scripting.get()
    }
}

/// A SHA1 as `EVALSHA` may send it (either case), lowercased on the stack: `EVALSHA` is the
/// lock path, so the cache lookup allocates nothing. `None` when it is not 40 bytes long.
fn lowercase_sha(sha: &[u8]) -> Option<[u8; 40]> {
    let mut lower = [0u8; 40];
    if sha.len() != lower.len() {
        return None;
    }
    lower.copy_from_slice(sha);
    lower.make_ascii_lowercase();
    Some(lower)
}

/// SHA1 of a script body, lowercase hex, as `SCRIPT LOAD` returns it.
pub(crate) fn sha1_hex(body: &[u8]) -> String {
    hex::encode(Sha1::digest(body))
}

impl Scripting {
    fn new() -> mlua::Result<Scripting> {
        // SAFETY: `debug` is the only unsafe library loaded. Only the error handler of the
        // prelude uses it (for the line number of an error, as Redis's handler does); scripts
        // never see it: their globals are the read-only proxy built below, which omits it.
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::default(),
            )
        };
        let g = lua.globals();
        let redis = lua.create_table()?;
        libs::install_redis_table(&lua, &redis)?;
        g.raw_set("redis", redis)?;
        g.raw_set("bit", libs::bit_library(&lua)?)?;
        g.raw_set("cjson", cjson::library(&lua)?)?;
        g.raw_set("cmsgpack", msgpack::library(&lua)?)?;
        g.raw_set("struct", structlib::library(&lua)?)?;
        lua.load(PRELUDE).set_name("=latchkey").exec()?;
        // `redis.call` and `redis.pcall` are plain C functions (see `lua_redis_call`): a
        // script calls them a few times per run, and mlua's general callback machinery
        // (argument tables, registry references, a lock per value) would cost more than the
        // command they run.
        // SAFETY: both only use the Lua C API on the state they are given, and raise a Lua
        // error only when no Rust value with a destructor is alive in their frame.
        let (call, pcall) = unsafe {
            (
                lua.create_c_function(lua_redis_call)?,
                lua.create_c_function(lua_redis_pcall)?,
            )
        };
        let redis_table: Table = g.raw_get("redis")?;
        redis_table.raw_set("call", call)?;
        redis_table.raw_set("pcall", pcall)?;
        let run_fn: Function = g.raw_get("__lk_run")?;
        let run_with_fn: Function = g.raw_get("__lk_run_with")?;
        let sandbox = sandbox::Sandbox::new(&lua)?;
        g.raw_set("__lk_proxy", sandbox.proxy_function())?;
        // What a script may see: Redis 7's globals and nothing more.
        let visible = lua.create_table()?;
        for name in sandbox::GLOBALS {
            visible.raw_set(name, g.raw_get::<Value>(name)?)?;
        }
        let env = read_only_proxy(&lua, &visible)?;
        // `_G` inside a script is the read-only proxy itself.
        visible.raw_set("_G", env.clone())?;
        for lib in sandbox::LIBRARIES {
            let real: Table = visible.raw_get(lib)?;
            visible.raw_set(lib, read_only_proxy(&lua, &real)?)?;
        }
        let redis_real: Table = g.raw_get("redis")?;
        visible.raw_set("redis", read_only_proxy(&lua, &redis_real)?)?;
        sandbox.install(&lua, &visible, &env)?;
        sandbox.protect_string_metatable(&lua, &visible.raw_get("string")?)?;
        lua.set_memory_limit(DEFAULT_MEMORY_LIMIT)?;
        lua.set_app_data(MemoryLimit(DEFAULT_MEMORY_LIMIT));
        let load_env = functions::library_environment(&lua, &env)?;
        let kill = Arc::new(kill::KillSwitch::default());
        let line_hook = Arc::new(AtomicBool::new(false));
        install_count_hook(&lua, kill.clone(), line_hook.clone());
        // Building the sandbox left garbage (compiler buffers, the chunks' temporaries):
        // collected now, a fresh interpreter holds only what it keeps.
        lua.gc_collect()?;
        Ok(Scripting {
            lua,
            env,
            visible,
            run_fn,
            run_with_fn,
            libraries: Mutex::new(functions::Libraries::default()),
            load_env,
            cache: Mutex::new(HashMap::default()),
            any_declared: AtomicBool::new(false),
            kill,
            line_hook,
            last_effects: Mutex::new(Vec::new()),
            recording: AtomicBool::new(false),
            memory_limit: std::sync::atomic::AtomicUsize::new(DEFAULT_MEMORY_LIMIT),
            heap_after_gc_step: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// The memory the Lua interpreter uses now, in bytes.
    #[cfg(test)]
    pub(crate) fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Sets how much memory the Lua interpreter may use (all scripts together), in bytes.
    /// Zero means no limit, as in Redis, where a runaway script can take the whole machine.
    #[cfg(any(test, feature = "internals"))]
    pub(crate) fn set_memory_limit(&self, bytes: usize) {
        // Only fails for a Lua state mlua does not allocate for, which this one is not.
        let _ = self.lua.set_memory_limit(bytes);
        self.lua.set_app_data(MemoryLimit(bytes));
        self.memory_limit.store(bytes, Ordering::Release);
    }

    /// The scripting lines of `INFO memory`, in Redis 7.0's order. One interpreter serves
    /// both scripts and functions here, so all of its memory is reported as the scripts'
    /// (`used_memory_vm_eval`) and none as the functions' VM.
    pub(crate) fn memory_info(&self) -> String {
        let lua = self.lua.used_memory() as u64;
        let (cached, eval_bytes) = {
            let cache = self.cache.lock();
            // Each script: its SHA1 key and its body, as Redis counts its `lua_scripts_mem`.
            let bytes: usize = cache.values().map(|s| s.body_len + 40).sum();
            (cache.len(), bytes as u64)
        };
        let (libraries, functions, code) = self.function_counts();
        let code = code as u64;
        let human = crate::memory::human;
        format!(
            "used_memory_lua:{lua}\r\nused_memory_vm_eval:{lua}\r\nused_memory_lua_human:{}\r\nused_memory_scripts_eval:{eval_bytes}\r\nnumber_of_cached_scripts:{cached}\r\nnumber_of_functions:{functions}\r\nnumber_of_libraries:{libraries}\r\nused_memory_vm_functions:0\r\nused_memory_vm_total:{lua}\r\nused_memory_vm_total_human:{}\r\nused_memory_functions:{code}\r\nused_memory_scripts:{}\r\nused_memory_scripts_human:{}\r\n",
            human(lua),
            human(lua),
            eval_bytes + code,
            human(eval_bytes + code),
        )
    }

    /// After a run: when the interpreter holds more than half its limit (a script built
    /// something big, or stopped the collector with `collectgarbage('stop')`), collect now,
    /// so the garbage of one script does not fail the next with `not enough memory` (Lua
    /// 5.1 does not collect on its own when an allocation fails). `used`: the heap's size
    /// in bytes now; returns it, as it is after the collection if there was one.
    fn collect_if_full(&self, used: usize) -> usize {
        let limit = self.memory_limit.load(Ordering::Acquire);
        if limit > 0 && used > limit / 2 {
            // The collection itself needs a little memory (mlua's protected call), which a
            // full interpreter cannot give: lift the limit while collecting.
            let _ = self.lua.set_memory_limit(0);
            let _ = self.lua.gc_collect();
            let _ = self.lua.set_memory_limit(limit);
            return self.lua.used_memory();
        }
        used
    }

    /// After a run: once the Lua heap has grown by [`GC_STEP_AFTER_GROWTH`] since the last
    /// step, one large step ([`GC_STEP_PERIOD`] kilobytes' worth of work) of Lua's
    /// incremental collector.
    ///
    /// Lua collects on its own only once the heap has grown to twice what the last
    /// collection left (its default pause): with nothing else, ten thousand small scripts
    /// let their garbage (each run's `KEYS` and `ARGV` tables, the reply's strings) pile
    /// up to as much again as the interpreter itself before a cycle frees it. Redis 7.0
    /// takes a step every 50 runs (`luaCallFunction`); on a heap as small as this one a step
    /// of that size finishes a whole cycle, whose cost is the live heap's size, not the
    /// garbage's. Stepping by growth keeps the heap within [`GC_STEP_AFTER_GROWTH`] of what
    /// is live whatever a run leaves behind, and spends the cycle only once there is that
    /// much to free: a lock script (a few hundred bytes of garbage a run) takes one about
    /// every hundred runs.
    ///
    /// `used`: the heap's size in bytes now; returns it, as it is after the step if there
    /// was one.
    fn step_collector(&self, used: usize) -> usize {
        let floor = self.heap_after_gc_step.load(Ordering::Relaxed);
        if used < floor {
            // Collected meanwhile (by Lua itself, `collectgarbage`, `SCRIPT FLUSH`): measure
            // the growth from here.
            self.heap_after_gc_step.store(used, Ordering::Relaxed);
        } else if used - floor >= GC_STEP_AFTER_GROWTH {
            // Fails only when the collector itself cannot get memory under the limit, in
            // which case the next run's `collect_if_full` lifts the limit and collects.
            let _ = self
                .lua
                .gc_step_kbytes(GC_STEP_PERIOD as std::os::raw::c_int);
            let used = self.lua.used_memory();
            self.heap_after_gc_step.store(used, Ordering::Relaxed);
            return used;
        }
        used
    }

    /// Compiles a script (or finds it in the cache) and returns its SHA1. A compile error is
    /// returned as Redis's reply.
    pub(crate) fn load(&self, body: &[u8]) -> Result<String, Frame> {
        self.load_function(body).map(|(sha, _, _)| sha)
    }

    /// Like [`load`](Scripting::load), also handing back the compiled function, so that
    /// `EVAL` runs it without looking it up again.
    fn load_function(&self, body: &[u8]) -> Result<(String, Function, ScriptFlags), Frame> {
        let sha = sha1_hex(body);
        if let Some(script) = self.cache.lock().get(&sha) {
            if let Ok(function) = self.lua.registry_value::<Function>(&script.function) {
                return Ok((sha, function, script.flags));
            }
        }
        let body_len = body.len();
        // The shebang is not Lua: the source starts at the newline that ends it.
        let (flags, shebang_len) =
            shebang::parse(body).map_err(|e| Frame::error(format!("ERR {e}")))?;
        let body = &body[shebang_len..];
        // Bytecode is never loaded (see `sandbox`): a body starting like a precompiled
        // chunk gets a leading space, so Lua parses it as text and fails on line 1 as
        // Redis's Lua does.
        let spaced;
        let source = if body.first() == Some(&27) {
            spaced = [b" ".as_slice(), body].concat();
            spaced.as_slice()
        } else {
            body
        };
        let function = self
            .lua
            .load(source)
            .set_mode(mlua::ChunkMode::Text)
            .set_name("@user_script")
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                Frame::error(format!("ERR Error compiling script (new function): {msg}"))
            })?;
        let key = self
            .lua
            .create_registry_value(function.clone())
            .map_err(|e| Frame::error(format!("ERR Error compiling script (new function): {e}")))?;
        if !flags.compat {
            self.any_declared.store(true, Ordering::Release);
        }
        self.cache.lock().insert(
            sha.clone(),
            Script {
                function: key,
                flags,
                body_len,
            },
        );
        Ok((sha, function, flags))
    }

    /// The write commands the last script (or function) run performed, as Redis 7 replicates
    /// them: nothing for a read-only run, the bare command for one write, and the writes
    /// wrapped in `MULTI` ... `EXEC` for more. Recorded only after
    /// [`record_effects(true)`](Scripting::record_effects): replication and the AOF receive
    /// each write as it happens and need no copy, so by default nothing of a run's writes is
    /// held once it ends.
    #[doc(hidden)]
    #[cfg(feature = "internals")]
    pub(crate) fn last_effects(&self) -> Vec<Vec<Bytes>> {
        self.last_effects.lock().clone()
    }

    /// Switches the recording of [`last_effects`](Scripting::last_effects) on or off (for
    /// tests). Switching it off frees what was recorded.
    #[doc(hidden)]
    #[cfg(feature = "internals")]
    pub(crate) fn record_effects(&self, on: bool) {
        self.recording.store(on, Ordering::Release);
        if !on {
            self.last_effects.lock().clear();
        }
    }

    /// Bytes the scripting engine holds between runs: the Lua heap and the recorded effects
    /// (for tests: after a run it must come back to where it was).
    #[doc(hidden)]
    #[cfg(feature = "internals")]
    pub(crate) fn retained_bytes(&self) -> usize {
        let effects: usize = self
            .last_effects
            .lock()
            .iter()
            .flatten()
            .map(Bytes::len)
            .sum();
        self.lua.used_memory() + effects
    }

    /// What the cached script with this SHA1 (either case) declared in its shebang, for the
    /// checks made before `EVALSHA` runs it; `None` when no such script is cached.
    pub(crate) fn declared_flags(&self, sha: &[u8]) -> Option<ScriptFlags> {
        if !self.any_declared.load(Ordering::Acquire) {
            return None;
        }
        let lower = lowercase_sha(sha)?;
        let sha = std::str::from_utf8(&lower).ok()?;
        self.cache.lock().get(sha).map(|s| s.flags)
    }

    /// Whether a script with this SHA1 is cached.
    pub(crate) fn exists(&self, sha: &str) -> bool {
        self.cache.lock().contains_key(&sha.to_ascii_lowercase())
    }

    /// Forgets every cached script (`SCRIPT FLUSH`).
    pub(crate) fn flush(&self) {
        self.cache.lock().clear();
        self.any_declared.store(false, Ordering::Release);
        // Redis starts a fresh interpreter: what scripts configured is forgotten too.
        cjson::reset(&self.lua);
        // The dropped registry keys' slots are given back to Lua.
        self.lua.expire_registry_values();
    }

    /// Asks the running script to stop (`SCRIPT KILL`). Returns the error reply when there is
    /// nothing to kill or the script has already written. The script stops at its next
    /// `redis.call` or at the next firing of the instruction hook, whichever comes first.
    ///
    /// `wrong_kind`: the refusal to give instead when the running script is not the kind
    /// the command kills (see `SCRIPT KILL` and `FUNCTION KILL`).
    pub(crate) fn request_kill(&self, wrong_kind: Option<Frame>) -> Result<(), Frame> {
        self.kill.request(wrong_kind)
    }
}

/// A table that reads through to `real` and refuses every assignment, with Redis's texts.
///
/// Reads go through a *table* `__index` (the proxy's metatable points at `real` itself),
/// which the Lua VM follows on its own, without calling a function: a script reads
/// `redis`, `KEYS` and `ARGV` on every run, and a function-valued `__index` would cost a Lua
/// call for each read. For the globals table, a read that `real` cannot answer falls
/// through to `real`'s own metatable, whose `__index` function raises Redis's
/// nonexistent-global error (called from the script's own frame, so `error(..., 2)` points
/// at the script's line, as before).
fn read_only_proxy(lua: &Lua, real: &Table) -> mlua::Result<Table> {
    let is_globals = real.raw_get::<Value>("redis").is_ok_and(|v| !v.is_nil());
    if is_globals {
        let missing: Function = lua
            .load(
                r#"return function(_, k)
                  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
                end"#,
            )
            .set_name("=latchkey")
            .call(())?;
        let real_mt = lua.create_table()?;
        real_mt.raw_set("__index", missing)?;
        real.set_metatable(Some(real_mt));
    }
    let make: Function = lua.globals().raw_get("__lk_proxy")?;
    make.call(real.clone())
}

/// A number as C's `printf("%.<precision>g")` prints it (glibc's spelling of infinities and
/// NaNs included). Redis 7.0 turns a number a script passes to `redis.call` into text with
/// `%.17g`, so a script's `redis.call('SET', k, 0.1)` stores `0.10000000000000001`.
fn printf_g(n: f64, precision: usize) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if n.is_infinite() {
        return if n > 0.0 { "inf" } else { "-inf" }.into();
    }
    let p = precision.max(1);
    // The exponent %e would print at this precision (after its rounding) picks the style.
    let sci = format!("{:.*e}", p - 1, n);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let x: i64 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if x >= -4 && x < p as i64 {
        trim(&format!("{:.*}", (p as i64 - 1 - x) as usize, n))
    } else {
        let sign = if x < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa), x.abs())
    }
}

/// Sets the running script's reply protocol (`redis.setresp`).
pub(crate) fn set_resp(resp3: bool) {
    RUN.with(|r| {
        if let Some(run) = r.borrow_mut().as_mut() {
            run.resp3 = resp3;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_printf_g() {
        // What glibc's printf prints for each, at %.14g (Lua's own) and %.17g (Redis's).
        let cases: [(f64, &str, &str); 14] = [
            (3.0, "3", "3"),
            (3.5, "3.5", "3.5"),
            (0.1, "0.1", "0.10000000000000001"),
            (1e20, "1e+20", "1e+20"),
            (1e15, "1e+15", "1000000000000000"),
            (1e17, "1e+17", "1e+17"),
            (
                123456789012345678.0,
                "1.2345678901235e+17",
                "1.2345678901234568e+17",
            ),
            (-0.0, "-0", "-0"),
            (0.0001, "0.0001", "0.0001"),
            (0.00001, "1e-05", "1.0000000000000001e-05"),
            (1e300, "1e+300", "1.0000000000000001e+300"),
            (
                9223372036854775808.0,
                "9.2233720368548e+18",
                "9.2233720368547758e+18",
            ),
            (f64::INFINITY, "inf", "inf"),
            (f64::NEG_INFINITY, "-inf", "-inf"),
        ];
        for (n, g14, g17) in cases {
            assert_eq!(printf_g(n, 14), g14, "{n} at %.14g");
            assert_eq!(printf_g(n, 17), g17, "{n} at %.17g");
        }
        assert_eq!(printf_g(f64::NAN, 17), "nan");
        assert_eq!(printf_g(-f64::NAN, 17), "-nan");
    }

    /// What a fresh interpreter holds once collected: Lua's own libraries, Redis's
    /// (`redis`, `bit`, `cjson`, `cmsgpack`, `struct`) and the sandbox. It was about 92 KB
    /// while each library function compiled its own copy of its Lua wrapper, 66 KB since
    /// they share one; Redis's `unit/scripting` wants `used_memory_lua` under 100 KB after
    /// ten thousand runs, which leaves this much room for their garbage.
    #[test]
    fn a_fresh_interpreter_is_small() {
        let scripting = Scripting::new().unwrap();
        // Twice: the first call may only finish a cycle already under way.
        scripting.lua.gc_collect().unwrap();
        scripting.lua.gc_collect().unwrap();
        let used = scripting.used_memory();
        assert!(used < 72 * 1024, "a fresh interpreter holds {used} bytes");
    }

    #[test]
    fn sha1_matches_redis() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }
}
