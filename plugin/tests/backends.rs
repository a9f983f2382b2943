//! The redis-rs backend beyond a single node: a real 3-master Redis Cluster (a tenant's lock
//! keys keep one hash tag under the namespace, so multi-key scripts stay in one slot) and a
//! master found through a real Sentinel.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use latchkey_client::native::RedisTransport;
use latchkey_client::{Reply, Transport};
use latchkey_plugin::{Backend, Released};

/// Runs `redis-cli` with `args` and returns its output.
fn cli(args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(args)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_take_locks_on_a_real_cluster() {
    let nodes: Vec<_> = (0..3)
        .map(|_| {
            common::RedisProcess::spawn_with(&[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
        })
        .collect();
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr.to_string()).collect();
    let mut create = vec!["--cluster", "create"];
    create.extend(addrs.iter().map(String::as_str));
    create.extend(["--cluster-replicas", "0", "--cluster-yes"]);
    cli(&create);
    let deadline = Instant::now() + Duration::from_secs(30);
    for n in &nodes {
        let port = n.addr.port().to_string();
        while !cli(&["-p", &port, "CLUSTER", "INFO"]).contains("cluster_state:ok") {
            assert!(Instant::now() < deadline, "the cluster never became ok");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let urls: Vec<String> = nodes.iter().map(|n| n.url()).collect();
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

struct Sentinel(Child, std::path::PathBuf);

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_take_locks_on_the_master_a_sentinel_names() {
    let master = common::RedisProcess::spawn();
    let port = common::free_port();
    let dir = std::env::temp_dir().join(format!("latchkey-plugin-sentinel-{port}"));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 {} 1\n",
            master.addr.port()
        ),
    )
    .unwrap();
    let child = Command::new("redis-server")
        .arg(&conf)
        .arg("--sentinel")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server --sentinel");
    let _sentinel = Sentinel(child, dir);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cli(&[
        "-p",
        &port.to_string(),
        "SENTINEL",
        "GET-MASTER-ADDR-BY-NAME",
        "mymaster",
    ])
    .contains("127.0.0.1")
    {
        assert!(Instant::now() < deadline, "the sentinel never answered");
        std::thread::sleep(Duration::from_millis(20));
    }
    let backend = <dyn Backend>::sentinel(&[format!("redis://127.0.0.1:{port}")], "mymaster")
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
    let on_master = cli(&[
        "-p",
        &master.addr.port().to_string(),
        "GET",
        "{s:via-sentinel}",
    ]);
    assert_eq!(on_master.trim(), l.token);
    assert_eq!(
        t.unlock("via-sentinel", l).await.unwrap().unwrap(),
        Released::Released
    );
}
