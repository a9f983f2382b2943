//! A tenant's namespace: which commands it may send, and how its keys and channels are
//! rewritten so that no two tenants can ever name the same key.
//!
//! Every command a tenant sends passes through [`Namespace::rewrite`], so it is on the hot path
//! of every lock operation: it looks the command up in a small table built once, compares
//! script bodies and SHA1s to the lock client's own without hashing or allocating, and
//! allocates only the rewritten keys.

use std::sync::{Arc, OnceLock};

use latchkey_client::scripts::{self, Script};
use latchkey_server::commands::{self, CommandInfo};

/// What a tenant may run, and how its arguments are namespaced.
#[derive(Debug, Clone)]
pub struct Namespace {
    tenant: Arc<str>,
}

/// Commands a tenant's component may send (plus the lock client's own scripts, by SHA1).
/// Everything a lock needs, nothing that reaches outside one key: no `KEYS`, `SCAN`,
/// `FLUSHALL`, `CONFIG`, `DEBUG`, `SCRIPT`, `CLIENT`, `SELECT`...
const ALLOWED: &[&str] = &[
    "get", "set", "del", "exists", "pttl", "pexpire", "hget", "time", "wait", "eval", "evalsha",
    "publish",
];

/// Where an allowed command's keys are.
#[derive(Debug, Clone, Copy)]
enum Keys {
    /// `EVAL body numkeys key...`: the body must be one of the lock client's scripts.
    Eval,
    /// `EVALSHA sha numkeys key...`: the SHA1 must be one of the lock client's scripts.
    EvalSha,
    /// `PUBLISH channel message`: the channel is namespaced like a key (it is not a key in the
    /// command table).
    Channel,
    /// As the server's command table says.
    Table(CommandInfo),
}

/// The allow-list, each command with where its keys are: resolved once, on first use.
fn allowed() -> &'static [(&'static str, Keys)] {
    static TABLE: OnceLock<Vec<(&'static str, Keys)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        ALLOWED
            .iter()
            .map(|&name| {
                let keys = match name {
                    "eval" => Keys::Eval,
                    "evalsha" => Keys::EvalSha,
                    "publish" => Keys::Channel,
                    _ => Keys::Table(
                        commands::lookup(name.as_bytes())
                            .expect("allowed commands exist on the server"),
                    ),
                };
                (name, keys)
            })
            .collect()
    })
}

/// The lock client's scripts: the only ones a tenant may run.
fn own_scripts() -> &'static [&'static Script] {
    static ALL: OnceLock<Vec<&'static Script>> = OnceLock::new();
    ALL.get_or_init(|| {
        let all = scripts::all().to_vec();
        // Compute every SHA1 now, not on a tenant's first EVALSHA.
        for s in &all {
            s.sha();
        }
        all
    })
}

/// Whether `body` is one of the lock client's scripts. Comparing the bytes accepts exactly
/// the bodies whose SHA1 is allow-listed, without hashing the body on every `EVAL`.
fn is_own_body(body: &[u8]) -> bool {
    own_scripts().iter().any(|s| s.body.as_bytes() == body)
}

/// Whether `sha` names one of the lock client's scripts (in any letter case, as Redis
/// accepts it).
fn is_own_sha(sha: &[u8]) -> bool {
    own_scripts()
        .iter()
        .any(|s| s.sha().as_bytes().eq_ignore_ascii_case(sha))
}

/// The positions of the key arguments of a `spec` command called with `argc` arguments: what
/// [`CommandInfo::key_positions`] says, as an iterator instead of a vector.
fn table_keys(spec: CommandInfo, argc: usize) -> impl Iterator<Item = usize> {
    let (first, step) = if spec.first_key() <= 0 || argc == 0 {
        (1, 1) // an empty range below
    } else {
        (spec.first_key() as usize, spec.step().max(1) as usize)
    };
    let last = if spec.first_key() <= 0 || argc == 0 {
        0
    } else if spec.last_key() < 0 {
        (argc as i32 + spec.last_key()).max(0) as usize
    } else {
        spec.last_key() as usize
    };
    (first..=last).step_by(step).filter(move |i| *i < argc)
}

/// The longest tenant name, in bytes.
pub const MAX_TENANT_NAME: usize = 64;

impl Namespace {
    /// The namespace of `tenant`, whose name must be 1 to [`MAX_TENANT_NAME`] ASCII letters,
    /// digits, `-` or `_`. Since a name never holds `:`, `{` or `}`, the prefix is injective:
    /// in `tenant:key` the tenant is everything before the first `:`, and in `{tenant:rest`
    /// everything between the leading `{` and the first `:`, and the two shapes never meet (a
    /// name never starts with `{`). So no two tenants can ever name the same key.
    pub fn new(tenant: &str) -> Result<Namespace, String> {
        let ok = !tenant.is_empty()
            && tenant.len() <= MAX_TENANT_NAME
            && tenant
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            return Err(format!(
                "tenant name {tenant:?} is not 1 to {MAX_TENANT_NAME} ASCII letters, digits, '-' or '_'"
            ));
        }
        Ok(Namespace {
            tenant: tenant.into(),
        })
    }

    /// The tenant's name.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// A key or channel inside the namespace: `{name}rest` becomes `{tenant:name}rest` (same
    /// hash tag for every key of a lock, so they stay in one Cluster slot), anything else
    /// `tenant:key`.
    pub fn key(&self, key: &[u8]) -> Vec<u8> {
        let tenant = self.tenant.as_bytes();
        let mut k = Vec::with_capacity(tenant.len() + 2 + key.len());
        if key.first() == Some(&b'{') && key.contains(&b'}') {
            k.push(b'{');
            k.extend_from_slice(tenant);
            k.push(b':');
            k.extend_from_slice(&key[1..]);
        } else {
            k.extend_from_slice(tenant);
            k.push(b':');
            k.extend_from_slice(key);
        }
        k
    }

    /// Checks a command against the allow-list and rewrites its keys; the error is what the
    /// tenant is told.
    pub fn rewrite(&self, mut args: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, String> {
        let name = args.first().ok_or("empty command")?;
        let Some(&(_, keys)) = allowed()
            .iter()
            .find(|(allowed, _)| allowed.as_bytes().eq_ignore_ascii_case(name))
        else {
            let name = String::from_utf8_lossy(name).to_ascii_lowercase();
            return Err(format!("command '{name}' is not allowed for tenants"));
        };
        match keys {
            Keys::Eval | Keys::EvalSha => {
                let script = args.get(1).ok_or("missing script")?;
                let own = match keys {
                    Keys::Eval => is_own_body(script),
                    _ => is_own_sha(script),
                };
                if !own {
                    return Err("only the lock client's own scripts may run".into());
                }
                let n: usize = std::str::from_utf8(args.get(2).ok_or("missing numkeys")?)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or("bad numkeys")?;
                let end = n.saturating_add(3).min(args.len());
                self.rewrite_keys(&mut args, 3..end);
            }
            Keys::Channel => self.rewrite_keys(&mut args, 1..2),
            Keys::Table(spec) => {
                let argc = args.len();
                self.rewrite_keys(&mut args, table_keys(spec, argc));
            }
        }
        Ok(args)
    }

    /// Puts the arguments at `positions` (those that exist) inside the namespace.
    fn rewrite_keys(&self, args: &mut [Vec<u8>], positions: impl Iterator<Item = usize>) {
        for i in positions {
            if let Some(arg) = args.get_mut(i) {
                *arg = self.key(arg);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn table_keys_agree_with_the_server_for_every_allowed_command() {
        for (name, keys) in allowed() {
            let Keys::Table(spec) = keys else { continue };
            for argc in 0..8 {
                assert_eq!(
                    table_keys(*spec, argc).collect::<Vec<_>>(),
                    spec.key_positions(argc),
                    "{name} with {argc} arguments"
                );
            }
        }
        // And a few commands beyond the allow-list, with other key layouts.
        for name in ["mset", "mget", "rename", "zadd", "eval", "ping"] {
            let spec = commands::lookup(name.as_bytes()).expect(name);
            for argc in 0..8 {
                assert_eq!(
                    table_keys(spec, argc).collect::<Vec<_>>(),
                    spec.key_positions(argc),
                    "{name} with {argc} arguments"
                );
            }
        }
    }

    #[test]
    fn scripts_are_recognised_by_body_and_by_sha_in_any_case_and_nothing_else() {
        for s in scripts::all() {
            assert!(is_own_body(s.body.as_bytes()), "{}", s.name);
            assert!(is_own_sha(s.sha().as_bytes()), "{}", s.name);
            assert!(is_own_sha(s.sha().to_ascii_uppercase().as_bytes()));
            // One byte off is another script.
            let mut body = s.body.as_bytes().to_vec();
            body.push(b' ');
            assert!(!is_own_body(&body));
            assert!(!is_own_sha(&s.sha().as_bytes()[..39]));
        }
        assert!(!is_own_body(b""));
        assert!(!is_own_sha(b""));
    }

    #[test]
    fn command_names_match_in_any_case_and_refusals_name_the_command_in_lowercase() {
        let ns = Namespace::new("t").unwrap();
        let ok = ns.rewrite(cmd(&["gEt", "k"])).unwrap();
        assert_eq!(
            ok,
            cmd(&["gEt", "t:k"]),
            "the name itself is passed as sent"
        );
        assert_eq!(
            ns.rewrite(cmd(&["FlushAll"])).unwrap_err(),
            "command 'flushall' is not allowed for tenants"
        );
        assert_eq!(ns.rewrite(Vec::new()).unwrap_err(), "empty command");
        assert_eq!(ns.rewrite(cmd(&["EVALSHA"])).unwrap_err(), "missing script");
    }

    #[test]
    fn eval_namespaces_exactly_numkeys_keys_and_survives_absurd_counts() {
        let ns = Namespace::new("t").unwrap();
        let body = scripts::RELEASE.body;
        let ok = ns
            .rewrite(cmd(&["EVAL", body, "2", "{a}", "b", "arg"]))
            .unwrap();
        assert_eq!(ok[3..], cmd(&["{t:a}", "t:b", "arg"])[..]);
        // More keys announced than sent: those present are namespaced, nothing panics.
        let huge = usize::MAX.to_string();
        let ok = ns.rewrite(cmd(&["EVAL", body, &huge, "k"])).unwrap();
        assert_eq!(ok[3], b"t:k");
        assert_eq!(
            ns.rewrite(cmd(&["EVAL", body, "x"])).unwrap_err(),
            "bad numkeys"
        );
        assert_eq!(
            ns.rewrite(cmd(&["EVAL", body])).unwrap_err(),
            "missing numkeys"
        );
    }

    #[test]
    fn names_that_could_make_two_tenants_meet_are_refused() {
        for bad in ["", "a:b", "a{", "a}", "{a", "a b", "é", &"x".repeat(65)] {
            assert!(Namespace::new(bad).is_err(), "{bad:?}");
        }
        for good in ["a", "A-b_9", &"x".repeat(64)] {
            assert!(Namespace::new(good).is_ok(), "{good:?}");
        }
        // With the rule, "a" and "a:b" cannot both exist; "a" and "a-b" never meet.
        let (a, ab) = (Namespace::new("a").unwrap(), Namespace::new("a-b").unwrap());
        assert_ne!(a.key(b"-b:k"), ab.key(b"k"));
        assert_ne!(a.key(b"{-b:k}"), ab.key(b"{k}"));
    }

    #[test]
    fn set_and_del_namespace_every_key_and_no_argument() {
        let ns = Namespace::new("ten").unwrap();
        let ok = ns
            .rewrite(cmd(&["SET", "{l}x", "v", "NX", "PX", "10"]))
            .unwrap();
        assert_eq!(ok, cmd(&["SET", "{ten:l}x", "v", "NX", "PX", "10"]));
        let ok = ns.rewrite(cmd(&["DEL", "a", "{b}", "{c"])).unwrap();
        assert_eq!(ok, cmd(&["DEL", "ten:a", "{ten:b}", "ten:{c"]));
        let ok = ns.rewrite(cmd(&["TIME"])).unwrap();
        assert_eq!(ok, cmd(&["TIME"]));
    }
}
