//! The lock-client component inside the wasmtime host, against the in-process server: tenants
//! take real locks, and each lives in its own namespace.

use std::time::Duration;

use latchkey_plugin::{component_path, Host, Namespace, Released};
use latchkey_server::{Frame, Server};

fn host_for(server: &latchkey_server::ServerHandle) -> Host {
    Host::new(
        &component_path().expect("the latchkey-client component"),
        server.shared().clone(),
        tokio::runtime::Handle::current(),
    )
    .expect("the component loads")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_takes_and_releases_locks_through_the_component() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let host = host_for(&server);
    let mut server_view = server.client();
    let (held, fences) = tokio::task::spawn_blocking(move || {
        let mut t = host.tenant("alpha").unwrap();
        let ttl = Duration::from_secs(30);
        let lease = t.try_lock("orders", ttl).unwrap().unwrap().expect("free");
        assert!(
            t.try_lock("orders", ttl).unwrap().unwrap().is_none(),
            "held twice"
        );
        let token = lease.token.clone();
        assert_eq!(
            t.unlock("orders", lease.clone()).unwrap().unwrap(),
            Released::Released
        );
        assert_eq!(
            t.unlock("orders", lease).unwrap().unwrap(),
            Released::AlreadyExpired
        );
        let again = t
            .lock_wait("orders", ttl, Duration::from_secs(1))
            .unwrap()
            .unwrap()
            .expect("free again");
        let (_, f1) = t
            .try_fenced("ledger", Duration::from_millis(50))
            .unwrap()
            .unwrap()
            .unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let (_, f2) = t
            .try_fenced("ledger", Duration::from_millis(50))
            .unwrap()
            .unwrap()
            .unwrap();
        assert_ne!(token, again.token);
        (again.token, (f1, f2))
    })
    .await
    .unwrap();
    assert!(fences.1 > fences.0, "fencing tokens must increase");
    // The tenant's key lives inside its namespace on the server.
    assert_eq!(
        server_view.cmd(["GET", "{alpha:orders}"]).await,
        Frame::bulk(held)
    );
    assert_eq!(
        server_view.cmd(["EXISTS", "{orders}"]).await,
        Frame::Integer(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_do_not_see_each_others_locks() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let host = host_for(&server);
    tokio::task::spawn_blocking(move || {
        let mut a = host.tenant("a").unwrap();
        let mut b = host.tenant("b").unwrap();
        let ttl = Duration::from_secs(30);
        let la = a
            .try_lock("shared-name", ttl)
            .unwrap()
            .unwrap()
            .expect("free for a");
        let lb = b
            .try_lock("shared-name", ttl)
            .unwrap()
            .unwrap()
            .expect("b has its own namespace");
        // B cannot release A's lock, even with A's lease in hand.
        assert_eq!(
            b.unlock("shared-name", la.clone()).unwrap().unwrap(),
            Released::NotOwner
        );
        assert_eq!(
            a.unlock("shared-name", la).unwrap().unwrap(),
            Released::Released
        );
        assert_eq!(
            b.unlock("shared-name", lb).unwrap().unwrap(),
            Released::Released
        );
    })
    .await
    .unwrap();
}

#[test]
fn the_namespace_refuses_what_a_tenant_may_not_run() {
    let ns = Namespace::new("t1");
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
}
