//! The state of one instance's store, and the host functions (`redis` imports) a tenant's
//! component calls: every one checks that the instance was not interrupted, takes a token from
//! the tenant's rate limiter, and goes to the backend through the tenant's namespace.
//! `command-all` does the same for each of the host's quorum nodes (one token per node), and
//! asks them concurrently, each under its own tokio timeout.
//!
//! Host functions are `async`: while one waits (a slow command, a backoff sleep, an unlock
//! message), wasmtime suspends the guest's fiber and the tokio worker runs other tenants.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use latchkey_client::Reply;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::backend::{Backend, CommandSlot, Subscription};
use crate::bindings::latchkey::locks::redis::{Frame as WitFrame, Host, LostCause};
use crate::budget::TenantBudget;
use crate::keeper::{Interrupt, LeaseKeeper};
use crate::limits::{InstanceLimiter, Limits, Slot};
use crate::namespace::Namespace;
use crate::quota::{self, Route};
use latchkey_client::locks::LostReason;

/// Everything one instance's store holds.
pub struct TenantState {
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: InstanceLimiter,
    pub(crate) limits: Arc<Limits>,
    pub(crate) budget: TenantBudget,
    pub(crate) ns: Namespace,
    pub(crate) backend: Arc<dyn Backend>,
    /// The independent servers `command-all` fans out to (at least one).
    nodes: Arc<[Arc<dyn Backend>]>,
    subs: HashMap<u64, (Box<dyn Subscription>, Slot)>,
    next_sub: u64,
    pub(crate) keeper: LeaseKeeper,
    pub(crate) interrupt: Arc<Interrupt>,
    /// The CPU accounting of the current call into the guest.
    pub(crate) cpu: crate::cpu::CpuClock,
    /// Host calls made, for statistics.
    pub(crate) calls: u64,
}

impl WasiView for TenantState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl TenantState {
    /// The state of a fresh instance of tenant `ns`, whose quorum locks run on `nodes`.
    pub(crate) fn new(
        ns: Namespace,
        backend: Arc<dyn Backend>,
        nodes: Arc<[Arc<dyn Backend>]>,
        limits: Arc<Limits>,
        budget: TenantBudget,
        keeper_clock: Option<latchkey_server::Clock>,
    ) -> TenantState {
        let interrupt = Arc::new(Interrupt::default());
        // Every WASI resource the guest holds (a stream, a pollable) is an entry here: a
        // guest that opens without end is trapped at the bound instead of growing the host.
        let mut table = ResourceTable::new();
        table.set_max_capacity(limits.wasi_resources);
        TenantState {
            wasi: WasiCtx::builder()
                .max_random_size(limits.random_bytes_per_call)
                .build(),
            table,
            limiter: InstanceLimiter::new(&limits),
            keeper: LeaseKeeper::new(
                backend.clone(),
                nodes.clone(),
                ns.clone(),
                interrupt.clone(),
                limits.clone(),
                budget.clone(),
                keeper_clock,
            ),
            cpu: crate::cpu::CpuClock::new(budget.cpu.clone()),
            limits,
            budget,
            ns,
            backend,
            nodes,
            subs: HashMap::new(),
            next_sub: 0,
            interrupt,
            calls: 0,
        }
    }

    /// What every host call does first: trap if the instance was interrupted, then wait for
    /// the rate limiter.
    pub(crate) async fn enter(&mut self) -> wasmtime::Result<()> {
        if let Some(reason) = self.interrupt.reason() {
            return Err(wasmtime::format_err!("{reason}"));
        }
        self.calls += 1;
        self.budget.calls.acquire().await;
        Ok(())
    }

    /// The longest an import may keep the guest suspended: `ms`, cut to the tenant's limit.
    fn bounded(&self, ms: u64) -> Duration {
        Duration::from_millis(ms).min(self.limits.max_block)
    }

    /// Checks a command against the allow-list and the quotas, namespaces it, and charges its
    /// bytes to the tenant's byte rate: the command to send and where, or the refusal.
    async fn prepare(&mut self, args: Vec<Vec<u8>>) -> Result<(Vec<Vec<u8>>, Route), String> {
        check_size(&args, &self.limits)?;
        // The quotas read the names as the tenant gave them (before the namespace prefix).
        let route = quota::check(&args, &self.limits)?;
        let persistent = crate::storage::check(&args, &self.limits)?;
        let args = self.ns.rewrite(args)?;
        for at in persistent {
            self.budget
                .persistent
                .admit(
                    &*self.backend,
                    self.ns.tenant(),
                    &args[at],
                    &self.budget.calls,
                )
                .await?;
        }
        let bytes: usize = args.iter().map(Vec::len).sum();
        self.budget.bytes.acquire_n(bytes as f64).await;
        Ok((args, route))
    }
}

/// The count and size of a command's arguments against the tenant's limits (checked before
/// they are copied out of the guest too: see `crate::host`).
pub(crate) fn check_size(args: &[Vec<u8>], l: &Limits) -> Result<(), String> {
    check_counts(args.len(), args.iter().map(Vec::len), l)
}

/// [`check_size`] on the count and the lengths alone.
pub(crate) fn check_counts(
    n: usize,
    lens: impl Iterator<Item = usize>,
    l: &Limits,
) -> Result<(), String> {
    if n > l.args_per_call {
        return Err(format!(
            "{n} arguments is over the tenant's limit of {} per command",
            l.args_per_call
        ));
    }
    let bytes = lens.fold(0usize, usize::saturating_add);
    if bytes > l.bytes_per_call {
        return Err(format!(
            "{bytes} bytes of arguments is over the tenant's limit of {} per command",
            l.bytes_per_call
        ));
    }
    Ok(())
}

/// How many WIT frames [`flatten`] makes of `r` (one per node of the tree).
fn frame_count(r: &Reply) -> usize {
    match r {
        Reply::Array(v) => 1 + v.iter().map(frame_count).sum::<usize>(),
        Reply::Map(m) => {
            1 + m
                .iter()
                .map(|(k, v)| frame_count(k) + frame_count(v))
                .sum::<usize>()
        }
        _ => 1,
    }
}

/// The frames of a reply, in one allocation of the exact size.
fn frames(r: Reply) -> Vec<WitFrame> {
    let mut out = Vec::with_capacity(frame_count(&r));
    flatten(r, &mut out);
    out
}

/// Flattens a reply tree into the prefix-ordered frames of the WIT `frame` variant.
fn flatten(r: Reply, out: &mut Vec<WitFrame>) {
    match r {
        Reply::Nil => out.push(WitFrame::Nil),
        Reply::Int(i) => out.push(WitFrame::Integer(i)),
        Reply::Bulk(b) => out.push(WitFrame::Bulk(b)),
        Reply::Status(s) => out.push(WitFrame::Status(s)),
        Reply::Error(e) => out.push(WitFrame::Error(e)),
        Reply::Double(d) => out.push(WitFrame::Double(d)),
        Reply::Bool(b) => out.push(WitFrame::Boolean(b)),
        Reply::Array(v) => {
            out.push(WitFrame::Array(v.len() as u32));
            for r in v {
                flatten(r, out);
            }
        }
        Reply::Map(m) => {
            out.push(WitFrame::Pairs(m.len() as u32));
            for (k, v) in m {
                flatten(k, out);
                flatten(v, out);
            }
        }
    }
}

impl Host for TenantState {
    async fn command(
        &mut self,
        args: Vec<Vec<u8>>,
    ) -> wasmtime::Result<Result<Vec<WitFrame>, String>> {
        self.enter().await?;
        let (args, route) = match self.prepare(args).await {
            Ok(a) => a,
            Err(e) => return Ok(Err(e)),
        };
        let reply = match route {
            Route::Shared => {
                let mut slot = CommandSlot::take();
                self.backend.clone().command_in(args, &mut slot);
                let reply = slot.run().await;
                slot.give_back();
                reply
            }
            Route::Alone => {
                let bound = self.limits.max_block + Duration::from_secs(1);
                tokio::time::timeout(bound, self.backend.command_alone(args))
                    .await
                    .unwrap_or_else(|_| Err("no answer in time".into()))
            }
        };
        Ok(reply.map(frames))
    }

    async fn nodes(&mut self) -> wasmtime::Result<u32> {
        Ok(u32::try_from(self.nodes.len()).unwrap_or(u32::MAX))
    }

    async fn command_all(
        &mut self,
        args: Vec<Vec<u8>>,
        timeout_ms: u64,
    ) -> wasmtime::Result<Vec<Result<Vec<WitFrame>, String>>> {
        // The first node's call is charged by `enter`, every other node's here: the rate
        // limiter counts commands sent, however they were batched.
        self.enter().await?;
        let mut wait = None;
        for _ in 1..self.nodes.len() {
            wait = self.budget.calls.reserve().or(wait);
        }
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
        // One namespace, one allow-list: a refused command is refused on every node.
        let (args, route) = match self.prepare(args).await {
            Ok(a) => a,
            Err(e) => return Ok(vec![Err(e); self.nodes.len()]),
        };
        let timeout = self.bounded(timeout_ms);
        let calls = self.nodes.iter().map(|node| {
            let args = args.clone();
            async move {
                let call = match route {
                    Route::Shared => node.command(args),
                    Route::Alone => node.command_alone(args),
                };
                match tokio::time::timeout(timeout, call).await {
                    Ok(reply) => reply.map(frames),
                    Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
                }
            }
        });
        Ok(futures_util::future::join_all(calls).await)
    }

    async fn subscribe(&mut self, channel: Vec<u8>) -> wasmtime::Result<Result<u64, String>> {
        self.enter().await?;
        if channel.len() > self.limits.channel_bytes {
            return Ok(Err(format!(
                "channel name of {} bytes is over the tenant's limit of {}",
                channel.len(),
                self.limits.channel_bytes
            )));
        }
        let Some(slot) = self.budget.subscriptions.take() else {
            return Ok(Err(format!(
                "the tenant already holds {} subscriptions, its limit",
                self.budget.subscriptions.max()
            )));
        };
        let sub = match self.backend.subscribe(self.ns.key(&channel)).await {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        self.next_sub += 1;
        self.subs.insert(self.next_sub, (sub, slot));
        Ok(Ok(self.next_sub))
    }

    async fn wait_message(&mut self, subscription: u64, timeout_ms: u64) -> wasmtime::Result<bool> {
        self.enter().await?;
        let timeout = self.bounded(timeout_ms);
        let Some((sub, _)) = self.subs.get_mut(&subscription) else {
            return Ok(false);
        };
        Ok(sub.wait(timeout).await)
    }

    async fn unsubscribe(&mut self, subscription: u64) -> wasmtime::Result<()> {
        self.enter().await?;
        self.subs.remove(&subscription);
        Ok(())
    }

    async fn sleep(&mut self, ms: u64) -> wasmtime::Result<()> {
        self.enter().await?;
        tokio::time::sleep(self.bounded(ms)).await;
        // A lease lost while sleeping interrupts at once, not at the next call.
        match self.interrupt.reason() {
            Some(reason) => Err(wasmtime::format_err!("{reason}")),
            None => Ok(()),
        }
    }

    async fn keep_lease(
        &mut self,
        key: Vec<u8>,
        token: String,
        ttl_ms: u64,
    ) -> wasmtime::Result<Result<u64, String>> {
        self.enter().await?;
        Ok(self.keeper.keep(&key, token, Duration::from_millis(ttl_ms)))
    }

    async fn keep_quorum_lease(
        &mut self,
        key: Vec<u8>,
        token: String,
        ttl_ms: u64,
    ) -> wasmtime::Result<Result<u64, String>> {
        self.enter().await?;
        Ok(self
            .keeper
            .keep_quorum(&key, token, Duration::from_millis(ttl_ms)))
    }

    async fn drop_lease(&mut self, id: u64) -> wasmtime::Result<()> {
        self.keeper.drop_lease(id);
        Ok(())
    }

    async fn lease_alive(&mut self, id: u64) -> wasmtime::Result<bool> {
        Ok(self.keeper.alive(id))
    }

    async fn lease_lost(&mut self, id: u64) -> wasmtime::Result<Option<LostCause>> {
        Ok(self.keeper.lost_cause(id).map(|r| match r {
            LostReason::Expired => LostCause::Expired,
            LostReason::Taken => LostCause::Taken,
            LostReason::Unreachable => LostCause::Unreachable,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_tree_flattens_to_prefix_ordered_frames_in_one_exact_allocation() {
        let reply = Reply::Array(vec![
            Reply::Int(1),
            Reply::Map(vec![(Reply::Status("k".into()), Reply::Nil)]),
            Reply::Bulk(b"v".to_vec()),
        ]);
        assert_eq!(frame_count(&reply), 6);
        let out = frames(reply);
        assert_eq!(out.len(), 6);
        assert_eq!(out.capacity(), 6);
        assert!(matches!(out[0], WitFrame::Array(3)));
        assert!(matches!(out[1], WitFrame::Integer(1)));
        assert!(matches!(out[2], WitFrame::Pairs(1)));
        assert!(matches!(&out[3], WitFrame::Status(s) if s == "k"));
        assert!(matches!(out[4], WitFrame::Nil));
        assert!(matches!(&out[5], WitFrame::Bulk(b) if b == b"v"));
        assert_eq!(frames(Reply::Error("ERR x".into())).len(), 1);
    }
}
