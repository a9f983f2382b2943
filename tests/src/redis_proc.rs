//! A real `redis-server`, spawned on a free port with persistence off and killed on drop.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::raw::RawConn;

/// A running `redis-server` child process.
#[derive(Debug)]
pub struct RedisProcess {
    child: Child,
    addr: SocketAddr,
    dir: std::path::PathBuf,
    args: Vec<String>,
}

/// Picks a port the OS says is free right now (never 6379).
pub fn free_port() -> u16 {
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = l.local_addr().expect("local addr").port();
        if port != 6379 {
            return port;
        }
    }
}

impl RedisProcess {
    /// Spawns `redis-server` with the given extra arguments. Panics with a clear message when
    /// the binary is missing (the README's test command installs it).
    pub fn spawn(extra: &[&str]) -> RedisProcess {
        let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        Self::spawn_binary(&bin, extra)
    }

    /// [`RedisProcess::spawn`] with another server binary that takes redis-server's flags, such
    /// as `latchkey-server`, to compare the two as processes alike.
    pub fn spawn_binary(bin: &str, extra: &[&str]) -> RedisProcess {
        for _attempt in 0..5 {
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("latchkey-redis-{port}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("create redis dir");
            let child = Command::new(bin)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .args(["--dir", dir.to_str().expect("utf-8 temp dir")])
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("cannot start {bin} ({e}): install redis-server (apt-get install redis-server)")
                });
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
            let mut p = RedisProcess {
                child,
                addr,
                dir,
                args: extra.iter().map(|a| a.to_string()).collect(),
            };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = p.child.try_wait() {
                    break; // port taken in the meantime: try another
                }
                if let Ok(mut c) = RawConn::connect(addr) {
                    if c.cmd(&["PING"]).starts_with(b"+PONG") {
                        return p;
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = p.child.kill();
        }
        panic!("redis-server did not start");
    }

    /// Kills the process (SIGKILL: no shutdown save, like a crash) and starts it again on the
    /// same port, in the same directory, with the same arguments.
    pub fn crash_and_restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        self.child = Command::new(bin)
            .args([
                "--port",
                &self.addr.port().to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--dir", self.dir.to_str().expect("utf-8 temp dir")])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("restart redis-server");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(mut c) = RawConn::connect(self.addr) {
                if c.cmd(&["PING"]).starts_with(b"+PONG") {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server did not come back");
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://host:port`.
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
