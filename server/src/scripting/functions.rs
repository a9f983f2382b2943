//! Redis 7 functions: libraries loaded with `FUNCTION LOAD`, whose code registers named
//! functions with `redis.register_function`, later called with `FCALL`.

use std::cell::RefCell;

use bytes::Bytes;
use indexmap::IndexMap;
use mlua::{Function, Lua, MultiValue, Table, Value};

use super::Scripting;
use crate::command::Ctx;
use crate::frame::Frame;
use crate::gate::BusyKind;

/// Flags a function declares when it registers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FunctionFlags {
    /// `no-writes`: the function only reads, so `FCALL_RO` may run it.
    pub no_writes: bool,
    /// Every flag as declared, for `FUNCTION LIST`.
    pub names: Vec<String>,
}

impl FunctionFlags {
    /// The flags as the checks before a run read them (a function is never in
    /// compatibility mode: a function without flags may write and is refused for memory).
    pub(crate) fn declared(&self) -> super::ScriptFlags {
        let mut flags = super::ScriptFlags::default();
        for name in &self.names {
            flags.set(name.as_bytes());
        }
        flags
    }
}

/// The function flags Redis knows, in the order of its `scripts_flags_def` table, which is
/// the order `FUNCTION LIST` shows them in.
const FLAG_ORDER: [&str; 5] = [
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// One registered function.
#[derive(Clone, Debug)]
pub(crate) struct RegisteredFunction {
    name: String,
    description: Option<String>,
    flags: FunctionFlags,
    /// The callback, kept in Lua's registry rather than as an mlua handle: every live handle
    /// takes one of about 8000 slots, and thousands of loaded functions would run mlua out of
    /// them and abort the process (as the script cache did).
    callback: std::sync::Arc<mlua::RegistryKey>,
}

/// One library: its code and its functions.
#[derive(Clone, Debug)]
pub(crate) struct Library {
    code: Bytes,
    functions: Vec<RegisteredFunction>,
}

/// Every loaded library by name.
#[derive(Debug, Default)]
pub(crate) struct Libraries {
    libs: IndexMap<String, Library>,
    /// The function running now and the command that called it (`FUNCTION STATS`).
    running: Option<(String, Vec<Bytes>)>,
}

impl Libraries {
    fn find(&self, function: &str) -> Option<&RegisteredFunction> {
        self.libs
            .values()
            .flat_map(|l| l.functions.iter())
            .find(|f| f.name.eq_ignore_ascii_case(function))
    }
}

thread_local! {
    /// Functions registered by the library being loaded on this thread.
    static REGISTERING: RefCell<Option<Vec<RegisteredFunction>>> = const { RefCell::new(None) };
}

/// How long a library's code may run while it loads (Redis's `LOAD_TIMEOUT_MS`): past it,
/// `FUNCTION LOAD` fails with `FUNCTION LOAD timeout`, so that a library whose top-level code
/// never ends cannot hold the server.
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

thread_local! {
    /// When the library loading on this thread started.
    static LOAD_STARTED: std::cell::Cell<Option<std::time::Instant>> =
        const { std::cell::Cell::new(None) };
}

/// Whether the library loading on this thread has run past [`LOAD_TIMEOUT`] (checked by the
/// interpreter's instruction hook).
pub(crate) fn load_timed_out() -> bool {
    LOAD_STARTED.with(|s| s.get().is_some_and(|t| t.elapsed() > LOAD_TIMEOUT))
}

/// The globals of function libraries, in Lua: one table, `env`, is the globals of every
/// library's code and so of every function it registers. While a library loads, `env` reads
/// through to the library API alone (a `redis` table with `register_function`, `log`, the
/// `LOG_*` levels and the version); once loaded, through to the scripts' globals. Both are
/// read-only, and a missing name raises Redis's "nonexistent global variable" error, as in
/// Redis 7.0, where a library's top-level code can reach nothing else (no `math`, no
/// `redis.call`) and a function can never reach `register_function`.
const LIBRARY_ENV_LUA: &str = r#"
local setmetatable, error, pcall, tostring, pairs = setmetatable, error, pcall, tostring, pairs
return function(runtime, proxy, api_redis)
  local function missing(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end
  local function refuse()
    error('Attempt to modify a readonly table', 2)
  end
  local api = setmetatable({redis = proxy(setmetatable(api_redis, {__index = missing}))},
                           {__index = missing})
  local mt = {__index = runtime, __newindex = refuse, __metatable = false}
  local env = setmetatable({}, mt)
  -- Runs a library's code with the API as its globals, and puts the functions' globals back
  -- whatever happens: one call, so nothing else runs Lua in between.
  local function load(chunk)
    mt.__index = api
    local ok, err = pcall(chunk)
    mt.__index = runtime
    if not ok then error(err, 0) end
  end
  return env, load
end
"#;

/// The globals of function libraries (see [`LIBRARY_ENV_LUA`]).
pub(crate) struct LibraryEnv {
    /// The globals of every library's code and every function.
    pub(crate) env: Table,
    /// Runs a compiled library with the library API as its globals.
    load: Function,
}

/// Builds the globals of function libraries around `runtime`, the scripts' globals.
pub(crate) fn library_environment(lua: &Lua, runtime: &Table) -> mlua::Result<LibraryEnv> {
    let real_redis: Table = lua.globals().raw_get("redis")?;
    let api_redis = lua.create_table()?;
    api_redis.raw_set(
        "register_function",
        super::libs::variadic(lua, register_function)?,
    )?;
    for name in [
        "log",
        "LOG_DEBUG",
        "LOG_VERBOSE",
        "LOG_NOTICE",
        "LOG_WARNING",
        "REDIS_VERSION",
        "REDIS_VERSION_NUM",
    ] {
        api_redis.raw_set(name, real_redis.raw_get::<Value>(name)?)?;
    }
    let proxy: Function = lua.globals().raw_get("__lk_proxy")?;
    let build: Function = lua.load(LIBRARY_ENV_LUA).set_name("=latchkey").call(())?;
    let (env, load) = build.call::<(Table, Function)>((runtime.clone(), proxy, api_redis))?;
    Ok(LibraryEnv { env, load })
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A string argument as Redis's `luaGetStringSds` reads it: a string, or a number as text.
fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.to_string_lossy().to_string()),
        Value::Integer(i) => Some(super::printf_g(*i as f64, 14)),
        Value::Number(n) => Some(super::printf_g(*n, 14)),
        _ => None,
    }
}

/// `redis.register_function(name, callback)` or `redis.register_function{function_name=...,
/// callback=..., flags={...}, description=...}`, with Redis 7.0's checks in its order and
/// its words.
fn register_function(lua: &Lua, args: super::libs::Args) -> mlua::Result<()> {
    let err = |m: &str| Err(mlua::Error::RuntimeError(m.to_string()));
    let (name, callback, flags, description) = match args.len() {
        1 => {
            let Some(Value::Table(t)) = args.get(0) else {
                return err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).");
            };
            let (mut name, mut callback, mut flags, mut description) =
                (None, None, FunctionFlags::default(), None);
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                let Some(key) = text_of(&k) else {
                    return err(
                        "named argument key given to redis.register_function is not a string",
                    );
                };
                match key.as_str() {
                    "function_name" => match text_of(&v) {
                        Some(n) => name = Some(n),
                        None => return err("function_name argument given to redis.register_function must be a string"),
                    },
                    "description" => match text_of(&v) {
                        Some(d) => description = Some(d),
                        None => return err("description argument given to redis.register_function must be a string"),
                    },
                    "callback" => match v {
                        Value::Function(f) => callback = Some(f),
                        _ => return err("callback argument given to redis.register_function must be a function"),
                    },
                    "flags" => {
                        let Value::Table(list) = v else {
                            return err("flags argument to redis.register_function must be a table representing function flags");
                        };
                        flags = read_flags(&list)?.ok_or_else(|| {
                            mlua::Error::RuntimeError("unknown flag given".into())
                        })?;
                    }
                    _ => return err("unknown argument given to redis.register_function"),
                }
            }
            let Some(name) = name else {
                return err("redis.register_function must get a function name argument");
            };
            let Some(callback) = callback else {
                return err("redis.register_function must get a callback argument");
            };
            (name, callback, flags, description)
        }
        2 => {
            let Some(name) = args.get(0).as_ref().and_then(text_of) else {
                return err("first argument to redis.register_function must be a string");
            };
            let Some(Value::Function(callback)) = args.get(1) else {
                return err("second argument to redis.register_function must be a function");
            };
            (name, callback, FunctionFlags::default(), None)
        }
        _ => return err("wrong number of arguments to redis.register_function"),
    };
    if !valid_name(&name) {
        // Redis 7.0 words a bad function name as it words a bad library name.
        return err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long");
    }
    REGISTERING.with(|r| {
        let mut r = r.borrow_mut();
        let Some(list) = r.as_mut() else {
            return err("redis.register_function can only be called on FUNCTION LOAD command");
        };
        if list.iter().any(|f| f.name.eq_ignore_ascii_case(&name)) {
            return err("Function already exists in the library");
        }
        let callback = std::sync::Arc::new(lua.create_registry_value(callback)?);
        list.push(RegisteredFunction {
            name,
            description,
            flags,
            callback,
        });
        Ok(())
    })
}

/// The `flags` list of a named registration: `None` when an entry is not a known flag (or
/// not a string). Each flag counts once, kept in Redis's order (as `FUNCTION LIST` shows
/// them).
fn read_flags(list: &Table) -> mlua::Result<Option<FunctionFlags>> {
    let mut given = Vec::new();
    for i in 1.. {
        let v: Value = list.get(i)?;
        match v {
            Value::Nil => break,
            Value::String(_) | Value::Integer(_) | Value::Number(_) => {
                let f = text_of(&v).unwrap_or_default();
                if !FLAG_ORDER.contains(&f.as_str()) {
                    return Ok(None);
                }
                given.push(f);
            }
            _ => return Ok(None),
        }
    }
    let mut flags = FunctionFlags::default();
    for f in FLAG_ORDER {
        if given.iter().any(|g| g == f) {
            flags.no_writes |= f == "no-writes";
            flags.names.push(f.to_string());
        }
    }
    Ok(Some(flags))
}

/// Parses `#!lua name=<lib>` from the first line, as Redis 7.0 does: the line is split as an
/// inline command is (`sdssplitargs`: quotes group and are removed, so `name="foo"` names
/// `foo`), the first word less its `#!` is the engine, and every other word must be one
/// `name=` (matched without regard to case).
pub(crate) fn parse_shebang(code: &[u8]) -> Result<String, Frame> {
    if !code.starts_with(b"#!") {
        return Err(Frame::error("ERR Missing library metadata"));
    }
    let Some(nl) = code.iter().position(|b| *b == b'\n') else {
        return Err(Frame::error("ERR Invalid library metadata"));
    };
    let parts = match crate::codec::split_args(&code[..nl]) {
        Some(parts) if !parts.is_empty() => parts,
        _ => return Err(Frame::error("ERR Invalid library metadata")),
    };
    let engine = String::from_utf8_lossy(parts[0].get(2..).unwrap_or_default());
    let mut name = None;
    for p in &parts[1..] {
        if p.len() >= 5 && p[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(Frame::error(
                    "ERR Invalid metadata value, name argument was given multiple times",
                ));
            }
            name = Some(String::from_utf8_lossy(&p[5..]).into_owned());
            continue;
        }
        return Err(Frame::error(format!(
            "ERR Invalid metadata value given: {}",
            String::from_utf8_lossy(p)
        )));
    }
    let Some(name) = name else {
        return Err(Frame::error("ERR Library name was not given"));
    };
    if !valid_name(&name) {
        return Err(Frame::error(
            "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long",
        ));
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(Frame::error(format!("ERR Engine '{engine}' not found")));
    }
    Ok(name)
}

impl Scripting {
    /// `FUNCTION LOAD [REPLACE] code`: compiles and runs the library, keeping what it registers.
    /// With `limited`, its code may run for [`LOAD_TIMEOUT`] at most; without, as long as it
    /// takes (a library our master or the AOF loads: it loaded once already, and must load
    /// here too, as Redis loads it for them).
    pub(crate) fn load_library(
        &self,
        code: &Bytes,
        replace: bool,
        limited: bool,
    ) -> Result<String, Frame> {
        let name = parse_shebang(code)?;
        if !replace && self.libraries.lock().libs.contains_key(&name) {
            return Err(Frame::error(format!("ERR Library '{name}' already exists")));
        }
        // Lua cannot parse the metadata line: blank it, keeping line numbers.
        let nl = code.iter().position(|b| *b == b'\n').unwrap_or(code.len());
        let body = &code[nl..];
        let chunk = self
            .lua
            .load(body)
            .set_name("@user_function")
            .set_environment(self.load_env.env.clone())
            .into_function()
            .map_err(|e| {
                let msg = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                Frame::error(format!("ERR Error compiling function: {msg}"))
            })?;
        REGISTERING.with(|r| *r.borrow_mut() = Some(Vec::new()));
        if limited {
            LOAD_STARTED.with(|s| s.set(Some(std::time::Instant::now())));
        }
        let result = self
            .load_env
            .load
            .bind(chunk)
            .and_then(|loading| self.run_fn.call::<MultiValue>(loading));
        LOAD_STARTED.with(|s| s.set(None));
        let registered = REGISTERING
            .with(|r| r.borrow_mut().take())
            .unwrap_or_default();
        match result {
            Ok(values) => {
                let mut it = values.into_iter();
                if !matches!(it.next(), Some(Value::Boolean(true))) {
                    let err = it.next().unwrap_or(Value::Nil);
                    let text = match super::script_error(&err, "") {
                        Frame::Error(e) => String::from_utf8_lossy(&e).into_owned(),
                        _ => "ERR Error registering functions".into(),
                    };
                    let text = text.split(" script: ").next().unwrap_or(&text);
                    return Err(Frame::error(format!(
                        "ERR Error registering functions: {text}"
                    )));
                }
            }
            Err(e) => {
                return Err(Frame::error(format!(
                    "ERR Error registering functions: {e}"
                )))
            }
        }
        if registered.is_empty() {
            return Err(Frame::error("ERR No functions registered"));
        }
        let mut libs = self.libraries.lock();
        for f in &registered {
            let taken = libs.libs.iter().any(|(lib, l)| {
                *lib != name
                    && l.functions
                        .iter()
                        .any(|g| g.name.eq_ignore_ascii_case(&f.name))
            });
            if taken {
                return Err(Frame::error(format!(
                    "ERR Function {} already exists",
                    f.name
                )));
            }
        }
        libs.libs.insert(
            name.clone(),
            Library {
                code: code.clone(),
                functions: registered,
            },
        );
        Ok(name)
    }

    /// Whether a library of this name is loaded.
    pub(crate) fn has_library(&self, name: &str) -> bool {
        self.libraries.lock().libs.contains_key(name)
    }

    /// `FUNCTION DELETE`.
    pub(crate) fn delete_library(&self, name: &str) -> bool {
        let gone = self.libraries.lock().libs.shift_remove(name).is_some();
        // The dropped callbacks' registry slots are given back to Lua.
        self.lua.expire_registry_values();
        gone
    }

    /// `FUNCTION FLUSH`.
    pub(crate) fn flush_libraries(&self) {
        self.libraries.lock().libs.clear();
        self.lua.expire_registry_values();
    }

    /// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`.
    pub(crate) fn list_libraries(&self, pattern: Option<&[u8]>, with_code: bool) -> Frame {
        let libs = self.libraries.lock();
        let mut out = Vec::new();
        for (name, lib) in libs.libs.iter() {
            if pattern.is_some_and(|p| !crate::glob::matches(p, name.as_bytes(), false)) {
                continue;
            }
            let functions = lib
                .functions
                .iter()
                .map(|f| {
                    Frame::Map(vec![
                        (Frame::bulk("name"), Frame::bulk(f.name.clone())),
                        (
                            Frame::bulk("description"),
                            f.description.clone().map_or(Frame::Null, Frame::bulk),
                        ),
                        (
                            Frame::bulk("flags"),
                            // As Redis: status replies, once each, in the order of its
                            // flag table (not the order they were declared in).
                            Frame::Set(
                                FLAG_ORDER
                                    .iter()
                                    .copied()
                                    .filter(|n| f.flags.names.iter().any(|d| d.as_str() == *n))
                                    .map(Frame::simple)
                                    .collect(),
                            ),
                        ),
                    ])
                })
                .collect();
            let mut entry = vec![
                (Frame::bulk("library_name"), Frame::bulk(name.clone())),
                (Frame::bulk("engine"), Frame::bulk("LUA")),
                (Frame::bulk("functions"), Frame::Array(functions)),
            ];
            if with_code {
                entry.push((Frame::bulk("library_code"), Frame::Bulk(lib.code.clone())));
            }
            out.push(Frame::Map(entry));
        }
        Frame::Array(out)
    }

    /// How many libraries and functions are loaded, and the bytes of their code (`INFO
    /// memory`).
    pub(crate) fn function_counts(&self) -> (usize, usize, usize) {
        let libs = self.libraries.lock();
        let functions = libs.libs.values().map(|l| l.functions.len()).sum();
        let code = libs.libs.values().map(|l| l.code.len()).sum();
        (libs.libs.len(), functions, code)
    }

    /// `FUNCTION STATS`.
    ///
    /// `running_for` is how long the function running now has run (`None` when no function
    /// runs; a running `EVAL` script is not shown here, as in Redis).
    pub(crate) fn function_stats(&self, running_for: Option<std::time::Duration>) -> Frame {
        let libs = self.libraries.lock();
        let functions: usize = libs.libs.values().map(|l| l.functions.len()).sum();
        let running = match (&libs.running, running_for) {
            (Some((name, command)), Some(ran)) => Frame::Map(vec![
                (
                    Frame::bulk("name"),
                    Frame::Bulk(Bytes::copy_from_slice(name.as_bytes())),
                ),
                (
                    Frame::bulk("command"),
                    Frame::Array(command.iter().map(|a| Frame::Bulk(a.clone())).collect()),
                ),
                (
                    Frame::bulk("duration_ms"),
                    Frame::Integer(ran.as_millis() as i64),
                ),
            ]),
            _ => Frame::Null,
        };
        Frame::Map(vec![
            (Frame::bulk("running_script"), running),
            (
                Frame::bulk("engines"),
                Frame::Map(vec![(
                    Frame::bulk("LUA"),
                    Frame::Map(vec![
                        (
                            Frame::bulk("libraries_count"),
                            Frame::Integer(libs.libs.len() as i64),
                        ),
                        (
                            Frame::bulk("functions_count"),
                            Frame::Integer(functions as i64),
                        ),
                    ]),
                )]),
            ),
        ])
    }

    /// What the function `name` declared, for the checks made before `FCALL` runs it;
    /// `None` when there is no such function.
    pub(crate) fn function_flags(&self, name: &[u8]) -> Option<super::ScriptFlags> {
        let name = std::str::from_utf8(name).ok()?;
        self.libraries.lock().find(name).map(|f| f.flags.declared())
    }

    /// `FCALL` / `FCALL_RO`.
    ///
    /// `command` is the whole command as the client sent it, which `FUNCTION STATS` shows
    /// while the function runs.
    pub(crate) fn call_function(
        &self,
        ctx: &mut Ctx<'_>,
        command: &[Bytes],
        name: &str,
        keys: &[Bytes],
        argv: &[Bytes],
        read_only_call: bool,
    ) -> Frame {
        let Some(f) = self.libraries.lock().find(name).cloned() else {
            return Frame::error("ERR Function not found");
        };
        if read_only_call && !f.flags.no_writes {
            return Frame::error(
                "ERR Can not execute a script with write flag using *_ro command.",
            );
        }
        let Ok(callback) = self.lua.registry_value::<Function>(&f.callback) else {
            return Frame::error("ERR Function not found");
        };
        ctx.shared.gate.mark_script(BusyKind::Function);
        self.libraries.lock().running = Some((f.name.clone(), command.to_vec()));
        let reply = self.execute(
            ctx,
            name,
            &callback,
            keys,
            argv,
            read_only_call || f.flags.no_writes,
            f.flags.declared().allow_oom,
            true,
        );
        self.libraries.lock().running = None;
        reply
    }
}
