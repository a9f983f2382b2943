//! The libraries a script sees besides Lua's own: the `redis` table and `bit`; and the
//! plumbing every library function shares (arguments, results, Lua-shaped failures).

use std::os::raw::c_int;

use mlua::{ffi, Lua, MultiValue, Table, Value};

/// Fills the `redis` table with everything except `call`/`pcall` (added by the prelude).
pub(crate) fn install_redis_table(lua: &Lua, redis: &Table) -> mlua::Result<()> {
    // SAFETY: `sha1hex` only uses the Lua C API on the state it is given, and raises a Lua
    // error only while no Rust value with a destructor is alive in its frame.
    redis.raw_set("sha1hex", unsafe { lua.create_c_function(sha1hex)? })?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| {
            let t = lua.create_table()?;
            match one_string(&args) {
                Some(s) => t.raw_set("err", lua.create_string(error_text(&s.as_bytes()))?)?,
                None => t.raw_set("err", WRONG_ARGUMENTS)?,
            }
            Ok(t)
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, args: MultiValue| {
            let t = lua.create_table()?;
            match one_string(&args) {
                Some(s) => t.raw_set("ok", s.clone())?,
                None => t.raw_set("err", WRONG_ARGUMENTS)?,
            }
            Ok(t)
        })?,
    )?;
    // The server version a script may test (Redis 7's `redis.REDIS_VERSION`, and as a
    // number `0x00MMmmpp`).
    redis.raw_set("REDIS_VERSION", crate::config::REDIS_VERSION)?;
    let num = crate::config::REDIS_VERSION
        .split('.')
        .map(|p| p.parse::<i64>().unwrap_or(0))
        .fold(0i64, |acc, p| (acc << 8) | p);
    redis.raw_set("REDIS_VERSION_NUM", num)?;
    for (name, level) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
    ] {
        redis.raw_set(name, level)?;
    }
    redis.raw_set(
        "log",
        variadic(lua, |_, args| {
            if args.len() < 2 {
                return Err(mlua::Error::RuntimeError(
                    "redis.log() requires two arguments or more.".into(),
                ));
            }
            let mut it = args.iter();
            let level = match it.next() {
                Some(Value::Integer(i)) => i,
                Some(Value::Number(n)) => n as i64,
                _ => {
                    return Err(mlua::Error::RuntimeError(
                        "First argument must be a number (log level).".into(),
                    ))
                }
            };
            let text: Vec<String> = it
                .map(|v| match v {
                    Value::String(s) => s.to_string_lossy().to_string(),
                    Value::Integer(i) => i.to_string(),
                    Value::Number(n) => n.to_string(),
                    _ => String::new(),
                })
                .collect();
            let text = text.join(" ");
            match level {
                0 => tracing::debug!(target: "lua", "{text}"),
                1 | 2 => tracing::info!(target: "lua", "{text}"),
                _ => tracing::warn!(target: "lua", "{text}"),
            }
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "setresp",
        lua.create_function(|_, v: Value| {
            let n = match v {
                Value::Integer(i) => i,
                Value::Number(n) => n as i64,
                _ => 0,
            };
            if n != 2 && n != 3 {
                return Err(mlua::Error::RuntimeError(
                    "RESP version must be 2 or 3.".into(),
                ));
            }
            super::set_resp(n == 3);
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "acl_check_cmd",
        lua.create_function(|_, args: MultiValue| {
            if args.is_empty() {
                return Err(mlua::Error::RuntimeError(
                    "Please specify at least one argument for this redis lib call".into(),
                ));
            }
            let argv = args
                .iter()
                .map(super::bridge::lua_argument)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    mlua::Error::RuntimeError(
                        "Lua redis lib command arguments must be strings or integers".into(),
                    )
                })?;
            super::bridge::acl_check_cmd(&argv).map_err(|e| mlua::Error::RuntimeError(e.into()))
        })?,
    )?;
    // Redis 7 always replicates effects: this is a no-op kept for old scripts.
    redis.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    for (name, v) in [
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.raw_set(name, v)?;
    }
    redis.raw_set("set_repl", lua.create_function(|_, _v: Value| Ok(()))?)?;
    redis.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.raw_set("debug", variadic(lua, |_, _args| Ok(()))?)?;
    Ok(())
}

/// What `redis.error_reply` and `redis.status_reply` answer for anything but one string.
const WRONG_ARGUMENTS: &str = "ERR wrong number or type of arguments";

/// The one argument when it is a string (a number does not count, as in Redis).
fn one_string(args: &MultiValue) -> Option<&mlua::String> {
    match (args.len(), args.front()) {
        (1, Some(Value::String(s))) => Some(s),
        _ => None,
    }
}

/// The `err` text of `redis.error_reply(text)`, as Redis 7.0 shapes it: a leading `-` is
/// implied; the first word is the error code (`ERR` when there is a single word); line
/// breaks around the message are trimmed.
fn error_text(text: &[u8]) -> Vec<u8> {
    let text = text.strip_prefix(b"-").unwrap_or(text);
    let (code, msg): (&[u8], &[u8]) = match text.iter().position(|&b| b == b' ') {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => (b"ERR", text),
    };
    let is_break = |b: &u8| *b == b'\r' || *b == b'\n';
    let start = msg.iter().position(|b| !is_break(b)).unwrap_or(msg.len());
    let end = msg
        .iter()
        .rposition(|b| !is_break(b))
        .map_or(start, |i| i + 1);
    [code, b" ", &msg[start..end]].concat()
}

/// `redis.sha1hex(text)`: the SHA1 of a string (or of a number as text; of nothing for any
/// other value), lowercase hex. A call without exactly one argument raises Redis's error
/// reply. A C function, so that a tail call (`return redis.sha1hex()`) keeps the script's
/// position for the error, and the digest is kept on the stack.
///
/// # Safety
/// Called by Lua only. Holds no value with a destructor when it raises.
unsafe extern "C-unwind" fn sha1hex(state: *mut ffi::lua_State) -> c_int {
    use sha1::{Digest, Sha1};
    if ffi::lua_gettop(state) != 1 {
        ffi::lua_createtable(state, 0, 1);
        ffi::lua_pushstring(state, c"err".as_ptr());
        ffi::lua_pushstring(state, c"ERR wrong number of arguments".as_ptr());
        ffi::lua_rawset(state, -3);
        ffi::lua_error(state);
    }
    let mut len = 0usize;
    let ptr = ffi::lua_tolstring(state, 1, &mut len);
    let bytes = if ptr.is_null() {
        &[][..]
    } else {
        std::slice::from_raw_parts(ptr.cast::<u8>(), len)
    };
    let digest: [u8; 20] = Sha1::digest(bytes).into();
    let mut hex = [0u8; 40];
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in digest.iter().enumerate() {
        hex[2 * i] = DIGITS[usize::from(b >> 4)];
        hex[2 * i + 1] = DIGITS[usize::from(b & 15)];
    }
    ffi::lua_pushlstring(state, hex.as_ptr().cast(), hex.len());
    1
}

fn to_bit(v: f64) -> i32 {
    // LuaBitOp normalises any number to a 32-bit integer modulo 2^32.
    let m = v.rem_euclid(4294967296.0);
    (m as u64 as u32) as i32
}

fn num(v: &Value) -> mlua::Result<f64> {
    match v {
        Value::Integer(i) => Ok(*i as f64),
        Value::Number(n) => Ok(*n),
        Value::String(s) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .ok_or_else(|| mlua::Error::RuntimeError("bad argument (number expected)".into())),
        _ => Err(mlua::Error::RuntimeError(
            "bad argument (number expected)".into(),
        )),
    }
}

/// The `bit` library (LuaBitOp) that Redis bundles: 32-bit operations on numbers.
pub(crate) fn bit_library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let fold = |lua: &Lua, f: fn(i32, i32) -> i32| {
        variadic(lua, move |_, args| {
            let mut acc: Option<i32> = None;
            for a in args.iter() {
                let b = to_bit(num(&a)?);
                acc = Some(match acc {
                    None => b,
                    Some(x) => f(x, b),
                });
            }
            Ok(acc.unwrap_or(0) as f64)
        })
    };
    t.raw_set("band", fold(lua, |a, b| a & b)?)?;
    t.raw_set("bor", fold(lua, |a, b| a | b)?)?;
    t.raw_set("bxor", fold(lua, |a, b| a ^ b)?)?;
    t.raw_set(
        "tobit",
        lua.create_function(|_, v: Value| Ok(to_bit(num(&v)?) as f64))?,
    )?;
    t.raw_set(
        "bnot",
        lua.create_function(|_, v: Value| Ok(!to_bit(num(&v)?) as f64))?,
    )?;
    let shift = |lua: &Lua, f: fn(i32, u32) -> i32| {
        lua.create_function(move |_, (v, n): (Value, Value)| {
            Ok(f(to_bit(num(&v)?), (to_bit(num(&n)?) & 31) as u32) as f64)
        })
    };
    t.raw_set("lshift", shift(lua, |a, n| ((a as u32) << n) as i32)?)?;
    t.raw_set("rshift", shift(lua, |a, n| ((a as u32) >> n) as i32)?)?;
    t.raw_set("arshift", shift(lua, |a, n| a >> n)?)?;
    t.raw_set("rol", shift(lua, |a, n| (a as u32).rotate_left(n) as i32)?)?;
    t.raw_set("ror", shift(lua, |a, n| (a as u32).rotate_right(n) as i32)?)?;
    t.raw_set(
        "bswap",
        lua.create_function(
            |_, v: Value| Ok((to_bit(num(&v)?) as u32).swap_bytes() as i32 as f64),
        )?,
    )?;
    t.raw_set(
        "tohex",
        lua.create_function(|_, (v, n): (Value, Option<Value>)| {
            let x = to_bit(num(&v)?) as u32;
            let n = match n {
                Some(n) => to_bit(num(&n)?),
                None => 8,
            };
            let width = n.unsigned_abs().min(8) as usize;
            let s = format!("{:08x}", x);
            let s = s[8 - width..].to_string();
            Ok(if n < 0 { s.to_uppercase() } else { s })
        })?,
    )?;
    Ok(t)
}

/// Lua 5.1's `LUAI_MAXCSTACK`: the most stack slots a C function may use, which bounds
/// how many values a library function can return or how deep Redis's recursive decoders go.
pub(crate) const LIBRARY_STACK_LIMIT: usize = 8000;

/// Why a library function failed: the message Lua raises, and whether it carries the
/// caller's position (`user_script:1: `) as C's `luaL_error` adds it, or none, as Lua's own
/// runtime errors (`table index is nil`) raised inside a C function have.
#[derive(Debug)]
pub(crate) struct Failure {
    message: String,
    with_position: bool,
}

impl Failure {
    /// A failure raised without a position.
    pub(crate) fn plain(message: &str) -> Failure {
        Failure {
            message: message.to_string(),
            with_position: false,
        }
    }

    /// The interpreter's memory limit was reached.
    pub(crate) fn memory() -> Failure {
        Failure::plain("not enough memory")
    }
}

impl From<mlua::Error> for Failure {
    fn from(e: mlua::Error) -> Failure {
        match e {
            mlua::Error::MemoryError(_) => Failure::memory(),
            mlua::Error::RuntimeError(m) => Failure::plain(&m),
            mlua::Error::CallbackError { cause, .. } => Failure::from((*cause).clone()),
            other => Failure::plain(&other.to_string()),
        }
    }
}

/// A failure raised like `luaL_error`, with the caller's position.
pub(crate) fn fail(message: &str) -> Failure {
    Failure {
        message: message.to_string(),
        with_position: true,
    }
}

/// Lua's name for the type of an argument (`no value` when it is missing).
pub(crate) fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(Value::LightUserData(_) | Value::UserData(_)) => "userdata",
        Some(_) => "userdata",
    }
}

/// A string as Lua 5.1 reads it as a number (`lua_tonumber`): decimal or `0x` hex, with
/// surrounding white space.
pub(crate) fn lua_str_to_number(s: &str) -> Option<f64> {
    let t = s.trim_matches(|c: char| c.is_ascii_whitespace());
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok().map(|v| v as f64);
    }
    if t.is_empty() || t.contains(|c: char| c.is_ascii_alphabetic() && !matches!(c, 'e' | 'E')) {
        return None;
    }
    t.parse::<f64>().ok()
}

/// The Lua side of [`lift`]: hands the arguments over as one table and their count (see
/// [`Args`]), and raises a failure as a plain Lua string error at the level the C original
/// would, so a script's `pcall` gets the same message Redis gives.
const LIFT_LUA: &str = r##"
local unpack, error, select, tonumber = unpack, error, select, tonumber
local getinfo, match = debug.getinfo, string.match
-- luaL_argerror names the function the way its caller called it: `encode` for
-- `cjson.encode(...)`, `f` for a local `f`, `?` when called by a C function such as `pcall`;
-- a method call does not count `self`. Level 3 is the C trampoline the script called.
local function renamed(message)
  local n, rest = match(message, "^bad argument #(%d+) to '[^']*' (.*)$")
  if not n then return message end
  local info = getinfo(3, 'n')
  local name = info and info.name or '?'
  n = tonumber(n)
  if info and info.namewhat == 'method' then
    n = n - 1
    if n == 0 then return "calling '" .. name .. "' on bad self " .. rest end
  end
  return "bad argument #" .. n .. " to '" .. name .. "' " .. rest
end
return function(f)
  return function(...)
    -- Not a tail call: `error(message, 3)` must name the trampoline's caller.
    local ok, a, b = f(select('#', ...), {...})
    if ok then return unpack(a, 1, a.n) end
    error(renamed(a), b)
  end
end
"##;

/// What a script calls for a [`lift`]ed function: a C function that calls the Lua wrapper
/// (its upvalue) with the same arguments and returns what it returns.
///
/// Being a C function matters. Lua 5.1 keeps the caller's frame on a tail call into C
/// (`return cjson.encode(x, y)`), so the error's position (`user_script:1:`) and the name
/// in `bad argument ... to 'encode'` are found as Redis's C libraries find them; a tail call
/// into a Lua function would erase both.
///
/// # Safety
/// Called by Lua only, as a closure with the wrapper as its one upvalue. It holds no Rust
/// value, so a Lua error may unwind (`longjmp`) through it.
unsafe extern "C-unwind" fn trampoline(state: *mut ffi::lua_State) -> c_int {
    let n = ffi::lua_gettop(state);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, n, ffi::LUA_MULTRET);
    ffi::lua_gettop(state)
}

/// The Lua side of [`variadic`]: the arguments as one table and their count.
const VARIADIC_LUA: &str = r#"
local select = select
return function(f)
  return function(...) return f(select('#', ...), {...}) end
end
"#;

/// How many library calls may be running inside one another. Each running call holds some of
/// mlua's handles (a few per level of the value it walks), and mlua has room for about 8000
/// in all and aborts the process past that. Today no library function calls back into Lua
/// (`cmsgpack.pack` reads array elements with `lua_gettable`, but only of tables whose
/// elements are all present, so `__index` never runs), so calls cannot nest: this bound is a
/// guard for tomorrow's library, failing with Lua's `C stack overflow` text.
const MAX_LIBRARY_NESTING: u32 = 32;

thread_local! {
    /// The library calls running now on this thread (see [`MAX_LIBRARY_NESTING`]).
    static LIBRARY_NESTING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Counts one running library call for as long as it lives.
struct Nested;

impl Nested {
    fn enter() -> Option<Nested> {
        LIBRARY_NESTING.with(|n| {
            if n.get() >= MAX_LIBRARY_NESTING {
                None
            } else {
                n.set(n.get() + 1);
                Some(Nested)
            }
        })
    }
}

impl Drop for Nested {
    fn drop(&mut self) {
        LIBRARY_NESTING.with(|n| n.set(n.get().saturating_sub(1)));
    }
}

/// The arguments of a library function: a Lua table holding them at `1..=n`, and `n`.
///
/// mlua's usual way, a `MultiValue`, takes one of mlua's handles per argument, and a script
/// can pass thousands (`cmsgpack.pack(unpack(t))` with 7999 tables): past about 8000 live
/// handles mlua panics with "cannot create a Lua reference, out of auxiliary stack space",
/// which aborted the process. Here an argument takes a handle only while it is looked at.
pub(crate) struct Args {
    table: Table,
    n: usize,
}

impl Args {
    /// How many arguments were passed (trailing `nil`s included, as `select('#', ...)`).
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// Whether no argument was passed.
    pub(crate) fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The argument at `i` (from 0), `None` past the last one.
    pub(crate) fn get(&self, i: usize) -> Option<Value> {
        if i >= self.n {
            return None;
        }
        Some(self.table.raw_get(i + 1).unwrap_or(Value::Nil))
    }

    /// Every argument in order, each fetched when the iterator reaches it.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Value> + '_ {
        (0..self.n).map(|i| self.get(i).unwrap_or(Value::Nil))
    }
}

/// The function a wrapper chunk (`LIFT_LUA`, `VARIADIC_LUA`) returns, compiled the first
/// time it is asked for and kept in Lua's registry under `name` afterwards.
///
/// Every library function goes through one of these chunks, and compiling a chunk makes new
/// bytecode, constants and debug information: done once per function, the wrappers of the
/// libraries took about 30 KB of the interpreter's heap, where shared they take one copy
/// each and a closure per function.
fn compiled_once(lua: &Lua, name: &str, source: &str) -> mlua::Result<mlua::Function> {
    if let Ok(f) = lua.named_registry_value::<mlua::Function>(name) {
        return Ok(f);
    }
    let f: mlua::Function = lua.load(source).set_name("=latchkey").call(())?;
    lua.set_named_registry_value(name, f.clone())?;
    Ok(f)
}

/// Makes a Lua function out of `f` that takes any number of arguments as [`Args`].
pub(crate) fn variadic<F, R>(lua: &Lua, f: F) -> mlua::Result<mlua::Function>
where
    F: Fn(&Lua, Args) -> mlua::Result<R> + Send + 'static,
    R: mlua::IntoLuaMulti,
{
    let inner = lua.create_function(move |lua, (n, table): (i64, Table)| {
        let n = usize::try_from(n).unwrap_or(0);
        f(lua, Args { table, n })
    })?;
    compiled_once(lua, "latchkey.variadic", VARIADIC_LUA)?.call(inner)
}

/// Makes a library function out of `f`: its results are returned as they are, its
/// [`Failure`] is raised as Lua's `luaL_error` would raise it from a C function (a string,
/// prefixed with the calling script's position when it has one).
pub(crate) fn lift<F>(lua: &Lua, f: F) -> mlua::Result<mlua::Function>
where
    F: Fn(&Lua, Args) -> Result<Table, Failure> + Send + 'static,
{
    let inner = lua.create_function(move |lua, (n, table): (i64, Table)| {
        let args = Args {
            table,
            n: usize::try_from(n).unwrap_or(0),
        };
        let outcome = match Nested::enter() {
            Some(_nested) => f(lua, args),
            None => Err(fail("C stack overflow")),
        };
        Ok(match outcome {
            Ok(results) => MultiValue::from_iter([Value::Boolean(true), Value::Table(results)]),
            Err(failure) => MultiValue::from_iter([
                Value::Boolean(false),
                Value::String(lua.create_string(&failure.message)?),
                Value::Integer(if failure.with_position { 3 } else { 0 }),
            ]),
        })
    })?;
    let wrapper: mlua::Function = compiled_once(lua, "latchkey.lift", LIFT_LUA)?.call(inner)?;
    // SAFETY: the wrapper is the only value pushed; the closure replaces it with one value.
    unsafe {
        lua.exec_raw::<mlua::Function>(wrapper, |state| {
            ffi::lua_pushcclosure(state, trampoline, 1);
        })
    }
}

/// The results of a library function, as the table [`lift`] unpacks: `1..n` and `n`.
/// Results go into a Lua table as they are made, never into a Rust list of handles: mlua
/// has room for fewer live handles than a function may return values.
pub(crate) struct Results {
    table: Table,
    n: i64,
}

impl Results {
    pub(crate) fn new(lua: &Lua) -> Result<Results, Failure> {
        Ok(Results {
            table: lua.create_table().map_err(Failure::from)?,
            n: 0,
        })
    }

    pub(crate) fn push(&mut self, v: Value) -> Result<(), Failure> {
        self.n += 1;
        self.table.raw_set(self.n, v).map_err(Failure::from)
    }

    pub(crate) fn len(&self) -> usize {
        self.n as usize
    }

    /// The last result, removed.
    pub(crate) fn pop(&mut self) -> Result<Value, Failure> {
        let v: Value = self.table.raw_get(self.n).map_err(Failure::from)?;
        self.table
            .raw_set(self.n, Value::Nil)
            .map_err(Failure::from)?;
        self.n -= 1;
        Ok(v)
    }

    /// The last result.
    pub(crate) fn last(&self) -> Option<Value> {
        self.table.raw_get(self.n).ok()
    }

    pub(crate) fn finish(self) -> Result<Table, Failure> {
        self.table.raw_set("n", self.n).map_err(Failure::from)?;
        Ok(self.table)
    }

    /// One result.
    pub(crate) fn one(lua: &Lua, v: Value) -> Result<Table, Failure> {
        let mut r = Results::new(lua)?;
        r.push(v)?;
        r.finish()
    }
}
