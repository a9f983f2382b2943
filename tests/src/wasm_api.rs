//! The conformance suite's wasm leg: [`Locks`] implemented by the lock client running inside
//! the WebAssembly component, in a tenant of the latchkey host (`latchkey-plugin`).
//!
//! A component instance runs one call at a time, so every operation checks an instance out of
//! a pool kept for the tenant (starting a new one when none is idle), builds the lock resource
//! in it, calls it, drops the resource and puts the instance back: contending tasks each get
//! an instance of their own, all in the one tenant namespace, like the workers of one tenant.
//! Leases and outcomes are the component's WIT records, converted to the native crate's types
//! so that scenarios compare them as they do natively.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use latchkey_client::locks::{
    Backoff, Extended, FencedLease, Lease, LostReason, MultiLease, Permit, RedLease,
    ReentrantRelease, Released, ReplicatedAcquire, RwLease,
};
use latchkey_client::Reply;
use latchkey_plugin::exports::latchkey::locks::locks as wit;
use latchkey_plugin::latchkey::locks::redis::LostCause;
use latchkey_plugin::{Backend, Host, HostConfig, Instance, Limits, LockClient, Plugin, Tenant};
use wasmtime::component::ResourceAny;
use wasmtime::Store;

use crate::lock_api::*;

type BoxFuture<'a, T> = latchkey_plugin::backend::BoxFuture<'a, T>;

/// The tenant every wasm-leg lock lives in, with its pool of idle instances.
#[derive(Clone)]
pub struct Wasm {
    inner: Arc<Inner>,
}

struct Inner {
    plugin: Plugin,
    tenant: Tenant,
    backend: Arc<dyn Backend>,
    idle: Mutex<Vec<Instance>>,
    _host: Host,
}

/// Test code: a transport failure or a trap fails the test with its message.
fn ok<V>(r: Result<Result<V, String>, latchkey_plugin::Trapped>) -> V {
    match r {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!("the component reported a failure: {e}"),
        Err(t) => panic!("{t}"),
    }
}

fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

impl Wasm {
    /// A host over `backend` running the lock-client component for the tenant `tenant`.
    ///
    /// The CPU budget is wide: scenarios run on loaded CI machines where a guest may wait long
    /// for a core, and the bound is the host's own tests' business, not the locks'.
    pub fn new(backend: Arc<dyn Backend>, tenant: &str) -> Wasm {
        let cfg = HostConfig {
            pool_instances: 64,
            limits: Limits {
                cpu_budget: Duration::from_secs(30),
                ..Limits::default()
            },
            // Compiled once per test run, not once per scenario.
            cache_dir: Some(std::env::temp_dir().join("latchkey-conformance-cache")),
            ..HostConfig::default()
        };
        let host = Host::new(backend.clone(), cfg).expect("the wasm host starts");
        let path = latchkey_plugin::component_path().expect("the latchkey-client component");
        let plugin = host.load(&path).expect("the component loads");
        Wasm {
            inner: Arc::new(Inner {
                tenant: host.tenant(tenant),
                plugin,
                backend,
                idle: Mutex::new(Vec::new()),
                _host: host,
            }),
        }
    }

    async fn checkout(&self) -> Instance {
        let idle = self.inner.idle.lock().expect("pool").pop();
        match idle {
            Some(i) => i,
            None => self
                .inner
                .tenant
                .instantiate(&self.inner.plugin)
                .await
                .expect("a tenant instance starts"),
        }
    }

    fn checkin(&self, i: Instance) {
        if i.trapped().is_none() {
            self.inner.idle.lock().expect("pool").push(i);
        }
    }

    /// Runs `f` against the lock-client exports of an instance of the tenant.
    async fn with<R: Send + 'static>(
        &self,
        f: impl for<'a> FnOnce(
                &'a mut Store<latchkey_plugin::state::TenantState>,
                &'a LockClient,
            ) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send,
    ) -> Result<R, latchkey_plugin::Trapped> {
        let mut inst = self.checkout().await;
        let r = inst
            .run(move |(store, _, locks)| {
                let locks = locks.expect("the lock-client component");
                f(store, locks)
            })
            .await;
        self.checkin(inst);
        r
    }
}

/// Calls one method of a resource built fresh in the instance for the call: `$ctor` builds it
/// (a closure from the store and the resource's functions to the handle), `$call` uses it.
macro_rules! call {
    ($self:ident, $iface:ident, |$store:ident, $r:ident, $h:ident| $ctor:expr, $call:expr) => {{
        let this = $self.clone();
        this.w
            .with(move |$store, l| {
                Box::pin(async move {
                    let $r = l.latchkey_locks_locks().$iface();
                    let $h: ResourceAny = $ctor;
                    let out = $call;
                    $h.resource_drop_async(&mut *$store).await?;
                    Ok(out)
                })
            })
            .await
    }};
}

fn lease_to_wit(l: &Lease) -> wit::Lease {
    wit::Lease {
        key: l.key.clone(),
        token: l.token.clone(),
        ttl_ms: ms(l.ttl),
    }
}

fn lease_from_wit(l: wit::Lease) -> Lease {
    Lease {
        key: l.key,
        token: l.token,
        acquired_at: Duration::ZERO,
        ttl: Duration::from_millis(l.ttl_ms),
    }
}

fn released(r: wit::Released) -> Released {
    match r {
        wit::Released::Released => Released::Released,
        wit::Released::AlreadyExpired => Released::AlreadyExpired,
        wit::Released::NotOwner => Released::NotOwner,
    }
}

/// `simple-lock` in the tenant.
#[derive(Clone)]
pub struct WasmSimple {
    w: Wasm,
    name: String,
}

impl SimpleOps for WasmSimple {
    async fn try_acquire(&self, ttl: Duration) -> Option<Lease> {
        let name = self.name.clone();
        ok(call!(
            self,
            simple_lock,
            |s, r, h| r.call_constructor(&mut *s, &name).await?,
            r.call_try_acquire(&mut *s, h, ms(ttl)).await?
        ))
        .map(lease_from_wit)
    }

    async fn acquire_wait(
        &self,
        ttl: Duration,
        deadline: Duration,
        backoff: Backoff,
    ) -> Option<Lease> {
        let name = self.name.clone();
        let b = wit::Backoff {
            base_ms: ms(backoff.base),
            max_ms: ms(backoff.max),
        };
        ok(call!(
            self,
            simple_lock,
            |s, r, h| r.call_constructor(&mut *s, &name).await?,
            r.call_acquire_wait_backoff(&mut *s, h, ms(ttl), ms(deadline), b)
                .await?
        ))
        .map(lease_from_wit)
    }

    async fn release(&self, lease: &Lease) -> Released {
        let (name, lease) = (self.name.clone(), lease_to_wit(lease));
        released(ok(call!(
            self,
            simple_lock,
            |s, r, h| r.call_constructor(&mut *s, &name).await?,
            r.call_release(&mut *s, h, &lease).await?
        )))
    }

    async fn extend(&self, lease: &mut Lease, ttl: Duration) -> Extended {
        let (name, wl) = (self.name.clone(), lease_to_wit(lease));
        let e = ok(call!(
            self,
            simple_lock,
            |s, r, h| r.call_constructor(&mut *s, &name).await?,
            r.call_extend(&mut *s, h, &wl, ms(ttl)).await?
        ));
        match e {
            wit::Extended::Extended => {
                lease.ttl = ttl;
                Extended::Extended
            }
            wit::Extended::AlreadyExpired => Extended::AlreadyExpired,
            wit::Extended::NotOwner => Extended::NotOwner,
        }
    }

    async fn holder(&self) -> Option<String> {
        let name = self.name.clone();
        ok(call!(
            self,
            simple_lock,
            |s, r, h| r.call_constructor(&mut *s, &name).await?,
            r.call_holder(&mut *s, h).await?
        ))
    }

    async fn pttl(&self) -> Option<Duration> {
        let name = self.name.clone();
        ok(call!(
            self,
            simple_lock,
            |s, r, h| r.call_constructor(&mut *s, &name).await?,
            r.call_pttl(&mut *s, h).await?
        ))
        .map(Duration::from_millis)
    }
}

/// `fenced-lock` in the tenant.
#[derive(Clone)]
pub struct WasmFenced {
    w: Wasm,
    name: String,
}

fn fenced(r: Option<(wit::Lease, i64)>) -> Option<FencedLease> {
    r.map(|(l, fence)| FencedLease {
        lease: lease_from_wit(l),
        fence,
    })
}

impl FencedOps for WasmFenced {
    async fn try_acquire(&self, ttl: Duration) -> Option<FencedLease> {
        let name = self.name.clone();
        fenced(ok(call!(
            self,
            fenced_lock,
            |s, r, h| r.call_constructor(&mut *s, &name).await?,
            r.call_try_acquire(&mut *s, h, ms(ttl)).await?
        )))
    }

    /// The component's fenced acquisition waits with the default backoff; `backoff` is not
    /// part of its contract.
    async fn acquire_wait(
        &self,
        ttl: Duration,
        deadline: Duration,
        _backoff: Backoff,
    ) -> Option<FencedLease> {
        let name = self.name.clone();
        fenced(ok(call!(
            self,
            fenced_lock,
            |s, r, h| r.call_constructor(&mut *s, &name).await?,
            r.call_acquire_wait(&mut *s, h, ms(ttl), ms(deadline))
                .await?
        )))
    }

    async fn release(&self, lease: &FencedLease) -> Released {
        let (name, lease) = (self.name.clone(), lease_to_wit(&lease.lease));
        released(ok(call!(
            self,
            fenced_lock,
            |s, r, h| r.call_constructor(&mut *s, &name).await?,
            r.call_release(&mut *s, h, &lease).await?
        )))
    }
}

/// `reentrant-lock` in the tenant, always resumed as the same owner.
#[derive(Clone)]
pub struct WasmReentrant {
    w: Wasm,
    owner: wit::ReentrantOwner,
}

impl ReentrantOps for WasmReentrant {
    async fn try_acquire(&self, ttl: Duration) -> Option<Duration> {
        let owner = self.owner.clone();
        match ok(call!(
            self,
            reentrant_lock,
            |s, r, h| r.call_resume(&mut *s, &owner).await?,
            r.call_try_acquire(&mut *s, h, ms(ttl)).await?
        )) {
            wit::ReentrantAcquired::Acquired => None,
            wit::ReentrantAcquired::Held(left) => Some(Duration::from_millis(left)),
        }
    }

    async fn release(&self, ttl: Duration) -> ReentrantRelease {
        let owner = self.owner.clone();
        match ok(call!(
            self,
            reentrant_lock,
            |s, r, h| r.call_resume(&mut *s, &owner).await?,
            r.call_release(&mut *s, h, ms(ttl)).await?
        )) {
            wit::ReentrantReleased::StillHeld => ReentrantRelease::StillHeld,
            wit::ReentrantReleased::Released => ReentrantRelease::Released,
            wit::ReentrantReleased::NotOwner => ReentrantRelease::NotOwner,
        }
    }

    async fn hold_count(&self) -> i64 {
        let owner = self.owner.clone();
        ok(call!(
            self,
            reentrant_lock,
            |s, r, h| r.call_resume(&mut *s, &owner).await?,
            r.call_hold_count(&mut *s, h).await?
        ))
    }
}

/// `semaphore` in the tenant.
#[derive(Clone)]
pub struct WasmSemaphore {
    w: Wasm,
    name: String,
    permits: u32,
}

impl SemaphoreOps for WasmSemaphore {
    async fn try_acquire(&self, ttl: Duration) -> Option<Permit> {
        let (name, n) = (self.name.clone(), self.permits);
        ok(call!(
            self,
            semaphore,
            |s, r, h| r.call_constructor(&mut *s, &name, n).await?,
            r.call_try_acquire(&mut *s, h, ms(ttl)).await?
        ))
        .map(|id| Permit { id })
    }

    async fn release(&self, permit: &Permit) -> bool {
        let (name, n, id) = (self.name.clone(), self.permits, permit.id.clone());
        ok(call!(
            self,
            semaphore,
            |s, r, h| r.call_constructor(&mut *s, &name, n).await?,
            r.call_release(&mut *s, h, &id).await?
        ))
    }
}

/// `multi-lock` in the tenant.
#[derive(Clone)]
pub struct WasmMulti {
    w: Wasm,
    keys: Vec<String>,
}

impl MultiOps for WasmMulti {
    async fn try_acquire(&self, ttl: Duration) -> Option<MultiLease> {
        let keys = self.keys.clone();
        ok(call!(
            self,
            multi_lock,
            |s, r, h| r.call_constructor(&mut *s, &keys).await?,
            r.call_try_acquire(&mut *s, h, ms(ttl)).await?
        ))
        .map(|l| MultiLease {
            keys: l.keys,
            token: l.token,
        })
    }

    async fn release(&self, lease: &MultiLease) -> i64 {
        let keys = self.keys.clone();
        let l = wit::MultiLease {
            keys: lease.keys.clone(),
            token: lease.token.clone(),
        };
        i64::from(ok(call!(
            self,
            multi_lock,
            |s, r, h| r.call_constructor(&mut *s, &keys).await?,
            r.call_release(&mut *s, h, &l).await?
        )))
    }
}

/// `rw-lock` in the tenant.
#[derive(Clone)]
pub struct WasmRw {
    w: Wasm,
    name: String,
}

fn rw_from_wit(l: wit::RwLease) -> RwLease {
    RwLease {
        token: l.token,
        write: l.mode == wit::RwMode::Write,
    }
}

impl RwOps for WasmRw {
    async fn try_read(&self, ttl: Duration) -> Option<RwLease> {
        let name = self.name.clone();
        ok(call!(
            self,
            rw_lock,
            |s, r, h| r.call_constructor(&mut *s, &name).await?,
            r.call_try_read(&mut *s, h, ms(ttl)).await?
        ))
        .map(rw_from_wit)
    }

    async fn try_write(&self, ttl: Duration) -> Option<RwLease> {
        let name = self.name.clone();
        ok(call!(
            self,
            rw_lock,
            |s, r, h| r.call_constructor(&mut *s, &name).await?,
            r.call_try_write(&mut *s, h, ms(ttl)).await?
        ))
        .map(rw_from_wit)
    }

    async fn release(&self, lease: &RwLease) -> bool {
        let name = self.name.clone();
        let l = wit::RwLease {
            token: lease.token.clone(),
            mode: if lease.write {
                wit::RwMode::Write
            } else {
                wit::RwMode::Read
            },
        };
        ok(call!(
            self,
            rw_lock,
            |s, r, h| r.call_constructor(&mut *s, &name).await?,
            r.call_release(&mut *s, h, &l).await?
        ))
    }
}

/// `red-lock` in the tenant, on the host's quorum nodes (here its one backend).
#[derive(Clone)]
pub struct WasmRed {
    w: Wasm,
    name: String,
    node_timeout: Duration,
}

fn red_to_wit(l: &RedLease) -> wit::RedLease {
    wit::RedLease {
        key: l.key.clone(),
        token: l.token.clone(),
        validity_ms: ms(l.validity),
        granted: l.granted as u32,
    }
}

fn red_from_wit(l: wit::RedLease) -> RedLease {
    RedLease {
        key: l.key,
        token: l.token,
        validity: Duration::from_millis(l.validity_ms),
        granted: l.granted as usize,
    }
}

impl RedOps for WasmRed {
    async fn try_acquire(&self, ttl: Duration) -> Option<RedLease> {
        let (name, t) = (self.name.clone(), ms(self.node_timeout));
        ok(call!(
            self,
            red_lock,
            |s, r, h| r.call_constructor(&mut *s, &name, t).await?,
            r.call_try_acquire(&mut *s, h, ms(ttl)).await?
        ))
        .map(red_from_wit)
    }

    async fn extend(&self, lease: &RedLease, ttl: Duration) -> Option<RedLease> {
        let (name, t, l) = (self.name.clone(), ms(self.node_timeout), red_to_wit(lease));
        ok(call!(
            self,
            red_lock,
            |s, r, h| r.call_constructor(&mut *s, &name, t).await?,
            r.call_extend(&mut *s, h, &l, ms(ttl)).await?
        ))
        .map(red_from_wit)
    }

    async fn release(&self, lease: &RedLease) -> usize {
        let (name, t, l) = (self.name.clone(), ms(self.node_timeout), red_to_wit(lease));
        ok(call!(
            self,
            red_lock,
            |s, r, h| r.call_constructor(&mut *s, &name, t).await?,
            r.call_release(&mut *s, h, &l).await?
        )) as usize
    }
}

/// `fair-lock` in the tenant.
#[derive(Clone)]
pub struct WasmFair {
    w: Wasm,
    name: String,
    heartbeat: Duration,
}

impl FairOps for WasmFair {
    async fn acquire_wait(&self, ttl: Duration, deadline: Duration) -> Option<Lease> {
        let (name, hb) = (self.name.clone(), ms(self.heartbeat));
        ok(call!(
            self,
            fair_lock,
            |s, r, h| r.call_constructor(&mut *s, &name, hb).await?,
            r.call_acquire_wait(&mut *s, h, ms(ttl), ms(deadline))
                .await?
        ))
        .map(lease_from_wit)
    }

    async fn enqueue_once(&self, ttl: Duration) -> Option<Duration> {
        let (name, hb) = (self.name.clone(), ms(self.heartbeat));
        match ok(call!(
            self,
            fair_lock,
            |s, r, h| r.call_constructor(&mut *s, &name, hb).await?,
            r.call_enqueue_once(&mut *s, h, ms(ttl)).await?
        )) {
            wit::FairEnqueued::Taken => None,
            wit::FairEnqueued::Queued(left) => Some(Duration::from_millis(left)),
        }
    }

    async fn release(&self, lease: &Lease) -> Released {
        let (name, hb, l) = (self.name.clone(), ms(self.heartbeat), lease_to_wit(lease));
        released(ok(call!(
            self,
            fair_lock,
            |s, r, h| r.call_constructor(&mut *s, &name, hb).await?,
            r.call_release(&mut *s, h, &l).await?
        )))
    }
}

/// `replicated-lock` in the tenant.
#[derive(Clone)]
pub struct WasmReplicated {
    w: Wasm,
    name: String,
    replicas: u32,
    wait: Duration,
}

impl ReplicatedOps for WasmReplicated {
    async fn try_acquire(&self, ttl: Duration) -> ReplicatedAcquire {
        let (name, n, wait) = (self.name.clone(), self.replicas, ms(self.wait));
        match ok(call!(
            self,
            replicated_lock,
            |s, r, h| r.call_constructor(&mut *s, &name, n, wait).await?,
            r.call_try_acquire(&mut *s, h, ms(ttl)).await?
        )) {
            wit::ReplicatedAcquired::Confirmed(l) => {
                ReplicatedAcquire::Confirmed(lease_from_wit(l))
            }
            wit::ReplicatedAcquired::NotReplicated(acked) => {
                ReplicatedAcquire::NotReplicated { acked }
            }
            wit::ReplicatedAcquired::Held => ReplicatedAcquire::Held,
        }
    }
}

/// A `watched-lock` held in an instance of its own, renewed by the host's lease keeper.
pub struct WasmWatch {
    inst: Instance,
    lock: ResourceAny,
}

impl WasmWatch {
    async fn held(&mut self) -> bool {
        let lock = self.lock;
        self.inst
            .run(move |(store, _, l)| {
                Box::pin(async move {
                    let w = l
                        .expect("lock client")
                        .latchkey_locks_watchdog()
                        .watched_lock();
                    w.call_held(&mut *store, lock).await
                })
            })
            .await
            .unwrap_or(false)
    }
}

impl WatchOps for WasmWatch {
    async fn is_lost(&mut self) -> bool {
        !self.held().await
    }

    /// Asks the component why its lease was lost (`watched-lock.lost`, which the host answers
    /// from its lease keeper) until it knows.
    async fn lost(&mut self) -> LostReason {
        loop {
            let lock = self.lock;
            let cause = self
                .inst
                .run(move |(store, _, l)| {
                    Box::pin(async move {
                        let w = l
                            .expect("lock client")
                            .latchkey_locks_watchdog()
                            .watched_lock();
                        w.call_lost(&mut *store, lock).await
                    })
                })
                .await
                .unwrap_or_else(|t| panic!("the component trapped before saying why: {t:?}"));
            match cause {
                Some(LostCause::Expired) => return LostReason::Expired,
                Some(LostCause::Taken) => return LostReason::Taken,
                Some(LostCause::Unreachable) => return LostReason::Unreachable,
                None => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    }
}

impl Locks for Wasm {
    type Simple = WasmSimple;
    type Fenced = WasmFenced;
    type Reentrant = WasmReentrant;
    type Semaphore = WasmSemaphore;
    type Multi = WasmMulti;
    type Rw = WasmRw;
    type Fair = WasmFair;
    type Replicated = WasmReplicated;
    type Watch = WasmWatch;
    type Red = WasmRed;

    fn simple(&self, name: &str) -> WasmSimple {
        WasmSimple {
            w: self.clone(),
            name: name.into(),
        }
    }
    fn fenced(&self, name: &str) -> WasmFenced {
        WasmFenced {
            w: self.clone(),
            name: name.into(),
        }
    }
    fn reentrant(&self, name: &str) -> WasmReentrant {
        let mut id = [0u8; 20];
        rand::fill(&mut id);
        WasmReentrant {
            w: self.clone(),
            owner: wit::ReentrantOwner {
                name: name.into(),
                owner: hex::encode(id),
            },
        }
    }
    fn semaphore(&self, name: &str, permits: u32) -> WasmSemaphore {
        WasmSemaphore {
            w: self.clone(),
            name: name.into(),
            permits,
        }
    }
    fn multi(&self, keys: &[&str]) -> WasmMulti {
        WasmMulti {
            w: self.clone(),
            keys: keys.iter().map(|k| k.to_string()).collect(),
        }
    }
    fn rw(&self, name: &str) -> WasmRw {
        WasmRw {
            w: self.clone(),
            name: name.into(),
        }
    }
    fn fair(&self, name: &str, heartbeat: Duration) -> WasmFair {
        WasmFair {
            w: self.clone(),
            name: name.into(),
            heartbeat,
        }
    }
    fn replicated(&self, name: &str, replicas: i64, wait: Duration) -> WasmReplicated {
        WasmReplicated {
            w: self.clone(),
            name: name.into(),
            replicas: replicas.try_into().expect("a replica count"),
            wait,
        }
    }

    fn red(&self, name: &str, node_timeout: Duration) -> WasmRed {
        WasmRed {
            w: self.clone(),
            name: name.into(),
            node_timeout,
        }
    }

    async fn acquire_watched(&self, name: &str, ttl: Duration) -> Option<WasmWatch> {
        let mut inst = self.checkout().await;
        let name = name.to_string();
        let ttl = ms(ttl);
        let lock = inst
            .run(move |(store, _, l)| {
                Box::pin(async move {
                    let w = l
                        .expect("lock client")
                        .latchkey_locks_watchdog()
                        .watched_lock();
                    let lock = w.call_constructor(&mut *store, &name).await?;
                    let taken = w.call_acquire(&mut *store, lock, ttl).await?;
                    Ok((lock, taken))
                })
            })
            .await;
        let (lock, taken) = ok(lock.map(|(lock, taken)| taken.map(|t| (lock, t))));
        taken.then_some(WasmWatch { inst, lock })
    }

    /// Runs a bookkeeping command in the tenant's namespace. Commands on the tenants'
    /// allow-list are rewritten as a tenant's are; others (the harness's own reads, such as
    /// `LRANGE` of a fair lock's queue) must have one key, their first argument, which is
    /// namespaced the same way.
    async fn command(&self, args: Vec<Vec<u8>>) -> Reply {
        let ns = self.inner.tenant.namespace();
        let args = ns.rewrite(args.clone()).unwrap_or_else(|_| {
            let mut args = args;
            assert!(args.len() >= 2, "a bookkeeping command names its key first");
            args[1] = ns.key(&args[1]);
            args
        });
        self.inner
            .backend
            .command(args)
            .await
            .unwrap_or_else(|e| panic!("backend failed: {e}"))
    }
}
