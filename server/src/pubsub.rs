//! The subscription registry: which clients listen on which channels and patterns.
//!
//! Publishing looks up the channel's subscribers, then every pattern, and hands each receiver a
//! push message through its connection's queue. A subscriber that stops reading lets its queue
//! grow; past Redis's `client-output-buffer-limit pubsub` (32 MiB hard, or 8 MiB for 60 s) it is
//! disconnected, so one slow reader cannot exhaust the server's memory (see [`crate::outbuf`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use dashmap::DashMap;
use parking_lot::RwLock;

use crate::client::{Client, PushSender};
use crate::db::KeyHasher;
use crate::frame::Frame;

type Subscribers = HashMap<u64, PushSender>;

/// Channel, pattern and shard-channel subscriptions of every client.
#[derive(Debug, Default)]
pub(crate) struct PubSub {
    channels: DashMap<Bytes, Subscribers, KeyHasher>,
    patterns: RwLock<HashMap<Bytes, Subscribers>>,
    shard_channels: DashMap<Bytes, Subscribers, KeyHasher>,
    /// How many subscriptions (a client and a name) each space holds, indexed by
    /// [`Kind::index`]: a `PUBLISH` finds a space with none empty by one load, where looking
    /// takes a lock (two atomic read-modify-writes, a few percent of a `PUBLISH`'s CPU). Moved
    /// after the map changed, so a publisher that reads zero runs before the subscription
    /// was complete (and before its client had the reply).
    subscriptions: [AtomicUsize; 3],
}

/// Which of the three subscription spaces a command works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `SUBSCRIBE` / `PUBLISH`.
    Channel,
    /// `PSUBSCRIBE`.
    Pattern,
    /// `SSUBSCRIBE` / `SPUBLISH`.
    Shard,
}

/// Output-buffer limits for pub/sub clients (`client-output-buffer-limit pubsub`).
pub(crate) type BufferLimits = crate::config::BufferLimit;

impl Kind {
    /// This space's slot in [`PubSub::subscriptions`].
    fn index(self) -> usize {
        match self {
            Kind::Channel => 0,
            Kind::Pattern => 1,
            Kind::Shard => 2,
        }
    }
}

impl PubSub {
    /// Whether the space holds any subscription (see [`PubSub::subscriptions`]).
    fn any(&self, kind: Kind) -> bool {
        self.subscriptions[kind.index()].load(Ordering::Acquire) > 0
    }

    fn map(&self, kind: Kind) -> &DashMap<Bytes, Subscribers, KeyHasher> {
        match kind {
            Kind::Shard => &self.shard_channels,
            _ => &self.channels,
        }
    }

    /// Adds a subscription; returns false if the client already had it.
    pub(crate) fn subscribe(&self, kind: Kind, name: Bytes, sender: &PushSender) -> bool {
        let id = sender.handle.id;
        let added = match kind {
            Kind::Pattern => self
                .patterns
                .write()
                .entry(name)
                .or_default()
                .insert(id, sender.clone())
                .is_none(),
            _ => self
                .map(kind)
                .entry(name)
                .or_default()
                .insert(id, sender.clone())
                .is_none(),
        };
        if added {
            self.subscriptions[kind.index()].fetch_add(1, Ordering::Release);
        }
        added
    }

    /// Removes a subscription; returns whether there was one.
    pub(crate) fn unsubscribe(&self, kind: Kind, name: &[u8], client_id: u64) -> bool {
        let removed = match kind {
            Kind::Pattern => {
                let mut p = self.patterns.write();
                let Some(subs) = p.get_mut(name) else {
                    return false;
                };
                let removed = subs.remove(&client_id).is_some();
                if subs.is_empty() {
                    p.remove(name);
                }
                removed
            }
            _ => {
                let map = self.map(kind);
                let removed = map
                    .get_mut(name)
                    .is_some_and(|mut s| s.remove(&client_id).is_some());
                map.remove_if(name, |_, s| s.is_empty());
                removed
            }
        };
        if removed {
            self.subscriptions[kind.index()].fetch_sub(1, Ordering::Release);
        }
        removed
    }

    /// Delivers a message; returns how many clients received it (a client subscribed to the
    /// channel and to a matching pattern counts twice, as in Redis).
    pub(crate) fn publish(
        &self,
        kind: Kind,
        channel: &Bytes,
        message: &Bytes,
        limits: impl Fn() -> BufferLimits,
        now_ms: u64,
    ) -> usize {
        let mut n = 0;
        let word = if kind == Kind::Shard {
            "smessage"
        } else {
            "message"
        };
        let subscribed = if self.any(kind) {
            self.map(kind).get(channel)
        } else {
            None
        };
        if let Some(subs) = subscribed {
            let frame = Frame::Push(vec![
                Frame::bulk(word),
                Frame::Bulk(channel.clone()),
                Frame::Bulk(message.clone()),
            ]);
            let size = approx_size(&frame);
            for s in subs.values() {
                if deliver(s, frame.clone(), size, &limits, now_ms) {
                    n += 1;
                }
            }
        }
        if kind == Kind::Channel && self.any(Kind::Pattern) {
            let patterns = self.patterns.read();
            for (pattern, subs) in patterns.iter() {
                if !crate::glob::matches(pattern, channel, false) {
                    continue;
                }
                let frame = Frame::Push(vec![
                    Frame::bulk("pmessage"),
                    Frame::Bulk(pattern.clone()),
                    Frame::Bulk(channel.clone()),
                    Frame::Bulk(message.clone()),
                ]);
                let size = approx_size(&frame);
                for s in subs.values() {
                    if deliver(s, frame.clone(), size, &limits, now_ms) {
                        n += 1;
                    }
                }
            }
        }
        n
    }

    /// Active channels (or shard channels) matching an optional pattern.
    pub(crate) fn active(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.map(kind)
            .iter()
            .filter(|e| pattern.is_none_or(|p| crate::glob::matches(p, e.key(), false)))
            .map(|e| e.key().clone())
            .collect()
    }

    /// Number of subscribers of a channel (or shard channel).
    pub(crate) fn numsub(&self, kind: Kind, channel: &[u8]) -> usize {
        self.map(kind).get(channel).map_or(0, |s| s.len())
    }

    /// Number of channels with at least one subscriber.
    pub(crate) fn channel_count(&self) -> usize {
        self.channels.len()
    }

    /// Number of patterns with at least one subscriber.
    pub(crate) fn pattern_count(&self) -> usize {
        self.patterns.read().len()
    }

    /// The channels (plain and shard) and the patterns client `id` is subscribed to: what
    /// `ACL SETUSER` checks when it takes channels from a user (a walk of every
    /// subscription, as rare as that is).
    pub(crate) fn subscriptions_of(&self, id: u64) -> (Vec<Bytes>, Vec<Bytes>) {
        let mut channels: Vec<Bytes> = Vec::new();
        for map in [&self.channels, &self.shard_channels] {
            channels.extend(
                map.iter()
                    .filter(|e| e.value().contains_key(&id))
                    .map(|e| e.key().clone()),
            );
        }
        let patterns = self
            .patterns
            .read()
            .iter()
            .filter(|(_, subs)| subs.contains_key(&id))
            .map(|(p, _)| p.clone())
            .collect();
        (channels, patterns)
    }

    /// Drops every subscription of a departing client.
    pub(crate) fn remove_client(&self, client: &Client) {
        let id = client.handle.id;
        for c in &client.channels {
            self.unsubscribe(Kind::Channel, c, id);
        }
        for p in &client.patterns {
            self.unsubscribe(Kind::Pattern, p, id);
        }
        for s in &client.shard_channels {
            self.unsubscribe(Kind::Shard, s, id);
        }
    }
}

/// Queues one message and disconnects the receiver if it is over its output-buffer limit.
/// Returns whether the message was queued (a client being disconnected gets nothing).
fn deliver(
    to: &PushSender,
    frame: Frame,
    size: usize,
    limits: &impl Fn() -> BufferLimits,
    now_ms: u64,
) -> bool {
    if to.handle.is_killed() {
        return false;
    }
    let queued = to.send(frame, size);
    // Limits are only looked up once a client has a sizeable backlog.
    if queued < (1 << 20) {
        to.handle.soft_limit_since.store(0, Ordering::Relaxed);
        return true;
    }
    crate::outbuf::enforce(&to.handle, queued, limits(), now_ms);
    true
}

/// Roughly how many bytes a push message occupies in an output buffer, for the
/// `client-output-buffer-limit pubsub` accounting.
pub(crate) fn approx_size(f: &Frame) -> usize {
    match f {
        Frame::Bulk(b) | Frame::Simple(b) | Frame::Error(b) | Frame::Verbatim(b) => b.len() + 16,
        Frame::Raw(b) => b.len(),
        Frame::Array(v) | Frame::Push(v) | Frame::Set(v) | Frame::Multi(v) => {
            16 + v.iter().map(approx_size).sum::<usize>()
        }
        Frame::Map(v) => {
            16 + v
                .iter()
                .map(|(a, b)| approx_size(a) + approx_size(b))
                .sum::<usize>()
        }
        _ => 16,
    }
}
