//! The walkthrough of `docs/TENANTS.md`, run as a newcomer runs it: the example tenant built
//! in Rust (`plugin/tenant-rs`, by the page's `cargo build`) and in JavaScript
//! (`plugin/tenant-js`, by the page's `npm ci` and `npm run build`, componentize-js from the
//! committed lockfile), then both run by the page's `latchkey run`, one after the other as one
//! tenant, on the embedded server and on a real `redis-server`. Without `node` or `npm` the
//! test fails (`scripts/test` installs them).
//!
//! Also here: what `--trap-unknown-imports` (`HostConfig::trap_unknown_imports`) lets through
//! and what it does not.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use latchkey_plugin::guest::{tenant_js_path, tenant_rs_path};
use latchkey_plugin::{Backend, Host, HostConfig, Limits};
use latchkey_server::Server;
use latchkey_testkit::require_tool;

/// Where the compiled tenants are cached between runs (the JavaScript one is 12 MB of wasm:
/// compiling it takes seconds, reading it back does not).
fn cache() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/tenant-cache")
}

/// The two tenants, built once per test process (two tests building at once would run two
/// `npm ci` in one folder); the guard also keeps the two tests' `latchkey run`s apart, so that a
/// cold cache compiles the JavaScript tenant once.
fn tenants() -> (std::sync::MutexGuard<'static, ()>, PathBuf, PathBuf) {
    static ONE: Mutex<()> = Mutex::new(());
    static BUILT: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    let guard = ONE.lock().unwrap_or_else(|e| e.into_inner());
    require_tool("node", "apt-get install nodejs npm");
    require_tool("npm", "apt-get install npm");
    let (rs, js) = BUILT.get_or_init(|| {
        (
            tenant_rs_path().expect("plugin/tenant-rs builds"),
            tenant_js_path().expect("plugin/tenant-js builds"),
        )
    });
    (guard, rs.clone(), js.clone())
}

/// The `latchkey` binary: cargo's build of it, or `LATCHKEY_BIN` (one you built and copied
/// yourself, when several checkouts share a target directory and may overwrite cargo's).
fn latchkey() -> Command {
    Command::new(std::env::var_os("LATCHKEY_BIN").unwrap_or(env!("CARGO_BIN_EXE_latchkey").into()))
}

/// `latchkey run` with `args`: its stdout, after checking it succeeded.
fn latchkey_run(args: &[&str], components: &[&PathBuf]) -> String {
    let out = latchkey()
        .arg("run")
        .arg("--cache")
        .arg(cache())
        .args(args)
        .args(components)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// What the walkthrough says the two rounds print, the Rust tenant first.
const EXPECTED: &str = "\
tenant_rs.wasm: open no/such: no-such-store
tenant_rs.wasm: lease: fence 1
tenant_rs.wasm: visits: 1
tenant_rs.wasm: log: rust;
tenant_rs.wasm: seen: seen-by-rust=yes seen-by-js=none
tenant_rs.wasm: keys: log,seen-by-rust,visits
tenant_rs.wasm: released: true
tenant_js.wasm: open no/such: no-such-store
tenant_js.wasm: lease: fence 2
tenant_js.wasm: visits: 2
tenant_js.wasm: log: rust;js;
tenant_js.wasm: seen: seen-by-rust=yes seen-by-js=yes
tenant_js.wasm: keys: log,seen-by-js,seen-by-rust,visits
tenant_js.wasm: released: true
";

#[test]
fn the_walkthroughs_tenants_in_rust_and_javascript_share_a_bucket_on_both_backends() {
    let (_one, rs, js) = tenants();
    // The embedded server: the page's command as it is.
    let text = latchkey_run(&["--trap-unknown-imports"], &[&rs, &js]);
    assert_eq!(text, EXPECTED);
    // A real redis-server: the same lines, and the bucket is inside the tenant's namespace.
    let redis = common::RedisProcess::spawn();
    let url = redis.url();
    let text = latchkey_run(
        &[
            "--trap-unknown-imports",
            "--redis",
            &url,
            "--tenant",
            "shop",
        ],
        &[&rs, &js],
    );
    assert_eq!(text, EXPECTED);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let admin = <dyn Backend>::redis(&url).await.unwrap();
        let visits = admin
            .command(vec![
                b"HGET".to_vec(),
                b"{shop:kv:main}".to_vec(),
                b"visits".to_vec(),
            ])
            .await
            .unwrap();
        assert_eq!(visits, latchkey_client::Reply::Bulk(b"2".to_vec()));
    });
}

#[test]
fn a_javascript_tenant_needs_the_flag_and_the_rust_one_does_not() {
    let (_one, rs, js) = tenants();
    // The Rust tenant imports only what the host serves.
    let text = latchkey_run(&[], &[&rs]);
    assert!(text.contains("tenant_rs.wasm: released: true"), "{text}");
    // componentize-js's runtime imports wasi:http/types: refused without the flag, and said so.
    let out = latchkey()
        .arg("run")
        .arg("--cache")
        .arg(cache())
        .arg(&js)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("wasi:http/types"), "{err}");
    assert!(err.contains("--trap-unknown-imports"), "{err}");
}

/// A component importing an interface of a package the host does not serve (`acme:thing`),
/// calling it from its `run` export when `call` is true.
fn foreign(call: bool) -> Vec<u8> {
    let body = if call { "call $poke" } else { "nop" };
    wat::parse_str(format!(
        r#"(component
            (import "acme:thing/api@1.0.0" (instance $api (export "poke" (func))))
            (core func $poke (canon lower (func $api "poke")))
            (core module $m
                (import "" "poke" (func $poke))
                (func (export "run") {body}))
            (core instance $i (instantiate $m (with "" (instance (export "poke" (func $poke))))))
            (func (export "run") (canon lift (core func $i "run"))))"#
    ))
    .unwrap()
}

/// A component importing `wasi:keyvalue/store` in a shape the host does not serve.
fn misshapen_keyvalue() -> Vec<u8> {
    wat::parse_str(
        r#"(component
            (import "wasi:keyvalue/store@0.2.0-draft2" (instance $s (export "open" (func))))
            (core func $open (canon lower (func $s "open")))
            (core module $m (import "" "open" (func)) (func (export "run")))
            (core instance $i (instantiate $m (with "" (instance (export "open" (func $open))))))
            (func (export "run") (canon lift (core func $i "run"))))"#,
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_imports_trap_when_called_and_served_packages_stay_checked() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let host = |trap: bool| {
        Host::new(
            <dyn Backend>::local(&server),
            HostConfig {
                pool_instances: 0,
                trap_unknown_imports: trap,
                limits: Limits::default(),
                ..HostConfig::default()
            },
        )
        .unwrap()
    };
    let strict = host(false);
    let lenient = host(true);
    // By default an unknown import is refused at load, by name.
    let e = strict.load_bytes(&foreign(false)).err().expect("refused");
    assert!(format!("{e:#}").contains("acme:thing/api@1.0.0"), "{e:#}");
    // With the flag it loads; a tenant that never calls it runs, one that calls it traps
    // (its own error), and the host carries on.
    let quiet = lenient.load_bytes(&foreign(false)).unwrap();
    let mut inst = lenient.tenant("t").instantiate(&quiet).await.unwrap();
    inst.call::<(), ()>("run", ()).await.unwrap();
    let loud = lenient.load_bytes(&foreign(true)).unwrap();
    let mut inst = lenient.tenant("t").instantiate(&loud).await.unwrap();
    let trapped = inst.call::<(), ()>("run", ()).await.unwrap_err();
    assert!(
        trapped
            .to_string()
            .contains("`acme:thing/api@1.0.0#poke` is not served by this host"),
        "{trapped}"
    );
    let mut again = lenient.tenant("t").instantiate(&quiet).await.unwrap();
    again.call::<(), ()>("run", ()).await.unwrap();
    // A package the host serves is never stubbed: a wrong shape is refused either way.
    for h in [&strict, &lenient] {
        let e = h.load_bytes(&misshapen_keyvalue()).err().expect("refused");
        assert!(
            format!("{e:#}").contains("wasi:keyvalue/store@0.2.0-draft2"),
            "{e:#}"
        );
    }
}
