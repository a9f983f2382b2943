//! The watchdog: keeps leases alive by renewing them every ttl/3 (with 5–10 % jitter), many
//! leases per script call, and tells the holder *at once* when a renewal finds its lease gone —
//! a future the critical section can `select!` on, which Redisson and python-redis-lock lack.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::{ms, Lease};
use crate::metrics::Metrics;
use crate::scripts::RENEW_BATCH;
use crate::transport::{eval, jitter};
use crate::{Error, Reply, Transport};

/// Why a watched lease was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostReason {
    /// A renewal found the key gone: it expired before it was renewed (a pause longer than
    /// the TTL, a clock that jumped), or someone deleted it.
    Expired,
    /// A renewal found the key holding another token: someone else took the lock.
    Taken,
    /// Renewals kept failing to reach the server until the lease's TTL had passed.
    Unreachable,
}

struct Entry {
    key: Vec<u8>,
    token: String,
    lost: watch::Sender<Option<LostReason>>,
    last_renewed: Duration,
}

/// Renews many leases from one background task.
///
/// ```no_run
/// # async fn demo(t: latchkey_client::native::RedisTransport) -> Result<(), latchkey_client::Error> {
/// use std::time::Duration;
/// use latchkey_client::locks::{SimpleLock, Watchdog};
///
/// let ttl = Duration::from_secs(3);
/// let dog = Watchdog::spawn(t.clone(), ttl);
/// let lock = SimpleLock::new(t, "report");
/// let lease = lock.try_acquire(ttl).await?.expect("free");
/// let mut watch = dog.watch(&lease);
/// tokio::select! {
///     _ = tokio::time::sleep(Duration::from_secs(10)) => { /* long work, lease kept alive */ }
///     reason = watch.lost() => { eprintln!("lock lost: {reason:?}; stop writing"); }
/// }
/// drop(watch);
/// lock.release(&lease).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Watchdog {
    entries: Arc<Mutex<HashMap<u64, Entry>>>,
    next_id: Arc<AtomicU64>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watchdog").finish_non_exhaustive()
    }
}

/// A lease under watch; dropping it stops the renewals.
pub struct LeaseWatch {
    id: u64,
    entries: Arc<Mutex<HashMap<u64, Entry>>>,
    lost: watch::Receiver<Option<LostReason>>,
}

impl LeaseWatch {
    /// Resolves as soon as the lease is known lost.
    pub async fn lost(&mut self) -> LostReason {
        loop {
            if let Some(r) = *self.lost.borrow_and_update() {
                return r;
            }
            if self.lost.changed().await.is_err() {
                return LostReason::Unreachable;
            }
        }
    }

    /// Whether the lease is known lost.
    pub fn is_lost(&self) -> bool {
        self.lost.borrow().is_some()
    }
}

impl Drop for LeaseWatch {
    fn drop(&mut self) {
        self.entries.lock().expect("watchdog lock").remove(&self.id);
    }
}

impl Watchdog {
    /// Starts renewing, every `ttl / 3` with jitter, every lease given to [`watch`] with `ttl`.
    ///
    /// [`watch`]: Watchdog::watch
    pub fn spawn<T: Transport + Clone>(t: T, ttl: Duration) -> Watchdog {
        let dog = Watchdog {
            entries: Arc::new(Mutex::new(HashMap::new())),
            next_id: Arc::new(AtomicU64::new(0)),
            metrics: Arc::new(Metrics::default()),
        };
        let entries = Arc::downgrade(&dog.entries);
        let metrics = dog.metrics.clone();
        tokio::spawn(async move {
            loop {
                let wait = renewal_wait(ttl, |max| jitter(&t, max));
                t.sleep(wait).await;
                let Some(entries) = entries.upgrade() else {
                    return;
                };
                renew_all(&t, &entries, ttl, &metrics).await;
            }
        });
        dog
    }

    /// Watches a lease: renews it until the returned handle is dropped, and reports its loss.
    pub fn watch(&self, lease: &Lease) -> LeaseWatch {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = watch::channel(None);
        self.entries.lock().expect("watchdog lock").insert(
            id,
            Entry {
                key: lease.key.clone(),
                token: lease.token.clone(),
                lost: tx,
                last_renewed: lease.acquired_at,
            },
        );
        LeaseWatch {
            id,
            entries: self.entries.clone(),
            lost: rx,
        }
    }

    /// Renewal counters.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }
}

/// How long the watchdog waits between two rounds for leases of `ttl`: a third of the TTL,
/// less 5 % and less a random `jitter(max)` of at most another 5 % (`max` is that 5 %), so
/// renewals never drift towards the deadline and many clients do not renew in step.
fn renewal_wait(ttl: Duration, jitter: impl FnOnce(Duration) -> Duration) -> Duration {
    let period = ttl / 3;
    period - period / 20 - jitter(period / 20)
}

/// One batch: every watched lease renewed by a single script call.
async fn renew_all<T: Transport>(
    t: &T,
    entries: &Mutex<HashMap<u64, Entry>>,
    ttl: Duration,
    metrics: &Metrics,
) {
    let batch: Vec<(u64, Vec<u8>, String)> = entries
        .lock()
        .expect("watchdog lock")
        .iter()
        .filter(|(_, e)| e.lost.borrow().is_none())
        .map(|(id, e)| (*id, e.key.clone(), e.token.clone()))
        .collect();
    if batch.is_empty() {
        return;
    }
    let keys: Vec<&[u8]> = batch.iter().map(|(_, k, _)| k.as_slice()).collect();
    let ttl_ms = ms(ttl);
    let mut argv: Vec<&[u8]> = vec![&ttl_ms];
    argv.extend(batch.iter().map(|(_, _, tok)| tok.as_bytes()));
    let now = t.now();
    // A server that does not answer (paused, or a network that swallows packets) must not
    // stop the watchdog from noticing that the TTL runs out: a round that gets no answer
    // within a renewal period counts as one the server could not be reached for.
    let results = tokio::time::timeout(ttl / 3, eval(t, &RENEW_BATCH, &keys, &argv))
        .await
        .unwrap_or_else(|_| Err(Error::Transport("no answer to a renewal".into())));
    let mut map = entries.lock().expect("watchdog lock");
    match results {
        Ok(Reply::Array(flags)) => {
            for ((id, _, _), flag) in batch.iter().zip(flags) {
                let Some(e) = map.get_mut(id) else { continue };
                let lost = match flag.as_int() {
                    Some(1) => None,
                    Some(-1) => Some(LostReason::Expired),
                    _ => Some(LostReason::Taken),
                };
                match lost {
                    None => {
                        e.last_renewed = now;
                        metrics.renewal(true);
                    }
                    Some(reason) => {
                        metrics.renewal(false);
                        metrics.lost(true);
                        let _ = e.lost.send(Some(reason));
                    }
                }
            }
        }
        _ => {
            // The server could not be reached: a lease is lost once its TTL has run out.
            for (id, _, _) in &batch {
                let Some(e) = map.get_mut(id) else { continue };
                metrics.renewal(false);
                if now.saturating_sub(e.last_renewed) >= ttl {
                    metrics.lost(false);
                    let _ = e.lost.send(Some(LostReason::Unreachable));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The renewal period is a third of the TTL less 5-10 %: the end-to-end tests cannot see
    /// it (their transport sleeps in real time while the server's TTLs run on a virtual
    /// clock), and a watchdog that renewed too late would lose every lease it keeps.
    #[test]
    fn renewals_come_every_third_of_the_ttl_less_five_to_ten_percent() {
        let ttl = Duration::from_secs(30);
        let mut asked = None;
        let least = renewal_wait(ttl, |max| {
            asked = Some(max);
            max
        });
        assert_eq!(
            asked,
            Some(Duration::from_millis(500)),
            "jitter bound: 5 % of ttl/3"
        );
        assert_eq!(least, Duration::from_secs(9));
        assert_eq!(
            renewal_wait(ttl, |_| Duration::ZERO),
            Duration::from_millis(9500)
        );
        assert_eq!(
            renewal_wait(Duration::from_millis(3000), |_| Duration::from_millis(20)),
            Duration::from_millis(930)
        );
    }
}
