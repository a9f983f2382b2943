//! How a blocking command waits (`BLPOP`, `BLMOVE`, `BZPOPMIN`, `XREAD BLOCK`, ...): its
//! timeout argument, its place in each key's line, and the wait itself.
//!
//! A blocked client registers a notifier under each key it waits for (`db/blocked.rs` keeps the
//! lines, in the order clients blocked); a write onto one of those keys wakes the first in
//! line, which retries its command under the gate. The client leaves every line when its wait
//! ends or is abandoned, served or not.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Notify;

use super::Ctx;
use crate::frame::Frame;
use crate::state::Shared;

/// Parses a blocking timeout in seconds (fractions allowed) into milliseconds; 0 = forever.
pub(super) fn parse_timeout(arg: &[u8]) -> Result<u64, Frame> {
    let Some(secs) = super::util::parse_double(arg) else {
        return Err(Frame::error("ERR timeout is not a float or out of range"));
    };
    let ms = (secs * 1000.0).round();
    // Redis converts the milliseconds to a signed 64-bit integer: past its range the value
    // wraps negative, and Redis answers that the timeout is negative.
    if secs < 0.0 || ms >= i64::MAX as f64 {
        return Err(Frame::error("ERR timeout is negative"));
    }
    Ok(ms as u64)
}

/// Blocks the client until `attempt` serves it (`Ok(Some(reply))`) or refuses it (`Err`), or
/// `timeout_ms` passes (0: forever; the reply is then a null array). The attempt runs under
/// the gate (taken exclusively when `exclusive`: it touches two keys), at once and again each
/// time a push onto one of `keys` wakes the client; a busy script is waited for as any client
/// waits for it. Every blocking list, sorted-set and stream command waits through this.
pub(super) fn block_until<F>(
    ctx: &mut Ctx<'_>,
    keys: Vec<Bytes>,
    timeout_ms: u64,
    exclusive: bool,
    attempt: F,
) where
    F: Fn(&Shared, usize, u64) -> Result<Option<Frame>, Frame> + Send + Sync + 'static,
{
    block_until_changed(
        ctx,
        keys,
        timeout_ms,
        exclusive,
        None,
        move |shared, db, now, _| attempt(shared, db, now),
    );
}

/// [`block_until`] for a reader of a consumer group (`XREADGROUP`, `group_reader` naming
/// the group): woken by any change of the keys too, their deletion, a flush or a swap
/// included (it answers that its stream is gone), not only by what serves it; and queued
/// among the group's blocked readers of each key (see `Db::first_group_reader`). `attempt`
/// is also given the client's own notifier, which is how it asks whether its turn has come.
pub(super) fn block_until_changed<F>(
    ctx: &mut Ctx<'_>,
    keys: Vec<Bytes>,
    timeout_ms: u64,
    exclusive: bool,
    group_reader: Option<Bytes>,
    attempt: F,
) where
    F: Fn(&Shared, usize, u64, &Arc<Notify>) -> Result<Option<Frame>, Frame>
        + Send
        + Sync
        + 'static,
{
    let shared = ctx.shared.clone();
    let db_index = ctx.client.db;
    let deadline = (timeout_ms > 0).then(|| ctx.now_ms.saturating_add(timeout_ms));
    let handle = ctx.client.handle.clone();
    // One place in each key's line, however many times the command names the key
    // (`XREAD STREAMS s s`, `BLPOP k k`).
    let mut keys = keys;
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(k.clone()));
    ctx.block(async move {
        // `CLIENT UNBLOCK` from another client ends the wait, as a timeout or with an error.
        let unblockable = handle.begin_unblockable();
        let notify = Arc::new(Notify::new());
        let db = shared.keyspace.db(db_index);
        for k in &keys {
            db.block_on(k.clone(), notify.clone());
            if let Some(group) = &group_reader {
                db.watch_changes(k.clone(), group.clone(), notify.clone());
            }
        }
        let _guard = BlockGuard {
            shared: shared.clone(),
            db: db_index,
            keys: keys.clone(),
            notify: notify.clone(),
            on_any_change: group_reader.is_some(),
        };
        loop {
            let threshold = shared.config.busy_reply_threshold();
            let served = if exclusive {
                match shared.gate.exclusive(threshold).await {
                    Ok(_gate) => Some(attempt(&shared, db_index, shared.clock.now_ms(), &notify)),
                    Err(_) => None,
                }
            } else {
                match shared.gate.shared(threshold).await {
                    Ok(_gate) => Some(attempt(&shared, db_index, shared.clock.now_ms(), &notify)),
                    Err(_) => None,
                }
            };
            match served {
                Some(Ok(Some(f))) => return f,
                Some(Err(e)) => return e,
                Some(Ok(None)) => {
                    // Not served, yet a key may hold something this client cannot take (a
                    // list for a `BZPOPMIN`, say): the clients behind it get their turn. Not
                    // for a stream: an `XADD` wakes all its readers at once (`Db::signal_all`),
                    // and a stream with nothing new for one reader has nothing for the next,
                    // so passing the turn there would only walk the whole line each time.
                    let db = shared.keyspace.db(db_index);
                    for k in &keys {
                        let others_may_take = db
                            .map()
                            .get(&k[..])
                            .is_some_and(|e| !matches!(e.value, crate::value::Value::Stream(_)));
                        if others_may_take {
                            db.signal_after(k, &notify);
                        }
                    }
                }
                None => {
                    // A script is busy: wait for it like any other client would.
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            }
            let until = deadline.unwrap_or(u64::MAX);
            tokio::select! {
                _ = notify.notified() => {}
                _ = shared.clock.sleep_until_ms(until) => return Frame::NullArray,
                error = unblockable.unblocked() => return if error {
                    Frame::error(crate::client::UNBLOCKED_ERROR)
                } else {
                    Frame::NullArray
                },
            }
        }
    });
}

/// Unregisters a blocked client's notifier when its wait ends or is abandoned.
struct BlockGuard {
    shared: Arc<Shared>,
    db: usize,
    keys: Vec<Bytes>,
    notify: Arc<Notify>,
    on_any_change: bool,
}

impl Drop for BlockGuard {
    fn drop(&mut self) {
        let db = self.shared.keyspace.db(self.db);
        for k in &self.keys {
            db.unblock(k, &self.notify);
            if self.on_any_change {
                db.unwatch_changes(k, &self.notify);
            }
        }
    }
}
