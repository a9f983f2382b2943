//! `SLOWLOG GET [count]|LEN|RESET|HELP`: reading and emptying the slow log (see
//! [`crate::slowlog`]), with Redis 7.0's replies and errors.

use bytes::Bytes;

use super::util::{lower, subcommand_syntax_error, unknown_subcommand};
use super::{arity_error, spec, CommandSpec, Ctx, ADMIN, LOADING, STALE};
use crate::codec::parse_int;
use crate::command::CONTAINER;
use crate::frame::Frame;

/// The `SLOWLOG` command.
pub(crate) const COMMANDS: &[CommandSpec] = &[spec(
    "slowlog",
    -2,
    ADMIN | LOADING | STALE | CONTAINER,
    0,
    0,
    0,
    slowlog,
)];

const HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

fn slowlog(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let log = &ctx.shared.stats.slowlog;
    let max_len = ctx.shared.config.slowlog_max_len();
    let sub = lower(&args[1]);
    match sub.as_str() {
        "help" if args.len() == 2 => Frame::Array(HELP.iter().map(|l| Frame::simple(l)).collect()),
        "len" if args.len() == 2 => Frame::Integer(log.len(max_len) as i64),
        "reset" if args.len() == 2 => {
            log.reset();
            Frame::ok()
        }
        "get" if args.len() <= 3 => {
            let count = match args.get(2) {
                None => Some(10),
                Some(a) => match parse_int(a) {
                    Some(-1) => None,
                    Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                    _ => return Frame::error("ERR count should be greater than or equal to -1"),
                },
            };
            log.get(count, max_len)
        }
        "get" => subcommand_syntax_error(args, "slowlog"),
        "help" | "len" | "reset" => arity_error(&format!("slowlog|{sub}")),
        _ => unknown_subcommand(args, "slowlog"),
    }
}
