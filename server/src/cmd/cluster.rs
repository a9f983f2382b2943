//! `CLUSTER`, `READONLY`, `READWRITE` and `ASKING` on a server that is not part of a cluster.
//!
//! latchkey runs as a standalone node (or a replica of one), as `redis-server` does without
//! `cluster-enabled yes`. Client libraries still send these commands to find out which kind
//! of server they talk to (`CLUSTER INFO`, `CLUSTER SLOTS`), and they expect Redis's answer:
//! the subcommand is looked up and its arity checked as for any container, and then every one
//! of them answers that cluster support is disabled. A script may not run `CLUSTER RESET`
//! (the one subcommand Redis flags `noscript`).

use bytes::Bytes;

use super::util::{lower, unknown_subcommand};
use super::{arity_error, spec, CommandSpec, Ctx, FAST, LOADING, STALE};
use crate::command::CONTAINER;
use crate::frame::Frame;

/// `CLUSTER` and the three connection commands of cluster clients.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("cluster", -2, STALE | CONTAINER, 0, 0, 0, cluster),
    spec("asking", 1, FAST, 0, 0, 0, disabled),
    spec("readonly", 1, FAST | LOADING | STALE, 0, 0, 0, disabled),
    spec("readwrite", 1, FAST | LOADING | STALE, 0, 0, 0, disabled),
];

/// Redis's answer to every cluster command on a node without `cluster-enabled`.
const DISABLED: &str = "ERR This instance has cluster support disabled";

/// Redis 7.0's `CLUSTER` subcommands with their arities (Redis's convention: `N` exactly, `-N`
/// at least), as its command table declares them.
const SUBCOMMANDS: &[(&str, i64)] = &[
    ("addslots", -3),
    ("addslotsrange", -4),
    ("bumpepoch", 2),
    ("count-failure-reports", 3),
    ("countkeysinslot", 3),
    ("delslots", -3),
    ("delslotsrange", -4),
    ("failover", -2),
    ("flushslots", 2),
    ("forget", 3),
    ("getkeysinslot", 4),
    ("help", 2),
    ("info", 2),
    ("keyslot", 3),
    ("links", 2),
    ("meet", -4),
    ("myid", 2),
    ("nodes", 2),
    ("replicas", 3),
    ("replicate", 3),
    ("reset", -2),
    ("saveconfig", 2),
    ("set-config-epoch", 3),
    ("setslot", -4),
    ("shards", 2),
    ("slaves", 3),
    ("slots", 2),
];

fn cluster(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    let Some(&(name, arity)) = SUBCOMMANDS.iter().find(|(n, _)| *n == sub) else {
        return unknown_subcommand(args, "cluster");
    };
    let n = args.len() as i64;
    if (arity >= 0 && n != arity) || (arity < 0 && n < -arity) {
        return arity_error(&format!("cluster|{name}"));
    }
    if name == "reset" && ctx.in_script {
        return Frame::error("ERR This Redis command is not allowed from script");
    }
    Frame::error(DISABLED)
}

fn disabled(_ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    Frame::error(DISABLED)
}
