//! `MEMORY USAGE`: how many bytes a key takes, from the estimate the `maxmemory` accounting
//! keeps (see [`crate::memory`]), so an application's or a test suite's size checks get a
//! number that grows with the value as Redis's does. The allocator's own reports (`MEMORY
//! STATS`, `DOCTOR`, `MALLOC-STATS`, `PURGE`) are Redis internals latchkey does not have: they
//! are answered as unknown subcommands.

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
        "usage" if args.len() < 3 => arity_error("memory|usage"),
        "usage" => usage(ctx, args),
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
