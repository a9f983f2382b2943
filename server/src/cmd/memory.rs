//! `MEMORY USAGE`: how many bytes a key takes, from the estimate the `maxmemory` accounting
//! keeps (see [`crate::memory`]), so an application's or a test suite's size checks get a
//! number that grows with the value as Redis's does. `MEMORY STATS`, `DOCTOR`, `MALLOC-STATS`
//! and `PURGE` live in [`super::memory_stats`].

use crate::command::CONTAINER;
use bytes::Bytes;

use super::util::unknown_subcommand;
use super::util::{is, lower, parse_i64, syntax_error};
use super::{arity_error, spec, CommandSpec, Ctx, READONLY};
use crate::frame::Frame;

/// The `MEMORY` command.
pub(crate) const COMMANDS: &[CommandSpec] =
    &[spec("memory", -2, READONLY | CONTAINER, 2, 2, 1, memory)];

const HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

fn memory(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    match sub.as_str() {
        "help" if args.len() == 2 => Frame::Array(HELP.iter().map(|l| Frame::simple(l)).collect()),
        "help" => arity_error("memory|help"),
        "usage" if args.len() < 3 => arity_error("memory|usage"),
        "usage" => usage(ctx, args),
        "stats" | "doctor" | "malloc-stats" | "purge" if args.len() != 2 => {
            arity_error(&format!("memory|{sub}"))
        }
        "stats" => super::memory_stats::stats(ctx),
        "doctor" => super::memory_stats::doctor(ctx),
        "malloc-stats" => super::memory_stats::malloc_stats(),
        "purge" => super::memory_stats::purge(),
        _ => unknown_subcommand(args, "memory"),
    }
}

fn usage(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    // `SAMPLES n`, any number of times, the last one counting; the estimate always samples a
    // few elements (see `memory::value_size`), so the count is checked and not used.
    let mut i = 3;
    while i < args.len() {
        if !is(&args[i], "samples") || i + 1 >= args.len() {
            return syntax_error();
        }
        match parse_i64(&args[i + 1]) {
            Ok(n) if n < 0 => return syntax_error(),
            Ok(_) => {}
            Err(e) => return e,
        }
        i += 2;
    }
    match ctx.db().get(&args[2], ctx.now_ms, ctx.lazy_delete()) {
        Some(e) => Frame::Integer(crate::memory::entry_size(&args[2], &e) as i64),
        None => Frame::Null,
    }
}
