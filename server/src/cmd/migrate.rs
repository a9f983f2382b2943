//! `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password | AUTH2
//! username password] [KEYS key ...]`: moves keys to another server (Redis or latchkey) by
//! sending it a `RESTORE` of each, made with the `DUMP` serializer ([`crate::rdb::dump`]), then
//! deletes them here unless `COPY` was given.
//!
//! Redis runs the whole command synchronously, freezing the server until the target answers
//! or the timeout passes. Here it is done in three steps, so that no other client ever waits
//! on the network:
//!
//! 1. **Read** (the handler, under the execution gate): the options are parsed with Redis's
//!    errors, and each key's payload and remaining TTL are taken. No key: `+NOKEY`.
//! 2. **Talk** (no gate, no lock): the conversation with the target runs on tokio's blocking
//!    pool ([`super::migrate_link`]), bounded by the timeout at every step.
//! 3. **Delete** (under the gate again, exclusively when several keys go): each key the target
//!    accepted is deleted, announced (`del`), and the deletions reach replicas and the AOF as
//!    one `DEL` (never the `MIGRATE` itself), as in Redis.
//!
//! Since other clients run between steps 1 and 3, a key changed meanwhile is *not* deleted
//! in step 3 (its value is compared with the payload sent): the target received the value the
//! key had at step 1, and the newer write stays here rather than being lost.
//!
//! Inside `MULTI` or a script (where nothing may wait) the three steps run in place, under the
//! gate the transaction or script holds, which is how Redis runs every `MIGRATE`: the other
//! clients then wait up to the timeout for each step, as they would on Redis.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::migrate_link::{self, Outcome, Request};
use super::util::{is, parse_i64, syntax_error};
use super::{spec, CommandSpec, Ctx, EXCLUSIVE, WRITE};
use crate::codec::encode;
use crate::db::Update;
use crate::frame::Frame;
use crate::rdb::dump;
use crate::state::Shared;

/// `MIGRATE`.
pub(crate) const COMMANDS: &[CommandSpec] = &[spec("migrate", -6, WRITE, 3, 3, 1, migrate)
    .with_keys_of(keys_of)
    .with_flags_of(flags_of)];

/// Where `MIGRATE`'s keys are, as Redis's `migrateGetKeys` finds them: the key argument, or,
/// with `KEYS` (and an empty key argument), every argument after it. `AUTH`'s and `AUTH2`'s
/// values are skipped, so a password spelled `keys` is not taken for the option.
fn keys_of(args: &[Bytes]) -> Vec<usize> {
    let mut i = 6;
    while i < args.len() {
        if is(&args[i], "keys") {
            if !args[3].is_empty() {
                return Vec::new();
            }
            return (i + 1..args.len()).collect();
        }
        if is(&args[i], "auth") {
            i += 1;
        } else if is(&args[i], "auth2") {
            i += 2;
        }
        i += 1;
    }
    if args.len() > 3 {
        vec![3]
    } else {
        Vec::new()
    }
}

/// Several keys are read (and later deleted) with the keyspace to the command alone, so that
/// they are one moment's values, as Redis's single thread takes them.
fn flags_of(_: &Shared, args: &[Bytes], flags: u32) -> Option<u32> {
    (keys_of(args).len() > 1).then_some(flags | EXCLUSIVE)
}

/// The parsed options.
struct Options {
    copy: bool,
    replace: bool,
    auth: Option<(Option<Bytes>, Bytes)>,
    /// The index of the first key and how many arguments from it are keys.
    first_key: usize,
    keys: usize,
}

/// Parses the options after the timeout with Redis's errors and in its order: a `KEYS` with a
/// key argument that is not empty is refused when met; the arguments after `KEYS` are keys.
fn options(args: &[Bytes]) -> Result<Options, Frame> {
    let mut o = Options {
        copy: false,
        replace: false,
        auth: None,
        first_key: 3,
        keys: 1,
    };
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(&args[j], "copy") {
            o.copy = true;
        } else if is(&args[j], "replace") {
            o.replace = true;
        } else if is(&args[j], "auth") {
            if more < 1 {
                return Err(syntax_error());
            }
            j += 1;
            o.auth = Some((None, args[j].clone()));
        } else if is(&args[j], "auth2") {
            if more < 2 {
                return Err(syntax_error());
            }
            o.auth = Some((Some(args[j + 1].clone()), args[j + 2].clone()));
            j += 2;
        } else if is(&args[j], "keys") {
            if !args[3].is_empty() {
                return Err(Frame::error(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            o.first_key = j + 1;
            o.keys = args.len() - j - 1;
            break;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    Ok(o)
}

/// What step 1 took of one key: its name and the payload sent.
struct Sent {
    key: Bytes,
    payload: Bytes,
}

fn migrate(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let o = match options(args) {
        Ok(o) => o,
        Err(e) => return e,
    };
    // Redis reads the timeout first, then the database.
    let timeout = match parse_i64(&args[5]) {
        Ok(t) if t <= 0 => 1000,
        Ok(t) => t as u64,
        Err(e) => return e,
    };
    let db = match parse_i64(&args[4]) {
        Ok(d) => d,
        Err(e) => return e,
    };
    let mut sent = Vec::new();
    let mut restores = Vec::new();
    for key in &args[o.first_key..o.first_key + o.keys] {
        let Some(entry) = ctx.db().get(key, ctx.now_ms, ctx.lazy_delete()) else {
            continue;
        };
        let payload = dump::payload(&entry.value);
        // The TTL left, at least 1 ms; 0 for a key that does not expire.
        let ttl = entry
            .expires_at()
            .map_or(0, |at| at.saturating_sub(ctx.now_ms).max(1));
        drop(entry);
        let mut cmd = BytesMut::new();
        let ttl = ttl.to_string();
        let mut restore: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), &payload];
        if o.replace {
            restore.push(b"REPLACE");
        }
        encode(&restore, &mut cmd);
        restores.push(cmd.freeze());
        sent.push(Sent {
            key: key.clone(),
            payload,
        });
    }
    if sent.is_empty() {
        return Frame::simple("NOKEY");
    }
    let req = Request {
        host: args[1].clone(),
        port: args[2].clone(),
        timeout: std::time::Duration::from_millis(timeout),
        auth: o.auth,
        db,
        restores,
    };
    let run_id = ctx.shared.run_id.clone();
    if !ctx.may_block() {
        // Inside `MULTI` or a script: in place, as Redis does, with this worker's other tasks
        // handed to another thread first.
        crate::hand_off::hand_off_worker();
        let outcome = migrate_link::run(&run_id, &req);
        if !o.copy {
            delete_in_place(ctx, &sent, &outcome.accepted);
        }
        return outcome.reply;
    }
    let shared = ctx.shared.clone();
    let db_index = ctx.client.db;
    let copy = o.copy;
    // Its own task, so that the keys the target took are deleted even if the client leaves
    // before the answer.
    let task = tokio::spawn(async move {
        let outcome =
            match tokio::task::spawn_blocking(move || migrate_link::run(&run_id, &req)).await {
                Ok(outcome) => outcome,
                Err(_) => Outcome {
                    reply: Frame::error("IOERR error or timeout reading to target instance"),
                    accepted: Vec::new(),
                },
            };
        if !copy && !outcome.accepted.is_empty() {
            delete_after(&shared, db_index, &sent, &outcome.accepted).await;
        }
        outcome.reply
    });
    ctx.block(async move {
        task.await
            .unwrap_or_else(|_| Frame::error("ERR MIGRATE failed unexpectedly"))
    });
    Frame::Null
}

/// How many connections this server keeps open to `MIGRATE` targets (`INFO`'s
/// `migrate_cached_sockets`).
pub(crate) fn cached_sockets(shared: &Shared) -> usize {
    migrate_link::cached_sockets(&shared.run_id)
}

/// Deletes `key` if it still holds `payload`'s value: `true` when it did.
fn delete_if_unchanged(shared: &Shared, db: usize, now_ms: u64, s: &Sent) -> bool {
    let lazy = shared.lazy_expire_deletes();
    shared
        .keyspace
        .db(db)
        .update(&s.key, now_ms, lazy, |current| match current {
            Some(e) if dump::payload(&e.value) == s.payload => (Update::Remove, true),
            _ => (Update::Keep, false),
        })
}

/// The `DEL` that replicas and the AOF receive for the deleted keys.
fn del_of(keys: Vec<Bytes>) -> Vec<Vec<Bytes>> {
    let mut del = vec![Bytes::from_static(b"DEL")];
    del.extend(keys);
    vec![del]
}

/// Step 3 inside `MULTI` or a script: the caller holds the gate; the deletions propagate as
/// this command's effect.
fn delete_in_place(ctx: &mut Ctx<'_>, sent: &[Sent], accepted: &[usize]) {
    let mut deleted = Vec::new();
    for &i in accepted {
        let s = &sent[i];
        if delete_if_unchanged(ctx.shared, ctx.client.db, ctx.now_ms, s) {
            ctx.changed();
            ctx.notify(crate::notify::GENERIC, "del", &s.key);
            deleted.push(s.key.clone());
        }
    }
    if !deleted.is_empty() {
        ctx.propagate_as(del_of(deleted));
    }
}

/// Step 3 after the conversation: takes the gate (exclusively for several keys, so that no
/// client sees some gone and others not), deletes, and records one `DEL` in stream order.
async fn delete_after(shared: &Arc<Shared>, db: usize, sent: &[Sent], accepted: &[usize]) {
    let delete = || {
        let _order = shared.order_guard();
        let now_ms = shared.clock.now_ms();
        let mut deleted = Vec::new();
        for &i in accepted {
            let s = &sent[i];
            if delete_if_unchanged(shared, db, now_ms, s) {
                shared.keyspace_event(crate::notify::GENERIC, "del", &s.key, db);
                deleted.push(s.key.clone());
            }
        }
        shared.propagate_lazy_expired();
        if !deleted.is_empty() {
            let n = deleted.len() as u64;
            shared.after_write_as(db, &del_of(deleted), n);
        }
    };
    loop {
        // A busy script is waited for, as any client waits for it.
        let threshold = shared.config.busy_reply_threshold();
        if exclusive_needed(accepted) {
            if let Ok(_gate) = shared.gate.exclusive(threshold).await {
                return delete();
            }
        } else if let Ok(_gate) = shared.gate.shared(threshold).await {
            return delete();
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Whether deleting these keys needs the keyspace alone (more than one key).
fn exclusive_needed(accepted: &[usize]) -> bool {
    accepted.len() > 1
}
