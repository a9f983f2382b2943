//! Restarting a latchkey node, with or without its append-only file: the last failover
//! control, done the way an operator restarts a process.
//!
//! The old server crashes (writes it had not replicated are dropped, every connection
//! closes, the port is released) and a new server starts on the same port, in the same
//! directory, on the same clock. With `aof` it replays `appendonly.aof` and keeps appending to
//! it, as `redis-server --appendonly yes` does at start; without, it starts empty and leaves
//! the file alone, as `redis-server --appendonly no` does.

use latchkey_server::{Server, ServerHandle};

/// Crashes `node` and starts its successor, replaying its AOF when `aof` is true.
pub async fn restart(node: ServerHandle, aof: bool) -> std::io::Result<ServerHandle> {
    let shared = node.shared().clone();
    let listening = *shared.addr.lock();
    node.crash().await;
    drop(node);

    let mut builder = Server::builder().clock(shared.clock.clone());
    builder = match listening {
        Some(addr) => builder.bind(addr.ip().to_string()).port(addr.port()),
        None => builder.no_listener(),
    };
    for name in ["dir", "appendfilename", "appendfsync"] {
        if let Some(value) = shared.config.get(name) {
            builder = builder.config(name, value);
        }
    }
    builder = builder.config("appendonly", if aof { "yes" } else { "no" });
    builder.start().await
}
