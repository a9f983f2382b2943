//! Lock code written for real Redis, unchanged, against latchkey. This is what someone testing
//! their Redis-lock code hermetically does: point the client library they already use at
//! latchkey.
//!
//! - redis-py's own lock (`redis.lock.Lock`): waiting, extending, the token checks after
//!   expiry, contention between threads; registered scripts with their `NOSCRIPT` fallback,
//!   `WATCH` transactions and pub/sub. `py/redis_py_locks.py` runs against a latchkey server
//!   and a `redis-server`, each in RESP2 and RESP3.
//! - The npm `redlock` package over `ioredis` on three independent servers: acquire, refuse,
//!   extend, release, several resources at once, a stale holder refused, and `using` with its
//!   automatic extension. `node/redlock.mjs` runs against three latchkey servers and three
//!   `redis-server`s.
//!
//! Each script asserts every step itself and prints what it observed; the transcripts from
//! latchkey and from redis-server must be the same.
//!
//! redis-py and the npm packages (pinned versions) are installed on the first run, with pip into
//! a virtual environment in the test's scratch folder and with `npm ci` (the committed lockfile)
//! into `node/node_modules`. Without `python3` (and its `venv`), or `node` and `npm`, the test
//! concerned fails and says what to install: a test that cannot run never passes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use latchkey_server::Server;
use latchkey_tests::{require_tool, RedisProcess};

/// The redis-py release the script is checked with.
const REDIS_PY: &str = "redis==8.1.0";

/// The Python of a virtual environment with redis-py installed (made once, in the test's
/// scratch folder). Fails the test when python3 or its `venv` module is missing.
fn redis_py() -> &'static PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY.get_or_init(|| {
        require_tool("python3", "apt-get install python3 python3-venv");
        let venv = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("venv-{}", REDIS_PY.replace("==", "-")));
        let python = venv.join("bin").join("python3");
        if !venv.join("ready").exists() {
            let status = Command::new("python3")
                .args(["-m", "venv", "--clear"])
                .arg(&venv)
                .status()
                .expect("run python3 -m venv");
            assert!(
                status.success(),
                "python3 -m venv failed ({status}): run `apt-get install python3-venv`"
            );
            let status = Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .arg(REDIS_PY)
                .status()
                .expect("run pip");
            assert!(status.success(), "pip install {REDIS_PY} failed: {status}");
            std::fs::write(venv.join("ready"), REDIS_PY).expect("mark the venv ready");
        }
        python
    })
}

/// Runs a client script, failing the test with its output if it fails; returns its
/// transcript (its standard output, trimmed).
fn run_script(mut cmd: Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.trim().to_string()
}

/// Runs the script against the server on `port` in RESP `protocol`; returns its transcript.
fn transcript(python: &Path, port: u16, protocol: u8) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/redis_py_locks.py");
    let mut cmd = Command::new(python);
    cmd.arg(&script)
        .arg(port.to_string())
        .arg(protocol.to_string())
        .env("PYTHONDONTWRITEBYTECODE", "1");
    run_script(
        cmd,
        &format!("redis-py script on port {port}, RESP{protocol}"),
    )
}

#[test]
fn redis_py_locks_behave_the_same_on_latchkey_and_redis() {
    let python = redis_py();
    let latchkey = Server::builder().start_blocking().expect("latchkey");
    let redis = RedisProcess::spawn(&[]);
    let mut runs = Vec::new();
    for protocol in [2, 3] {
        runs.push((
            format!("redis-server, RESP{protocol}"),
            transcript(python, redis.addr().port(), protocol),
        ));
        runs.push((
            format!("latchkey, RESP{protocol}"),
            transcript(python, latchkey.addr().port(), protocol),
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

/// The folder of the Node scripts, with its packages installed from the committed lockfile
/// (`npm ci`, once). Fails the test when node or npm is missing.
fn node_packages() -> &'static PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY.get_or_init(|| {
        require_tool("node", "apt-get install nodejs npm");
        require_tool("npm", "apt-get install npm");
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("node");
        if !dir.join("node_modules/redlock/package.json").exists() {
            let status = Command::new("npm")
                .current_dir(&dir)
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .status()
                .expect("run npm");
            assert!(status.success(), "npm ci failed: {status}");
        }
        dir
    })
}

/// Runs the RedLock script against the servers on `ports`; returns its transcript.
fn redlock_transcript(dir: &Path, ports: &[u16]) -> String {
    let mut cmd = Command::new("node");
    cmd.current_dir(dir)
        .arg("redlock.mjs")
        .args(ports.iter().map(u16::to_string));
    run_script(cmd, &format!("redlock script on ports {ports:?}"))
}

#[test]
fn npm_redlock_behaves_the_same_on_latchkey_and_redis() {
    let dir = node_packages();
    let latchkeys: Vec<_> = (0..3)
        .map(|_| Server::builder().start_blocking().expect("latchkey"))
        .collect();
    let redises: Vec<_> = (0..3).map(|_| RedisProcess::spawn(&[])).collect();
    let on_redis = redlock_transcript(
        dir,
        &redises.iter().map(|r| r.addr().port()).collect::<Vec<_>>(),
    );
    let on_latchkey = redlock_transcript(
        dir,
        &latchkeys
            .iter()
            .map(|s| s.addr().port())
            .collect::<Vec<_>>(),
    );
    for expected in [
        r#"["acquired",true,1]"#,
        r#"["second acquisition refused",true,1]"#,
        r#"["released",1,[0,0,0]]"#,
        r#"["overlap refused",true]"#,
        r#"["stale extend refused",true]"#,
        r#"["using",false,true,[0,0,0]]"#,
    ] {
        assert!(on_redis.contains(expected), "{expected} not in {on_redis}");
    }
    assert_eq!(on_latchkey, on_redis, "latchkey differs from redis-server");
}
