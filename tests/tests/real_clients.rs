//! Lock code written for real Redis, unchanged, against latchkey: redis-py's own lock
//! (`redis.lock.Lock`), waiting, extending, the token checks after expiry, contention between
//! threads, registered scripts with their `NOSCRIPT` fallback, `WATCH` transactions and pub/sub.
//!
//! `py/redis_py_locks.py` asserts each step itself and prints what it observed. It runs against
//! a latchkey server over TCP and against a real `redis-server`, each in RESP2 and in RESP3,
//! and the four transcripts must be the same. This is what someone testing their Redis-lock code
//! hermetically does: point the client library they already use at latchkey.
//!
//! redis-py (a pinned version) is installed with pip into the test's scratch folder on the first
//! run. Without `python3` on the machine the test says so and passes without running.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use latchkey_server::Server;
use latchkey_tests::RedisProcess;

/// The redis-py release the script is checked with.
const REDIS_PY: &str = "redis==8.1.0";

/// The folder redis-py is installed into (once), or `None` without python3.
fn redis_py() -> Option<&'static PathBuf> {
    static READY: OnceLock<Option<PathBuf>> = OnceLock::new();
    READY
        .get_or_init(|| {
            let python = Command::new("python3")
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if !python.is_ok_and(|s| s.success()) {
                return None;
            }
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(REDIS_PY.replace("==", "-"));
            if !dir.join("redis").join("lock.py").exists() {
                let status = Command::new("python3")
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                    ])
                    .args(["--no-warn-script-location", "--target"])
                    .arg(&dir)
                    .arg(REDIS_PY)
                    .env("PIP_ROOT_USER_ACTION", "ignore")
                    .status()
                    .expect("run pip");
                assert!(status.success(), "pip install {REDIS_PY} failed: {status}");
            }
            Some(dir)
        })
        .as_ref()
}

/// Runs the script against the server on `port` in RESP `protocol`; returns its transcript.
fn transcript(deps: &Path, port: u16, protocol: u8) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/redis_py_locks.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(port.to_string())
        .arg(protocol.to_string())
        .env("PYTHONPATH", deps)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "redis-py script failed on port {port}, RESP{protocol}: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.trim().to_string()
}

#[test]
fn redis_py_locks_behave_the_same_on_latchkey_and_redis() {
    let Some(deps) = redis_py() else {
        eprintln!("python3 is not installed: skipping the redis-py test");
        return;
    };
    let latchkey = Server::builder().start_blocking().expect("latchkey");
    let redis = RedisProcess::spawn(&[]);
    let mut runs = Vec::new();
    for protocol in [2, 3] {
        runs.push((
            format!("redis-server, RESP{protocol}"),
            transcript(deps, redis.addr().port(), protocol),
        ));
        runs.push((
            format!("latchkey, RESP{protocol}"),
            transcript(deps, latchkey.addr().port(), protocol),
        ));
    }
    // What the script saw is what a lock user relies on, whatever the server.
    let (_, reference) = &runs[0];
    for expected in [
        r#"["held", true, true, false]"#,
        r#"["stale release refused", "LockNotOwnedError"]"#,
        r#"["waiter got it", true]"#,
        r#"["counter", "100"]"#,
        r#"["fence after SCRIPT FLUSH", 2]"#,
        r#"["watch conflict", "100"]"#,
        r#"["message", "message", "unlock", "job"]"#,
    ] {
        assert!(
            reference.contains(expected),
            "{expected} not in {reference}"
        );
    }
    for (name, seen) in &runs[1..] {
        assert_eq!(seen, reference, "{name} differs from {}", runs[0].0);
    }
}
