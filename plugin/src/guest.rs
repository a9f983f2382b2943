//! Finding (and if need be building) the components tenants run: the lock client, the guests
//! the tests use (the misbehaving one, and ones written only against `wasi:keyvalue` and the
//! lease proposal), and the example tenants of `docs/TENANTS.md` in Rust and JavaScript.
//!
//! A nested cargo must not share the outer build's target directory (it would wait on the
//! outer cargo's lock forever), nor inherit its `CARGO_ENCODED_RUSTFLAGS`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR");
    c
}

/// The newest modification time of any file under `path`.
fn newest(path: &Path) -> Option<SystemTime> {
    let meta = path.metadata().ok()?;
    if !meta.is_dir() {
        return meta.modified().ok();
    }
    std::fs::read_dir(path)
        .ok()?
        .filter_map(|e| newest(&e.ok()?.path()))
        .max()
}

/// The lock-client component: the workspace's own `cargo build -p latchkey-client --target
/// wasm32-wasip2` output when it is newer than every source of the client (the README's test
/// command builds it just before the tests), else a build of its own (in a target directory of
/// its own, which cargo keeps up to date), so a WIT or client change is never run stale.
pub fn component_path() -> std::io::Result<PathBuf> {
    let root = root();
    let sources = ["wasm-client", "Cargo.toml", "Cargo.lock"]
        .iter()
        .filter_map(|p| newest(&root.join(p)))
        .max();
    for profile in ["debug", "release"] {
        let p = root.join(format!(
            "target/wasm32-wasip2/{profile}/latchkey_client.wasm"
        ));
        if p.metadata().and_then(|m| m.modified()).ok() > sources {
            return Ok(p);
        }
    }
    build_wasm(
        &["-p", "latchkey-client"],
        "component-build",
        "latchkey_client",
        "the latchkey-client component",
    )
}

/// The rogue guest (`plugin/rogue`: spins, allocates without bound, traps holding a lock),
/// built for wasm32-wasip2. It is a workspace of its own, so the native build never sees it;
/// cargo rebuilds it only when its sources change.
pub fn rogue_path() -> std::io::Result<PathBuf> {
    build_wasm(
        &["--manifest-path", "plugin/rogue/Cargo.toml"],
        GUEST_BUILD,
        "latchkey_rogue",
        "the rogue guest",
    )
}

/// The foreign `wasi:keyvalue` guest (`plugin/kv-guest`: written only against the upstream
/// WIT, no latchkey crate), built for wasm32-wasip2 like [`rogue_path`].
pub fn kv_guest_path() -> std::io::Result<PathBuf> {
    build_wasm(
        &["--manifest-path", "plugin/kv-guest/Cargo.toml"],
        GUEST_BUILD,
        "latchkey_kv_guest",
        "the wasi:keyvalue guest",
    )
}

/// The guest of the `latchkey:lease` proposal (`plugin/lease-guest`: written only against
/// `plugin/wit/lease` and `wasi:keyvalue/store`), built for wasm32-wasip2 like [`rogue_path`].
pub fn lease_guest_path() -> std::io::Result<PathBuf> {
    build_wasm(
        &["--manifest-path", "plugin/lease-guest/Cargo.toml"],
        GUEST_BUILD,
        "latchkey_lease_guest",
        "the lease guest",
    )
}

/// The guest of the earlier `wasi:keyvalue@0.2.0-draft` (`plugin/kv-draft-guest`: written only
/// against `plugin/wit/keyvalue-draft`), built for wasm32-wasip2 like [`rogue_path`].
pub fn kv_draft_guest_path() -> std::io::Result<PathBuf> {
    build_wasm(
        &["--manifest-path", "plugin/kv-draft-guest/Cargo.toml"],
        GUEST_BUILD,
        "latchkey_kv_draft_guest",
        "the wasi:keyvalue 0.2.0-draft guest",
    )
}

/// The example tenant in Rust (`plugin/tenant-rs`, `docs/TENANTS.md`), built by the very command
/// the walkthrough gives: `cargo build --manifest-path plugin/tenant-rs/Cargo.toml --target
/// wasm32-wasip2 --release`, into the tenant's own `target/`.
pub fn tenant_rs_path() -> std::io::Result<PathBuf> {
    let root = root();
    let status = cargo()
        .current_dir(&root)
        .args([
            "build",
            "-q",
            "--manifest-path",
            "plugin/tenant-rs/Cargo.toml",
        ])
        .args(["--target", "wasm32-wasip2", "--release"])
        .status()?;
    if !status.success() {
        return Err(std::io::Error::other("building plugin/tenant-rs failed"));
    }
    Ok(root.join("plugin/tenant-rs/target/wasm32-wasip2/release/tenant_rs.wasm"))
}

/// The example tenant in JavaScript (`plugin/tenant-js`, `docs/TENANTS.md`), made by the
/// walkthrough's commands: `npm ci` (the committed lockfile's componentize-js) when its
/// `node_modules` lacks componentize-js, then `npm run build` when `tenant_js.wasm` is missing or
/// older than a source (`tenant.js`, `wit/`, `package.json`, the lockfile). Needs `node` and
/// `npm`.
pub fn tenant_js_path() -> std::io::Result<PathBuf> {
    let dir = root().join("plugin/tenant-js");
    let npm = |args: &[&str]| -> std::io::Result<()> {
        let status = Command::new("npm").current_dir(&dir).args(args).status()?;
        if !status.success() {
            return Err(std::io::Error::other(format!(
                "`npm {}` in plugin/tenant-js failed",
                args.join(" ")
            )));
        }
        Ok(())
    };
    if !dir
        .join("node_modules/@bytecodealliance/componentize-js")
        .is_dir()
    {
        npm(&["ci", "--no-audit", "--no-fund", "--loglevel=error"])?;
    }
    let out = dir.join("tenant_js.wasm");
    let sources = ["tenant.js", "wit", "package.json", "package-lock.json"]
        .iter()
        .filter_map(|p| newest(&dir.join(p)))
        .max();
    if out.metadata().and_then(|m| m.modified()).ok() <= sources {
        npm(&["run", "build", "--silent"])?;
    }
    Ok(out)
}

/// Where the small test guests (rogue, wasi:keyvalue, lease, keyvalue-draft) are built: one
/// target folder for all of them, so the build scripts and macros they share (wit-bindgen's)
/// are compiled once and kept once, not once per guest (half a gigabyte each).
const GUEST_BUILD: &str = "guest-build";

/// Builds a wasm32-wasip2 component with an inner cargo (`which` selects the package) into
/// `target/<dir>`, and returns where `<artifact>.wasm` lies; `what` names it in the error.
fn build_wasm(which: &[&str], dir: &str, artifact: &str, what: &str) -> std::io::Result<PathBuf> {
    let root = root();
    let own = root.join("target").join(dir);
    let status = cargo()
        .current_dir(&root)
        .args(["build", "-q"])
        .args(which)
        .args(["--target", "wasm32-wasip2", "--target-dir"])
        .arg(&own)
        .status()?;
    if !status.success() {
        return Err(std::io::Error::other(format!("building {what} failed")));
    }
    Ok(own.join(format!("wasm32-wasip2/debug/{artifact}.wasm")))
}
