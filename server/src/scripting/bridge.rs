//! `redis.call` and `redis.pcall`: the bridge from a running script to the command table,
//! written against the Lua C API.
//!
//! A lock script calls into the server once or twice per run, so this bridge is on the hot
//! path of every `EVALSHA`. mlua's general callbacks would box each argument as a registry
//! reference, collect them in a `MultiValue`, take mlua's lock for each value and do the same
//! again for the reply; here the arguments are read straight off the Lua stack and the reply
//! is pushed straight onto it.
//!
//! The price is care about Lua errors. Lua 5.1 raises an error with `longjmp`, which skips
//! Rust destructors, so this code raises one (`lua_error`) only from a frame that holds no
//! Rust value with a destructor. Tables are only keyed by integers and non-nil values, so
//! setting a field cannot raise; but the interpreter has a memory limit, so creating a table
//! or a string can (Lua's memory error): the reply is converted inside `lua_cpcall`, where
//! the Rust side holds only borrowed data, and an error table's text is copied to the stack
//! first.

use std::os::raw::c_int;

use bytes::Bytes;
use mlua::ffi;

use super::RUN;
use crate::command as cmd;
use crate::frame::{format_double, Frame};

/// How a bridge call turned out: a reply to push, or the error text `redis.call` raises (as
/// `{err = text}`) and `redis.pcall` returns (as the same table).
enum Outcome {
    Reply(Frame, bool),
    /// The command failed, or was refused by the checks a script's call goes through: counted
    /// in the error statistics now, and marked so that the script's own reply does not count
    /// it again (see [`crate::errorstats`]).
    Error(Bytes),
    /// The call's arguments were not a call at all (none, or not strings and numbers): no
    /// command was tried, so nothing is counted until the script replies.
    Refused(Bytes),
    /// The script was killed (`SCRIPT KILL`): raised even by `redis.pcall`.
    Killed,
}

/// `redis.call(...)`: runs a command; a failure raises `{err = text}` as a Lua error, which
/// the script's error handler turns into Redis's script error reply.
///
/// Being a C function matters for the error's line: Lua 5.1 does not drop the caller's
/// frame on a tail call into C, so `return redis.call(...)` still reports the script's line.
pub(super) unsafe extern "C-unwind" fn lua_redis_call(state: *mut ffi::lua_State) -> c_int {
    match push_outcome(state) {
        Pushed::Reply => 1,
        // The error is on the stack and nothing of Rust's is alive here: raise it.
        Pushed::ErrorTable | Pushed::OutOfMemory | Pushed::Killed => ffi::lua_error(state),
    }
}

/// `redis.pcall(...)`: like `redis.call`, but a failure is returned as `{err = text}`.
pub(super) unsafe extern "C-unwind" fn lua_redis_pcall(state: *mut ffi::lua_State) -> c_int {
    match push_outcome(state) {
        Pushed::Reply | Pushed::ErrorTable => 1,
        // The interpreter is at its memory limit: that is the script's error, as when any
        // other allocation of its fails. A killed script stops, whatever it calls with.
        Pushed::OutOfMemory | Pushed::Killed => ffi::lua_error(state),
    }
}

/// What [`push_outcome`] left on the stack.
enum Pushed {
    /// The converted reply.
    Reply,
    /// `{err = text}`.
    ErrorTable,
    /// Lua's memory error: the reply did not fit under the interpreter's memory limit.
    OutOfMemory,
    /// `{err = <the kill message>}`: the script was killed.
    Killed,
}

/// Runs the call whose arguments are on the stack and pushes one value. Everything with a
/// destructor is dropped before this returns.
///
/// The reply is converted in protected mode (`lua_cpcall`): with a memory limit, any table
/// or string Lua creates may fail, and Lua fails by `longjmp`, which must not cross a Rust
/// frame that owns the reply (its destructors would never run). Inside the protected call
/// only borrowed data is on the Rust side; the result waits in the registry until the
/// reply is dropped.
unsafe fn push_outcome(state: *mut ffi::lua_State) -> Pushed {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call(state)))
        .unwrap_or_else(|_| Outcome::Error(Bytes::from_static(b"ERR internal error")));
    let text = match outcome {
        // Most calls of a lock script answer a number or nil: pushed as they are, since
        // pushing one needs no allocation (a C function is given room for twenty values) and
        // so cannot fail, while the protected call costs a new C closure in Lua 5.1.
        Outcome::Reply(frame, resp3) if push_scalar(state, &frame, resp3) => return Pushed::Reply,
        Outcome::Reply(frame, resp3) => {
            let mut job = PushJob {
                frame: &frame,
                resp3,
                pushed: false,
            };
            let status = ffi::lua_cpcall(state, push_protected, std::ptr::addr_of_mut!(job).cast());
            let pushed = job.pushed;
            drop(frame);
            if status != 0 {
                // Lua's error object is on the stack. The part of the reply already
                // converted is garbage now: collect it, so that the script (which may catch
                // the error) and its own reply have room again.
                ffi::lua_gc(state, ffi::LUA_GCCOLLECT, 0);
                return Pushed::OutOfMemory;
            }
            if pushed {
                // Take the value out of the registry (no allocation: the key exists).
                ffi::lua_pushlightuserdata(state, pushed_key());
                ffi::lua_rawget(state, ffi::LUA_REGISTRYINDEX);
                ffi::lua_pushlightuserdata(state, pushed_key());
                ffi::lua_pushnil(state);
                ffi::lua_rawset(state, ffi::LUA_REGISTRYINDEX);
                return Pushed::Reply;
            }
            // Nested too deep for the Lua stack (no command replies like that).
            Bytes::from_static(b"ERR reply too deeply nested for Lua")
        }
        Outcome::Error(text) => {
            count_error(&text);
            text
        }
        Outcome::Refused(text) => {
            push_error_table(state, &text, false);
            return Pushed::ErrorTable;
        }
        Outcome::Killed => {
            push_error_table(state, KILLED.as_bytes(), false);
            return Pushed::Killed;
        }
    };
    // An error text is short; copied to the stack so that no Rust value is alive should
    // the table's allocation fail.
    let mut buf = [0u8; 512];
    let n = text.len().min(buf.len());
    buf[..n].copy_from_slice(&text[..n]);
    let long = (text.len() > buf.len()).then(|| text.clone());
    drop(text);
    match long {
        // A long error text (rare: most are one line) is pushed from its own allocation.
        Some(long) => push_error_table(state, &long, true),
        None => push_error_table(state, &buf[..n], true),
    }
    Pushed::ErrorTable
}

/// The registry key under which [`push_protected`] leaves the converted reply: the address
/// of a static, unique to this module.
fn pushed_key() -> *mut std::os::raw::c_void {
    static KEY: u8 = 0;
    std::ptr::addr_of!(KEY).cast_mut().cast()
}

/// A reply to convert in protected mode.
struct PushJob<'a> {
    frame: &'a Frame,
    resp3: bool,
    pushed: bool,
}

/// Converts the [`PushJob`] passed as light userdata and stores the result in the registry
/// under [`pushed_key`]. Holds only borrowed data, so a memory error may unwind through it.
unsafe extern "C-unwind" fn push_protected(state: *mut ffi::lua_State) -> c_int {
    let job = &mut *ffi::lua_touserdata(state, 1).cast::<PushJob>();
    ffi::lua_pushlightuserdata(state, pushed_key());
    if push_frame(state, job.frame, job.resp3) {
        ffi::lua_rawset(state, ffi::LUA_REGISTRYINDEX);
        job.pushed = true;
    }
    0
}

/// Pushes `{err = text}`, with `ignore_error_stats_update = true` when the error was counted
/// already (Redis's field of the same name, which a script can see too).
unsafe fn push_error_table(state: *mut ffi::lua_State, text: &[u8], counted: bool) {
    ffi::lua_createtable(state, 0, 2);
    ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
    ffi::lua_setfield(state, -2, c"err".as_ptr());
    if counted {
        ffi::lua_pushboolean(state, 1);
        ffi::lua_setfield(state, -2, c"ignore_error_stats_update".as_ptr());
    }
}

/// Counts a failed call in the error statistics of the server whose script runs.
fn count_error(text: &[u8]) {
    RUN.with(|r| {
        if let Some(run) = r.borrow().as_ref() {
            // SAFETY: see `Scripting::execute`: the context outlives the run record.
            let ctx: &cmd::Ctx<'static> = unsafe { &*run.ctx };
            ctx.shared.stats.errors.count(text);
        }
    });
}

/// The error a killed script meets, as the error handler shapes a Rust error (`ERR ...`).
const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

fn fail(msg: &'static str) -> Outcome {
    Outcome::Error(Bytes::from_static(msg.as_bytes()))
}

fn refuse(msg: &'static str) -> Outcome {
    Outcome::Refused(Bytes::from_static(msg.as_bytes()))
}

/// Reads the arguments, checks them the way Redis does for a script, and runs the command.
unsafe fn call(state: *mut ffi::lua_State) -> Outcome {
    let argc = ffi::lua_gettop(state);
    if argc <= 0 {
        return refuse("ERR Please specify at least one argument for this redis lib call");
    }
    let mut argv = Vec::with_capacity(argc as usize);
    for i in 1..=argc {
        match ffi::lua_type(state, i) {
            ffi::LUA_TSTRING => {
                let mut len = 0usize;
                let ptr = ffi::lua_tolstring(state, i, &mut len);
                argv.push(super::shared_argument(std::slice::from_raw_parts(
                    ptr.cast::<u8>(),
                    len,
                )));
            }
            ffi::LUA_TNUMBER => argv.push(number_argument(ffi::lua_tonumber(state, i))),
            _ => return refuse("ERR Lua redis lib command arguments must be strings or integers"),
        }
    }
    RUN.with(|r| {
        let mut guard = r.borrow_mut();
        let Some(run) = guard.as_mut() else {
            return refuse("ERR redis.call is only available while a script runs");
        };
        // SAFETY: see `Scripting::execute`: the context outlives the run record.
        let ctx: &mut cmd::Ctx<'static> = &mut *run.ctx;
        let Some(spec) = crate::command::lookup(&argv[0]) else {
            return fail("ERR Unknown Redis command called from script");
        };
        let refused = |outcome: Outcome| {
            crate::dispatch::count_refusal(ctx.shared, spec, &argv);
            outcome
        };
        if !spec.arity_ok(argv.len()) {
            return refused(fail(
                "ERR Wrong number of args calling Redis command from script",
            ));
        }
        // `SCRIPT KILL` takes effect here too, not only in the instruction hook: a loop of
        // slow calls runs too few instructions for the hook to fire for a long time.
        let kill = &ctx.shared.scripting().kill;
        if kill.is_killed() {
            return Outcome::Killed;
        }
        let deny_disabled = ctx
            .shared
            .script_deny_disabled
            .load(std::sync::atomic::Ordering::Relaxed);
        if let Some(refusal) = spec.script_refusal(&argv, deny_disabled) {
            return refused(fail(refusal));
        }
        // The script runs as its caller's ACL user (one load when that user may do anything).
        if !ctx.client.user.unrestricted() {
            let context = crate::acl::log::Context::Lua;
            if let Err((denied, _)) =
                crate::dispatch::acl_check(ctx.shared, ctx.client, &argv, context)
            {
                let text = format!("ERR The user executing the script {}", denied.message());
                return refused(Outcome::Error(Bytes::from(text)));
            }
        }
        if spec.has(cmd::WRITE) {
            if run.read_only {
                return refused(fail(
                    "ERR Write commands are not allowed from read-only scripts.",
                ));
            }
            if let Some(err) = ctx.shared.precheck(ctx.client, spec) {
                return refused(match err {
                    Frame::Error(e) => Outcome::Error(e),
                    _ => fail("ERR execution failure"),
                });
            }
            if !run.allow_oom {
                if let Some(oom) = crate::oom::check_script_call(ctx, spec, run.wrote) {
                    return refused(Outcome::Error(Bytes::from(oom)));
                }
            }
            // The first write and a kill exclude each other (see `kill`).
            if !kill.note_write() {
                return Outcome::Killed;
            }
            run.wrote = true;
        }
        let resp3 = run.resp3;
        // The command may run a script-visible hook (`redis.setresp` cannot, but be safe):
        // never hold the run record across it.
        drop(guard);
        let dirty_before = ctx.dirty;
        // A script that has already run long hands its worker away before the next command,
        // and one whose command was slow does so right after (see `crate::hand_off`): slow
        // commands run no Lua instructions for the hook to count. A command about to walk a
        // large collection or the keyspace hands off before it runs (in `call_spec`).
        crate::hand_off::if_long();
        let reply = crate::dispatch::call_spec(ctx, spec, &argv);
        crate::hand_off::if_long();
        if ctx.dirty > dirty_before {
            super::record_effect(argv);
        }
        match reply {
            Frame::Error(e) => Outcome::Error(e),
            other => Outcome::Reply(other, resp3),
        }
    })
}

/// `redis.acl_check_cmd(...)`: whether the ACL user of the script's caller may run the
/// command (Redis's `luaRedisAclCheckCmdPermissionsCommand`); `Err` with the text to raise.
pub(super) fn acl_check_cmd(argv: &[Bytes]) -> Result<bool, &'static str> {
    RUN.with(|r| {
        let guard = r.borrow();
        let Some(run) = guard.as_ref() else {
            return Err("redis.acl_check_cmd can only be called inside a script invocation");
        };
        // SAFETY: see `Scripting::execute`: the context outlives the run record.
        let ctx: &cmd::Ctx<'static> = unsafe { &*run.ctx };
        let id = crate::acl::commands::find(argv)
            .ok_or("Invalid command passed to redis.acl_check_cmd()")?;
        Ok(ctx.client.user.check(id, argv).is_ok())
    })
}

/// A script's argument (a string, or a number written as Redis writes it), `None` for any
/// other type.
pub(super) fn lua_argument(v: &mlua::Value) -> Option<Bytes> {
    match v {
        mlua::Value::String(s) => Some(Bytes::copy_from_slice(&s.as_bytes())),
        mlua::Value::Integer(i) => Some(number_argument(*i as f64)),
        mlua::Value::Number(n) => Some(number_argument(*n)),
        _ => None,
    }
}

/// A number passed as an argument, as text: as Redis 7.0 writes it, with `%.17g`. Whole
/// numbers below 10^17 print as integers then, and take a shorter path here.
fn number_argument(n: f64) -> Bytes {
    if n.trunc() == n && n.abs() < 1e17 && !(n == 0.0 && n.is_sign_negative()) {
        let mut buf = itoa::Buffer::new();
        return Bytes::copy_from_slice(buf.format(n as i64).as_bytes());
    }
    Bytes::from(super::printf_g(n, 17))
}

/// Pushes the Lua value of a reply that is a number, a null or a boolean (nothing Lua
/// allocates for) and returns true; returns false, having pushed nothing, for any other reply.
/// The values are [`push_frame`]'s.
unsafe fn push_scalar(state: *mut ffi::lua_State, f: &Frame, resp3: bool) -> bool {
    match f {
        Frame::Integer(i) => ffi::lua_pushnumber(state, *i as f64),
        Frame::Null | Frame::NullArray if resp3 => ffi::lua_pushnil(state),
        Frame::Null | Frame::NullArray => ffi::lua_pushboolean(state, 0),
        Frame::Boolean(b) if resp3 => ffi::lua_pushboolean(state, *b as c_int),
        Frame::Boolean(b) => ffi::lua_pushnumber(state, *b as i64 as f64),
        _ => return false,
    }
    true
}

/// Pushes the Lua value a script sees for a reply, following Redis's rules for RESP2 or,
/// after `redis.setresp(3)`, RESP3. Returns false (having pushed nothing) when the Lua stack
/// cannot grow for a deeply nested reply.
unsafe fn push_frame(state: *mut ffi::lua_State, f: &Frame, resp3: bool) -> bool {
    // Room for a table, a key and a value at this level.
    if ffi::lua_checkstack(state, 4) == 0 {
        return false;
    }
    let push_bytes = |b: &[u8]| {
        ffi::lua_pushlstring(state, b.as_ptr().cast(), b.len());
    };
    // `{name = value}` where `value` is pushed by `push_value`.
    let wrapped = |name: &std::ffi::CStr, push_value: &dyn Fn() -> bool| -> bool {
        ffi::lua_createtable(state, 0, 1);
        if !push_value() {
            ffi::lua_pop(state, 1);
            return false;
        }
        ffi::lua_setfield(state, -2, name.as_ptr());
        true
    };
    match f {
        Frame::Integer(i) => ffi::lua_pushnumber(state, *i as f64),
        Frame::Bulk(b) => push_bytes(b),
        Frame::Null | Frame::NullArray if resp3 => ffi::lua_pushnil(state),
        Frame::Null | Frame::NullArray => ffi::lua_pushboolean(state, 0),
        Frame::Simple(s) => {
            return wrapped(c"ok", &|| {
                push_bytes(s);
                true
            })
        }
        Frame::Error(e) => {
            return wrapped(c"err", &|| {
                push_bytes(e);
                true
            })
        }
        Frame::Array(items) | Frame::Push(items) | Frame::Multi(items) => {
            return push_array(state, items.iter(), items.len(), resp3)
        }
        Frame::Set(items) if resp3 => {
            return wrapped(c"set", &|| {
                // Grown as Redis grows it (from empty), so that `pairs` walks the members
                // in the order a script on redis-server sees.
                ffi::lua_createtable(state, 0, 0);
                for item in items {
                    if !push_key(state, item, resp3) {
                        continue;
                    }
                    ffi::lua_pushboolean(state, 1);
                    ffi::lua_rawset(state, -3);
                }
                true
            });
        }
        Frame::Set(items) => return push_array(state, items.iter(), items.len(), resp3),
        Frame::Map(pairs) if resp3 => {
            return wrapped(c"map", &|| {
                // From empty, as Redis builds it: the walk order of `pairs` is the same.
                ffi::lua_createtable(state, 0, 0);
                for (k, v) in pairs {
                    if !push_key(state, k, resp3) {
                        continue;
                    }
                    if !push_frame(state, v, resp3) {
                        ffi::lua_pop(state, 2);
                        return false;
                    }
                    ffi::lua_rawset(state, -3);
                }
                true
            });
        }
        Frame::Map(pairs) => {
            ffi::lua_createtable(state, (pairs.len() * 2) as c_int, 0);
            let mut i = 0;
            for (k, v) in pairs {
                for item in [k, v] {
                    if !push_frame(state, item, resp3) {
                        ffi::lua_pop(state, 1);
                        return false;
                    }
                    i += 1;
                    ffi::lua_rawseti(state, -2, i);
                }
            }
        }
        Frame::Double(d) if resp3 => {
            return wrapped(c"double", &|| {
                ffi::lua_pushnumber(state, *d);
                true
            })
        }
        Frame::Double(d) => push_bytes(format_double(*d).as_bytes()),
        Frame::Boolean(b) if resp3 => ffi::lua_pushboolean(state, *b as c_int),
        Frame::Boolean(b) => ffi::lua_pushnumber(state, *b as i64 as f64),
        Frame::Verbatim(text) if resp3 => {
            return wrapped(c"verbatim_string", &|| {
                ffi::lua_createtable(state, 0, 2);
                push_bytes(b"txt");
                ffi::lua_setfield(state, -2, c"format".as_ptr());
                push_bytes(text);
                ffi::lua_setfield(state, -2, c"string".as_ptr());
                true
            })
        }
        Frame::BigNumber(digits) if resp3 => {
            return wrapped(c"big_number", &|| {
                push_bytes(digits);
                true
            })
        }
        // A script is not shown a reply's attributes (Redis 7.0 skips them too), only the
        // reply itself.
        Frame::Attribute(_, reply) => return push_frame(state, reply, resp3),
        Frame::Verbatim(text) | Frame::Raw(text) | Frame::BigNumber(text) => push_bytes(text),
    }
    true
}

/// Pushes `items` as a Lua array.
unsafe fn push_array<'a>(
    state: *mut ffi::lua_State,
    items: impl Iterator<Item = &'a Frame>,
    len: usize,
    resp3: bool,
) -> bool {
    ffi::lua_createtable(state, len as c_int, 0);
    for (i, item) in items.enumerate() {
        if !push_frame(state, item, resp3) {
            ffi::lua_pop(state, 1);
            return false;
        }
        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
    }
    true
}

/// Pushes a reply used as a table key (a RESP3 set member or map key). Returns false, having
/// pushed nothing, for one that would convert to nil or NaN: Lua refuses those as keys (with
/// an error this bridge must not raise), so such an entry is left out.
unsafe fn push_key(state: *mut ffi::lua_State, f: &Frame, resp3: bool) -> bool {
    let unusable = match f {
        Frame::Null | Frame::NullArray => resp3,
        _ => false,
    };
    if unusable || !push_frame(state, f, resp3) {
        return false;
    }
    if ffi::lua_type(state, -1) == ffi::LUA_TNUMBER && ffi::lua_tonumber(state, -1).is_nan() {
        ffi::lua_pop(state, 1);
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use crate::{Frame, Server};

    fn bulk(s: &str) -> Frame {
        Frame::Bulk(bytes::Bytes::copy_from_slice(s.as_bytes()))
    }

    /// What a script sees of replies and errors, and what the server answers for it: the
    /// shapes Redis 7 gives (checked against `redis-server` 7.0 by hand).
    #[tokio::test]
    async fn replies_and_errors_cross_the_bridge_as_in_redis() {
        let server = Server::builder().no_listener().start().await.unwrap();
        let mut c = server.client();
        let eval = |body: &'static str| ["EVAL", body, "1", "k1", "a1"];
        // Numbers as arguments: integral ones print as integers, others like Lua.
        assert_eq!(
            c.cmd(eval("return redis.call('set', 'n', 1.5)")).await,
            Frame::ok()
        );
        assert_eq!(
            c.cmd(eval("return redis.call('get', 'n')")).await,
            bulk("1.5")
        );
        c.cmd(eval("return redis.call('set', 'n', 42)")).await;
        assert_eq!(
            c.cmd(eval("return redis.call('get', 'n')")).await,
            bulk("42")
        );
        // A missing key is false in RESP2 and nil after setresp(3).
        assert_eq!(
            c.cmd(eval("return type(redis.call('get', 'none'))")).await,
            bulk("boolean")
        );
        assert_eq!(
            c.cmd(eval(
                "redis.setresp(3); return type(redis.call('get', 'none'))"
            ))
            .await,
            bulk("nil")
        );
        // Integers, status replies and nesting.
        assert_eq!(
            c.cmd(eval(
                "local t = redis.call('ping'); return {redis.call('incr', 'n'), t.ok, {KEYS[1], ARGV[1]}}"
            ))
            .await,
            Frame::Array(vec![
                Frame::Integer(43),
                bulk("PONG"),
                Frame::Array(vec![bulk("k1"), bulk("a1")]),
            ])
        );
        // RESP3 maps arrive as {map = {...}}.
        c.cmd(["HSET", "h", "f", "v"]).await;
        assert_eq!(
            c.cmd(eval(
                "redis.setresp(3); return redis.call('hgetall', 'h').map.f"
            ))
            .await,
            bulk("v")
        );
        // redis.call raises with the script's line; redis.pcall returns the error table.
        let Frame::Error(e) = c.cmd(eval("\nreturn redis.call('lpush', 'n', 'x')")).await else {
            panic!("an error");
        };
        assert!(
            e.starts_with(
                b"WRONGTYPE Operation against a key holding the wrong kind of value script: "
            ) && e.ends_with(b", on @user_script:2."),
            "{}",
            String::from_utf8_lossy(&e)
        );
        assert_eq!(
            c.cmd(eval("return redis.pcall('nosuch').err")).await,
            bulk("ERR Unknown Redis command called from script")
        );
        assert_eq!(
            c.cmd(eval("return redis.pcall({}).err")).await,
            bulk("ERR Lua redis lib command arguments must be strings or integers")
        );
        // The sandbox: no new globals, no unknown ones, libraries read-only.
        for (body, text) in [
            (
                "return x",
                "Script attempted to access nonexistent global variable 'x'",
            ),
            ("x = 1", "Attempt to modify a readonly table"),
            ("string.x = 1", "Attempt to modify a readonly table"),
        ] {
            let Frame::Error(e) = c.cmd(eval(body)).await else {
                panic!("an error for {body}");
            };
            let e = String::from_utf8_lossy(&e);
            assert!(
                e.starts_with(&format!("ERR user_script:1: {text} script: ")),
                "{e}"
            );
        }
        // Globals still read through: the libraries and KEYS/ARGV of this run.
        assert_eq!(
            c.cmd(eval("return string.upper(ARGV[1]) .. #KEYS")).await,
            bulk("A11")
        );
    }
}
