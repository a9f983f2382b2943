//! Scripting commands (`EVAL`, `EVALSHA`, their read-only forms, and `SCRIPT`).
//!
//! Every lock library in the wild is a set of Lua scripts sent with `EVALSHA` and re-sent with
//! `EVAL` after `-NOSCRIPT`. A script holds the keyspace to itself while it runs (the command is
//! flagged EXCLUSIVE), which is what makes check-and-delete release scripts safe.

use crate::command::{CONTAINER, MOVABLEKEYS, NO_MANDATORY_KEYS, READONLY, SKIP_MONITOR};
use bytes::Bytes;

use super::util::{is, lower, parse_i64, subcommand_syntax_error, unknown_subcommand};
use super::{
    arity_error, spec, CommandSpec, Ctx, ALLOW_BUSY, DENYOOM, EXCLUSIVE, MAY_REPLICATE, NOSCRIPT,
    NO_MULTI, STALE, WRITE,
};
use crate::frame::Frame;
use crate::gate::{Busy, BusyKind};
use crate::state::Shared;

/// The flags of the commands that run a script or a function (`EVAL`, `EVALSHA`, `FCALL`):
/// Redis's, before the script's own declared flags replace them (see `eval_flags`).
const RUNS_SCRIPT: u32 =
    NOSCRIPT | STALE | EXCLUSIVE | MAY_REPLICATE | SKIP_MONITOR | NO_MANDATORY_KEYS | MOVABLEKEYS;

/// The same for their read-only forms (`EVAL_RO`, `EVALSHA_RO`, `FCALL_RO`).
const RUNS_SCRIPT_RO: u32 =
    NOSCRIPT | STALE | EXCLUSIVE | READONLY | SKIP_MONITOR | NO_MANDATORY_KEYS | MOVABLEKEYS;

/// The scripting commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("eval", -3, RUNS_SCRIPT, 0, 0, 0, eval).with_flags_of(eval_flags),
    spec("evalsha", -3, RUNS_SCRIPT, 0, 0, 0, evalsha).with_flags_of(evalsha_flags),
    spec("eval_ro", -3, RUNS_SCRIPT_RO, 0, 0, 0, eval_ro).with_flags_of(eval_flags),
    spec("evalsha_ro", -3, RUNS_SCRIPT_RO, 0, 0, 0, evalsha_ro).with_flags_of(evalsha_flags),
    spec(
        "script",
        -2,
        NOSCRIPT | ALLOW_BUSY | NO_MULTI | CONTAINER,
        0,
        0,
        0,
        script,
    ),
    spec("fcall", -3, RUNS_SCRIPT, 0, 0, 0, fcall).with_flags_of(fcall_flags),
    spec("fcall_ro", -3, RUNS_SCRIPT_RO, 0, 0, 0, fcall_ro).with_flags_of(fcall_flags),
    // Unlike `SCRIPT`, no subcommand of `FUNCTION` is refused inside `MULTI` (Redis 7.0 flags
    // none of them `no-multi`).
    spec(
        "function",
        -2,
        NOSCRIPT | ALLOW_BUSY | CONTAINER,
        0,
        0,
        0,
        function,
    )
    .with_flags_of(function_flags),
];

/// The flags a `FUNCTION` subcommand runs with. The ones that change the libraries (`LOAD`,
/// `DELETE`, `FLUSH`, `RESTORE`) are writes, as Redis 7.0 flags them: refused on a read-only
/// replica and without enough good replicas, held by `CLIENT PAUSE WRITE`, `LOAD` and
/// `RESTORE` refused out of memory; and they run with the keyspace to themselves, not beside a
/// busy script (so they answer `-BUSY` then), and hold the stream-order lock until they are
/// recorded, so that replicas and the AOF get them in the order they took effect. The others
/// keep the container's flags (`KILL` and `STATS` must reach a busy function). A subcommand
/// given the wrong number of arguments keeps them too: its arity error comes first, as in
/// Redis.
fn function_flags(_shared: &Shared, args: &[Bytes], command: u32) -> Option<u32> {
    let sub = args.get(1)?;
    let n = args.len();
    let write = if (is(sub, "load") || is(sub, "restore")) && n >= 3 {
        WRITE | DENYOOM
    } else if (is(sub, "delete") && n == 3) || is(sub, "flush") {
        WRITE
    } else {
        return None;
    };
    Some((command & !ALLOW_BUSY) | write | EXCLUSIVE)
}

/// The flags `EVAL`/`EVAL_RO` run with: the script's own when its shebang declares them
/// (read from the body, without compiling it); a body without one keeps the command's.
fn eval_flags(_shared: &Shared, args: &[Bytes], command: u32) -> Option<u32> {
    let body = args.get(1)?;
    if !body.starts_with(b"#!") {
        return None;
    }
    let (declared, _) = crate::scripting::parse_shebang(body).ok()?;
    Some(declared.command_flags(command))
}

/// The flags `EVALSHA`/`EVALSHA_RO` run with: those the cached script declared.
fn evalsha_flags(shared: &Shared, args: &[Bytes], command: u32) -> Option<u32> {
    let declared = shared.scripting().declared_flags(args.get(1)?)?;
    Some(declared.command_flags(command))
}

/// The flags `FCALL`/`FCALL_RO` run with: those the function declared (a function is never
/// in compatibility mode).
fn fcall_flags(shared: &Shared, args: &[Bytes], command: u32) -> Option<u32> {
    let declared = shared.scripting().function_flags(args.get(1)?)?;
    Some(declared.command_flags(command))
}

/// Splits `numkeys key... arg...` (starting at `args[2]`) into keys and arguments.
fn split_keys(args: &[Bytes]) -> Result<(&[Bytes], &[Bytes]), Frame> {
    let n = parse_i64(&args[2])?;
    if n < 0 {
        return Err(Frame::error("ERR Number of keys can't be negative"));
    }
    let rest = &args[3..];
    if n as usize > rest.len() {
        return Err(Frame::error(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    Ok(rest.split_at(n as usize))
}

fn run(ctx: &mut Ctx<'_>, args: &[Bytes], by_sha: bool, read_only: bool) -> Frame {
    let (keys, argv) = match split_keys(args) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let scripting = ctx.shared.scripting();
    // Time stands still for the whole script: every command it calls sees `ctx.now_ms`.
    if by_sha {
        match scripting.run(ctx, &args[1], keys, argv, read_only) {
            Some(reply) => reply,
            None => Frame::error("NOSCRIPT No matching script. Please use EVAL."),
        }
    } else {
        scripting.eval(ctx, &args[1], keys, argv, read_only)
    }
}

fn eval(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(ctx, args, false, false)
}

fn evalsha(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(ctx, args, true, false)
}

fn eval_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(ctx, args, false, true)
}

fn evalsha_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    run(ctx, args, true, true)
}

/// `SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP`. Runs without the gate (so that `SCRIPT KILL` can reach
/// a busy script); the other subcommands refuse with `-BUSY` while a script is busy.
fn script(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    let scripting = ctx.shared.scripting();
    if sub != "kill" {
        if let Some((kind, ran)) = ctx.shared.gate.script_running_for() {
            if ran >= ctx.shared.config.busy_reply_threshold() {
                return Frame::error(crate::gate::Busy(kind).message());
            }
        }
    }
    match sub.as_str() {
        "load" if args.len() == 3 => match scripting.load(&args[2]) {
            Ok(sha) => Frame::Bulk(Bytes::from(sha)),
            Err(e) => e,
        },
        "exists" if args.len() >= 3 => Frame::Array(
            args[2..]
                .iter()
                .map(|s| Frame::Integer(scripting.exists(&String::from_utf8_lossy(s)) as i64))
                .collect(),
        ),
        "flush" => {
            // Both modes are done at once: the scripts are gone when `OK` is sent.
            if args.len() > 3
                || args
                    .get(2)
                    .is_some_and(|m| !is(m, "async") && !is(m, "sync"))
            {
                return Frame::error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            }
            scripting.flush();
            Frame::ok()
        }
        "kill" if args.len() == 2 => {
            // A function is killed with FUNCTION KILL only.
            let wrong = match ctx.shared.gate.script_running_for() {
                Some((kind @ BusyKind::Function, _)) => Some(Frame::error(Busy(kind).message())),
                _ => None,
            };
            match scripting.request_kill(wrong) {
                Ok(()) => Frame::ok(),
                Err(e) => e,
            }
        }
        // Redis's text without `DEBUG`: latchkey has no Lua debugger.
        "help" if args.len() == 2 => super::util::help(
            "SCRIPT",
            &[
                "EXISTS <sha1> [<sha1> ...]",
                "    Return information about the existence of the scripts in the script cache.",
                "FLUSH [ASYNC|SYNC]",
                "    Flush the Lua scripts cache. Very dangerous on replicas.",
                "    When called without the optional mode argument, the behavior is determined by the",
                "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                "    * ASYNC: Asynchronously flush the scripts cache.",
                "    * SYNC: Synchronously flush the scripts cache.",
                "KILL",
                "    Kill the currently executing Lua script.",
                "LOAD <script>",
                "    Load a script into the scripts cache without executing it.",
            ],
        ),
        "load" | "exists" | "kill" | "help" => arity_error(&format!("script|{sub}")),
        _ => unknown_subcommand(args, "script"),
    }
}

fn fcall_generic(ctx: &mut Ctx<'_>, args: &[Bytes], read_only: bool) -> Frame {
    // FCALL words a key count that is not a number its own way (EVAL does not).
    if parse_i64(&args[2]).is_err() {
        return Frame::error("ERR Bad number of keys provided");
    }
    let (keys, argv) = match split_keys(args) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let name = String::from_utf8_lossy(&args[1]).into_owned();
    ctx.shared
        .scripting()
        .call_function(ctx, args, &name, keys, argv, read_only)
}

fn fcall(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    fcall_generic(ctx, args, false)
}

fn fcall_ro(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    fcall_generic(ctx, args, true)
}

/// `FUNCTION LOAD|LIST|DELETE|FLUSH|DUMP|RESTORE|STATS|KILL|HELP`. Like `SCRIPT`, it runs without the gate
/// so that `FUNCTION KILL` reaches a busy function; the others answer -BUSY meanwhile.
fn function(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    let scripting = ctx.shared.scripting();
    if sub != "kill" && sub != "stats" {
        if let Some((kind, ran)) = ctx.shared.gate.script_running_for() {
            if ran >= ctx.shared.config.busy_reply_threshold() {
                return Frame::error(crate::gate::Busy(kind).message());
            }
        }
    }
    match sub.as_str() {
        "help" if args.len() == 2 => super::function_help::help(),
        "load" if args.len() >= 3 => {
            // Options before the code, the last argument: `REPLACE`, as often as given.
            let (code, options) = args[2..].split_last().expect("three arguments or more");
            if let Some(other) = options.iter().find(|o| !is(o, "replace")) {
                return Frame::error(format!(
                    "ERR Unknown option given: {}",
                    String::from_utf8_lossy(other)
                ));
            }
            // A library that our master or the AOF loads has no time limit, as in Redis: it
            // loaded where it was first given, and must load here too.
            let limited = !ctx.client.is_replication_link;
            match scripting.load_library(code, !options.is_empty(), limited) {
                Ok(name) => {
                    // Replicas and the AOF get the command as it was given, as from Redis.
                    ctx.changed();
                    Frame::Bulk(Bytes::from(name))
                }
                Err(e) => e,
            }
        }
        "list" => {
            let mut pattern = None;
            let mut with_code = false;
            let mut i = 2;
            while i < args.len() {
                // As in Redis, each option may be given once; a second one is refused.
                match lower(&args[i]).as_str() {
                    "withcode" if !with_code => with_code = true,
                    "libraryname" if pattern.is_none() => {
                        let Some(p) = args.get(i + 1) else {
                            return Frame::error("ERR library name argument was not given");
                        };
                        pattern = Some(p.clone());
                        i += 1;
                    }
                    _ => {
                        return Frame::error(format!(
                            "ERR Unknown argument {}",
                            String::from_utf8_lossy(&args[i])
                        ))
                    }
                }
                i += 1;
            }
            scripting.list_libraries(pattern.as_deref(), with_code)
        }
        "delete" if args.len() == 3 => {
            if scripting.delete_library(&String::from_utf8_lossy(&args[2])) {
                ctx.changed();
                Frame::ok()
            } else {
                Frame::error("ERR Library not found")
            }
        }
        "flush" if args.len() <= 3 => {
            // Both modes are done at once: the libraries are gone when `OK` is sent.
            if args
                .get(2)
                .is_some_and(|m| !is(m, "async") && !is(m, "sync"))
            {
                return Frame::error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
            }
            scripting.flush_libraries();
            // A change even when there was no library, as Redis counts it.
            ctx.changed();
            Frame::ok()
        }
        "dump" if args.len() == 2 => super::function_dump::dump(ctx.shared),
        "restore" if args.len() >= 3 => {
            let limited = !ctx.client.is_replication_link;
            let reply = super::function_dump::restore(ctx.shared, args, limited);
            if !reply.is_error() {
                // Replicas and the AOF get the command as it was given, as from Redis.
                ctx.changed();
            }
            reply
        }
        "stats" if args.len() == 2 => {
            let running = ctx.shared.gate.script_running_for();
            scripting.function_stats(
                running
                    .filter(|(kind, _)| *kind == crate::gate::BusyKind::Function)
                    .map(|(_, ran)| ran),
            )
        }
        "kill" if args.len() == 2 => {
            // An `EVAL` script is killed with SCRIPT KILL only.
            let wrong = match ctx.shared.gate.script_running_for() {
                Some((kind @ BusyKind::Script, _)) => Some(Frame::error(Busy(kind).message())),
                _ => None,
            };
            match scripting.request_kill(wrong) {
                Ok(()) => Frame::ok(),
                Err(e) => e,
            }
        }
        // The subcommand as the client spelled it, as Redis echoes it.
        "flush" => subcommand_syntax_error(args, "function"),
        "load" | "delete" | "stats" | "kill" | "dump" | "restore" => {
            arity_error(&format!("function|{sub}"))
        }
        _ => unknown_subcommand(args, "function"),
    }
}
