//! Differential tests of Lua scripting against a real redis-server: conversions both ways under
//! RESP2 and RESP3, errors, the sandbox, and the script cache.

use latchkey_tests::Diff;

/// `(script, numkeys and arguments)` pairs run as `EVAL`, compared byte for byte.
const CASES: &[(&str, &[&str])] = &[
    // Lua -> reply
    ("return 1", &["0"]),
    ("return -3.7", &["0"]),
    ("return 3.99", &["0"]),
    ("return 9007199254740993", &["0"]),
    ("return 'hello'", &["0"]),
    ("return true", &["0"]),
    ("return false", &["0"]),
    ("return nil", &["0"]),
    ("return {1,2,{3,'x'},nil,5}", &["0"]),
    ("return {1,2,3.5,'a',true,false,nil,4}", &["0"]),
    ("return {}", &["0"]),
    ("return {ok='fine'}", &["0"]),
    ("return {err='bad thing'}", &["0"]),
    ("return {err='-WRONGTYPE x'}", &["0"]),
    ("return redis.error_reply('My err')", &["0"]),
    ("return redis.status_reply('FINE')", &["0"]),
    ("return {double=3.5}", &["0"]),
    ("return {map={a=1}}", &["0"]),
    ("return KEYS", &["2", "a", "b", "c"]),
    ("return ARGV", &["1", "a", "b", "c"]),
    ("return {KEYS[1], ARGV[1], #KEYS, #ARGV}", &["1", "k", "v"]),
    // Numbers passed to redis.call become text as Redis 7.0 writes them (%.17g).
    (
        "local out = {} for _, n in ipairs({1e15, 1e16, 1e17, 99999999999999999, 0.1, 1.5, -0, 1/0, -1/0, 0/0, 1e300, 2^53, 2^63, -2^63, 1e-5, 0.0001, 12345.678}) do redis.call('set', 'n', n) out[#out+1] = redis.call('get', 'n') end return out",
        &["0"],
    ),
    ("return redis.call('incrbyfloat', 'f', 0.1)", &["0"]),
    ("return redis.call('echo', 3.25)", &["0"]),
    // reply -> Lua
    ("return redis.call('set','a','b')", &["0"]),
    ("return redis.call('get','a')", &["0"]),
    ("return redis.call('get','nokey')", &["0"]),
    ("return type(redis.call('get','nokey'))", &["0"]),
    ("return redis.call('ping')", &["0"]),
    ("return redis.call('incr','n')", &["0"]),
    ("return redis.call('hgetall','nohash')", &["0"]),
    (
        "redis.call('hset','h','f','v'); return redis.call('hgetall','h')",
        &["0"],
    ),
    ("redis.setresp(3); return redis.call('hgetall','h')", &["0"]),
    (
        "redis.setresp(3); return type(redis.call('get','nokey'))",
        &["0"],
    ),
    (
        "redis.call('zadd','z',1.5,'m'); return redis.call('zscore','z','m')",
        &["0"],
    ),
    (
        "redis.setresp(3); return redis.call('zscore','z','m')",
        &["0"],
    ),
    ("return redis.call('exists','a','nokey')", &["0"]),
    ("return redis.pcall('incr','a')", &["0"]),
    ("local r = redis.pcall('incr','a'); return r.err", &["0"]),
    ("return redis.pcall('nosuch')", &["0"]),
    ("return redis.pcall('get')", &["0"]),
    ("return redis.call('set','num', 3.0)", &["0"]),
    ("return redis.call('get','num')", &["0"]),
    ("return redis.call('set','num', 3.5)", &["0"]),
    ("return redis.call('get','num')", &["0"]),
    // Errors
    ("return redis.call('nosuch')", &["0"]),
    ("return redis.call('get')", &["0"]),
    ("return redis.call('incr','a')", &["0"]),
    ("return redis.call('subscribe','a')", &["0"]),
    ("return redis.call('hello')", &["0"]),
    ("return redis.call('hello','3')", &["0"]),
    ("return redis.call('reset')", &["0"]),
    ("return redis.call('quit')", &["0"]),
    ("return redis.pcall('hello')", &["0"]),
    ("return redis.call()", &["0"]),
    ("return redis.call({})", &["0"]),
    ("error('boom')", &["0"]),
    ("error({err='custom'})", &["0"]),
    ("local x = 1\nlocal y = 2\nerror('on line three')", &["0"]),
    ("return 1 +", &["0"]),
    ("return redis.setresp(4)", &["0"]),
    ("return 1", &["-1"]),
    ("return 1", &["2", "a"]),
    ("return 1", &["x"]),
    // Sandbox
    ("x = 1", &["0"]),
    ("return print", &["0"]),
    ("return os", &["0"]),
    ("return io", &["0"]),
    ("return require", &["0"]),
    ("return loadfile", &["0"]),
    ("return dofile", &["0"]),
    ("return _G.undefined_thing", &["0"]),
    ("string.foo = 1", &["0"]),
    ("redis.call = nil", &["0"]),
    ("local x = 1; nosuchfn()", &["0"]),
    // Libraries
    ("return redis.sha1hex('')", &["0"]),
    ("return redis.sha1hex('latchkey')", &["0"]),
    ("return tostring(bit.band(5,3))", &["0"]),
    (
        "return {bit.bor(1,2), bit.bxor(7,2), bit.lshift(1,4), bit.rshift(256,4), bit.bnot(0)}",
        &["0"],
    ),
    ("return bit.tohex(255)", &["0"]),
    ("return cjson.encode({1,2,3})", &["0"]),
    ("return cjson.decode('{\"a\":[1,2]}').a[2]", &["0"]),
    ("return string.format('%d-%s', 5, 'x')", &["0"]),
    ("return math.floor(3.7)", &["0"]),
    ("return table.concat({'a','b'}, ',')", &["0"]),
    ("return tonumber('12') + 1", &["0"]),
    ("return redis.LOG_WARNING", &["0"]),
    (
        "redis.log(redis.LOG_NOTICE, 'hello from a test'); return 1",
        &["0"],
    ),
    ("return redis.replicate_commands()", &["0"]),
    ("return type(redis.call('time')[1])", &["0"]),
    // A script cannot wait: XREAD/XREADGROUP refuse BLOCK, naming the command as spelled.
    ("return redis.pcall('xread','STREAMS','s','$')", &["1", "s"]),
    ("return redis.pcall('XRead','BLOCK',0,'STREAMS','s','$')", &["1", "s"]),
    (
        "return redis.pcall('xreadgroup','group','g','c','BLOCK',0,'STREAMS','s','>')",
        &["1", "s"],
    ),
    // Metatables: `_G`'s is a read-only table, the libraries have none.
    ("return type(getmetatable(_G))", &["0"]),
    ("local g = getmetatable(_G); g.__index = {}", &["0"]),
    ("getmetatable(_G).__index(nil, 'zz')", &["0"]),
    ("return type(getmetatable(getmetatable(_G)))", &["0"]),
    ("return {type(getmetatable(redis)), type(getmetatable(cjson))}", &["0"]),
    ("return getmetatable('').__index == string", &["0"]),
    ("local m = getmetatable(); return m", &["0"]),
    ("return getmetatable(nil)", &["0"]),
    // Not a cluster node: CLUSTER answers so, and CLUSTER RESET is refused in a script.
    ("return redis.pcall('cluster','info')", &["0"]),
    ("return redis.pcall('cluster','reset','hard')", &["0"]),
];

#[test]
fn eval_conversions_errors_and_sandbox_resp2() {
    let mut d = Diff::new();
    for (script, rest) in CASES {
        let mut args = vec!["EVAL", script];
        args.extend_from_slice(rest);
        d.check(&args);
    }
}

#[test]
fn eval_conversions_errors_and_sandbox_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    for (script, rest) in CASES {
        let mut args = vec!["EVAL", script];
        args.extend_from_slice(rest);
        d.check(&args);
    }
}

#[test]
fn evalsha_and_the_script_cache() {
    let mut d = Diff::new();
    let body = "return redis.call('get', KEYS[1])";
    let sha = d.check(&["SCRIPT", "LOAD", body]);
    let sha = String::from_utf8_lossy(&sha)
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    d.check(&["SET", "k", "v"]);
    d.check(&["EVALSHA", &sha, "1", "k"]);
    d.check(&["EVALSHA", &sha.to_uppercase(), "1", "k"]);
    d.check(&["EVALSHA_RO", &sha, "1", "k"]);
    d.check(&[
        "SCRIPT",
        "EXISTS",
        &sha,
        "0000000000000000000000000000000000000000",
    ]);
    d.check(&["EVALSHA", "0000000000000000000000000000000000000000", "0"]);
    d.check(&["EVALSHA", "abc", "0"]);
    d.check(&["SCRIPT", "FLUSH"]);
    d.check(&["SCRIPT", "EXISTS", &sha]);
    d.check(&["EVALSHA", &sha, "1", "k"]);
    d.check(&["SCRIPT", "LOAD", "return 1 +"]);
    d.check(&["SCRIPT", "FLUSH", "BOGUS"]);
    d.check(&["SCRIPT", "KILL"]);
    d.check(&["SCRIPT", "FOO"]);
    d.check(&["SCRIPT", "LOAD"]);
    d.check(&["EVAL_RO", "return redis.call('set','a','b')", "0"]);
    d.check(&["EVAL_RO", "return redis.call('get','k')", "0"]);
    d.check(&["EVAL"]);
    // EVAL caches too: the sha of an EVAL'd script works with EVALSHA afterwards.
    d.check(&["EVAL", "return 42", "0"]);
    d.check(&["EVALSHA", "1fa00e76656cc152ad327c13fe365858fd7be306", "0"]);
}

#[test]
fn scripts_inside_multi_and_publish_from_scripts() {
    let mut d = Diff::new();
    d.table(&["MULTI"]);
    d.check(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "c"]);
    d.check(&["EVAL", "return redis.call('publish', 'ch', 'm')", "0"]);
    d.table(&["EXEC"]);
}

#[test]
fn functions_load_call_list_delete() {
    let mut d = Diff::new();
    let lib1 = "#!lua name=lib1\nredis.register_function('f1', function(keys, args) return redis.call('set', keys[1], args[1]) end)\nredis.register_function{function_name='f2', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}}";
    d.check(&["FUNCTION", "FLUSH"]);
    d.check(&[
        "FUNCTION",
        "LOAD",
        "redis.register_function('f', function(k,a) return 1 end)",
    ]);
    d.check(&["FUNCTION", "LOAD", lib1]);
    d.check(&["FUNCTION", "LOAD", lib1]);
    d.check(&["FUNCTION", "LOAD", "#!lua name=lib2\nreturn 1"]);
    d.check(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib4\nredis.register_function('f1', function() return 1 end)",
    ]);
    d.check(&["FCALL", "f1", "1", "k", "v"]);
    d.check(&["FCALL_RO", "f2", "1", "k"]);
    d.check(&["FCALL_RO", "f1", "1", "k", "v"]);
    d.check(&["FCALL", "nof", "0"]);
    d.check(&["FCALL", "f1", "-1"]);
    d.check(&["FUNCTION", "STATS"]);
    d.check(&["FUNCTION", "DELETE", "nolib"]);
    d.check(&["EVAL", "redis.register_function('x', function() end)", "0"]);
    d.check(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib3\nredis.register_function('f3', function(keys, args) error('bad') end)",
    ]);
    d.check(&["FCALL", "f3", "0"]);
    d.check(&["FUNCTION", "LIST", "LIBRARYNAME", "lib3", "WITHCODE"]);
    d.check(&[
        "FUNCTION",
        "LOAD",
        "REPLACE",
        "#!lua name=lib1\nredis.register_function('f1', function() return 2 end)",
    ]);
    d.check(&["FCALL", "f1", "0"]);
    d.check(&["FCALL", "f2", "1", "k"]);
    d.check(&["FUNCTION", "DELETE", "lib1"]);
    d.check(&["FCALL", "f1", "0"]);
    d.check(&["FUNCTION", "FOO"]);
}

/// `FUNCTION LIST` shows a function's flags as status replies, once each, in Redis's order,
/// in RESP2 and in RESP3 (a set).
#[test]
fn function_list_flags_are_status_replies() {
    let mut d = Diff::new();
    d.check(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=flagged\nredis.register_function{function_name='ff', callback=function() return 1 end, flags={'allow-stale', 'no-writes', 'no-cluster', 'no-writes'}, description='with flags'}",
    ]);
    let reply = d.check(&["FUNCTION", "LIST"]);
    let text = String::from_utf8_lossy(&reply);
    assert!(text.contains("+no-writes\r\n"), "{text}");
    d.check(&["FUNCTION", "LIST", "LIBRARYNAME", "flag*", "WITHCODE"]);
    // (HELLO's own reply differs in version and id.)
    d.both(&["HELLO", "3"]);
    d.check(&["FUNCTION", "LIST"]);
}

/// Redis's `EVAL does not leak in the Lua stack` (unit/scripting, for scripts and for
/// functions): after `SCRIPT FLUSH` and ten thousand tiny runs, `used_memory_lua` stays
/// under 100 KB. Both servers must pass the bound, and count the same ten thousand
/// increments. Latchkey's interpreter started at about 92 KB and let each run's garbage
/// pile up until Lua's own collector got to it; it now compiles its library wrappers once
/// and steps the collector after runs, as Redis does (each time the heap grew by 24 KB
/// rather than every 50 runs).
#[test]
fn lua_memory_stays_bounded_over_ten_thousand_runs() {
    const RUNS: usize = 10_000;
    const BATCH: usize = 500;
    let mut d = Diff::new();
    let body = "return redis.call('incr',KEYS[1])";
    let library = format!(
        "#!lua name=test\nredis.register_function('test', function(KEYS, ARGV)\n {body} \nend)"
    );
    for as_function in [false, true] {
        d.check(&["SCRIPT", "FLUSH"]);
        d.check(&["SET", "x", "0"]);
        // A batch of runs is sent at once and its replies read after, as the Tcl test does
        // with its deferring client.
        let mut batch = Vec::new();
        for _ in 0..BATCH {
            if as_function {
                batch.extend(latchkey_tests::RawConn::encode(&[
                    "FUNCTION", "LOAD", "REPLACE", &library,
                ]));
                batch.extend(latchkey_tests::RawConn::encode(&[
                    "FCALL", "test", "1", "x",
                ]));
            } else {
                batch.extend(latchkey_tests::RawConn::encode(&["EVAL", body, "1", "x"]));
            }
        }
        let replies_per_batch = if as_function { 2 * BATCH } else { BATCH };
        for _ in 0..RUNS / BATCH {
            for conn in [&mut d.redis, &mut d.latchkey] {
                conn.send_raw(&batch);
                for _ in 0..replies_per_batch {
                    conn.read_reply();
                }
            }
        }
        d.check(&["GET", "x"]);
        assert_eq!(d.latchkey.cmd(&["GET", "x"]), b"$5\r\n10000\r\n");
        for (name, conn) in [("redis", &mut d.redis), ("latchkey", &mut d.latchkey)] {
            let info = String::from_utf8_lossy(&conn.cmd(&["INFO", "memory"])).into_owned();
            let lua: u64 = info
                .lines()
                .find_map(|l| l.strip_prefix("used_memory_lua:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("{name}: no used_memory_lua in {info}"));
            assert!(
                lua < 100 * 1024,
                "{name}: used_memory_lua {lua} after {RUNS} runs (functions: {as_function})"
            );
        }
    }
}
