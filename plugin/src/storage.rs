//! What a tenant may leave on the server through the lock client's own scripts.
//!
//! A tenant may run only the lock client's scripts (see [`crate::namespace`]), but it chooses
//! their arguments. Two ways those scripts could hold storage without end:
//!
//! - **TTLs from arguments.** Most scripts set their keys' expiry from an `ARGV` (`PX`,
//!   `PEXPIRE`, a sorted-set deadline). The host knows, for each script, which arguments are
//!   TTLs ([`rule`]), and each must be a decimal integer from 1 to [`Limits::key_ttl_max`]:
//!   as with `SET`, every key a script writes this way goes away by itself. (A TTL that is not
//!   a number is refused too: some scripts write a hash *before* they set its expiry, and a
//!   Lua error in between would leave the hash with none.)
//! - **Keys that never expire.** A fenced lock's counter must outlive every lease (a fencing
//!   token may never go back), and a fair lock's queue lives as long as it has waiters. These
//!   keys are counted, by name, per tenant: a script that may create one is refused when the
//!   tenant already has [`Limits::persistent_keys`] of them. The names are kept on the server,
//!   in a hash no tenant can name ([`registry_key`], one field per name), so the count survives a host restart and is
//!   shared by every host of one server. When the count is full, the host first forgets the
//!   names whose keys are gone (a deleted counter, a drained queue), one `EXISTS` each, charged
//!   to the tenant's call rate.
//!
//! A script the host has no rule for is refused: adding a script to the client means saying
//! here what it stores.

use std::collections::HashSet;
use std::sync::Arc;

use latchkey_client::scripts::{self, Script};
use latchkey_client::Reply;

use crate::backend::Backend;
use crate::limits::{Limits, RateLimiter};

/// What one of the lock client's scripts stores: which of its `ARGV` are TTLs in milliseconds,
/// and which of its `KEYS` may be created without an expiry (both 1-based, as in Lua).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    /// `ARGV` positions holding a TTL (or a deadline offset) in milliseconds.
    pub(crate) ttl_args: &'static [usize],
    /// `KEYS` positions of keys the script may create with no expiry.
    pub(crate) persistent_keys: &'static [usize],
}

/// The rule of `script`, by name; `None` for a script the host does not know.
pub(crate) fn rule(script: &Script) -> Option<Rule> {
    let r = |ttl_args, persistent_keys| {
        Some(Rule {
            ttl_args,
            persistent_keys,
        })
    };
    match script.name {
        // They delete, or only touch what exists.
        "release"
        | "release_and_publish"
        | "multi_release"
        | "rw_release"
        | "semaphore_release"
        | "simple_leave" => r(&[], &[]),
        // ARGV[2]: the lock's TTL; ARGV[3]: the waiter's lease, which is also how long its
        // queue lives.
        "simple_wait" => r(&[2, 3], &[]),
        "extend" => r(&[2], &[]),
        "renew_batch" => r(&[1], &[]),
        "reentrant_acquire" | "reentrant_release" | "reentrant_renew" => r(&[1], &[]),
        "multi_acquire" | "read_acquire" | "write_acquire" => r(&[2], &[]),
        "semaphore_acquire" => r(&[3], &[]),
        // KEYS[2]: the fencing counter, which must never expire.
        "fenced_acquire" => r(&[2], &[2]),
        // KEYS[2], KEYS[3]: the queue and its deadlines, alive while anyone waits.
        "fair_acquire" => r(&[2, 3], &[2, 3]),
        _ => None,
    }
}

/// The lock client's script `EVAL`/`EVALSHA` names by its body or SHA1 (`by_body` says which).
fn find(script: &[u8], by_body: bool) -> Option<&'static Script> {
    scripts::all().into_iter().find(|s| {
        if by_body {
            s.body.as_bytes() == script
        } else {
            s.sha().as_bytes().eq_ignore_ascii_case(script)
        }
    })
}

/// Checks the TTL arguments of a script call (`args` as the tenant sent them) and says which
/// argument positions (0-based, in `args`) hold keys it may create without expiry. Anything
/// but `EVAL`/`EVALSHA` passes through with no positions; malformed calls are left to the
/// namespace, which refuses them.
pub(crate) fn check(args: &[Vec<u8>], l: &Limits) -> Result<Vec<usize>, String> {
    let Some(name) = args.first() else {
        return Ok(Vec::new());
    };
    let by_body = name.eq_ignore_ascii_case(b"eval");
    if !by_body && !name.eq_ignore_ascii_case(b"evalsha") {
        return Ok(Vec::new());
    }
    let (Some(script), Some(numkeys)) = (args.get(1), args.get(2).and_then(|n| int(n))) else {
        return Ok(Vec::new());
    };
    let Some(script) = find(script, by_body) else {
        return Ok(Vec::new());
    };
    let rule = rule(script).ok_or_else(|| {
        format!(
            "the script '{}' has no storage rule on this host",
            script.name
        )
    })?;
    let numkeys = usize::try_from(numkeys).unwrap_or(0);
    let argv = 3usize.saturating_add(numkeys);
    let max = l.key_ttl_max.as_millis();
    for &i in rule.ttl_args {
        let at = argv.saturating_add(i - 1);
        let ok = args
            .get(at)
            .and_then(|v| int(v))
            .is_some_and(|ms| ms >= 1 && (ms as u128) <= max);
        if !ok {
            return Err(format!(
                "the script '{}' needs ARGV[{i}] to be a TTL from 1 to {max} ms for tenants",
                script.name
            ));
        }
    }
    Ok(rule
        .persistent_keys
        .iter()
        .filter(|&&k| k <= numkeys)
        .map(|&k| 2 + k)
        .filter(|&at| at < args.len())
        .collect())
}

/// The argument as a decimal integer, if it is one.
fn int(v: &[u8]) -> Option<i64> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// Where the names of a tenant's keys of one `kind` are counted: `:latchkey:<kind>:<tenant>`
/// (`persistent`: keys that never expire; `buckets`: its `wasi:keyvalue` buckets). No tenant
/// can name it: a tenant's keys start with its name or with `{`.
pub(crate) fn registry_key(kind: &str, tenant: &str) -> Vec<u8> {
    format!(":latchkey:{kind}:{tenant}").into_bytes()
}

/// A tenant's keys of one kind that outlive any TTL, by name (namespaced, as on the server): a
/// cache of the registry on the server, shared by every instance of the tenant.
#[derive(Debug, Clone)]
pub(crate) struct PersistentKeys {
    known: Arc<tokio::sync::Mutex<HashSet<Vec<u8>>>>,
    max: usize,
    /// The registry's kind (see [`registry_key`]).
    kind: &'static str,
    /// What the names are, for the refusal: "keys that never expire (...)".
    what: &'static str,
}

impl PersistentKeys {
    /// An empty cache for a quota of `max` names of `kind` (see [`registry_key`]); `what` names
    /// them in the refusal.
    pub(crate) fn new(kind: &'static str, max: usize, what: &'static str) -> PersistentKeys {
        PersistentKeys {
            known: Arc::default(),
            max,
            kind,
            what,
        }
    }

    /// Admits `key` (namespaced) for `tenant`: already registered, or registered now if the
    /// count allows; otherwise the refusal the tenant is told. `calls` is charged for each
    /// `EXISTS` of a sweep.
    pub(crate) async fn admit(
        &self,
        backend: &dyn Backend,
        tenant: &str,
        key: &[u8],
        calls: &RateLimiter,
    ) -> Result<(), String> {
        let mut known = self.known.lock().await;
        if known.contains(key) {
            return Ok(());
        }
        let registry = registry_key(self.kind, tenant);
        let cmd = |name: &str, rest: &[&[u8]]| {
            let mut v = vec![name.as_bytes().to_vec()];
            v.extend(rest.iter().map(|a| a.to_vec()));
            v
        };
        let added = backend.command(cmd("HSET", &[&registry, key, b""])).await?;
        if added == Reply::Int(0) {
            known.insert(key.to_vec());
            return Ok(());
        }
        if self.count(backend, &registry).await? > self.max {
            // Full: forget the names whose keys are gone, then count again.
            let members = match backend.command(cmd("HKEYS", &[&registry])).await? {
                Reply::Array(m) => m,
                other => return Err(format!("unexpected reply to HKEYS: {other:?}")),
            };
            calls.acquire_n(members.len() as f64).await;
            for m in members {
                let Reply::Bulk(name) = m else { continue };
                if name == key {
                    continue;
                }
                if backend.command(cmd("EXISTS", &[&name])).await? == Reply::Int(0) {
                    backend.command(cmd("HDEL", &[&registry, &name])).await?;
                    known.remove(&name);
                }
            }
            if self.count(backend, &registry).await? > self.max {
                backend.command(cmd("HDEL", &[&registry, key])).await?;
                return Err(format!(
                    "the tenant already has {} {}, its limit",
                    self.max, self.what
                ));
            }
        }
        known.insert(key.to_vec());
        Ok(())
    }

    /// How many names the registry holds.
    async fn count(&self, backend: &dyn Backend, registry: &[u8]) -> Result<usize, String> {
        match backend
            .command(vec![b"HLEN".to_vec(), registry.to_vec()])
            .await?
        {
            Reply::Int(n) => Ok(n.max(0) as usize),
            other => Err(format!("unexpected reply to HLEN: {other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn eval(script: &Script, keys: &[&str], argv: &[&str]) -> Vec<Vec<u8>> {
        let mut v = vec![
            b"EVALSHA".to_vec(),
            script.sha().as_bytes().to_vec(),
            keys.len().to_string().into_bytes(),
        ];
        v.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
        v.extend(argv.iter().map(|a| a.as_bytes().to_vec()));
        v
    }

    fn limits() -> Limits {
        Limits {
            key_ttl_max: Duration::from_secs(10),
            ..Limits::default()
        }
    }

    #[test]
    fn every_script_of_the_client_has_a_rule() {
        for s in scripts::all() {
            assert!(rule(s).is_some(), "{}", s.name);
        }
    }

    #[test]
    fn script_ttls_must_be_integers_within_the_ceiling() {
        let l = limits();
        let ok = eval(&scripts::EXTEND, &["{k}"], &["tok", "10000"]);
        assert_eq!(check(&ok, &l), Ok(vec![]));
        for bad in ["10001", "0", "-5", "x", ""] {
            let call = eval(&scripts::EXTEND, &["{k}"], &["tok", bad]);
            let e = check(&call, &l).unwrap_err();
            assert!(
                e.contains("ARGV[2] to be a TTL from 1 to 10000 ms"),
                "{bad}: {e}"
            );
        }
        // A missing TTL argument is refused, not skipped.
        assert!(check(&eval(&scripts::WRITE_ACQUIRE, &["{k}"], &["tok"]), &l).is_err());
        // By body too, in any case of the command name.
        let mut by_body = eval(&scripts::RENEW_BATCH, &["{a}"], &["99999", "t"]);
        by_body[0] = b"eval".to_vec();
        by_body[1] = scripts::RENEW_BATCH.body.as_bytes().to_vec();
        assert!(check(&by_body, &l).is_err());
    }

    #[test]
    fn fence_counters_and_fair_queues_are_the_keys_that_never_expire() {
        let l = limits();
        let fenced = eval(
            &scripts::FENCED_ACQUIRE,
            &["{f}", "{f}:fence"],
            &["t", "100"],
        );
        assert_eq!(check(&fenced, &l), Ok(vec![4]));
        let fair = eval(
            &scripts::FAIR_ACQUIRE,
            &["{q}", "{q}:queue", "{q}:deadlines"],
            &["t", "100", "300"],
        );
        assert_eq!(check(&fair, &l), Ok(vec![4, 5]));
        // Fewer keys than the script expects: only those sent.
        let short = eval(&scripts::FENCED_ACQUIRE, &["{f}"], &["t", "100"]);
        assert_eq!(check(&short, &l), Ok(vec![]));
        // Other commands pass through.
        let get: Vec<Vec<u8>> = vec![b"GET".to_vec(), b"k".to_vec()];
        assert_eq!(check(&get, &l), Ok(vec![]));
    }
}
