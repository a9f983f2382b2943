//! `lua_eval`: generated Lua scripts through `EVAL` against an in-process server.
//!
//! The input is read as a small grammar (via `arbitrary`) of Lua statements and expressions
//! that call every library a script sees (`struct`, `cmsgpack`, `cjson`, `bit`, `string`,
//! `table`, `coroutine`, base functions, `redis.*`) with hostile arguments: huge and odd
//! numbers, format strings with huge counts, bytecode headers, truncated MessagePack, deep and
//! cyclic tables, tables with metatables, `pcall`/`error`, and `redis.call` with random
//! arguments; replies are shaped like `{err=}`, `{ok=}`, `{map=}`, `{set=}` around them.
//!
//! After each script the server must still answer `PING`, and a canary key no script can
//! name must be intact. A panic, an abort (mlua's "out of auxiliary stack space" was one) or a
//! stack overflow is a finding. One server serves every input of a process, as one Redis
//! serves every script: what a script leaves behind (globals it could not set, a heap it
//! filled) must not break the next one.

use std::fmt::Write;

use crate::{Frame, LocalClient, ServerHandle};
use arbitrary::{Arbitrary, Unstructured};

/// The value the canary key holds.
const CANARY: &str = "canary-value-never-named-by-a-script";

#[derive(Arbitrary, Debug)]
struct Script {
    stmts: Vec<Stmt>,
    ret: Expr,
}

#[derive(Arbitrary, Debug)]
enum Stmt {
    /// `pcall(function() return <expr> end)`
    Protected(Expr),
    /// `v[i] = <expr>`
    Assign(u8, Expr),
    /// `setmetatable(v[i], <meta>)` (protected)
    SetMeta(u8, Meta),
    /// `<expr>` unprotected: its error ends the script.
    Bare(Expr),
}

#[derive(Arbitrary, Debug)]
enum Meta {
    IndexFn,
    IndexCyclic,
    NewIndexError,
    ToStringNumber,
    Len,
    Call,
    Locked,
    Concat,
}

#[derive(Arbitrary, Debug)]
enum Expr {
    Num(Num),
    Str(Str),
    Nil,
    Bool(bool),
    Var(u8),
    Cyclic,
    Deep(u16),
    Table(Vec<Expr>),
    Map(Vec<(Str, Expr)>),
    Call(Lib, Vec<Expr>),
    Rep(Box<Expr>, RepCount),
    Concat(Box<Expr>, Box<Expr>),
    Redis(bool, Cmd, Vec<Expr>),
    Reply(ReplyKind, Box<Expr>),
    Loadstring(Box<Expr>),
    Bytecode,
    Coroutine(Box<Expr>),
    Error(Box<Expr>),
}

#[derive(Arbitrary, Debug)]
enum Num {
    Small(i8),
    Int(i32),
    Special(u8),
}

#[derive(Arbitrary, Debug)]
enum Str {
    Known(u8),
    Bytes(Vec<u8>),
}

#[derive(Arbitrary, Debug)]
enum RepCount {
    Small(u8),
    Huge,
}

#[derive(Arbitrary, Debug)]
enum ReplyKind {
    Err,
    Ok,
    Map,
    Set,
    Double,
}

#[derive(Arbitrary, Debug)]
struct Lib(u8);

#[derive(Arbitrary, Debug)]
struct Cmd(u8);

const SPECIAL_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "2^31",
    "-2^31",
    "2^31-1",
    "2^32+1",
    "2^53",
    "2^63",
    "-2^63",
    "2^64",
    "1e308",
    "1/0",
    "-1/0",
    "0/0",
    "0.5",
    "1e8",
    "8000",
    "7999",
    "255",
    "65536",
    "-0",
    "1e-300",
    "2147483647",
    "-2147483648",
    "4294967295",
];

const KNOWN_STRINGS: &[&str] = &[
    "",
    "x",
    "\\27Lua",
    "\\27LuaQ\\0\\1\\4\\8\\4\\8\\0",
    "i99999999999",
    "i999999999",
    "c0",
    "b c0",
    "!0 i4",
    "!3",
    "i33",
    "i16 I16",
    ">!4 b i4 c3 s d f x",
    "s",
    "c999999999",
    "\\145",
    "\\221\\255\\255\\255\\255",
    "\\219\\255\\255\\255\\255",
    "\\129\\192\\1",
    "\\220\\255\\255",
    "{",
    "[1,2,{\"a\":null}]",
    "[0x1p9999, -inf, nan(x), +1, 1., -.5, 01]",
    "\"\\\\ud83d\\\\ude00\\\\u00e9\\\\/\"",
    "\"\\\\ud800\\\\u0041\"",
    "{\"a\":1,\"a\":[\"\\\\u12\"]}",
    "\"\\\\",
    "null",
    "on",
    "off",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    "%d",
    "%99999d",
    "%s%s%s",
    "%q",
    "return 1",
    "return debug",
    "return _G",
    "x = 1",
    "k1",
    "k2",
    "(.-)(.-)x",
    "%",
];

const LIBS: &[&str] = &[
    "struct.pack",
    "struct.unpack",
    "struct.size",
    "cmsgpack.pack",
    "cmsgpack.unpack",
    "cmsgpack.unpack_one",
    "cmsgpack.unpack_limit",
    "cjson.encode",
    "cjson.decode",
    "cjson.new().decode",
    "cjson.encode_sparse_array",
    "cjson.encode_max_depth",
    "cjson.decode_max_depth",
    "cjson.encode_number_precision",
    "cjson.encode_invalid_numbers",
    "cjson.decode_invalid_numbers",
    "cjson.encode_keep_buffer",
    "bit.band",
    "bit.bor",
    "bit.bxor",
    "bit.tohex",
    "bit.lshift",
    "bit.rshift",
    "bit.arshift",
    "bit.rol",
    "bit.bswap",
    "bit.tobit",
    "bit.bnot",
    "string.format",
    "string.sub",
    "string.byte",
    "string.char",
    "string.find",
    "string.gsub",
    "string.upper",
    "string.reverse",
    "string.len",
    "string.dump",
    "table.concat",
    "table.insert",
    "table.remove",
    "table.sort",
    "table.getn",
    "unpack",
    "select",
    "tostring",
    "tonumber",
    "type",
    "rawset",
    "rawget",
    "rawequal",
    "setmetatable",
    "getmetatable",
    "next",
    "pairs",
    "ipairs",
    "loadstring",
    "load",
    "redis.sha1hex",
    "redis.error_reply",
    "redis.status_reply",
    "redis.setresp",
    "math.floor",
    "math.max",
    "math.fmod",
    "math.random",
    "collectgarbage",
    "gcinfo",
    "assert",
    "coroutine.wrap",
    "coroutine.resume",
    "coroutine.status",
];

const CMDS: &[&str] = &[
    "SET",
    "GET",
    "INCR",
    "LPUSH",
    "LRANGE",
    "HSET",
    "HGETALL",
    "DEL",
    "EXISTS",
    "PING",
    "ECHO",
    "SETRANGE",
    "GETRANGE",
    "APPEND",
    "EXPIRE",
    "TTL",
    "ZADD",
    "ZRANGE",
    "SADD",
    "SMEMBERS",
    "INCRBYFLOAT",
    "MSET",
    "KEYS",
    "SCAN",
    "TYPE",
    "EVAL",
    "NOSUCH",
];

/// Scripts nest at most this deep (deeper expressions render as `nil`), to keep them short.
const MAX_DEPTH: usize = 6;

fn pick<'a>(list: &[&'a str], i: usize) -> &'a str {
    list[i % list.len()]
}

fn lua_string(bytes: &[u8], out: &mut String) {
    out.push('"');
    for b in bytes.iter().take(64) {
        let _ = write!(out, "\\{b}");
    }
    out.push('"');
}

impl Str {
    fn render(&self, out: &mut String) {
        match self {
            Str::Known(i) => {
                out.push('"');
                out.push_str(
                    pick(KNOWN_STRINGS, usize::from(*i))
                        .replace('"', "\\\"")
                        .as_str(),
                );
                out.push('"');
            }
            Str::Bytes(b) => lua_string(b, out),
        }
    }
}

impl Expr {
    fn render(&self, depth: usize, out: &mut String) {
        if depth > MAX_DEPTH {
            out.push_str("nil");
            return;
        }
        let d = depth + 1;
        match self {
            Expr::Num(Num::Small(n)) => {
                let _ = write!(out, "({n})");
            }
            Expr::Num(Num::Int(n)) => {
                let _ = write!(out, "({n})");
            }
            Expr::Num(Num::Special(i)) => {
                let _ = write!(out, "({})", pick(SPECIAL_NUMBERS, usize::from(*i)));
            }
            Expr::Str(s) => s.render(out),
            Expr::Nil => out.push_str("nil"),
            Expr::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Expr::Var(i) => {
                let _ = write!(out, "v[{}]", i % 4 + 1);
            }
            Expr::Cyclic => out.push('T'),
            Expr::Deep(n) => {
                let _ = write!(out, "deep({})", n % 10000);
            }
            Expr::Table(items) => {
                out.push('{');
                for item in items.iter().take(8) {
                    item.render(d, out);
                    out.push(',');
                }
                out.push('}');
            }
            Expr::Map(pairs) => {
                out.push('{');
                for (k, v) in pairs.iter().take(8) {
                    out.push('[');
                    k.render(out);
                    out.push_str("]=");
                    v.render(d, out);
                    out.push(',');
                }
                out.push('}');
            }
            Expr::Call(lib, args) => {
                out.push_str(pick(LIBS, usize::from(lib.0)));
                out.push('(');
                render_args(args, d, out);
                out.push(')');
            }
            Expr::Rep(s, count) => {
                out.push_str("string.rep(tostring(");
                s.render(d, out);
                out.push_str(") .. 'x', ");
                match count {
                    RepCount::Small(n) => {
                        let _ = write!(out, "{n}");
                    }
                    RepCount::Huge => out.push_str("1e9"),
                }
                out.push(')');
            }
            Expr::Concat(a, b) => {
                out.push_str("(tostring(");
                a.render(d, out);
                out.push_str(") .. tostring(");
                b.render(d, out);
                out.push_str("))");
            }
            Expr::Redis(protected, cmd, args) => {
                out.push_str(if *protected {
                    "redis.pcall("
                } else {
                    "redis.call("
                });
                let _ = write!(out, "'{}'", pick(CMDS, usize::from(cmd.0)));
                if !args.is_empty() {
                    out.push(',');
                }
                render_args(args, d, out);
                out.push(')');
            }
            Expr::Reply(kind, inner) => {
                let name = match kind {
                    ReplyKind::Err => "err",
                    ReplyKind::Ok => "ok",
                    ReplyKind::Map => "map",
                    ReplyKind::Set => "set",
                    ReplyKind::Double => "double",
                };
                let _ = write!(out, "{{{name}=");
                inner.render(d, out);
                out.push('}');
            }
            Expr::Loadstring(src) => {
                out.push_str("(loadstring(tostring(");
                src.render(d, out);
                out.push_str(")) or tostring)()");
            }
            Expr::Bytecode => out.push_str("loadstring(string.dump(function() return 1 end))"),
            Expr::Coroutine(body) => {
                out.push_str("coroutine.wrap(function() coroutine.yield(");
                body.render(d, out);
                out.push_str(") end)()");
            }
            Expr::Error(e) => {
                out.push_str("error(");
                e.render(d, out);
                out.push(')');
            }
        }
    }
}

fn render_args(args: &[Expr], depth: usize, out: &mut String) {
    for (i, a) in args.iter().take(6).enumerate() {
        if i > 0 {
            out.push(',');
        }
        a.render(depth, out);
    }
}

impl Meta {
    fn render(&self) -> &'static str {
        match self {
            Meta::IndexFn => "{__index = function(t, k) return k end}",
            Meta::IndexCyclic => "{__index = T}",
            Meta::NewIndexError => "{__newindex = function() error('no') end}",
            Meta::ToStringNumber => "{__tostring = function() return 1 end}",
            Meta::Len => "{__len = function() return 2^40 end}",
            Meta::Call => "{__call = function(...) return ... end}",
            Meta::Locked => "{__metatable = 'locked'}",
            Meta::Concat => "{__concat = function(a, b) return T end}",
        }
    }
}

impl Script {
    fn render(&self) -> String {
        let mut out = String::from(
            "local T = {} T[1] = T T.x = T\n\
             local function deep(n) local r = {} local c = r for i = 1, n do c[1] = {} c = c[1] end return r end\n\
             local M = setmetatable({}, {__index = function(t, k) return k end})\n\
             local v = {{}, T, deep(100), M}\n",
        );
        for stmt in self.stmts.iter().take(16) {
            match stmt {
                Stmt::Protected(e) => {
                    out.push_str("pcall(function() return ");
                    e.render(0, &mut out);
                    out.push_str(" end)\n");
                }
                Stmt::Assign(i, e) => {
                    let _ = write!(out, "v[{}] = ", i % 4 + 1);
                    e.render(0, &mut out);
                    out.push('\n');
                }
                Stmt::SetMeta(i, m) => {
                    let _ = writeln!(out, "pcall(setmetatable, v[{}], {})", i % 4 + 1, m.render());
                }
                Stmt::Bare(e) => {
                    out.push_str("local _ = ");
                    e.render(0, &mut out);
                    out.push('\n');
                }
            }
        }
        out.push_str("return ");
        self.ret.render(0, &mut out);
        out.push('\n');
        out
    }
}

/// One server for every input of this thread, with a client that ran `SET canary`.
struct Harness {
    _server: ServerHandle,
    client: LocalClient,
}

thread_local! {
    static HARNESS: std::cell::RefCell<Option<Harness>> = const { std::cell::RefCell::new(None) };
}

/// Reads `data` as a [`Script`] (as libFuzzer's typed targets do) and runs it.
pub fn check(data: &[u8]) {
    if let Ok(script) = Script::arbitrary_take_rest(Unstructured::new(data)) {
        run(&script.render());
    }
}

/// Runs one script body through `EVAL`, then asserts the server answers `PING` and the canary
/// is intact.
pub fn run(body: &str) {
    HARNESS.with(|cell| {
        let mut slot = cell.borrow_mut();
        let h = slot.get_or_insert_with(|| {
            super::rt::block_on(async {
                let server = super::rt::server().await;
                // A smaller Lua memory limit than the default: runaway scripts fail fast.
                server.shared().scripting().set_memory_limit(64 << 20);
                let mut client = server.client();
                let ok = client.cmd(["SET", "canary", CANARY]).await;
                assert_eq!(ok, Frame::ok());
                Harness {
                    _server: server,
                    client,
                }
            })
        });
        let c = &mut h.client;
        super::rt::block_on(async {
            let _ =
                tokio::time::timeout(super::rt::COMMAND_TIMEOUT, c.cmd(["EVAL", body, "0"])).await;
            assert_eq!(
                c.cmd(["PING"]).await,
                Frame::Simple("PONG".into()),
                "PING after {body}"
            );
            assert_eq!(
                c.cmd(["GET", "canary"]).await,
                Frame::Bulk(CANARY.into()),
                "canary after {body}"
            );
        });
    });
}
