//! The lock conformance suite: every scenario written once (against [`Locks`]) and run, as
//! separate test cases, with the client native against (1) the latchkey server in-process,
//! (2) latchkey over TCP, (3) a real `redis-server` spawned on a free port; and with the client
//! inside the WebAssembly component, in a tenant of the latchkey host, against (4) the latchkey
//! server in-process and (5) a real `redis-server`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use latchkey_client::locks::{
    Backoff, Extended, LostReason, ReentrantRelease, Released, ReplicatedAcquire, SimpleLock,
    Watchdog,
};
use latchkey_client::native::{LocalTransport, RedisTransport};
use latchkey_client::transport::args;
use latchkey_client::Reply;
use latchkey_plugin::Backend;
use latchkey_server::{Server, ServerHandle};
use latchkey_tests::lock_api::*;
use latchkey_tests::wasm_api::Wasm;
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

async fn in_process() -> (Keep, Native<LocalTransport>, Time) {
    let s = Server::builder()
        .virtual_clock()
        .no_listener()
        .start()
        .await
        .unwrap();
    let t = Native(LocalTransport::new(&s));
    let time = Time::Virtual(s.clock().clone());
    (Keep::Latchkey(s), t, time)
}

async fn latchkey_tcp() -> (Keep, Native<RedisTransport>, Time) {
    let s = Server::builder().start().await.unwrap();
    let t = Native(RedisTransport::connect(&s.url()).await.unwrap());
    (Keep::Latchkey(s), t, Time::Real)
}

async fn real_redis() -> (Keep, Native<RedisTransport>, Time) {
    let r = RedisProcess::spawn(&[]);
    let t = Native(RedisTransport::connect(&r.url()).await.unwrap());
    (Keep::Redis(r), t, Time::Real)
}

/// The lock client inside the wasm component, hosted against the in-process server.
async fn wasm_in_process() -> (Keep, Wasm, Time) {
    let s = Server::builder()
        .virtual_clock()
        .no_listener()
        .start()
        .await
        .unwrap();
    let w = Wasm::new(<dyn Backend>::local(&s), "conformance");
    let time = Time::Virtual(s.clock().clone());
    (Keep::Latchkey(s), w, time)
}

/// The lock client inside the wasm component, hosted against a real `redis-server`.
async fn wasm_real_redis() -> (Keep, Wasm, Time) {
    let r = RedisProcess::spawn(&[]);
    let backend = <dyn Backend>::redis(&r.url()).await.unwrap();
    (
        Keep::Redis(r),
        Wasm::new(backend, "conformance"),
        Time::Real,
    )
}

/// Runs `$scenario(locks, time)` on each leg as its own test.
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
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn wasm_in_process() {
                let (_keep, t, time) = super::wasm_in_process().await;
                super::$scenario(t, time).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn wasm_real_redis() {
                let (_keep, t, time) = super::wasm_real_redis().await;
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
    a_release_wakes_the_longest_live_waiter_alone,
    reentrancy_counts,
    semaphore_never_exceeds_its_permits,
    fencing_tokens_increase,
    multi_lock_is_all_or_none,
    read_write_exclusion,
    fair_lock_serves_in_arrival_order_and_survives_a_dead_waiter,
    replicated_lock_without_replicas_is_given_up,
    redlock_on_one_server_is_a_majority_of_one,
);

/// 16 tasks × 200 acquisitions: a non-atomic read-modify-write counter ends exact, fencing
/// tokens strictly increase in acquisition order, and no two critical sections overlap.
async fn mutual_exclusion_under_contention<L: Locks>(t: L, _time: Time) {
    const TASKS: usize = 16;
    const ROUNDS: usize = 200;
    let lock = t.fenced("contended");
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
                    .expect("acquired within the deadline");
                assert_eq!(
                    in_section.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                // Read-modify-write that is only correct under mutual exclusion.
                let v = match t.command(args(["GET", "counter"])).await {
                    Reply::Bulk(b) => String::from_utf8(b).unwrap().parse::<i64>().unwrap(),
                    _ => 0,
                };
                t.command(args([
                    "SET".to_string(),
                    "counter".into(),
                    (v + 1).to_string(),
                ]))
                .await;
                fences.lock().unwrap().push(l.fence);
                in_section.fetch_sub(1, Ordering::SeqCst);
                assert_eq!(lock.release(&l).await, Released::Released);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let counter = t.command(args(["GET", "counter"])).await;
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

async fn crashed_holder_frees_after_ttl<L: Locks>(t: L, time: Time) {
    let lock = t.simple("crashy");
    let ttl = Duration::from_millis(300);
    let first = lock.try_acquire(ttl).await.expect("free");
    // The holder "crashes": it never releases.
    assert!(lock.try_acquire(ttl).await.is_none());
    time.pass(Duration::from_millis(450)).await;
    let second = lock.try_acquire(ttl).await.expect("freed by its TTL");
    assert_ne!(first.token, second.token);
    // The crashed holder, coming back, cannot release the new holder's lock.
    assert_eq!(lock.release(&first).await, Released::NotOwner);
    assert_eq!(lock.holder().await, Some(second.token.clone()));
}

async fn wrong_token_is_refused_and_changes_nothing<L: Locks>(t: L, _time: Time) {
    let lock = t.simple("guarded");
    let mut lease = lock.try_acquire(Duration::from_secs(30)).await.unwrap();
    let mut forged = lease.clone();
    forged.token = "not-the-owner".into();
    assert_eq!(lock.release(&forged).await, Released::NotOwner);
    assert_eq!(
        lock.extend(&mut forged, Duration::from_secs(300)).await,
        Extended::NotOwner
    );
    assert_eq!(lock.holder().await, Some(lease.token.clone()));
    let ttl = lock.pttl().await.unwrap();
    assert!(
        ttl <= Duration::from_secs(30),
        "a refused extend changed the TTL: {ttl:?}"
    );
    assert_eq!(
        lock.extend(&mut lease, Duration::from_secs(60)).await,
        Extended::Extended
    );
    assert!(lock.pttl().await.unwrap() > Duration::from_secs(30));
}

async fn release_is_idempotent<L: Locks>(t: L, _time: Time) {
    let lock = t.simple("once");
    let lease = lock.try_acquire(Duration::from_secs(5)).await.unwrap();
    assert_eq!(lock.release(&lease).await, Released::Released);
    assert_eq!(lock.release(&lease).await, Released::AlreadyExpired);
    assert_eq!(lock.holder().await, None);
    // Nor can a released lease be extended: it is gone, not someone else's.
    let mut gone = lease.clone();
    assert_eq!(
        lock.extend(&mut gone, Duration::from_secs(5)).await,
        Extended::AlreadyExpired
    );
    assert_eq!(lock.holder().await, None);
}

/// Awaits `fut`, failing the test if it never resolves: a hang guard, far longer than the
/// outcome needs, never a timing assertion.
async fn guard<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("hang guard: {what} never happened"))
}

/// The watchdog keeps a lease through many TTLs, and reports each way of losing it with its
/// cause. Time passes on the server's clock: the virtual clock on the in-process legs (so
/// renewals really are what keeps the key), real time elsewhere.
async fn watchdog_keeps_and_reports_loss<L: Locks>(t: L, time: Time) {
    let ttl = Duration::from_secs(1);
    let lock = t.simple("watched");
    let mut watch = t.acquire_watched("watched", ttl).await.expect("free");
    let holder = lock.holder().await.expect("taken");
    // Three TTLs pass, half a TTL at a time. After each step a renewal must bring the key's
    // remaining time back above half a TTL (without renewals it would be gone by the second
    // step), and the key still holds our token.
    for step in 0..6 {
        time.pass(ttl / 2).await;
        guard("a renewal after the clock moved", async {
            while lock.pttl().await.is_none_or(|left| left <= ttl / 2) {
                assert_eq!(
                    lock.holder().await,
                    Some(holder.clone()),
                    "step {step}: the lease was lost"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert_eq!(lock.holder().await, Some(holder.clone()), "step {step}");
    }
    assert!(!watch.is_lost().await);

    // Deleted behind the holder's back: the next renewal finds the key gone.
    t.command(args(["DEL", "{watched}"])).await;
    let reason = guard("the loss of a deleted lease", watch.lost()).await;
    assert_eq!(reason, LostReason::Expired);
    assert!(watch.is_lost().await, "a lost lease reads as lost");

    // Taken by another token: the next renewal finds someone else's token, and leaves it.
    let taken = t.simple("taken");
    let mut watch = t.acquire_watched("taken", ttl).await.expect("free");
    t.command(args(["SET", "{taken}", "someone-else"])).await;
    let reason = guard("the loss of a taken lease", watch.lost()).await;
    assert_eq!(reason, LostReason::Taken);
    assert_eq!(taken.holder().await.as_deref(), Some("someone-else"));

    // Expired: the server's clock jumps past the TTL between two renewals (a pause longer
    // than the TTL). Only the virtual clock can make that happen on demand.
    if let Time::Virtual(clock) = &time {
        let expiring = t.simple("expiring");
        let mut watch = t.acquire_watched("expiring", ttl).await.expect("free");
        clock.advance(ttl * 2);
        assert_eq!(expiring.holder().await, None, "expired on the server");
        let reason = guard("the loss of an expired lease", watch.lost()).await;
        assert_eq!(reason, LostReason::Expired);
    }
}

async fn waiter_deadline_is_honoured<L: Locks>(t: L, _time: Time) {
    let lock = t.simple("busy");
    let _held = lock.try_acquire(Duration::from_secs(30)).await.unwrap();
    // The transport's clock has been running longer than the deadline when the wait starts,
    // so that a deadline counted from the transport's start, not the wait's, is noticed.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = std::time::Instant::now();
    let got = lock
        .acquire_wait(
            Duration::from_secs(1),
            Duration::from_millis(200),
            Backoff::default(),
        )
        .await;
    assert!(got.is_none(), "acquired a held lock");
    assert!(
        start.elapsed() >= Duration::from_millis(200),
        "gave up before its deadline"
    );
}

/// A backoff of an hour (base = max): polling alone could not acquire before the hang guard,
/// so a waiter that gets the lock sooner was woken by the unlock message.
const HOUR: Backoff = Backoff {
    base: Duration::from_secs(3600),
    max: Duration::from_secs(3600),
};

/// Starts `wait` on a task of its own and lets it subscribe and go to sleep: it must still be
/// waiting then.
async fn waiting<T: Send + 'static>(
    wait: impl std::future::Future<Output = T> + Send + 'static,
) -> tokio::task::JoinHandle<T> {
    let waiter = tokio::spawn(wait);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "the waiter did not wait");
    waiter
}

/// A waiter with a very long backoff is woken by the unlock PUBLISH: it holds the lock before
/// its first backoff tick could have fired (an ordering assertion: the holder releases, then
/// the waiter acquires, all while the backoff's minimum sleep has not elapsed).
async fn unlock_publish_wakes_a_waiter_before_its_backoff<L: Locks>(t: L, _time: Time) {
    let lock = t.simple("wake");
    let held = lock.try_acquire(Duration::from_secs(60)).await.unwrap();
    let waiter = {
        let lock = lock.clone();
        waiting(async move {
            lock.acquire_wait(Duration::from_secs(5), Duration::from_secs(7200), HOUR)
                .await
        })
        .await
    };
    assert_eq!(lock.release(&held).await, Released::Released);
    let got = guard("the unlock message waking the waiter", waiter)
        .await
        .unwrap();
    assert!(got.is_some());
}

/// The members of a simple lock's queue of waiters, in arrival order.
async fn queued<L: Locks>(t: &L, name: &str) -> Vec<Reply> {
    let key = format!("{{{name}}}:waiters");
    match t.command(args(["ZRANGE", key.as_str(), "0", "-1"])).await {
        Reply::Array(members) => members,
        other => panic!("ZRANGE of the queue: {other:?}"),
    }
}

/// A release wakes one waiter, the longest live one, not all of them: four waiters queued one
/// after the other (with an hour of backoff, so only a wake-up gets them the lock in time) are
/// served in arrival order, each woken by its predecessor's release; a broadcast would wake
/// all four to race, and serve them in arrival order once in 24 runs. A waiter that died in
/// the queue (queued by hand with a one-second lease, never renewed) is skipped once its lease
/// lapsed, instead of being woken in vain while the live ones sleep; and a waiter that gives
/// up at its deadline leaves the queue.
async fn a_release_wakes_the_longest_live_waiter_alone<L: Locks>(t: L, time: Time) {
    let lock = t.simple("herd");
    let held = lock
        .try_acquire(Duration::from_secs(60))
        .await
        .expect("free");
    // The dead waiter: queued as a waiter's attempt queues it, then silent.
    let dead = t
        .command(args([
            "EVAL",
            latchkey_client::scripts::SIMPLE_WAIT.body,
            "3",
            "{herd}",
            "{herd}:waiters",
            "{herd}:leases",
            "dead",
            "60000",
            "1000",
        ]))
        .await;
    assert!(matches!(dead, Reply::Int(n) if n > 0), "queued: {dead:?}");
    // A waiter that gives up leaves the queue.
    let quitter = lock
        .acquire_wait(
            Duration::from_secs(5),
            Duration::from_millis(100),
            Backoff::default(),
        )
        .await;
    assert!(quitter.is_none(), "acquired a held lock");
    assert_eq!(
        queued(&t, "herd").await.len(),
        1,
        "only the dead waiter stays"
    );
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..4 {
        let (lock, order) = (lock.clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let l = lock
                .acquire_wait(Duration::from_secs(5), Duration::from_secs(7200), HOUR)
                .await
                .expect("acquired before the deadline");
            order.lock().unwrap().push(i);
            assert_eq!(lock.release(&l).await, Released::Released);
        }));
        // Arrival order: this waiter is queued before the next one starts.
        guard("a waiter joining the queue", async {
            while queued(&t, "herd").await.len() < i + 2 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
    }
    // The dead waiter's lease lapses on the server's clock.
    time.pass(Duration::from_millis(1500)).await;
    assert_eq!(lock.release(&held).await, Released::Released);
    for w in waiters {
        guard("each waiter woken in turn", w).await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    assert!(queued(&t, "herd").await.is_empty(), "the queue is drained");
}

async fn reentrancy_counts<L: Locks>(t: L, _time: Time) {
    let ttl = Duration::from_secs(30);
    let a = t.reentrant("re");
    let b = t.reentrant("re");
    assert_eq!(a.try_acquire(ttl).await, None);
    assert_eq!(a.try_acquire(ttl).await, None);
    assert_eq!(a.hold_count().await, 2);
    assert!(b.try_acquire(ttl).await.is_some(), "another owner got in");
    assert_eq!(b.release(ttl).await, ReentrantRelease::NotOwner);
    assert_eq!(a.release(ttl).await, ReentrantRelease::StillHeld);
    assert!(b.try_acquire(ttl).await.is_some());
    assert_eq!(a.release(ttl).await, ReentrantRelease::Released);
    assert_eq!(b.try_acquire(ttl).await, None);
}

async fn semaphore_never_exceeds_its_permits<L: Locks>(t: L, _time: Time) {
    const PERMITS: u32 = 3;
    let sem = t.semaphore("pool", PERMITS);
    let inside = Arc::new(AtomicI64::new(0));
    let max_seen = Arc::new(AtomicI64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (sem, inside, max_seen) = (sem.clone(), inside.clone(), max_seen.clone());
        tasks.push(tokio::spawn(async move {
            let mut done = 0;
            while done < 20 {
                let Some(p) = sem.try_acquire(Duration::from_secs(10)).await else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                };
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_seen.fetch_max(now, Ordering::SeqCst);
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(sem.release(&p).await);
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

async fn fencing_tokens_increase<L: Locks>(t: L, time: Time) {
    let lock = t.fenced("fence");
    let a = lock.try_acquire(Duration::from_millis(200)).await.unwrap();
    assert!(lock.try_acquire(Duration::from_millis(200)).await.is_none());
    time.pass(Duration::from_millis(300)).await;
    // The first holder's lease expired; the next holder's token is larger, so storage can
    // reject the stale holder's late write.
    let b = lock.try_acquire(Duration::from_millis(200)).await.unwrap();
    assert!(b.fence > a.fence);
}

async fn multi_lock_is_all_or_none<L: Locks>(t: L, _time: Time) {
    let ttl = Duration::from_secs(30);
    let single = t.simple("acct:b");
    let b = single.try_acquire(ttl).await.unwrap();
    let both = t.multi(&["{acct:a}", "{acct:b}"]);
    assert!(both.try_acquire(ttl).await.is_none());
    // None means none: the free key was not taken either.
    let a_probe = t.simple("acct:a");
    assert_eq!(a_probe.holder().await, None);
    single.release(&b).await;
    let l = both.try_acquire(ttl).await.expect("both free now");
    assert_eq!(a_probe.holder().await, Some(l.token.clone()));
    assert_eq!(both.release(&l).await, 2);
}

async fn read_write_exclusion<L: Locks>(t: L, _time: Time) {
    let ttl = Duration::from_secs(30);
    let rw = t.rw("doc");
    let r1 = rw.try_read(ttl).await.expect("free");
    let r2 = rw.try_read(ttl).await.expect("readers share");
    assert!(
        rw.try_write(ttl).await.is_none(),
        "a writer entered with readers in"
    );
    assert!(rw.release(&r1).await);
    assert!(rw.try_write(ttl).await.is_none(), "one reader is still in");
    assert!(rw.release(&r2).await);
    let w = rw.try_write(ttl).await.expect("free again");
    assert!(
        rw.try_read(ttl).await.is_none(),
        "a reader entered with a writer in"
    );
    assert!(rw.try_write(ttl).await.is_none(), "two writers");
    assert!(rw.release(&w).await);
    assert!(!rw.release(&w).await);
    assert!(rw.try_read(ttl).await.is_some());
}

async fn fair_lock_serves_in_arrival_order_and_survives_a_dead_waiter<L: Locks>(t: L, time: Time) {
    // Queue deadlines are kept by the server's clock: a virtual one must move.
    let ticker = time.keep_moving();
    let heartbeat = Duration::from_millis(100);
    let lock = t.fair("fifo", heartbeat);
    let ttl = Duration::from_secs(30);
    let holder = lock
        .acquire_wait(ttl, Duration::from_secs(1))
        .await
        .unwrap();
    // A waiter that joins the queue and dies right away.
    assert!(lock.enqueue_once(ttl).await.is_some());
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    // The queue's members so far: the dead waiter's token.
    let Reply::Array(mut seen) = t.command(args(["LRANGE", "{fifo}:queue", "0", "-1"])).await
    else {
        panic!("LRANGE of the queue")
    };
    assert_eq!(seen.len(), 1, "the dead waiter is queued");
    for name in ["first", "second", "third"] {
        let (lock, order) = (lock.clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let l = lock
                .acquire_wait(ttl, Duration::from_secs(30))
                .await
                .expect("served");
            order.lock().unwrap().push(name);
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert_eq!(lock.release(&l).await, Released::Released);
        }));
        // Arrival order: each waiter is at the tail of the queue (a token not seen there
        // before) before the next one starts. (The dead waiter may leave the queue meanwhile.)
        guard("a waiter joining the queue", async {
            loop {
                let queue = t.command(args(["LRANGE", "{fifo}:queue", "0", "-1"])).await;
                let Reply::Array(queue) = queue else {
                    panic!("LRANGE: {queue:?}")
                };
                if let Some(last) = queue.last().filter(|l| !seen.contains(*l)) {
                    seen.push(last.clone());
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
    }
    assert_eq!(lock.release(&holder).await, Released::Released);
    for w in waiters {
        guard("the queue being served", w).await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec!["first", "second", "third"]);
    if let Some(t) = ticker {
        t.abort();
    }
}

async fn replicated_lock_without_replicas_is_given_up<L: Locks>(t: L, _time: Time) {
    let lock = t.replicated("replicated", 1, Duration::from_millis(50));
    let zero = t.replicated("replicated", 0, Duration::from_millis(50));
    match lock.try_acquire(Duration::from_secs(10)).await {
        ReplicatedAcquire::NotReplicated { acked } => assert_eq!(acked, 0),
        other => panic!("a master without replicas confirmed a lock: {other:?}"),
    }
    // It was released again: the lock is free.
    assert_eq!(t.simple("replicated").holder().await, None);
    // Asking for zero replicas confirms at once.
    assert!(matches!(
        zero.try_acquire(Duration::from_secs(10)).await,
        ReplicatedAcquire::Confirmed(_)
    ));
}

/// RedLock on the leg's one server (in wasm: a host whose quorum is its one backend): granted
/// by one of one, held under the lock's plain key (a simple lock of the same name sees the
/// holder), refused while held, extended, released once and only once.
async fn redlock_on_one_server_is_a_majority_of_one<L: Locks>(t: L, _time: Time) {
    let ttl = Duration::from_secs(30);
    let red = t.red("red", Duration::from_millis(500));
    let simple = t.simple("red");
    let l = red.try_acquire(ttl).await.expect("free");
    assert_eq!((l.granted, l.key.as_slice()), (1, &b"{red}"[..]));
    assert!(l.validity > Duration::ZERO && l.validity < ttl, "{l:?}");
    assert_eq!(simple.holder().await, Some(l.token.clone()));
    assert!(red.try_acquire(ttl).await.is_none(), "held twice");
    let longer = red
        .extend(&l, ttl * 2)
        .await
        .expect("extended on the one server");
    assert_eq!((longer.granted, &longer.token), (1, &l.token));
    assert!(longer.validity > ttl, "{longer:?}");
    assert!(simple.pttl().await.expect("held") > ttl);
    assert_eq!(red.release(&longer).await, 1);
    assert_eq!(red.release(&longer).await, 0);
    assert!(red.extend(&longer, ttl).await.is_none(), "released");
    assert_eq!(simple.holder().await, None);
}

/// Dropping one lease's watch stops that lease's renewals while the same watchdog keeps
/// renewing the others: after three TTLs of the server's (virtual) clock, the kept lease is
/// still ours and the dropped one has expired. (Native only: the wasm legs hand out a watch
/// and its watchdog together.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_watch_stops_renewing_while_the_watchdog_goes_on() {
    let (_keep, t, time) = in_process().await;
    let Time::Virtual(clock) = &time else {
        unreachable!("the in-process leg runs on a virtual clock")
    };
    let ttl = Duration::from_secs(1);
    let kept = SimpleLock::new(t.0.clone(), "kept");
    let dropped = SimpleLock::new(t.0.clone(), "dropped");
    let kept_lease = kept.try_acquire(ttl).await.unwrap().expect("free");
    let dropped_lease = dropped.try_acquire(ttl).await.unwrap().expect("free");
    let dog = Watchdog::spawn(t.0.clone(), ttl);
    let kept_watch = dog.watch(&kept_lease);
    drop(dog.watch(&dropped_lease));
    // Half a TTL at a time, each step waiting for the kept lease's renewal (which brings its
    // remaining time back above half a TTL): the watchdog is alive and renewing throughout.
    for step in 0..6 {
        clock.advance(ttl / 2);
        guard("a renewal of the kept lease", async {
            while kept
                .pttl()
                .await
                .unwrap()
                .is_none_or(|left| left <= ttl / 2)
            {
                assert!(
                    kept.holder().await.unwrap().is_some(),
                    "step {step}: kept lost"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
    }
    assert_eq!(
        kept.holder().await.unwrap().as_deref(),
        Some(kept_lease.token.as_str())
    );
    assert_eq!(
        dropped.holder().await.unwrap(),
        None,
        "the dropped watch's lease was renewed"
    );
    drop(kept_watch);
}

/// A reentrant hold is renewed by its owner only, and only while it holds; another handle
/// made from the owner's id ([`ReentrantLock::owner`], how a hold crosses into a wasm call)
/// is the same owner. (Native only: the wasm legs' interface has no reentrant renewal.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentrant_hold_is_renewed_by_its_owner_only() {
    use latchkey_client::locks::ReentrantLock;
    let (_keep, t, time) = in_process().await;
    let ttl = Duration::from_secs(1);
    let a = ReentrantLock::new(t.0.clone(), "re-renew");
    let b = ReentrantLock::new(t.0.clone(), "re-renew");
    assert_ne!(a.owner(), b.owner());
    assert!(
        !a.renew(ttl).await.unwrap(),
        "renewed a hold it does not have"
    );
    assert_eq!(a.try_acquire(ttl).await.unwrap(), None);
    time.pass(Duration::from_millis(800)).await;
    assert!(
        a.renew(ttl).await.unwrap(),
        "the owner's renewal was refused"
    );
    assert!(
        !b.renew(ttl).await.unwrap(),
        "another owner renewed the hold"
    );
    time.pass(Duration::from_millis(800)).await;
    // 1.6 s after taking a 1 s hold: only the renewal keeps it.
    assert!(
        b.try_acquire(ttl).await.unwrap().is_some(),
        "the renewal did not extend it"
    );
    let same = ReentrantLock::with_owner(t.0.clone(), "re-renew", a.owner().to_string());
    assert_eq!(same.hold_count().await.unwrap(), 1);
    assert_eq!(same.release(ttl).await.unwrap(), ReentrantRelease::Released);
    assert_eq!(b.try_acquire(ttl).await.unwrap(), None);
    time.pass(Duration::from_secs(2)).await;
    assert!(!b.renew(ttl).await.unwrap(), "renewed an expired hold");
}

/// A fenced lock's waiter with an hour-long backoff is woken by the holder's release (the
/// unlock message on the lock's channel), and its fence is the next one. (Native only.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_waiter_is_woken_by_the_release() {
    use latchkey_client::locks::FencedLock;
    let (_keep, t, _time) = in_process().await;
    let lock = FencedLock::new(t.0.clone(), "fenced-wake");
    // Held for an hour: a waiter also wakes when the holder's TTL runs out, which must not
    // come before the hang guard does.
    let held = lock
        .try_acquire(Duration::from_secs(3600))
        .await
        .unwrap()
        .expect("free");
    let waiter = {
        let lock = lock.clone();
        waiting(async move {
            lock.acquire_wait(Duration::from_secs(5), Duration::from_secs(7200), HOUR)
                .await
        })
        .await
    };
    assert_eq!(lock.release(&held).await.unwrap(), Released::Released);
    let got = guard("the unlock message waking the fenced waiter", waiter)
        .await
        .unwrap()
        .unwrap()
        .expect("the waiter got the lock");
    assert_eq!(got.fence, held.fence + 1);
}

/// A lock's key is `{name}`, and the counters it keeps are the ones it was given, shared with
/// whoever else holds them. (Native only: the wasm legs report metrics through the host.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simple_lock_names_its_key_and_counts_into_shared_metrics() {
    let (_keep, t, _time) = in_process().await;
    let shared = Arc::new(latchkey_client::metrics::Metrics::default());
    let lock = SimpleLock::new(t.0.clone(), "invoice-7").with_metrics(shared.clone());
    let other = SimpleLock::new(t.0.clone(), "invoice-8").with_metrics(shared.clone());
    assert_eq!(lock.key(), b"{invoice-7}");
    assert!(Arc::ptr_eq(lock.metrics(), &shared));
    let ttl = Duration::from_secs(30);
    let wait = |l: &SimpleLock<LocalTransport>| {
        let l = l.clone();
        async move {
            l.acquire_wait(ttl, Duration::from_secs(5), Backoff::default())
                .await
                .unwrap()
                .expect("free")
        }
    };
    let a = wait(&lock).await;
    let b = wait(&other).await;
    assert_eq!(lock.release(&a).await.unwrap(), Released::Released);
    assert_eq!(other.release(&b).await.unwrap(), Released::Released);
    let counted = lock.metrics().snapshot();
    assert_eq!((counted.acquisitions, counted.releases), (2, 2));
}

/// A fenced and a fair waiter give up at their deadline, counted from the start of their wait
/// (the transport's clock has run longer than the deadline by then), not before it. (Native
/// only: the wasm legs' fenced and fair waits are the same code, run by the guest.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fenced_and_fair_waiters_keep_their_deadline() {
    use latchkey_client::locks::{FairLock, FencedLock};
    let (_keep, t, _time) = in_process().await;
    let fenced = FencedLock::new(t.0.clone(), "fenced-deadline");
    let _f = fenced
        .try_acquire(Duration::from_secs(30))
        .await
        .unwrap()
        .expect("free");
    let fair = FairLock::new(t.0.clone(), "fair-deadline", Duration::from_millis(50));
    assert!(fair
        .acquire_wait(Duration::from_secs(30), Duration::from_secs(1))
        .await
        .unwrap()
        .is_some());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let deadline = Duration::from_millis(200);
    let start = std::time::Instant::now();
    let got = fenced
        .acquire_wait(Duration::from_secs(1), deadline, Backoff::default())
        .await
        .unwrap();
    assert!(got.is_none(), "acquired a held fenced lock");
    assert!(
        start.elapsed() >= deadline,
        "the fenced waiter gave up early"
    );
    let start = std::time::Instant::now();
    let other = FairLock::new(t.0.clone(), "fair-deadline", Duration::from_millis(50));
    let got = other
        .acquire_wait(Duration::from_secs(1), deadline)
        .await
        .unwrap();
    assert!(got.is_none(), "acquired a held fair lock");
    assert!(start.elapsed() >= deadline, "the fair waiter gave up early");
}
