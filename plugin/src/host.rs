//! The host: one wasmtime [`Engine`] for every tenant, the components it loaded ([`Plugin`]:
//! compiled once, cached on disk, pre-linked as an `InstancePre`), the backend tenants talk to
//! (and the independent servers their quorum locks run on), and the epoch ticker that bounds
//! their CPU.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use sha1::{Digest, Sha1};
use wasmtime::component::{Component, HasSelf, InstancePre, Linker, WasmList};
use wasmtime::{
    AsContext, AsContextMut, Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig,
    StoreContextMut,
};

use crate::backend::Backend;
use crate::bindings::latchkey::locks::redis::{Frame as WitFrame, Host as _};
use crate::bindings::{LockClient, LockClientIndices};
use crate::limits::Limits;
use crate::state::{check_counts, TenantState};

/// How to build a [`Host`].
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Component instances the pooling allocator reserves room for (tenant instances alive at
    /// once); 0 means no pool (every instance allocated on demand).
    pub pool_instances: u32,
    /// Core instances one component may hold: a component is several core instances (the
    /// program, WASI adapters, shims). The pool is sized in core instances:
    /// `pool_instances * core_instances_per_component`.
    pub core_instances_per_component: u32,
    /// Where compiled components are cached (`None`: compile every time).
    pub cache_dir: Option<PathBuf>,
    /// Whether a component may import interfaces of packages this host serves none of (say
    /// `wasi:http`), each function of which then traps when called (as `wasmtime run
    /// --trap-unknown-imports`; see `unknown_imports.rs`). Off by default: such a component
    /// is refused at [`Host::load`], which names the import. A
    /// JavaScript component made by `componentize-js` needs it: its runtime (StarlingMonkey)
    /// imports `wasi:http/types` for `fetch` whether the tenant uses it or not.
    pub trap_unknown_imports: bool,
    /// The bounds every tenant runs under.
    pub limits: Limits,
    /// The clock the lease keeper renews by (every ttl/3 of it). `None`: real time. A
    /// virtual clock lets a simulation (`latchkey lesson`) decide when renewals come due,
    /// and stop them, as a stopped process stops its own.
    pub keeper_clock: Option<latchkey_server::Clock>,
}

impl Default for HostConfig {
    fn default() -> HostConfig {
        HostConfig {
            pool_instances: 1_000,
            core_instances_per_component: 16,
            cache_dir: None,
            trap_unknown_imports: false,
            limits: Limits::default(),
            keeper_clock: None,
        }
    }
}

/// The host-wide parts tenants share.
pub(crate) struct Shared {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<TenantState>,
    pub(crate) backend: Arc<dyn Backend>,
    /// The quorum nodes (`redis.nodes`, `redis.command-all`): never empty.
    pub(crate) nodes: Arc<[Arc<dyn Backend>]>,
    pub(crate) limits: Arc<Limits>,
    /// The lease keeper's clock (`None`: real time).
    pub(crate) keeper_clock: Option<latchkey_server::Clock>,
    /// Each tenant's budget, by name: every `Tenant` of one name shares it, however the
    /// embedder got it.
    pub(crate) budgets:
        std::sync::Mutex<std::collections::HashMap<String, crate::budget::TenantBudget>>,
    pooled: bool,
    cache_dir: Option<PathBuf>,
    trap_unknown_imports: bool,
    stop_ticker: Arc<AtomicBool>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

/// Runs tenants' components against one backend (plus, for quorum locks, the nodes given to
/// [`Host::with_nodes`]). Cheap to clone.
#[derive(Clone)]
pub struct Host {
    pub(crate) shared: Arc<Shared>,
}

/// A loaded component: compiled (or read from the cache) and pre-linked, ready to be
/// instantiated for any number of tenants.
///
/// Everything that does not depend on the instance is done here, once: type-checking the
/// imports against the linker and resolving them (`InstancePre`), and finding the lock
/// client's exports by name (`LockClientIndices`). An instantiation then only builds the
/// instance and type-checks the exports' handles.
#[derive(Clone)]
pub struct Plugin {
    pub(crate) pre: InstancePre<TenantState>,
    /// Where the lock client's exports are in this component: `None` when it is not the lock
    /// client (a `wasi:keyvalue` tenant, the tests' rogue guest).
    pub(crate) locks: Option<LockClientIndices>,
    /// Whether the compiled code came from the disk cache.
    pub from_cache: bool,
    /// Size of the component, in bytes.
    pub size: usize,
}

fn config() -> Config {
    let mut c = Config::new();
    c.wasm_component_model(true);
    c.epoch_interruption(true);
    // Memories keep wasmtime's default reservation (4 GiB of address space plus guard pages,
    // never committed): a 32-bit guest then cannot address outside its reservation, so the
    // compiled code needs no bounds check on loads and stores (an access beyond the memory's
    // size faults and becomes a trap). Reserving only the memory limit instead made every
    // load and store check its bounds: about 10 % more instructions per lock cycle. The
    // memory limit itself is enforced by `StoreLimits` and the pool's `max_memory_size`.
    // With `LATCHKEY_PERFMAP` set, wasmtime writes a perf map (`perf-<pid>.map` in the
    // temporary directory) naming the guest's compiled functions, so that `perf` or a
    // callgrind profile can tell where a tenant's time goes.
    if std::env::var_os("LATCHKEY_PERFMAP").is_some() {
        c.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    c
}

impl Host {
    /// A host sending tenants' commands to `backend`. Tries to reserve the instance pool and
    /// falls back to on-demand allocation when it cannot (see [`Host::pooled`]). Instances
    /// then run on the caller's tokio runtime (the lease keeper spawns its renewals there).
    ///
    /// Tenants' quorum locks (RedLock) run on `backend` alone: one node. For several, see
    /// [`Host::with_nodes`].
    pub fn new(backend: Arc<dyn Backend>, cfg: HostConfig) -> wasmtime::Result<Host> {
        Host::with_nodes(backend, Vec::new(), cfg)
    }

    /// A host sending tenants' commands to `primary`, whose quorum locks (RedLock) run on
    /// `nodes`: independent servers (not replicas of one another), in the order tenants see
    /// them. Include `primary` among them or not, as you like; with no nodes at all, quorum
    /// locks run on `primary` alone, as with [`Host::new`].
    ///
    /// Every node gets exactly what the primary gets: the tenant's namespace and allow-list
    /// applied to each command, each command charged to the tenant's rate limit, and a
    /// timeout (the tenant's own, per call) on each node's answer. Subscriptions and the lease
    /// keeper use the primary only.
    pub fn with_nodes(
        primary: Arc<dyn Backend>,
        nodes: Vec<Arc<dyn Backend>>,
        cfg: HostConfig,
    ) -> wasmtime::Result<Host> {
        let nodes: Arc<[Arc<dyn Backend>]> = if nodes.is_empty() {
            Arc::new([primary.clone()])
        } else {
            nodes.into()
        };
        let mut engine = None;
        if cfg.pool_instances > 0 {
            let n = cfg.pool_instances;
            let per = cfg.core_instances_per_component.max(1);
            let mut pool = PoolingAllocationConfig::new();
            pool.total_component_instances(n)
                .total_core_instances(n.saturating_mul(per))
                .max_core_instances_per_component(per)
                .max_memories_per_component(per.min(cfg.limits.memories.max(1) as u32))
                .max_tables_per_component(per)
                .total_memories(n.saturating_mul(2))
                .total_tables(n.saturating_mul(4))
                .total_stacks(n)
                .max_memory_size(cfg.limits.memory_bytes)
                .table_elements(cfg.limits.table_elements);
            // A slot's tables are zeroed in place when its instance ends, up to a page each,
            // instead of being given back to the kernel: the next instance in the slot (whose
            // start fills a table) then takes no page fault for it. Tables of the lock client
            // fit in a page; a larger table's rest is given back as before. Linear memory
            // keeps the default (given back whole): keeping it resident needs either a memset
            // of the first megabyte (a Rust guest's stack sits below its data), or wasmtime's
            // `pagemap_scan`, which in this version leaves a dirty page that was swapped out
            // unreset for the next tenant (wasmtime PR 14357).
            pool.table_keep_resident(4096);
            let mut c = config();
            c.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
            engine = Engine::new(&c).ok();
        }
        let pooled = engine.is_some();
        let engine = match engine {
            Some(e) => e,
            None => Engine::new(&config())?,
        };
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        LockClient::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)?;
        crate::keyvalue::add_to_linker(&mut linker)?;
        bounded_imports(&mut linker)?;

        // The epoch ticker: a plain thread, so that it ticks even when every runtime worker
        // is busy running guests.
        let stop_ticker = Arc::new(AtomicBool::new(false));
        let (stop, ticking, tick) = (stop_ticker.clone(), engine.clone(), cfg.limits.tick);
        std::thread::Builder::new()
            .name("latchkey-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    ticking.increment_epoch();
                }
            })?;
        Ok(Host {
            shared: Arc::new(Shared {
                engine,
                linker,
                backend: primary,
                nodes,
                limits: Arc::new(cfg.limits),
                keeper_clock: cfg.keeper_clock,
                budgets: Default::default(),
                pooled,
                cache_dir: cfg.cache_dir,
                trap_unknown_imports: cfg.trap_unknown_imports,
                stop_ticker,
            }),
        })
    }

    /// Whether instances come from the pooling allocator (false: the pool could not be
    /// reserved, or none was asked for).
    pub fn pooled(&self) -> bool {
        self.shared.pooled
    }

    /// How many independent servers tenants' quorum locks run on (1 for a host built with
    /// [`Host::new`]).
    pub fn nodes(&self) -> usize {
        self.shared.nodes.len()
    }

    /// The engine every tenant runs in.
    pub fn engine(&self) -> &Engine {
        &self.shared.engine
    }

    /// Loads a component: from the disk cache when it holds this component compiled by a
    /// compatible engine, else compiled (and then cached).
    pub fn load(&self, path: &Path) -> wasmtime::Result<Plugin> {
        let bytes = std::fs::read(path)?;
        self.load_bytes(&bytes)
    }

    /// [`Host::load`] from the component's bytes.
    pub fn load_bytes(&self, bytes: &[u8]) -> wasmtime::Result<Plugin> {
        let engine = &self.shared.engine;
        let (component, from_cache) = match &self.shared.cache_dir {
            None => (Component::new(engine, bytes)?, false),
            Some(dir) => {
                let file = dir.join(cache_name(engine, bytes));
                if file.exists() {
                    // SAFETY: the file was written by `Component::serialize` of an engine with
                    // the same compatibility hash (it is in the name), by this host.
                    (unsafe { Component::deserialize_file(engine, &file)? }, true)
                } else {
                    let c = Component::new(engine, bytes)?;
                    std::fs::create_dir_all(dir)?;
                    // Write then rename, so a concurrent reader never sees half a file.
                    // The name is unique per call: hosts in several threads of one process
                    // may compile the same component at once.
                    static SEQ: AtomicU64 = AtomicU64::new(0);
                    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
                    let tmp = dir.join(format!(".{}-{seq}.tmp", std::process::id()));
                    std::fs::write(&tmp, c.serialize()?)?;
                    std::fs::rename(&tmp, &file)?;
                    (c, false)
                }
            }
        };
        let pre = if self.shared.trap_unknown_imports {
            // A linker of this component's own: the traps never reach another's.
            let mut linker = self.shared.linker.clone();
            crate::unknown_imports::trap_unknown(&mut linker, engine, &component)?;
            linker.instantiate_pre(&component)?
        } else {
            self.shared.linker.instantiate_pre(&component)?
        };
        Ok(Plugin {
            locks: LockClientIndices::new(&pre).ok(),
            pre,
            from_cache,
            size: bytes.len(),
        })
    }
}

/// `<sha1 of the component>-<engine compatibility hash>.cwasm`: a cached file is used only by
/// an engine that can run it and only for the very bytes it was compiled from.
fn cache_name(engine: &Engine, bytes: &[u8]) -> String {
    let mut h = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    format!(
        "{}-{:016x}.cwasm",
        hex::encode(Sha1::digest(bytes)),
        h.finish()
    )
}

/// The imports whose arguments are bounded before the host copies them: `command` and
/// `command-all` take a list of lists, which wasmtime would otherwise copy whole out of the
/// guest before any check (a million entries pointing at one 1 MiB buffer would be a terabyte
/// of host memory). These definitions replace the generated ones: they look at the list's
/// shape in guest memory, refuse it when it has too many entries or bytes, and only then copy.
/// The WASI random functions are replaced too, so that a tenant's random bytes go through its
/// per-second bucket (their size per call is bounded by the WASI context itself).
fn bounded_imports(linker: &mut Linker<TenantState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut redis = linker.instance("latchkey:locks/redis@0.2.0")?;
    redis.func_wrap_async(
        "command",
        |mut store: StoreContextMut<'_, TenantState>, (args,): (WasmList<WasmList<u8>>,)| {
            Box::new(async move {
                let args = match copy_args(&mut store, &args)? {
                    Ok(a) => a,
                    Err(refused) => {
                        charge_refusal(store.data_mut()).await?;
                        return Ok((Err(refused),));
                    }
                };
                let r: Result<Vec<WitFrame>, String> = store.data_mut().command(args).await?;
                Ok((r,))
            })
        },
    )?;
    redis.func_wrap_async(
        "command-all",
        |mut store: StoreContextMut<'_, TenantState>,
         (args, timeout_ms): (WasmList<WasmList<u8>>, u64)| {
            Box::new(async move {
                let args = match copy_args(&mut store, &args)? {
                    Ok(a) => a,
                    Err(refused) => {
                        charge_refusal(store.data_mut()).await?;
                        let n = store.data_mut().nodes().await? as usize;
                        return Ok((vec![Err(refused); n],));
                    }
                };
                let r: Vec<Result<Vec<WitFrame>, String>> =
                    store.data_mut().command_all(args, timeout_ms).await?;
                Ok((r,))
            })
        },
    )?;
    for (iface, name) in [
        ("wasi:random/random@0.2.12", "get-random-bytes"),
        ("wasi:random/insecure@0.2.12", "get-insecure-random-bytes"),
    ] {
        let mut inst = linker.instance(iface)?;
        inst.func_wrap_async(
            name,
            |mut store: StoreContextMut<'_, TenantState>, (len,): (u64,)| {
                Box::new(async move {
                    let s = store.data_mut();
                    let max = s.limits.random_bytes_per_call;
                    if len > max {
                        wasmtime::bail!(
                            "asked for {len} random bytes, over the tenant's limit of {max} per call"
                        );
                    }
                    s.budget.random.acquire_n(len as f64).await;
                    let mut bytes = vec![0u8; len as usize];
                    rand::fill(&mut bytes[..]);
                    Ok((bytes,))
                })
            },
        )?;
    }
    linker.allow_shadowing(false);
    Ok(())
}

/// A refused command still costs the tenant a call (and traps an interrupted instance).
async fn charge_refusal(s: &mut TenantState) -> wasmtime::Result<()> {
    s.enter().await
}

/// Copies a command's arguments out of the guest, or says why not: at most
/// [`Limits::args_per_call`] entries of at most [`Limits::bytes_per_call`] bytes in all,
/// checked on the list's shape before anything is copied.
///
/// The shape (each argument's place and length in guest memory) is read into a buffer kept by
/// the thread ([`SHAPES`]) and reused by every command after, instead of a vector allocated,
/// grown and freed per command: that cost about 1,000 instructions a host call.
fn copy_args(
    store: &mut StoreContextMut<'_, TenantState>,
    list: &WasmList<WasmList<u8>>,
) -> wasmtime::Result<Result<Vec<Vec<u8>>, String>> {
    let limits = store.data().limits.clone();
    if let Err(e) = check_counts(list.len(), std::iter::empty::<usize>(), &limits) {
        return Ok(Err(e));
    }
    // Taken out of the thread's slot for the length of this (synchronous) function: a nested
    // call, or an error below that drops it, only costs a fresh buffer.
    let mut items = SHAPES.with(|s| std::mem::take(&mut *s.borrow_mut()));
    items.clear();
    items.reserve(list.len());
    for item in list.iter(store.as_context_mut())? {
        items.push(item?);
    }
    let copied = match check_counts(items.len(), items.iter().map(WasmList::len), &limits) {
        Err(e) => Err(e),
        Ok(()) => Ok(items
            .iter()
            .map(|a| a.as_le_slice(store.as_context()).to_vec())
            .collect()),
    };
    items.clear();
    // The buffer is kept only while it is small: a command of many arguments (up to
    // `args_per_call`) does not leave its room behind.
    if items.capacity() <= SHAPES_KEPT {
        SHAPES.with(|s| *s.borrow_mut() = items);
    }
    Ok(copied)
}

/// The largest shape buffer a thread keeps between commands, in arguments (a lock's commands
/// have fewer than ten).
const SHAPES_KEPT: usize = 32;

thread_local! {
    /// The shape of the command being copied ([`copy_args`]): empty between commands, its
    /// room kept for the next one on this thread.
    static SHAPES: std::cell::RefCell<Vec<WasmList<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}
