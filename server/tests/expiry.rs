//! Active expiry with the virtual clock: one `advance` past many deadlines, then
//! [`ServerHandle::expiry_caught_up`], and no expired key is visible to any command, the counts
//! are right, and every deletion reached a replica and the AOF in order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use latchkey_server::{Clock, Frame, LocalClient, Server, ServerHandle};

/// A directory for one test's files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "latchkey-expiry-{name}-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fixed start time, so the servers that must not see time move share it exactly.
const START_MS: u64 = 1_700_000_000_000;

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn int(f: Frame) -> i64 {
    match f {
        Frame::Integer(n) => n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn strings(f: Frame) -> BTreeSet<String> {
    let Frame::Array(items) = f else {
        panic!("expected an array, got {f:?}")
    };
    items
        .into_iter()
        .map(|i| match i {
            Frame::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
            other => panic!("expected a bulk string, got {other:?}"),
        })
        .collect()
}

/// Every key `SCAN` returns in a full iteration.
async fn scan_all(c: &mut LocalClient) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    loop {
        let Frame::Array(reply) = c.cmd(["SCAN", &cursor, "COUNT", "500"]).await else {
            panic!("SCAN")
        };
        let Frame::Bulk(next) = &reply[0] else {
            panic!("cursor")
        };
        seen.extend(strings(reply[1].clone()));
        cursor = String::from_utf8(next.to_vec()).unwrap();
        if cursor == "0" {
            return seen;
        }
    }
}

/// The `expires=` count `INFO keyspace` reports for database `db` (0 when the line is absent).
async fn info_expires(c: &mut LocalClient, db: usize) -> (i64, i64) {
    let Frame::Bulk(info) = c.cmd(["INFO", "keyspace"]).await else {
        panic!("INFO")
    };
    let info = String::from_utf8_lossy(&info).into_owned();
    let prefix = format!("db{db}:keys=");
    let Some(line) = info.lines().find(|l| l.starts_with(&prefix)) else {
        return (0, 0);
    };
    let field = |name: &str| -> i64 {
        line.split(',')
            .find_map(|kv| kv.split_once('=').filter(|(k, _)| k.ends_with(name)))
            .map(|(_, v)| v.parse().unwrap())
            .unwrap()
    };
    (field("keys"), field("expires"))
}

async fn info_field(c: &mut LocalClient, section: &str, name: &str) -> String {
    let Frame::Bulk(info) = c.cmd(["INFO", section]).await else {
        panic!("INFO")
    };
    let info = String::from_utf8_lossy(&info).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
        .trim()
        .to_string()
}

/// What a key holds, as far as this test compares: type, value and deadline.
async fn describe(c: &mut LocalClient, key: &str) -> (Frame, Frame, Frame) {
    let t = c.cmd(["TYPE", key]).await;
    let v = match &t {
        Frame::Simple(s) if &s[..] == b"hash" => c.cmd(["HGETALL", key]).await,
        _ => c.cmd(["GET", key]).await,
    };
    (t, v, c.cmd(["PEXPIRETIME", key]).await)
}

/// Checks that `other` holds exactly `master`'s keys of database `db`, with the same values
/// and deadlines.
async fn agrees(master: &ServerHandle, other: &ServerHandle, db: usize, who: &str) {
    let (mut m, mut o) = (master.client(), other.client());
    m.cmd(["SELECT", &db.to_string()]).await;
    o.cmd(["SELECT", &db.to_string()]).await;
    let keys = strings(m.cmd(["KEYS", "*"]).await);
    assert_eq!(
        strings(o.cmd(["KEYS", "*"]).await),
        keys,
        "{who} holds other keys than the master in db{db}"
    );
    for k in &keys {
        assert_eq!(
            describe(&mut o, k).await,
            describe(&mut m, k).await,
            "{who} differs from the master on {k}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_advance_expires_every_due_key_and_the_replica_and_the_aof_agree() {
    let dir = TempDir::new("agree");
    let master = Server::builder()
        .clock(Clock::virtual_at_ms(START_MS))
        .config("dir", dir.path())
        .config("appendonly", "yes")
        .config("appendfsync", "no")
        .start()
        .await
        .unwrap();
    // The replica's clock never moves: a key vanishes from it only by the master's DEL.
    let replica = Server::builder()
        .no_listener()
        .clock(Clock::virtual_at_ms(START_MS))
        .start()
        .await
        .unwrap();
    replica.replicate_from(master.addr());
    until("the replication link", || replica.replication_link_up()).await;

    let mut m = master.client();
    let n = 4000;
    let mut live0: BTreeSet<String> = BTreeSet::new();
    let mut expiring0 = 0i64;
    for i in 0..n {
        let key = format!("lock:{i}");
        assert_eq!(
            m.cmd(["SET", &key, &format!("tok{i}"), "NX", "PX", "5000"])
                .await,
            Frame::ok()
        );
    }
    for i in 0..500 {
        m.cmd(["SET", &format!("keep:{i}"), "v", "PX", "600000"])
            .await;
        m.cmd(["SET", &format!("plain:{i}"), "v"]).await;
        live0.insert(format!("keep:{i}"));
        live0.insert(format!("plain:{i}"));
    }
    // Every way a TTL changes or a key leaves before its deadline.
    for i in 0..n {
        let key = format!("lock:{i}");
        match i / 100 {
            0 => {
                m.cmd(["PEXPIRE", &key, "600000"]).await; // extended
                live0.insert(key);
            }
            1 => {
                m.cmd(["PERSIST", &key]).await;
                live0.insert(key);
            }
            2 => {
                m.cmd(["SET", &key, "overwritten"]).await; // no TTL any more
                live0.insert(key);
            }
            3 => {
                m.cmd(["DEL", &key]).await; // gone, not by expiry
            }
            4 => {
                // Renamed: the TTL goes with it, and expires under the new name.
                m.cmd(["RENAME", &key, &format!("renamed:{i}")]).await;
                expiring0 += 1;
            }
            5 => {
                m.cmd(["PEXPIRE", &key, "2000"]).await; // shortened: still expires
                expiring0 += 1;
            }
            _ => expiring0 += 1,
        }
    }
    m.cmd(["RENAME", "keep:0", "moved:0"]).await;
    live0.remove("keep:0");
    live0.insert("moved:0".into());
    m.cmd(["PEXPIRE", "keep:1", "1000"]).await; // shortened below the advance
    live0.remove("keep:1");
    expiring0 += 1;
    // A big hash with a TTL: freed on the background freer when it expires.
    let mut hset = vec!["HSET".to_string(), "big".into()];
    for f in 0..2000 {
        hset.push(format!("f{f}"));
        hset.push("v".into());
    }
    m.cmd(&hset).await;
    m.cmd(["PEXPIRE", "big", "5000"]).await;
    expiring0 += 1;
    // Another database.
    m.cmd(["SELECT", "3"]).await;
    for i in 0..300 {
        m.cmd(["SET", &format!("db3lock:{i}"), "t", "PX", "5000"])
            .await;
    }
    m.cmd(["SET", "db3keep", "v"]).await;
    m.cmd(["SELECT", "0"]).await;
    let live3: BTreeSet<String> = ["db3keep".to_string()].into();

    assert_eq!(int(m.cmd(["WAIT", "1", "20000"]).await), 1);
    assert_eq!(
        int(m.cmd(["DBSIZE"]).await),
        live0.len() as i64 + expiring0,
        "nothing expired yet"
    );
    let ttl_keys_before = info_expires(&mut m, 0).await.1;
    assert_eq!(ttl_keys_before, expiring0 + 100 + 499, "lock:0..99, keep:*");

    // One advance past every deadline but the long ones, then the cycle catches up.
    master.clock().advance(Duration::from_secs(10));
    master.expiry_caught_up().await;

    // No expired key is visible to any command, and the counts are right.
    assert_eq!(int(m.cmd(["DBSIZE"]).await), live0.len() as i64);
    assert_eq!(strings(m.cmd(["KEYS", "*"]).await), live0);
    assert_eq!(scan_all(&mut m).await, live0);
    for _ in 0..50 {
        let Frame::Bulk(k) = m.cmd(["RANDOMKEY"]).await else {
            panic!("RANDOMKEY")
        };
        assert!(live0.contains(std::str::from_utf8(&k).unwrap()));
    }
    for i in 500..n {
        let key = format!("lock:{i}");
        assert_eq!(m.cmd(["GET", &key]).await, Frame::Null, "{key}");
        assert_eq!(int(m.cmd(["EXISTS", &key]).await), 0, "{key}");
        assert_eq!(int(m.cmd(["PTTL", &key]).await), -2, "{key}");
    }
    assert_eq!(
        int(m.cmd(["EXISTS", "big", "renamed:450", "keep:1"]).await),
        0
    );
    assert_eq!(
        info_expires(&mut m, 0).await,
        (live0.len() as i64, 100 + 499),
        "INFO keyspace: lock:0..99, keep:2..499 and moved:0 still have a TTL"
    );
    assert_eq!(
        info_field(&mut m, "stats", "expired_keys").await,
        (expiring0 + 300).to_string(),
        "every expired key counted once"
    );
    m.cmd(["SELECT", "3"]).await;
    assert_eq!(int(m.cmd(["DBSIZE"]).await), 1);
    assert_eq!(strings(m.cmd(["KEYS", "*"]).await), live3);
    m.cmd(["SELECT", "0"]).await;

    // A key recreated after its expiry: its DEL must reach the replica and the AOF first.
    m.cmd(["SET", "lock:3999", "reborn"]).await;
    live0.insert("lock:3999".into());
    assert_eq!(int(m.cmd(["WAIT", "1", "20000"]).await), 1);

    for db in [0, 3] {
        agrees(&master, &replica, db, "the replica").await;
    }
    assert_eq!(
        replica.client().cmd(["GET", "lock:3999"]).await,
        Frame::bulk("reborn")
    );

    // A node started from a copy of the master's AOF, at the old time (so its own clock
    // hides nothing): every DEL is in the file, in order.
    let copy = TempDir::new("agree-copy");
    std::fs::copy(dir.0.join("appendonly.aof"), copy.0.join("appendonly.aof")).unwrap();
    let restored = Server::builder()
        .no_listener()
        .clock(Clock::virtual_at_ms(START_MS))
        .config("dir", copy.path())
        .config("appendonly", "yes")
        .start()
        .await
        .unwrap();
    for db in [0, 3] {
        agrees(&master, &restored, db, "the node restarted from the AOF").await;
    }
    assert_eq!(
        int(restored.client().cmd(["DBSIZE"]).await),
        live0.len() as i64
    );

    restored.shutdown().await;
    replica.shutdown().await;
    master.shutdown().await;
}

/// With the cycle off (`DEBUG SET-ACTIVE-EXPIRE 0`) expired keys linger, as in Redis: `DBSIZE`
/// still counts them, but no command shows them. `expiry_caught_up` does not wait for a
/// cycle that will not run.
#[tokio::test]
async fn expired_keys_not_yet_deleted_are_counted_by_dbsize_but_never_shown() {
    let s = Server::builder()
        .no_listener()
        .virtual_clock()
        .start()
        .await
        .unwrap();
    let mut c = s.client();
    assert_eq!(
        c.cmd(["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).await,
        Frame::ok()
    );
    for i in 0..100 {
        c.cmd(["SET", &format!("k{i}"), "v", "PX", "100"]).await;
    }
    s.clock().advance(Duration::from_secs(1));
    s.expiry_caught_up().await;
    assert_eq!(int(c.cmd(["DBSIZE"]).await), 100, "Redis counts them too");
    assert_eq!(c.cmd(["KEYS", "*"]).await, Frame::Array(vec![]));
    assert!(scan_all(&mut c).await.is_empty());
    assert_eq!(c.cmd(["GET", "k1"]).await, Frame::Null);
    assert_eq!(int(c.cmd(["DBSIZE"]).await), 99, "the read deleted k1");
    // RANDOMKEY deletes every expired key it picks, and picks again, as Redis's does (seen
    // with redis-server 7.0: DBSIZE 100, RANDOMKEY nil, DBSIZE 0).
    c.cmd(["SET", "live", "v"]).await;
    assert_eq!(c.cmd(["RANDOMKEY"]).await, Frame::bulk("live"));
    c.cmd(["DEL", "live"]).await;
    assert_eq!(c.cmd(["RANDOMKEY"]).await, Frame::Null);
    assert_eq!(int(c.cmd(["DBSIZE"]).await), 0, "RANDOMKEY took them away");
    assert_eq!(
        info_field(&mut c, "stats", "expired_keys").await,
        "100",
        "each counted as expired"
    );
    assert_eq!(info_expires(&mut c, 0).await, (0, 0));
    // Switched back on, the cycle deletes what expires next.
    c.cmd(["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).await;
    c.cmd(["SET", "later", "v", "PX", "100"]).await;
    s.clock().advance(Duration::from_secs(1));
    s.expiry_caught_up().await;
    assert_eq!(int(c.cmd(["DBSIZE"]).await), 0);
    s.shutdown().await;
}

/// `UNLINK` of a huge value and `FLUSHALL ASYNC`/`FLUSHDB ASYNC`: the keys are gone when the
/// reply comes, counts included, and the keyspace works on as before.
#[tokio::test]
async fn unlink_and_async_flushes_leave_nothing_visible() {
    let s = Server::builder()
        .no_listener()
        .virtual_clock()
        .start()
        .await
        .unwrap();
    let mut c = s.client();
    let mut rpush = vec!["RPUSH".to_string(), "huge".into()];
    rpush.extend((0..50_000).map(|i| i.to_string()));
    assert_eq!(int(c.cmd(&rpush).await), 50_000);
    c.cmd(["SET", "other", "v"]).await;
    assert_eq!(int(c.cmd(["UNLINK", "huge", "missing"]).await), 1);
    assert_eq!(int(c.cmd(["EXISTS", "huge"]).await), 0);
    assert_eq!(int(c.cmd(["DBSIZE"]).await), 1);

    for i in 0..10_000 {
        c.cmd(["SET", &format!("k{i}"), "v", "PX", "5000"]).await;
    }
    c.cmd(["SELECT", "1"]).await;
    c.cmd(["SET", "db1", "v", "PX", "5000"]).await;
    assert_eq!(c.cmd(["FLUSHDB", "ASYNC"]).await, Frame::ok());
    assert_eq!(int(c.cmd(["DBSIZE"]).await), 0);
    c.cmd(["SET", "db1", "again"]).await;
    c.cmd(["SELECT", "0"]).await;
    assert_eq!(info_expires(&mut c, 0).await, (10_001, 10_000));
    assert_eq!(c.cmd(["FLUSHALL", "ASYNC"]).await, Frame::ok());
    assert_eq!(int(c.cmd(["DBSIZE"]).await), 0);
    assert_eq!(info_expires(&mut c, 0).await, (0, 0));
    assert_eq!(info_expires(&mut c, 1).await, (0, 0));
    assert_eq!(c.cmd(["GET", "k5"]).await, Frame::Null);
    assert_eq!(
        c.cmd(["FLUSHALL", "LAZY"]).await,
        Frame::error("ERR syntax error")
    );
    // Nothing of the old keys comes back when the clock passes their deadlines.
    c.cmd(["SET", "k5", "new"]).await;
    s.clock().advance(Duration::from_secs(10));
    s.expiry_caught_up().await;
    assert_eq!(c.cmd(["GET", "k5"]).await, Frame::bulk("new"));
    assert_eq!(
        info_field(&mut c, "stats", "expired_keys").await,
        "0",
        "the flushed keys were not expired again"
    );
    s.shutdown().await;
}

/// `RANDOMKEY` picks a random bucket instead of listing every key, and never answers with an
/// expired key on a master: among a thousand expired keys the cycle has not reached (it is
/// off), it still finds the ten live ones, each of them sooner or later, and takes away the
/// expired ones it meets.
#[tokio::test]
async fn randomkey_finds_live_keys_among_expired_ones() {
    let s = Server::builder()
        .no_listener()
        .virtual_clock()
        .start()
        .await
        .unwrap();
    let mut c = s.client();
    c.cmd(["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).await;
    for i in 0..1000 {
        c.cmd(["SET", &format!("gone:{i}"), "v", "PX", "100"]).await;
    }
    let live: BTreeSet<String> = (0..10).map(|i| format!("live:{i}")).collect();
    for k in &live {
        c.cmd(["SET", k, "v"]).await;
    }
    s.clock().advance(Duration::from_secs(1));
    let mut picks: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..2000 {
        let Frame::Bulk(k) = c.cmd(["RANDOMKEY"]).await else {
            panic!("RANDOMKEY found nothing")
        };
        let k = String::from_utf8(k.to_vec()).unwrap();
        assert!(live.contains(&k), "RANDOMKEY answered {k}");
        *picks.entry(k).or_default() += 1;
    }
    // Fair picks give each key 200 on average; fewer than 100 for any of the ten happens
    // less than once in 10^11 runs, while a walk from a random bucket routinely starves the keys
    // that follow other keys.
    assert!(
        live.iter()
            .all(|k| picks.get(k).copied().unwrap_or(0) >= 100),
        "every live key is about as likely as any other: {picks:?}"
    );
    let left = int(c.cmd(["DBSIZE"]).await);
    let expired = info_field(&mut c, "stats", "expired_keys").await;
    assert_eq!(
        left + expired.parse::<i64>().unwrap(),
        1010,
        "each key is either still there or was counted as expired"
    );
    assert!(left < 1010, "the expired keys it met were deleted");
    s.shutdown().await;
}
