//! `COMMAND` and its subcommands (`COUNT`, `LIST [FILTERBY MODULE|ACLCAT|PATTERN]`, `INFO`, `DOCS`, `GETKEYS`): the
//! command table as client libraries read it when they connect, to learn each command's arity,
//! flags and which arguments are keys (cluster clients route by them).
//!
//! The replies follow Redis 7.0's shapes: flags come from the same [`CommandSpec`] the
//! dispatcher uses, so what `COMMAND INFO` says is what the server does; the group and the
//! declared ACL categories come from `command_meta`.

use bytes::Bytes;

use super::command_meta::{meta, CATEGORY_ORDER};
use super::util::{is, lower, unknown_subcommand};
use super::{
    all_commands, arity_error, lookup, spec, CommandSpec, Ctx, ADMIN, FAST, LOADING, PUBSUB,
    READONLY, STALE, WRITE,
};
use crate::command::CONTAINER;
use crate::frame::Frame;

/// `COMMAND` itself.
pub(crate) const COMMANDS: &[CommandSpec] =
    &[spec("command", -1, LOADING | STALE, 0, 0, 0, command)];

/// The ACL categories of `spec`: those Redis derives from its flags, and those declared for
/// it by hand ([`command_meta`](super::command_meta)), in Redis's order.
fn categories(spec: &CommandSpec) -> Vec<&'static str> {
    let (_, declared) = meta(spec.name);
    let mut cats: Vec<&'static str> = declared.to_vec();
    if spec.has(CONTAINER) {
        // A container (`CLIENT`, `CONFIG`, ...) has no flags of its own in Redis's table, so
        // nothing is derived for it but `@slow`: its subcommands carry the rest.
        cats.push("@slow");
    } else {
        if spec.has(WRITE) {
            cats.push("@write");
        }
        // A read-only command is `@read`, unless it is a script's.
        if spec.has(READONLY) && !declared.contains(&"@scripting") {
            cats.push("@read");
        }
        if spec.has(ADMIN) {
            cats.extend(["@admin", "@dangerous"]);
        }
        if spec.has(PUBSUB) {
            cats.push("@pubsub");
        }
        cats.push(if spec.has(FAST) { "@fast" } else { "@slow" });
        if spec.flag_names().contains(&"blocking") {
            cats.push("@blocking");
        }
    }
    CATEGORY_ORDER
        .iter()
        .copied()
        .filter(|c| cats.contains(c))
        .collect()
}

fn command_info(spec: &CommandSpec) -> Frame {
    let flags = spec.flag_names().into_iter().map(Frame::simple).collect();
    let cats = categories(spec);
    // A container's keys are its subcommands' (`MEMORY USAGE key`): Redis shows none for it.
    let (first, last, step) = if spec.has(CONTAINER) {
        (0, 0, 0)
    } else {
        (spec.first_key, spec.last_key, spec.step)
    };
    let key_specs = if first > 0 {
        vec![Frame::Map(vec![
            (Frame::bulk("flags"), Frame::Array(vec![])),
            (
                Frame::bulk("begin_search"),
                Frame::Map(vec![
                    (Frame::bulk("type"), Frame::bulk("index")),
                    (
                        Frame::bulk("spec"),
                        Frame::Map(vec![(
                            Frame::bulk("index"),
                            Frame::Integer(spec.first_key as i64),
                        )]),
                    ),
                ]),
            ),
            (
                Frame::bulk("find_keys"),
                Frame::Map(vec![
                    (Frame::bulk("type"), Frame::bulk("range")),
                    (
                        Frame::bulk("spec"),
                        Frame::Map(vec![
                            (
                                Frame::bulk("lastkey"),
                                Frame::Integer(if spec.last_key < 0 {
                                    spec.last_key as i64
                                } else {
                                    (spec.last_key - spec.first_key) as i64
                                }),
                            ),
                            (Frame::bulk("keystep"), Frame::Integer(spec.step as i64)),
                            (Frame::bulk("limit"), Frame::Integer(0)),
                        ]),
                    ),
                ]),
            ),
        ])]
    } else {
        vec![]
    };
    Frame::Array(vec![
        Frame::bulk(spec.name),
        Frame::Integer(spec.arity as i64),
        Frame::Set(flags),
        Frame::Integer(first as i64),
        Frame::Integer(last as i64),
        Frame::Integer(step as i64),
        Frame::Set(cats.into_iter().map(Frame::simple).collect()),
        Frame::Set(vec![]),
        Frame::Array(key_specs),
        Frame::Array(vec![]),
    ])
}

fn command_docs(spec: &CommandSpec) -> Frame {
    Frame::Map(vec![
        (
            Frame::bulk("summary"),
            Frame::bulk(format!("The {} command", spec.name.to_ascii_uppercase())),
        ),
        (Frame::bulk("since"), Frame::bulk("1.0.0")),
        (Frame::bulk("group"), Frame::bulk(meta(spec.name).0)),
    ])
}

fn command(_ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args.len() == 1 {
        return Frame::Array(all_commands().into_iter().map(command_info).collect());
    }
    let sub = lower(&args[1]);
    match sub.as_str() {
        "count" if args.len() == 2 => Frame::Integer(all_commands().len() as i64),
        "list" => command_list(args),
        "info" => {
            if args.len() == 2 {
                return Frame::Array(all_commands().into_iter().map(command_info).collect());
            }
            Frame::Array(
                args[2..]
                    .iter()
                    .map(|n| lookup(n).map_or(Frame::NullArray, command_info))
                    .collect(),
            )
        }
        "docs" => {
            let specs: Vec<&CommandSpec> = if args.len() == 2 {
                all_commands()
            } else {
                args[2..].iter().filter_map(|n| lookup(n)).collect()
            };
            Frame::Map(
                specs
                    .into_iter()
                    .map(|s| (Frame::bulk(s.name), command_docs(s)))
                    .collect(),
            )
        }
        "getkeys" if args.len() >= 4 => {
            let Some(spec) = lookup(&args[2]) else {
                return Frame::error("ERR Invalid command specified");
            };
            let inner = &args[2..];
            // Scripts and functions name their keys with a count (`EVAL script numkeys
            // key...`), which the table's fixed positions cannot say.
            let counted = matches!(
                spec.name,
                "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
            );
            if spec.first_key <= 0 && !counted && spec.keys_of.is_none() {
                return Frame::error("ERR The command has no key arguments");
            }
            if !spec.arity_ok(inner.len()) {
                return Frame::error("ERR Invalid number of arguments specified for command");
            }
            if counted {
                // As in Redis, a count that is not a number or names more keys than given
                // finds no keys (these commands may have none), rather than an error.
                let keys = super::util::parse_i64(&inner[2])
                    .ok()
                    .and_then(|n| usize::try_from(n).ok())
                    .and_then(|n| inner[3..].get(..n))
                    .unwrap_or_default();
                return Frame::bulks(keys.iter().cloned());
            }
            let keys = spec.keys_in(inner);
            if keys.is_empty() {
                return Frame::error("ERR Invalid arguments specified for command");
            }
            Frame::bulks(keys.into_iter().map(|i| inner[i].clone()))
        }
        // Redis's text without `GETKEYSANDFLAGS`, which latchkey does not run.
        "help" if args.len() == 2 => super::util::help(
            "COMMAND",
            &[
                "(no subcommand)",
                "    Return details about all Redis commands.",
                "COUNT",
                "    Return the total number of commands in this Redis server.",
                "LIST",
                "    Return a list of all commands in this Redis server.",
                "INFO [<command-name> ...]",
                "    Return details about multiple Redis commands.",
                "    If no command names are given, documentation details for all",
                "    commands are returned.",
                "DOCS [<command-name> ...]",
                "    Return documentation details about multiple Redis commands.",
                "    If no command names are given, documentation details for all",
                "    commands are returned.",
                "GETKEYS <full-command>",
                "    Return the keys from a full Redis command.",
            ],
        ),
        "count" | "getkeys" | "help" => arity_error(&format!("command|{sub}")),
        _ => unknown_subcommand(args, "command"),
    }
}

/// Every name `COMMAND LIST` gives, with its ACL category bits: each of latchkey's commands,
/// followed, for a container of Redis's table (`CONFIG`, `MEMORY`, `COMMAND`, ...), by its
/// subcommands as Redis 7.0's own table names them (`config|get`), as Redis lists them. A command's categories are those
/// `COMMAND INFO` shows; a subcommand's are Redis's (latchkey's containers run Redis's
/// subcommands).
fn listed() -> Vec<(&'static str, u32)> {
    use crate::acl::commands as table;
    let mut out = Vec::new();
    for spec in all_commands() {
        let bits = categories(spec)
            .iter()
            .filter_map(|c| crate::acl::category(c.trim_start_matches('@').as_bytes()))
            .fold(0, |a, b| a | b);
        out.push((spec.name, bits));
        // Redis's table says which commands are containers (`COMMAND` is one there, though
        // latchkey's `COMMAND` reads its subcommand itself).
        if let Some(id) = table::lookup(spec.name.as_bytes()) {
            out.extend(table::subcommands(id).map(|sub| {
                let c = &table::all()[sub];
                (c.name, c.categories)
            }));
        }
    }
    out
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN glob]`, Redis's forms.
/// latchkey loads no modules, so a module has no commands; an unknown category has none
/// either (Redis's answer too, not an error); a pattern matches full names (`config|*`),
/// without regard to case.
fn command_list(args: &[Bytes]) -> Frame {
    let names = listed();
    if args.len() == 2 {
        return Frame::bulks(names.into_iter().map(|(n, _)| n));
    }
    if args.len() != 5 || !is(&args[2], "filterby") {
        return super::util::syntax_error();
    }
    if is(&args[3], "module") {
        Frame::Array(vec![])
    } else if is(&args[3], "aclcat") {
        let Some(bit) = crate::acl::category(&args[4]) else {
            return Frame::Array(vec![]);
        };
        Frame::bulks(
            names
                .into_iter()
                .filter(|(_, cats)| cats & bit != 0)
                .map(|(n, _)| n),
        )
    } else if is(&args[3], "pattern") {
        Frame::bulks(
            names
                .into_iter()
                .filter(|(n, _)| crate::glob::matches(&args[4], n.as_bytes(), true))
                .map(|(n, _)| n),
        )
    } else {
        super::util::syntax_error()
    }
}
