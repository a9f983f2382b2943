//! The lease keeper: the host renews the leases an instance hands it, every ttl/3, with the
//! lock client's own extend script, so a tenant busy in its critical section keeps its lock.
//! A lease lives on the tenant's backend (`keep-lease`) or on the quorum nodes
//! (`keep-quorum-lease`, for a RedLock: renewed on every node at once, held while a majority
//! holds it). When a renewal finds the lock gone or taken by another token, the lease is lost
//! and the instance is interrupted (see [`Interrupt`]). Only such a definite answer is a loss:
//! an error reply (`BUSY`, `OOM`, `LOADING`, `READONLY`...), a timeout or a broken connection
//! is retried, soon, until a whole TTL has passed since the last renewal that went through.
//!
//! Keeping a lease is a quota: a tenant keeps at most [`Limits::leases`] at once, with keys,
//! tokens and TTLs within bounds, and every renewal takes a token of the tenant's call rate
//! (one per node), so the host never sends more for a tenant than the tenant could itself.
//! Renewals go over the backend's keeper connection ([`Backend::keeper`]), never queued behind
//! a tenant's slow command.
//!
//! A tenant's component has no background tasks of its own, which is why this lives in the
//! host; the native client does the same from a tokio task ([`latchkey_client::locks::Watchdog`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use latchkey_client::locks::LostReason;
use latchkey_client::scripts::{Script, EXTEND, RELEASE};
use latchkey_client::Reply;
use latchkey_server::Clock;
use tokio::task::JoinHandle;

use crate::backend::Backend;
use crate::budget::TenantBudget;
use crate::limits::{Limits, RateLimiter, Slot};
use crate::namespace::Namespace;

/// Why an instance must stop, once something decided it must. Checked at every host call and
/// at every epoch tick, so a guest computing without host calls is stopped too.
#[derive(Debug, Default)]
pub struct Interrupt {
    raised: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl Interrupt {
    /// Asks the instance to stop, for `reason` (the first reason wins).
    pub fn raise(&self, reason: String) {
        let mut r = self.reason.lock().expect("interrupt lock");
        if r.is_none() {
            *r = Some(reason);
        }
        self.raised.store(true, Ordering::SeqCst);
    }

    /// The reason, if the instance was asked to stop.
    pub fn reason(&self) -> Option<String> {
        if !self.raised.load(Ordering::Relaxed) {
            return None;
        }
        self.reason.lock().expect("interrupt lock").clone()
    }
}

/// Where a kept lease lives.
#[derive(Clone)]
enum Target {
    /// On the tenant's backend.
    Primary(Arc<dyn Backend>),
    /// On every quorum node, each given `node_timeout` to answer; held while a majority holds
    /// it.
    Quorum {
        nodes: Arc<[Arc<dyn Backend>]>,
        node_timeout: Duration,
    },
}

/// What one renewal round found.
enum Renewal {
    /// The lease is held for another TTL.
    Renewed,
    /// The lease is gone for good (the cause, and the words for it).
    Lost(LostReason, String),
    /// The round did not get through (why); a later one may.
    Failed(String),
}

impl Target {
    /// Extends the lease to `ttl` from now (`ttl_ms`, as the extend script takes it).
    async fn extend(&self, key: &[u8], token: &str, ttl_ms: &str) -> Renewal {
        let argv: [&[u8]; 2] = [token.as_bytes(), ttl_ms.as_bytes()];
        match self {
            Target::Primary(backend) => match eval(&**backend, &EXTEND, key, &argv).await {
                Ok(Reply::Int(1)) => Renewal::Renewed,
                Ok(Reply::Int(-1)) => Renewal::Lost(
                    LostReason::Expired,
                    "the lock expired or was deleted".into(),
                ),
                Ok(Reply::Int(_)) => {
                    Renewal::Lost(LostReason::Taken, "another holder took the lock".into())
                }
                // An error reply (the server is busy, out of memory, loading, read-only...)
                // says nothing about the lock: try again.
                Ok(other) => Renewal::Failed(format!("renewal answered {other:?}")),
                Err(e) => Renewal::Failed(e),
            },
            Target::Quorum {
                nodes,
                node_timeout,
            } => {
                let replies = on_every_node(nodes, *node_timeout, &EXTEND, key, &argv).await;
                let n = replies.len();
                let quorum = n / 2 + 1;
                let renewed = replies
                    .iter()
                    .filter(|r| matches!(r, Ok(Reply::Int(1))))
                    .count();
                // A node that answered an integer other than 1 no longer holds our token; an
                // error reply or no answer says nothing.
                let gone = replies
                    .iter()
                    .filter(|r| matches!(r, Ok(Reply::Int(i)) if *i != 1))
                    .count();
                if renewed >= quorum {
                    Renewal::Renewed
                } else if n - gone < quorum {
                    // Taken when some node holds another token; else the key is gone.
                    let taken = replies
                        .iter()
                        .any(|r| matches!(r, Ok(Reply::Int(i)) if *i != 1 && *i != -1));
                    let cause = if taken {
                        LostReason::Taken
                    } else {
                        LostReason::Expired
                    };
                    Renewal::Lost(
                        cause,
                        format!("{gone} of {n} nodes no longer hold it, a majority is {quorum}"),
                    )
                } else {
                    Renewal::Failed(format!(
                        "{renewed} of {n} nodes renewed it, a majority is {quorum}"
                    ))
                }
            }
        }
    }

    /// Releases the lease (token-checked) wherever it lives.
    async fn release(&self, key: &[u8], token: &str) {
        match self {
            Target::Primary(backend) => {
                let _ = eval(&**backend, &RELEASE, key, &[token.as_bytes()]).await;
            }
            Target::Quorum {
                nodes,
                node_timeout,
            } => {
                on_every_node(nodes, *node_timeout, &RELEASE, key, &[token.as_bytes()]).await;
            }
        }
    }
}

/// Runs `script` on every node at once, each bounded by `timeout`, in node order.
async fn on_every_node(
    nodes: &[Arc<dyn Backend>],
    timeout: Duration,
    script: &Script,
    key: &[u8],
    argv: &[&[u8]],
) -> Vec<Result<Reply, String>> {
    let calls = nodes.iter().map(|node| async move {
        tokio::time::timeout(timeout, eval(&**node, script, key, argv))
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {timeout:?}")))
    });
    futures_util::future::join_all(calls).await
}

/// One kept lease.
struct Kept {
    key: Vec<u8>,
    token: String,
    target: Target,
    alive: Arc<AtomicBool>,
    /// Why it was lost, once it was.
    cause: Arc<Mutex<Option<LostReason>>>,
    renewer: JoinHandle<()>,
    /// The lease's unit of the tenant's lease quota.
    _slot: Slot,
}

/// The leases one instance asked the host to keep.
pub struct LeaseKeeper {
    backend: Arc<dyn Backend>,
    nodes: Arc<[Arc<dyn Backend>]>,
    ns: Namespace,
    interrupt: Arc<Interrupt>,
    leases: HashMap<u64, Kept>,
    next_id: u64,
    limits: Arc<Limits>,
    budget: TenantBudget,
    clock: Option<Clock>,
}

/// The time one lease's renewals go by, counted from when the lease was handed over: real
/// time, or a [`Clock`] that someone else moves (a simulation decides when renewals come due,
/// and a frozen clock is a stopped process: no renewal runs).
struct Ticks {
    clock: Option<Clock>,
    /// `clock`'s reading when the lease was handed over.
    origin_ms: u64,
    /// The same moment in real time.
    origin: tokio::time::Instant,
}

impl Ticks {
    fn new(clock: Option<Clock>) -> Ticks {
        Ticks {
            origin_ms: clock.as_ref().map_or(0, Clock::now_ms),
            clock,
            origin: tokio::time::Instant::now(),
        }
    }

    /// Time since the lease was handed over.
    fn now(&self) -> Duration {
        match &self.clock {
            Some(c) => Duration::from_millis(c.now_ms().saturating_sub(self.origin_ms)),
            None => self.origin.elapsed(),
        }
    }

    /// Waits until [`Ticks::now`] reads at least `at`.
    async fn sleep_until(&self, at: Duration) {
        match &self.clock {
            Some(c) => {
                let ms = u64::try_from(at.as_millis()).unwrap_or(u64::MAX);
                c.sleep_until_ms(self.origin_ms.saturating_add(ms)).await
            }
            None => tokio::time::sleep_until(self.origin + at).await,
        }
    }
}

/// Runs `script` with `EVALSHA`, falling back to `EVAL` when the server does not know it.
async fn eval(
    backend: &dyn Backend,
    script: &Script,
    key: &[u8],
    argv: &[&[u8]],
) -> Result<Reply, String> {
    let build = |verb: &str, first: &[u8]| {
        let mut a = vec![
            verb.as_bytes().to_vec(),
            first.to_vec(),
            b"1".to_vec(),
            key.to_vec(),
        ];
        a.extend(argv.iter().map(|v| v.to_vec()));
        a
    };
    let reply = backend
        .command(build("EVALSHA", script.sha().as_bytes()))
        .await?;
    match &reply {
        Reply::Error(e) if e.starts_with("NOSCRIPT") => {
            backend.command(build("EVAL", script.body.as_bytes())).await
        }
        _ => Ok(reply),
    }
}

impl LeaseKeeper {
    /// A keeper for one instance of the tenant `ns` whose backend is `backend` and whose
    /// quorum nodes are `nodes`, raising `interrupt` when a lease is lost.
    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        nodes: Arc<[Arc<dyn Backend>]>,
        ns: Namespace,
        interrupt: Arc<Interrupt>,
        limits: Arc<Limits>,
        budget: TenantBudget,
        clock: Option<Clock>,
    ) -> LeaseKeeper {
        // Renewals go over each backend's own keeper connection when it has one.
        let keeper = |b: &Arc<dyn Backend>| b.keeper().unwrap_or_else(|| b.clone());
        let nodes: Arc<[Arc<dyn Backend>]> = nodes.iter().map(keeper).collect();
        LeaseKeeper {
            backend: keeper(&backend),
            nodes,
            ns,
            interrupt,
            leases: HashMap::new(),
            next_id: 0,
            limits,
            budget,
            clock,
        }
    }

    /// Starts renewing `key` (as the component names it) held with `token` on the tenant's
    /// backend, for `ttl` each time, every ttl/3. Returns the lease's id.
    pub fn keep(&mut self, key: &[u8], token: String, ttl: Duration) -> Result<u64, String> {
        self.start(Target::Primary(self.backend.clone()), key, token, ttl)
    }

    /// Like [`keep`](LeaseKeeper::keep), for a lease held on the quorum nodes: each renewal
    /// extends it on every node at once (each bounded by a tenth of the TTL) and holds when a
    /// majority did.
    pub fn keep_quorum(&mut self, key: &[u8], token: String, ttl: Duration) -> Result<u64, String> {
        let target = Target::Quorum {
            nodes: self.nodes.clone(),
            node_timeout: (ttl / 10).max(Duration::from_millis(1)),
        };
        self.start(target, key, token, ttl)
    }

    fn start(
        &mut self,
        target: Target,
        key: &[u8],
        token: String,
        ttl: Duration,
    ) -> Result<u64, String> {
        let l = &self.limits;
        if ttl < l.lease_ttl_min || ttl > l.lease_ttl_max {
            return Err(format!(
                "ttl-ms must be between {} and {} for the host to keep the lease",
                l.lease_ttl_min.as_millis(),
                l.lease_ttl_max.as_millis()
            ));
        }
        if key.len() > l.lease_key_bytes {
            return Err(format!(
                "a kept lease's key may have at most {} bytes, not {}",
                l.lease_key_bytes,
                key.len()
            ));
        }
        if token.len() > l.lease_token_bytes {
            return Err(format!(
                "a kept lease's token may have at most {} bytes, not {}",
                l.lease_token_bytes,
                token.len()
            ));
        }
        let Some(slot) = self.budget.leases.take() else {
            return Err(format!(
                "the tenant already has {} leases kept, its limit",
                self.budget.leases.max()
            ));
        };
        self.next_id += 1;
        let id = self.next_id;
        let key = self.ns.key(key);
        let alive = Arc::new(AtomicBool::new(true));
        let cause = Arc::new(Mutex::new(None));
        let renewer = tokio::spawn(renew(
            (Ticks::new(self.clock.clone()), ttl),
            target.clone(),
            key.clone(),
            token.clone(),
            (alive.clone(), cause.clone()),
            self.interrupt.clone(),
            self.budget.calls.clone(),
        ));
        self.leases.insert(
            id,
            Kept {
                key,
                token,
                target,
                alive,
                cause,
                renewer,
                _slot: slot,
            },
        );
        Ok(id)
    }

    /// Stops renewing lease `id` (the tenant releases the lock itself).
    pub fn drop_lease(&mut self, id: u64) {
        if let Some(k) = self.leases.remove(&id) {
            k.renewer.abort();
        }
    }

    /// Whether lease `id` is kept and was not found lost.
    pub fn alive(&self, id: u64) -> bool {
        self.leases
            .get(&id)
            .is_some_and(|k| k.alive.load(Ordering::SeqCst))
    }

    /// Why lease `id` was lost: `None` while it is held, or when it is not kept.
    pub fn lost_cause(&self, id: u64) -> Option<LostReason> {
        *self.leases.get(&id)?.cause.lock().expect("lost cause")
    }

    /// How many leases are kept.
    pub fn len(&self) -> usize {
        self.leases.len()
    }

    /// Whether no lease is kept.
    pub fn is_empty(&self) -> bool {
        self.leases.is_empty()
    }

    /// Stops every renewal and releases every kept lease that is still held (token-checked):
    /// what the host does for an instance that trapped, so others need not wait for the TTL.
    pub async fn release_all(&mut self) {
        for (_, k) in self.leases.drain() {
            k.renewer.abort();
            if k.alive.load(Ordering::SeqCst) {
                k.target.release(&k.key, &k.token).await;
            }
        }
    }
}

impl Drop for LeaseKeeper {
    /// An instance dropped while the host still keeps leases for it (the embedder dropped it,
    /// or the tenant never released): the renewals stop, and the leases still held are
    /// released in a task on the current tokio runtime, so that the next holder does not wait
    /// for the TTL. Outside a runtime they are left to expire.
    /// [`crate::Instance::close`] does the same and waits for it.
    fn drop(&mut self) {
        let live: Vec<Kept> = self
            .leases
            .drain()
            .filter_map(|(_, k)| {
                k.renewer.abort();
                k.alive.load(Ordering::SeqCst).then_some(k)
            })
            .collect();
        if live.is_empty() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                for k in live {
                    k.target.release(&k.key, &k.token).await;
                }
            });
        }
    }
}

/// The renewal loop of one lease: extend every ttl/3; when a renewal finds the lock gone or
/// not ours, mark the lease dead and interrupt the instance. A round that does not get
/// through (an error reply, a failing connection, too few nodes answering) is retried every
/// ttl/10 until a whole TTL passed without a successful renewal (then the lock may have
/// expired). Each round takes one token of the tenant's call rate per node it asks, and waits
/// for it like the tenant's own calls. Time is read from `ticks`.
async fn renew(
    (ticks, ttl): (Ticks, Duration),
    target: Target,
    key: Vec<u8>,
    token: String,
    (alive, cause): (Arc<AtomicBool>, Arc<Mutex<Option<LostReason>>>),
    interrupt: Arc<Interrupt>,
    calls: RateLimiter,
) {
    let ttl_ms = ttl.as_millis().to_string();
    let nodes = match &target {
        Target::Primary(_) => 1.0,
        Target::Quorum { nodes, .. } => nodes.len() as f64,
    };
    let retry = (ttl / 10).max(Duration::from_millis(1));
    let mut last_ok = ticks.now();
    let mut next = last_ok + ttl / 3;
    loop {
        ticks.sleep_until(next).await;
        calls.acquire_n(nodes).await;
        // A round never outlives the TTL: a hung connection is a failed round.
        let started = ticks.now();
        let left = ttl
            .saturating_sub(started.saturating_sub(last_ok))
            .max(Duration::from_millis(1));
        let round = tokio::select! {
            r = target.extend(&key, &token, &ttl_ms) => r,
            _ = ticks.sleep_until(started + left) => Renewal::Failed("no answer in time".into()),
        };
        let now = ticks.now();
        let lost = match round {
            Renewal::Renewed => {
                last_ok = now;
                next = now + ttl / 3;
                None
            }
            Renewal::Lost(reason, why) => Some((reason, why)),
            Renewal::Failed(e) if now.saturating_sub(last_ok) >= ttl => Some((
                LostReason::Unreachable,
                format!("renewals failed for a whole TTL: {e}"),
            )),
            Renewal::Failed(_) => {
                next = now + retry;
                None
            }
        };
        if let Some((reason, why)) = lost {
            // The cause and the interrupt first: whoever sees the lease dead can ask why, and
            // finds the instance already stopped at its next host call.
            *cause.lock().expect("lost cause") = Some(reason);
            interrupt.raise(format!(
                "lease on '{}' lost ({why}); tenant interrupted",
                String::from_utf8_lossy(&key)
            ));
            alive.store(false, Ordering::SeqCst);
            return;
        }
    }
}
