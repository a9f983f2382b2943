//! `DEBUG RELOAD`, `DEBUG PROTOCOL` and `DEBUG SET-DISABLE-DENY-SCRIPTS` compared with
//! redis-server 7.0 (which refuses `DEBUG` unless `enable-debug-command` allows it). Redis's own
//! Tcl tests tagged `needs:debug` use them: a data set must survive a save and a load with the
//! same digest and encodings, and a script must see each RESP3 type as Redis shows it.

use latchkey_server::Server;
use latchkey_testkit::{RawConn, RedisProcess};
use latchkey_tests::persisted::temp_dir;
use latchkey_tests::Diff;

/// Both servers, latchkey writing its snapshot in a folder of its own (redis-server in its
/// own `--dir` already), with `DEBUG` allowed on redis-server.
fn servers(dir: &std::path::Path) -> Diff {
    let latchkey_server = Server::builder()
        .config("dir", dir.to_str().expect("a UTF-8 path"))
        .start_blocking()
        .expect("start latchkey");
    Diff::of(
        RedisProcess::spawn(&["--enable-debug-command", "yes"]),
        latchkey_server,
    )
}

/// Every type, small and large encodings, a TTL, two databases.
fn fill(d: &mut Diff) {
    d.table(&[
        "SET s hello",
        "SET n 12345",
        "SET ttl v EX 1000",
        "RPUSH l a b c 1 2 3",
        "SADD iset 1 2 3 -4 100000",
        "SADD set a b c",
        "ZADD z 1 a 2.5 b -3 c",
        "HSET h f v g w",
        "XADD st 1-1 f v",
        "XGROUP CREATE st grp 0",
        "SELECT 3",
        "SET three 3",
        "SELECT 0",
    ]);
    let many: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    for (cmd, key) in [("RPUSH", "biglist"), ("SADD", "bigset")] {
        let mut args = vec![cmd.to_string(), key.to_string()];
        args.extend(many.iter().cloned());
        d.check(&args);
    }
    let mut zadd = vec!["ZADD".to_string(), "bigz".to_string()];
    let mut hset = vec!["HSET".to_string(), "bighash".to_string()];
    for (i, m) in many.iter().enumerate() {
        zadd.extend([format!("{i}.5"), m.clone()]);
        hset.extend([m.clone(), format!("value of {m}")]);
    }
    d.check(&zadd);
    d.check(&hset);
}

#[test]
fn reload_keeps_every_type_its_encoding_and_ttl_as_redis() {
    let dir = temp_dir("debug-reload");
    let mut d = servers(dir.path());
    fill(&mut d);
    let before = d.check(&["DEBUG", "DIGEST"]);
    assert_eq!(d.check(&["DEBUG", "RELOAD"]), b"+OK\r\n");
    assert_eq!(
        d.check(&["DEBUG", "DIGEST"]),
        before,
        "the same data set after a reload"
    );
    for key in [
        "s", "n", "l", "iset", "set", "z", "h", "st", "biglist", "bigset", "bigz", "bighash",
    ] {
        d.check(&["OBJECT", "ENCODING", key]);
    }
    let (r, l) = d.both(&["TTL", "ttl"]);
    assert_eq!(r, l);
    assert_ne!(l, b":-1\r\n", "the TTL survives");
    d.table(&[
        "DBSIZE",
        "SELECT 3",
        "GET three",
        "SELECT 0",
        "XINFO GROUPS st",
    ]);
    // A key whose time is up when the file is loaded is not loaded (a master's rule).
    d.table(&["DEBUG SET-ACTIVE-EXPIRE 0", "SET brief v PX 1", "DBSIZE"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    d.table(&[
        "DEBUG RELOAD",
        "DEBUG OBJECT brief",
        "DBSIZE",
        "DEBUG SET-ACTIVE-EXPIRE 1",
    ]);
    // What redis-server refuses, in its words.
    d.table(&["DEBUG RELOAD FAST", "DEBUG RELOAD MERGE NOSAVE BAD"]);
}

#[test]
fn reload_options_merge_noflush_nosave_as_redis() {
    let dir = temp_dir("debug-reload-options");
    let mut d = servers(dir.path());
    let lib = "#!lua name=lib\nredis.register_function('hi', function() return 'hello' end)";
    d.check(&["FUNCTION", "LOAD", lib]);
    d.table(&["SET x 1", "DEBUG RELOAD", "FCALL hi 0", "GET x"]);
    // Without MERGE, a library the server already has makes the load fail, and nothing
    // changes; with it, the file's library replaces the one in memory.
    let failed = d.check(&["DEBUG", "RELOAD", "NOFLUSH"]);
    assert_eq!(failed, b"-ERR Error trying to load the RDB dump\r\n");
    d.table(&[
        "FUNCTION LIST",
        "GET x",
        "DEBUG RELOAD NOFLUSH MERGE",
        "FUNCTION LIST",
        "GET x",
    ]);
    // NOSAVE loads the file on disk: what was written since is gone, unless NOFLUSH keeps it.
    d.table(&[
        "SET y 2",
        "DEBUG RELOAD NOSAVE",
        "GET y",
        "GET x",
        "SET y 3",
        "DEBUG RELOAD NOSAVE NOFLUSH MERGE",
        "GET y",
        "GET x",
        "FCALL hi 0",
    ]);
}

#[test]
fn reload_without_merge_refuses_a_key_it_already_has_and_changes_nothing() {
    // redis-server stops the whole server on such a key; latchkey answers the error instead.
    let dir = temp_dir("debug-reload-clash");
    let server = Server::builder()
        .config("dir", dir.path().to_str().expect("a UTF-8 path"))
        .start_blocking()
        .expect("start latchkey");
    let mut c = RawConn::connect(server.addr()).expect("connect");
    assert_eq!(c.cmd(&["SET", "k", "old"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SAVE"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "k", "new"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "other", "1"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH"]),
        b"-ERR Error trying to load the RDB dump\r\n"
    );
    assert_eq!(c.cmd(&["GET", "k"]), b"$3\r\nnew\r\n");
    assert_eq!(c.cmd(&["DBSIZE"]), b":2\r\n");
    // A file that is not there cannot be loaded either.
    std::fs::remove_file(dir.path().join("dump.rdb")).expect("the snapshot was written");
    assert_eq!(
        c.cmd(&["DEBUG", "RELOAD", "NOSAVE"]),
        b"-ERR Error trying to load the RDB dump\r\n"
    );
    assert_eq!(c.cmd(&["DBSIZE"]), b":2\r\n");
}

#[test]
fn debug_protocol_sends_each_type_as_redis_under_resp2_and_resp3() {
    let mut d = Diff::with_redis_args(&["--enable-debug-command", "yes"]);
    let types = [
        "string",
        "integer",
        "double",
        "bignum",
        "null",
        "array",
        "set",
        "map",
        "true",
        "false",
        "verbatim",
        "nosuchtype",
    ];
    for proto in ["2", "3"] {
        // HELLO's own reply names each server: only the switch is wanted.
        d.both(&["HELLO", proto]);
        for t in types {
            d.check(&["DEBUG", "PROTOCOL", t]);
        }
        // An attribute and a push come before the command's real reply: read both.
        for t in ["attrib", "push"] {
            let first = d.check(&["DEBUG", "PROTOCOL", t]);
            if proto == "3" {
                assert_eq!(d.redis.read_reply(), d.latchkey.read_reply(), "{t}");
            } else if t == "push" {
                assert!(first.starts_with(b"-ERR RESP2"), "{first:?}");
            }
        }
        d.check(&["PING"]);
    }
}

#[test]
fn scripts_see_each_resp3_type_as_redis_once_deny_scripts_is_off() {
    let mut d = Diff::with_redis_args(&["--enable-debug-command", "yes"]);
    // By default a script may not call DEBUG (it is `noscript`).
    d.check(&[
        "EVAL",
        "return redis.call('debug', 'protocol', 'string')",
        "0",
    ]);
    d.check(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]);
    let types = [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "true", "false",
        "verbatim", "attrib",
    ];
    for client in ["2", "3"] {
        d.both(&["HELLO", client]);
        for lua in ["2", "3"] {
            for t in types {
                let script =
                    format!("redis.setresp({lua}); return redis.call('debug', 'protocol', '{t}')");
                d.check(&["EVAL", script.as_str(), "0"]);
            }
        }
        // What a script returns in RESP3 forms of its own.
        for script in [
            "return {big_number='123\\r\\n456'}",
            "return {verbatim_string={format='txt', string='plain'}}",
            "return {verbatim_string={format='mkd', string='# title'}}",
            "redis.setresp(3); return true",
            "redis.setresp(3); return false",
            "redis.setresp(3); return {true, false, 1}",
            "return {true, false}",
            "return redis.call('client', 'list') ~= nil",
        ] {
            d.check(&["EVAL", script, "0"]);
        }
    }
    d.check(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"]);
    d.check(&[
        "EVAL",
        "return redis.call('debug', 'protocol', 'string')",
        "0",
    ]);
}

#[test]
fn what_a_script_may_never_call_stays_refused_with_deny_scripts_off() {
    // Another script, a transaction or a subscription from inside a script would reenter the
    // engine or the connection: latchkey refuses them even with the check off.
    let server = Server::builder().start_blocking().expect("start latchkey");
    let mut c = RawConn::connect(server.addr()).expect("connect");
    assert_eq!(
        c.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]),
        b"+OK\r\n"
    );
    for call in [
        "redis.call('eval', 'return 1', '0')",
        "redis.call('multi')",
        "redis.call('subscribe', 'ch')",
        "redis.call('blpop', 'l', '0')",
        "redis.call('debug', 'reload')",
    ] {
        let reply = c.cmd(&["EVAL", &format!("return {call}"), "0"]);
        assert!(
            reply.starts_with(b"-ERR This Redis command is not allowed from script"),
            "{call}: {}",
            String::from_utf8_lossy(&reply)
        );
    }
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
}
