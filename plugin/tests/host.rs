//! The lock-client component inside the host, against both backends: the latchkey server
//! in-process and a real `redis-server`. Tenants take real locks, and each lives in its own
//! namespace.

mod common;

use std::time::Duration;

use latchkey_client::native::RedisTransport;
use latchkey_client::{Reply, Transport};
use latchkey_plugin::{Backend, Host, Namespace, Released};
use latchkey_server::{Frame, Server};

/// The same session on any backend; returns the token the tenant finally holds `orders` with.
async fn session(host: &Host) -> String {
    let plugin = common::lock_client(host);
    let mut t = host.tenant("alpha").instantiate(&plugin).await.unwrap();
    let ttl = Duration::from_secs(30);
    let lease = t
        .try_lock("orders", ttl)
        .await
        .unwrap()
        .unwrap()
        .expect("free");
    assert!(
        t.try_lock("orders", ttl).await.unwrap().unwrap().is_none(),
        "held twice"
    );
    assert_eq!(
        t.unlock("orders", lease.clone()).await.unwrap().unwrap(),
        Released::Released
    );
    assert_eq!(
        t.unlock("orders", lease.clone()).await.unwrap().unwrap(),
        Released::AlreadyExpired
    );
    let again = t
        .lock_wait("orders", ttl, Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap()
        .expect("free again");
    assert_ne!(lease.token, again.token);
    let (_, f1) = t
        .try_fenced("ledger", Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (_, f2) = t
        .try_fenced("ledger", Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(f2 > f1, "fencing tokens must increase");
    again.token
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_takes_and_releases_locks_in_process() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let host = common::host(<dyn Backend>::local(&server));
    let held = session(&host).await;
    let mut view = server.client();
    // The tenant's key lives inside its namespace on the server.
    assert_eq!(view.cmd(["GET", "{alpha:orders}"]).await, Frame::bulk(held));
    assert_eq!(view.cmd(["EXISTS", "{orders}"]).await, Frame::Integer(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_takes_and_releases_locks_on_real_redis() {
    let redis = common::RedisProcess::spawn();
    let host = common::host(<dyn Backend>::redis(&redis.url()).await.unwrap());
    let held = session(&host).await;
    let view = RedisTransport::connect(&redis.url()).await.unwrap();
    let get = |k: &str| view.command(vec![b"GET".to_vec(), k.as_bytes().to_vec()]);
    assert_eq!(
        get("{alpha:orders}").await.unwrap(),
        Reply::Bulk(held.into_bytes())
    );
    assert_eq!(get("{orders}").await.unwrap(), Reply::Nil);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_guest_is_woken_by_the_unlock_message_without_holding_a_thread() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let host = common::host(<dyn Backend>::local(&server));
    let plugin = common::lock_client(&host);
    let tenant = host.tenant("w");
    let mut holder = tenant.instantiate(&plugin).await.unwrap();
    let lease = holder
        .try_lock("q", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // Many waiters of the same tenant, each suspended in its backoff or its unlock wait: on a
    // 2-worker runtime they could not all wait at once if each held a thread.
    let mut waiters = Vec::new();
    for _ in 0..8 {
        let mut w = tenant.instantiate(&plugin).await.unwrap();
        waiters.push(tokio::spawn(async move {
            let l = w
                .lock_wait("q", Duration::from_secs(30), Duration::from_secs(20))
                .await
                .unwrap()
                .unwrap()
                .expect("acquired within the deadline");
            assert_eq!(w.unlock("q", l).await.unwrap().unwrap(), Released::Released);
        }));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        holder.unlock("q", lease).await.unwrap().unwrap(),
        Released::Released
    );
    for w in waiters {
        w.await.unwrap();
    }
}

#[test]
fn the_namespace_refuses_what_a_tenant_may_not_run() {
    let ns = Namespace::new("t1").unwrap();
    let cmd = |args: &[&str]| {
        args.iter()
            .map(|a| a.as_bytes().to_vec())
            .collect::<Vec<_>>()
    };
    for bad in [
        cmd(&["FLUSHALL"]),
        cmd(&["CONFIG", "SET", "maxclients", "1"]),
        cmd(&["KEYS", "*"]),
        cmd(&["EVAL", "return redis.call('flushall')", "0"]),
        cmd(&["EVALSHA", "0000000000000000000000000000000000000000", "0"]),
        cmd(&["EVALSHA"]),
    ] {
        assert!(ns.rewrite(bad.clone()).is_err(), "{bad:?} was allowed");
    }
    let ok = ns
        .rewrite(cmd(&["SET", "{lock}", "tok", "NX", "PX", "100"]))
        .unwrap();
    assert_eq!(ok[1], b"{t1:lock}".to_vec());
    let release = latchkey_client::scripts::RELEASE.sha().to_string();
    let ok = ns
        .rewrite(cmd(&["EVALSHA", &release, "1", "{lock}", "tok"]))
        .unwrap();
    assert_eq!(ok[3], b"{t1:lock}".to_vec());
    assert_eq!(ok[4], b"tok".to_vec(), "arguments are not keys");
    assert_eq!(ns.key(b"plain"), b"t1:plain".to_vec());
    let ok = ns.rewrite(cmd(&["PUBLISH", "{lock}:unlock", "x"])).unwrap();
    assert_eq!(ok[1], b"{t1:lock}:unlock".to_vec());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiled_components_are_cached_on_disk_per_engine_and_component() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("plugin-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = || latchkey_plugin::HostConfig {
        pool_instances: 8,
        cache_dir: Some(dir.clone()),
        ..Default::default()
    };
    let host = Host::new(<dyn Backend>::local(&server), config()).unwrap();
    let path = latchkey_plugin::component_path().unwrap();
    assert!(
        !host.load(&path).unwrap().from_cache,
        "compiled the first time"
    );
    // A second engine with the same settings reuses the file.
    let again = Host::new(<dyn Backend>::local(&server), config()).unwrap();
    let cached = again.load(&path).unwrap();
    assert!(cached.from_cache);
    let mut t = again.tenant("c").instantiate(&cached).await.unwrap();
    assert!(t
        .try_lock("x", Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap()
        .is_some());
    // Another component gets a file of its own.
    assert!(
        !again
            .load(&latchkey_plugin::guest::rogue_path().unwrap())
            .unwrap()
            .from_cache
    );
    let files = std::fs::read_dir(&dir).unwrap().filter_map(Result::ok);
    let cwasm = files
        .filter(|f| f.path().extension().is_some_and(|e| e == "cwasm"))
        .count();
    assert_eq!(cwasm, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_that_cannot_be_reserved_falls_back_to_on_demand_instances() {
    let server = Server::builder().no_listener().start().await.unwrap();
    // Far more address space than a process has: the reservation fails.
    let host = Host::new(
        <dyn Backend>::local(&server),
        latchkey_plugin::HostConfig {
            pool_instances: 50_000_000,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!host.pooled());
    let plugin = common::lock_client(&host);
    let mut t = host.tenant("od").instantiate(&plugin).await.unwrap();
    assert!(t
        .try_lock("x", Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap()
        .is_some());
    assert!(
        common::host(<dyn Backend>::local(&server)).pooled(),
        "a small pool is reserved"
    );
}
