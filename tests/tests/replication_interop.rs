//! Replication between latchkey and a real `redis-server`, in both directions: the RDB
//! snapshot after `+FULLRESYNC`, the command stream after it, `REPLCONF ACK` and `WAIT`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use latchkey_server::{BlockingServer, Server};
use latchkey_tests::persisted::temp_dir;
use latchkey_tests::{raw::show, RawConn, RedisProcess};

/// Polls `f` until it holds; panics with `what` after 20 s (a bound for a loaded machine, not
/// a speed check).
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn conn(addr: SocketAddr) -> RawConn {
    RawConn::connect(addr).expect("connect")
}

fn cmd(c: &mut RawConn, args: &[&str]) -> String {
    String::from_utf8_lossy(&c.cmd(args)).into_owned()
}

/// One field of `INFO section`.
fn info(c: &mut RawConn, section: &str, field: &str) -> Option<String> {
    let text = cmd(c, &["INFO", section]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

fn int(reply: &str) -> i64 {
    reply
        .trim()
        .strip_prefix(':')
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("not an integer reply: {reply:?}"))
}

const LIBRARY: &str =
    "#!lua name=interop\nredis.register_function{function_name='interop_get', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}";

const RELEASE: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// Fills a server with one key of each type, TTLs, a second database and a function library.
fn fill(c: &mut RawConn) {
    // Long enough that both servers LZF-compress it in their snapshots.
    let long = "x".repeat(5000);
    for args in [
        vec!["SET", "s", "plain"],
        vec!["SET", "n", "-12345"],
        vec!["SET", "big", "70000"],
        vec!["SET", "long", long.as_str()],
        vec!["SET", "ttl", "v", "PX", "60000"],
        vec!["HSET", "h", "f1", "v1", "f2", "7"],
        vec!["EXPIRE", "h", "600"],
        vec!["RPUSH", "l", "a", "b", "3", "-4"],
        vec!["ZADD", "z", "1.5", "a", "-2", "b", "inf", "c"],
        // An intset of each integer width, and a hash-table set.
        vec!["SADD", "si", "5", "-3", "70000", "1099511627776"],
        vec!["SADD", "sh", "a", "b", "c", "1"],
        vec!["SELECT", "2"],
        vec!["SET", "in2", "two"],
        vec!["SELECT", "0"],
        vec!["FUNCTION", "LOAD", LIBRARY],
    ] {
        let r = cmd(c, &args);
        assert!(!r.starts_with('-'), "{args:?} failed: {r}");
    }
    // Large enough that Redis stores them in its big encodings (hashtable, skiplist,
    // several quicklist nodes).
    let mut hset = vec!["HSET".to_string(), "bigh".into()];
    let mut zadd = vec!["ZADD".to_string(), "bigz".into()];
    let mut rpush = vec!["RPUSH".to_string(), "bigl".into()];
    // Integers past set-max-intset-entries (512): a hash-table set of integers.
    let mut sadd = vec!["SADD".to_string(), "bigs".into()];
    sadd.extend((0..600).map(|i| (i * 3).to_string()));
    for i in 0..300 {
        hset.extend([format!("field{i}"), format!("{}", i * 7)]);
        zadd.extend([format!("{}", i as f64 / 4.0), format!("m{i}")]);
        rpush.push(if i % 2 == 0 {
            format!("{i}")
        } else {
            format!("element-{i}-{}", "y".repeat(i % 40))
        });
    }
    for args in [hset, zadd, rpush, sadd] {
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        assert!(!cmd(c, &args).starts_with('-'));
    }
    // A stream over several listpack nodes, entries with the same fields and with others
    // (Redis writes the first kind compactly), some deleted, its IDs moved on by XSETID; and
    // a stream whose only entry was deleted (still a key).
    for i in 1..=250u64 {
        let id = format!("{}-{}", i * 10, i % 3);
        let value = i.to_string();
        let args: Vec<&str> = if i % 7 == 0 {
            vec!["XADD", "st", &id, "other", &value, "x", ""]
        } else {
            vec!["XADD", "st", &id, "f", &value]
        };
        assert!(!cmd(c, &args).starts_with('-'));
    }
    for args in [
        vec!["XDEL", "st", "50-2", "60-0", "1000-1", "2500-1"],
        vec![
            "XSETID",
            "st",
            "99999-7",
            "ENTRIESADDED",
            "400",
            "MAXDELETEDID",
            "3000-0",
        ],
        vec!["XADD", "st0", "5-5", "a", "b"],
        vec!["XDEL", "st0", "5-5"],
    ] {
        let r = cmd(c, &args);
        assert!(!r.starts_with('-'), "{args:?} failed: {r}");
    }
}

/// Asserts that `replica` holds what [`fill`] wrote on `master`.
fn assert_same_data(master: &mut RawConn, replica: &mut RawConn) {
    for args in [
        vec!["GET", "s"],
        vec!["GET", "n"],
        vec!["GET", "big"],
        vec!["GET", "long"],
        vec!["HGETALL", "h"],
        vec!["LRANGE", "l", "0", "-1"],
        vec!["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        vec!["HLEN", "bigh"],
        vec!["HGET", "bigh", "field123"],
        vec!["ZRANGE", "bigz", "0", "-1", "WITHSCORES"],
        vec!["LRANGE", "bigl", "0", "-1"],
        vec!["SMEMBERS", "si"],
        vec!["OBJECT", "ENCODING", "si"],
        vec!["SCARD", "sh"],
        vec!["SMISMEMBER", "sh", "a", "b", "c", "1", "d"],
        vec!["OBJECT", "ENCODING", "sh"],
        vec!["SCARD", "bigs"],
        vec!["SMISMEMBER", "bigs", "0", "1797", "1798"],
        vec!["OBJECT", "ENCODING", "bigs"],
        vec!["DBSIZE"],
        vec!["FCALL_RO", "interop_get", "1", "s"],
        vec!["XRANGE", "st", "-", "+"],
        vec!["XLEN", "st"],
        vec!["TYPE", "st0"],
        vec!["XLEN", "st0"],
    ] {
        assert_eq!(
            show(&master.cmd(&args)),
            show(&replica.cmd(&args)),
            "{args:?} differs"
        );
    }
    let libs = cmd(replica, &["FUNCTION", "LIST"]);
    assert!(libs.contains("interop_get"), "{libs}");
    assert_eq!(
        libs,
        cmd(master, &["FUNCTION", "LIST"]),
        "FUNCTION LIST differs"
    );
    let pttl = int(&cmd(replica, &["PTTL", "ttl"]));
    assert!(
        (30_000..=60_000).contains(&pttl),
        "replica PTTL {pttl} is not close to the master's 60000"
    );
    let ttl = int(&cmd(replica, &["TTL", "h"]));
    assert!((300..=600).contains(&ttl), "replica TTL {ttl}");
    cmd(master, &["SELECT", "2"]);
    cmd(replica, &["SELECT", "2"]);
    assert_eq!(cmd(replica, &["GET", "in2"]), "$3\r\ntwo\r\n");
    cmd(master, &["SELECT", "0"]);
    cmd(replica, &["SELECT", "0"]);
}

/// The live part of a lock's life, written on `master` and checked on `replica`.
fn assert_stream_reaches(master: &mut RawConn, replica: &mut RawConn) {
    assert_eq!(
        cmd(master, &["SET", "lock", "tok", "NX", "PX", "30000"]),
        "+OK\r\n"
    );
    until("the lock on the replica", || {
        cmd(replica, &["GET", "lock"]) == "$3\r\ntok\r\n"
    });
    let pttl = int(&cmd(replica, &["PTTL", "lock"]));
    assert!((10_000..=30_000).contains(&pttl), "lock PTTL {pttl}");
    // Released by the token-checked script: the replica sees the DEL.
    assert_eq!(
        cmd(master, &["EVAL", RELEASE, "1", "lock", "tok"]),
        ":1\r\n"
    );
    until("the release on the replica", || {
        cmd(replica, &["EXISTS", "lock"]) == ":0\r\n"
    });
    cmd(master, &["SET", "gone", "1"]);
    cmd(master, &["DEL", "gone"]);
    cmd(master, &["HSET", "h2", "a", "b"]);
    until("HSET on the replica", || {
        cmd(replica, &["HGET", "h2", "a"]) == "$1\r\nb\r\n"
    });
    assert_eq!(cmd(replica, &["EXISTS", "gone"]), ":0\r\n");
    // SPOP picks at random: the replica gets what was taken (SREM), or DEL for all of it.
    cmd(
        master,
        &["SADD", "pop", "1", "2", "3", "4", "5", "6", "7", "8"],
    );
    cmd(master, &["SPOP", "pop"]);
    cmd(master, &["SPOP", "pop", "3"]);
    until("the SPOPs on the replica", || {
        let left = cmd(master, &["SMEMBERS", "pop"]);
        left.starts_with("*4\r\n") && cmd(replica, &["SMEMBERS", "pop"]) == left
    });
    cmd(master, &["SPOP", "pop", "10"]);
    until("the last SPOP on the replica", || {
        cmd(replica, &["EXISTS", "pop"]) == ":0\r\n"
    });
    // A key that expires on the master disappears from the replica's DBSIZE (which counts
    // logically expired keys): the master's active expiry cycle sent a DEL. (Nothing reads the
    // key on the master; the lazy, on-read deletion has tests of its own below.)
    cmd(master, &["SET", "short", "v", "PX", "30"]);
    until("the expiry DEL on the replica", || {
        let (m, r) = (cmd(master, &["DBSIZE"]), cmd(replica, &["DBSIZE"]));
        m == r && cmd(replica, &["EXISTS", "short"]) == ":0\r\n"
    });
    // XADD * takes the master's clock, and ~ trims whole nodes: the replica gets the ID
    // and the exact trim, so it holds the very same entries.
    for _ in 0..150 {
        cmd(master, &["XADD", "ev", "MAXLEN", "~", "120", "*", "k", "v"]);
    }
    cmd(master, &["XTRIM", "ev", "MINID", "~", "0-1"]);
    until("the stream on the replica", || {
        let left = cmd(master, &["XRANGE", "ev", "-", "+"]);
        left.starts_with("*1") && cmd(replica, &["XRANGE", "ev", "-", "+"]) == left
    });
    // WAIT counts the replica, which acknowledges with REPLCONF ACK.
    cmd(master, &["SET", "acked", "1"]);
    assert_eq!(cmd(master, &["WAIT", "1", "5000"]), ":1\r\n");
}

/// A library whose function reads `version`'s value from the code, so a replica running it
/// shows which code it holds.
fn versioned_library(version: &str) -> String {
    format!(
        "#!lua name=versioned\nredis.register_function{{function_name='version', callback=function() return '{version}' end, flags={{'no-writes'}}}}"
    )
}

/// `FUNCTION LOAD`, `LOAD REPLACE`, `DELETE` and `FLUSH` made on `master` after the full
/// sync reach `replica` through the stream, which then holds the same libraries; a client of
/// the replica may not change them (`READONLY`, as a write).
fn assert_function_changes_reach(master: &mut RawConn, replica: &mut RawConn) {
    let libraries_alike = |m: &mut RawConn, r: &mut RawConn| {
        cmd(r, &["FUNCTION", "LIST", "WITHCODE"]) == cmd(m, &["FUNCTION", "LIST", "WITHCODE"])
    };
    assert_eq!(
        cmd(master, &["FUNCTION", "LOAD", &versioned_library("one")]),
        "$9\r\nversioned\r\n"
    );
    until("the loaded library on the replica", || {
        cmd(replica, &["FCALL_RO", "version", "0"]) == "$3\r\none\r\n"
    });
    assert_eq!(
        cmd(
            master,
            &["FUNCTION", "LOAD", "REPLACE", &versioned_library("two")]
        ),
        "$9\r\nversioned\r\n"
    );
    until("the replaced library on the replica", || {
        cmd(replica, &["FCALL_RO", "version", "0"]) == "$3\r\ntwo\r\n"
    });
    assert_eq!(cmd(master, &["FUNCTION", "DELETE", "interop"]), "+OK\r\n");
    until("the deletion on the replica", || {
        libraries_alike(master, replica)
    });
    let libs = cmd(replica, &["FUNCTION", "LIST"]);
    assert!(
        !libs.contains("interop_get") && libs.contains("version"),
        "{libs}"
    );
    // The replica's own clients may not change its libraries.
    assert_eq!(
        cmd(replica, &["FUNCTION", "LOAD", &versioned_library("mine")]),
        "-READONLY You can't write against a read only replica.\r\n"
    );
    assert_eq!(
        cmd(replica, &["FUNCTION", "FLUSH"]),
        "-READONLY You can't write against a read only replica.\r\n"
    );
    assert_eq!(cmd(master, &["FUNCTION", "FLUSH", "ASYNC"]), "+OK\r\n");
    until("the flush on the replica", || {
        cmd(replica, &["FUNCTION", "LIST"]) == "*0\r\n"
    });
    // Put back what `assert_same_data` reads.
    assert_eq!(
        cmd(master, &["FUNCTION", "LOAD", LIBRARY]),
        "$7\r\ninterop\r\n"
    );
    until("the library loaded again on the replica", || {
        libraries_alike(master, replica)
    });
}

fn latchkey() -> BlockingServer {
    Server::builder().start_blocking().expect("start latchkey")
}

#[test]
fn redis_replicates_from_a_latchkey_master() {
    let master = latchkey();
    let mut m = conn(master.addr());
    fill(&mut m);
    let port = master.addr().port().to_string();
    let redis = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port]);
    let mut r = conn(redis.addr());
    until("redis-server's link to latchkey", || {
        info(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    assert_same_data(&mut m, &mut r);
    assert_stream_reaches(&mut m, &mut r);
    assert_function_changes_reach(&mut m, &mut r);
    // INFO replication, both sides.
    assert_eq!(
        info(&mut m, "replication", "role").as_deref(),
        Some("master")
    );
    assert_eq!(
        info(&mut m, "replication", "connected_slaves").as_deref(),
        Some("1")
    );
    let slave0 = info(&mut m, "replication", "slave0").expect("slave0 line");
    assert!(slave0.contains("state=online"), "{slave0}");
    assert_eq!(
        info(&mut r, "replication", "role").as_deref(),
        Some("slave")
    );
    assert_eq!(
        info(&mut r, "replication", "master_replid"),
        info(&mut m, "replication", "master_replid")
    );
    until("equal offsets on both sides", || {
        info(&mut r, "replication", "master_repl_offset")
            == info(&mut m, "replication", "master_repl_offset")
    });
}

fn redis_master_to_latchkey(extra: &[&str]) {
    let redis = RedisProcess::spawn(extra);
    let mut m = conn(redis.addr());
    fill(&mut m);
    let replica = latchkey();
    let mut r = conn(replica.addr());
    let port = redis.addr().port().to_string();
    assert_eq!(cmd(&mut r, &["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    until("latchkey's link to redis-server", || {
        info(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    assert_same_data(&mut m, &mut r);
    assert_stream_reaches(&mut m, &mut r);
    assert_function_changes_reach(&mut m, &mut r);
    assert_eq!(
        info(&mut m, "replication", "connected_slaves").as_deref(),
        Some("1")
    );
    until("equal offsets on both sides", || {
        info(&mut r, "replication", "slave_repl_offset")
            == info(&mut m, "replication", "master_repl_offset")
    });
}

#[test]
fn latchkey_replicates_from_redis_with_a_disk_snapshot() {
    redis_master_to_latchkey(&["--repl-diskless-sync", "no"]);
}

#[test]
fn latchkey_replicates_from_redis_with_a_diskless_snapshot() {
    redis_master_to_latchkey(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
}

/// `INFO stats` counter of resynchronisations.
fn syncs(c: &mut RawConn, kind: &str) -> i64 {
    info(c, "stats", kind)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {kind} in INFO stats"))
}

fn follow(replica: &mut RawConn, master: SocketAddr) {
    let port = master.port().to_string();
    assert_eq!(cmd(replica, &["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    until("the replication link", || {
        info(replica, "replication", "master_link_status").as_deref() == Some("up")
    });
}

/// Cuts the link of every replica of a latchkey `master` while writes are held on it, so the
/// writes can only reach the replicas through the backlog, then lets them reconnect.
fn cut_with_writes_held(master: &BlockingServer, m: &mut RawConn, keys: &[&str]) {
    assert_eq!(cmd(m, &["LATCHKEY.FAILOVER", "PAUSE"]), "+OK\r\n");
    for k in keys {
        assert_eq!(cmd(m, &["SET", k, "while-cut", "PX", "60000"]), "+OK\r\n");
    }
    latchkey_server::internals::node(master.handle()).disconnect_replicas();
}

/// A latchkey replica of latchkey: the snapshot, then the stream, function libraries
/// included.
#[test]
fn latchkey_replicates_from_a_latchkey_master() {
    let master = latchkey();
    let mut m = conn(master.addr());
    fill(&mut m);
    let replica = latchkey();
    let mut r = conn(replica.addr());
    follow(&mut r, master.addr());
    assert_same_data(&mut m, &mut r);
    assert_stream_reaches(&mut m, &mut r);
    assert_function_changes_reach(&mut m, &mut r);
    assert_same_data(&mut m, &mut r);
}

#[test]
fn disconnect_over_the_wire_then_continue() {
    let master = latchkey();
    let mut m = conn(master.addr());
    let replica = latchkey();
    let mut r = conn(replica.addr());
    follow(&mut r, master.addr());
    assert_eq!(cmd(&mut m, &["LATCHKEY.FAILOVER", "PAUSE"]), "+OK\r\n");
    cmd(&mut m, &["RPUSH", "q", "job"]);
    assert_eq!(cmd(&mut m, &["LATCHKEY.FAILOVER", "DISCONNECT"]), "+OK\r\n");
    until("the job on the replica", || {
        cmd(&mut r, &["LRANGE", "q", "0", "-1"]) == "*1\r\n$3\r\njob\r\n"
    });
    assert_eq!(syncs(&mut m, "sync_partial_ok"), 1);
}

#[test]
fn a_latchkey_replica_continues_from_the_backlog() {
    let master = latchkey();
    let mut m = conn(master.addr());
    cmd(&mut m, &["SET", "before", "1"]);
    let replica = latchkey();
    let mut r = conn(replica.addr());
    follow(&mut r, master.addr());
    assert_eq!(
        info(&mut m, "replication", "repl_backlog_active").as_deref(),
        Some("1")
    );
    assert_eq!(
        info(&mut m, "replication", "repl_backlog_first_byte_offset").as_deref(),
        Some("1")
    );
    // The stream is in database 3 when the link is cut, and goes on there without a new
    // SELECT: the continued stream must still apply to database 3.
    cmd(&mut m, &["SELECT", "3"]);
    cmd(&mut m, &["SET", "in3", "x"]);
    cmd(&mut r, &["SELECT", "3"]);
    until("the write in database 3", || {
        cmd(&mut r, &["GET", "in3"]) == "$1\r\nx\r\n"
    });
    cut_with_writes_held(&master, &mut m, &["k1", "k2"]);
    until("the replica to come back with +CONTINUE", || {
        syncs(&mut m, "sync_partial_ok") == 1
            && info(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    until("the held writes on the replica, in database 3", || {
        cmd(&mut r, &["GET", "k2"]) == "$9\r\nwhile-cut\r\n"
    });
    cmd(&mut r, &["SELECT", "0"]);
    assert_eq!(cmd(&mut r, &["GET", "before"]), "$1\r\n1\r\n");
    assert_eq!(cmd(&mut r, &["GET", "k2"]), "$-1\r\n");
    assert_eq!(
        syncs(&mut m, "sync_full"),
        1,
        "only the first sync was full"
    );
    let histlen: u64 = info(&mut m, "replication", "repl_backlog_histlen")
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(histlen > 0);
    // The replica's own backlog and offset follow the master's.
    until("equal offsets", || {
        info(&mut r, "replication", "master_repl_offset")
            == info(&mut m, "replication", "master_repl_offset")
    });
    assert_eq!(
        info(&mut r, "replication", "repl_backlog_active").as_deref(),
        Some("1")
    );
}

#[test]
fn a_backlog_too_small_means_a_full_resync() {
    let master = Server::builder()
        .config("repl-backlog-size", "16")
        .start_blocking()
        .unwrap();
    let mut m = conn(master.addr());
    let replica = latchkey();
    let mut r = conn(replica.addr());
    follow(&mut r, master.addr());
    assert_eq!(
        info(&mut m, "replication", "repl_backlog_size").as_deref(),
        Some("16")
    );
    // (A replica made by REPLICAOF asks to continue its own history first, as Redis's does,
    // so even its first sync may count as a failed partial one.)
    let errors_before = syncs(&mut m, "sync_partial_err");
    cut_with_writes_held(&master, &mut m, &["a-key-longer-than-the-backlog"]);
    until("a second full sync", || syncs(&mut m, "sync_full") == 2);
    assert_eq!(syncs(&mut m, "sync_partial_ok"), 0);
    assert_eq!(syncs(&mut m, "sync_partial_err"), errors_before + 1);
    until("the write on the replica", || {
        cmd(&mut r, &["EXISTS", "a-key-longer-than-the-backlog"]) == ":1\r\n"
    });
}

#[test]
fn redis_continues_from_a_latchkey_backlog() {
    let master = latchkey();
    let mut m = conn(master.addr());
    let port = master.addr().port().to_string();
    let redis = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port]);
    let mut r = conn(redis.addr());
    until("redis-server's link", || {
        info(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    cut_with_writes_held(&master, &mut m, &["k1", "k2"]);
    until("redis-server to continue", || {
        syncs(&mut m, "sync_partial_ok") == 1
    });
    until("the held writes on redis-server", || {
        cmd(&mut r, &["GET", "k2"]) == "$9\r\nwhile-cut\r\n"
    });
    assert_eq!(syncs(&mut m, "sync_full"), 1);
    cmd(&mut m, &["SET", "after", "1"]);
    assert_eq!(cmd(&mut m, &["WAIT", "1", "5000"]), ":1\r\n");
}

#[test]
fn latchkey_continues_from_a_redis_backlog() {
    let redis = RedisProcess::spawn(&["--repl-diskless-sync", "no"]);
    let mut m = conn(redis.addr());
    cmd(&mut m, &["SET", "before", "1"]);
    let replica = latchkey();
    let mut r = conn(replica.addr());
    follow(&mut r, redis.addr());
    cmd(&mut m, &["SELECT", "5"]);
    cmd(&mut m, &["SET", "in5", "x"]);
    cmd(&mut r, &["SELECT", "5"]);
    until("the write in database 5", || {
        cmd(&mut r, &["GET", "in5"]) == "$1\r\nx\r\n"
    });
    assert_eq!(
        cmd(&mut m, &["CLIENT", "KILL", "TYPE", "replica"]),
        ":1\r\n"
    );
    for k in ["k1", "k2"] {
        cmd(&mut m, &["SET", k, "while-cut"]);
    }
    until("latchkey to continue", || {
        syncs(&mut m, "sync_partial_ok") == 1
    });
    until("the writes on latchkey, in database 5", || {
        cmd(&mut r, &["GET", "k2"]) == "$9\r\nwhile-cut\r\n"
    });
    assert_eq!(syncs(&mut m, "sync_full"), 1);
    cmd(&mut m, &["SET", "after", "1"]);
    assert_eq!(cmd(&mut m, &["WAIT", "1", "5000"]), ":1\r\n");
}

/// PSYNC2: after a promotion, the old master's other replica (here a real redis-server)
/// continues from the promoted latchkey replica instead of resyncing in full.
#[test]
fn a_promoted_replica_lets_its_peers_continue() {
    let master = latchkey();
    let mut m = conn(master.addr());
    cmd(&mut m, &["SET", "k", "v"]);
    let promoted = latchkey();
    let mut p = conn(promoted.addr());
    follow(&mut p, master.addr());
    let port = master.addr().port().to_string();
    let redis = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port]);
    let mut r = conn(redis.addr());
    until("redis-server's link", || {
        info(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    cmd(&mut m, &["SET", "k2", "v2"]);
    assert_eq!(cmd(&mut m, &["WAIT", "2", "5000"]), ":2\r\n");
    let old_id = info(&mut m, "replication", "master_replid").unwrap();
    until("both replicas at the master's offset", || {
        let o = info(&mut m, "replication", "master_repl_offset");
        info(&mut p, "replication", "master_repl_offset") == o
            && info(&mut r, "replication", "master_repl_offset") == o
    });
    let offset: i64 = info(&mut p, "replication", "master_repl_offset")
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert_eq!(cmd(&mut p, &["REPLICAOF", "NO", "ONE"]), "+OK\r\n");
    assert_eq!(info(&mut p, "replication", "master_replid2"), Some(old_id));
    assert_eq!(
        info(&mut p, "replication", "second_repl_offset"),
        Some((offset + 1).to_string())
    );
    assert_ne!(
        info(&mut p, "replication", "master_replid"),
        info(&mut m, "replication", "master_replid")
    );
    let port = promoted.addr().port().to_string();
    assert_eq!(cmd(&mut r, &["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    until("redis-server to continue from the promoted replica", || {
        syncs(&mut p, "sync_partial_ok") == 1
    });
    assert_eq!(syncs(&mut p, "sync_full"), 0);
    cmd(&mut p, &["SET", "after-promotion", "1"]);
    assert_eq!(cmd(&mut p, &["WAIT", "1", "5000"]), ":1\r\n");
    assert_eq!(cmd(&mut r, &["GET", "after-promotion"]), "$1\r\n1\r\n");
    assert_eq!(cmd(&mut r, &["GET", "k2"]), "$2\r\nv2\r\n");
}

fn with_aof(dir: &std::path::Path, fsync: &str) -> BlockingServer {
    Server::builder()
        .config("dir", dir.to_str().unwrap())
        .config("appendonly", "yes")
        .config("appendfsync", fsync)
        .start_blocking()
        .unwrap()
}

/// `WAITAOF` (Redis 7.2; the redis-server 7.0 here has no such command, so latchkey only).
#[test]
fn waitaof_counts_local_and_replica_fsyncs() {
    let plain = latchkey();
    let mut p = conn(plain.addr());
    cmd(&mut p, &["SET", "k", "v"]);
    assert_eq!(
        cmd(&mut p, &["WAITAOF", "1", "0", "0"]),
        "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n"
    );
    assert_eq!(
        cmd(&mut p, &["WAITAOF", "0", "0", "0"]),
        "*2\r\n:0\r\n:0\r\n"
    );
    assert_eq!(
        cmd(&mut p, &["WAITAOF", "2", "0", "0"]),
        "-ERR value is out of range, value must between 0 and 1\r\n"
    );
    assert_eq!(
        cmd(&mut p, &["WAITAOF", "0", "-1", "0"]),
        "-ERR value is out of range, must be positive\r\n"
    );
    assert_eq!(
        cmd(&mut p, &["WAITAOF", "0", "0", "-1"]),
        "-ERR timeout is negative\r\n"
    );

    let tmp = temp_dir("interop-waitaof");
    let dir = tmp.path();
    let (mdir, rdir, edir) = (dir.join("m"), dir.join("r"), dir.join("e"));
    for d in [&mdir, &rdir, &edir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let master = with_aof(&mdir, "always");
    let mut m = conn(master.addr());
    let durable = with_aof(&rdir, "always");
    let mut d = conn(durable.addr());
    follow(&mut d, master.addr());
    let volatile = latchkey();
    let mut v = conn(volatile.addr());
    follow(&mut v, master.addr());
    assert_eq!(cmd(&mut m, &["SET", "lock", "tok"]), "+OK\r\n");
    // Both replicas acknowledge the write; only the one with an AOF has it on disk.
    assert_eq!(cmd(&mut m, &["WAIT", "2", "5000"]), ":2\r\n");
    assert_eq!(
        cmd(&mut m, &["WAITAOF", "1", "1", "5000"]),
        "*2\r\n:1\r\n:1\r\n"
    );
    assert_eq!(
        cmd(&mut m, &["WAITAOF", "1", "2", "300"]),
        "*2\r\n:1\r\n:1\r\n",
        "the replica without an AOF never counts"
    );
    assert_eq!(
        cmd(&mut d, &["WAITAOF", "0", "0", "0"]),
        "-ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.\r\n"
    );
    // appendfsync everysec: the local acknowledgement comes with the background fsync.
    let everysec = with_aof(&edir, "everysec");
    let mut e = conn(everysec.addr());
    cmd(&mut e, &["SET", "k", "v"]);
    assert_eq!(
        cmd(&mut e, &["WAITAOF", "1", "0", "10000"]),
        "*2\r\n:1\r\n:0\r\n"
    );
    drop((master, durable, volatile, everysec));
}

/// A snapshot holding a stream with a consumer group (its pending entries and consumers) loads
/// on a latchkey replica, which then follows the group's deliveries and acknowledgements in
/// the stream: `XINFO GROUPS` and `XPENDING` read on it as on a redis-server replica of the
/// same master (whose `entries-read` lags the master's, as Redis's own replicas do).
#[test]
fn a_snapshot_with_a_consumer_group_carries_the_group() {
    let redis = RedisProcess::spawn(&["--repl-diskless-sync", "no"]);
    let mut m = conn(redis.addr());
    cmd(&mut m, &["SET", "s", "v"]);
    cmd(&mut m, &["XADD", "members", "1-1", "a", "b"]);
    cmd(&mut m, &["XADD", "members", "2-1", "c", "d"]);
    cmd(&mut m, &["XGROUP", "CREATE", "members", "g", "0"]);
    cmd(
        &mut m,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            "members",
            ">",
        ],
    );
    let replica = latchkey();
    let mut r = conn(replica.addr());
    follow(&mut r, redis.addr());
    let port = redis.addr().port().to_string();
    let redis_replica = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port]);
    let mut rr = conn(redis_replica.addr());
    until("the redis-server replica's link", || {
        info(&mut rr, "replication", "master_link_status").as_deref() == Some("up")
    });
    let same = |a: &mut RawConn, b: &mut RawConn, args: &[&str]| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (x, y) = (cmd(a, args), cmd(b, args));
            if x == y {
                return x;
            }
            assert!(
                Instant::now() < deadline,
                "{args:?}\n  redis-server replica: {x:?}\n  latchkey replica:     {y:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    same(&mut rr, &mut r, &["XINFO", "GROUPS", "members"]);
    same(&mut rr, &mut r, &["XPENDING", "members", "g"]);
    // Then through the stream: another delivery and an acknowledgement.
    cmd(
        &mut m,
        &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", "members", ">"],
    );
    cmd(&mut m, &["XACK", "members", "g", "1-1"]);
    let pending = same(&mut rr, &mut r, &["XPENDING", "members", "g"]);
    assert!(pending.starts_with("*4\r\n:1\r\n"), "{pending}");
    assert_eq!(pending, cmd(&mut m, &["XPENDING", "members", "g"]));
    same(&mut rr, &mut r, &["XINFO", "GROUPS", "members"]);
    assert_eq!(cmd(&mut r, &["GET", "s"]), "$1\r\nv\r\n");
}

fn field_names(c: &mut RawConn, section: &str) -> Vec<String> {
    cmd(c, &["INFO", section])
        .lines()
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
        .collect()
}

/// A latchkey replica and a redis-server replica of the same master print the same
/// `INFO replication` fields, in the same order, so tools that read one read the other.
#[test]
fn info_replication_of_a_replica_has_redis_fields() {
    let master = RedisProcess::spawn(&["--repl-diskless-sync", "no"]);
    let port = master.addr().port().to_string();
    let redis = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port]);
    let mut r = conn(redis.addr());
    let replica = latchkey();
    let mut l = conn(replica.addr());
    follow(&mut l, master.addr());
    until("redis-server's link", || {
        info(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    assert_eq!(
        field_names(&mut l, "replication"),
        field_names(&mut r, "replication")
    );
}

/// `redis-cli --rdb` downloads latchkey's snapshot (with `SYNC`); `redis-check-rdb` accepts the
/// file and a redis-server started on it holds the same data.
#[test]
fn a_latchkey_snapshot_is_an_rdb_file_redis_loads_from_disk() {
    let master = latchkey();
    let mut m = conn(master.addr());
    fill(&mut m);
    let tmp = temp_dir("interop-rdbfile");
    let dir = tmp.path();
    let file = dir.join("dump.rdb");
    let port = master.addr().port().to_string();
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &port, "--rdb", file.to_str().unwrap()])
        .output()
        .expect("run redis-cli");
    assert!(out.status.success(), "redis-cli --rdb: {out:?}");
    let check = std::process::Command::new("redis-check-rdb")
        .arg(&file)
        .output()
        .expect("run redis-check-rdb");
    assert!(check.status.success(), "redis-check-rdb: {check:?}");
    let redis = RedisProcess::spawn(&["--dir", dir.to_str().unwrap(), "--dbfilename", "dump.rdb"]);
    let mut r = conn(redis.addr());
    assert_same_data(&mut m, &mut r);
    drop(redis);
}

/// Sends `count` pipelined `SET`s of values of uneven, growing sizes in one write, so that the
/// stream the replica reads has commands cut across two reads, and reads every reply.
fn pipelined_burst(m: &mut RawConn, count: usize) {
    let mut out = Vec::new();
    for i in 0..count {
        let value = "v".repeat(1000 + (i * 37) % 7000);
        out.extend(RawConn::encode(&[
            "SET",
            &format!("burst:{i}"),
            value.as_str(),
        ]));
    }
    m.send_raw(&out);
    for i in 0..count {
        assert_eq!(show(&m.read_reply()), "+OK\\r\\n", "SET burst:{i}");
    }
}

/// A burst whose commands straddle the replica's reads is counted whole: right after it, the
/// replica's offset is the master's and `WAIT` confirms a lock at once. (The replica once
/// counted only the bytes of a command's last read, so its offset fell behind the master's
/// for good while its data matched.)
fn burst_keeps_the_offset(m: &mut RawConn, r: &mut RawConn, master_role: &str) {
    let count = 600;
    pipelined_burst(m, count);
    let last = format!("burst:{}", count - 1);
    until("the burst on the replica", || {
        cmd(r, &["EXISTS", &last]) == ":1\r\n"
    });
    assert_eq!(
        cmd(m, &["SET", "lock", "tok", "NX", "PX", "30000"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(m, &["WAIT", "1", "1000"]),
        ":1\r\n",
        "{master_role}: the replica did not acknowledge the master's offset"
    );
    let master_offset = info(m, "replication", "master_repl_offset");
    until("the replica's offset", || {
        info(r, "replication", "master_repl_offset") == master_offset
    });
    assert_eq!(cmd(r, &["DBSIZE"]), cmd(m, &["DBSIZE"]));
}

#[test]
fn a_pipelined_burst_keeps_a_latchkey_replica_offset_exact() {
    let master = latchkey();
    let mut m = conn(master.addr());
    let replica = latchkey();
    let mut r = conn(replica.addr());
    follow(&mut r, master.addr());
    burst_keeps_the_offset(&mut m, &mut r, "latchkey master");

    let redis = RedisProcess::spawn(&[]);
    let mut rm = conn(redis.addr());
    let replica = latchkey();
    let mut r = conn(replica.addr());
    follow(&mut r, redis.addr());
    burst_keeps_the_offset(&mut rm, &mut r, "redis-server master");
}

/// Expires keys on `master` through reads only (its active expiry cycle is off) and checks
/// that `replica` loses them: the read's deletion reaches it as a `DEL`. The replica's
/// `DBSIZE` counts keys that are logically expired but still stored, so it shows the DEL.
fn lazy_expiry_reaches(m: &mut RawConn, r: &mut RawConn) {
    assert_eq!(cmd(m, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), "+OK\r\n");
    assert_eq!(cmd(m, &["SET", "keep", "1"]), "+OK\r\n");
    for k in ["read", "recreated", "deleted"] {
        assert_eq!(cmd(m, &["SET", k, "old", "PX", "100"]), "+OK\r\n");
    }
    until("the keys on the replica", || {
        cmd(r, &["DBSIZE"]) == ":4\r\n"
    });
    // Past their TTL: both still hold them, hidden from reads.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(cmd(m, &["DBSIZE"]), ":4\r\n", "the active cycle is off");
    assert_eq!(cmd(r, &["DBSIZE"]), ":4\r\n");
    // A read expires it; a write on an expired key sends the DEL before itself; a DEL of an
    // expired key deletes nothing the client can see, yet the key goes.
    assert_eq!(cmd(m, &["GET", "read"]), "$-1\r\n");
    assert_eq!(cmd(m, &["SET", "recreated", "new", "NX"]), "+OK\r\n");
    assert_eq!(cmd(m, &["DEL", "deleted"]), ":0\r\n");
    until("the lazy expiries on the replica", || {
        cmd(r, &["DBSIZE"]) == ":2\r\n"
    });
    assert_eq!(cmd(r, &["GET", "recreated"]), "$3\r\nnew\r\n");
    assert_eq!(cmd(r, &["GET", "keep"]), "$1\r\n1\r\n");
    assert_eq!(cmd(m, &["WAIT", "1", "5000"]), ":1\r\n");
    assert_eq!(cmd(r, &["DBSIZE"]), ":2\r\n");
    assert_eq!(cmd(m, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), "+OK\r\n");
}

#[test]
fn a_lazy_expiry_on_a_latchkey_master_reaches_a_latchkey_replica() {
    let master = latchkey();
    let mut m = conn(master.addr());
    let replica = latchkey();
    let mut r = conn(replica.addr());
    follow(&mut r, master.addr());
    lazy_expiry_reaches(&mut m, &mut r);
    let expired = info(&mut m, "stats", "expired_keys");
    assert_eq!(expired.as_deref(), Some("3"), "lazy expiries count in INFO");
}

#[test]
fn a_lazy_expiry_on_a_latchkey_master_reaches_a_redis_replica() {
    let master = latchkey();
    let mut m = conn(master.addr());
    let port = master.addr().port().to_string();
    let redis = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port]);
    let mut r = conn(redis.addr());
    until("redis-server's link to latchkey", || {
        info(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    lazy_expiry_reaches(&mut m, &mut r);
}

/// The same scenario on redis-server alone, so the expectations above are Redis's own.
#[test]
fn a_lazy_expiry_on_a_redis_master_reaches_its_replica() {
    let master = RedisProcess::spawn(&["--enable-debug-command", "yes"]);
    let mut m = conn(master.addr());
    let port = master.addr().port().to_string();
    let redis = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port]);
    let mut r = conn(redis.addr());
    until("the replica's link", || {
        info(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    lazy_expiry_reaches(&mut m, &mut r);
    let expired = info(&mut m, "stats", "expired_keys");
    assert_eq!(expired.as_deref(), Some("3"), "Redis counts lazy expiries");
}

/// A latchkey master and a replica following it, with a connection to each, once the replica
/// has acknowledged an empty `log`: the start of the racing-writes tests.
fn pair_for_racing_writes() -> (BlockingServer, RawConn, BlockingServer, RawConn) {
    let master = latchkey();
    let mut m = conn(master.addr());
    let replica = latchkey();
    let mut r = conn(replica.addr());
    follow(&mut r, master.addr());
    cmd(&mut m, &["SET", "log", ""]);
    assert_eq!(cmd(&mut m, &["WAIT", "1", "5000"]), ":1\r\n");
    (master, m, replica, r)
}

/// After [`race_order_sensitive_writes`]: once the replica acknowledged everything, it holds
/// the master's values.
fn assert_replica_has_the_raced_values(m: &mut RawConn, r: &mut RawConn) {
    // WAIT waits for this connection's own last write: make one after the writers', so that
    // its acknowledgement covers theirs too.
    cmd(m, &["SET", "fence", "1"]);
    assert_eq!(cmd(m, &["WAIT", "1", "5000"]), ":1\r\n");
    for key in ["log", "count", "last"] {
        assert_eq!(
            cmd(r, &["GET", key]),
            cmd(m, &["GET", key]),
            "{key} differs"
        );
    }
    assert_eq!(cmd(m, &["STRLEN", "log"]), ":2400\r\n");
}

/// Four clients at once each pipeline 300 rounds of `APPEND log`, `INCR count` and
/// `SET last` (plus a `GET last` when `with_reads`): writes whose result depends on their order,
/// for comparing a master with its replica afterwards (`log` ends 2,400 bytes long).
fn race_order_sensitive_writes(addr: std::net::SocketAddr, with_reads: bool) {
    let writers: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = conn(addr);
                let mut out = Vec::new();
                let mut sent = 0;
                for i in 0..300 {
                    let mark = format!("{t}{}", i % 10);
                    out.extend(RawConn::encode(&["APPEND", "log", &mark]));
                    out.extend(RawConn::encode(&["INCR", "count"]));
                    out.extend(RawConn::encode(&["SET", "last", &mark]));
                    sent += 3;
                    if with_reads {
                        out.extend(RawConn::encode(&["GET", "last"]));
                        sent += 1;
                    }
                }
                c.send_raw(&out);
                for _ in 0..sent {
                    assert!(!c.read_reply().starts_with(b"-"));
                }
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer");
    }
}

/// Once its last replica has left, a master still keeps a backlog, and the writes it records
/// there keep the keyspace's order: a replica that comes back continues from it and ends with
/// the same order-sensitive values (`APPEND`s racing from several clients on one key).
#[test]
fn writes_after_the_last_replica_left_keep_the_backlog_in_order() {
    let (master, mut m, _replica, mut r) = pair_for_racing_writes();
    let repl = latchkey_server::internals::node(master.handle());
    assert!(repl.has_attached_replicas());
    // The replica leaves (it follows a port nobody listens on) with its history intact.
    assert_eq!(cmd(&mut r, &["REPLICAOF", "127.0.0.1", "1"]), "+OK\r\n");
    until("the master to see its replica go", || {
        info(&mut m, "replication", "connected_slaves").as_deref() == Some("0")
    });
    assert!(
        !repl.has_attached_replicas(),
        "the replica is still counted"
    );
    assert!(repl.feeds_replication_stream(), "the backlog is kept");
    race_order_sensitive_writes(master.addr(), false);
    follow(&mut r, master.addr());
    assert_eq!(
        syncs(&mut m, "sync_partial_ok"),
        1,
        "continued from the backlog"
    );
    assert_replica_has_the_raced_values(&mut m, &mut r);
}

/// `repl-backlog-ttl`: a master alone for that long frees its backlog and takes a new
/// replication id (its writes feed nothing any more); a replica that comes back afterwards
/// gets a full resync.
#[test]
fn an_idle_backlog_is_freed_after_its_ttl() {
    let master = latchkey();
    let mut m = conn(master.addr());
    assert_eq!(
        cmd(&mut m, &["CONFIG", "SET", "repl-backlog-ttl", "1"]),
        "+OK\r\n"
    );
    let replica = latchkey();
    let mut r = conn(replica.addr());
    follow(&mut r, master.addr());
    cmd(&mut m, &["SET", "k", "v"]);
    assert_eq!(cmd(&mut m, &["WAIT", "1", "5000"]), ":1\r\n");
    let old_id = info(&mut m, "replication", "master_replid");
    assert_eq!(cmd(&mut r, &["REPLICAOF", "127.0.0.1", "1"]), "+OK\r\n");
    until("the backlog to be freed", || {
        info(&mut m, "replication", "repl_backlog_active").as_deref() == Some("0")
    });
    assert_ne!(info(&mut m, "replication", "master_replid"), old_id);
    assert!(!latchkey_server::internals::node(master.handle()).feeds_replication_stream());
    cmd(&mut m, &["SET", "k", "v2"]);
    follow(&mut r, master.addr());
    assert_eq!(syncs(&mut m, "sync_full"), 2);
    assert_eq!(cmd(&mut m, &["WAIT", "1", "5000"]), ":1\r\n");
    assert_eq!(cmd(&mut r, &["GET", "k"]), "$2\r\nv2\r\n");
}

/// Writes racing on one key from several clients while a replica is attached (they share the
/// gate, ordered by the stream-order lock, not run one at a time): the replica ends with the
/// master's order-sensitive values, and reads ran meanwhile.
#[test]
fn racing_writes_reach_an_attached_replica_in_the_keyspace_order() {
    let (master, mut m, _replica, mut r) = pair_for_racing_writes();
    race_order_sensitive_writes(master.addr(), true);
    assert_replica_has_the_raced_values(&mut m, &mut r);
    assert_eq!(cmd(&mut r, &["GET", "count"]), "$4\r\n1200\r\n");
}

/// A connection to a server whose default user has `password`, authenticated.
fn conn_auth(addr: SocketAddr, password: &str) -> RawConn {
    let mut c = conn(addr);
    assert_eq!(cmd(&mut c, &["AUTH", password]), "+OK\r\n");
    c
}

/// A replica of a master with a password authenticates with `masterauth` before its
/// handshake: redis-server following a latchkey master that has `requirepass`.
#[test]
fn redis_replicates_from_a_latchkey_master_with_a_password() {
    let master = Server::builder()
        .config("requirepass", "pw")
        .start_blocking()
        .expect("start latchkey");
    let mut m = conn(master.addr());
    assert_eq!(
        cmd(&mut m, &["PING"]),
        "-NOAUTH Authentication required.\r\n"
    );
    let mut m = conn_auth(master.addr(), "pw");
    fill(&mut m);
    let port = master.addr().port().to_string();
    let redis = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port, "--masterauth", "pw"]);
    let mut r = conn(redis.addr());
    until("redis-server's authenticated link to latchkey", || {
        info(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    assert_same_data(&mut m, &mut r);
    assert_stream_reaches(&mut m, &mut r);
}

/// latchkey following a redis-server master that has `requirepass`, with `masteruser` and
/// `masterauth` (the `AUTH user password` form).
#[test]
fn latchkey_replicates_from_a_redis_master_with_a_password() {
    let redis = RedisProcess::spawn(&[]);
    let mut m = conn(redis.addr());
    assert_eq!(
        cmd(&mut m, &["CONFIG", "SET", "requirepass", "pw"]),
        "+OK\r\n"
    );
    let mut m = conn_auth(redis.addr(), "pw");
    fill(&mut m);
    let replica = latchkey();
    let mut r = conn(replica.addr());
    assert_eq!(
        cmd(&mut r, &["CONFIG", "SET", "masteruser", "default"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut r, &["CONFIG", "SET", "masterauth", "pw"]),
        "+OK\r\n"
    );
    follow(&mut r, redis.addr());
    assert_same_data(&mut m, &mut r);
    assert_stream_reaches(&mut m, &mut r);
}

/// The words of a command or reply made of simple bulk strings (`*3\r\n$8\r\nREPLCONF\r\n...`
/// gives `["REPLCONF", ...]`): enough for the short ASCII commands a replica sends.
fn words(reply: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(reply)
        .split("\r\n")
        .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
        .map(str::to_string)
        .collect()
}

/// An empty RDB snapshot: the header, the end mark and a zero checksum ("not computed"),
/// which both servers accept.
const EMPTY_RDB: &[u8] = b"REDIS0009\xff\0\0\0\0\0\0\0\0";

/// Plays the master's side of a replication link over a real socket: `follow` is given the
/// port to point a replica at; the replica's handshake gets `+FULLRESYNC` and an empty
/// snapshot; then `stream` and `REPLCONF GETACK *` go out in one write. Returns the first
/// acknowledgement the replica sends that covers all of `stream`, as it sent it.
fn first_ack_covering(stream: &[u8], follow: impl FnOnce(u16)) -> Vec<u8> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener
        .set_nonblocking(true)
        .expect("nonblocking listener");
    follow(listener.local_addr().expect("addr").port());
    let mut socket = None;
    until("the replica to connect", || {
        socket = listener.accept().ok().map(|(s, _)| s);
        socket.is_some()
    });
    let socket = socket.expect("accepted");
    socket.set_nonblocking(false).expect("blocking socket");
    let mut replica = RawConn::from_stream(socket).expect("wrap");
    loop {
        let command = words(&replica.read_reply());
        match command.first().map(|w| w.to_ascii_uppercase()).as_deref() {
            Some("PING") => replica.send_raw(b"+PONG\r\n"),
            Some("REPLCONF") => replica.send_raw(b"+OK\r\n"),
            Some("PSYNC") => break,
            other => panic!("unexpected handshake command {other:?}"),
        }
    }
    let mut sync = format!(
        "+FULLRESYNC {} 0\r\n${}\r\n",
        "a".repeat(40),
        EMPTY_RDB.len()
    )
    .into_bytes();
    sync.extend_from_slice(EMPTY_RDB);
    replica.send_raw(&sync);
    let mut out = stream.to_vec();
    out.extend(RawConn::encode(&["REPLCONF", "GETACK", "*"]));
    replica.send_raw(&out);
    loop {
        let ack = replica.read_reply();
        let w = words(&ack);
        assert_eq!(
            w.get(..2),
            Some(&["REPLCONF".to_string(), "ACK".to_string()][..])
        );
        let offset: usize = w[2].parse().expect("an offset");
        if offset >= stream.len() {
            return ack;
        }
    }
}

/// A replica answers `REPLCONF GETACK *` with `REPLCONF ACK` and the offset of the stream
/// before the `GETACK`, latchkey's as redis-server's. (What `WAIT` waits on: the master sends
/// a `GETACK` for it.) An acknowledgement from the replica's once-a-second timer instead,
/// sent after the `GETACK` was applied, would count the `GETACK`'s own bytes too, so the
/// offset tells the two apart without timing anything.
#[test]
fn a_replica_answers_getack_with_the_offset_before_it() {
    let mut stream = RawConn::encode(&["SELECT", "0"]);
    for i in 0..3 {
        stream.extend(RawConn::encode(&["SET", &format!("k{i}"), "v"]));
    }
    let expected = RawConn::encode(&["REPLCONF", "ACK", &stream.len().to_string()]);

    let replica = latchkey();
    let mut r = conn(replica.addr());
    let from_latchkey = first_ack_covering(&stream, |port| {
        assert_eq!(
            cmd(&mut r, &["REPLICAOF", "127.0.0.1", &port.to_string()]),
            "+OK\r\n"
        );
    });
    assert_eq!(show(&from_latchkey), show(&expected), "latchkey's answer");
    assert_eq!(cmd(&mut r, &["GET", "k2"]), "$1\r\nv\r\n");

    let redis = RedisProcess::spawn(&[]);
    let mut rr = conn(redis.addr());
    let from_redis = first_ack_covering(&stream, |port| {
        assert_eq!(
            cmd(&mut rr, &["REPLICAOF", "127.0.0.1", &port.to_string()]),
            "+OK\r\n"
        );
    });
    assert_eq!(show(&from_redis), show(&expected), "redis-server's answer");
}

/// Writers racing on one key while another client runs `WAIT` after each of its writes, on a
/// latchkey master with a redis-server replica: a replica's stream goes out in batches (what
/// the clients wrote meanwhile, a `GETACK` among it), and every `WAIT` still counts the
/// replica, which ends with the master's order-sensitive values and at the master's offset
/// to the byte.
#[test]
fn writes_and_waits_racing_reach_a_redis_replica_to_the_byte() {
    let master = latchkey();
    let mut m = conn(master.addr());
    let port = master.addr().port().to_string();
    let redis = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port]);
    let mut r = conn(redis.addr());
    until("redis-server's link to latchkey", || {
        info(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    cmd(&mut m, &["SET", "log", ""]);
    assert_eq!(cmd(&mut m, &["WAIT", "1", "5000"]), ":1\r\n");
    let addr = master.addr();
    let waiter = std::thread::spawn(move || {
        let mut w = conn(addr);
        for i in 0..200 {
            assert_eq!(cmd(&mut w, &["SET", &format!("w{i}"), "v"]), "+OK\r\n");
            assert_eq!(cmd(&mut w, &["WAIT", "1", "5000"]), ":1\r\n", "WAIT {i}");
        }
    });
    race_order_sensitive_writes(addr, false);
    waiter.join().expect("the waiting client");
    assert_replica_has_the_raced_values(&mut m, &mut r);
    assert_eq!(cmd(&mut r, &["GET", "w199"]), "$1\r\nv\r\n");
    let offset = info(&mut m, "replication", "master_repl_offset");
    until("the replica at the master's offset", || {
        info(&mut r, "replication", "slave_repl_offset") == offset
    });
}
