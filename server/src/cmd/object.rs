//! `OBJECT`: what Redis says about how it keeps a key's value. latchkey keeps values its own
//! way; `OBJECT ENCODING` answers what Redis 7.0 would answer for the same content under the
//! same encoding parameters (see [`crate::encodings`]), since clients and test suites check it.
//! Where the answer depends on a value's history rather than its content (a hash that grew
//! past `hash-max-listpack-entries` and shrank again stays a `hashtable` in Redis; a string
//! changed by `APPEND` is `raw`), latchkey answers from the content; docs/COMPATIBILITY.md says
//! so. Sets keep their history (see [`crate::set::Set`]).

use crate::command::CONTAINER;
use bytes::Bytes;

use super::util::lower;
use super::util::unknown_subcommand;
use super::{arity_error, spec, CommandSpec, Ctx, READONLY};
use crate::codec::parse_int;
use crate::db::Value;
use crate::frame::Frame;

/// The `OBJECT` command.
pub(crate) const COMMANDS: &[CommandSpec] =
    &[spec("object", -2, READONLY | CONTAINER, 2, 2, 1, object)];

const HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// Redis shares the string objects of the integers below this: their refcount is "infinite".
const SHARED_INTEGERS: i64 = 10_000;

/// What `OBJECT ENCODING` answers for `v`.
pub(crate) fn encoding(ctx: &Ctx<'_>, v: &Value) -> &'static str {
    let enc = &ctx.shared.config.encodings;
    match v {
        Value::Str(s) if s.len() <= 20 && parse_int(s).is_some() => "int",
        Value::Str(s) if s.len() <= 44 => "embstr",
        Value::Str(_) => "raw",
        Value::List(_) => "quicklist",
        Value::Hash(h) => {
            let longest = h.iter().map(|(k, v)| k.len().max(v.len())).max();
            enc.hash_encoding(h.len(), longest.unwrap_or(0))
        }
        Value::ZSet(z) => {
            let longest = z.iter().map(|(m, _)| m.len()).max();
            enc.zset_encoding(z.len(), longest.unwrap_or(0))
        }
        Value::Set(s) => s.encoding(),
        Value::Stream(_) => "stream",
    }
}

/// What `OBJECT REFCOUNT` answers for `v`: Redis shares the objects of small integers, whose
/// count it reports as `INT_MAX`; every other value has one reference.
pub(crate) fn refcount(v: &Value) -> i64 {
    let shared_int = matches!(v, Value::Str(s)
        if parse_int(s).is_some_and(|i| (0..SHARED_INTEGERS).contains(&i)));
    if shared_int {
        i32::MAX as i64
    } else {
        1
    }
}

fn object(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    if sub == "help" && args.len() == 2 {
        return Frame::Array(HELP.iter().map(|l| Frame::simple(l)).collect());
    }
    if !matches!(sub.as_str(), "encoding" | "refcount" | "idletime" | "freq") {
        return unknown_subcommand(args, "object");
    }
    if args.len() != 3 {
        return arity_error(&format!("object|{sub}"));
    }
    // Looked at without counting as a use of the key (Redis's LOOKUP_NOTOUCH): a time of 0
    // leaves the access stamp alone; expiry is checked here instead.
    let Some(e) = ctx.db().get(&args[2], 0, false) else {
        return Frame::Null;
    };
    if e.is_expired(ctx.now_ms) {
        drop(e);
        // Let an ordinary read delete it (and propagate the `DEL`).
        ctx.db().get(&args[2], ctx.now_ms, ctx.lazy_delete());
        return Frame::Null;
    }
    let limits = &ctx.shared.config.limits;
    let lfu = limits.policy().lfu();
    match sub.as_str() {
        "encoding" => Frame::bulk(encoding(ctx, &e.value)),
        "refcount" => Frame::Integer(refcount(&e.value)),
        "idletime" if lfu => Frame::error(
            "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ),
        "idletime" => Frame::Integer((e.access.score(ctx.now_ms, limits) / 1000) as i64),
        "freq" if !lfu => Frame::error(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ),
        _ => Frame::Integer(255 - e.access.score(ctx.now_ms, limits) as i64),
    }
}
