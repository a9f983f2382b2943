//! Scenario (d): a single node crashes and restarts. Without persistence the lock is gone and a
//! second client takes it; with `appendfsync always` it survives. On latchkey and on real Redis.

use std::time::Duration;

use latchkey_server::{Frame, Server, ServerHandle};
use latchkey_tests::persisted::temp_dir;
use latchkey_tests::RedisProcess;

async fn start(dir: &std::path::Path, aof: bool) -> ServerHandle {
    let mut b = Server::builder()
        .no_listener()
        .config("dir", dir.to_str().unwrap());
    if aof {
        b = b
            .config("appendonly", "yes")
            .config("appendfsync", "always");
    }
    b.start().await.unwrap()
}

#[tokio::test]
async fn latchkey_crash_restart_with_and_without_aof() {
    // Without persistence: the restarted node has forgotten the lock.
    let tmp = temp_dir("noaof");
    let dir = tmp.path();
    let s = start(dir, false).await;
    assert_eq!(
        s.client()
            .cmd(["SET", "lock", "c1", "NX", "PX", "30000"])
            .await,
        Frame::ok()
    );
    s.crash().await;
    let s = start(dir, false).await;
    assert_eq!(
        s.client()
            .cmd(["SET", "lock", "c2", "NX", "PX", "30000"])
            .await,
        Frame::ok()
    );

    // With appendfsync always: the lock (and its deadline) survives the crash.
    let tmp = temp_dir("aof");
    let dir = tmp.path();
    let s = start(dir, true).await;
    let mut c = s.client();
    assert_eq!(
        c.cmd(["SET", "lock", "c1", "NX", "PX", "30000"]).await,
        Frame::ok()
    );
    c.cmd(["HSET", "h", "owner", "1"]).await;
    let Frame::Integer(deadline) = c.cmd(["PEXPIRETIME", "lock"]).await else {
        panic!()
    };
    s.crash().await;
    let s = start(dir, true).await;
    let mut c = s.client();
    assert_eq!(
        c.cmd(["SET", "lock", "c2", "NX", "PX", "30000"]).await,
        Frame::Null
    );
    assert_eq!(c.cmd(["GET", "lock"]).await, Frame::bulk("c1"));
    assert_eq!(
        c.cmd(["PEXPIRETIME", "lock"]).await,
        Frame::Integer(deadline)
    );
    assert_eq!(c.cmd(["HGET", "h", "owner"]).await, Frame::bulk("1"));
}

#[tokio::test]
async fn a_torn_aof_tail_is_truncated_not_refused() {
    let tmp = temp_dir("torn");
    let dir = tmp.path();
    let s = start(dir, true).await;
    s.client().cmd(["SET", "kept", "1"]).await;
    s.crash().await;
    let path = dir.join("appendonly.aof");
    let clean = std::fs::metadata(&path).unwrap().len();
    // The process died in the middle of writing a command.
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"*3\r\n$3\r\nSET\r\n$4\r\nlost\r\n$5\r\nval")
        .unwrap();
    let s = start(dir, true).await;
    let mut c = s.client();
    assert_eq!(c.cmd(["GET", "kept"]).await, Frame::bulk("1"));
    assert_eq!(c.cmd(["EXISTS", "lost"]).await, Frame::Integer(0));
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        clean,
        "the torn tail was not cut"
    );
}

#[test]
fn real_redis_crash_restart_with_and_without_aof() {
    let mut plain = RedisProcess::spawn(&[]);
    let mut c = latchkey_tests::RawConn::connect(plain.addr()).unwrap();
    assert_eq!(
        c.cmd(&["SET", "lock", "c1", "NX", "PX", "30000"]),
        b"+OK\r\n"
    );
    plain.crash_and_restart();
    let mut c = latchkey_tests::RawConn::connect(plain.addr()).unwrap();
    assert_eq!(
        c.cmd(&["SET", "lock", "c2", "NX", "PX", "30000"]),
        b"+OK\r\n"
    );

    let mut durable = RedisProcess::spawn(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = latchkey_tests::RawConn::connect(durable.addr()).unwrap();
    assert_eq!(
        c.cmd(&["SET", "lock", "c1", "NX", "PX", "30000"]),
        b"+OK\r\n"
    );
    std::thread::sleep(Duration::from_millis(50));
    durable.crash_and_restart();
    let mut c = latchkey_tests::RawConn::connect(durable.addr()).unwrap();
    assert_eq!(
        c.cmd(&["SET", "lock", "c2", "NX", "PX", "30000"]),
        b"$-1\r\n"
    );
}

/// The restart control: a listening node restarts on the same address, keeping its lock when
/// it replays its AOF and forgetting it when it starts without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latchkey_restart_control_with_and_without_the_aof() {
    use latchkey_tests::restart::restart;
    let tmp = temp_dir("restart");
    let dir = tmp.path();
    let node = Server::builder()
        .config("dir", dir.to_str().unwrap())
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .start()
        .await
        .unwrap();
    let addr = node.addr();
    let sock = move |args: &'static [&'static str]| {
        tokio::task::spawn_blocking(move || {
            latchkey_tests::RawConn::connect(addr).unwrap().cmd(args)
        })
    };
    assert_eq!(
        sock(&["SET", "lock", "c1", "NX", "PX", "30000"])
            .await
            .unwrap(),
        b"+OK\r\n"
    );

    let node = restart(node, true).await.unwrap();
    assert_eq!(node.addr(), addr, "restarted on another address");
    assert_eq!(
        sock(&["GET", "lock"]).await.unwrap(),
        b"$2\r\nc1\r\n",
        "the AOF was not replayed"
    );

    let node = restart(node, false).await.unwrap();
    assert_eq!(node.addr(), addr);
    assert_eq!(sock(&["EXISTS", "lock"]).await.unwrap(), b":0\r\n");
    assert_eq!(
        sock(&["SET", "lock", "c2", "NX", "PX", "30000"])
            .await
            .unwrap(),
        b"+OK\r\n"
    );
    node.shutdown().await;
}

/// Whether the server closed `c` (end of stream or reset; a read timeout is not that).
fn closed(c: &mut latchkey_tests::RawConn) -> bool {
    use std::io::ErrorKind::*;
    match c.try_read_reply() {
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            UnexpectedEof | ConnectionReset | ConnectionAborted
        ),
    }
}

/// Polls `f` every 10 ms until it holds, for at most 20 s (a bound for a loaded machine).
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `LATCHKEY.FAILOVER RESTART AOF|NOAOF` over the wire: every connection closes as in a crash,
/// and the node answers again on the same port, with the AOF's lock or without it.
#[test]
fn restart_over_the_wire_with_and_without_the_aof() {
    use latchkey_tests::RawConn;
    let tmp = temp_dir("wire-restart");
    let dir = tmp.path();
    let node = Server::builder()
        .config("dir", dir.to_str().unwrap())
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .start_blocking()
        .unwrap();
    let addr = node.addr();
    let mut admin = RawConn::connect(addr).unwrap();
    let mut holder = RawConn::connect(addr).unwrap();
    assert_eq!(
        holder.cmd(&["SET", "lock", "c1", "NX", "PX", "30000"]),
        b"+OK\r\n"
    );
    assert_eq!(
        admin.cmd(&["LATCHKEY.FAILOVER", "RESTART", "BOGUS"]),
        b"-ERR syntax error\r\n"
    );
    assert_eq!(
        admin.cmd(&["LATCHKEY.FAILOVER", "RESTART", "AOF"]),
        b"+OK\r\n"
    );
    assert!(closed(&mut admin), "the caller's connection survived");
    assert!(closed(&mut holder), "a client's connection survived");
    let mut c = RawConn::connect(addr).unwrap();
    assert_eq!(
        c.cmd(&["GET", "lock"]),
        b"$2\r\nc1\r\n",
        "the AOF was not replayed"
    );
    let pttl = String::from_utf8(c.cmd(&["PTTL", "lock"])).unwrap();
    let pttl: i64 = pttl.trim().trim_start_matches(':').parse().unwrap();
    assert!((1..=30_000).contains(&pttl), "the TTL was not kept: {pttl}");

    assert_eq!(
        c.cmd(&["LATCHKEY.FAILOVER", "RESTART", "NOAOF"]),
        b"+OK\r\n"
    );
    assert!(closed(&mut c));
    let mut c = RawConn::connect(addr).unwrap();
    assert_eq!(c.cmd(&["EXISTS", "lock"]), b":0\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "appendonly"]),
        b"*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n"
    );
    assert_eq!(
        c.cmd(&["SET", "lock", "c2", "NX", "PX", "30000"]),
        b"+OK\r\n",
        "a second client takes the forgotten lock"
    );
    // NOAOF left the file alone: a restart from it brings back c1's lock, not c2's.
    assert_eq!(c.cmd(&["LATCHKEY.FAILOVER", "RESTART", "AOF"]), b"+OK\r\n");
    assert!(closed(&mut c));
    let mut c = RawConn::connect(addr).unwrap();
    assert_eq!(c.cmd(&["GET", "lock"]), b"$2\r\nc1\r\n");
    drop(node);
}

/// A restarted replica without an AOF comes back empty, follows its master again and gets
/// everything back with a full resync; a restarted master starts a new history.
#[test]
fn a_restarted_replica_resyncs_from_its_master() {
    use latchkey_tests::pair::{info_field, wait_link_up};
    use latchkey_tests::RawConn;
    let master = Server::builder().start_blocking().unwrap();
    let replica = Server::builder().start_blocking().unwrap();
    let mut m = RawConn::connect(master.addr()).unwrap();
    let mut r = RawConn::connect(replica.addr()).unwrap();
    let port = master.addr().port().to_string();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    wait_link_up(replica.addr());
    assert_eq!(m.cmd(&["SET", "lock", "c1"]), b"+OK\r\n");
    assert_eq!(m.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    assert_eq!(
        r.cmd(&["LATCHKEY.FAILOVER", "RESTART", "NOAOF"]),
        b"+OK\r\n"
    );
    assert!(closed(&mut r));
    until("the restarted replica's link", || {
        info_field(replica.addr(), "master_link_status").as_deref() == Some("up")
            && info_field(master.addr(), "connected_slaves").as_deref() == Some("1")
    });
    let mut r = RawConn::connect(replica.addr()).unwrap();
    assert_eq!(r.cmd(&["GET", "lock"]), b"$2\r\nc1\r\n");
    let full: String = String::from_utf8(m.cmd(&["INFO", "stats"])).unwrap();
    assert!(full.contains("sync_full:2"), "{full}");

    let old_id = info_field(master.addr(), "master_replid");
    assert_eq!(
        m.cmd(&["LATCHKEY.FAILOVER", "RESTART", "NOAOF"]),
        b"+OK\r\n"
    );
    assert!(closed(&mut m));
    let mut m = RawConn::connect(master.addr()).unwrap();
    assert_eq!(m.cmd(&["DBSIZE"]), b":0\r\n");
    assert_ne!(info_field(master.addr(), "master_replid"), old_id);
    assert_eq!(
        info_field(master.addr(), "master_repl_offset").as_deref(),
        Some("0")
    );
}

/// Clients writing one key at once (in-process, on two worker threads): the AOF records their
/// writes in the order they were applied, so a restart from it gets the same values back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writes_replay_from_the_aof_as_they_were_applied() {
    let tmp = temp_dir("race");
    let dir = tmp.path();
    let s = Server::builder()
        .no_listener()
        .config("dir", dir.to_str().unwrap())
        .config("appendonly", "yes")
        .config("appendfsync", "no")
        .start()
        .await
        .unwrap();
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let mut c = s.client();
            tokio::spawn(async move {
                for i in 0..300 {
                    let mark = format!("{t}{}", i % 10);
                    c.cmd(["APPEND", "log", &mark]).await;
                    c.cmd(["SET", "last", &mark]).await;
                    c.cmd(["INCR", "count"]).await;
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let read = |s: &ServerHandle| {
        let mut c = s.client();
        async move {
            let mut out = Vec::new();
            for key in ["log", "last", "count"] {
                out.push(c.cmd(["GET", key]).await);
            }
            out
        }
    };
    let before = read(&s).await;
    assert_eq!(before[2], Frame::bulk("1200"));
    s.restart(true).await.unwrap();
    assert_eq!(read(&s).await, before, "the AOF replays another order");
}

/// A stream comes back whole from the AOF after a restart: its entries (`XADD *` replayed
/// with the IDs it generated, `~` trims as the exact trims they were), its last ID,
/// `entries-added` and greatest deleted ID.
#[test]
fn a_stream_comes_back_from_the_aof() {
    use latchkey_tests::RawConn;
    let tmp = temp_dir("stream-restart");
    let node = Server::builder()
        .config("dir", tmp.path().to_str().unwrap())
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .start_blocking()
        .unwrap();
    let addr = node.addr();
    let mut c = RawConn::connect(addr).unwrap();
    for i in 0..300 {
        let v = i.to_string();
        let r = c.cmd(&["XADD", "s", "MAXLEN", "~", "150", "*", "n", &v]);
        assert!(r.starts_with(b"$"), "{}", String::from_utf8_lossy(&r));
    }
    c.cmd(&["XADD", "s", "99999999999999-*", "last", "1"]);
    let first = c.cmd(&["XRANGE", "s", "-", "+", "COUNT", "1"]);
    let id = String::from_utf8_lossy(&first)
        .lines()
        .nth(3)
        .unwrap()
        .to_string();
    assert_eq!(c.cmd(&["XDEL", "s", &id]), b":1\r\n");
    assert_eq!(c.cmd(&["XSETID", "s", "99999999999999-9"]), b"+OK\r\n");
    let before = (
        c.cmd(&["XRANGE", "s", "-", "+"]),
        c.cmd(&["XINFO", "STREAM", "s"]),
    );
    assert!(before.0.len() > 1000, "the stream holds entries");
    assert_eq!(c.cmd(&["LATCHKEY.FAILOVER", "RESTART", "AOF"]), b"+OK\r\n");
    assert!(closed(&mut c));
    let mut c = RawConn::connect(addr).unwrap();
    let after = (
        c.cmd(&["XRANGE", "s", "-", "+"]),
        c.cmd(&["XINFO", "STREAM", "s"]),
    );
    assert_eq!(before, after);
    drop(node);
}
