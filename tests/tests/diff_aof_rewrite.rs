//! `BGREWRITEAOF`: its replies, errors and `INFO persistence` fields compared with a real
//! redis-server 7.0 (run with `aof-use-rdb-preamble no`, so that both rewrite the AOF as
//! commands and the sizes they report can be compared to the byte); the automatic rewrite;
//! the new parameters; and, on latchkey alone, what a rewrite must keep: the writes made while
//! it runs, every type of value across a restart from the rewritten file, the old file whole
//! after a crash during a rewrite, and the bound on what a rewrite holds in memory.
//!
//! Then what reaches the AOF besides keys, and when: function libraries (`FUNCTION LOAD`,
//! `DELETE`, `FLUSH`), the file compared byte for byte with redis-server's; and the AOF turned
//! on and off at run time (`CONFIG SET appendonly`), the replies, the `INFO` fields and the
//! commands in the files compared with redis-server's, and a restart from a file so made.
//!
//! `rdb-key-save-delay` (Redis's testing knob, which latchkey honours the same way) makes
//! both servers pause after each key they write, so that a rewrite stays in progress while
//! the test sends commands.

use std::path::Path;
use std::time::{Duration, Instant};

use latchkey_server::Server;
use latchkey_tests::persisted::{latchkey_aof, redis_aof, temp_dir};
use latchkey_tests::{Diff, RawConn, RedisProcess};

fn cmd(c: &mut RawConn, args: &[&str]) -> String {
    String::from_utf8_lossy(&c.cmd(args)).into_owned()
}

fn info_field(c: &mut RawConn, field: &str) -> String {
    let info = cmd(c, &["INFO", "persistence"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .to_string()
}

/// Waits (a liveness bound, not a measurement) until `field` reads `value`.
fn wait_field(c: &mut RawConn, field: &str, value: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_field(c, field) != value {
        assert!(
            Instant::now() < deadline,
            "{field} never became {value}: {}",
            info_field(c, field)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// redis-server and latchkey, both with the AOF on and rewriting it as commands.
fn aof_pair(dir: &Path, extra: &[&str]) -> Diff {
    let mut args = vec!["--appendonly", "yes", "--aof-use-rdb-preamble", "no"];
    args.extend_from_slice(extra);
    let redis_proc = RedisProcess::spawn(&args);
    let mut b = Server::builder()
        .config("dir", dir.to_str().unwrap())
        .config("appendonly", "yes");
    for pair in extra.chunks(2) {
        b = b.config(pair[0].trim_start_matches("--"), pair[1]);
    }
    let latchkey_server = b.start_blocking().unwrap();
    Diff {
        redis: RawConn::connect(redis_proc.addr()).unwrap(),
        latchkey: RawConn::connect(latchkey_server.addr()).unwrap(),
        redis_proc,
        latchkey_server,
    }
}

/// The `INFO persistence` fields of a rewrite that are the same on both servers at the same
/// step (everything but the times).
const REWRITE_FIELDS: &[&str] = &[
    "aof_enabled",
    "aof_rewrite_in_progress",
    "aof_rewrite_scheduled",
    "aof_last_bgrewrite_status",
    "aof_rewrites",
    "aof_rewrites_consecutive_failures",
    "aof_last_write_status",
    "aof_current_size",
    "aof_base_size",
    "aof_pending_rewrite",
    "aof_buffer_length",
    "rdb_bgsave_in_progress",
];

#[track_caller]
///
/// Redis under `appendfsync everysec` postpones writing its AOF buffer (up to 2 s) while its
/// background fsync of the file is still running, which happens on a loaded machine, so its
/// `aof_current_size` can lag the commands it has answered: the fields are read again until
/// they agree or 5 s have passed, and then compared.
fn same_fields(d: &mut Diff, fields: &[&str]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline
        && fields
            .iter()
            .any(|f| info_field(&mut d.latchkey, f) != info_field(&mut d.redis, f))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    for f in fields {
        assert_eq!(
            info_field(&mut d.latchkey, f),
            info_field(&mut d.redis, f),
            "INFO persistence {f}"
        );
    }
}

/// Waits on both servers until no background job runs and nothing is scheduled.
fn wait_idle(d: &mut Diff) {
    for c in [&mut d.redis, &mut d.latchkey] {
        wait_field(c, "aof_rewrite_scheduled", "0");
        wait_field(c, "aof_rewrite_in_progress", "0");
        wait_field(c, "rdb_bgsave_in_progress", "0");
    }
}

#[test]
fn a_rewrite_answers_and_reports_as_redis_does() {
    let dir = temp_dir("aofrw-diff");
    let mut d = aof_pair(dir.path(), &[]);
    d.table(&[
        "SET s v",
        "SET t v PXAT 4102444800000",
        "RPUSH l a b c",
        "HSET h f v g w",
        "SADD set a b c",
        "ZADD z 1 a 2.5 b",
        "XADD st 1-1 f v",
        "SELECT 2",
        "SET two 2",
        "SELECT 0",
    ]);
    // The same commands in the same bytes: the two files are as long.
    same_fields(&mut d, REWRITE_FIELDS);
    assert_eq!(
        info_field(&mut d.latchkey, "aof_last_rewrite_time_sec"),
        "-1"
    );
    assert_eq!(
        info_field(&mut d.latchkey, "aof_current_rewrite_time_sec"),
        "-1"
    );

    // While a rewrite runs (each server pauses 300 ms after each of its 8 keys).
    d.check(&["CONFIG", "SET", "rdb-key-save-delay", "300000"]);
    d.table(&[
        "BGREWRITEAOF",
        "BGREWRITEAOF",
        "BGSAVE",
        "BGSAVE SCHEDULE",
        "MULTI",
        "SET m 1",
        "BGREWRITEAOF",
        "EXEC",
        "SET during x",
    ]);
    same_fields(&mut d, REWRITE_FIELDS);
    assert_eq!(info_field(&mut d.latchkey, "aof_rewrite_in_progress"), "1");
    assert_ne!(
        info_field(&mut d.latchkey, "aof_current_rewrite_time_sec"),
        "-1"
    );
    // The rewrite ends, then the scheduled save runs (and leaves no change unsaved).
    for c in [&mut d.redis, &mut d.latchkey] {
        wait_field(c, "rdb_changes_since_last_save", "0");
    }
    wait_idle(&mut d);
    // The rewritten file: the snapshot, then the writes made during the rewrite.
    same_fields(&mut d, REWRITE_FIELDS);
    assert_ne!(
        info_field(&mut d.latchkey, "aof_last_rewrite_time_sec"),
        "-1"
    );

    // During a BGSAVE, a rewrite is scheduled, and runs once the save is done.
    d.table(&["BGSAVE", "BGREWRITEAOF", "BGREWRITEAOF", "BGSAVE"]);
    same_fields(&mut d, REWRITE_FIELDS);
    assert_eq!(info_field(&mut d.latchkey, "aof_rewrite_scheduled"), "1");
    wait_idle(&mut d);
    same_fields(&mut d, REWRITE_FIELDS);
    assert_eq!(info_field(&mut d.latchkey, "aof_rewrites"), "2");

    // Scheduled by a transaction, it starts when the transaction is over.
    d.check(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    d.table(&["MULTI", "SET x 1", "BGREWRITEAOF", "SET y 2", "EXEC"]);
    wait_idle(&mut d);
    same_fields(&mut d, REWRITE_FIELDS);
    assert_eq!(info_field(&mut d.latchkey, "aof_rewrites"), "3");
}

#[test]
fn bgrewriteaof_with_the_aof_off_writes_the_file_a_start_with_it_on_loads() {
    // Redis 7.0 rewrites with `appendonly no` too.
    let dir = temp_dir("aofrw-off");
    let lk = Server::builder()
        .config("dir", dir.path().to_str().unwrap())
        .start_blocking()
        .unwrap();
    let mut c = RawConn::connect(lk.addr()).unwrap();
    let redis = RedisProcess::spawn(&[]);
    let mut r = RawConn::connect(redis.addr()).unwrap();
    for conn in [&mut c, &mut r] {
        assert_eq!(cmd(conn, &["SET", "k", "v"]), "+OK\r\n");
        assert_eq!(
            cmd(conn, &["BGREWRITEAOF"]),
            "+Background append only file rewriting started\r\n"
        );
        wait_field(conn, "aof_rewrite_in_progress", "0");
        assert_eq!(info_field(conn, "aof_last_bgrewrite_status"), "ok");
        assert_eq!(info_field(conn, "aof_rewrites"), "1");
        assert_eq!(info_field(conn, "aof_enabled"), "0");
    }
    drop(lk);
    let file = std::fs::read(dir.path().join("appendonly.aof")).unwrap();
    assert_eq!(
        file,
        b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
    );
    let again = latchkey_aof(dir.path());
    let mut c = RawConn::connect(again.addr()).unwrap();
    assert_eq!(cmd(&mut c, &["GET", "k"]), "$1\r\nv\r\n");
}

#[test]
fn the_automatic_rewrite_follows_redis_rule() {
    let dir = temp_dir("aofrw-auto");
    // Off while the keys are written, so that both rewrite the same finished keyspace.
    let mut d = aof_pair(
        dir.path(),
        &[
            "--auto-aof-rewrite-min-size",
            "1024",
            "--auto-aof-rewrite-percentage",
            "0",
        ],
    );
    // 40 keys of 48 bytes each in the file: past 1 KB.
    for i in 0..40 {
        d.check(&["SET", &format!("key:{i:02}"), &"x".repeat(16)]);
    }
    same_fields(&mut d, REWRITE_FIELDS);
    // On: the file is past the minimum and has grown without bound since its base of 0
    // (counted as 1 byte), so the cron rewrites it.
    d.check(&["CONFIG", "SET", "auto-aof-rewrite-percentage", "100"]);
    for c in [&mut d.redis, &mut d.latchkey] {
        wait_field(c, "aof_rewrites", "1");
    }
    wait_idle(&mut d);
    same_fields(&mut d, REWRITE_FIELDS);
    let base: u64 = info_field(&mut d.latchkey, "aof_base_size")
        .parse()
        .unwrap();
    // Overwriting the same keys grows the file, not the keyspace. Short of twice the base,
    // no rewrite ...
    let mut i = 0;
    loop {
        let size: u64 = info_field(&mut d.latchkey, "aof_current_size")
            .parse()
            .unwrap();
        if size + 48 >= 2 * base {
            break;
        }
        d.check(&["SET", &format!("key:{:02}", i % 40), &"y".repeat(16)]);
        i += 1;
    }
    same_fields(&mut d, REWRITE_FIELDS);
    std::thread::sleep(Duration::from_millis(500));
    same_fields(&mut d, &["aof_rewrites", "aof_rewrite_in_progress"]);
    assert_eq!(info_field(&mut d.latchkey, "aof_rewrites"), "1");
    // ... and the write that doubles it brings the next one, which shrinks it back.
    d.check(&["SET", "key:00", &"z".repeat(16)]);
    for c in [&mut d.redis, &mut d.latchkey] {
        wait_field(c, "aof_rewrites", "2");
    }
    wait_idle(&mut d);
    same_fields(&mut d, REWRITE_FIELDS);
    assert_eq!(
        info_field(&mut d.latchkey, "aof_base_size"),
        base.to_string()
    );
    // 0 turns the rule off.
    d.check(&["CONFIG", "SET", "auto-aof-rewrite-percentage", "0"]);
    for i in 0..100 {
        d.check(&["SET", &format!("key:{:02}", i % 40), "z"]);
    }
    std::thread::sleep(Duration::from_millis(500));
    same_fields(&mut d, &["aof_rewrites", "aof_rewrite_in_progress"]);
}

#[test]
fn the_commands_and_parameters_refuse_as_redis_does() {
    let mut d = Diff::new();
    d.table(&[
        "BGREWRITEAOF x",
        "EVAL \"return redis.pcall('bgrewriteaof')\" 0",
        "CONFIG GET auto-aof-rewrite-percentage",
        "CONFIG GET auto-aof-rewrite-min-size",
        "CONFIG GET shutdown-on-sigterm",
        "CONFIG GET shutdown-on-sigint",
        "CONFIG GET rdb-key-save-delay",
        "CONFIG GET *key-save*",
        "CONFIG SET auto-aof-rewrite-percentage -1",
        "CONFIG SET auto-aof-rewrite-percentage 2147483648",
        "CONFIG SET auto-aof-rewrite-percentage 50",
        "CONFIG GET auto-aof-rewrite-percentage",
        "CONFIG SET auto-aof-rewrite-min-size 1mb",
        "CONFIG GET auto-aof-rewrite-min-size",
        "CONFIG SET auto-aof-rewrite-min-size lots",
        "CONFIG SET auto-aof-rewrite-min-size -1",
        "CONFIG SET rdb-key-save-delay -7",
        "CONFIG GET rdb-key-save-delay",
        "CONFIG SET rdb-key-save-delay 2147483648",
        "CONFIG SET rdb-key-save-delay 0",
        "CONFIG SET shutdown-on-sigterm 'save nosave'",
        "CONFIG SET shutdown-on-sigterm bogus",
        "CONFIG SET shutdown-on-sigterm ''",
        "CONFIG SET shutdown-on-sigterm 'FORCE now save'",
        "CONFIG GET shutdown-on-sigterm",
        "CONFIG SET shutdown-on-sigint 'nosave force'",
        "CONFIG GET shutdown-on-sigint",
        "CONFIG SET shutdown-on-sigint 'default save'",
        "CONFIG GET shutdown-on-sigint",
        "CONFIG SET shutdown-on-sigint default",
        "CONFIG GET shutdown-on-sigint",
    ]);
}

// ---------------------------------------------------------------------------------------------
// latchkey alone: what a rewrite keeps

/// Keys of every type, in two databases, with the history a rewrite removes.
fn fill(c: &mut RawConn) {
    for i in 0..300 {
        let _ = i;
        assert_eq!(cmd(c, &["INCR", "counter"]).chars().next(), Some(':'));
    }
    let list: Vec<String> = (0..130).map(|i| format!("item{i}")).collect();
    let mut rpush = vec!["RPUSH", "list"];
    rpush.extend(list.iter().map(String::as_str));
    for args in [
        &rpush[..],
        &["SET", "plain", "value"],
        &["SET", "lock", "token", "PX", "600000"],
        &["HSET", "hash", "f1", "v1", "f2", "v2", "f3", "v3"],
        &["PEXPIRE", "hash", "900000"],
        &["SADD", "ints", "1", "2", "3", "-70000", "5000000000"],
        &["SADD", "names", "alice", "bob", "carol"],
        &[
            "ZADD", "zset", "1.5", "a", "-inf", "low", "+inf", "high", "0.1", "tenth",
        ],
        &["XADD", "stream", "1-1", "f", "v1"],
        &["XADD", "stream", "2-1", "f", "v2", "g", "w"],
        &["XADD", "stream", "3-1", "f", "v3"],
        &["XDEL", "stream", "3-1"],
        &["XGROUP", "CREATE", "stream", "readers", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "readers",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            "stream",
            ">",
        ],
        &["XGROUP", "CREATECONSUMER", "stream", "readers", "idle-bob"],
        &["XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM"],
        // A group whose `entries-read` counts exactly (no entry deleted): 2.
        &["XADD", "counted", "1-1", "a", "b"],
        &["XADD", "counted", "2-1", "a", "b"],
        &["XGROUP", "CREATE", "counted", "g", "0"],
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "counted", ">"],
        &["SELECT", "3"],
        &["SET", "in3", "three"],
        &["SELECT", "0"],
    ] {
        let r = cmd(c, args);
        assert!(!r.starts_with('-'), "{args:?}: {r}");
    }
}

/// The writes made while the rewrite runs: new keys, changed ones, a deleted one, another
/// database.
fn write_during(c: &mut RawConn) {
    for args in [
        &["SET", "during", "d"][..],
        &["SET", "plain", "changed", "PX", "700000"],
        &["HSET", "hash", "f4", "v4"],
        &["RPUSH", "list", "tail"],
        &["LPOP", "list"],
        &["SADD", "names", "dave"],
        &["SREM", "ints", "2"],
        &["ZADD", "zset", "7", "seven"],
        &["XADD", "stream", "4-1", "f", "v4"],
        &[
            "XREADGROUP",
            "GROUP",
            "readers",
            "carol",
            "COUNT",
            "5",
            "STREAMS",
            "stream",
            ">",
        ],
        &["XACK", "stream", "readers", "2-1"],
        &["INCR", "counter"],
        &["DEL", "names"],
        &["SADD", "names", "eve"],
        &["SELECT", "5"],
        &["SET", "in5", "five"],
        &["SELECT", "0"],
    ] {
        let r = cmd(c, args);
        assert!(!r.starts_with('-'), "{args:?}: {r}");
    }
}

/// An extended `XPENDING` reply without its idle times (which move with the clock).
fn without_idle(reply: &str) -> String {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    let mut kept = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        // Each entry ends `:idle`, `:deliveries`.
        if l.starts_with(':') && lines.get(i + 1).is_some_and(|n| n.starts_with(':')) {
            continue;
        }
        kept.push(*l);
    }
    kept.join("\r\n")
}

/// An `XINFO GROUPS` reply with its `entries-read` and `lag` values blanked.
fn without_counters(reply: &str) -> String {
    let lines: Vec<&str> = reply.split("\r\n").collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let after = |name: &str| i >= 2 && lines[i - 1] == name;
        out.push(if after("entries-read") || after("lag") {
            "?"
        } else {
            l
        });
    }
    out.join("\r\n")
}

/// What a reader sees of every key, exactly (deadlines as absolute times). Without
/// `rewritten`, consumer groups' `entries-read` and `lag` are left out everywhere: the state
/// comes from replaying writes as Redis 7.0 logs them, which do not carry them (see below).
fn state(c: &mut RawConn, rewritten: bool) -> Vec<String> {
    let mut out = Vec::new();
    for db in ["0", "3", "5"] {
        cmd(c, &["SELECT", db]);
        out.push(cmd(c, &["DBSIZE"]));
        let keys = cmd(c, &["KEYS", "*"]);
        let mut names: Vec<String> = keys
            .split("\r\n")
            .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
            .map(str::to_string)
            .collect();
        names.sort();
        for k in names {
            let t = cmd(c, &["TYPE", &k]);
            out.push(format!("{k} {t} {}", cmd(c, &["PEXPIRETIME", &k])));
            let value = match t.trim() {
                "+string" => cmd(c, &["GET", &k]),
                "+hash" => cmd(c, &["HGETALL", &k]),
                "+list" => cmd(c, &["LRANGE", &k, "0", "-1"]),
                "+set" => cmd(c, &["SORT", &k, "ALPHA"]),
                "+zset" => cmd(c, &["ZRANGE", &k, "0", "-1", "WITHSCORES"]),
                "+stream" => {
                    let mut s = cmd(c, &["XRANGE", &k, "-", "+"]);
                    let info = cmd(c, &["XINFO", "STREAM", &k]);
                    // Up to the first entry: length, nodes, last-generated-id, deleted id,
                    // entries-added, groups.
                    s.push_str(info.split("first-entry").next().unwrap());
                    let groups = cmd(c, &["XINFO", "GROUPS", &k]);
                    if k == "stream" || !rewritten {
                        // Redis 7.0 sends `XREADGROUP` to replicas and the AOF as `XCLAIM
                        // ... LASTID`, which carries no `entries-read`: replaying the reads
                        // logged after the snapshot (or the old file) leaves it as it was,
                        // in Redis as in latchkey. `counted` below checks what the rewrite
                        // itself keeps of it.
                        s.push_str(&without_counters(&groups));
                    } else {
                        s.push_str(&groups);
                    }
                    if k == "stream" {
                        s.push_str(&cmd(c, &["XPENDING", &k, "readers"]));
                        s.push_str(&without_idle(&cmd(
                            c,
                            &["XPENDING", &k, "readers", "-", "+", "100"],
                        )));
                        let consumers = cmd(c, &["XINFO", "CONSUMERS", &k, "readers"]);
                        s.push_str(&format!(
                            "alice:{} carol:{} idle-bob:{}",
                            consumers.contains("alice"),
                            consumers.contains("carol"),
                            consumers.contains("idle-bob")
                        ));
                    }
                    s
                }
                other => panic!("unexpected type {other} of {k}"),
            };
            out.push(value);
        }
    }
    cmd(c, &["SELECT", "0"]);
    out
}

/// Asserts two [`state`]s are equal, showing only what differs.
#[track_caller]
fn same_state(got: &[String], expected: &[String]) {
    let differ: Vec<String> = got
        .iter()
        .zip(expected)
        .enumerate()
        .filter(|(_, (g, e))| g != e)
        .map(|(i, (g, e))| format!("#{i}\n  got:      {g:?}\n  expected: {e:?}"))
        .collect();
    assert!(
        differ.is_empty() && got.len() == expected.len(),
        "{} entries against {}; differing:\n{}",
        got.len(),
        expected.len(),
        differ.join("\n")
    );
}

fn aof_bytes(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("appendonly.aof")).unwrap()
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|w| *w == needle)
        .count()
}

#[test]
fn writes_made_during_a_rewrite_are_kept_and_a_restart_finds_every_key() {
    let dir = temp_dir("aofrw-restart");
    let lk = latchkey_aof(dir.path());
    let mut c = RawConn::connect(lk.addr()).unwrap();
    fill(&mut c);
    // A function library: the rewritten file loads it first (`FUNCTION LOAD`).
    let lib = "#!lua name=rw\nredis.register_function('rwf', function() return 'kept' end)";
    assert_eq!(cmd(&mut c, &["FUNCTION", "LOAD", lib]), "$2\r\nrw\r\n");
    let before: u64 = info_field(&mut c, "aof_current_size").parse().unwrap();
    assert_eq!(before, aof_bytes(dir.path()).len() as u64);
    // 250 ms after each of the 12 keys: the writes below land while the rewrite runs.
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "250000"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut c, &["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    write_during(&mut c);
    assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "1");
    // The writes wait in the rewrite's buffer, accounted in MEMORY STATS.
    let stats = cmd(&mut c, &["MEMORY", "STATS"]);
    let buffered: u64 = stats
        .split("aof.buffer\r\n:")
        .nth(1)
        .and_then(|r| r.split("\r\n").next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(buffered > 0, "{stats}");
    wait_field(&mut c, "aof_rewrite_in_progress", "0");
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    let stats = cmd(&mut c, &["MEMORY", "STATS"]);
    assert!(stats.contains("aof.buffer\r\n:0\r\n"), "{stats}");
    // A write after the swap goes to the new file.
    assert_eq!(cmd(&mut c, &["SET", "after", "a"]), "+OK\r\n");
    let expected = state(&mut c, true);

    // The new file: the history is gone (301 INCRs became one SET, and the one INCR made
    // during the rewrite), the sizes say so, nothing is left of the temporary file.
    let file = aof_bytes(dir.path());
    assert!((file.len() as u64) < before, "{} >= {before}", file.len());
    assert_eq!(count(&file, b"INCR"), 1);
    assert_eq!(
        info_field(&mut c, "aof_current_size"),
        file.len().to_string()
    );
    let base: usize = info_field(&mut c, "aof_base_size").parse().unwrap();
    assert!(base < file.len());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["appendonly.aof"]);

    // A new process on the same folder finds every key, as it was.
    drop(c);
    drop(lk);
    let again = latchkey_aof(dir.path());
    let mut c = RawConn::connect(again.addr()).unwrap();
    same_state(&state(&mut c, true), &expected);
    assert_eq!(cmd(&mut c, &["GET", "counter"]), "$3\r\n301\r\n");
    assert_eq!(cmd(&mut c, &["FCALL", "rwf", "0"]), "$4\r\nkept\r\n");
}

#[test]
fn a_crash_during_a_rewrite_leaves_a_whole_aof() {
    let dir = temp_dir("aofrw-crash");
    let lk = latchkey_aof(dir.path());
    let mut c = RawConn::connect(lk.addr()).unwrap();
    fill(&mut c);
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "200000"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut c, &["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    write_during(&mut c);
    let expected = state(&mut c, false);
    assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "1");
    // The process dies mid-rewrite and starts again from its AOF: the old file, which every
    // write reached.
    assert_eq!(
        cmd(&mut c, &["LATCHKEY.FAILOVER", "RESTART", "AOF"]),
        "+OK\r\n"
    );
    let mut c = RawConn::connect(lk.addr()).unwrap();
    same_state(&state(&mut c, false), &expected);
    assert_eq!(info_field(&mut c, "aof_rewrites"), "0");
    // The given-up rewrite stops at its next key and deletes its temporary file.
    wait_field(&mut c, "aof_rewrite_in_progress", "0");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["appendonly.aof"]);
    // A rewrite after the restart completes, and the file it leaves loads the same keys.
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "0"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut c, &["BGREWRITEAOF"]),
        "+Background append only file rewriting started\r\n"
    );
    wait_field(&mut c, "aof_rewrite_in_progress", "0");
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    assert_eq!(
        cmd(&mut c, &["LATCHKEY.FAILOVER", "RESTART", "AOF"]),
        "+OK\r\n"
    );
    let mut c = RawConn::connect(lk.addr()).unwrap();
    same_state(&state(&mut c, false), &expected);
}

#[test]
fn a_rewrite_whose_buffer_passes_its_bound_fails_and_loses_nothing() {
    let dir = temp_dir("aofrw-bound");
    let lk = latchkey_aof(dir.path());
    let mut c = RawConn::connect(lk.addr()).unwrap();
    fill(&mut c);
    // The bound is the replicas' hard output-buffer limit: 4 KB here.
    for args in [
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "replica 4096 0 0",
        ][..],
        &["CONFIG", "SET", "rdb-key-save-delay", "250000"],
        &["BGREWRITEAOF"],
    ] {
        assert!(cmd(&mut c, args).starts_with('+'), "{args:?}");
    }
    let big = "x".repeat(1000);
    for i in 0..8 {
        assert_eq!(cmd(&mut c, &["SET", &format!("big{i}"), &big]), "+OK\r\n");
    }
    assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "1");
    // Past the bound the buffer is dropped at once.
    let stats = cmd(&mut c, &["MEMORY", "STATS"]);
    assert!(stats.contains("aof.buffer\r\n:0\r\n"), "{stats}");
    wait_field(&mut c, "aof_rewrite_in_progress", "0");
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "err");
    assert_eq!(info_field(&mut c, "aof_rewrites_consecutive_failures"), "1");
    let expected = state(&mut c, false);
    assert_eq!(cmd(&mut c, &["GET", "big7"]), format!("$1000\r\n{big}\r\n"));
    drop(c);
    drop(lk);
    let again = latchkey_aof(dir.path());
    let mut c = RawConn::connect(again.addr()).unwrap();
    same_state(&state(&mut c, false), &expected);
    assert_eq!(cmd(&mut c, &["GET", "big7"]), format!("$1000\r\n{big}\r\n"));
}

// ---------------------------------------------------------------------------------------------
// Function libraries in the AOF

/// A library `name` whose function `<name>_v` answers `v`, so that which code is loaded shows.
fn versioned(name: &str, v: &str) -> String {
    format!(
        "#!lua name={name}\nredis.register_function{{function_name='{name}_v', callback=function() return '{v}' end, flags={{'no-writes'}}}}"
    )
}

/// `FUNCTION LOAD`, `DELETE` and `FLUSH` reach the AOF as redis-server writes them, byte for
/// byte (refused ones not at all), and a restart from the file has the same libraries.
#[test]
fn function_changes_reach_the_aof_and_a_restart_loads_them() {
    let dir = temp_dir("aof-functions");
    let mut d = aof_pair(dir.path(), &["--appendfsync", "always"]);
    let steps: Vec<Vec<String>> = [
        vec!["FUNCTION", "LOAD", &versioned("one", "1")],
        vec!["FUNCTION", "LOAD", &versioned("two", "1")],
        vec!["FUNCTION", "LOAD", &versioned("one", "1")],
        vec!["FUNCTION", "LOAD", "REPLACE", &versioned("one", "2")],
        vec!["FUNCTION", "DELETE", "two"],
        vec!["FUNCTION", "DELETE", "two"],
        vec!["SET", "k", "v"],
        vec!["FUNCTION", "FLUSH"],
        vec!["FUNCTION", "LOAD", &versioned("three", "1")],
        vec!["FUNCTION", "LOAD", &versioned("four", "1")],
        vec!["FUNCTION", "DELETE", "four"],
        vec!["SELECT", "4"],
        vec!["FUNCTION", "LOAD", "replace", &versioned("three", "3")],
        vec!["SELECT", "0"],
        vec!["MULTI"],
        vec!["FUNCTION", "LOAD", &versioned("five", "5")],
        vec!["SET", "m", "1"],
        vec!["EXEC"],
        vec!["FUNCTION", "FLUSH", "bad"],
        vec!["FUNCTION", "LOAD", &versioned("six", "6")],
        vec!["FUNCTION", "FLUSH", "ASYNC"],
        vec!["FUNCTION", "LOAD", &versioned("three", "3")],
        vec!["FUNCTION", "LOAD", &versioned("five", "5")],
    ]
    .iter()
    .map(|s| s.iter().map(|a| a.to_string()).collect())
    .collect();
    for args in &steps {
        d.check(args);
    }
    let file = aof_bytes(dir.path());
    assert_eq!(
        String::from_utf8_lossy(&file),
        String::from_utf8_lossy(&redis_aof(d.redis_proc.dir())),
        "the AOF"
    );
    assert_eq!(count(&file, b"FUNCTION"), 14);
    let listed =
        |c: &mut RawConn, lib: &str| cmd(c, &["FUNCTION", "LIST", "LIBRARYNAME", lib, "WITHCODE"]);
    let before = [
        listed(&mut d.latchkey, "three"),
        listed(&mut d.latchkey, "five"),
    ];
    // Both start again from their AOF.
    d.redis_proc.crash_and_restart();
    let mut r = RawConn::connect(d.redis_proc.addr()).unwrap();
    drop(d.latchkey);
    drop(d.latchkey_server);
    let again = latchkey_aof(dir.path());
    let mut c = RawConn::connect(again.addr()).unwrap();
    for (lib, listing) in ["three", "five"].iter().zip(&before) {
        assert_eq!(&listed(&mut c, lib), listing);
        assert_eq!(listed(&mut c, lib), listed(&mut r, lib));
    }
    for conn in [&mut c, &mut r] {
        assert_eq!(cmd(conn, &["FCALL_RO", "three_v", "0"]), "$1\r\n3\r\n");
        assert_eq!(cmd(conn, &["FCALL_RO", "five_v", "0"]), "$1\r\n5\r\n");
        assert_eq!(
            cmd(conn, &["FCALL_RO", "one_v", "0"]),
            "-ERR Function not found\r\n"
        );
        assert_eq!(cmd(conn, &["GET", "m"]), "$1\r\n1\r\n");
    }
}

// ---------------------------------------------------------------------------------------------
// `CONFIG SET appendonly yes|no` at run time

/// The `INFO persistence` fields both servers print whether the AOF is on or off.
const SWITCH_FIELDS: &[&str] = &[
    "aof_enabled",
    "aof_rewrite_in_progress",
    "aof_rewrite_scheduled",
    "aof_last_bgrewrite_status",
    "aof_rewrites",
    "aof_rewrites_consecutive_failures",
    "aof_last_write_status",
    "rdb_bgsave_in_progress",
];

/// redis-server (rewriting the AOF as commands) and latchkey in `dir`, both with the AOF off.
fn off_pair(dir: &Path) -> Diff {
    let redis_proc = RedisProcess::spawn(&["--aof-use-rdb-preamble", "no"]);
    let latchkey_server = Server::builder()
        .config("dir", dir.to_str().unwrap())
        .start_blocking()
        .unwrap();
    Diff {
        redis: RawConn::connect(redis_proc.addr()).unwrap(),
        latchkey: RawConn::connect(latchkey_server.addr()).unwrap(),
        redis_proc,
        latchkey_server,
    }
}

/// The commands of an AOF, each after the database it applies to, sorted: what two files
/// hold, whatever order their rewrites wrote the keys in.
fn normalized(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut db = String::from("?");
    let mut rest = bytes;
    let line = |rest: &mut &[u8]| -> String {
        let end = rest.windows(2).position(|w| w == b"\r\n").expect("a line");
        let l = String::from_utf8_lossy(&rest[..end]).into_owned();
        *rest = &rest[end + 2..];
        l
    };
    while !rest.is_empty() {
        let n: usize = line(&mut rest)[1..].parse().unwrap();
        let mut args = Vec::new();
        for _ in 0..n {
            let len: usize = line(&mut rest)[1..].parse().unwrap();
            args.push(String::from_utf8_lossy(&rest[..len]).into_owned());
            rest = &rest[len + 2..];
        }
        // A set's members, a hash's fields, come in each server's own order.
        if args[0] == "SADD" {
            args[2..].sort();
        } else if args[0] == "HMSET" {
            let mut pairs: Vec<String> = args[2..].chunks(2).map(|p| p.join(" ")).collect();
            pairs.sort();
            args.truncate(2);
            args.extend(pairs);
        }
        if args[0].eq_ignore_ascii_case("select") {
            db = args[1].clone();
        } else {
            out.push(format!("{db}: {}", args.join(" ")));
        }
    }
    out.sort();
    out
}

/// The two servers' AOFs hold the same commands, in files of the same length.
#[track_caller]
fn same_files(d: &Diff, dir: &Path) {
    let (ours, theirs) = (aof_bytes(dir), redis_aof(d.redis_proc.dir()));
    assert_eq!(normalized(&ours), normalized(&theirs));
    assert_eq!(ours.len(), theirs.len());
}

/// Turning the AOF on rewrites the keyspace into it (the writes made meanwhile kept), reports
/// as Redis does while it waits for that rewrite and after; a `SHUTDOWN` meanwhile is refused;
/// turning it off leaves the file as it was; on again, a new rewrite.
#[test]
fn turning_the_aof_on_and_off_answers_and_reports_as_redis_does() {
    let dir = temp_dir("aof-switch");
    let mut d = off_pair(dir.path());
    d.table(&[
        "SET s v",
        "SET t v PXAT 4102444800000",
        "RPUSH l a b c",
        "HSET h f v g w",
        "SADD set a b c",
        "ZADD z 1 a 2.5 b",
        "XADD st 1-1 f v",
        "SELECT 2",
        "SET two 2",
        "SELECT 0",
    ]);
    d.check(&["FUNCTION", "LOAD", &versioned("lib", "1")]);
    same_fields(&mut d, SWITCH_FIELDS);
    assert_eq!(info_field(&mut d.latchkey, "aof_enabled"), "0");
    d.table(&[
        "CONFIG GET appendonly",
        "CONFIG SET appendonly maybe",
        "CONFIG SET appendonly no",
        "CONFIG GET appendonly",
    ]);

    // On, while each server pauses 300 ms after each of its 8 keys: the rewrite runs.
    d.check(&["CONFIG", "SET", "rdb-key-save-delay", "300000"]);
    d.table(&["CONFIG SET appendonly YES", "CONFIG GET appendonly"]);
    same_fields(&mut d, REWRITE_FIELDS);
    assert_eq!(info_field(&mut d.latchkey, "aof_enabled"), "1");
    assert_eq!(info_field(&mut d.latchkey, "aof_rewrite_in_progress"), "1");
    // The file is not there until the rewrite is done.
    assert!(!dir.path().join("appendonly.aof").exists());
    d.table(&[
        "SET during x",
        "HSET h g changed",
        "CONFIG SET appendonly yes",
        "BGREWRITEAOF",
        // Redis refuses to exit before the AOF has its first content.
        "SHUTDOWN",
    ]);
    // The write made meanwhile counts in the size, as Redis counts its buffer.
    same_fields(&mut d, REWRITE_FIELDS);
    assert_ne!(info_field(&mut d.latchkey, "aof_current_size"), "0");
    wait_idle(&mut d);
    same_fields(&mut d, REWRITE_FIELDS);
    assert_eq!(info_field(&mut d.latchkey, "aof_rewrites"), "1");
    same_files(&d, dir.path());
    // Writes go to the file from now on.
    d.table(&["SET after y", "DEL s", "SELECT 2", "INCR two", "SELECT 0"]);
    same_fields(&mut d, REWRITE_FIELDS);
    same_files(&d, dir.path());

    // Off: the file stays as it was, whatever is written.
    d.table(&["CONFIG SET appendonly no", "CONFIG GET appendonly"]);
    same_fields(&mut d, SWITCH_FIELDS);
    let info = cmd(&mut d.latchkey, &["INFO", "persistence"]);
    assert!(!info.contains("aof_current_size"), "{info}");
    let file = aof_bytes(dir.path());
    d.table(&["SET off z", "DEL after", "FUNCTION DELETE lib"]);
    assert_eq!(aof_bytes(dir.path()), file);
    same_files(&d, dir.path());

    // On again, at once this time: the new rewrite holds what was written while it was off.
    d.check(&["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    d.check(&["CONFIG", "SET", "appendonly", "yes"]);
    wait_idle(&mut d);
    same_fields(&mut d, REWRITE_FIELDS);
    assert_eq!(info_field(&mut d.latchkey, "aof_rewrites"), "2");
    same_files(&d, dir.path());
    let file = aof_bytes(dir.path());
    assert_eq!(count(&file, b"off"), 1);
    assert_eq!(count(&file, b"after"), 0);
    assert_eq!(count(&file, b"FUNCTION"), 0);
}

/// While a `BGSAVE` runs, or inside `EXEC`, turning the AOF on schedules its rewrite, which
/// starts once it may; turning it off gives a running rewrite up. As Redis does.
#[test]
fn turning_the_aof_on_waits_for_a_save_or_a_transaction_and_off_gives_a_rewrite_up() {
    let dir = temp_dir("aof-switch-jobs");
    let mut d = off_pair(dir.path());
    d.table(&["SET a 1", "SET b 2", "SET c 3"]);
    d.check(&["CONFIG", "SET", "rdb-key-save-delay", "300000"]);
    d.table(&["BGSAVE", "CONFIG SET appendonly yes"]);
    same_fields(&mut d, REWRITE_FIELDS);
    assert_eq!(info_field(&mut d.latchkey, "aof_rewrite_scheduled"), "1");
    assert_eq!(info_field(&mut d.latchkey, "aof_pending_rewrite"), "1");
    assert_eq!(info_field(&mut d.latchkey, "rdb_bgsave_in_progress"), "1");
    // The save ends, then the rewrite runs, then the AOF is on.
    wait_idle(&mut d);
    same_fields(&mut d, REWRITE_FIELDS);
    assert_eq!(info_field(&mut d.latchkey, "aof_rewrites"), "1");
    same_files(&d, dir.path());

    // Off during a rewrite: the rewrite is given up, not failed, and leaves no file behind.
    d.check(&["BGREWRITEAOF"]);
    assert_eq!(info_field(&mut d.latchkey, "aof_rewrite_in_progress"), "1");
    d.check(&["CONFIG", "SET", "appendonly", "no"]);
    wait_idle(&mut d);
    same_fields(&mut d, SWITCH_FIELDS);
    assert_eq!(info_field(&mut d.latchkey, "aof_rewrites"), "2");
    assert_eq!(
        info_field(&mut d.latchkey, "aof_last_bgrewrite_status"),
        "ok"
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "dump.rdb")
        .collect();
    assert_eq!(names, ["appendonly.aof"]);

    // Inside a transaction: scheduled, and started once the transaction is over.
    d.table(&["MULTI", "CONFIG SET appendonly yes", "SET m 1", "EXEC"]);
    for c in [&mut d.redis, &mut d.latchkey] {
        wait_field(c, "aof_rewrites", "3");
    }
    same_fields(&mut d, &["aof_enabled"]);
    wait_idle(&mut d);
    same_fields(&mut d, REWRITE_FIELDS);
    same_files(&d, dir.path());
}

/// On latchkey alone: the AOF turned on at run time rebuilds every key after a restart,
/// the writes made during its first rewrite included; what is written once it is off again
/// is not in it.
#[test]
fn an_aof_turned_on_at_run_time_brings_every_key_back_and_off_keeps_the_file() {
    let dir = temp_dir("aof-switch-restart");
    let lk = Server::builder()
        .config("dir", dir.path().to_str().unwrap())
        .start_blocking()
        .unwrap();
    let mut c = RawConn::connect(lk.addr()).unwrap();
    fill(&mut c);
    let lib = versioned("kept", "yes");
    assert_eq!(cmd(&mut c, &["FUNCTION", "LOAD", &lib]), "$4\r\nkept\r\n");
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "250000"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "appendonly", "yes"]),
        "+OK\r\n"
    );
    write_during(&mut c);
    assert_eq!(info_field(&mut c, "aof_rewrite_in_progress"), "1");
    wait_field(&mut c, "aof_rewrite_in_progress", "0");
    assert_eq!(info_field(&mut c, "aof_last_bgrewrite_status"), "ok");
    assert_eq!(cmd(&mut c, &["SET", "after", "a"]), "+OK\r\n");
    let expected = state(&mut c, true);
    assert_eq!(
        info_field(&mut c, "aof_current_size"),
        aof_bytes(dir.path()).len().to_string()
    );

    // Off: fsynced and closed; later writes are not in it.
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "appendonly", "no"]),
        "+OK\r\n"
    );
    let file = aof_bytes(dir.path());
    for args in [
        &["SET", "off", "z"][..],
        &["DEL", "plain"],
        &["FUNCTION", "DELETE", "kept"],
    ] {
        assert!(!cmd(&mut c, args).starts_with('-'), "{args:?}");
    }
    assert_eq!(aof_bytes(dir.path()), file);

    // A new process on the same folder, with the AOF on, finds every key it held.
    drop(c);
    drop(lk);
    let again = latchkey_aof(dir.path());
    let mut c = RawConn::connect(again.addr()).unwrap();
    same_state(&state(&mut c, true), &expected);
    assert_eq!(cmd(&mut c, &["GET", "off"]), "$-1\r\n");
    assert_eq!(cmd(&mut c, &["GET", "plain"]), "$7\r\nchanged\r\n");
    assert_eq!(cmd(&mut c, &["FCALL_RO", "kept_v", "0"]), "$3\r\nyes\r\n");
}
