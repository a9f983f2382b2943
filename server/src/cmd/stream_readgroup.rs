//! `XREADGROUP GROUP group consumer [COUNT n] [BLOCK ms] [NOACK] STREAMS key... id...`:
//! reading a stream as one consumer of a group.
//!
//! The ID `>` asks for entries no consumer of the group was given yet: they are delivered past
//! the group's last delivered ID, which moves on, and (without `NOACK`) become pending for
//! this consumer until acknowledged. Any other ID reads the consumer's own history: the pending
//! entries it holds after that ID, each counted as delivered once more (an entry deleted
//! since comes back as its ID and a null). Only `>` waits when `BLOCK` says so; a waiting
//! reader whose stream or group goes away is told so.
//!
//! The command itself never reaches replicas or the AOF: each delivery goes as the `XCLAIM`
//! that recreates its pending entry, a `NOACK` read as `XGROUP SETID` of the new last ID, and
//! a consumer a `NOACK` read created as `XGROUP CREATECONSUMER`, between `MULTI` and `EXEC`
//! when there are several, as Redis 7.0 sends them.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Notify;

use super::blocking::block_until_changed;
use super::stream_args::{entry_frame, parse_strict_id};
use super::stream_group::{as_one_step, create_consumer_effect, setid_effect, xclaim_effect};
use super::stream_read::{parse_read_args, streams_keys, ReadArgs};
use super::util::wrongtype;
use super::{spec, CommandSpec, Ctx, BLOCKING, MOVABLEKEYS, WRITE};
use crate::db::Value;
use crate::frame::{Frame, Protocol};
use crate::notify::STREAM;
use crate::state::Shared;
use crate::stream::{Fields, StreamId};

/// `XREADGROUP`.
pub(crate) const COMMANDS: &[CommandSpec] = &[spec(
    "xreadgroup",
    -7,
    WRITE | BLOCKING | MOVABLEKEYS,
    0,
    0,
    0,
    xreadgroup,
)
.with_keys_of(streams_keys)];

/// How many entries a blocked reader without `COUNT` gets per stream.
const BLOCKED_DEFAULT_COUNT: usize = 1000;

/// What one `XREADGROUP` asked for.
struct Read {
    group: Bytes,
    consumer: Bytes,
    keys: Vec<Bytes>,
    /// Per key: `None` for `>`, else the ID after which to read the consumer's history.
    after: Vec<Option<StreamId>>,
    noack: bool,
    resp3: bool,
}

/// What one attempt did: the reply when something was served, the effects for replicas.
struct Outcome {
    reply: Option<Frame>,
    effects: Vec<Vec<Bytes>>,
}

/// One entry as a history read gives it: the entry, or its ID and a null when it was deleted.
fn history_frame(id: StreamId, fields: Option<&Fields>) -> Frame {
    match fields {
        Some(f) => entry_frame(id, f),
        None => Frame::Array(vec![Frame::Bulk(id.to_bytes()), Frame::NullArray]),
    }
}

/// Serves `read` from what the keys hold now. `blocked`: the client waited (its notifier
/// given), so a stream that went away or a group destroyed meanwhile is an error rather than
/// skipped, and it takes new entries of a stream only in its turn among the group's blocked
/// readers (see `Db::first_group_reader`).
fn serve(
    shared: &Shared,
    db_index: usize,
    read: &Read,
    count: usize,
    now: u64,
    blocked: Option<&Arc<Notify>>,
) -> Result<Outcome, Frame> {
    let blocked_as = blocked;
    let blocked = blocked.is_some();
    let db = shared.keyspace.db(db_index);
    let lazy = shared.lazy_expire_deletes();
    let mut out = Vec::new();
    let mut effects = Vec::new();
    for (key, after) in read.keys.iter().zip(&read.after) {
        let gone = || Frame::error("UNBLOCKED the stream key no longer exists");
        let Some(mut e) = db.get_mut(key, now, lazy) else {
            if blocked {
                return Err(gone());
            }
            continue;
        };
        let Value::Stream(s) = &mut e.value else {
            return Err(if blocked { gone() } else { wrongtype() });
        };
        let counters = s.counters();
        let Some(g) = s.groups().get(&read.group) else {
            return Err(if blocked {
                Frame::error(
                    "NOGROUP the consumer group this client was blocked on no longer exists",
                )
            } else {
                no_group_read(key, &read.group)
            });
        };
        // What to hand out, read before the group changes.
        let history: Option<Vec<(StreamId, Option<Fields>)>> = after.map(|start| {
            let Some(start) = start.next() else {
                return Vec::new();
            };
            let limit = if count == 0 { usize::MAX } else { count };
            g.consumers
                .get(&read.consumer)
                .map(|c| {
                    c.pel
                        .range(start..)
                        .take(limit)
                        .map(|&id| (id, s.entry(id).cloned()))
                        .collect()
                })
                .unwrap_or_default()
        });
        // A blocked reader behind another of its group leaves the new entries to it.
        let in_turn = || blocked_as.is_none_or(|me| db.first_group_reader(key, &read.group, me));
        let fresh: Option<Vec<(StreamId, Fields)>> = match (after, s.edges()) {
            (None, Some((_, (&top, _)))) if top > g.last_id && in_turn() => {
                g.last_id.next().map(|from| {
                    let limit = if count == 0 { usize::MAX } else { count };
                    s.range(from, StreamId::MAX, false, limit)
                        .into_iter()
                        .map(|(id, f)| (id, f.clone()))
                        .collect()
                })
            }
            _ => None,
        };
        if history.is_none() && fresh.is_none() {
            // Nothing to serve from this stream: the consumer is made only when it is.
            continue;
        }
        let g = s
            .groups_mut()
            .get_mut(&read.group)
            .expect("the group was just found");
        let (c, created) = g.consumer(&read.consumer, now);
        c.seen_time = now;
        if created {
            shared.keyspace_event(STREAM, "xgroup-createconsumer", key, db_index);
            if read.noack {
                effects.push(create_consumer_effect(key, &read.group, &read.consumer));
            }
        }
        let entries = if let Some(history) = history {
            let mut frames = Vec::with_capacity(history.len());
            for (id, fields) in history {
                if fields.is_some() {
                    if let Some(n) = g.pel.get_mut(&id) {
                        n.delivery_time = now;
                        n.delivery_count += 1;
                    }
                }
                frames.push(history_frame(id, fields.as_ref()));
            }
            frames
        } else if let Some(fresh) = fresh {
            let mut frames = Vec::with_capacity(fresh.len());
            let mut moved = false;
            for (id, fields) in fresh {
                if id > g.last_id {
                    g.advance(&counters, id);
                    moved = true;
                }
                if !read.noack {
                    g.deliver(id, &read.consumer, now);
                    let nack = &g.pel[&id];
                    effects.push(xclaim_effect(key, &read.group, id, nack, g.last_id));
                }
                frames.push(entry_frame(id, &fields));
            }
            if moved && read.noack {
                effects.push(setid_effect(key, &read.group, g));
            }
            frames
        } else {
            Vec::new()
        };
        out.push((Frame::Bulk(key.clone()), Frame::Array(entries)));
    }
    let reply = (!out.is_empty()).then(|| {
        if read.resp3 {
            Frame::Map(out)
        } else {
            Frame::Array(
                out.into_iter()
                    .map(|(k, v)| Frame::Array(vec![k, v]))
                    .collect(),
            )
        }
    });
    Ok(Outcome { reply, effects })
}

/// `-NOGROUP No such key 'k' or consumer group 'g' in XREADGROUP with GROUP option`.
fn no_group_read(key: &[u8], group: &[u8]) -> Frame {
    Frame::error(format!(
        "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

fn xreadgroup(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let ReadArgs {
        block,
        count,
        noack,
        group,
        streams_at,
    } = match parse_read_args(args, true, ctx.in_script) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let Some((group, consumer)) = group else {
        return Frame::error("ERR Missing GROUP option for XREADGROUP");
    };
    let n = (args.len() - streams_at) / 2;
    let keys: Vec<Bytes> = args[streams_at..streams_at + n].to_vec();
    let mut after = Vec::with_capacity(n);
    let (db, now, lazy) = (ctx.db(), ctx.now_ms, ctx.lazy_delete());
    for (key, id) in keys.iter().zip(&args[streams_at + n..]) {
        let has_group = match db.get(key, now, lazy) {
            None => false,
            Some(e) => match &e.value {
                Value::Stream(s) => s.groups().contains_key(&group),
                _ => return wrongtype(),
            },
        };
        if !has_group {
            return no_group_read(key, &group);
        }
        match &id[..] {
            b"$" => {
                return Frame::error(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                )
            }
            b">" => after.push(None),
            _ => match parse_strict_id(id) {
                Ok(id) => after.push(Some(id)),
                Err(e) => return e,
            },
        }
    }
    let read = Read {
        group,
        consumer,
        keys,
        after,
        noack,
        resp3: ctx.client.protocol == Protocol::Resp3,
    };
    let outcome = match serve(ctx.shared, ctx.client.db, &read, count, now, None) {
        Ok(o) => o,
        Err(e) => return e,
    };
    // (A history read changes only delivery counts and times, which replicas do not get.)
    if !outcome.effects.is_empty() {
        ctx.changed();
        let nested = ctx.in_exec || ctx.in_script;
        ctx.propagate_as(as_one_step(outcome.effects, nested));
    }
    if let Some(reply) = outcome.reply {
        return reply;
    }
    let Some(timeout_ms) = block else {
        return Frame::NullArray;
    };
    if !ctx.may_block() {
        return Frame::NullArray;
    }
    let limit = if count == 0 {
        BLOCKED_DEFAULT_COUNT
    } else {
        count
    };
    let waiting_keys = read.keys.clone();
    let group = read.group.clone();
    // Woken by any change of its keys too: a deleted or overwritten stream, a flush or a
    // swap answers `UNBLOCKED`, as Redis's `signalDeletedKeyAsReady` makes it. New entries
    // go to the group's blocked readers one at a time, in the order they blocked.
    block_until_changed(
        ctx,
        waiting_keys,
        timeout_ms,
        false,
        Some(group),
        move |shared, db, now, me| {
            let _order = shared.order_guard();
            let outcome = serve(shared, db, &read, limit, now, Some(me))?;
            let Some(reply) = outcome.reply else {
                return Ok(None);
            };
            shared.propagate_lazy_expired();
            if !outcome.effects.is_empty() {
                shared.after_write_as(db, &as_one_step(outcome.effects, false), 1);
            }
            Ok(Some(reply))
        },
    );
    Frame::NullArray
}
