//! Scenario (d): a single node crashes and restarts. Without persistence the lock is gone and a
//! second client takes it; with `appendfsync always` it survives. On latchkey and on real Redis.

use std::time::Duration;

use latchkey_server::{Frame, Server, ServerHandle};
use latchkey_tests::RedisProcess;

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("latchkey-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

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
    let dir = temp_dir("noaof");
    let s = start(&dir, false).await;
    assert_eq!(
        s.client()
            .cmd(["SET", "lock", "c1", "NX", "PX", "30000"])
            .await,
        Frame::ok()
    );
    s.crash().await;
    let s = start(&dir, false).await;
    assert_eq!(
        s.client()
            .cmd(["SET", "lock", "c2", "NX", "PX", "30000"])
            .await,
        Frame::ok()
    );

    // With appendfsync always: the lock (and its deadline) survives the crash.
    let dir = temp_dir("aof");
    let s = start(&dir, true).await;
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
    let s = start(&dir, true).await;
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
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_torn_aof_tail_is_truncated_not_refused() {
    let dir = temp_dir("torn");
    let s = start(&dir, true).await;
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
    let s = start(&dir, true).await;
    let mut c = s.client();
    assert_eq!(c.cmd(["GET", "kept"]).await, Frame::bulk("1"));
    assert_eq!(c.cmd(["EXISTS", "lost"]).await, Frame::Integer(0));
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        clean,
        "the torn tail was not cut"
    );
    let _ = std::fs::remove_dir_all(&dir);
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
    let dir = temp_dir("restart");
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
    let _ = std::fs::remove_dir_all(&dir);
}
