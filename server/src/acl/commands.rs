//! The command table the ACLs work on: Redis 7.0's commands and subcommands (generated in
//! `table.rs`), their categories, and where a command's keys and channels are, with the
//! read/write access each key needs (Redis's key specs, `getKeysFromCommandWithSpecs`).

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;

pub(crate) use super::spec::*;
use super::table::COMMANDS;

/// The ACL categories, in Redis's order (its category bits' order).
pub(crate) const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// A key a command names: its argument position and the access it needs ([`R`], [`W`]).
pub(crate) type KeyRef = (usize, u8);

/// Every command and subcommand, by id (its index).
pub(crate) fn all() -> &'static [Command] {
    COMMANDS
}

/// The number of ids.
pub(crate) fn count() -> usize {
    COMMANDS.len()
}

fn by_name() -> &'static HashMap<&'static str, usize> {
    static MAP: OnceLock<HashMap<&'static str, usize>> = OnceLock::new();
    MAP.get_or_init(|| {
        COMMANDS
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name, i))
            .collect()
    })
}

/// Redis's `ACLLookupCommand`: a command by name, or a subcommand as `container|sub`
/// (case-insensitive); `None` for anything else.
pub(crate) fn lookup(name: &[u8]) -> Option<usize> {
    let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    let mut parts = name.split('|');
    let first = parts.next()?;
    match (parts.next(), parts.next()) {
        (None, _) => by_name().get(first).copied(),
        (Some(_), None) => {
            let parent = *by_name().get(first)?;
            if COMMANDS[parent].flags & CONTAINER == 0 {
                return None;
            }
            by_name().get(name.as_str()).copied()
        }
        _ => None,
    }
}

/// The ids of a container's subcommands (empty for other commands).
pub(crate) fn subcommands(id: usize) -> impl Iterator<Item = usize> {
    let is_container = COMMANDS[id].flags & CONTAINER != 0;
    (id + 1..COMMANDS.len()).take_while(move |&i| is_container && COMMANDS[i].parent == id)
}

/// The id of the command `args` runs, as Redis's `lookupCommand` finds it: a container's
/// subcommand by `args[1]` (the container itself when there is no `args[1]`); `None` when
/// Redis would not find it (an unknown command or subcommand).
pub(crate) fn find(args: &[Bytes]) -> Option<usize> {
    let name = std::str::from_utf8(args.first()?)
        .ok()?
        .to_ascii_lowercase();
    if name.contains('|') {
        return None;
    }
    let id = *by_name().get(name.as_str())?;
    let Some(sub) = args.get(1).filter(|_| COMMANDS[id].flags & CONTAINER != 0) else {
        return Some(id);
    };
    let sub = std::str::from_utf8(sub).ok()?.to_ascii_lowercase();
    if sub.contains('|') {
        return None;
    }
    by_name().get(format!("{name}|{sub}").as_str()).copied()
}

/// Whether `args` has the number of arguments command `id` takes.
pub(crate) fn arity_ok(id: usize, args: &[Bytes]) -> bool {
    let arity = COMMANDS[id].arity;
    let n = args.len() as i32;
    (arity > 0 && n == arity) || (arity < 0 && n >= -arity)
}

/// [`find`] for the dispatcher: `None` also when the arity refuses `args` (Redis answers
/// that error before any ACL check; the command itself answers it here).
pub(crate) fn of_args(args: &[Bytes]) -> Option<usize> {
    find(args).filter(|&id| arity_ok(id, args))
}

/// The keys `args` names for command `id` and the access each needs: Redis's key specs, or,
/// where those cannot tell (`SET ... GET`, `BITFIELD`, `SORT ... STORE`, `MIGRATE`), the
/// command's own key finder.
pub(crate) fn keys(id: usize, args: &[Bytes]) -> Vec<KeyRef> {
    let cmd = &COMMANDS[id];
    let unreliable = cmd
        .keys
        .iter()
        .any(|s| s.access & VARIABLE != 0 || matches!(s.begin, Begin::Unknown));
    if !unreliable {
        if let Some(keys) = from_specs(cmd, args) {
            return keys;
        }
    }
    by_hand(cmd.name, args)
}

/// Whether a command names keys at all.
pub(crate) fn has_keys(id: usize) -> bool {
    COMMANDS[id].keys.iter().any(|s| s.access & NOT_KEY == 0)
}

fn from_specs(cmd: &Command, args: &[Bytes]) -> Option<Vec<KeyRef>> {
    let argc = args.len() as i32;
    let mut out = Vec::new();
    for spec in cmd.keys {
        if spec.access & NOT_KEY != 0 {
            continue;
        }
        let first = match spec.begin {
            Begin::Index(i) => i,
            Begin::Keyword(word, from) => {
                let (start, end) = if from > 0 {
                    (from, argc - 1)
                } else {
                    (argc + from, 1)
                };
                let mut found = 0;
                let mut i = start;
                loop {
                    if i == end || i >= argc || i < 1 {
                        break;
                    }
                    if args[i as usize].eq_ignore_ascii_case(word.as_bytes()) {
                        found = i + 1;
                        break;
                    }
                    i = if start <= end { i + 1 } else { i - 1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            Begin::Unknown => return None,
        };
        let (first, last, step) = match spec.find {
            Find::Range(lastkey, step, limit) => {
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (first, last, step)
            }
            Find::Keynum(idx, firstkey, step) => {
                if idx >= argc {
                    return None;
                }
                let at = (first + idx) as usize;
                let n = args
                    .get(at)
                    .and_then(|a| crate::codec::parse_int(a))
                    .filter(|n| *n >= 0)?;
                let first = first + firstkey;
                (first, first + n as i32 - 1, step)
            }
            Find::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let mut i = first;
        while i <= last {
            out.push((i as usize, spec.access & (R | W)));
            i += step.max(1);
        }
        if spec.access & INCOMPLETE != 0 {
            return None;
        }
    }
    Some(out)
}

/// Redis's own key finders, for the commands whose key specs cannot say.
fn by_hand(name: &str, args: &[Bytes]) -> Vec<KeyRef> {
    let is = |a: &Bytes, w: &str| a.eq_ignore_ascii_case(w.as_bytes());
    match name {
        "set" => {
            let get = args.iter().skip(3).any(|a| is(a, "get"));
            vec![(1, if get { R | W } else { W })]
        }
        "bitfield" => {
            let mut readonly = true;
            let mut i = 2;
            while i < args.len() {
                let rest = args.len() - i - 1;
                if is(&args[i], "get") && rest >= 2 {
                    i += 3;
                } else if (is(&args[i], "set") || is(&args[i], "incrby")) && rest >= 3 {
                    readonly = false;
                    break;
                } else if is(&args[i], "overflow") && rest >= 1 {
                    i += 2;
                } else {
                    readonly = false;
                    break;
                }
            }
            vec![(1, if readonly { R } else { R | W })]
        }
        "sort_ro" => vec![(1, R)],
        "sort" => {
            let mut keys = vec![(1, R)];
            let mut store = None;
            let mut i = 2;
            while i < args.len() {
                if is(&args[i], "limit") {
                    i += 2;
                } else if is(&args[i], "get") || is(&args[i], "by") {
                    i += 1;
                } else if is(&args[i], "store") && i + 1 < args.len() {
                    store = Some(i + 1);
                }
                i += 1;
            }
            keys.extend(store.map(|s| (s, W)));
            keys
        }
        "migrate" => {
            // MIGRATE host port key|"" db timeout [... KEYS key...]
            let mut first = 3;
            let mut num = 1;
            let mut i = 6;
            while i < args.len() {
                if is(&args[i], "auth") {
                    i += 1;
                } else if is(&args[i], "auth2") {
                    i += 2;
                } else if is(&args[i], "keys") && args.get(3).is_some_and(|k| k.is_empty()) {
                    first = i + 1;
                    num = args.len() - first;
                    break;
                }
                i += 1;
            }
            (first..first + num)
                .filter(|&p| p < args.len())
                .map(|p| (p, R | W))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// Publishing to a channel (`PUBLISH`, `SPUBLISH`).
pub(crate) const PUBLISH: u8 = 1;
/// Subscribing to a channel (`SUBSCRIBE`, `SSUBSCRIBE`, `PSUBSCRIBE`).
pub(crate) const SUBSCRIBE: u8 = 2;
/// The channel is a pattern (`PSUBSCRIBE`): matched literally against the user's patterns.
pub(crate) const PATTERN: u8 = 4;

/// The channels `args` names for command `id` that the ACLs check (published to or
/// subscribed to, not unsubscribed from), with [`PUBLISH`], [`SUBSCRIBE`], [`PATTERN`].
pub(crate) fn channels(id: usize, args: &[Bytes]) -> Vec<KeyRef> {
    let (flags, one) = match COMMANDS[id].name {
        "publish" | "spublish" => (PUBLISH, true),
        "subscribe" | "ssubscribe" => (SUBSCRIBE, false),
        "psubscribe" => (SUBSCRIBE | PATTERN, false),
        _ => return Vec::new(),
    };
    let end = if one { 2.min(args.len()) } else { args.len() };
    (1..end).map(|i| (i, flags)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    #[test]
    fn names_and_subcommands_are_found_as_redis_finds_them() {
        let get = lookup(b"GET").unwrap();
        assert_eq!(all()[get].name, "get");
        let cg = lookup(b"config|GET").unwrap();
        assert_eq!(all()[cg].name, "config|get");
        assert_eq!(lookup(b"get|x"), None);
        assert_eq!(lookup(b"config|get|x"), None);
        let config = lookup(b"config").unwrap();
        assert!(subcommands(config).any(|i| i == cg));
        assert_eq!(of_args(&args(&["config", "get", "x"])), Some(cg));
        assert_eq!(of_args(&args(&["config", "get"])), None);
        assert_eq!(of_args(&args(&["config", "nosuch"])), None);
    }

    #[test]
    fn keys_carry_the_access_they_need() {
        let id = |n: &str| lookup(n.as_bytes()).unwrap();
        assert_eq!(keys(id("get"), &args(&["get", "k"])), vec![(1, R)]);
        assert_eq!(keys(id("set"), &args(&["set", "k", "v"])), vec![(1, W)]);
        assert_eq!(
            keys(id("set"), &args(&["set", "k", "v", "get"])),
            vec![(1, R | W)]
        );
        assert_eq!(
            keys(id("copy"), &args(&["copy", "a", "b"])),
            vec![(1, R), (2, W)]
        );
        assert_eq!(
            keys(id("eval"), &args(&["eval", "s", "2", "a", "b", "c"])),
            vec![(3, R | W), (4, R | W)]
        );
        assert_eq!(
            keys(id("sort"), &args(&["sort", "a", "by", "x", "store", "d"])),
            vec![(1, R), (5, W)]
        );
        assert_eq!(
            keys(
                id("xread"),
                &args(&["xread", "streams", "a", "b", "0", "0"])
            ),
            vec![(2, R), (3, R)]
        );
        assert_eq!(
            channels(id("publish"), &args(&["publish", "ch", "m"])),
            vec![(1, PUBLISH)]
        );
    }
}
