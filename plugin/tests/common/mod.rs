//! What the host's tests share: a real `redis-server` on a free port, hosts over either
//! backend, and the components.

#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
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

/// A port the OS says is free right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = p.child.try_wait() {
                    break; // the port was taken meanwhile: try another
                }
                if TcpStream::connect(p.addr).is_ok() {
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
