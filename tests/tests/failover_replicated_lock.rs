//! The replicated lock (`latchkey_client::locks::ReplicatedLock`: `SET NX PX`, then `WAIT`)
//! through a real failover, on a latchkey pair and on a real `redis-server` pair behind the
//! fault proxy. What it promises, and what it does not:
//!
//! - **promised**: an acquisition confirmed by `WAIT` is on the replica, so it survives the
//!   master's crash and the replica's promotion: the promoted replica refuses a second holder;
//! - **promised**: when fewer replicas acknowledge than were asked for, the caller is told
//!   (`NotReplicated`, with the count) and the lock is released again, never silently kept;
//! - **not promised**: `WAIT` makes the one write it follows durable on the replicas, nothing
//!   more; Redis stays asynchronous. A later write of the same holder (here: extending the
//!   lease) that was not confirmed is lost in a failover, so the promoted replica expires the
//!   lock at the old deadline while the holder believes it holds it far longer.

use std::time::Duration;

use latchkey_client::locks::{Extended, ReplicatedAcquire, ReplicatedLock, SimpleLock};
use latchkey_client::native::RedisTransport;
use latchkey_tests::{LatchkeyPair, RedisPair, ReplicatedPair};

/// A runtime for the lock client, which is async, while the pairs are driven blocking.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

async fn transport(addr: std::net::SocketAddr) -> RedisTransport {
    RedisTransport::connect(&format!("redis://{addr}"))
        .await
        .expect("connect")
}

/// Confirmed by `WAIT`, the lock survives the failover: the promoted replica has the holder's
/// token and refuses a second client.
fn a_confirmed_lock_survives_promotion(mut p: impl ReplicatedPair) {
    let rt = runtime();
    let master = rt.block_on(transport(p.master()));
    let lock = ReplicatedLock::new(master, "lock", 1, Duration::from_secs(10));
    let lease = match rt
        .block_on(lock.try_acquire(Duration::from_secs(60)))
        .unwrap()
    {
        ReplicatedAcquire::Confirmed(lease) => lease,
        other => panic!("{}: a healthy pair did not confirm: {other:?}", p.name()),
    };
    p.crash_master();
    p.promote();
    let promoted = rt.block_on(transport(p.replica()));
    let on_promoted = SimpleLock::new(promoted.clone(), "lock");
    assert_eq!(
        rt.block_on(on_promoted.holder()).unwrap(),
        Some(lease.token.clone()),
        "{}: the confirmed lock is not on the promoted replica",
        p.name()
    );
    let second = ReplicatedLock::new(promoted, "lock", 0, Duration::from_secs(1));
    assert_eq!(
        rt.block_on(second.try_acquire(Duration::from_secs(60)))
            .unwrap(),
        ReplicatedAcquire::Held,
        "{}: a second client took a confirmed lock after the failover",
        p.name()
    );
}

/// Fewer acknowledgements than asked for are reported with their count, and the lock is
/// released on the master (a second client can take it at once): partitioned, none of one;
/// healthy, one of the two asked for.
fn too_few_acknowledgements_are_reported_and_released(p: impl ReplicatedPair) {
    let rt = runtime();
    let master = rt.block_on(transport(p.master()));
    let probe = SimpleLock::new(master.clone(), "lock");

    let two = ReplicatedLock::new(master.clone(), "lock", 2, Duration::from_millis(200));
    assert_eq!(
        rt.block_on(two.try_acquire(Duration::from_secs(60)))
            .unwrap(),
        ReplicatedAcquire::NotReplicated { acked: 1 },
        "{}: one replica cannot confirm two",
        p.name()
    );
    assert_eq!(rt.block_on(probe.holder()).unwrap(), None, "released");

    p.pause();
    let one = ReplicatedLock::new(master, "lock", 1, Duration::from_millis(200));
    assert_eq!(
        rt.block_on(one.try_acquire(Duration::from_secs(60)))
            .unwrap(),
        ReplicatedAcquire::NotReplicated { acked: 0 },
        "{}: a partitioned replica cannot acknowledge",
        p.name()
    );
    assert_eq!(rt.block_on(probe.holder()).unwrap(), None, "released");
    p.resume();
}

/// What `WAIT` does not give: the acquisition was confirmed, the extension that followed was
/// not (the stream was partitioned meanwhile), and the failover loses it. The holder was told
/// its lease runs 10 minutes; the promoted replica still has the 60-second deadline.
fn an_unconfirmed_extension_is_lost_in_a_failover(mut p: impl ReplicatedPair) {
    let rt = runtime();
    let master = rt.block_on(transport(p.master()));
    let lock = ReplicatedLock::new(master.clone(), "lock", 1, Duration::from_secs(10));
    let ttl = Duration::from_secs(60);
    let mut lease = match rt.block_on(lock.try_acquire(ttl)).unwrap() {
        ReplicatedAcquire::Confirmed(lease) => lease,
        other => panic!("{}: a healthy pair did not confirm: {other:?}", p.name()),
    };
    p.pause();
    let simple = SimpleLock::new(master, "lock");
    let longer = Duration::from_secs(600);
    assert_eq!(
        rt.block_on(simple.extend(&mut lease, longer)).unwrap(),
        Extended::Extended,
        "the master extends it"
    );
    assert!(rt.block_on(simple.pttl()).unwrap().expect("held") > ttl);
    p.crash_master();
    p.promote();
    let promoted = SimpleLock::new(rt.block_on(transport(p.replica())), "lock");
    assert_eq!(
        rt.block_on(promoted.holder()).unwrap(),
        Some(lease.token.clone()),
        "{}: the confirmed acquisition survived",
        p.name()
    );
    let left = rt.block_on(promoted.pttl()).unwrap().expect("held");
    assert!(
        left <= ttl,
        "{}: the unconfirmed extension reached the promoted replica ({left:?} left): \
         this scenario no longer shows what WAIT cannot do",
        p.name()
    );
}

#[test]
fn latchkey_a_confirmed_lock_survives_promotion() {
    a_confirmed_lock_survives_promotion(LatchkeyPair::start());
}

#[test]
fn redis_a_confirmed_lock_survives_promotion() {
    a_confirmed_lock_survives_promotion(RedisPair::start());
}

#[test]
fn latchkey_too_few_acknowledgements_are_reported_and_released() {
    too_few_acknowledgements_are_reported_and_released(LatchkeyPair::start());
}

#[test]
fn redis_too_few_acknowledgements_are_reported_and_released() {
    too_few_acknowledgements_are_reported_and_released(RedisPair::start());
}

#[test]
fn latchkey_an_unconfirmed_extension_is_lost_in_a_failover() {
    an_unconfirmed_extension_is_lost_in_a_failover(LatchkeyPair::start());
}

#[test]
fn redis_an_unconfirmed_extension_is_lost_in_a_failover() {
    an_unconfirmed_extension_is_lost_in_a_failover(RedisPair::start());
}
