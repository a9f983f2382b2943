//! The snapshot file (`SAVE`, `BGSAVE`, `LASTSAVE`, `dir`/`dbfilename`): what latchkey writes,
//! redis-server 7.0 loads, and what redis-server writes, latchkey loads at start; the
//! commands' errors compared with redis-server's byte for byte.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use latchkey_server::Server;
use latchkey_tests::persisted::temp_dir;
use latchkey_tests::{Diff, RawConn, RedisProcess};

fn cmd(c: &mut RawConn, args: &[&str]) -> String {
    String::from_utf8_lossy(&c.cmd(args)).into_owned()
}

/// A value of every type, a TTL and a function library, written through `addr`.
fn fill(addr: SocketAddr) {
    let mut c = RawConn::connect(addr).unwrap();
    for args in [
        &["SET", "s", "string value"][..],
        &["SET", "ttl", "v", "PX", "600000"],
        &["HSET", "h", "f1", "v1", "f2", "v2"],
        &["RPUSH", "l", "a", "b", "c"],
        &["SADD", "set", "x", "y", "z"],
        &["ZADD", "z", "1.5", "m1", "2", "m2"],
        &["XADD", "st", "1-1", "f", "v"],
        &["SELECT", "3"],
        &["SET", "in3", "three"],
        &["SELECT", "0"],
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=snap\nredis.register_function('snapf', function() return 'from the file' end)",
        ],
    ] {
        let r = c.cmd(args);
        assert!(!r.starts_with(b"-"), "{args:?}: {}", String::from_utf8_lossy(&r));
    }
}

/// What a reader sees of the keys [`fill`] wrote (the TTL as "has one").
fn contents(addr: SocketAddr) -> Vec<String> {
    let mut c = RawConn::connect(addr).unwrap();
    let mut out = vec![
        cmd(&mut c, &["DBSIZE"]),
        cmd(&mut c, &["GET", "s"]),
        cmd(&mut c, &["GET", "ttl"]),
        cmd(&mut c, &["HGET", "h", "f2"]),
        cmd(&mut c, &["LRANGE", "l", "0", "-1"]),
        cmd(&mut c, &["SISMEMBER", "set", "y"]),
        cmd(&mut c, &["SCARD", "set"]),
        cmd(&mut c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        cmd(&mut c, &["XRANGE", "st", "-", "+"]),
        cmd(&mut c, &["FCALL", "snapf", "0"]),
    ];
    let pttl = cmd(&mut c, &["PTTL", "ttl"]);
    let ms: i64 = pttl.trim_start_matches(':').trim().parse().unwrap();
    out.push(format!("ttl kept: {}", ms > 500_000 && ms <= 600_000));
    cmd(&mut c, &["SELECT", "3"]);
    out.push(cmd(&mut c, &["GET", "in3"]));
    out
}

fn info_field(c: &mut RawConn, field: &str) -> String {
    let info = cmd(c, &["INFO", "persistence"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .to_string()
}

/// A latchkey server in `dir` that loads the snapshot file at start, as the binary does.
fn latchkey_in(dir: &Path) -> latchkey_server::BlockingServer {
    latchkey_named(dir, "dump.rdb")
}

fn latchkey_named(dir: &Path, file: &str) -> latchkey_server::BlockingServer {
    Server::builder()
        .config("dir", dir.to_str().unwrap())
        .config("dbfilename", file)
        .load_snapshot(true)
        .start_blocking()
        .unwrap()
}

#[test]
fn a_snapshot_moves_between_latchkey_and_redis_both_ways() {
    // latchkey writes with SAVE; redis-server loads the file.
    let a = temp_dir("save");
    let lk = latchkey_in(a.path());
    fill(lk.addr());
    let expected = contents(lk.addr());
    let mut c = RawConn::connect(lk.addr()).unwrap();
    assert_ne!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    let before = cmd(&mut c, &["LASTSAVE"]);
    assert_eq!(cmd(&mut c, &["SAVE"]), "+OK\r\n");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert!(cmd(&mut c, &["LASTSAVE"]) >= before);
    assert!(a.path().join("dump.rdb").exists());
    // redis-server loads it, then writes with BGSAVE under another name (dbfilename is a
    // protected parameter: set at start); latchkey loads that at start.
    std::fs::copy(
        a.path().join("dump.rdb"),
        a.path().join("from-latchkey.rdb"),
    )
    .unwrap();
    let redis = RedisProcess::spawn(&[
        "--dir",
        a.path().to_str().unwrap(),
        "--dbfilename",
        "from-latchkey.rdb",
    ]);
    assert_eq!(contents(redis.addr()), expected);
    let mut r = RawConn::connect(redis.addr()).unwrap();
    assert_eq!(cmd(&mut r, &["SET", "s", "string value"]), "+OK\r\n");
    std::fs::remove_file(a.path().join("from-latchkey.rdb")).unwrap();
    assert_eq!(cmd(&mut r, &["BGSAVE"]), "+Background saving started\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut r, "rdb_bgsave_in_progress") != "0" {
        assert!(
            Instant::now() < deadline,
            "redis-server's BGSAVE did not end"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let b = temp_dir("load");
    std::fs::copy(
        a.path().join("from-latchkey.rdb"),
        b.path().join("dump.rdb"),
    )
    .unwrap();
    let again = latchkey_in(b.path());
    assert_eq!(contents(again.addr()), expected);
}

#[test]
fn bgsave_writes_in_the_background_and_lastsave_moves() {
    let a = temp_dir("bgsave");
    let lk = latchkey_named(a.path(), "bg.rdb");
    fill(lk.addr());
    let mut c = RawConn::connect(lk.addr()).unwrap();
    assert_eq!(cmd(&mut c, &["BGSAVE"]), "+Background saving started\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut c, "rdb_bgsave_in_progress") != "0" {
        assert!(Instant::now() < deadline, "BGSAVE did not end");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(info_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert_eq!(
        cmd(&mut c, &["LASTSAVE"]),
        format!(":{}\r\n", info_field(&mut c, "rdb_last_save_time"))
    );
    // Inside a transaction the save is scheduled, and holds the whole transaction.
    assert_eq!(cmd(&mut c, &["MULTI"]), "+OK\r\n");
    cmd(&mut c, &["SET", "before", "1"]);
    cmd(&mut c, &["BGSAVE"]);
    cmd(&mut c, &["SET", "after", "1"]);
    let exec = cmd(&mut c, &["EXEC"]);
    assert!(exec.contains("+Background saving scheduled"), "{exec}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut c, "rdb_changes_since_last_save") != "0"
        || info_field(&mut c, "rdb_bgsave_in_progress") != "0"
    {
        assert!(
            Instant::now() < deadline,
            "the scheduled BGSAVE did not end"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let b = temp_dir("bgload");
    std::fs::copy(a.path().join("bg.rdb"), b.path().join("dump.rdb")).unwrap();
    let again = latchkey_in(b.path());
    let mut d = RawConn::connect(again.addr()).unwrap();
    assert_eq!(
        cmd(&mut d, &["MGET", "before", "after"]),
        "*2\r\n$1\r\n1\r\n$1\r\n1\r\n"
    );
    assert_eq!(contents(again.addr())[1..], contents(lk.addr())[1..]);
}

/// An embedded server starts empty whatever its folder holds, unless asked to load.
#[test]
fn an_embedded_server_loads_no_snapshot_unless_asked() {
    let a = temp_dir("embedded");
    let lk = latchkey_in(a.path());
    fill(lk.addr());
    let mut c = RawConn::connect(lk.addr()).unwrap();
    assert_eq!(cmd(&mut c, &["SAVE"]), "+OK\r\n");
    let plain = Server::builder()
        .config("dir", a.path().to_str().unwrap())
        .start_blocking()
        .unwrap();
    let mut p = RawConn::connect(plain.addr()).unwrap();
    assert_eq!(cmd(&mut p, &["DBSIZE"]), ":0\r\n");
    let loading = latchkey_in(a.path());
    let mut l = RawConn::connect(loading.addr()).unwrap();
    assert_eq!(cmd(&mut l, &["DBSIZE"]), ":7\r\n");
}

/// `SHUTDOWN SAVE` writes the file before the server goes.
#[test]
fn shutdown_save_writes_the_snapshot() {
    let a = temp_dir("shutdown");
    let lk = latchkey_in(a.path());
    fill(lk.addr());
    let expected = contents(lk.addr());
    let mut c = RawConn::connect(lk.addr()).unwrap();
    assert!(
        c.try_cmd(&["SHUTDOWN", "SAVE"]).is_err(),
        "no reply: the server went"
    );
    let again = latchkey_in(a.path());
    assert_eq!(contents(again.addr()), expected);
}

/// A `SHUTDOWN` while a `BGSAVE` still writes gives that save up, as Redis kills its child:
/// the snapshot the shutdown writes is the one left, never replaced by the older one the
/// background save was writing.
#[test]
fn shutdown_during_a_bgsave_keeps_the_shutdown_snapshot() {
    let a = temp_dir("shutdown-bgsave");
    let lk = latchkey_in(a.path());
    fill(lk.addr());
    let mut c = RawConn::connect(lk.addr()).unwrap();
    // 100 ms after each key: the save is still writing when the shutdown comes.
    assert_eq!(
        cmd(&mut c, &["CONFIG", "SET", "rdb-key-save-delay", "100000"]),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut c, &["BGSAVE"]), "+Background saving started\r\n");
    assert_eq!(cmd(&mut c, &["SET", "newer", "1"]), "+OK\r\n");
    assert_eq!(info_field(&mut c, "rdb_bgsave_in_progress"), "1");
    let expected = contents(lk.addr());
    assert!(
        c.try_cmd(&["SHUTDOWN", "SAVE"]).is_err(),
        "no reply: the server went"
    );
    // The given-up save stops at its next key and deletes its temporary file.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_dir(a.path()).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("temp-")
    }) {
        assert!(
            Instant::now() < deadline,
            "the background save never stopped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let again = latchkey_in(a.path());
    let mut d = RawConn::connect(again.addr()).unwrap();
    assert_eq!(cmd(&mut d, &["GET", "newer"]), "$1\r\n1\r\n");
    assert_eq!(contents(again.addr())[1..], expected[1..]);
}

/// A file that is not a snapshot stops the start with an error instead of serving an empty or
/// half-loaded keyspace.
#[test]
fn a_damaged_snapshot_file_stops_the_start() {
    let a = temp_dir("damaged");
    std::fs::write(a.path().join("dump.rdb"), b"REDIS0010 not a snapshot").unwrap();
    let started = Server::builder()
        .config("dir", a.path().to_str().unwrap())
        .load_snapshot(true)
        .start_blocking();
    assert!(started.is_err());
}

#[test]
fn save_commands_refuse_as_redis_does() {
    let mut d = Diff::new();
    d.table(&[
        "BGSAVE a",
        "BGSAVE SCHEDULE x",
        "SAVE x",
        "LASTSAVE x",
        "CONFIG SET dbfilename a/b.rdb",
        "CONFIG SET dbfilename ../b.rdb",
        "CONFIG GET dbfilename",
        "MULTI",
        "SET foo bar",
        "SAVE",
        "EXEC",
        "GET foo",
        "EVAL \"return redis.pcall('save')\" 0",
        "EVAL \"return redis.pcall('bgsave')\" 0",
    ]);
}
