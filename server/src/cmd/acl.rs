//! `ACL`: users and their rules (`SETUSER`, `GETUSER`, `DELUSER`, `LIST`, `USERS`,
//! `WHOAMI`), the categories (`CAT`), `GENPASS`, `DRYRUN`, the ACL log (`LOG`), with Redis
//! 7.0's replies and errors. The users themselves are [`crate::acl`]'s.

use std::sync::Arc;

use bytes::Bytes;

use super::util::{lower, subcommand_syntax_error, unknown_subcommand};
use super::{arity_error, spec, CommandSpec, Ctx, ADMIN, LOADING, NOSCRIPT, STALE};
use crate::acl::commands::{self as acl_commands, CATEGORIES};
use crate::acl::{Acl, SelectorView, User};
use crate::codec::parse_int;
use crate::command::CONTAINER;
use crate::frame::Frame;

/// The `ACL` command.
pub(crate) const COMMANDS: &[CommandSpec] = &[spec(
    "acl",
    -2,
    ADMIN | NOSCRIPT | LOADING | STALE | CONTAINER,
    0,
    0,
    0,
    acl,
)];

const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Prints this help.",
];

fn acl(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    // Redis's dispatcher knows each subcommand's arity and refuses before the command runs.
    match acl_commands::find(args) {
        None => return unknown_subcommand(args, "acl"),
        Some(id) if !acl_commands::arity_ok(id, args) => {
            return arity_error(&format!("acl|{sub}"));
        }
        Some(_) => {}
    }
    let acl = &ctx.shared.acl;
    match sub.as_str() {
        "setuser" => setuser(ctx, args),
        "deluser" => deluser(ctx, args),
        "getuser" => match acl.user(&args[2]) {
            Some(u) => getuser(&u),
            None => Frame::Null,
        },
        "list" => Frame::Array(
            acl.users()
                .iter()
                .map(|u| Frame::Bulk(Acl::list_line(u).into()))
                .collect(),
        ),
        "users" => Frame::Array(
            acl.users()
                .iter()
                .map(|u| Frame::Bulk(u.name.clone()))
                .collect(),
        ),
        "whoami" => Frame::Bulk(ctx.client.user.name.clone()),
        "load" | "save" => {
            let file = ctx.shared.config.get("aclfile").unwrap_or_default();
            if file.is_empty() {
                Frame::error(
                    "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.",
                )
            } else if sub == "load" {
                match acl.load_file(&file) {
                    Ok(replaced) => {
                        disconnect(ctx, &replaced);
                        Frame::ok()
                    }
                    Err(e) => Frame::error(format!("ERR {e}")),
                }
            } else {
                match acl.save_file(&file) {
                    Ok(()) => Frame::ok(),
                    Err(e) => {
                        tracing::warn!("ACL SAVE to {file}: {e}");
                        Frame::error("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
                    }
                }
            }
        }
        "cat" if args.len() == 2 => {
            Frame::Array(CATEGORIES.iter().map(|c| Frame::bulk(*c)).collect())
        }
        "cat" if args.len() == 3 => match crate::acl::category(&args[2]) {
            Some(flag) => Frame::bulks(crate::acl::category_commands(flag)),
            None => {
                let name: String = String::from_utf8_lossy(&args[2])
                    .chars()
                    .take(128)
                    .collect();
                Frame::error(format!("ERR Unknown category '{name}'"))
            }
        },
        "genpass" if args.len() <= 3 => genpass(args),
        "log" if args.len() <= 3 => log(ctx, args),
        "dryrun" => dryrun(ctx, args),
        "help" => Frame::Array(HELP.iter().map(|l| Frame::simple(l)).collect()),
        _ => subcommand_syntax_error(args, "acl"),
    }
}

fn setuser(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let name = &args[2];
    if crate::acl::has_spaces(name) {
        return Frame::error("ERR Usernames can't contain spaces or null characters");
    }
    match ctx.shared.acl.set_user(name, &args[3..]) {
        Ok(revoked) => {
            if let Some(revoked) = revoked {
                // Redis's `ACLKillPubsubClientsIfNeeded`: a subscriber of the user to a
                // channel it lost is disconnected.
                for h in ctx.shared.clients.list() {
                    let info = h.info.lock().clone();
                    let theirs = info
                        .user
                        .as_ref()
                        .is_some_and(|u| Arc::ptr_eq(u, &revoked.user));
                    if !theirs || info.sub + info.psub + info.ssub == 0 {
                        continue;
                    }
                    let (channels, patterns) = ctx.shared.pubsub.subscriptions_of(h.id);
                    if !revoked.keeps(channels, patterns) {
                        if h.id == ctx.client.handle.id {
                            ctx.client.close_after_reply = true;
                        } else {
                            h.kill();
                        }
                    }
                }
            }
            Frame::ok()
        }
        Err(e) => Frame::error(format!("ERR {e}")),
    }
}

fn deluser(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args[2..].iter().any(|n| &n[..] == crate::acl::DEFAULT_USER) {
        return Frame::error("ERR The 'default' user cannot be removed");
    }
    let deleted = ctx.shared.acl.delete(&args[2..]);
    disconnect(ctx, &deleted);
    Frame::Integer(deleted.len() as i64)
}

/// Redis's `ACLFreeUserAndKillClients`: the connections of users that are gone are closed,
/// this one after its reply, back to the default user and not authenticated meanwhile.
fn disconnect(ctx: &mut Ctx<'_>, users: &[Arc<User>]) {
    if users.is_empty() {
        return;
    }
    for h in ctx.shared.clients.list() {
        let theirs = h
            .info
            .lock()
            .user
            .as_ref()
            .is_some_and(|u| users.iter().any(|gone| Arc::ptr_eq(u, gone)));
        if !theirs {
            continue;
        }
        if h.id == ctx.client.handle.id {
            let default = ctx.shared.acl.default_user().clone();
            ctx.client.set_user(default);
            ctx.client.handle.info.lock().user = None;
            ctx.client.authenticated = false;
            ctx.client.close_after_reply = true;
        } else {
            h.kill();
        }
    }
}

fn selector_fields(s: SelectorView) -> Vec<(Frame, Frame)> {
    vec![
        (Frame::bulk("commands"), Frame::Bulk(s.commands.into())),
        (Frame::bulk("keys"), Frame::Bulk(s.keys.into())),
        (Frame::bulk("channels"), Frame::Bulk(s.channels.into())),
    ]
}

fn getuser(user: &User) -> Frame {
    let view = Acl::describe(user);
    let mut fields = vec![
        (
            Frame::bulk("flags"),
            Frame::Set(view.flags.iter().map(|f| Frame::bulk(*f)).collect()),
        ),
        (
            Frame::bulk("passwords"),
            Frame::Array(
                view.passwords
                    .into_iter()
                    .map(|p| Frame::Bulk(p.into()))
                    .collect(),
            ),
        ),
    ];
    fields.extend(selector_fields(view.root));
    fields.push((
        Frame::bulk("selectors"),
        Frame::Array(
            view.selectors
                .into_iter()
                .map(|s| Frame::Map(selector_fields(s)))
                .collect(),
        ),
    ));
    Frame::Map(fields)
}

fn genpass(args: &[Bytes]) -> Frame {
    let bits = match args.get(2) {
        None => 256,
        Some(a) => match parse_int(a) {
            Some(n) => n,
            None => return super::util::not_integer(),
        },
    };
    if bits <= 0 || bits > 4096 {
        return Frame::error(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
        );
    }
    let chars = ((bits + 3) / 4) as usize;
    let hex: String = (0..chars)
        .map(|_| char::from_digit(rand::random_range(0..16u32), 16).unwrap_or('0'))
        .collect();
    Frame::Bulk(hex.into())
}

fn log(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let mut count = 10;
    if let Some(a) = args.get(2) {
        if a.eq_ignore_ascii_case(b"reset") {
            ctx.shared.acl.log.lock().clear();
            return Frame::ok();
        }
        match parse_int(a) {
            Some(n) => count = n.max(0) as usize,
            None => return super::util::not_integer(),
        }
    }
    let now = ctx.shared.clock.now_ms();
    let entries = ctx.shared.acl.log.lock().newest(count);
    Frame::Array(
        entries
            .into_iter()
            .map(|e| {
                Frame::Map(vec![
                    (Frame::bulk("count"), Frame::Integer(e.count as i64)),
                    (Frame::bulk("reason"), Frame::bulk(e.reason_name())),
                    (Frame::bulk("context"), Frame::bulk(e.context_name())),
                    (Frame::bulk("object"), Frame::Bulk(e.object.clone())),
                    (Frame::bulk("username"), Frame::Bulk(e.username.clone())),
                    (
                        Frame::bulk("age-seconds"),
                        Frame::Double(now.saturating_sub(e.ctime_ms) as f64 / 1000.0),
                    ),
                    (
                        Frame::bulk("client-info"),
                        Frame::Bulk(e.client_info.into()),
                    ),
                ])
            })
            .collect(),
    )
}

/// `ACL DRYRUN user command args...`: whether the user could run it, as a bulk text when
/// not (Redis's reply is no error), against Redis's own command table.
fn dryrun(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Some(user) = ctx.shared.acl.user(&args[2]) else {
        return Frame::error(format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(&args[2])
        ));
    };
    let cmd = &args[3..];
    let Some(id) = acl_commands::find(cmd) else {
        return Frame::error(format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(&cmd[0])
        ));
    };
    let all = acl_commands::all();
    if !acl_commands::arity_ok(id, cmd) {
        return Frame::error(format!(
            "ERR wrong number of arguments for '{}' command",
            all[id].name
        ));
    }
    match user.check(id, cmd) {
        Ok(()) => Frame::ok(),
        Err(crate::acl::Denied::Command) => Frame::Bulk(
            format!(
                "This user has no permissions to run the '{}' command",
                all[id].name
            )
            .into(),
        ),
        Err(crate::acl::Denied::Key(i)) => Frame::Bulk(
            format!(
                "This user has no permissions to access the '{}' key",
                String::from_utf8_lossy(&cmd[i])
            )
            .into(),
        ),
        Err(crate::acl::Denied::Channel(i)) => Frame::Bulk(
            format!(
                "This user has no permissions to access the '{}' channel",
                String::from_utf8_lossy(&cmd[i])
            )
            .into(),
        ),
    }
}
