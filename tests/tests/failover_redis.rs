//! The lock-loss scenarios, written once over [`ReplicatedPair`] and run on a latchkey pair
//! (faults driven with `LATCHKEY.FAILOVER`) and on a real `redis-server` pair (faults from the
//! fault proxy between the replica and its master). Both must show the same outcomes.
//!
//! - (a) a lock taken on the master is lost when the master crashes before the write
//!   replicates and the replica is promoted: two holders;
//! - (b) a lock confirmed with `WAIT` is never held twice;
//! - (c) across that failover the `INCR` fencing token goes backwards, so a token-checked
//!   resource lets the stale holder through, while a lease-checked write stops it;
//! - (e) a holder that pauses past its TTL and then writes is caught by fencing;
//! - and the lag control itself: a lagging replica applies a write late, and `WAIT` says so
//!   until it has.

use std::time::Duration;

use latchkey_client::scripts::FENCED_ACQUIRE;
use latchkey_tests::fencing::{TokenCheckedStore, LEASE_CHECKED_WRITE};
use latchkey_tests::pair::until;
use latchkey_tests::raw::show;
use latchkey_tests::{LatchkeyPair, RawConn, RedisPair, ReplicatedPair};

const OK: &[u8] = b"+OK\r\n";
const NIL: &[u8] = b"$-1\r\n";

fn connect(addr: std::net::SocketAddr) -> RawConn {
    RawConn::connect(addr).expect("connect")
}

/// Parses an integer reply (`:N\r\n`).
fn int(reply: Vec<u8>) -> i64 {
    std::str::from_utf8(&reply)
        .ok()
        .and_then(|s| s.strip_prefix(':'))
        .and_then(|s| s.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("expected an integer, got {}", show(&reply)))
}

/// The lock client's own fenced acquisition: `SET lock owner NX PX ttl`, then `INCR fence`,
/// in one script. Returns the fencing token, or -1 when the lock is held.
fn fenced_acquire(c: &mut RawConn, owner: &str, ttl_ms: u64) -> i64 {
    int(c.cmd(&[
        "EVAL",
        FENCED_ACQUIRE.body,
        "2",
        "lock",
        "fence",
        owner,
        &ttl_ms.to_string(),
    ]))
}

/// A write to `resource` that passes only while `lock` holds `owner`.
fn lease_checked_write(c: &mut RawConn, owner: &str, value: &str) -> bool {
    int(c.cmd(&[
        "EVAL",
        LEASE_CHECKED_WRITE,
        "2",
        "lock",
        "resource",
        owner,
        value,
    ])) == 1
}

/// (a) The stream is held, a client locks on the master, the master crashes, the replica is
/// promoted and a second client takes the same lock.
fn unreplicated_lock_is_lost(p: &mut impl ReplicatedPair) {
    p.pause();
    let mut first = connect(p.master());
    assert_eq!(
        first.cmd(&["SET", "lock", "client-1", "NX", "PX", "30000"]),
        OK
    );
    p.crash_master();
    p.promote();
    let mut second = connect(p.replica());
    assert_eq!(
        second.cmd(&["SET", "lock", "client-2", "NX", "PX", "30000"]),
        OK,
        "{}: the promoted replica should not know about client-1's lock",
        p.name()
    );
}

/// (b) Unconfirmed (`WAIT` answers 0 while partitioned) the first client gives the lock up;
/// confirmed, the promoted replica refuses the second client.
fn wait_confirmed_lock_is_never_held_twice<P: ReplicatedPair>(start: impl Fn() -> P) {
    let mut p = start();
    p.pause();
    let mut first = connect(p.master());
    assert_eq!(
        first.cmd(&["SET", "lock", "client-1", "NX", "PX", "30000"]),
        OK
    );
    assert_eq!(first.cmd(&["WAIT", "1", "100"]), b":0\r\n", "{}", p.name());
    first.cmd(&["DEL", "lock"]); // not confirmed: not held
    p.crash_master();
    p.promote();
    let mut second = connect(p.replica());
    assert_eq!(
        second.cmd(&["SET", "lock", "client-2", "NX", "PX", "30000"]),
        OK
    );

    let mut p = start();
    let mut first = connect(p.master());
    assert_eq!(
        first.cmd(&["SET", "lock", "client-1", "NX", "PX", "30000"]),
        OK
    );
    assert_eq!(first.cmd(&["WAIT", "1", "5000"]), b":1\r\n", "{}", p.name());
    p.crash_master();
    p.promote();
    let mut second = connect(p.replica());
    assert_eq!(
        second.cmd(&["SET", "lock", "client-2", "NX", "PX", "30000"]),
        NIL,
        "{}: a WAIT-confirmed lock was lost in the failover",
        p.name()
    );
}

/// (c) Scenario (a) with fencing. The counter stood at 5 on both nodes; client-1 takes the
/// lock with token 6, which never replicates; after the failover client-2 gets 6 again.
fn fencing_across_a_failover(p: &mut impl ReplicatedPair) {
    let mut setup = connect(p.master());
    assert_eq!(setup.cmd(&["SET", "fence", "5"]), OK);
    assert_eq!(setup.cmd(&["WAIT", "1", "5000"]), b":1\r\n");

    p.pause();
    let mut first = connect(p.master());
    let token_1 = fenced_acquire(&mut first, "client-1", 30_000);
    assert_eq!(token_1, 6);
    p.crash_master();
    p.promote();
    let mut second = connect(p.replica());
    let token_2 = fenced_acquire(&mut second, "client-2", 30_000);
    assert_eq!(
        token_2,
        6,
        "{}: the fencing counter should have gone back and issued 6 again",
        p.name()
    );

    // Token-checked resource: the stale holder (now talking to the new primary, as clients
    // do after a failover) writes first with its 6 and passes; the rightful holder's 6 is
    // refused. Fencing by token did not stop the stale holder: it stopped the wrong one.
    let mut store = TokenCheckedStore::default();
    assert!(store.write("client-1", token_1));
    assert!(!store.write("client-2", token_2));
    assert_eq!(store.writes, ["client-1"]);

    // Lease-checked resource: the lock on the current primary names client-2, so client-1's
    // write is refused and client-2's passes.
    let mut stale = connect(p.replica());
    assert!(!lease_checked_write(&mut stale, "client-1", "stale"));
    assert!(lease_checked_write(&mut second, "client-2", "fresh"));
    assert_eq!(second.cmd(&["GET", "resource"]), b"$5\r\nfresh\r\n");
}

/// (e) A holder stops (a long GC pause, a stopped VM) past its TTL, a second client takes
/// the lock, then the first wakes and writes.
fn paused_holder_is_caught_by_fencing(p: &mut impl ReplicatedPair) {
    let mut first = connect(p.master());
    let mut second = connect(p.master());
    let t1 = fenced_acquire(&mut first, "c1", 200);
    assert!(t1 > 0);
    // c1 is paused; its lease runs out while it sleeps.
    until("c1's lease to expire", Duration::from_secs(10), || {
        int(second.cmd(&["EXISTS", "lock"])) == 0
    });
    let t2 = fenced_acquire(&mut second, "c2", 30_000);
    assert!(t2 > t1, "{}: tokens {t1} then {t2}", p.name());

    // The new holder writes, then c1 wakes and writes: both resources refuse c1.
    let mut store = TokenCheckedStore::default();
    assert!(store.write("c2", t2));
    assert!(lease_checked_write(&mut second, "c2", "from-c2"));
    assert!(
        !store.write("c1", t1),
        "the paused holder's late write got through"
    );
    assert!(!lease_checked_write(&mut first, "c1", "from-c1"));
    assert_eq!(store.writes, ["c2"]);
    assert_eq!(first.cmd(&["GET", "resource"]), b"$7\r\nfrom-c2\r\n");

    // Had c1 woken before c2's first write reached the resource, its token would still have
    // been the highest seen: a token check cannot catch that write; the lease check does.
    let mut fresh_store = TokenCheckedStore::default();
    assert!(fresh_store.write("c1", t1), "nothing newer seen yet");
    assert!(!lease_checked_write(&mut first, "c1", "from-c1"));
}

/// Lag: the replica gets the stream three seconds late (far longer than the steps before the
/// first read, so a loaded machine does not get there first); meanwhile it does not have the
/// write and `WAIT` times out; after it, both change.
fn lagging_replica_applies_late(p: &mut impl ReplicatedPair) {
    p.set_lag(Duration::from_secs(3));
    let mut master = connect(p.master());
    assert_eq!(master.cmd(&["SET", "late", "v"]), OK);
    assert_eq!(master.cmd(&["WAIT", "1", "50"]), b":0\r\n", "{}", p.name());
    assert_eq!(
        connect(p.replica()).cmd(&["GET", "late"]),
        NIL,
        "{}: applied before its lag",
        p.name()
    );
    assert_eq!(
        master.cmd(&["WAIT", "1", "30000"]),
        b":1\r\n",
        "{}",
        p.name()
    );
    assert_eq!(connect(p.replica()).cmd(&["GET", "late"]), b"$1\r\nv\r\n");
    p.set_lag(Duration::ZERO);
}

#[test]
fn latchkey_lagging_replica_applies_late() {
    lagging_replica_applies_late(&mut LatchkeyPair::start());
}

#[test]
fn redis_lagging_replica_applies_late() {
    lagging_replica_applies_late(&mut RedisPair::start());
}

#[test]
fn latchkey_a_failover_loses_an_unreplicated_lock() {
    unreplicated_lock_is_lost(&mut LatchkeyPair::start());
}

#[test]
fn redis_a_failover_loses_an_unreplicated_lock() {
    unreplicated_lock_is_lost(&mut RedisPair::start());
}

#[test]
fn latchkey_b_wait_confirmed_locks_are_never_held_twice() {
    wait_confirmed_lock_is_never_held_twice(LatchkeyPair::start);
}

#[test]
fn redis_b_wait_confirmed_locks_are_never_held_twice() {
    wait_confirmed_lock_is_never_held_twice(RedisPair::start);
}

#[test]
fn latchkey_c_fencing_across_a_failover() {
    fencing_across_a_failover(&mut LatchkeyPair::start());
}

#[test]
fn redis_c_fencing_across_a_failover() {
    fencing_across_a_failover(&mut RedisPair::start());
}

#[test]
fn latchkey_e_a_paused_holder_is_caught_by_fencing() {
    paused_holder_is_caught_by_fencing(&mut LatchkeyPair::start());
}

#[test]
fn redis_e_a_paused_holder_is_caught_by_fencing() {
    paused_holder_is_caught_by_fencing(&mut RedisPair::start());
}
