//! Tenants and their instances.
//!
//! A [`Tenant`] is a name: a namespace on the server and a rate limit. An [`Instance`] is one
//! running copy of a component for a tenant, in its own store (its own memory, CPU budget and
//! kept leases); a tenant may run several (workers contending for the same locks).
//!
//! A trap poisons an instance: wasmtime cannot re-enter it safely. The host then releases the
//! leases the instance asked it to keep (others need not wait for their TTL), and refuses every
//! further call; start a new instance to run the tenant afresh. An instance that ends normally
//! ([`Instance::close`], or dropped) has its kept leases released too.

use std::time::Duration;

use wasmtime::component::{ComponentNamedList, Instance as WasmInstance, Lift, Lower, ResourceAny};
use wasmtime::{Store, UpdateDeadline};

use crate::backend::BoxFuture;
use crate::bindings::exports::latchkey::locks::locks::{
    Extended, GuestRedLock, GuestSimpleLock, Lease, RedLease, Released,
};
use crate::bindings::LockClient;
use crate::budget::TenantBudget;
use crate::host::{Host, Plugin};
use crate::namespace::Namespace;
use crate::state::TenantState;

/// A tenant of the host: its namespace and the budget all its instances share (call, byte
/// and CPU rates, kept leases, subscriptions).
#[derive(Clone)]
pub struct Tenant {
    host: Host,
    ns: Namespace,
    budget: TenantBudget,
}

/// One running instance of a component for a tenant.
pub struct Instance {
    store: Store<TenantState>,
    instance: WasmInstance,
    locks: Option<LockClient>,
    trapped: Option<String>,
}

/// A call into an instance failed: the guest trapped (the instance is now dropped for good)
/// or had trapped before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trapped(pub String);

impl std::fmt::Display for Trapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tenant instance trapped: {}", self.0)
    }
}

impl std::error::Error for Trapped {}

/// Tenants are handed out by the host: a tenant is made from a [`Host`] and a name.
impl Host {
    /// The tenant `name`: a namespace and a budget (rates, quotas), shared by every instance
    /// started for it (a tenant may run several workers), and by every [`Tenant`] of that name
    /// this host hands out.
    ///
    /// # Panics
    ///
    /// If `name` is not a valid tenant name (see [`Namespace::new`]: 1 to 64 ASCII letters,
    /// digits, `-` or `_`); [`Host::try_tenant`] says so instead.
    pub fn tenant(&self, name: &str) -> Tenant {
        self.try_tenant(name).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Host::tenant`], or why `name` is not a valid tenant name.
    pub fn try_tenant(&self, name: &str) -> Result<Tenant, String> {
        Ok(Tenant::new(self.clone(), Namespace::new(name)?))
    }
}

impl Tenant {
    pub(crate) fn new(host: Host, ns: Namespace) -> Tenant {
        let budget = host
            .shared
            .budgets
            .lock()
            .expect("budgets lock")
            .entry(ns.tenant().to_string())
            .or_insert_with(|| TenantBudget::new(&host.shared.limits))
            .clone();
        Tenant { ns, host, budget }
    }

    /// The tenant's namespace.
    pub fn namespace(&self) -> &Namespace {
        &self.ns
    }

    /// Starts an instance of `plugin` for this tenant.
    pub async fn instantiate(&self, plugin: &Plugin) -> wasmtime::Result<Instance> {
        let shared = &self.host.shared;
        let l = &shared.limits;
        let state = TenantState::new(
            self.ns.clone(),
            shared.backend.clone(),
            shared.nodes.clone(),
            shared.limits.clone(),
            self.budget.clone(),
            shared.keeper_clock.clone(),
        );
        let mut store = Store::new(&shared.engine, state);
        store.limiter(|s| &mut s.limiter);
        // Every epoch tick, a running guest yields to the executor (other tenants run). Its
        // running time is counted at every tick and every crossing between host and guest
        // (`crate::cpu`): over its budget for this call into the guest, or over the tenant's
        // share per second, it is trapped. An interrupt (a lost lease) stops a guest that
        // has been running for a tick too.
        let (budget, per_sec, tick) = (l.cpu_budget, l.cpu_per_sec, l.tick);
        let tenant = self.ns.tenant().to_string();
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut cx| {
            let s = cx.data_mut();
            s.cpu.tick();
            // A guest busy when its lease is lost is stopped here; one that just entered (say,
            // to ask `held()`) gets to finish its short call: its next host call traps.
            if s.cpu.busy() >= tick {
                if let Some(reason) = s.interrupt.reason() {
                    return Err(wasmtime::format_err!("{reason}"));
                }
            }
            if let Some(why) = s.cpu.over(budget, per_sec) {
                return Err(wasmtime::format_err!("tenant '{tenant}' {why}"));
            }
            let resumed_at = s.cpu.resumed_at.clone();
            Ok(UpdateDeadline::YieldCustom(
                1,
                Box::pin(async move {
                    tokio::task::yield_now().await;
                    resumed_at.now();
                }),
            ))
        });
        // Every crossing between host and guest is counted; a guest over its CPU is stopped
        // at its next host call too.
        let tenant = self.ns.tenant().to_string();
        store.call_hook(move |mut cx, hook| {
            let s = cx.data_mut();
            s.cpu.hook(hook);
            if matches!(hook, wasmtime::CallHook::CallingHost) {
                if let Some(why) = s.cpu.over(budget, per_sec) {
                    return Err(wasmtime::format_err!("tenant '{tenant}' {why}"));
                }
            }
            Ok(())
        });
        let instance = plugin.pre.instantiate_async(&mut store).await?;
        let locks = match &plugin.locks {
            Some(indices) => indices.load(&mut store, &instance).ok(),
            None => None,
        };
        Ok(Instance {
            store,
            instance,
            locks,
            trapped: None,
        })
    }
}

/// What [`Instance::run`] hands its closure: the store, the raw instance (for any export) and
/// the lock-client bindings (when the component is the lock client).
pub type Parts<'a> = (
    &'a mut Store<TenantState>,
    &'a WasmInstance,
    Option<&'a LockClient>,
);

impl Instance {
    /// Runs `f` (calls into the guest) unless the instance trapped before. If `f` fails, the
    /// instance is poisoned, and the leases it kept are released.
    ///
    /// The CPU budget ([`crate::Limits::cpu_budget`]) is the guest's running time in one call
    /// into it from here (each export `f` calls is a call), host calls and re-entries included.
    pub async fn run<R>(
        &mut self,
        f: impl for<'a> FnOnce(Parts<'a>) -> BoxFuture<'a, wasmtime::Result<R>>,
    ) -> Result<R, Trapped> {
        if let Some(t) = &self.trapped {
            return Err(Trapped(format!(
                "already trapped ({t}); start a new instance"
            )));
        }
        self.store.set_epoch_deadline(1);
        let r = f((&mut self.store, &self.instance, self.locks.as_ref())).await;
        match r {
            Ok(v) => Ok(v),
            Err(e) => {
                let text = format!("{e:#}");
                self.trapped = Some(text.clone());
                self.store.data_mut().keeper.release_all().await;
                Err(Trapped(text))
            }
        }
    }

    /// Ends the instance: the leases the host keeps for it are released (token-checked, so a
    /// lock someone else holds by now is left alone) before this returns. Dropping an
    /// instance releases them too, but in the background.
    pub async fn close(mut self) {
        self.store.data_mut().keeper.release_all().await;
    }

    /// Whether the instance trapped (and is unusable).
    pub fn trapped(&self) -> Option<&str> {
        self.trapped.as_deref()
    }

    /// Host calls this instance made.
    pub fn host_calls(&self) -> u64 {
        self.store.data().calls
    }

    /// Leases the host keeps for this instance.
    pub fn kept_leases(&self) -> usize {
        self.store.data().keeper.len()
    }

    /// Calls the world-level export `name` (for components other than the lock client, such
    /// as the tests' rogue guest). A missing export or a type mismatch is an error that does not
    /// poison the instance; a trap does.
    pub async fn call<P, R>(&mut self, name: &str, params: P) -> Result<R, Trapped>
    where
        P: ComponentNamedList + Lower + Send + Sync + 'static,
        R: ComponentNamedList + Lift + Send + Sync + 'static,
    {
        let f = self
            .instance
            .get_typed_func::<P, R>(&mut self.store, name)
            .map_err(|e| Trapped(format!("no export '{name}' of that type: {e:#}")))?;
        self.run(move |(store, _, _)| {
            Box::pin(async move { f.call_async(&mut *store, params).await })
        })
        .await
    }

    fn need_locks(p: Option<&LockClient>) -> wasmtime::Result<&LockClient> {
        p.ok_or_else(|| wasmtime::format_err!("this component does not export the lock client"))
    }

    /// Runs `call` on a `simple-lock` named `name`, built in the instance for the call and
    /// dropped after it.
    async fn with_simple<R: Send + 'static>(
        &mut self,
        name: &str,
        call: impl for<'a> FnOnce(
                &'a mut Store<TenantState>,
                GuestSimpleLock<'a>,
                ResourceAny,
            ) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send
            + 'static,
    ) -> Result<R, Trapped> {
        let name = name.to_string();
        self.run(move |(store, _, l)| {
            Box::pin(async move {
                let locks = Self::need_locks(l)?.latchkey_locks_locks().simple_lock();
                let lock = locks.call_constructor(&mut *store, &name).await?;
                let r = call(&mut *store, locks, lock).await?;
                lock.resource_drop_async(&mut *store).await?;
                Ok(r)
            })
        })
        .await
    }

    /// Tries to take the simple lock `name` for `ttl`.
    pub async fn try_lock(
        &mut self,
        name: &str,
        ttl: Duration,
    ) -> Result<Result<Option<Lease>, String>, Trapped> {
        self.with_simple(name, move |s, locks, lock| {
            Box::pin(async move { locks.call_try_acquire(s, lock, ms(ttl)).await })
        })
        .await
    }

    /// Takes the simple lock `name` for `ttl`, waiting up to `deadline` (backoff sleeps and
    /// unlock messages suspend the guest, not a thread).
    pub async fn lock_wait(
        &mut self,
        name: &str,
        ttl: Duration,
        deadline: Duration,
    ) -> Result<Result<Option<Lease>, String>, Trapped> {
        self.with_simple(name, move |s, locks, lock| {
            Box::pin(async move {
                locks
                    .call_acquire_wait(s, lock, ms(ttl), ms(deadline))
                    .await
            })
        })
        .await
    }

    /// Releases a lease of the simple lock `name`.
    pub async fn unlock(
        &mut self,
        name: &str,
        lease: Lease,
    ) -> Result<Result<Released, String>, Trapped> {
        self.with_simple(name, move |s, locks, lock| {
            Box::pin(async move { locks.call_release(s, lock, &lease).await })
        })
        .await
    }

    /// Extends a lease of the simple lock `name` to `ttl` from now.
    pub async fn extend(
        &mut self,
        name: &str,
        lease: Lease,
        ttl: Duration,
    ) -> Result<Result<Extended, String>, Trapped> {
        self.with_simple(name, move |s, locks, lock| {
            Box::pin(async move { locks.call_extend(s, lock, &lease, ms(ttl)).await })
        })
        .await
    }

    /// Takes the fenced lock `name`: its lease and fencing token.
    pub async fn try_fenced(
        &mut self,
        name: &str,
        ttl: Duration,
    ) -> Result<Result<Option<(Lease, i64)>, String>, Trapped> {
        let name = name.to_string();
        self.run(move |(store, _, l)| {
            Box::pin(async move {
                let locks = Self::need_locks(l)?.latchkey_locks_locks().fenced_lock();
                let lock = locks.call_constructor(&mut *store, &name).await?;
                let r = locks.call_try_acquire(&mut *store, lock, ms(ttl)).await?;
                lock.resource_drop_async(&mut *store).await?;
                Ok(r)
            })
        })
        .await
    }

    /// Runs `call` on a `red-lock` named `name` with a node timeout of `node_timeout`, built in
    /// the instance for the call and dropped after it.
    async fn with_red<R: Send + 'static>(
        &mut self,
        name: &str,
        node_timeout: Duration,
        call: impl for<'a> FnOnce(
                &'a mut Store<TenantState>,
                GuestRedLock<'a>,
                ResourceAny,
            ) -> BoxFuture<'a, wasmtime::Result<R>>
            + Send
            + 'static,
    ) -> Result<R, Trapped> {
        let name = name.to_string();
        self.run(move |(store, _, l)| {
            Box::pin(async move {
                let locks = Self::need_locks(l)?.latchkey_locks_locks().red_lock();
                let lock = locks
                    .call_constructor(&mut *store, &name, ms(node_timeout))
                    .await?;
                let r = call(&mut *store, locks, lock).await?;
                lock.resource_drop_async(&mut *store).await?;
                Ok(r)
            })
        })
        .await
    }

    /// Tries to take the RedLock `name` for `ttl` on the host's quorum nodes, giving each node
    /// at most `node_timeout`: the lease when a majority granted it in time.
    pub async fn try_redlock(
        &mut self,
        name: &str,
        ttl: Duration,
        node_timeout: Duration,
    ) -> Result<Result<Option<RedLease>, String>, Trapped> {
        self.with_red(name, node_timeout, move |s, locks, lock| {
            Box::pin(async move { locks.call_try_acquire(s, lock, ms(ttl)).await })
        })
        .await
    }

    /// Extends a RedLock lease to `ttl` on every node that still holds it: the renewed lease
    /// when a majority did so in time.
    pub async fn extend_redlock(
        &mut self,
        name: &str,
        lease: RedLease,
        ttl: Duration,
        node_timeout: Duration,
    ) -> Result<Result<Option<RedLease>, String>, Trapped> {
        self.with_red(name, node_timeout, move |s, locks, lock| {
            Box::pin(async move { locks.call_extend(s, lock, &lease, ms(ttl)).await })
        })
        .await
    }

    /// Releases a RedLock lease on every node; returns how many nodes released it.
    pub async fn unlock_redlock(
        &mut self,
        name: &str,
        lease: RedLease,
        node_timeout: Duration,
    ) -> Result<Result<u32, String>, Trapped> {
        self.with_red(name, node_timeout, move |s, locks, lock| {
            Box::pin(async move { locks.call_release(s, lock, &lease).await })
        })
        .await
    }
}

/// A duration as WIT's `u64` milliseconds.
pub fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}
