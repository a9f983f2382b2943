//! Introspection commands against a real redis-server 7.0, in RESP2 and RESP3: `DEBUG OBJECT`,
//! `MEMORY STATS|DOCTOR|MALLOC-STATS|PURGE|HELP`, `COMMAND LIST FILTERBY ACLCAT|PATTERN`,
//! the per-subcommand script flags of `LATENCY`, `CONFIG` and the other containers, and the
//! `save` parameter (its validation, `CONFIG GET`, and the save points acting on it).
//!
//! What is a pointer, a clock reading or a count of bytes that depends on the allocator is
//! masked, and only there.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use latchkey_server::Server;
use latchkey_tests::raw::show;
use latchkey_tests::{Diff, RawConn, RedisProcess};

/// A `Diff` with `DEBUG` enabled on redis-server (7.0 refuses it by default).
fn diff() -> Diff {
    Diff::with_redis_args(&["--enable-debug-command", "yes"])
}

/// Switches both connections to RESP3 (the `HELLO` replies differ: server name, id, ...).
fn resp3(d: &mut Diff) {
    let (r, l) = d.both(&["HELLO", "3"]);
    assert!(r.starts_with(b"%") && l.starts_with(b"%"), "{}", show(&l));
}

/// A `DEBUG OBJECT` line with the value's address and its LRU clock fields masked, and, for
/// a list, its serialized length (latchkey writes lists in the plain RDB form, Redis as
/// listpacks: docs/COMPATIBILITY.md).
fn mask_debug_object(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    let list = text.contains("encoding:quicklist");
    text.split(' ')
        .map(|word| {
            if list && word.starts_with("serializedlength:") {
                return "serializedlength:*".to_string();
            }
            for field in ["at:", "lru:", "lru_seconds_idle:"] {
                if word.starts_with(field) {
                    return format!("{field}*");
                }
            }
            word.to_string()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn fill_types(d: &mut Diff) {
    d.table(&[
        "FLUSHALL",
        "SET s hello",
        "SET i 123",
        "SET neg -5",
        "SET big 12345678901234567890123",
        "SADD ints 1 2 3",
        "SADD wide 1 100000 -7",
        "RPUSH l a b c 1 2",
    ]);
    d.check(&["SET", "long", &"a".repeat(100)]);
    d.check(&["SET", "text", &"abcdefghij".repeat(5)]);
    // 3,000 integers and a few hundred long strings: several quicklist nodes on Redis.
    let nums: Vec<String> = (1..=3000).map(|i| i.to_string()).collect();
    let mut push = vec!["RPUSH".to_string(), "many".to_string()];
    push.extend(nums);
    d.check(&push);
    let mut push = vec!["RPUSH".to_string(), "strings".to_string()];
    push.extend((0..300).map(|i| format!("element-{i}-{}", "x".repeat(i % 90))));
    d.check(&push);
}

fn debug_object_replies(d: &mut Diff) {
    fill_types(d);
    for key in [
        "s", "i", "neg", "big", "long", "text", "ints", "wide", "l", "many", "strings",
    ] {
        let (r, l) = d.both(&["DEBUG", "OBJECT", key]);
        assert!(r.starts_with(b"+Value at:0x"), "{}", show(&r));
        assert_eq!(
            mask_debug_object(&l),
            mask_debug_object(&r),
            "DEBUG OBJECT {key}"
        );
    }
    d.table(&[
        "DEBUG OBJECT nosuchkey",
        "DEBUG OBJECT",
        "DEBUG OBJECT a b",
        // An expired key not yet deleted is still shown, as Redis's dictionary lookup finds it.
        "DEBUG SET-ACTIVE-EXPIRE 0",
        "SET gone v PX 1",
    ]);
    std::thread::sleep(Duration::from_millis(20));
    let (r, l) = d.both(&["DEBUG", "OBJECT", "gone"]);
    assert_eq!(mask_debug_object(&l), mask_debug_object(&r));
    d.table(&["DEBUG SET-ACTIVE-EXPIRE 1"]);
}

#[test]
fn debug_object_answers_redis_s_line() {
    let mut d = diff();
    debug_object_replies(&mut d);
    resp3(&mut d);
    debug_object_replies(&mut d);
}

/// A list keeps the `list-max-listpack-size` and `list-compress-depth` it was made with, as
/// Redis's quicklist does: `CONFIG SET` changes only the lists made afterwards, `COPY` keeps
/// the original's, `RESTORE` and `LMOVE` to a new key take the current ones, `SORT ... STORE`
/// makes its list with the built-in -2 and 0, and the fill is clamped to -5..=32767.
#[test]
fn debug_object_shows_the_list_parameters_a_list_was_made_under() {
    let mut d = diff();
    let same = |d: &mut Diff, key: &str| {
        let (r, l) = d.both(&["DEBUG", "OBJECT", key]);
        assert!(r.starts_with(b"+Value at:0x"), "{key}: {}", show(&r));
        assert_eq!(mask_debug_object(&l), mask_debug_object(&r), "{key}");
        String::from_utf8_lossy(&r).into_owned()
    };
    d.table(&[
        "CONFIG SET list-max-listpack-size 5",
        "CONFIG SET list-compress-depth 1",
        "RPUSH l a b c d e f g h i j k l",
        "CONFIG SET list-max-listpack-size 40000",
        "RPUSH clamped a b",
        "CONFIG SET list-max-listpack-size -1",
        "CONFIG SET list-compress-depth 0",
        "RPUSH m 1 2 3",
    ]);
    // Read after the parameters changed: each list still shows its own.
    let l = same(&mut d, "l");
    assert!(l.contains("ql_listpack_max:5 ql_compressed:1"), "{l}");
    let clamped = same(&mut d, "clamped");
    assert!(clamped.contains("ql_listpack_max:32767"), "{clamped}");
    same(&mut d, "m");
    d.table(&[
        // Pushing more keeps the list's own fill: nodes of 5 on both.
        "RPUSH l m n o p q r s",
        "COPY l copied",
        "SORT l ALPHA STORE sorted",
        "LMOVE l moved LEFT LEFT",
    ]);
    for key in ["l", "copied", "sorted", "moved"] {
        same(&mut d, key);
    }
    // Redis's own payload of `m` (made under -1), restored on both under -3 (latchkey's
    // `DUMP` of a list is another form). A one-node list: Redis keeps a restored list's
    // nodes as the payload has them, where latchkey counts them by pushing.
    d.table(&["CONFIG SET list-max-listpack-size -3"]);
    let dumped = d.redis.cmd(&["DUMP", "m"]);
    let payload = latchkey_tests::raw::bulk_payload(&dumped);
    d.check(&[b"RESTORE".as_slice(), b"restored", b"0", &payload]);
    let restored = same(&mut d, "restored");
    assert!(
        restored.contains("ql_listpack_max:-3 ql_compressed:0"),
        "{restored}"
    );
    d.check(&["RPUSH", "big", &"x".repeat(5000), &"y".repeat(5000)]);
    same(&mut d, "big");
}

/// The names of a `MEMORY STATS` reply (RESP2: a flat array; RESP3: a map), in order, with the
/// type of each value (`:` integer, `,` double, `$` bulk, `*`/`%` nested).
fn stats_shape(reply: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(reply);
    let lines: Vec<&str> = text.split("\r\n").collect();
    let mut out = Vec::new();
    let mut i = 1;
    while i < lines.len() {
        let l = lines[i];
        if let Some(rest) = l.strip_prefix('$') {
            if rest != "-1" {
                // RESP2 sends a double as a bulk string: a number is a value, not a name.
                let s = lines[i + 1];
                out.push(if s.parse::<f64>().is_ok() {
                    "double".to_string()
                } else {
                    format!("name {s}")
                });
                i += 2;
                continue;
            }
        }
        if let Some(c) = l.chars().next() {
            let kind = match c {
                ':' => "integer",
                ',' => "double",
                '*' | '%' => "nested",
                _ => "other",
            };
            out.push(kind.to_string());
        }
        i += 1;
    }
    out
}

fn memory_replies(d: &mut Diff, resp3: bool) {
    d.table(&[
        "MEMORY HELP",
        "MEMORY HELP x",
        "MEMORY STATS x",
        "MEMORY DOCTOR x",
        "MEMORY MALLOC-STATS x",
        "MEMORY PURGE x",
        "MEMORY nosuch",
        "MEMORY PURGE",
        "FLUSHALL",
        // An instance using under 5 MB: Redis's doctor declines to judge it.
        "MEMORY DOCTOR",
    ]);
    let (r, l) = d.both(&["MEMORY", "STATS"]);
    let (rs, ls) = (stats_shape(&r), stats_shape(&l));
    assert_eq!(ls, rs, "MEMORY STATS on an empty keyspace");
    d.table(&[
        "SET a 1",
        "SELECT 2",
        "SET b 2",
        "SET c 3 EX 100",
        "SELECT 0",
    ]);
    let (r, l) = d.both(&["MEMORY", "STATS"]);
    let (rs, ls) = (stats_shape(&r), stats_shape(&l));
    assert_eq!(ls, rs, "MEMORY STATS with keys in db 0 and db 2");
    assert!(ls.contains(&"name db.2".to_string()), "{ls:?}");
    let count = |reply: &[u8]| {
        let text = String::from_utf8_lossy(reply).into_owned();
        let lines: Vec<&str> = text.split("\r\n").collect();
        let at = lines.iter().position(|l| *l == "keys.count").unwrap();
        lines[at + 1].to_string()
    };
    assert_eq!(count(&l), count(&r));
    assert_eq!(count(&l), ":3");
    // The allocator's report: jemalloc's text on redis-server; an embedded latchkey with the
    // system's allocator answers Redis's text for an allocator without a report.
    let (r, l) = d.both(&["MEMORY", "MALLOC-STATS"]);
    assert!(
        r.starts_with(if resp3 { b"=" } else { b"$" }),
        "{}",
        show(&r)
    );
    assert_eq!(
        l,
        b"$45\r\nStats not supported for the current allocator\r\n".to_vec()
    );
}

#[test]
fn memory_subcommands_answer_redis_s_shapes() {
    let mut d = diff();
    memory_replies(&mut d, false);
    resp3(&mut d);
    memory_replies(&mut d, true);
}

/// The sorted names of a `COMMAND LIST` reply.
fn names(reply: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(reply).into_owned();
    let mut out: Vec<String> = text
        .split("\r\n")
        .skip(1)
        .filter(|l| !l.starts_with('$') && !l.is_empty())
        .map(str::to_string)
        .collect();
    out.sort();
    out
}

#[test]
fn command_list_filters_by_acl_category_and_pattern_with_subcommands() {
    let mut d = diff();
    let (r, l) = d.both(&["COMMAND", "LIST"]);
    let (theirs, ours) = (names(&r), names(&l));
    // Every name latchkey lists is Redis's (WAITAOF and latchkey's own commands aside), and
    // Redis lists each of latchkey's containers' subcommands as latchkey does.
    let top: Vec<&String> = ours.iter().filter(|n| !n.contains('|')).collect();
    let has = |n: &str| top.iter().any(|t| *t == n.split('|').next().unwrap());
    for n in &ours {
        if n != "waitaof" && !n.starts_with("latchkey.") {
            assert!(theirs.contains(n), "latchkey lists {n}, Redis does not");
        }
    }
    for n in &theirs {
        if has(n) {
            assert!(ours.contains(n), "Redis lists {n}, latchkey does not");
        }
    }
    // Each category: Redis's list, less the commands latchkey does not have.
    let cats = names(&d.check(&["ACL", "CAT"]));
    assert!(cats.len() >= 21, "{cats:?}");
    for cat in &cats {
        let (r, l) = d.both(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", cat]);
        let expected: Vec<String> = names(&r).into_iter().filter(|n| has(n)).collect();
        let mut got = names(&l);
        got.retain(|n| n != "waitaof" && !n.starts_with("latchkey."));
        assert_eq!(got, expected, "COMMAND LIST FILTERBY ACLCAT {cat}");
    }
    d.table(&[
        "COMMAND LIST FILTERBY ACLCAT nosuchcategory",
        "COMMAND LIST FILTERBY ACLCAT",
        "COMMAND LIST FILTERBY ACLCAT a b",
        "COMMAND LIST FILTERBY PATTERN MEMORY|MALLOC*",
        "COMMAND LIST FILTERBY MODULE x",
    ]);
    // Redis lists in its hash tables' order: compared sorted.
    let (r, l) = d.both(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "latency|h*"]);
    assert_eq!(names(&l), names(&r));
    assert_eq!(names(&l).len(), 3);
    let (r, l) = d.both(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", "SCRIPTING"]);
    assert_eq!(names(&l), names(&r));
    let (r, l) = d.both(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "config*"]);
    assert_eq!(names(&l), names(&r));
    resp3(&mut d);
    d.table(&[
        "COMMAND LIST FILTERBY ACLCAT nosuchcategory",
        "COMMAND LIST FILTERBY PATTERN MEMORY|MALLOC*",
    ]);
}

fn script_flags(d: &mut Diff) {
    let call = |args: &str| format!("return redis.call({args})");
    for args in [
        "'latency','help'",
        "'latency','latest'",
        "'latency','reset'",
        "'latency','help','x'",
        "'latency','nosuch'",
        "'latency'",
        "'config','help'",
        "'config','get','maxmemory'",
        "'client','help'",
        "'client','id'",
        "'acl','help'",
        "'acl','whoami'",
        "'function','help'",
        "'function','list'",
        "'script','help'",
        "'script','flush'",
        "'memory','help'",
        "'memory','usage','nokey'",
        "'memory','nosuch'",
        "'object','help'",
        "'object','nosuch','x'",
        "'xinfo','help'",
        "'pubsub','help'",
        "'slowlog','help'",
    ] {
        let script = call(args);
        let exact_help = ["'latency','help'", "'config','help'", "'function','help'"];
        if args.ends_with("'help'") && !exact_help.contains(&args) {
            // Allowed on both; some help texts differ (latchkey's CLIENT, SCRIPT and PUBSUB
            // texts name what it has), which is not what this test is about.
            let (r, l) = d.both(&["EVAL", &script, "0"]);
            assert!(
                r.starts_with(b"*") && l.starts_with(b"*"),
                "{args}: {}",
                show(&l)
            );
        } else {
            d.check(&["EVAL", &script, "0"]);
        }
    }
}

#[test]
fn scripts_may_run_what_each_subcommand_s_flags_allow() {
    let mut d = diff();
    script_flags(&mut d);
    resp3(&mut d);
    script_flags(&mut d);
}

fn save_config(d: &mut Diff) {
    d.table(&[
        "CONFIG GET save",
        "CONFIG SET save '1 x'",
        "CONFIG SET save '0 1'",
        "CONFIG SET save '5 -1'",
        "CONFIG SET save '5 1 7'",
        "CONFIG SET save '5  1'",
        "CONFIG SET save ' 5 1'",
        "CONFIG SET save '0x10 1'",
        "CONFIG SET save '+5 -0 3600 4294967297'",
        "CONFIG GET save",
        "CONFIG SET save '3600 1 300 100 60 10000'",
        "CONFIG GET save",
        "CONFIG SET save ''",
        "CONFIG GET save",
    ]);
}

#[test]
fn the_save_parameter_is_read_and_printed_as_redis_does() {
    let mut d = diff();
    save_config(&mut d);
    resp3(&mut d);
    save_config(&mut d);
}

/// A field of `INFO persistence` on `c`.
fn persistence(c: &mut RawConn, field: &str) -> String {
    let info = String::from_utf8_lossy(&c.cmd(&["INFO", "persistence"])).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .to_string()
}

/// Sets a save point of one change in one second on the server at `addr`, writes, and waits
/// (at most a minute) until a background save wrote the file.
fn save_point_fires(addr: SocketAddr, dir: &std::path::Path) {
    let mut c = RawConn::connect(addr).unwrap();
    assert_eq!(c.cmd(&["CONFIG", "SET", "save", "1 1"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["SET", "k2", "v"]), b"+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(60);
    while persistence(&mut c, "rdb_changes_since_last_save") != "0"
        || persistence(&mut c, "rdb_bgsave_in_progress") != "0"
    {
        assert!(
            Instant::now() < deadline,
            "no background save within a minute on {addr}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(persistence(&mut c, "rdb_last_bgsave_status"), "ok");
    assert!(dir.join("dump.rdb").exists(), "no dump.rdb in {dir:?}");
}

#[test]
fn a_save_point_starts_a_background_save_on_both_servers() {
    let redis = RedisProcess::spawn(&[]);
    save_point_fires(redis.addr(), &redis_dir(&redis));
    let dir = tempfile::Builder::new()
        .prefix("latchkey-save-points-")
        .tempdir()
        .unwrap();
    let latchkey = Server::builder()
        .config("dir", dir.path().to_str().unwrap())
        .start_blocking()
        .unwrap();
    save_point_fires(latchkey.addr(), dir.path());
    // The file is one redis-server loads: the keys are there.
    let check = RedisProcess::spawn(&["--dir", dir.path().to_str().unwrap()]);
    let mut c = RawConn::connect(check.addr()).unwrap();
    assert_eq!(c.cmd(&["DBSIZE"]), b":2\r\n");
}

/// Where the `RedisProcess` keeps its files (`CONFIG GET dir`).
fn redis_dir(redis: &RedisProcess) -> std::path::PathBuf {
    let mut c = RawConn::connect(redis.addr()).unwrap();
    let reply = String::from_utf8_lossy(&c.cmd(&["CONFIG", "GET", "dir"])).into_owned();
    let dir = reply.split("\r\n").nth(4).expect("a dir").to_string();
    std::path::PathBuf::from(dir)
}

/// The idle seconds `OBJECT IDLETIME` gives for `key`, on redis-server and on latchkey.
fn idle(d: &mut Diff, key: &str) -> (u64, u64) {
    let read = |r: Vec<u8>| -> u64 {
        let s = String::from_utf8(r).unwrap();
        s.trim_start_matches(':').trim_end().parse().unwrap()
    };
    let (r, l) = d.both(&["OBJECT", "IDLETIME", key]);
    (read(r), read(l))
}

/// A key a command makes (`COPY`, `SORT ... STORE`, `SINTERSTORE`, `ZUNIONSTORE`) is a new
/// object to Redis, so its idle time starts at 0 whatever its sources' idle times are; `MOVE`
/// moves the key itself, which its lookup has just used. (A made key once started with a
/// stamp of 0, so `OBJECT IDLETIME` and the eviction policies saw it idle for days.)
#[test]
fn made_and_moved_keys_start_idle_at_zero() {
    let mut d = diff();
    d.check(&["RPUSH", "list", "3", "1", "2"]);
    d.check(&["SADD", "set", "a", "b"]);
    d.check(&["ZADD", "zset", "1", "a"]);
    d.check(&["SET", "moved", "v"]);
    // Redis's idle clock ticks in whole seconds: wait until the sources are 2 s old.
    std::thread::sleep(Duration::from_millis(2_300));
    let (r, l) = idle(&mut d, "moved");
    assert!(r >= 2 && l >= 2, "sources idle: redis {r}, latchkey {l}");
    d.check(&["COPY", "list", "copied"]);
    d.check(&["SORT", "list", "STORE", "sorted"]);
    d.check(&["SINTERSTORE", "inter", "set"]);
    d.check(&["ZUNIONSTORE", "union", "1", "zset"]);
    for key in ["copied", "sorted", "inter", "union"] {
        let (r, l) = idle(&mut d, key);
        assert!(r <= 1 && l <= 1, "{key} idle: redis {r}, latchkey {l}");
    }
    d.check(&["MOVE", "moved", "1"]);
    d.check(&["SELECT", "1"]);
    let (r, l) = idle(&mut d, "moved");
    assert!(r <= 1 && l <= 1, "moved key idle: redis {r}, latchkey {l}");
}
