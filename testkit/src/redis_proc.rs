//! A real `redis-server`, spawned on a free port with persistence off and killed on drop.

use std::collections::BTreeSet;
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
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

/// Picks a port the OS says is free right now (never 6379), and never one this process has
/// handed out before: tests run in parallel threads, and two of them must not be given the same
/// port between the probe and the server's own bind.
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = l.local_addr().expect("local addr").port();
        let fresh = HANDED_OUT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(port);
        if port != 6379 && fresh {
            return port;
        }
    }
}

/// Whether the server at `addr` is up and is the process `pid` (not another test's server that
/// took the port first) with its data loaded. Errors (refused, reset, timeout) mean "not yet".
fn answers_as(addr: SocketAddr, pid: u32) -> bool {
    let Ok(mut c) = RawConn::connect(addr) else {
        return false;
    };
    let ours = match c.try_cmd(&["INFO", "server"]) {
        Ok(reply) => String::from_utf8_lossy(&reply)
            .lines()
            .any(|l| l.trim() == format!("process_id:{pid}")),
        Err(_) => false,
    };
    // INFO is answered while the dataset is still loading; PING is not (`-LOADING`), so a
    // server that answers PING has its RDB or AOF in memory.
    ours && matches!(c.try_cmd(&["PING"]), Ok(reply) if reply == b"+PONG\r\n")
}

/// The Redis release line the differential tests are written against: latchkey answers byte for
/// byte like Redis 7.0, and other releases word some replies differently.
pub const EXPECTED_REDIS: &str = "7.0.";

/// The version `bin --version` reports (`Redis server v=7.0.15 ...` gives `7.0.15`).
pub fn redis_version(bin: &str) -> String {
    let out = Command::new(bin).arg("--version").output().unwrap_or_else(|e| {
        panic!("cannot run `{bin} --version` ({e}): run `apt-get install redis-server redis-tools`")
    });
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or_else(|| panic!("no version in `{bin} --version`: {text}"))
        .to_string()
}

/// Fails (once per test process) unless `redis-server` is the release line the suite expects
/// ([`EXPECTED_REDIS`]): a difference found against another release says nothing about latchkey.
fn check_redis_version(bin: &str) {
    static CHECKED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let version = CHECKED.get_or_init(|| redis_version(bin));
    assert!(
        version.starts_with(EXPECTED_REDIS),
        "{bin} is Redis {version}; the suite compares against Redis {EXPECTED_REDIS}x \
         (install that release, or point REDIS_SERVER at its redis-server)"
    );
}

impl RedisProcess {
    /// Spawns `redis-server` with the given extra arguments. Panics with a clear message when
    /// the binary is missing (the README's test command installs it) or is not the Redis
    /// release the suite expects ([`EXPECTED_REDIS`]).
    pub fn spawn(extra: &[&str]) -> RedisProcess {
        let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        check_redis_version(&bin);
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
            let pid = p.child.id();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = p.child.try_wait() {
                    break; // port taken in the meantime: try another
                }
                if answers_as(addr, pid) {
                    return p;
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
        let pid = self.child.id();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if answers_as(self.addr, pid) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server did not come back");
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its working directory (`--dir`), where it writes its snapshot and its AOF: a test
    /// compares those files with latchkey's.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
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
