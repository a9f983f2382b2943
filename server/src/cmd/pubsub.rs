//! Pub/sub commands: waiting locks sleep until the holder's unlock `PUBLISH` wakes them.
//!
//! Subscribing answers with one confirmation per channel, so these handlers reply with a
//! [`Frame::Multi`]: several replies written back to back.

use crate::command::CONTAINER;
use bytes::Bytes;

use super::util::{lower, subcommand_syntax_error, unknown_subcommand};
use super::{
    arity_error, spec, CommandSpec, Ctx, FAST, LOADING, MAY_REPLICATE, NOSCRIPT, PUBSUB, STALE,
    SUBSCRIBED_OK,
};
use crate::frame::Frame;
use crate::pubsub::Kind;

/// The pub/sub commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec(
        "subscribe",
        -2,
        PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK,
        0,
        0,
        0,
        subscribe,
    ),
    spec(
        "psubscribe",
        -2,
        PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK,
        0,
        0,
        0,
        psubscribe,
    ),
    spec(
        "ssubscribe",
        -2,
        PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK,
        1,
        -1,
        1,
        ssubscribe,
    ),
    spec(
        "unsubscribe",
        -1,
        PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK,
        0,
        0,
        0,
        unsubscribe,
    ),
    spec(
        "punsubscribe",
        -1,
        PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK,
        0,
        0,
        0,
        punsubscribe,
    ),
    spec(
        "sunsubscribe",
        -1,
        PUBSUB | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK,
        1,
        -1,
        1,
        sunsubscribe,
    ),
    spec(
        "publish",
        3,
        PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
        0,
        0,
        0,
        publish,
    ),
    spec(
        "spublish",
        3,
        PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
        1,
        1,
        1,
        spublish,
    ),
    spec(
        "pubsub",
        -2,
        PUBSUB | LOADING | STALE | CONTAINER,
        0,
        0,
        0,
        pubsub,
    ),
];

fn set_of<'c>(ctx: &'c mut Ctx<'_>, kind: Kind) -> &'c mut std::collections::HashSet<Bytes> {
    match kind {
        Kind::Channel => &mut ctx.client.channels,
        Kind::Pattern => &mut ctx.client.patterns,
        Kind::Shard => &mut ctx.client.shard_channels,
    }
}

/// The count a confirmation carries: shard subscriptions are counted on their own.
fn count(ctx: &Ctx<'_>, kind: Kind) -> i64 {
    match kind {
        Kind::Shard => ctx.client.shard_channels.len() as i64,
        _ => (ctx.client.channels.len() + ctx.client.patterns.len()) as i64,
    }
}

fn confirmation(word: &'static str, name: Option<Bytes>, n: i64) -> Frame {
    Frame::Push(vec![
        Frame::bulk(word),
        name.map_or(Frame::Null, Frame::Bulk),
        Frame::Integer(n),
    ])
}

fn subscribe_generic(ctx: &mut Ctx<'_>, args: &[Bytes], kind: Kind, word: &'static str) -> Frame {
    let mut replies = Vec::with_capacity(args.len() - 1);
    let sender = ctx.client.push.clone();
    for name in &args[1..] {
        if set_of(ctx, kind).insert(name.clone()) {
            ctx.shared.pubsub.subscribe(kind, name.clone(), &sender);
        }
        replies.push(confirmation(word, Some(name.clone()), count(ctx, kind)));
    }
    Frame::Multi(replies)
}

fn unsubscribe_generic(ctx: &mut Ctx<'_>, args: &[Bytes], kind: Kind, word: &'static str) -> Frame {
    let names: Vec<Bytes> = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        set_of(ctx, kind).iter().cloned().collect()
    };
    if names.is_empty() {
        return Frame::Multi(vec![confirmation(word, None, count(ctx, kind))]);
    }
    let id = ctx.client.handle.id;
    let mut replies = Vec::with_capacity(names.len());
    for name in names {
        if set_of(ctx, kind).remove(&name) {
            ctx.shared.pubsub.unsubscribe(kind, &name, id);
        }
        replies.push(confirmation(word, Some(name), count(ctx, kind)));
    }
    Frame::Multi(replies)
}

fn subscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    subscribe_generic(ctx, args, Kind::Channel, "subscribe")
}

fn psubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    subscribe_generic(ctx, args, Kind::Pattern, "psubscribe")
}

fn ssubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    subscribe_generic(ctx, args, Kind::Shard, "ssubscribe")
}

fn unsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    unsubscribe_generic(ctx, args, Kind::Channel, "unsubscribe")
}

fn punsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    unsubscribe_generic(ctx, args, Kind::Pattern, "punsubscribe")
}

fn sunsubscribe(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    unsubscribe_generic(ctx, args, Kind::Shard, "sunsubscribe")
}

fn publish_generic(ctx: &mut Ctx<'_>, args: &[Bytes], kind: Kind) -> Frame {
    let shared = ctx.shared;
    let limits = || {
        shared
            .config
            .limits
            .output_limit(crate::config::ClientClass::PubSub)
    };
    let n = shared
        .pubsub
        .publish(kind, &args[1], &args[2], limits, ctx.now_ms);
    Frame::Integer(n as i64)
}

fn publish(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    publish_generic(ctx, args, Kind::Channel)
}

fn spublish(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    publish_generic(ctx, args, Kind::Shard)
}

fn pubsub(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    let ps = &ctx.shared.pubsub;
    match sub.as_str() {
        "channels" | "shardchannels" if args.len() <= 3 => {
            let kind = if sub == "channels" {
                Kind::Channel
            } else {
                Kind::Shard
            };
            Frame::bulks(ps.active(kind, args.get(2).map(|p| &p[..])))
        }
        "numsub" | "shardnumsub" => {
            let kind = if sub == "numsub" {
                Kind::Channel
            } else {
                Kind::Shard
            };
            let mut out = Vec::new();
            for ch in &args[2..] {
                out.push(Frame::Bulk(ch.clone()));
                out.push(Frame::Integer(ps.numsub(kind, ch) as i64));
            }
            Frame::Array(out)
        }
        "numpat" if args.len() == 2 => Frame::Integer(ps.pattern_count() as i64),
        "channels" | "shardchannels" => subcommand_syntax_error(args, "pubsub"),
        "numpat" => arity_error("pubsub|numpat"),
        "help" if args.len() == 2 => super::util::help(
            "PUBSUB",
            &[
                "CHANNELS [<pattern>]",
                "    Return the currently active channels matching a <pattern> (default: '*').",
                "NUMPAT",
                "    Return number of subscriptions to patterns.",
                "NUMSUB [<channel> ...]",
                "    Return the number of subscribers for the specified channels, excluding",
                "    pattern subscriptions(default: no channels).",
                "SHARDCHANNELS [<pattern>]",
                "    Return the currently active shard level channels matching a <pattern> (default: '*').",
                "SHARDNUMSUB [<shardchannel> ...]",
                "    Return the number of subscribers for the specified shard level channel(s)",
            ],
        ),
        "help" => arity_error("pubsub|help"),
        _ => unknown_subcommand(args, "pubsub"),
    }
}
