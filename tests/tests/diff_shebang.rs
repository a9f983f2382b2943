//! Shebangs and declared flags, side by side with redis-server 7.0: an `EVAL` script's first
//! line `#!lua flags=...` (parsed as Redis parses it, with Redis's errors), and what its flags
//! and a function's decide before it runs — `no-writes` runs read-only and may go through
//! `EVAL_RO`/`FCALL_RO`; any other script or function is a write command for
//! `min-replicas-to-write` and a memory-growing one for `maxmemory` unless `allow-oom`; a
//! script without a shebang keeps being judged by the commands it calls.

use latchkey_tests::Diff;

#[test]
fn declared_flags_match_redis() {
    let cases: &[&[&str]] = &[
        &["eval", "#!not-lua\nreturn 1", "0"],
        &["eval", "#!lua badger=data\nreturn 1", "0"],
        &["eval", "#!lua flags=allow-oom,what?\nreturn 1", "0"],
        &["eval", "#!lua return 1", "0"],
        &["eval", "#!lua\nreturn 1", "0"],
        &["eval", "#!lua flags=\nreturn 1", "0"],
        &["eval", "#!lua  flags=no-writes\nreturn 1", "0"],
        &["eval", "#!lua flags=no-writes,,allow-oom\nreturn 1", "0"],
        &["eval_ro", "#!lua\nreturn 1", "0"],
        &["eval_ro", "#!lua flags=no-writes\nreturn 1", "0"],
        &["eval", "#!lua flags=no-writes\nredis.call('set','x',1) return 1", "1", "x"],
        &["eval", "#!lua\nreturn error('x')", "0"],
        &["eval", "#!lua\n\nreturn nil + 1", "0"],
        &["eval", "#!", "0"],
        &["eval", "#!\nreturn 1", "0"],
        &["eval", "#! lua\nreturn 1", "0"],
        &["eval", "#!lua \"flags=no-writes\"\nreturn 1", "0"],
        &["eval", "#!lua \"flags=no-writes\nreturn 1", "0"],
        &["config", "set", "min-replicas-to-write", "1"],
        &["eval", "#!lua\nreturn 1", "0"],
        &["eval", "#!lua flags=no-writes\nreturn 1", "0"],
        &["eval_ro", "#!lua\nreturn 1", "0"],
        &["eval", "return redis.call('get','x')", "1", "x"],
        &["script", "load", "#!lua\nreturn 1"],
        &["evalsha", "cb70127618f0b0be70c53cf6bfcfa54a29d9b0c0", "0"],
        &["evalsha", "CB70127618F0B0BE70C53CF6BFCFA54A29D9B0C0", "0"],
        &["config", "set", "min-replicas-to-write", "0"],
        &["evalsha", "cb70127618f0b0be70c53cf6bfcfa54a29d9b0c0", "0"],
        &["script", "load", "#!lua flags=bad\nreturn 1"],
        &["function", "load", "#!lua name=lib\nredis.register_function('w', function() return 1 end)\nredis.register_function{function_name='r', callback=function() return 2 end, flags={'no-writes'}}"],
        &["config", "set", "min-replicas-to-write", "1"],
        &["fcall", "w", "0"],
        &["fcall", "r", "0"],
        &["fcall_ro", "w", "0"],
        &["fcall_ro", "r", "0"],
        &["config", "set", "min-replicas-to-write", "0"],
        &["function", "flush"],
        // A key first: the in-process server counts the keyspace's bytes as its used memory
        // (see `server/src/memory.rs`), none while it is empty, where redis-server counts its
        // whole heap; with a key, both are over a 1-byte maxmemory.
        &["set", "ballast", "x"],
        &["config", "set", "maxmemory", "1"],
        &["eval", "#!lua\nreturn 1", "0"],
        &["eval", "#!lua flags=allow-oom\nreturn redis.call('set','y',1)", "1", "y"],
        &["eval", "#!lua flags=no-writes\nreturn 1", "0"],
        &["eval", "return 1", "0"],
        &["eval", "return redis.call('set','y',2)", "1", "y"],
        &["config", "set", "maxmemory", "0"],
        &["multi"],
        &["eval", "#!lua\nreturn 1", "0"],
        &["exec"],
        &["config", "set", "min-replicas-to-write", "1"],
        &["multi"],
        &["eval", "#!lua\nreturn 1", "0"],
        &["eval", "#!lua flags=no-writes\nreturn 1", "0"],
        &["exec"],
        &["config", "set", "min-replicas-to-write", "0"],
    ];
    let mut d = Diff::new();
    for args in cases {
        d.check(args);
    }
}
