//! What the host's tests share: a real `redis-server` on a free port, hosts over either
//! backend, and the components.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use latchkey_plugin::{
    component_path, guest::rogue_path, Backend, Host, HostConfig, Limits, Plugin,
};

/// A `redis-server` child process on a free port, killed on drop.
pub struct RedisProcess {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    dir: std::path::PathBuf,
}

/// A port the OS says is free right now, never one this test binary handed out before (tests
/// run in parallel threads and must not race for one port).
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if HANDED_OUT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(port)
        {
            return port;
        }
    }
}

/// Whether the server at `addr` is up and is the process `pid`, not another server that took
/// the port first. Any error means "not yet".
fn answers_as(addr: SocketAddr, pid: u32) -> bool {
    let Ok(client) = redis::Client::open(format!("redis://{addr}")) else {
        return false;
    };
    let Ok(mut conn) = client.get_connection_with_timeout(Duration::from_secs(2)) else {
        return false;
    };
    let info: redis::RedisResult<String> = redis::cmd("INFO").arg("server").query(&mut conn);
    info.map(|i| i.lines().any(|l| l.trim() == format!("process_id:{pid}")))
        .unwrap_or(false)
}

impl RedisProcess {
    /// Starts `redis-server` (persistence off) on a port the OS says is free.
    pub fn spawn() -> RedisProcess {
        Self::spawn_with(&[])
    }

    /// [`RedisProcess::spawn`] with extra arguments, in a directory of its own.
    pub fn spawn_with(extra: &[&str]) -> RedisProcess {
        for _ in 0..5 {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!(
                "latchkey-plugin-redis-{port}-{}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&dir)
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server is installed");
            let mut p = RedisProcess {
                child,
                addr: format!("127.0.0.1:{port}").parse().unwrap(),
                dir,
            };
            let pid = p.child.id();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = p.child.try_wait() {
                    break; // the port was taken meanwhile: try another
                }
                if answers_as(p.addr, pid) {
                    return p;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = p.child.kill();
        }
        panic!("redis-server did not start");
    }

    /// `redis://` URL of the server.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A host config with a small pool and the given limits.
pub fn config(limits: Limits) -> HostConfig {
    HostConfig {
        pool_instances: 64,
        limits,
        ..HostConfig::default()
    }
}

/// A host over `backend` with default limits.
pub fn host(backend: Arc<dyn Backend>) -> Host {
    Host::new(backend, config(Limits::default())).expect("host")
}

/// The lock-client component, loaded.
pub fn lock_client(host: &Host) -> Plugin {
    host.load(&component_path().expect("the latchkey-client component"))
        .expect("the component loads")
}

/// The rogue guest, loaded.
pub fn rogue(host: &Host) -> Plugin {
    host.load(&rogue_path().expect("the rogue guest builds"))
        .expect("the rogue guest loads")
}

/// A TCP listener in front of a server that forwards both ways until it is silenced, and from
/// then on accepts, reads and never replies (nor passes anything on): a node that hangs. It
/// forwards at first because a redis-rs client checks the server at connect time.
pub struct SilentProxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    silent: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl SilentProxy {
    /// A proxy to `upstream` on a free port (call from inside a tokio runtime).
    pub async fn start(upstream: SocketAddr) -> SilentProxy {
        use std::sync::atomic::AtomicBool;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let silent = Arc::new(AtomicBool::new(false));
        let flag = silent.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pump(cr, sw, flag.clone()));
                tokio::spawn(pump(sr, cw, flag.clone()));
            }
        });
        SilentProxy { addr, silent, task }
    }

    /// `redis://` URL of the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// From now on, nothing passes: every byte either way is read and dropped.
    pub fn silence(&self) {
        self.silent.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for SilentProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to` until either closes, dropping what it reads once `silent` is set.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    silent: Arc<std::sync::atomic::AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if silent.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                if to.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}
