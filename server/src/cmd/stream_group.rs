//! `XGROUP CREATE|CREATECONSUMER|DELCONSUMER|DESTROY|SETID|HELP`: making and unmaking a
//! stream's consumer groups and their consumers, and moving a group's last delivered ID.
//!
//! Every subcommand but `HELP` needs the stream to exist (`CREATE ... MKSTREAM` makes an empty
//! one), and all but `CREATE` and `DESTROY` need the group. Each goes to replicas and the AOF
//! as it was sent, when it changed something, with its keyspace notification
//! (`xgroup-create`, `xgroup-createconsumer`, `xgroup-delconsumer`, `xgroup-destroy`,
//! `xgroup-setid`). Destroying a group wakes the clients blocked reading it, which then answer
//! that the group is gone.

use bytes::Bytes;

use super::stream_args::{parse_id, parse_strict_id, stream_of, write_stream};
use super::util::{is, lower, parse_i64, subcommand_syntax_error, unknown_subcommand, wrongtype};
use super::{arity_error, spec, CommandSpec, Ctx, CONTAINER, DENYOOM, WRITE};
use crate::db::Value;
use crate::frame::Frame;
use crate::notify::STREAM;
use crate::stream::StreamId;
use crate::stream_group::{Group, Nack, INVALID_ENTRIES_READ};

/// `XGROUP`.
pub(crate) const COMMANDS: &[CommandSpec] =
    &[spec("xgroup", -2, WRITE | CONTAINER, 2, 2, 1, xgroup).with_flags_of(denyoom_when_creating)];

/// `CREATE` and `CREATECONSUMER` take memory: refused when the server is out of it, as
/// Redis flags them `denyoom`; the other subcommands free or move things and are not.
fn denyoom_when_creating(_: &crate::state::Shared, args: &[Bytes], flags: u32) -> Option<u32> {
    let sub = lower(args.get(1)?);
    (sub == "create" || sub == "createconsumer").then_some(flags | DENYOOM)
}

const HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

/// `-NOGROUP No such consumer group 'g' for key name 'k'` (XGROUP, XINFO CONSUMERS).
pub(crate) fn no_group(key: &[u8], group: &[u8]) -> Frame {
    Frame::error(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(group),
        String::from_utf8_lossy(key)
    ))
}

/// `-NOGROUP No such key 'k' or consumer group 'g'` (XPENDING, XCLAIM, XAUTOCLAIM).
pub(crate) fn no_key_or_group(key: &[u8], group: &[u8]) -> Frame {
    Frame::error(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

/// Parses an `ENTRIESREAD` value: a number, `-1` or more.
fn parse_entries_read(arg: &[u8]) -> Result<i64, Frame> {
    let n = parse_i64(arg)?;
    if n < 0 && n != INVALID_ENTRIES_READ {
        return Err(Frame::error(
            "ERR value for ENTRIESREAD must be positive or -1",
        ));
    }
    Ok(n)
}

fn xgroup(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    let n = args.len();
    let arity_ok = match sub.as_str() {
        "help" => n == 2,
        "create" | "setid" => n >= 5,
        "destroy" => n == 4,
        "createconsumer" | "delconsumer" => n == 5,
        _ => return unknown_subcommand(args, "xgroup"),
    };
    if !arity_ok {
        return arity_error(&format!("xgroup|{sub}"));
    }
    if sub == "help" {
        return Frame::Array(HELP.iter().map(|l| Frame::simple(l)).collect());
    }
    match sub.as_str() {
        "create" => create(ctx, args),
        "setid" => setid(ctx, args),
        "destroy" => destroy(ctx, args),
        "createconsumer" => create_consumer(ctx, args),
        _ => del_consumer(ctx, args),
    }
}

fn key_must_exist() -> Frame {
    Frame::error(
        "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
    )
}

/// `XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n]`.
fn create(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let mut mkstream = false;
    let mut entries_read = INVALID_ENTRIES_READ;
    let mut i = 5;
    while i < args.len() {
        if is(&args[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if is(&args[i], "entriesread") && i + 1 < args.len() {
            match parse_entries_read(&args[i + 1]) {
                Ok(n) => entries_read = n,
                Err(e) => return e,
            }
            i += 2;
        } else {
            return subcommand_syntax_error(args, "xgroup");
        }
    }
    let key = &args[2];
    let mut e = match write_stream(ctx, key) {
        Ok(Some(e)) => Some(e),
        Ok(None) if mkstream => None,
        Ok(None) => return key_must_exist(),
        Err(err) => return err,
    };
    if args.len() > 8 {
        return subcommand_syntax_error(args, "xgroup");
    }
    let id = if &args[4][..] == b"$" {
        e.as_mut()
            .map(|e| stream_of(e).last_id())
            .unwrap_or_default()
    } else {
        match parse_strict_id(&args[4]) {
            Ok(id) => id,
            Err(err) => return err,
        }
    };
    let mut e = match e {
        Some(e) => e,
        None => {
            let e = ctx
                .db()
                .get_or_create(key, ctx.now_ms, ctx.lazy_delete(), || {
                    Value::Stream(Box::default())
                });
            if !matches!(e.value, Value::Stream(_)) {
                return wrongtype();
            }
            e
        }
    };
    let groups = stream_of(&mut e).groups_mut();
    if groups.contains_key(&args[3]) {
        return Frame::error("BUSYGROUP Consumer Group name already exists");
    }
    groups.insert(args[3].clone(), Group::new(id, entries_read));
    drop(e);
    ctx.modified(key);
    ctx.notify(STREAM, "xgroup-create", key);
    Frame::ok()
}

/// `XGROUP SETID key group id|$ [ENTRIESREAD n]`.
fn setid(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[2];
    let mut e = match write_stream(ctx, key) {
        Ok(Some(e)) => e,
        Ok(None) => return key_must_exist(),
        Err(err) => return err,
    };
    let s = stream_of(&mut e);
    if !s.groups().contains_key(&args[3]) {
        return no_group(key, &args[3]);
    }
    if args.len() != 5 && args.len() != 7 {
        return subcommand_syntax_error(args, "xgroup");
    }
    let id = if &args[4][..] == b"$" {
        s.last_id()
    } else {
        match parse_id(&args[4], 0) {
            Ok(id) => id,
            Err(err) => return err,
        }
    };
    let mut entries_read = INVALID_ENTRIES_READ;
    if args.len() == 7 {
        if !is(&args[5], "entriesread") {
            return subcommand_syntax_error(args, "xgroup");
        }
        match parse_entries_read(&args[6]) {
            Ok(n) => entries_read = n,
            Err(err) => return err,
        }
    }
    if let Some(g) = s.groups_mut().get_mut(&args[3]) {
        g.last_id = id;
        g.entries_read = entries_read;
    }
    drop(e);
    ctx.modified(key);
    ctx.notify(STREAM, "xgroup-setid", key);
    Frame::ok()
}

/// `XGROUP DESTROY key group`: 1 when the group was there.
fn destroy(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[2];
    let mut e = match write_stream(ctx, key) {
        Ok(Some(e)) => e,
        Ok(None) => return key_must_exist(),
        Err(err) => return err,
    };
    let gone = stream_of(&mut e).groups_mut().remove(&args[3]).is_some();
    drop(e);
    if !gone {
        return Frame::Integer(0);
    }
    ctx.modified(key);
    ctx.notify(STREAM, "xgroup-destroy", key);
    // Clients blocked reading the group find it gone and say so.
    ctx.db().signal_all(key);
    Frame::Integer(1)
}

/// `XGROUP CREATECONSUMER key group consumer`: 1 when the consumer is new.
fn create_consumer(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[2];
    let mut e = match write_stream(ctx, key) {
        Ok(Some(e)) => e,
        Ok(None) => return key_must_exist(),
        Err(err) => return err,
    };
    let now = ctx.now_ms;
    let Some(g) = stream_of(&mut e).groups_mut().get_mut(&args[3]) else {
        return no_group(key, &args[3]);
    };
    let (_, created) = g.consumer(&args[4], now);
    drop(e);
    if !created {
        return Frame::Integer(0);
    }
    ctx.modified(key);
    ctx.notify(STREAM, "xgroup-createconsumer", key);
    Frame::Integer(1)
}

/// `XGROUP DELCONSUMER key group consumer`: how many pending entries the consumer held.
fn del_consumer(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[2];
    let mut e = match write_stream(ctx, key) {
        Ok(Some(e)) => e,
        Ok(None) => return key_must_exist(),
        Err(err) => return err,
    };
    let Some(g) = stream_of(&mut e).groups_mut().get_mut(&args[3]) else {
        return no_group(key, &args[3]);
    };
    let held = g.delete_consumer(&args[4]);
    drop(e);
    let Some(held) = held else {
        return Frame::Integer(0);
    };
    ctx.modified(key);
    ctx.notify(STREAM, "xgroup-delconsumer", key);
    Frame::Integer(held as i64)
}

/// What replicas and the AOF get for a delivery or a claim of `id` (Redis's
/// `streamPropagateXCLAIM`): an `XCLAIM` that forces the pending entry to be as it is here,
/// with the group's last delivered ID.
pub(crate) fn xclaim_effect(
    key: &Bytes,
    group: &Bytes,
    id: StreamId,
    nack: &Nack,
    last_id: StreamId,
) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XCLAIM"),
        key.clone(),
        group.clone(),
        nack.consumer.clone(),
        Bytes::from_static(b"0"),
        id.to_bytes(),
        Bytes::from_static(b"TIME"),
        Bytes::from(nack.delivery_time.to_string()),
        Bytes::from_static(b"RETRYCOUNT"),
        Bytes::from(nack.delivery_count.to_string()),
        Bytes::from_static(b"FORCE"),
        Bytes::from_static(b"JUSTID"),
        Bytes::from_static(b"LASTID"),
        last_id.to_bytes(),
    ]
}

/// What replicas and the AOF get when a group's last delivered ID moved without a claim to
/// carry it (Redis's `streamPropagateGroupID`).
pub(crate) fn setid_effect(key: &Bytes, group: &Bytes, g: &Group) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XGROUP"),
        Bytes::from_static(b"SETID"),
        key.clone(),
        group.clone(),
        g.last_id.to_bytes(),
        Bytes::from_static(b"ENTRIESREAD"),
        Bytes::from(g.entries_read.to_string()),
    ]
}

/// What replicas and the AOF get for a consumer a read created (Redis's
/// `streamPropagateConsumerCreation`).
pub(crate) fn create_consumer_effect(key: &Bytes, group: &Bytes, consumer: &Bytes) -> Vec<Bytes> {
    vec![
        Bytes::from_static(b"XGROUP"),
        Bytes::from_static(b"CREATECONSUMER"),
        key.clone(),
        group.clone(),
        consumer.clone(),
    ]
}

/// Several effects of one command between `MULTI` and `EXEC`, as Redis 7.0 sends what a
/// command propagated more than once, unless the command runs inside a transaction or a
/// script (`nested`), which is one step already.
pub(crate) fn as_one_step(mut effects: Vec<Vec<Bytes>>, nested: bool) -> Vec<Vec<Bytes>> {
    if effects.len() > 1 && !nested {
        effects.insert(0, vec![Bytes::from_static(b"MULTI")]);
        effects.push(vec![Bytes::from_static(b"EXEC")]);
    }
    effects
}
