//! Restarting a latchkey node, with or without its append-only file: the last failover
//! control, done the way an operator restarts a process.
//!
//! The node crashes (writes it had not replicated are dropped, every connection closes, its
//! memory is gone) and starts again on the same port, in the same directory, on the same
//! clock. With `aof` it replays `appendonly.aof` and keeps appending to it, as `redis-server
//! --appendonly yes` does at start; without, it starts empty and leaves the file alone, as
//! `redis-server --appendonly no` does. The mechanism is the server's own
//! ([`ServerHandle::restart`], the same as `LATCHKEY.FAILOVER RESTART AOF|NOAOF` over the
//! wire); this helper only gives it the shape of a process restart: the old handle in, the
//! running node out.

use latchkey_server::ServerHandle;

/// Crashes `node` and starts it again, replaying its AOF when `aof` is true.
pub async fn restart(node: ServerHandle, aof: bool) -> std::io::Result<ServerHandle> {
    node.restart(aof).await?;
    Ok(node)
}
