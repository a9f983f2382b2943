//! The lease keeper: it keeps a busy tenant's lock past its TTL, and interrupts a tenant whose
//! lease was lost.

mod common;

use std::time::Duration;

use latchkey_plugin::{Backend, Host, Instance, Limits, Released};
use latchkey_server::{Frame, Server};
use wasmtime::component::ResourceAny;

/// `watched-lock` calls, one per `run`, so that the test can act between them.
async fn watched(inst: &mut Instance, name: &str) -> ResourceAny {
    let name = name.to_string();
    inst.run(move |(store, _, l)| {
        Box::pin(async move {
            let w = l.unwrap().latchkey_locks_watchdog().watched_lock();
            w.call_constructor(&mut *store, &name).await
        })
    })
    .await
    .unwrap()
}

async fn acquire(inst: &mut Instance, lock: ResourceAny, ttl_ms: u64) -> bool {
    inst.run(move |(store, _, l)| {
        Box::pin(async move {
            let w = l.unwrap().latchkey_locks_watchdog().watched_lock();
            w.call_acquire(&mut *store, lock, ttl_ms).await
        })
    })
    .await
    .unwrap()
    .unwrap()
}

async fn held(inst: &mut Instance, lock: ResourceAny) -> bool {
    inst.run(move |(store, _, l)| {
        Box::pin(async move {
            let w = l.unwrap().latchkey_locks_watchdog().watched_lock();
            w.call_held(&mut *store, lock).await
        })
    })
    .await
    .unwrap()
}

async fn release(
    inst: &mut Instance,
    lock: ResourceAny,
) -> Result<Result<Released, String>, latchkey_plugin::Trapped> {
    inst.run(move |(store, _, l)| {
        Box::pin(async move {
            let w = l.unwrap().latchkey_locks_watchdog().watched_lock();
            w.call_release(&mut *store, lock).await
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keeper_keeps_a_watched_lock_past_its_ttl_until_released() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let host = common::host(<dyn Backend>::local(&server));
    let plugin = common::lock_client(&host);
    let mut inst = host.tenant("k").instantiate(&plugin).await.unwrap();
    let lock = watched(&mut inst, "job").await;
    assert!(acquire(&mut inst, lock, 300).await);
    assert!(!acquire(&mut inst, lock, 300).await, "already held");
    assert_eq!(inst.kept_leases(), 1);
    // Three TTLs pass while the tenant does nothing: the host renews.
    tokio::time::sleep(Duration::from_millis(900)).await;
    let mut view = server.client();
    assert!(matches!(view.cmd(["PTTL", "{k:job}"]).await, Frame::Integer(ms) if ms > 0));
    assert!(held(&mut inst, lock).await);
    assert_eq!(
        release(&mut inst, lock).await.unwrap().unwrap(),
        Released::Released
    );
    assert!(!held(&mut inst, lock).await);
    assert_eq!(inst.kept_leases(), 0);
    assert_eq!(view.cmd(["EXISTS", "{k:job}"]).await, Frame::Integer(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_interrupts_the_tenant() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let host = common::host(<dyn Backend>::local(&server));
    let plugin = common::lock_client(&host);
    let tenant = host.tenant("k");
    let mut inst = tenant.instantiate(&plugin).await.unwrap();
    let lock = watched(&mut inst, "job").await;
    assert!(acquire(&mut inst, lock, 150).await);
    // Someone else takes the lock (an operator, a failover that lost it...).
    let mut view = server.client();
    assert_eq!(view.cmd(["SET", "{k:job}", "intruder"]).await, Frame::ok());
    // The next renewal (ttl/3) finds it: wait until the tenant can see the loss.
    let mut lost = false;
    for _ in 0..100 {
        if !held(&mut inst, lock).await {
            lost = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(lost, "the keeper never noticed");
    // Any other host call now traps, and the instance is gone for good.
    let err = release(&mut inst, lock).await.unwrap_err();
    assert!(
        err.0.contains("lost (another holder took the lock)"),
        "{err}"
    );
    assert!(inst
        .try_lock("other", Duration::from_secs(1))
        .await
        .is_err());
    assert_eq!(
        view.cmd(["GET", "{k:job}"]).await,
        Frame::bulk("intruder"),
        "not ours to delete"
    );
    // The tenant starts afresh.
    let mut fresh = tenant.instantiate(&plugin).await.unwrap();
    assert!(fresh
        .try_lock("other", Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap()
        .is_some());
}

/// A tenant computing inside its critical section (no host calls) keeps its lock past the TTL,
/// and is stopped at once, not at its CPU budget, when the lease is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_tenant_keeps_its_lock_and_is_stopped_when_it_loses_it() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let limits = Limits {
        cpu_budget: Duration::from_secs(20),
        ..Limits::default()
    };
    let host = Host::new(<dyn Backend>::local(&server), common::config(limits)).unwrap();
    let rogue = common::rogue(&host);
    let mut busy = host.tenant("b").instantiate(&rogue).await.unwrap();
    let run = tokio::spawn(async move {
        busy.call::<(String, u64), ()>("hold-and-spin", ("{crit}".into(), 200))
            .await
    });
    let mut view = server.client();
    // Wait until it holds the lock, then let three TTLs pass.
    while view.cmd(["EXISTS", "{b:crit}"]).await != Frame::Integer(1) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        view.cmd(["GET", "{b:crit}"]).await,
        Frame::bulk("rogue-token")
    );
    assert!(!run.is_finished());
    // The lock is lost: the spinning tenant is interrupted at its next epoch tick.
    assert_eq!(view.cmd(["DEL", "{b:crit}"]).await, Frame::Integer(1));
    let err = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("interrupted long before its 20 s CPU budget")
        .unwrap()
        .unwrap_err();
    assert!(
        err.0.contains("lost (the lock expired or was deleted)"),
        "{err}"
    );
}

/// An instance that ends while the host keeps its lease (the embedder closes or drops it, the
/// tenant never released) does not leave the lock to its TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_closed_or_dropped_holding_a_kept_lease_frees_the_lock() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let host = common::host(<dyn Backend>::local(&server));
    let plugin = common::lock_client(&host);
    let tenant = host.tenant("k");
    let mut view = server.client();

    // Closed: released before `close` returns.
    let mut inst = tenant.instantiate(&plugin).await.unwrap();
    let lock = watched(&mut inst, "closed").await;
    assert!(acquire(&mut inst, lock, 60_000).await);
    assert_eq!(view.cmd(["EXISTS", "{k:closed}"]).await, Frame::Integer(1));
    inst.close().await;
    assert_eq!(view.cmd(["EXISTS", "{k:closed}"]).await, Frame::Integer(0));

    // Dropped: released in the background, long before the 60 s TTL.
    let mut inst = tenant.instantiate(&plugin).await.unwrap();
    let lock = watched(&mut inst, "dropped").await;
    assert!(acquire(&mut inst, lock, 60_000).await);
    drop(inst);
    let mut freed = false;
    for _ in 0..500 {
        if view.cmd(["EXISTS", "{k:dropped}"]).await == Frame::Integer(0) {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(freed, "the dropped instance's lock was still held");

    // Only the instance's own lease is released: a lock taken over by someone else since
    // (its token differs) stays.
    let mut inst = tenant.instantiate(&plugin).await.unwrap();
    let lock = watched(&mut inst, "taken").await;
    assert!(acquire(&mut inst, lock, 60_000).await);
    assert_eq!(
        view.cmd(["SET", "{k:taken}", "someone-else"]).await,
        Frame::ok()
    );
    inst.close().await;
    assert_eq!(
        view.cmd(["GET", "{k:taken}"]).await,
        Frame::bulk("someone-else")
    );
}
