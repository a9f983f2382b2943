//! Real Redis topologies beyond one node, for the tests that take locks through them: a
//! Redis Cluster of a few masters, and a Sentinel watching a master. Each is made of real
//! `redis-server` processes on free ports, ready when returned, and gone on drop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::raw::RawConn;
use crate::redis_proc::{free_port, RedisProcess};
use crate::tools::require_tool;

/// A Redis Cluster of masters only (no replicas), every slot assigned, `cluster_state:ok`
/// on every node.
pub struct RedisCluster {
    /// The masters, in the order they were created.
    pub nodes: Vec<RedisProcess>,
}

impl RedisCluster {
    /// Starts `masters` cluster-enabled `redis-server`s, joins them with
    /// `redis-cli --cluster create`, and waits until every node says the cluster is ok.
    pub fn spawn(masters: usize) -> RedisCluster {
        require_tool("redis-cli", "apt-get install redis-tools");
        let nodes: Vec<RedisProcess> = (0..masters)
            .map(|_| {
                RedisProcess::spawn(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ])
            })
            .collect();
        let addrs: Vec<String> = nodes.iter().map(|n| n.addr().to_string()).collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        for n in &nodes {
            loop {
                let info = RawConn::connect(n.addr())
                    .map(|mut c| c.cmd(&["CLUSTER", "INFO"]))
                    .unwrap_or_default();
                if String::from_utf8_lossy(&info).contains("cluster_state:ok") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the cluster never became ok: {}",
                    String::from_utf8_lossy(&info)
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        RedisCluster { nodes }
    }

    /// Every node's `redis://` URL, the seeds a cluster client starts from.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisProcess::url).collect()
    }
}

/// A `redis-server --sentinel` monitoring one master under a name, with a quorum of one.
pub struct RedisSentinel {
    child: Child,
    dir: PathBuf,
    addr: SocketAddr,
}

impl RedisSentinel {
    /// Starts a Sentinel that monitors the master at `master` as `name` (declaring it down
    /// after one second without answers), and waits until it names that master's address.
    pub fn spawn(master: SocketAddr, name: &str) -> RedisSentinel {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("latchkey-sentinel-{port}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create sentinel dir");
        let conf = dir.join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor {name} {} {} 1\nsentinel down-after-milliseconds {name} 1000\n",
                dir.display(),
                master.ip(),
                master.port()
            ),
        )
        .expect("write sentinel.conf");
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server --sentinel (apt-get install redis-server)");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let sentinel = RedisSentinel { child, dir, addr };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = RawConn::connect(addr) {
                let reply = c.cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", name]);
                if reply.starts_with(b"*2") {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "the sentinel never answered");
            std::thread::sleep(Duration::from_millis(20));
        }
        sentinel
    }

    /// Where the Sentinel listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The Sentinel's `redis://` URL, what a Sentinel-aware client is given.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
