//! SIGTERM and SIGINT to the `latchkey-server` binary, beside redis-server 7.0 given the same
//! signal: both run the shutdown `SHUTDOWN` runs (the snapshot file written while save points
//! are set, the AOF fsynced), then exit 0; the files they leave load again. When the snapshot
//! cannot be written both go on serving, and `shutdown-on-sigterm force` makes them exit
//! anyway.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use latchkey_testkit::{free_port, RawConn};

/// One of the two servers, as a process.
#[derive(Clone, Copy, Debug)]
enum Bin {
    Latchkey,
    Redis,
}

impl Bin {
    fn path(self) -> &'static str {
        match self {
            Bin::Latchkey => env!("CARGO_BIN_EXE_latchkey-server"),
            Bin::Redis => "redis-server",
        }
    }
}

/// A server process, killed on drop if a test failed before it exited.
struct Process {
    child: Child,
    addr: SocketAddr,
    /// Where its log goes (both servers log to standard output or error).
    log: std::path::PathBuf,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// Starts `bin` in `dir` with redis-server's flags, and waits until it answers as itself.
    /// Its log goes to `server-<port>.log` beside `dir`.
    fn start(bin: Bin, dir: &Path, extra: &[&str]) -> Process {
        let port = free_port();
        let log = dir.parent().unwrap().join(format!("server-{port}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin.path())
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--dir", dir.to_str().unwrap()])
            .args(extra)
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin:?}: {e}"));
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let pid = format!("process_id:{}", child.id());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut c) = RawConn::connect(addr) {
                let info = c.try_cmd(&["INFO", "server"]).unwrap_or_default();
                let ping = c.try_cmd(&["PING"]).unwrap_or_default();
                if String::from_utf8_lossy(&info)
                    .lines()
                    .any(|l| l.trim() == pid)
                    && ping == b"+PONG\r\n"
                {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "{bin:?} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Process { child, addr, log }
    }

    /// Waits until its log holds `line` (a bound on a hang, not a measurement).
    fn wait_log(&self, line: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .contains(line)
        {
            assert!(Instant::now() < deadline, "no {line:?} in the log");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn conn(&self) -> RawConn {
        RawConn::connect(self.addr).unwrap()
    }

    /// Sends `signal` to the process.
    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: `kill` only sends a signal to our own child process; it touches no memory.
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0, "kill({pid}, {signal})");
    }

    /// Waits for the process to exit (a bound on a hang, not a measurement).
    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the process did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether it is still running.
    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

/// A fresh folder for one test (removed when dropped), and in it the servers' data folder
/// `data` (their logs go beside it).
fn temp_dir(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::Builder::new()
        .prefix(&format!("latchkey-{name}-"))
        .tempdir()
        .unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    (tmp, data)
}

fn cmd(c: &mut RawConn, args: &[&str]) -> String {
    String::from_utf8_lossy(&c.cmd(args)).into_owned()
}

/// Keys of several types, one with a TTL.
fn fill(c: &mut RawConn) {
    for args in [
        &["SET", "s", "v"][..],
        &["SET", "lock", "token", "PX", "600000"],
        &["HSET", "h", "f", "v"],
        &["RPUSH", "l", "a", "b"],
        &["ZADD", "z", "1.5", "m"],
        &["XADD", "st", "1-1", "f", "v"],
    ] {
        assert!(!cmd(c, args).starts_with('-'), "{args:?}");
    }
}

/// What a reader sees of the keys [`fill`] wrote.
fn contents(c: &mut RawConn) -> Vec<String> {
    let pttl: i64 = cmd(c, &["PTTL", "lock"])
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    vec![
        cmd(c, &["DBSIZE"]),
        cmd(c, &["GET", "s"]),
        cmd(c, &["GET", "lock"]),
        format!("ttl kept: {}", pttl > 0 && pttl <= 600_000),
        cmd(c, &["HGETALL", "h"]),
        cmd(c, &["LRANGE", "l", "0", "-1"]),
        cmd(c, &["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
        cmd(c, &["XRANGE", "st", "-", "+"]),
    ]
}

/// Starts `bin` with save points, writes, stops it with `signal`, and starts it again on
/// the same folder: the exit status, whether the snapshot file was there, and what the second
/// process loaded.
fn stop_and_reload(bin: Bin, signal: libc::c_int) -> (ExitStatus, bool, Vec<String>) {
    let (_tmp, dir) = temp_dir("signal");
    let flags = ["--save", "3600 1", "--appendonly", "no"];
    let mut p = Process::start(bin, &dir, &flags);
    fill(&mut p.conn());
    assert!(!dir.join("dump.rdb").exists());
    p.signal(signal);
    let status = p.wait_exit();
    let saved = dir.join("dump.rdb").exists();
    let again = Process::start(bin, &dir, &flags);
    (status, saved, contents(&mut again.conn()))
}

#[test]
fn sigterm_saves_the_snapshot_and_exits_0_as_redis_does() {
    let (status, saved, loaded) = stop_and_reload(Bin::Latchkey, libc::SIGTERM);
    let (r_status, r_saved, r_loaded) = stop_and_reload(Bin::Redis, libc::SIGTERM);
    assert!(r_status.success() && r_saved, "redis-server: {r_status}");
    assert_eq!(status.code(), r_status.code());
    assert!(saved);
    assert_eq!(loaded, r_loaded);
    assert_eq!(loaded[0], ":6\r\n");
}

#[test]
fn sigint_runs_the_same_shutdown() {
    let (status, saved, loaded) = stop_and_reload(Bin::Latchkey, libc::SIGINT);
    let (r_status, r_saved, r_loaded) = stop_and_reload(Bin::Redis, libc::SIGINT);
    assert!(r_status.success() && r_saved, "redis-server: {r_status}");
    assert_eq!((status.code(), saved), (Some(0), true));
    assert_eq!(loaded, r_loaded);
}

#[test]
fn shutdown_on_sigterm_nosave_writes_no_snapshot() {
    for bin in [Bin::Latchkey, Bin::Redis] {
        let (_tmp, dir) = temp_dir("nosave");
        let mut p = Process::start(bin, &dir, &["--save", "3600 1"]);
        let mut c = p.conn();
        fill(&mut c);
        assert_eq!(
            cmd(&mut c, &["CONFIG", "SET", "shutdown-on-sigterm", "nosave"]),
            "+OK\r\n"
        );
        p.signal(libc::SIGTERM);
        assert_eq!(p.wait_exit().code(), Some(0), "{bin:?}");
        assert!(!dir.join("dump.rdb").exists(), "{bin:?}");
    }
}

#[test]
fn sigterm_with_the_aof_on_keeps_every_write() {
    let (_tmp, dir) = temp_dir("sigterm-aof");
    // No save points, `appendfsync no`: only the shutdown's own fsync puts the writes on disk.
    let flags = ["--save", "", "--appendonly", "yes", "--appendfsync", "no"];
    let mut p = Process::start(Bin::Latchkey, &dir, &flags);
    let mut c = p.conn();
    fill(&mut c);
    let expected = contents(&mut c);
    p.signal(libc::SIGTERM);
    assert_eq!(p.wait_exit().code(), Some(0));
    assert!(!dir.join("dump.rdb").exists());
    let again = Process::start(Bin::Latchkey, &dir, &flags);
    assert_eq!(contents(&mut again.conn()), expected);
}

#[test]
fn a_snapshot_that_cannot_be_written_keeps_the_server_up_unless_forced() {
    for bin in [Bin::Latchkey, Bin::Redis] {
        let (_tmp, sub) = temp_dir("unwritable");
        let mut p = Process::start(bin, &sub, &["--save", "3600 1"]);
        let mut c = p.conn();
        fill(&mut c);
        // The folder goes away: the snapshot cannot be written there any more.
        std::fs::remove_dir(&sub).unwrap();
        p.signal(libc::SIGTERM);
        // The shutdown failed, says the log (in Redis's words), and the server still answers
        // on the same connection.
        p.wait_log("Errors trying to shut down the server. Check the logs for more information.");
        assert!(p.running(), "{bin:?} exited though it could not save");
        assert_eq!(cmd(&mut c, &["GET", "s"]), "$1\r\nv\r\n", "{bin:?}");
        assert_eq!(
            cmd(&mut c, &["CONFIG", "SET", "shutdown-on-sigterm", "force"]),
            "+OK\r\n"
        );
        p.signal(libc::SIGTERM);
        assert_eq!(p.wait_exit().code(), Some(0), "{bin:?}");
    }
}
