//! One tokio runtime per process for the targets that run a server in-process, with its clock
//! paused: timers fire as soon as every task is idle, so a command that blocks (`BLPOP 0`,
//! `WAIT`, `DEBUG SLEEP`) is cancelled by a timeout at once instead of in real time.

use std::future::Future;
use std::time::Duration;

use crate::{Server, ServerHandle};

thread_local! {
    static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a tokio runtime");
}

/// Runs `f` to completion on the paused runtime.
pub fn block_on<F: Future>(f: F) -> F::Output {
    RT.with(|rt| rt.block_on(f))
}

/// How long (in paused, virtual time) one command may take before it counts as blocked and
/// is cancelled, as if its client had disconnected.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// A fresh in-process server: no listener, a virtual clock.
pub async fn server() -> ServerHandle {
    Server::builder()
        .no_listener()
        .virtual_clock()
        .start()
        .await
        .expect("an in-process server")
}

/// Commands a fuzz input may not run, and why. Everything else in the command table is fair
/// game, with arbitrary arguments.
pub fn forbidden(name: &[u8]) -> bool {
    const NO: &[&str] = &[
        // Stops the server: that is its job, not a bug.
        "shutdown",
        // Connects to whatever address the arguments name: fuzzing must never send traffic
        // off this machine, and a link to nowhere only retries.
        "replicaof",
        "slaveof",
        // CRASH and RESTART drop the whole node by design.
        "latchkey.failover",
        // Turn the fuzzing client into a replica's link, streaming without end.
        "sync",
        "psync",
        // Adds ten million elements by design: seconds of work per call, which the fuzzer
        // would report as a hang.
        "pfselftest",
    ];
    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
    NO.contains(&name.as_str())
}

/// `CONFIG SET` of a parameter that touches the filesystem or the network (`dir`,
/// `appendonly`, `dbfilename`, `bind`, `port`, ...): a fuzz run must not write files where it
/// runs or open ports.
pub fn forbidden_config(args: &[Vec<u8>]) -> bool {
    if args.len() < 2 || !args[0].eq_ignore_ascii_case(b"config") {
        return false;
    }
    if !(args[1].eq_ignore_ascii_case(b"set") || args[1].eq_ignore_ascii_case(b"rewrite")) {
        return false;
    }
    args[2..].iter().any(|a| {
        let a = String::from_utf8_lossy(a).to_ascii_lowercase();
        [
            "dir", "append", "file", "bind", "port", "log", "save", "pid",
        ]
        .iter()
        .any(|w| a.contains(w))
    })
}
