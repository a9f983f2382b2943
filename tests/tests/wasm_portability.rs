//! The lock-client component in a second, non-wasmtime host: Node.js, through `jco transpile`.
//!
//! The component is built for `wasm32-wasip2`, transpiled by jco into JavaScript plus core
//! wasm, and run by `node` with `jco/redis-host.js` as its `redis` import (RESP over TCP to a
//! real server, made synchronous with a worker thread and `Atomics.wait`). The script
//! `jco/scenario.js` drives every exported lock and prints what it sees; this test checks those
//! lines, and at each `pause` line looks at the server's own state while the lock is held
//! before letting the script go on.
//!
//! The npm packages are installed from the committed lockfile (`npm ci`) into
//! `tests/jco/node_modules` on the first run. Without `node` or `npm` on the machine the test
//! fails and says what to install.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use latchkey_server::Server;
use latchkey_tests::{require_tool, RawConn, RedisProcess};

/// The folder of the Node host: package.json, lockfile, the JS host and the scenario.
fn jco_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jco")
}

/// Runs a set-up command in `dir`, failing the test with its name if it fails.
fn run(cmd: &mut Command, what: &str) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    assert!(status.success(), "{what} failed: {status}");
}

/// Installs the npm packages if missing and transpiles the component if it changed; once per
/// test process. Fails the test when node or npm is absent.
fn setup() -> &'static PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY.get_or_init(|| {
        require_tool("node", "apt-get install nodejs npm");
        require_tool("npm", "apt-get install npm");
        let dir = jco_dir();
        if !dir
            .join("node_modules/@bytecodealliance/jco-transpile")
            .exists()
        {
            // `npm ci`: exactly the versions of the committed lockfile, which names the
            // native builds of jco's optional packages for every platform.
            run(
                Command::new("npm").current_dir(&dir).args([
                    "ci",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                ]),
                "npm ci",
            );
        }
        let component = latchkey_plugin::component_path().expect("the latchkey-client component");
        // Transpile again whenever the component changed: out/source names the one it was
        // made from (path and modification time).
        let stamp = dir.join("out/source");
        let source = format!(
            "{} {:?}",
            component.display(),
            component.metadata().and_then(|m| m.modified()).ok()
        );
        if std::fs::read_to_string(&stamp).ok().as_deref() != Some(source.as_str()) {
            run(
                Command::new("node")
                    .current_dir(&dir)
                    .arg("transpile.js")
                    .arg(&component),
                "jco transpile",
            );
            std::fs::write(&stamp, source).expect("write out/source");
        }
        dir
    })
}

/// One GET, as the text of the bulk string, or `None` for nil.
fn get(conn: &mut RawConn, args: &[&str]) -> Option<String> {
    let reply = String::from_utf8(conn.cmd(args)).expect("utf-8 reply");
    let (head, body) = reply.split_once("\r\n").expect("a RESP line");
    match head.as_bytes()[0] {
        b'$' if head == "$-1" => None,
        b'$' => Some(body.trim_end_matches("\r\n").to_string()),
        b':' => Some(head[1..].to_string()),
        _ => panic!("unexpected reply {reply:?}"),
    }
}

/// Runs the scenario in node against the server at `addr`; checks the server at each pause
/// and returns the printed lines by label.
fn run_scenario(dir: &Path, addr: SocketAddr) -> HashMap<String, Vec<String>> {
    let mut node = Command::new("node")
        .current_dir(dir)
        .arg("scenario.js")
        .arg(addr.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start node");
    let mut to_node = node.stdin.take().unwrap();
    let from_node = BufReader::new(node.stdout.take().unwrap());
    let mut server = RawConn::connect(addr).expect("connect to the server");
    let mut seen = HashMap::new();
    for line in from_node.lines() {
        let line = line.expect("read node's output");
        let mut words: Vec<String> = line.split(' ').map(String::from).collect();
        if words[0] == "pause" {
            words.remove(0);
            check_while_held(&mut server, &words);
            writeln!(to_node, "go").expect("resume node");
        }
        let label = words.remove(0);
        seen.insert(label, words);
    }
    let status = node.wait().expect("node exits");
    assert!(
        status.success(),
        "node failed ({status}); it printed {seen:?}"
    );
    seen
}

/// What the server must hold while the scenario is paused with a lock taken.
fn check_while_held(server: &mut RawConn, words: &[String]) {
    match words[0].as_str() {
        "simple-held" => {
            let (key, token) = (&words[1], &words[2]);
            assert_eq!(key, "{jco-simple}");
            assert_eq!(get(server, &["GET", key]).as_ref(), Some(token));
            let ttl: i64 = get(server, &["PTTL", key]).unwrap().parse().unwrap();
            assert!(ttl > 0 && ttl <= 30_000, "PTTL {ttl}");
        }
        "reentrant" => {
            // The owner's count in the lock's hash, as node's resumed handle reported it.
            let (owner, count) = (&words[1], &words[2]);
            assert_eq!(count, "2");
            assert_eq!(
                get(server, &["HGET", "{jco-re}", owner]).as_ref(),
                Some(count)
            );
        }
        "multi-held" => {
            let token = &words[1];
            assert_eq!(&words[2..], ["{jco-a}", "{jco-b}"]);
            for key in &words[2..] {
                assert_eq!(get(server, &["GET", key]).as_ref(), Some(token), "{key}");
            }
        }
        "redlock-held" => {
            // nodes, quorum, granted, validity > 0, token: one node, held there, extended.
            assert_eq!(words[1..5], ["1", "1", "1", "true"]);
            assert_eq!(get(server, &["GET", "{jco-red}"]).as_ref(), Some(&words[5]));
            let ttl: i64 = get(server, &["PTTL", "{jco-red}"])
                .unwrap()
                .parse()
                .unwrap();
            assert!(
                ttl > 30_000 && ttl <= 60_000,
                "PTTL {ttl} after the extension"
            );
        }
        other => panic!("unknown pause {other}"),
    }
}

/// Every lock's observations, and the server's state once the scenario is over.
fn check_scenario(seen: &HashMap<String, Vec<String>>, server: SocketAddr) {
    let line = |label: &str| {
        seen.get(label)
            .unwrap_or_else(|| panic!("node never printed {label}: {seen:?}"))
            .join(" ")
    };
    assert!(seen.contains_key("done"), "{seen:?}");
    assert_eq!(line("simple-second"), "refused");
    assert_eq!(line("simple-holder"), seen["simple-held"][1]);
    assert_eq!(line("simple-extend"), "extended true");
    assert_eq!(line("simple-release"), "released already-expired");
    assert_eq!(line("simple-wait-deadline"), "gave-up");
    assert_eq!(line("simple-wait-expiry"), "taken");
    assert_eq!(line("fenced-refused"), "true");
    let fences: Vec<i64> = seen["fenced"].iter().map(|f| f.parse().unwrap()).collect();
    assert!(fences[1] > fences[0], "fencing tokens {fences:?}");
    assert_eq!(
        seen["reentrant"][1..],
        ["2", "acquired", "acquired", "held"]
    );
    assert_eq!(line("reentrant-renew"), "true false");
    assert_eq!(line("reentrant-release"), "not-owner still-held released");
    assert_eq!(line("reentrant-after"), "0 acquired released");
    assert_eq!(line("rw"), "read true write true true false");
    assert_eq!(line("multi-while-one-held"), "true");
    assert_eq!(line("multi-release"), "2");
    assert_eq!(line("semaphore"), "permit,permit,none true");
    assert_eq!(line("replicated"), "not-replicated 0 confirmed released");
    assert_eq!(line("fair"), "true queued released");
    assert_eq!(line("redlock"), "true 1 true 1 0");

    let mut conn = RawConn::connect(server).expect("connect to the server");
    assert_eq!(
        get(&mut conn, &["GET", "{jco-fenced}:fence"]),
        Some(fences[1].to_string()),
        "the server's fence counter is the last token node was given"
    );
    for released in [
        "{jco-simple}",
        "{jco-re}",
        "{jco-rw}",
        "{jco-a}",
        "{jco-b}",
        "{jco-red}",
    ] {
        assert_eq!(
            get(&mut conn, &["EXISTS", released]).unwrap(),
            "0",
            "{released}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_component_runs_in_node_against_latchkey() {
    let dir = setup();
    let server = Server::builder().start().await.expect("start latchkey");
    let addr = server.addr();
    let dir = dir.clone();
    let seen = tokio::task::spawn_blocking(move || run_scenario(&dir, addr))
        .await
        .unwrap();
    check_scenario(&seen, addr);
    server.shutdown().await;
}

#[test]
fn the_component_runs_in_node_against_real_redis() {
    let dir = setup();
    let redis = RedisProcess::spawn(&[]);
    let seen = run_scenario(dir, redis.addr());
    check_scenario(&seen, redis.addr());
}

#[test]
fn an_unreachable_server_is_a_clear_error_in_node() {
    let dir = setup();
    // A free port that nobody listens on: the import's `command` answers `err`, which the
    // component passes on as the `err` of `try-acquire`, which jco throws.
    let addr = format!("127.0.0.1:{}", latchkey_tests::redis_proc::free_port());
    let out = Command::new("node")
        .current_dir(dir)
        .args(["scenario.js", &addr])
        .stdin(Stdio::null())
        .output()
        .expect("run node");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "nothing was observed");
    assert!(
        stderr.contains("transport error: command: connect ECONNREFUSED"),
        "{stderr}"
    );
}
