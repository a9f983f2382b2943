//! The redis-rs transport against a real Redis Cluster and through Redis Sentinel: the locks'
//! hash-tagged keys keep every multi-key script in one slot, and waiters are woken across
//! nodes (a Cluster broadcasts PUBLISH).

use std::time::Duration;

use latchkey_client::locks::{
    Backoff, FencedLock, MultiLock, ReentrantLock, Released, Semaphore, SimpleLock,
};
use latchkey_client::native::RedisTransport;
use latchkey_tests::{RawConn, RedisCluster, RedisProcess, RedisSentinel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_on_a_real_cluster() {
    let cluster = RedisCluster::spawn(3);
    let urls = cluster.urls();
    let t = RedisTransport::connect_cluster(&urls).await.unwrap();
    let ttl = Duration::from_secs(30);

    // Many lock names, so that they spread over the three masters' slots.
    for i in 0..20 {
        let lock = SimpleLock::new(t.clone(), &format!("job-{i}"));
        let l = lock.try_acquire(ttl).await.unwrap().expect("free");
        assert!(lock.try_acquire(ttl).await.unwrap().is_none());
        assert_eq!(lock.release(&l).await.unwrap(), Released::Released);
    }
    // Multi-key scripts: lock key + counter, lock key + unlock channel, all in one slot.
    let fenced = FencedLock::new(t.clone(), "ledger");
    let a = fenced.try_acquire(ttl).await.unwrap().unwrap();
    fenced.release(&a).await.unwrap();
    let b = fenced.try_acquire(ttl).await.unwrap().unwrap();
    assert!(b.fence > a.fence);
    let re = ReentrantLock::new(t.clone(), "account");
    assert_eq!(re.try_acquire(ttl).await.unwrap(), None);
    assert_eq!(re.try_acquire(ttl).await.unwrap(), None);
    assert_eq!(re.hold_count().await.unwrap(), 2);
    let sem = Semaphore::new(t.clone(), "pool", 2);
    let p1 = sem.try_acquire(ttl).await.unwrap().unwrap();
    let _p2 = sem.try_acquire(ttl).await.unwrap().unwrap();
    assert!(sem.try_acquire(ttl).await.unwrap().is_none());
    assert!(sem.release(&p1).await.unwrap());
    let multi = MultiLock::new(t.clone(), &["{bank}:alice", "{bank}:bob"]);
    let m = multi.try_acquire(ttl).await.unwrap().unwrap();
    assert_eq!(multi.release(&m).await.unwrap(), 2);

    // A waiter subscribed through one node is woken by an unlock published on another.
    let lock = SimpleLock::new(t.clone(), "handoff");
    let held = lock.try_acquire(ttl).await.unwrap().unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            // An hour between polls: only the unlock message can wake it before the guard.
            let slow = Backoff {
                base: Duration::from_secs(3600),
                max: Duration::from_secs(3600),
            };
            lock.acquire_wait(ttl, Duration::from_secs(7200), slow)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    lock.release(&held).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(60), waiter)
        .await
        .expect("hang guard: the unlock message never woke the waiter")
        .unwrap()
        .unwrap();
    assert!(got.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_through_sentinel() {
    let master = RedisProcess::spawn(&[]);
    let sentinel = RedisSentinel::spawn(master.addr(), "mymaster");
    let t = RedisTransport::connect_sentinel(&[sentinel.url()], "mymaster")
        .await
        .unwrap();
    let lock = SimpleLock::new(t, "via-sentinel");
    let l = lock
        .try_acquire(Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    // The lock lives on the master Sentinel pointed at.
    let mut m = RawConn::connect(master.addr()).unwrap();
    assert_eq!(
        m.cmd(&["GET", "{via-sentinel}"]),
        format!("${}\r\n{}\r\n", l.token.len(), l.token).into_bytes()
    );
    assert_eq!(lock.release(&l).await.unwrap(), Released::Released);
}
