//! Client output buffer limits (`client-output-buffer-limit`): a client that does not read
//! what the server sends it must not make the server hold that data without end.
//!
//! Each client belongs to a class: `normal`, `pubsub` (it has subscriptions) or `replica`
//! (it receives the replication stream). A class has a hard limit, past which the client is
//! disconnected at once, and a soft limit it may stay above for at most `soft_seconds`
//! (Redis's defaults: none for `normal`, `32mb 8mb 60` for `pubsub`, `256mb 64mb 60` for
//! `replica`). The pending bytes are the client's queued push messages (pub/sub messages, the
//! replication stream) plus the replies not yet written to its socket. Publishing and feeding
//! the stream check at once; a connection whose writes are stuck also checks while it waits,
//! so that a client which stops reading is cut off even when nothing new is queued for it.

use std::sync::atomic::Ordering;

use crate::client::ClientHandle;
use crate::config::BufferLimit;

/// Checks `pending` bytes of the client against its class's limit, and disconnects it (kills
/// its connection) when it is over the hard limit, or over the soft limit for longer than
/// allowed. Returns whether it did.
pub(crate) fn enforce(
    handle: &ClientHandle,
    pending: usize,
    limit: BufferLimit,
    now_ms: u64,
) -> bool {
    let pending = pending as u64;
    if limit.hard > 0 && pending > limit.hard {
        tracing::warn!(
            client = handle.id,
            pending,
            "client over its hard output-buffer limit: disconnecting"
        );
        handle.kill();
        return true;
    }
    if limit.soft > 0 && pending > limit.soft {
        let since = handle.soft_limit_since.load(Ordering::Relaxed);
        if since == 0 {
            handle
                .soft_limit_since
                .store(now_ms.max(1), Ordering::Relaxed);
        } else if now_ms.saturating_sub(since) >= limit.soft_seconds * 1000 {
            tracing::warn!(
                client = handle.id,
                pending,
                "client over its soft output-buffer limit for too long: disconnecting"
            );
            handle.kill();
            return true;
        }
    } else {
        handle.soft_limit_since.store(0, Ordering::Relaxed);
    }
    false
}
