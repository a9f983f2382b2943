//! The redis-rs backend beyond a single node: a real 3-master Redis Cluster (a tenant's lock
//! keys keep one hash tag under the namespace, so multi-key scripts stay in one slot) and a
//! master found through a real Sentinel.

mod common;

use std::time::Duration;

use latchkey_client::native::RedisTransport;
use latchkey_client::{Reply, Transport};
use latchkey_plugin::{Backend, Released};
use latchkey_testkit::{RawConn, RedisCluster, RedisSentinel};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_take_locks_on_a_real_cluster() {
    let cluster = RedisCluster::spawn(3);
    let urls = cluster.urls();
    let host = common::host(<dyn Backend>::cluster(&urls).await.unwrap());
    let plugin = common::lock_client(&host);
    let ttl = Duration::from_secs(30);
    let mut lasts = Vec::new();
    for tenant in ["red", "green", "blue"] {
        let mut t = host.tenant(tenant).instantiate(&plugin).await.unwrap();
        for i in 0..5 {
            let name = format!("job-{i}");
            let l = t
                .try_lock(&name, ttl)
                .await
                .unwrap()
                .unwrap()
                .expect("free");
            assert_eq!(
                t.unlock(&name, l).await.unwrap().unwrap(),
                Released::Released
            );
        }
        // The fenced lock's script touches the lock key and its counter: one slot.
        let (_, f1) = t
            .try_fenced("ledger", Duration::from_millis(30))
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(60)).await;
        let (_, f2) = t.try_fenced("ledger", ttl).await.unwrap().unwrap().unwrap();
        assert!(f2 > f1);
        lasts.push(t.try_lock("held", ttl).await.unwrap().unwrap().unwrap());
    }
    let view = RedisTransport::connect_cluster(&urls).await.unwrap();
    let got = view
        .command(vec![b"GET".to_vec(), b"{green:held}".to_vec()])
        .await
        .unwrap();
    assert_eq!(got, Reply::Bulk(lasts[1].token.clone().into_bytes()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_take_locks_on_the_master_a_sentinel_names() {
    let master = common::RedisProcess::spawn();
    let sentinel = RedisSentinel::spawn(master.addr, "mymaster");
    let backend = <dyn Backend>::sentinel(&[sentinel.url()], "mymaster")
        .await
        .unwrap();
    let host = common::host(backend);
    let plugin = common::lock_client(&host);
    let mut t = host.tenant("s").instantiate(&plugin).await.unwrap();
    let l = t
        .try_lock("via-sentinel", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let on_master = RawConn::connect(master.addr)
        .unwrap()
        .cmd(&["GET", "{s:via-sentinel}"]);
    assert_eq!(
        on_master,
        format!("${}\r\n{}\r\n", l.token.len(), l.token).into_bytes()
    );
    assert_eq!(
        t.unlock("via-sentinel", l).await.unwrap().unwrap(),
        Released::Released
    );
}
