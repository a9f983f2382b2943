//! The lock conformance suite: every scenario written once and run, as separate test cases,
//! against (1) the latchkey server in-process, (2) latchkey over TCP, (3) a real
//! `redis-server` spawned on a free port.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use latchkey_client::locks::{
    Backoff, Extended, FairLock, FencedLock, MultiLock, ReentrantLock, ReentrantRelease, Released,
    ReplicatedAcquire, ReplicatedLock, RwLock, Semaphore, SimpleLock, Watchdog,
};
use latchkey_client::native::{LocalTransport, RedisTransport};
use latchkey_client::transport::args;
use latchkey_client::{Reply, Transport};
use latchkey_server::{Server, ServerHandle};
use latchkey_tests::RedisProcess;

/// Keeps whatever a leg started alive for the length of a test.
#[allow(dead_code)]
enum Keep {
    Latchkey(ServerHandle),
    Redis(RedisProcess),
}

/// How time passes for a leg: the virtual clock on the in-process server, real time elsewhere.
#[derive(Clone)]
enum Time {
    Virtual(latchkey_server::Clock),
    Real,
}

impl Time {
    /// Keeps a virtual clock moving slowly (50 ms every 100 ms of real time) for scenarios
    /// whose server-side deadlines must pass while clients keep working; no-op in real time.
    fn keep_moving(&self) -> Option<tokio::task::JoinHandle<()>> {
        match self {
            Time::Virtual(c) => {
                let c = c.clone();
                Some(tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        c.advance(Duration::from_millis(50));
                    }
                }))
            }
            Time::Real => None,
        }
    }

    async fn pass(&self, d: Duration) {
        match self {
            Time::Virtual(c) => {
                c.advance(d);
                tokio::task::yield_now().await;
            }
            Time::Real => tokio::time::sleep(d).await,
        }
    }
}

async fn in_process() -> (Keep, LocalTransport, Time) {
    let s = Server::builder()
        .virtual_clock()
        .no_listener()
        .start()
        .await
        .unwrap();
    let t = LocalTransport::new(&s);
    let time = Time::Virtual(s.clock().clone());
    (Keep::Latchkey(s), t, time)
}

async fn latchkey_tcp() -> (Keep, RedisTransport, Time) {
    let s = Server::builder().start().await.unwrap();
    let t = RedisTransport::connect(&s.url()).await.unwrap();
    (Keep::Latchkey(s), t, Time::Real)
}

async fn real_redis() -> (Keep, RedisTransport, Time) {
    let r = RedisProcess::spawn(&[]);
    let t = RedisTransport::connect(&r.url()).await.unwrap();
    (Keep::Redis(r), t, Time::Real)
}

/// Runs `$scenario(transport, time)` on each leg as its own test.
macro_rules! legs {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn latchkey_in_process() {
                let (_keep, t, time) = super::in_process().await;
                super::$scenario(t, time).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn latchkey_tcp() {
                let (_keep, t, time) = super::latchkey_tcp().await;
                super::$scenario(t, time).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn real_redis() {
                let (_keep, t, time) = super::real_redis().await;
                super::$scenario(t, time).await;
            }
        }
    )*};
}

legs!(
    mutual_exclusion_under_contention,
    crashed_holder_frees_after_ttl,
    wrong_token_is_refused_and_changes_nothing,
    release_is_idempotent,
    watchdog_keeps_and_reports_loss,
    waiter_deadline_is_honoured,
    unlock_publish_wakes_a_waiter_before_its_backoff,
    reentrancy_counts,
    semaphore_never_exceeds_its_permits,
    fencing_tokens_increase,
    multi_lock_is_all_or_none,
    read_write_exclusion,
    fair_lock_serves_in_arrival_order_and_survives_a_dead_waiter,
    replicated_lock_without_replicas_is_given_up,
);

/// 16 tasks × 200 acquisitions: a non-atomic read-modify-write counter ends exact, fencing
/// tokens strictly increase in acquisition order, and no two critical sections overlap.
async fn mutual_exclusion_under_contention<T: Transport + Clone>(t: T, _time: Time) {
    const TASKS: usize = 16;
    const ROUNDS: usize = 200;
    let lock = FencedLock::new(t.clone(), "contended");
    let in_section = Arc::new(AtomicI64::new(0));
    let fences = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (lock, t, in_section, fences) =
            (lock.clone(), t.clone(), in_section.clone(), fences.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let l = lock
                    .acquire_wait(
                        Duration::from_secs(10),
                        Duration::from_secs(60),
                        Backoff {
                            base: Duration::from_millis(1),
                            max: Duration::from_millis(20),
                        },
                    )
                    .await
                    .unwrap()
                    .expect("acquired within the deadline");
                assert_eq!(
                    in_section.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                // Read-modify-write that is only correct under mutual exclusion.
                let v = match t.command(args(["GET", "counter"])).await.unwrap() {
                    Reply::Bulk(b) => String::from_utf8(b).unwrap().parse::<i64>().unwrap(),
                    _ => 0,
                };
                t.command(args([
                    "SET".to_string(),
                    "counter".into(),
                    (v + 1).to_string(),
                ]))
                .await
                .unwrap();
                fences.lock().unwrap().push(l.fence);
                in_section.fetch_sub(1, Ordering::SeqCst);
                assert_eq!(lock.release(&l).await.unwrap(), Released::Released);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let counter = t.command(args(["GET", "counter"])).await.unwrap();
    assert_eq!(
        counter,
        Reply::Bulk((TASKS * ROUNDS).to_string().into_bytes())
    );
    let fences = fences.lock().unwrap();
    assert_eq!(fences.len(), TASKS * ROUNDS);
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens not strictly increasing in acquisition order"
    );
}

async fn crashed_holder_frees_after_ttl<T: Transport + Clone>(t: T, time: Time) {
    let lock = SimpleLock::new(t.clone(), "crashy");
    let ttl = Duration::from_millis(300);
    let first = lock.try_acquire(ttl).await.unwrap().expect("free");
    // The holder "crashes": it never releases.
    assert!(lock.try_acquire(ttl).await.unwrap().is_none());
    time.pass(Duration::from_millis(450)).await;
    let second = lock
        .try_acquire(ttl)
        .await
        .unwrap()
        .expect("freed by its TTL");
    assert_ne!(first.token, second.token);
    // The crashed holder, coming back, cannot release the new holder's lock.
    assert_eq!(lock.release(&first).await.unwrap(), Released::NotOwner);
    assert_eq!(lock.holder().await.unwrap(), Some(second.token.clone()));
}

async fn wrong_token_is_refused_and_changes_nothing<T: Transport + Clone>(t: T, _time: Time) {
    let lock = SimpleLock::new(t.clone(), "guarded");
    let mut lease = lock
        .try_acquire(Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let mut forged = lease.clone();
    forged.token = "not-the-owner".into();
    assert_eq!(lock.release(&forged).await.unwrap(), Released::NotOwner);
    assert_eq!(
        lock.extend(&mut forged, Duration::from_secs(300))
            .await
            .unwrap(),
        Extended::NotOwner
    );
    assert_eq!(lock.holder().await.unwrap(), Some(lease.token.clone()));
    let ttl = lock.pttl().await.unwrap().unwrap();
    assert!(
        ttl <= Duration::from_secs(30),
        "a refused extend changed the TTL: {ttl:?}"
    );
    assert_eq!(
        lock.extend(&mut lease, Duration::from_secs(60))
            .await
            .unwrap(),
        Extended::Extended
    );
    assert!(lock.pttl().await.unwrap().unwrap() > Duration::from_secs(30));
}

async fn release_is_idempotent<T: Transport + Clone>(t: T, _time: Time) {
    let lock = SimpleLock::new(t, "once");
    let lease = lock
        .try_acquire(Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lock.release(&lease).await.unwrap(), Released::Released);
    assert_eq!(
        lock.release(&lease).await.unwrap(),
        Released::AlreadyExpired
    );
    assert_eq!(lock.holder().await.unwrap(), None);
}

async fn watchdog_keeps_and_reports_loss<T: Transport + Clone>(t: T, time: Time) {
    // The watchdog renews in real time; give the virtual clock nothing to do here.
    let _ = time;
    let ttl = Duration::from_millis(300);
    let dog = Watchdog::spawn(t.clone(), ttl);
    let lock = SimpleLock::new(t.clone(), "watched");
    let lease = lock.try_acquire(ttl).await.unwrap().unwrap();
    let mut watch = dog.watch(&lease);
    // Several TTLs later the lease is still ours.
    tokio::time::sleep(ttl * 4).await;
    assert_eq!(lock.holder().await.unwrap(), Some(lease.token.clone()));
    assert!(!watch.is_lost());
    // Someone deletes the key: the holder learns within one renewal period.
    t.command(args(["DEL", "{watched}"])).await.unwrap();
    let reason = tokio::time::timeout(ttl, watch.lost())
        .await
        .expect("loss reported within a renewal period");
    assert_eq!(reason, latchkey_client::locks::LostReason::NotOwner);
    assert!(dog.metrics().snapshot().renewals >= 3);
}

async fn waiter_deadline_is_honoured<T: Transport + Clone>(t: T, _time: Time) {
    let lock = SimpleLock::new(t.clone(), "busy");
    let _held = lock
        .try_acquire(Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let start = std::time::Instant::now();
    let got = lock
        .acquire_wait(
            Duration::from_secs(1),
            Duration::from_millis(200),
            Backoff::default(),
        )
        .await
        .unwrap();
    assert!(got.is_none(), "acquired a held lock");
    assert!(
        start.elapsed() >= Duration::from_millis(200),
        "gave up before its deadline"
    );
}

/// A waiter with a very long backoff is woken by the unlock PUBLISH: it holds the lock before
/// its first backoff tick could have fired (an ordering assertion: the holder releases, then
/// the waiter acquires, all while the backoff's minimum sleep has not elapsed).
async fn unlock_publish_wakes_a_waiter_before_its_backoff<T: Transport + Clone>(t: T, _time: Time) {
    let lock = SimpleLock::new(t.clone(), "wake");
    let held = lock
        .try_acquire(Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            // Base = max = 30 s: polling alone could not acquire within the test's bound.
            let backoff = Backoff {
                base: Duration::from_secs(30),
                max: Duration::from_secs(30),
            };
            lock.acquire_wait(Duration::from_secs(5), Duration::from_secs(60), backoff)
                .await
        })
    };
    // Let the waiter subscribe and go to sleep.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished());
    assert_eq!(lock.release(&held).await.unwrap(), Released::Released);
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the unlock message woke the waiter (no 30 s backoff tick happened)")
        .unwrap()
        .unwrap();
    assert!(got.is_some());
}

async fn reentrancy_counts<T: Transport + Clone>(t: T, _time: Time) {
    let ttl = Duration::from_secs(30);
    let a = ReentrantLock::new(t.clone(), "re");
    let b = ReentrantLock::new(t.clone(), "re");
    assert_eq!(a.try_acquire(ttl).await.unwrap(), None);
    assert_eq!(a.try_acquire(ttl).await.unwrap(), None);
    assert_eq!(a.hold_count().await.unwrap(), 2);
    assert!(
        b.try_acquire(ttl).await.unwrap().is_some(),
        "another owner got in"
    );
    assert_eq!(b.release(ttl).await.unwrap(), ReentrantRelease::NotOwner);
    assert_eq!(a.release(ttl).await.unwrap(), ReentrantRelease::StillHeld);
    assert!(b.try_acquire(ttl).await.unwrap().is_some());
    assert_eq!(a.release(ttl).await.unwrap(), ReentrantRelease::Released);
    assert_eq!(b.try_acquire(ttl).await.unwrap(), None);
}

async fn semaphore_never_exceeds_its_permits<T: Transport + Clone>(t: T, _time: Time) {
    const PERMITS: u32 = 3;
    let sem = Semaphore::new(t.clone(), "pool", PERMITS);
    let inside = Arc::new(AtomicI64::new(0));
    let max_seen = Arc::new(AtomicI64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (sem, inside, max_seen) = (sem.clone(), inside.clone(), max_seen.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = 0;
            while done < 20 {
                let Some(p) = sem.try_acquire(Duration::from_secs(10)).await.unwrap() else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                };
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_seen.fetch_max(now, Ordering::SeqCst);
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(sem.release(&p).await.unwrap());
                done += 1;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let max = max_seen.load(Ordering::SeqCst);
    assert!(
        max <= PERMITS as i64,
        "{max} holders at once with {PERMITS} permits"
    );
    assert!(max >= 1);
}

async fn fencing_tokens_increase<T: Transport + Clone>(t: T, time: Time) {
    let lock = FencedLock::new(t, "fence");
    let a = lock
        .try_acquire(Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    assert!(lock
        .try_acquire(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    time.pass(Duration::from_millis(300)).await;
    // The first holder's lease expired; the next holder's token is larger, so storage can
    // reject the stale holder's late write.
    let b = lock
        .try_acquire(Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    assert!(b.fence > a.fence);
}

async fn multi_lock_is_all_or_none<T: Transport + Clone>(t: T, _time: Time) {
    let ttl = Duration::from_secs(30);
    let single = SimpleLock::new(t.clone(), "acct:b");
    let b = single.try_acquire(ttl).await.unwrap().unwrap();
    let both = MultiLock::new(t.clone(), &["{acct:a}", "{acct:b}"]);
    assert!(both.try_acquire(ttl).await.unwrap().is_none());
    // None means none: the free key was not taken either.
    let a_probe = SimpleLock::new(t.clone(), "acct:a");
    assert_eq!(a_probe.holder().await.unwrap(), None);
    single.release(&b).await.unwrap();
    let l = both.try_acquire(ttl).await.unwrap().expect("both free now");
    assert_eq!(a_probe.holder().await.unwrap(), Some(l.token.clone()));
    assert_eq!(both.release(&l).await.unwrap(), 2);
}

async fn read_write_exclusion<T: Transport + Clone>(t: T, _time: Time) {
    let ttl = Duration::from_secs(30);
    let rw = RwLock::new(t, "doc");
    let r1 = rw.try_read(ttl).await.unwrap().expect("free");
    let r2 = rw.try_read(ttl).await.unwrap().expect("readers share");
    assert!(
        rw.try_write(ttl).await.unwrap().is_none(),
        "a writer entered with readers in"
    );
    assert!(rw.release(&r1).await.unwrap());
    assert!(
        rw.try_write(ttl).await.unwrap().is_none(),
        "one reader is still in"
    );
    assert!(rw.release(&r2).await.unwrap());
    let w = rw.try_write(ttl).await.unwrap().expect("free again");
    assert!(
        rw.try_read(ttl).await.unwrap().is_none(),
        "a reader entered with a writer in"
    );
    assert!(rw.try_write(ttl).await.unwrap().is_none(), "two writers");
    assert!(rw.release(&w).await.unwrap());
    assert!(!rw.release(&w).await.unwrap());
    assert!(rw.try_read(ttl).await.unwrap().is_some());
}

async fn fair_lock_serves_in_arrival_order_and_survives_a_dead_waiter<T: Transport + Clone>(
    t: T,
    time: Time,
) {
    // Queue deadlines are kept by the server's clock: a virtual one must move.
    let ticker = time.keep_moving();
    let heartbeat = Duration::from_millis(100);
    let lock = FairLock::new(t.clone(), "fifo", heartbeat);
    let ttl = Duration::from_secs(30);
    let holder = lock
        .acquire_wait(ttl, Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    // A waiter that joins the queue and dies right away.
    assert!(lock.enqueue_once(ttl).await.unwrap().is_some());
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for name in ["first", "second", "third"] {
        let (lock, order) = (lock.clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let l = lock
                .acquire_wait(ttl, Duration::from_secs(30))
                .await
                .unwrap()
                .expect("served");
            order.lock().unwrap().push(name);
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert_eq!(lock.release(&l).await.unwrap(), Released::Released);
        }));
        // Arrival order: each waiter is queued before the next one starts.
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    assert_eq!(lock.release(&holder).await.unwrap(), Released::Released);
    for w in waiters {
        tokio::time::timeout(Duration::from_secs(20), w)
            .await
            .expect("queue stalled")
            .unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec!["first", "second", "third"]);
    if let Some(t) = ticker {
        t.abort();
    }
}

async fn replicated_lock_without_replicas_is_given_up<T: Transport + Clone>(t: T, _time: Time) {
    let lock = ReplicatedLock::new(t.clone(), "replicated", 1, Duration::from_millis(50));
    let zero = ReplicatedLock::new(t.clone(), "replicated", 0, Duration::from_millis(50));
    match lock.try_acquire(Duration::from_secs(10)).await.unwrap() {
        ReplicatedAcquire::NotReplicated { acked } => assert_eq!(acked, 0),
        other => panic!("a master without replicas confirmed a lock: {other:?}"),
    }
    // It was released again: the lock is free.
    assert_eq!(
        SimpleLock::new(t, "replicated").holder().await.unwrap(),
        None
    );
    // Asking for zero replicas confirms at once.
    assert!(matches!(
        zero.try_acquire(Duration::from_secs(10)).await.unwrap(),
        ReplicatedAcquire::Confirmed(_)
    ));
}
