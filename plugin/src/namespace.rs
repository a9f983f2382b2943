//! A tenant's namespace: which commands it may send, and how its keys and channels are
//! rewritten so that no two tenants can ever name the same key.

use std::collections::HashSet;
use std::sync::Arc;

use sha1::{Digest, Sha1};

/// What a tenant may run, and how its arguments are namespaced.
#[derive(Debug, Clone)]
pub struct Namespace {
    tenant: String,
    scripts: Arc<HashSet<String>>,
}

/// Commands a tenant's component may send (plus the lock client's own scripts, by SHA1).
/// Everything a lock needs, nothing that reaches outside one key: no `KEYS`, `SCAN`,
/// `FLUSHALL`, `CONFIG`, `DEBUG`, `SCRIPT`, `CLIENT`, `SELECT`...
const ALLOWED: &[&str] = &[
    "get", "set", "del", "exists", "pttl", "pexpire", "hget", "time", "wait", "eval", "evalsha",
    "publish",
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

    /// The tenant's name.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// A key or channel inside the namespace: `{name}rest` becomes `{tenant:name}rest` (same
    /// hash tag for every key of a lock, so they stay in one Cluster slot), anything else
    /// `tenant:key`.
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
                let sha = match (name.as_str(), args.get(1)) {
                    (_, None) => return Err("missing script".into()),
                    ("eval", Some(body)) => hex::encode(Sha1::digest(body)),
                    (_, Some(sha)) => String::from_utf8_lossy(sha).to_ascii_lowercase(),
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
            // The channel of PUBLISH is its first argument (not a key in the command table).
            "publish" => vec![1],
            _ => {
                let spec =
                    latchkey_server::cmd::lookup(name.as_bytes()).ok_or("unknown command")?;
                spec.key_positions(args.len())
            }
        };
        for i in keys {
            if i < args.len() {
                args[i] = self.key(&args[i]);
            }
        }
        Ok(args)
    }
}
