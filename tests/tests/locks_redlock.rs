//! RedLock over five independent servers of each kind: it acquires (and extends) with two of
//! five down, fails with three down, and a server that never answers does not stall it past its
//! per-server timeout.

use std::time::{Duration, Instant};

use latchkey_client::locks::RedLock;
use latchkey_client::native::{LocalTransport, RedisTransport};
use latchkey_client::Transport;
use latchkey_server::Server;
use latchkey_tests::RedisProcess;

const TTL: Duration = Duration::from_secs(10);

async fn check_majority<T: Transport + Clone>(servers: Vec<T>, stop: impl Fn(usize)) {
    let redlock = RedLock::new(servers.clone(), Duration::from_millis(200));
    let l = redlock
        .acquire("all-up", TTL)
        .await
        .unwrap()
        .expect("5 of 5 up");
    assert_eq!(l.granted, 5);
    assert!(l.validity > Duration::ZERO && l.validity < TTL);
    // A second acquisition of the same resource fails while the first is held.
    assert!(redlock.acquire("all-up", TTL).await.unwrap().is_none());
    // Extended on all five (validity counted afresh), then released on all five.
    let longer = redlock.extend(&l, TTL * 2).await.expect("held on all five");
    assert_eq!((longer.granted, &longer.token), (5, &l.token));
    assert!(longer.validity > TTL, "{longer:?}");
    assert_eq!(redlock.release(&longer).await, 5);
    assert!(redlock.extend(&longer, TTL).await.is_none(), "released");

    stop(0);
    stop(1);
    let l = redlock
        .acquire("two-down", TTL)
        .await
        .unwrap()
        .expect("3 of 5 is a majority");
    assert_eq!(l.granted, 3);
    let longer = redlock.extend(&l, TTL).await.expect("3 of 5 is a majority");
    assert_eq!(longer.granted, 3);
    assert_eq!(redlock.release(&longer).await, 3);

    stop(2);
    assert!(
        redlock.acquire("three-down", TTL).await.unwrap().is_none(),
        "2 of 5 is no majority"
    );
    // Failure released what the two live servers had granted.
    let again = RedLock::new(servers[3..].to_vec(), Duration::from_millis(200));
    let l = again
        .acquire("three-down", TTL)
        .await
        .unwrap()
        .expect("released after the failure");
    assert_eq!(l.granted, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_in_process() {
    let mut handles = Vec::new();
    for _ in 0..5 {
        handles.push(Server::builder().no_listener().start().await.unwrap());
    }
    let transports: Vec<LocalTransport> = handles.iter().map(LocalTransport::new).collect();
    // "Down" in-process: the server refuses every write (a read-only replica), so it grants
    // nothing, like one that is unreachable.
    let shared: Vec<_> = handles.iter().map(|h| h.shared().clone()).collect();
    check_majority(transports, |i| {
        shared[i].set_replica(true);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_latchkey_tcp() {
    let mut handles = Vec::new();
    let mut transports = Vec::new();
    for _ in 0..5 {
        let h = Server::builder().start().await.unwrap();
        transports.push(RedisTransport::connect(&h.url()).await.unwrap());
        handles.push(h);
    }
    let shared: Vec<_> = handles.iter().map(|h| h.shared().clone()).collect();
    check_majority(transports, |i| shared[i].request_shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_real_redis() {
    let procs: Vec<RedisProcess> = (0..5).map(|_| RedisProcess::spawn(&[])).collect();
    let mut transports = Vec::new();
    for p in &procs {
        transports.push(RedisTransport::connect(&p.url()).await.unwrap());
    }
    let procs = std::sync::Mutex::new(procs.into_iter().map(Some).collect::<Vec<_>>());
    check_majority(transports, |i| {
        procs.lock().unwrap()[i].take();
    })
    .await;
}

/// One of five servers is stuck behind a long script (every command to it waits): RedLock
/// still answers within its per-server timeout, with the four others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_server_does_not_stall_redlock() {
    let mut keep = Vec::new();
    let mut transports = Vec::new();
    for _ in 0..5 {
        let h = Server::builder()
            .config("busy-reply-threshold", "50")
            .start()
            .await
            .unwrap();
        transports.push(RedisTransport::connect(&h.url()).await.unwrap());
        keep.push(h);
    }
    let stuck = keep[4].addr();
    let script = std::thread::spawn(move || {
        let mut c = latchkey_tests::RawConn::connect(stuck).unwrap();
        c.cmd(&[
            "EVAL",
            "local i = 0 while i < 3e8 do i = i + 1 end return i",
            "0",
        ])
    });
    // Wait until the script is really running (the server answers -BUSY).
    let probe = tokio::task::spawn_blocking(move || {
        let mut c = latchkey_tests::RawConn::connect(stuck).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !c.cmd(&["GET", "probe"]).starts_with(b"-BUSY") {
            assert!(Instant::now() < deadline, "the script never ran");
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    probe.await.unwrap();
    let redlock = RedLock::new(transports, Duration::from_millis(100));
    let start = Instant::now();
    let l = redlock
        .acquire("slow", TTL)
        .await
        .unwrap()
        .expect("majority of live servers");
    let took = start.elapsed();
    assert_eq!(l.granted, 4, "the stuck server cannot have granted it");
    assert!(
        took < Duration::from_secs(1),
        "stalled on the stuck server: {took:?}"
    );
    let mut killer = latchkey_tests::RawConn::connect(stuck).unwrap();
    killer.cmd(&["SCRIPT", "KILL"]);
    let _ = script.join();
}
