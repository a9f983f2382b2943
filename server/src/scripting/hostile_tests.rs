//! In-process tests of hostile scripts: each once made the process abort or escaped the
//! sandbox, and must now get an error while the server goes on.

use crate::frame::Protocol;
use crate::{Frame, Server};

fn bulk(s: &str) -> Frame {
    Frame::Bulk(bytes::Bytes::copy_from_slice(s.as_bytes()))
}

fn error_text(f: &Frame) -> String {
    match f {
        Frame::Error(e) => String::from_utf8_lossy(e).into_owned(),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// A script that allocates without bound gets Lua's `not enough memory` (the process used
/// to abort in mlua's allocator); `pcall` catches it as in Redis; the memory is given back
/// and the next script runs.
#[tokio::test]
async fn runaway_allocation_fails_the_script_not_the_server() {
    let server = Server::builder().no_listener().start().await.unwrap();
    server.shared().scripting().set_memory_limit(16 << 20);
    let mut c = server.client();
    c.cmd(["SET", "canary", "alive"]).await;
    for body in [
        "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 100) .. i end return #t",
        "return #string.rep('x', 2^30)",
        "local s = 'x' for i = 1, 64 do s = s .. s end return #s",
    ] {
        let reply = c.cmd(["EVAL", body, "0"]).await;
        let text = error_text(&reply);
        assert!(
            text.starts_with("ERR Error running script ") && text.ends_with(", not enough memory"),
            "{body}: {text}"
        );
        assert_eq!(c.cmd(["GET", "canary"]).await, bulk("alive"));
        assert_eq!(c.cmd(["EVAL", "return 'next'", "0"]).await, bulk("next"));
    }
    let caught = c
        .cmd([
            "EVAL",
            "local ok, e = pcall(string.rep, 'x', 2^30) return {tostring(ok), e}",
            "0",
        ])
        .await;
    assert_eq!(
        caught,
        Frame::Array(vec![bulk("false"), bulk("not enough memory")])
    );
    // The garbage was collected: well under the limit again.
    assert!(server.shared().scripting().used_memory() < 8 << 20);
}

/// A table that contains itself, returned: Redis's 7995 nested arrays around
/// `reached lua stack limit` (this overflowed the thread's stack and aborted).
#[tokio::test]
async fn cyclic_reply_gives_the_stack_limit_error() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let mut c = server.client();
    let reply = c.cmd(["EVAL", "local t = {} t[1] = t return t", "0"]).await;
    let wire = reply.to_bytes(Protocol::Resp2);
    let expected = [
        "*1\r\n".repeat(7995).as_bytes(),
        b"-ERR reached lua stack limit\r\n",
    ]
    .concat();
    assert_eq!(wire.as_ref(), expected.as_slice());
    assert_eq!(c.cmd(["PING"]).await, Frame::Simple("PONG".into()));
}

/// Nothing a script does to the shared environment survives into the next script.
#[tokio::test]
async fn nothing_leaks_into_the_next_script() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let mut c = server.client();
    for attack in [
        "rawset(_G, 'redis', {})",
        "rawset(_G, 'evil', 1)",
        "getmetatable('').__index = {upper = function() return 'owned' end}",
        "rawset(getmetatable(''), '__index', {})",
        "setmetatable(_G, nil)",
        "string.upper = function() return 'owned' end",
        "rawset(string, 'upper', function() return 'owned' end)",
        "local f = loadstring('rawset(_G, \"evil\", 1)') f()",
        "collectgarbage('stop')",
    ] {
        let _ = c.cmd(["EVAL", attack, "0"]).await;
        assert_eq!(
            c.cmd(["EVAL", "return {('x'):upper(), string.upper('y'), type(redis.call), type(rawget(_G, 'evil'))}", "0"])
                .await,
            Frame::Array(vec![bulk("X"), bulk("Y"), bulk("function"), bulk("nil")]),
            "after {attack}"
        );
    }
    // Chunks compiled by loadstring see the sandbox, never the interpreter's globals.
    let reply = c
        .cmd([
            "EVAL",
            "return loadstring('return debug.getregistry')()",
            "0",
        ])
        .await;
    assert!(
        error_text(&reply)
            .contains("Script attempted to access nonexistent global variable 'debug'"),
        "{reply:?}"
    );
}

/// A script body that starts like Lua bytecode is parsed as text, as Redis's Lua does.
#[tokio::test]
async fn bytecode_bodies_are_parsed_as_text() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let mut c = server.client();
    let reply = c
        .cmd([
            b"EVAL".as_slice(),
            b"\x1bLuaQ\x00\x01\x04\x08\x04\x08\x00",
            b"0",
        ])
        .await;
    assert_eq!(
        error_text(&reply),
        "ERR Error compiling script (new function): user_script:1: unexpected symbol near 'char(27)'"
    );
}

/// Found by the `lua_eval` fuzz target: library calls that return or walk thousands of
/// strings or tables held one mlua handle each, ran out of handles and panicked (aborting
/// the process). Now each gets its result or Redis's error.
#[tokio::test]
async fn libraries_with_thousands_of_results_do_not_run_out_of_handles() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let mut c = server.client();
    for (body, expected) in [
        ("return select('#', cmsgpack.unpack(string.rep('\\161a', 7900)))", Frame::Integer(7900)),
        ("return select('#', struct.unpack(string.rep('c1', 7900), string.rep('a', 7900)))", Frame::Integer(7901)),
        ("local t = {} for i = 1, 20000 do t['k' .. i] = 'v' .. i end return #cmsgpack.pack(t) > 0", Frame::Integer(1)),
    ] {
        assert_eq!(c.cmd(["EVAL", body, "0"]).await, expected, "{body}");
    }
    for body in [
        "return {pcall(cmsgpack.unpack, string.rep('\\129\\161a', 10000) .. '\\1')}",
        "return {pcall(cmsgpack.unpack, string.rep('\\145', 10000) .. '\\1')}",
        "return {pcall(cmsgpack.unpack, string.rep('\\161a', 9000))}",
    ] {
        let Frame::Array(items) = c.cmd(["EVAL", body, "0"]).await else {
            panic!("{body}: an array");
        };
        let Some(Frame::Bulk(msg)) = items.get(1) else {
            panic!("{body}: {items:?}");
        };
        assert!(msg.starts_with(b"stack overflow ("), "{body}: {msg:?}");
    }
    assert_eq!(c.cmd(["PING"]).await, Frame::Simple("PONG".into()));
}

/// Library functions called with thousands of arguments that each need a handle (tables,
/// strings): the arguments used to arrive as mlua `MultiValue`s, one handle each, and past
/// about 8000 live handles mlua panicked ("cannot create a Lua reference, out of auxiliary
/// stack space") and the process aborted. Each call now gets its result.
#[tokio::test]
async fn library_calls_with_thousands_of_arguments_do_not_run_out_of_handles() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let mut c = server.client();
    let setup = "local t, s, d = {}, {}, {} for i = 1, 7990 do t[i] = {} s[i] = 'x' .. i d[i] = tostring(i) end ";
    for (body, expected) in [
        // 3999 empty maps, each packed as one byte (0x80); more is Redis's stack error.
        ("return #cmsgpack.pack(unpack(t, 1, 3999))", Frame::Integer(3999)),
        (
            "return {pcall(cmsgpack.pack, unpack(t))}",
            Frame::Array(vec![
                Frame::Null,
                bulk("bad argument #0 to '?' (Too many arguments for MessagePack pack.)"),
            ]),
        ),
        // Zero-terminated strings: each its bytes and a NUL.
        (
            "local n = 0 for i = 1, 7990 do n = n + #s[i] + 1 end return #struct.pack(string.rep('s', 7990), unpack(s)) == n",
            Frame::Integer(1),
        ),
        // Numeric strings: 1 | 2 | ... | 7990.
        ("return bit.bor(unpack(d))", Frame::Integer(8191)),
        ("redis.log(redis.LOG_DEBUG, unpack(s)) return 1", Frame::Integer(1)),
        ("redis.debug(unpack(t)) return 1", Frame::Integer(1)),
        (
            "return {pcall(cjson.encode, unpack(t))}",
            Frame::Array(vec![
                Frame::Null,
                bulk("bad argument #1 to '?' (expected 1 argument)"),
            ]),
        ),
    ] {
        let body = format!("{setup}{body}");
        assert_eq!(c.cmd(["EVAL", body.as_str(), "0"]).await, expected, "{body}");
    }
    assert_eq!(c.cmd(["PING"]).await, Frame::Simple("PONG".into()));
}

/// A `redis.call` reply too big for the interpreter's memory limit: converting it fails with
/// Lua's memory error, raised without leaving the reply half-owned by a frame that Lua's
/// `longjmp` skips; `pcall` catches it as any other memory error, and the server goes on.
#[tokio::test]
async fn a_reply_over_the_lua_memory_limit_fails_the_script_only() {
    let server = Server::builder().no_listener().start().await.unwrap();
    server.shared().scripting().set_memory_limit(16 << 20);
    let mut c = server.client();
    c.cmd(["SET", "canary", "alive"]).await;
    // Distinct values: Lua interns strings, and one value repeated would take no room.
    let value = "v".repeat(100);
    for batch in 0..20 {
        let mut args = vec!["RPUSH".to_string(), "big".to_string()];
        args.extend((0..10_000).map(|i| format!("{value}{batch}-{i}")));
        c.cmd(args).await;
    }
    assert_eq!(c.cmd(["LLEN", "big"]).await, Frame::Integer(200_000));
    for body in [
        "return #redis.call('LRANGE', 'big', 0, -1)",
        "return #redis.pcall('LRANGE', 'big', 0, -1)",
    ] {
        let text = error_text(&c.cmd(["EVAL", body, "0"]).await);
        assert!(text.contains("not enough memory"), "{body}: {text}");
        assert_eq!(c.cmd(["GET", "canary"]).await, bulk("alive"));
    }
    let caught = c
        .cmd([
            "EVAL",
            "local ok, e = pcall(redis.call, 'LRANGE', 'big', 0, -1) return {tostring(ok), e}",
            "0",
        ])
        .await;
    assert_eq!(
        caught,
        Frame::Array(vec![bulk("false"), bulk("not enough memory")])
    );
    // A reply that fits still arrives whole.
    assert_eq!(
        c.cmd(["EVAL", "return #redis.call('LRANGE', 'big', 0, 999)", "0"])
            .await,
        Frame::Integer(1000)
    );
}

/// Thousands of different scripts: the cache held an mlua handle for each compiled one, and
/// past about 8000 the next handle made mlua panic and the process abort (found by the
/// `lua_eval` fuzz target after 20,000 inputs). Cached scripts now live in Lua's registry.
#[tokio::test]
async fn ten_thousand_different_scripts_stay_cached() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let mut c = server.client();
    for i in 0..10_000 {
        let body = format!("return {i}");
        assert_eq!(c.cmd(["EVAL", body.as_str(), "0"]).await, Frame::Integer(i));
    }
    let sha = crate::scripting::sha1_hex(b"return 7");
    assert_eq!(
        c.cmd(["EVALSHA", sha.as_str(), "0"]).await,
        Frame::Integer(7)
    );
    assert_eq!(
        c.cmd(["EVAL", "return cmsgpack.pack({1, {2}})", "0"]).await,
        Frame::Bulk(bytes::Bytes::from_static(b"\x92\x01\x91\x02"))
    );
    assert_eq!(c.cmd(["SCRIPT", "FLUSH"]).await, Frame::ok());
    assert_eq!(c.cmd(["EVAL", "return 'after'", "0"]).await, bulk("after"));
}

/// The same for functions: every `redis.register_function` kept an mlua handle for its
/// callback, so about 8000 functions loaded by any client would have aborted the process.
/// Callbacks now live in Lua's registry too.
#[tokio::test]
async fn ten_thousand_functions_stay_loaded() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let mut c = server.client();
    for lib in 0..100 {
        let mut code = format!("#!lua name=lib{lib}\n");
        for f in 0..100 {
            code.push_str(&format!(
                "redis.register_function('f{lib}_{f}', function() return {} end)\n",
                lib * 100 + f
            ));
        }
        assert_eq!(
            c.cmd(["FUNCTION", "LOAD", code.as_str()]).await,
            bulk(&format!("lib{lib}"))
        );
    }
    assert_eq!(c.cmd(["FCALL", "f99_99", "0"]).await, Frame::Integer(9999));
    assert_eq!(c.cmd(["FCALL", "f0_7", "0"]).await, Frame::Integer(7));
    // A script still gets handles of its own.
    assert_eq!(
        c.cmd(["EVAL", "return cmsgpack.pack({1, {2}})", "0"]).await,
        Frame::Bulk(bytes::Bytes::from_static(b"\x92\x01\x91\x02"))
    );
    assert_eq!(c.cmd(["FUNCTION", "DELETE", "lib0"]).await, Frame::ok());
    assert_eq!(
        c.cmd(["FCALL", "f0_7", "0"]).await,
        Frame::error("ERR Function not found")
    );
    assert_eq!(c.cmd(["FUNCTION", "FLUSH"]).await, Frame::ok());
    assert_eq!(
        c.cmd(["FCALL", "f99_99", "0"]).await,
        Frame::error("ERR Function not found")
    );
}
