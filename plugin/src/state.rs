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
use std::time::{Duration, Instant};

use latchkey_client::Reply;
use wasmtime::component::ResourceTable;
use wasmtime::StoreLimits;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::backend::{Backend, Subscription};
use crate::keeper::{Interrupt, LeaseKeeper};
use crate::latchkey::locks::redis::{Frame as WitFrame, Host, LostCause};
use crate::limits::RateLimiter;
use crate::namespace::Namespace;
use latchkey_client::locks::LostReason;

/// Everything one instance's store holds.
pub struct TenantState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limits: StoreLimits,
    ns: Namespace,
    backend: Arc<dyn Backend>,
    /// The independent servers `command-all` fans out to (at least one).
    nodes: Arc<[Arc<dyn Backend>]>,
    rate: RateLimiter,
    subs: HashMap<u64, Box<dyn Subscription>>,
    next_sub: u64,
    pub(crate) keeper: LeaseKeeper,
    pub(crate) interrupt: Arc<Interrupt>,
    /// When the guest's current stretch of running began: it left the host (or was called).
    pub(crate) active_since: Instant,
    /// When the guest, having yielded to the executor at an epoch tick, was resumed: set by the
    /// yield itself, which runs outside the store.
    pub(crate) resumed_at: Arc<std::sync::Mutex<Option<Instant>>>,
    /// Time the guest spent running (not yielded, not waiting for a core) since it last left
    /// the host: what the CPU budget counts.
    pub(crate) busy: Duration,
    /// When the guest last left the host: past a ceiling of wall time, even a guest that only
    /// ever ran in scattered ticks is stopped.
    pub(crate) left_host: Instant,
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
        rate: RateLimiter,
        limits: StoreLimits,
    ) -> TenantState {
        let interrupt = Arc::new(Interrupt::default());
        TenantState {
            wasi: WasiCtx::builder().build(),
            table: ResourceTable::new(),
            limits,
            keeper: LeaseKeeper::new(
                backend.clone(),
                nodes.clone(),
                ns.clone(),
                interrupt.clone(),
            ),
            ns,
            backend,
            nodes,
            rate,
            subs: HashMap::new(),
            next_sub: 0,
            interrupt,
            active_since: Instant::now(),
            resumed_at: Arc::default(),
            busy: Duration::ZERO,
            left_host: Instant::now(),
            calls: 0,
        }
    }

    /// The guest is in (or just left) the host: its CPU budget starts again.
    pub(crate) fn mark(&mut self) {
        self.mark_at(Instant::now());
    }

    /// [`TenantState::mark`] with a clock reading the caller already has.
    pub(crate) fn mark_at(&mut self, now: Instant) {
        self.active_since = now;
        self.left_host = self.active_since;
        self.busy = Duration::ZERO;
        *self.resumed_at.lock().expect("resume time") = None;
    }

    /// What every host call does first: trap if the instance was interrupted, then wait for
    /// the rate limiter. Entering the host also restarts the CPU budget.
    async fn enter(&mut self) -> wasmtime::Result<()> {
        if let Some(reason) = self.interrupt.reason() {
            return Err(wasmtime::format_err!("{reason}"));
        }
        self.calls += 1;
        // One clock read serves the rate limiter and the CPU budget; the clock is read again
        // only when the call had to wait its turn.
        let now = Instant::now();
        let entered = match self.rate.reserve_at(now) {
            None => now,
            Some(wait) => {
                tokio::time::sleep(wait).await;
                Instant::now()
            }
        };
        self.mark_at(entered);
        Ok(())
    }
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
        let args = match self.ns.rewrite(args) {
            Ok(a) => a,
            Err(e) => return Ok(Err(e)),
        };
        let reply = self.backend.command(args).await;
        self.mark();
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
            wait = self.rate.reserve().or(wait);
        }
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
            self.mark();
        }
        // One namespace, one allow-list: a refused command is refused on every node.
        let args = match self.ns.rewrite(args) {
            Ok(a) => a,
            Err(e) => return Ok(vec![Err(e); self.nodes.len()]),
        };
        let timeout = Duration::from_millis(timeout_ms);
        let calls = self.nodes.iter().map(|node| {
            let args = args.clone();
            async move {
                match tokio::time::timeout(timeout, node.command(args)).await {
                    Ok(reply) => reply.map(frames),
                    Err(_) => Err(format!("no answer within {timeout_ms} ms")),
                }
            }
        });
        let replies = futures_util::future::join_all(calls).await;
        self.mark();
        Ok(replies)
    }

    async fn subscribe(&mut self, channel: Vec<u8>) -> wasmtime::Result<Result<u64, String>> {
        self.enter().await?;
        let sub = match self.backend.subscribe(self.ns.key(&channel)).await {
            Ok(s) => s,
            Err(e) => return Ok(Err(e)),
        };
        self.next_sub += 1;
        self.subs.insert(self.next_sub, sub);
        Ok(Ok(self.next_sub))
    }

    async fn wait_message(&mut self, subscription: u64, timeout_ms: u64) -> wasmtime::Result<bool> {
        self.enter().await?;
        let Some(sub) = self.subs.get_mut(&subscription) else {
            return Ok(false);
        };
        let got = sub.wait(Duration::from_millis(timeout_ms)).await;
        self.mark();
        Ok(got)
    }

    async fn unsubscribe(&mut self, subscription: u64) -> wasmtime::Result<()> {
        self.subs.remove(&subscription);
        Ok(())
    }

    async fn sleep(&mut self, ms: u64) -> wasmtime::Result<()> {
        self.enter().await?;
        tokio::time::sleep(Duration::from_millis(ms)).await;
        self.mark();
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
