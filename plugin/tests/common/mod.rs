//! What the host's tests share: a real `redis-server` on a free port, hosts over either
//! backend, and the components.

// Each test binary of this crate includes this module and uses part of it; its items are
// `pub` for those binaries, not for anyone outside.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::Arc;

use latchkey_plugin::{
    component_path, guest::rogue_path, Backend, Host, HostConfig, Limits, Plugin,
};

/// A `redis-server` child process on a free port, killed on drop (the workspace's one copy,
/// [`latchkey_testkit::RedisProcess`], with its address as a field).
pub struct RedisProcess {
    inner: latchkey_testkit::RedisProcess,
    /// Where it listens.
    pub addr: SocketAddr,
}

/// A free port, as every crate's tests pick one (not every test binary here uses it).
#[allow(unused_imports)]
pub use latchkey_testkit::free_port;

impl RedisProcess {
    /// Starts `redis-server` (persistence off) on a port the OS says is free.
    pub fn spawn() -> RedisProcess {
        Self::spawn_with(&[])
    }

    /// [`RedisProcess::spawn`] with extra arguments, in a directory of its own.
    pub fn spawn_with(extra: &[&str]) -> RedisProcess {
        let inner = latchkey_testkit::RedisProcess::spawn_binary("redis-server", extra);
        RedisProcess {
            addr: inner.addr(),
            inner,
        }
    }

    /// `redis://` URL of the server.
    pub fn url(&self) -> String {
        self.inner.url()
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
