//! `latchkey-server`: run the server from the command line with redis-server-like flags.
//!
//! Besides its own flags, it accepts any redis-server configuration directive as
//! `--name value ...` (as `redis-server` does), applied like `CONFIG SET`, so scripts written
//! for `redis-server --port 7000 --save '' --appendonly no` run it unchanged.

use clap::Parser;
use latchkey_server::CountingAllocator;
use latchkey_server::{Server, StopSignal};

/// Counts every allocation, so that `INFO memory`'s `used_memory` (and `maxmemory`) see the
/// whole process, as Redis's allocator count does. Only the binary installs it: the library
/// leaves the choice of allocator to whoever embeds it.
/// jemalloc's options, which it reads when the process starts: a background thread returns
/// the memory the server freed to the system as it ages (the buffers of clients gone idle, a
/// flushed keyspace), as Redis's `jemalloc-bg-thread yes`, its default, does. Without it
/// jemalloc returns memory only while it allocates, so an idle server kept what it freed.
#[cfg(feature = "jemalloc")]
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = b"background_thread:true\0";

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// An embeddable Redis-protocol server for distributed-lock testing.
#[derive(Parser, Debug)]
#[command(name = "latchkey-server", version, about)]
struct Args {
    /// TCP port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 6379)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind: String,
    /// Maximum number of connected clients.
    #[arg(long)]
    maxclients: Option<u64>,
    /// Replicate from this master: `--replicaof HOST PORT`.
    #[arg(long, num_args = 2, value_names = ["HOST", "PORT"])]
    replicaof: Option<Vec<String>>,
    /// Log level filter (tracing syntax), default `info`.
    #[arg(long, default_value = "info")]
    loglevel: String,
}

/// Flags `Args` parses itself; every other `--name value...` is a configuration directive.
const OWN_FLAGS: &[&str] = &[
    "port",
    "bind",
    "maxclients",
    "replicaof",
    "loglevel",
    "help",
    "version",
];

/// Splits the command line into the arguments for clap and the configuration directives.
fn split_args(argv: Vec<String>) -> (Vec<String>, Vec<(String, String)>) {
    let mut own = vec![argv.first().cloned().unwrap_or_default()];
    let mut directives = Vec::new();
    let mut i = 1;
    while i < argv.len() {
        let arg = &argv[i];
        let name = arg.strip_prefix("--").unwrap_or("");
        let mut j = i + 1;
        while j < argv.len() && !argv[j].starts_with("--") {
            j += 1;
        }
        if name.is_empty() || OWN_FLAGS.contains(&name) || arg == "-h" || arg == "-V" {
            own.extend(argv[i..j].iter().cloned());
        } else {
            directives.push((name.to_string(), argv[i + 1..j].join(" ")));
        }
        i = j;
    }
    (own, directives)
}

/// The signals that ask the process to stop: SIGTERM and SIGINT.
#[cfg(unix)]
struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl StopSignals {
    /// Starts catching them (from now on they no longer kill the process outright).
    fn new() -> std::io::Result<StopSignals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(StopSignals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// The next one received.
    async fn recv(&mut self) -> StopSignal {
        tokio::select! {
            _ = self.term.recv() => StopSignal::Terminate,
            _ = self.int.recv() => StopSignal::Interrupt,
        }
    }
}

/// Elsewhere, Ctrl-C only.
#[cfg(not(unix))]
struct StopSignals;

#[cfg(not(unix))]
impl StopSignals {
    fn new() -> std::io::Result<StopSignals> {
        Ok(StopSignals)
    }

    async fn recv(&mut self) -> StopSignal {
        let _ = tokio::signal::ctrl_c().await;
        StopSignal::Interrupt
    }
}

fn main() -> std::io::Result<()> {
    let (own, directives) = split_args(std::env::args().collect());
    let args = Args::parse_from(own);
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&args.loglevel))
        .with_writer(std::io::stderr)
        .init();
    let mut b = Server::builder()
        .port(args.port)
        .bind(args.bind.clone())
        .load_snapshot(true);
    // redis-server's save points when no `--save` says otherwise, as it writes and loads
    // `dir`/`dbfilename` like redis-server (an embedded server has none by default).
    b = b.config("save", "3600 1 300 100 60 10000");
    if let Some(m) = args.maxclients {
        b = b.config("maxclients", m.to_string());
    }

    for (name, value) in directives {
        b = b.config(name, value);
    }
    // `--io-threads N` (Redis's directive, 1 by default) is how many threads serve clients:
    // with one, commands from different connections run in the order they arrived, as on
    // redis-server (see `Server::runtime`).
    let rt = Server::runtime(b.io_threads())?;
    rt.block_on(async move {
        let server = b.start().await?;
        if let Some(master) = &args.replicaof {
            let port = master[1].parse::<u16>().map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad --replicaof port")
            })?;
            server.replicate_from_host(master[0].clone(), port);
        }
        tracing::info!(
            "latchkey-server {} ready to accept connections",
            env!("CARGO_PKG_VERSION")
        );
        println!("Ready to accept connections tcp on {}", server.addr());
        // SIGTERM and SIGINT run the clean shutdown `SHUTDOWN` runs (the snapshot written
        // while save points are set, the AOF fsynced), as redis-server does, then the process
        // exits 0. When that shutdown fails (the snapshot could not be written), the server
        // goes on serving and a later signal tries again, as in Redis.
        let mut signals = StopSignals::new()?;
        loop {
            let stop = tokio::select! {
                _ = server.wait_for_shutdown() => break,
                s = signals.recv() => s,
            };
            if server.stop_on_signal(stop).await {
                break;
            }
        }
        server.shutdown().await;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::split_args;

    #[test]
    fn unknown_flags_become_directives() {
        let argv = [
            "x",
            "--port",
            "7000",
            "--save",
            "",
            "--hz",
            "10",
            "--client-output-buffer-limit",
            "pubsub",
            "1mb",
            "0",
            "0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (own, dirs) = split_args(argv);
        assert_eq!(own, vec!["x", "--port", "7000"]);
        assert_eq!(
            dirs,
            vec![
                ("save".to_string(), String::new()),
                ("hz".to_string(), "10".to_string()),
                (
                    "client-output-buffer-limit".to_string(),
                    "pubsub 1mb 0 0".to_string()
                ),
            ]
        );
    }
}
