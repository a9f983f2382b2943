//! The sandbox a script runs in: exactly the globals Redis 7.0 gives a script, all of them
//! read-only, and the few base functions that would otherwise reach around that.
//!
//! Redis 7.0 patches its Lua so that a table can be flagged read-only inside the VM. This
//! server uses a stock Lua 5.1 instead, so a read-only table is a *proxy*: an empty table whose
//! metatable reads through to the real one and refuses every assignment. Proxies alone leave
//! holes that the Redis flag does not have, and each is closed here by a wrapper:
//!
//! - `rawset(proxy, k, v)` would write into the proxy itself, creating a global that the next
//!   script (of any client) would see; `setmetatable(proxy, mt)` would replace the guard. Both
//!   refuse a read-only table with Redis's `Attempt to modify a readonly table`.
//! - `rawget`, `next` and `pairs` would see an empty proxy; they look through it instead.
//! - `loadstring` and `load` give the chunk they compile the *thread's* globals in Lua 5.1,
//!   which here are the interpreter's real globals (with `debug` in them): the compiled
//!   function gets the script's globals instead.
//! - Bytecode: Lua 5.1 loads a chunk starting with `"\27"` as precompiled bytecode, which can
//!   corrupt memory at will (CVE-2015-4335). Redis removed bytecode loading from its Lua, so
//!   such a chunk is parsed as text and fails on its first character. Here the chunk gets a
//!   leading space, which makes Lua parse it as text and fail the same way, on line 1 with
//!   `unexpected symbol near 'char(27)'`, as Redis does. The same applies to `EVAL` bodies.
//! - `unpack` is replaced by one that cannot overflow computing its count (CVE-2025-46817).
//! - The metatable strings share is made read-only too (CVE-2025-46818): otherwise one
//!   script could change what `("x"):upper()` does for every later script.
//! - The names given to chunks are kept alive for good: an unreferenced chunk name could be
//!   collected while the parser still uses it (the use-after-free of CVE-2025-49844).

use std::os::raw::c_int;

use mlua::{ffi, Function, Lua, Table};

/// The globals a Redis 7.0 script sees, as `pairs(_G)` lists them on redis-server 7.0.15,
/// except `KEYS` and `ARGV` (set for each run), `_G` (the globals view itself) and Redis's
/// internal `__redis__err__handler`. Each is copied from the interpreter's real globals; a
/// few are then replaced by [`Sandbox::install`]. `print`, `os`, `io`, `require`,
/// `loadfile`, `dofile`, `debug`, `newproxy`, `getfenv` and `setfenv` are absent, as in
/// Redis.
pub(crate) const GLOBALS: [&str; 31] = [
    "_VERSION",
    "assert",
    "bit",
    "cjson",
    "cmsgpack",
    "collectgarbage",
    "coroutine",
    "error",
    "gcinfo",
    "getmetatable",
    "ipairs",
    "load",
    "loadstring",
    "math",
    "next",
    "pairs",
    "pcall",
    "rawequal",
    "rawget",
    "rawset",
    "redis",
    "select",
    "setmetatable",
    "string",
    "struct",
    "table",
    "tonumber",
    "tostring",
    "type",
    "unpack",
    "xpcall",
];

/// The globals that are libraries: each is shown to scripts through a read-only view.
pub(crate) const LIBRARIES: [&str; 8] = [
    "string",
    "table",
    "math",
    "bit",
    "cjson",
    "cmsgpack",
    "struct",
    "coroutine",
];

/// Lua half of the sandbox. Runs once in the interpreter's real globals and returns the
/// functions the Rust half calls. Every wrapper calls the original through a local of the
/// original's name, so that argument errors name the function as Redis's do
/// (`bad argument #1 to 'rawset' ...`).
const SANDBOX_LUA: &str = r#"
local setmetatable, rawset, rawget, next, pairs = setmetatable, rawset, rawget, next, pairs
local loadstring, load, setfenv, type, error, sbyte = loadstring, load, setfenv, type, error, string.byte
local getmetatable, tostring, select = getmetatable, tostring, select

-- Chunk names the server compiles under, kept referenced for the life of the state, and
-- the field names the reply converter looks up (so that pushing them never allocates).
local anchors = {'=(load)', '@user_script', '@user_function', '=latchkey', '=?',
                 'err', 'ok', 'double', 'map', 'set', 'ignore_error_stats_update'}

local readonly, real_of = {}, {}

local function refuse()
  error('Attempt to modify a readonly table', 2)
end

local M = {anchors = anchors}

-- A read-only view of `real`.
function M.proxy(real)
  local p = setmetatable({}, {__index = real, __newindex = refuse, __metatable = false})
  readonly[p] = true
  real_of[p] = real
  return p
end

-- Installs the wrappers into `visible` (the table behind the globals proxy `env`).
function M.install(visible, env)
  local function sandbox_next(t, k)
    local r = real_of[t]
    if r ~= nil then t = r end
    return next(t, k)
  end
  rawset(visible, 'next', sandbox_next)
  rawset(visible, 'pairs', function(t)
    pairs(t) -- argument checks and errors as the original's
    return sandbox_next, t, nil
  end)
  -- Redis 7.0 replaces `pcall`: an error reply raised inside (`redis.call`'s, a table with
  -- `err`) comes out as its message string, so `local ok, e = pcall(redis.call, ...)` gives
  -- the script a string, and a script that returns `e` answers a string, not an error.
  local pcall, type, select = pcall, type, select
  local function caught(ok, ...)
    if ok then return ok, ... end
    local e = ...
    if type(e) == 'table' then
      local s = e.err
      if type(s) == 'string' or type(s) == 'number' then return false, s end
    end
    return false, e
  end
  rawset(visible, 'pcall', function(...)
    -- Redis's pcall called with nothing tries to call its own result placeholder.
    if select('#', ...) == 0 then return false, 'attempt to call a boolean value' end
    return caught(pcall(...))
  end)
  rawset(visible, 'rawget', function(t, k)
    local r = real_of[t]
    if r ~= nil then t = r end
    return rawget(t, k)
  end)
  rawset(visible, 'rawset', function(t, k, v)
    if readonly[t] then error('Attempt to modify a readonly table', 0) end
    return rawset(t, k, v)
  end)
  -- What `getmetatable` shows of a read-only view: nothing for a library (Redis's read-only
  -- tables have no metatable), and for the globals a read-only table whose `__index` raises
  -- Redis's error for a missing global, as Redis's `_G` has, so that changing it fails with
  -- `Attempt to modify a readonly table`.
  local globals_mt = M.proxy({__index = function(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end})
  rawset(visible, 'getmetatable', function(...)
    if select('#', ...) == 0 then
      error("bad argument #1 to 'getmetatable' (value expected)", 2)
    end
    local t = ...
    if t == env then return globals_mt end
    if t ~= nil and readonly[t] then return nil end
    return getmetatable(...)
  end)
  rawset(visible, 'setmetatable', function(t, mt)
    if readonly[t] then error('Attempt to modify a readonly table', 0) end
    return setmetatable(t, mt)
  end)
  rawset(visible, 'loadstring', function(s, name)
    if type(s) == 'string' and sbyte(s, 1) == 27 then
      if name == nil then name = s end
      s = ' ' .. s
    end
    local f, e = loadstring(s, name)
    if f then setfenv(f, env) end
    return f, e
  end)
  rawset(visible, 'load', function(reader, name)
    local source = reader
    if type(reader) == 'function' then
      local first = true
      source = function()
        local piece = reader()
        if first then
          first = false
          if type(piece) == 'string' and sbyte(piece, 1) == 27 then piece = ' ' .. piece end
        end
        return piece
      end
    end
    local f, e = load(source, name)
    if f then setfenv(f, env) end
    return f, e
  end)
end

return M
"#;

/// The Lua half of the sandbox, once loaded.
pub(crate) struct Sandbox {
    proxy_fn: Function,
    install_fn: Function,
    /// Keeps the chunk-name anchors referenced from Rust as well.
    _anchors: Table,
}

impl Sandbox {
    /// Loads the Lua half into the interpreter's real globals' scope.
    pub(crate) fn new(lua: &Lua) -> mlua::Result<Sandbox> {
        let m: Table = lua.load(SANDBOX_LUA).set_name("=latchkey").call(())?;
        Ok(Sandbox {
            proxy_fn: m.raw_get("proxy")?,
            install_fn: m.raw_get("install")?,
            _anchors: m.raw_get("anchors")?,
        })
    }

    /// The Lua function that makes a read-only view of a table.
    pub(crate) fn proxy_function(&self) -> Function {
        self.proxy_fn.clone()
    }

    /// A read-only view of `real` (see the module documentation).
    pub(crate) fn proxy(&self, real: &Table) -> mlua::Result<Table> {
        self.proxy_fn.call(real.clone())
    }

    /// Puts the wrapped base functions into `visible`, the table behind the globals `env`.
    pub(crate) fn install(&self, lua: &Lua, visible: &Table, env: &Table) -> mlua::Result<()> {
        self.install_fn.call::<()>((visible.clone(), env.clone()))?;
        // SAFETY: `safe_unpack` only uses the Lua C API on the state it is given, raises
        // errors only through `luaL_*` functions, and holds nothing with a destructor.
        let unpack = unsafe { lua.create_c_function(safe_unpack)? };
        visible.raw_set("unpack", unpack)?;
        Ok(())
    }

    /// Makes the metatable every string shares read-only: its `__index` becomes the
    /// read-only `string_view`, and `getmetatable("")` returns a read-only view of
    /// `{__index = string_view}`, so `getmetatable("").__index == string` holds in a script
    /// as in Redis, and every assignment through it fails.
    pub(crate) fn protect_string_metatable(
        &self,
        lua: &Lua,
        string_view: &Table,
    ) -> mlua::Result<()> {
        let mt: Table = lua
            .load("return getmetatable('')")
            .set_name("=latchkey")
            .call(())?;
        let shown = lua.create_table()?;
        shown.raw_set("__index", string_view.clone())?;
        mt.raw_set("__index", string_view.clone())?;
        mt.raw_set("__metatable", self.proxy(&shown)?)?;
        Ok(())
    }
}

/// `unpack(t [, i [, j]])` as Lua 5.1's, but computing the count without overflow: Lua's
/// own computes `j - i + 1` in a C `int`, which overflows for a range like
/// `unpack({}, -2^31, 2^31 - 1)` (CVE-2025-46817). Bounds are truncated to `int` as Lua's
/// `luaL_checkint` does, and a range the stack cannot hold fails with Lua's (and Redis's)
/// `too many results to unpack`.
///
/// # Safety
/// Called by Lua as a C function on a live state.
unsafe extern "C-unwind" fn safe_unpack(state: *mut ffi::lua_State) -> c_int {
    ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
    let first = ffi::luaL_optinteger(state, 2, 1) as c_int;
    let last = if ffi::lua_isnoneornil(state, 3) != 0 {
        ffi::lua_objlen(state, 1) as c_int
    } else {
        ffi::luaL_checkinteger(state, 3) as c_int
    };
    if first > last {
        return 0;
    }
    let count = i64::from(last) - i64::from(first) + 1;
    if count >= i64::from(c_int::MAX) || ffi::lua_checkstack(state, count as c_int) == 0 {
        return ffi::luaL_error(state, c"too many results to unpack".as_ptr());
    }
    for index in first..=last {
        ffi::lua_rawgeti(state, 1, ffi::lua_Integer::from(index));
    }
    count as c_int
}
