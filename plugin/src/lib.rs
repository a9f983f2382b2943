//! latchkey-plugin: the wasmtime host that runs tenants built on the latchkey-client component.
//!
//! Each tenant is a namespace: every key and channel its component touches is rewritten under
//! the tenant's name (inside the hash tag, so a lock's keys still share a Cluster slot), only
//! an allow-list of commands passes, and scripts pass only when they are the lock client's own
//! (by SHA1). The backend is the latchkey server in-process.
//!
//! This first host is synchronous: a tenant's host call blocks the calling thread until the
//! server answers. Async suspension, CPU and memory bounds, the pooling allocator, the on-disk
//! compilation cache, real-Redis backends and the lease keeper are the next steps.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use latchkey_server::server::Shared;
use latchkey_server::{Frame, LocalClient, PushStream};
use sha1::{Digest, Sha1};
use tokio::runtime::Handle;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

wasmtime::component::bindgen!({
    world: "lock-client",
    path: "../wasm-client/wit",
});

pub use exports::latchkey::locks::locks::{Extended, Lease, Released};
use latchkey::locks::redis::Frame as WitFrame;

/// What a tenant may run, and how its arguments are namespaced.
#[derive(Debug, Clone)]
pub struct Namespace {
    tenant: String,
    scripts: Arc<HashSet<String>>,
}

/// Commands a tenant's component may send (plus the lock client's own scripts).
const ALLOWED: &[&str] = &[
    "get", "set", "del", "exists", "pttl", "pexpire", "hget", "time", "wait", "eval", "evalsha",
];

impl Namespace {
    /// The namespace of `tenant` (letters, digits, `-` and `_`).
    pub fn new(tenant: &str) -> Namespace {
        let scripts = latchkey_client::scripts::all()
            .iter()
            .map(|s| s.sha().to_string())
            .collect();
        Namespace {
            tenant: tenant.to_string(),
            scripts: Arc::new(scripts),
        }
    }

    /// A key or channel inside the namespace: `{name}rest` becomes `{tenant:name}rest` (same
    /// hash tag for every key of a lock), anything else `tenant:key`.
    pub fn key(&self, key: &[u8]) -> Vec<u8> {
        if key.first() == Some(&b'{') && key.contains(&b'}') {
            let mut k = format!("{{{}:", self.tenant).into_bytes();
            k.extend_from_slice(&key[1..]);
            k
        } else {
            let mut k = format!("{}:", self.tenant).into_bytes();
            k.extend_from_slice(key);
            k
        }
    }

    /// Checks a command against the allow-list and rewrites its keys; the error is what the
    /// tenant is told.
    pub fn rewrite(&self, mut args: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, String> {
        let name =
            String::from_utf8_lossy(args.first().ok_or("empty command")?).to_ascii_lowercase();
        if !ALLOWED.contains(&name.as_str()) {
            return Err(format!("command '{name}' is not allowed for tenants"));
        }
        let keys: Vec<usize> = match name.as_str() {
            "eval" | "evalsha" => {
                let sha = if name == "eval" {
                    hex::encode(Sha1::digest(&args[1]))
                } else {
                    String::from_utf8_lossy(&args[1]).to_ascii_lowercase()
                };
                if !self.scripts.contains(&sha) {
                    return Err("only the lock client's own scripts may run".into());
                }
                let n: usize = std::str::from_utf8(args.get(2).ok_or("missing numkeys")?)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or("bad numkeys")?;
                (3..3 + n).filter(|i| *i < args.len()).collect()
            }
            _ => {
                let spec =
                    latchkey_server::cmd::lookup(name.as_bytes()).ok_or("unknown command")?;
                spec.key_positions(args.len())
            }
        };
        for i in keys {
            args[i] = self.key(&args[i]);
        }
        Ok(args)
    }
}

/// The state of one tenant's store.
pub struct TenantState {
    wasi: WasiCtx,
    table: ResourceTable,
    ns: Namespace,
    shared: Arc<Shared>,
    rt: Handle,
    client: LocalClient,
    subs: HashMap<u64, (LocalClient, PushStream)>,
    next_sub: u64,
}

impl WasiView for TenantState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

fn flatten(f: Frame, out: &mut Vec<WitFrame>) {
    match f {
        Frame::Null | Frame::NullArray => out.push(WitFrame::Nil),
        Frame::Integer(i) => out.push(WitFrame::Integer(i)),
        Frame::Bulk(b) | Frame::Verbatim(b) | Frame::Raw(b) => out.push(WitFrame::Bulk(b.to_vec())),
        Frame::Simple(s) => out.push(WitFrame::Status(String::from_utf8_lossy(&s).into_owned())),
        Frame::Error(e) => out.push(WitFrame::Error(String::from_utf8_lossy(&e).into_owned())),
        Frame::Double(d) => out.push(WitFrame::Double(d)),
        Frame::Boolean(b) => out.push(WitFrame::Boolean(b)),
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) | Frame::Multi(v) => {
            out.push(WitFrame::Array(v.len() as u32));
            for f in v {
                flatten(f, out);
            }
        }
        Frame::Map(m) => {
            out.push(WitFrame::Pairs(m.len() as u32));
            for (k, v) in m {
                flatten(k, out);
                flatten(v, out);
            }
        }
    }
}

impl latchkey::locks::redis::Host for TenantState {
    fn command(&mut self, args: Vec<Vec<u8>>) -> Result<Vec<WitFrame>, String> {
        let args = self.ns.rewrite(args)?;
        let reply = self
            .rt
            .block_on(self.client.cmd(args.into_iter().map(Bytes::from)));
        let mut out = Vec::new();
        flatten(reply, &mut out);
        Ok(out)
    }

    fn subscribe(&mut self, channel: Vec<u8>) -> Result<u64, String> {
        let channel = self.ns.key(&channel);
        let mut c = LocalClient::new(self.shared.clone());
        let pushes = c.take_pushes();
        self.rt.block_on(c.cmd([b"SUBSCRIBE".to_vec(), channel]));
        self.next_sub += 1;
        self.subs.insert(self.next_sub, (c, pushes));
        Ok(self.next_sub)
    }

    fn wait_message(&mut self, subscription: u64, timeout_ms: u64) -> bool {
        let Some((_, pushes)) = self.subs.get_mut(&subscription) else {
            return false;
        };
        self.rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(timeout_ms), async {
                while let Some(f) = pushes.recv().await {
                    if let Frame::Push(items) = &f {
                        if items.first() == Some(&Frame::bulk("message")) {
                            return true;
                        }
                    }
                }
                false
            })
            .await
            .unwrap_or(false)
        })
    }

    fn unsubscribe(&mut self, subscription: u64) {
        self.subs.remove(&subscription);
    }

    fn sleep(&mut self, ms: u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// Loads the lock-client component once and starts tenants of it.
pub struct Host {
    engine: Engine,
    component: Component,
    linker: Linker<TenantState>,
    shared: Arc<Shared>,
    rt: Handle,
}

/// A running tenant: its store and its instance of the component.
pub struct Tenant {
    store: Store<TenantState>,
    bindings: LockClient,
}

impl Host {
    /// Compiles `component` and links it against the in-process server behind `shared`. `rt`
    /// is the runtime the server runs on.
    pub fn new(component: &Path, shared: Arc<Shared>, rt: Handle) -> wasmtime::Result<Host> {
        let engine = Engine::default();
        let component = Component::from_file(&engine, component)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        LockClient::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
        Ok(Host {
            engine,
            component,
            linker,
            shared,
            rt,
        })
    }

    /// Starts a tenant in its own namespace.
    pub fn tenant(&self, name: &str) -> wasmtime::Result<Tenant> {
        let state = TenantState {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            ns: Namespace::new(name),
            shared: self.shared.clone(),
            rt: self.rt.clone(),
            client: LocalClient::new(self.shared.clone()),
            subs: HashMap::new(),
            next_sub: 0,
        };
        let mut store = Store::new(&self.engine, state);
        let bindings = LockClient::instantiate(&mut store, &self.component, &self.linker)?;
        Ok(Tenant { store, bindings })
    }
}

impl Tenant {
    /// Tries to take the simple lock `name` for `ttl`.
    pub fn try_lock(
        &mut self,
        name: &str,
        ttl: Duration,
    ) -> wasmtime::Result<Result<Option<Lease>, String>> {
        let locks = self.bindings.latchkey_locks_locks().simple_lock();
        let lock = locks.call_constructor(&mut self.store, name)?;
        let r = locks.call_try_acquire(&mut self.store, lock, ttl.as_millis() as u64)?;
        lock.resource_drop(&mut self.store)?;
        Ok(r)
    }

    /// Takes the simple lock `name`, waiting up to `deadline`.
    pub fn lock_wait(
        &mut self,
        name: &str,
        ttl: Duration,
        deadline: Duration,
    ) -> wasmtime::Result<Result<Option<Lease>, String>> {
        let locks = self.bindings.latchkey_locks_locks().simple_lock();
        let lock = locks.call_constructor(&mut self.store, name)?;
        let r = locks.call_acquire_wait(
            &mut self.store,
            lock,
            ttl.as_millis() as u64,
            deadline.as_millis() as u64,
        )?;
        lock.resource_drop(&mut self.store)?;
        Ok(r)
    }

    /// Releases a lease of the simple lock `name`.
    pub fn unlock(
        &mut self,
        name: &str,
        lease: Lease,
    ) -> wasmtime::Result<Result<Released, String>> {
        let locks = self.bindings.latchkey_locks_locks().simple_lock();
        let lock = locks.call_constructor(&mut self.store, name)?;
        let r = locks.call_release(&mut self.store, lock, &lease)?;
        lock.resource_drop(&mut self.store)?;
        Ok(r)
    }

    /// Takes the fenced lock `name`: its lease and fencing token.
    pub fn try_fenced(
        &mut self,
        name: &str,
        ttl: Duration,
    ) -> wasmtime::Result<Result<Option<(Lease, i64)>, String>> {
        let locks = self.bindings.latchkey_locks_locks().fenced_lock();
        let lock = locks.call_constructor(&mut self.store, name)?;
        let r = locks.call_try_acquire(&mut self.store, lock, ttl.as_millis() as u64)?;
        lock.resource_drop(&mut self.store)?;
        Ok(r)
    }
}

/// Where the component built by `cargo build -p latchkey-client --target wasm32-wasip2` lies
/// (debug, then release); builds it (in a target directory of its own, so that a surrounding
/// cargo's lock is not waited on) when neither exists.
pub fn component_path() -> std::io::Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for profile in ["debug", "release"] {
        let p = root.join(format!(
            "target/wasm32-wasip2/{profile}/latchkey_client.wasm"
        ));
        if p.exists() {
            return Ok(p);
        }
    }
    let own = root.join("target/component-build");
    let status =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(&root)
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .args([
                "build",
                "-q",
                "-p",
                "latchkey-client",
                "--target",
                "wasm32-wasip2",
                "--target-dir",
            ])
            .arg(&own)
            .status()?;
    if !status.success() {
        return Err(std::io::Error::other(
            "building the latchkey-client component failed",
        ));
    }
    Ok(own.join("wasm32-wasip2/debug/latchkey_client.wasm"))
}
