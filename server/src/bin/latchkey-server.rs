//! `latchkey-server`: run the server from the command line with redis-server-like flags.

use clap::Parser;
use latchkey_server::Server;

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
    /// Any other redis-server parameter, as `--name value` pairs are not all known here:
    /// pass them as `--config name=value`.
    #[arg(long = "config", value_name = "NAME=VALUE")]
    config: Vec<String>,
    /// Accepted for compatibility with redis-server scripts (latchkey does not write RDB).
    #[arg(long)]
    save: Option<String>,
    /// `yes` to enable the append-only file.
    #[arg(long)]
    appendonly: Option<String>,
    /// Log level filter (tracing syntax), default `info`.
    #[arg(long, default_value = "info")]
    loglevel: String,
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&args.loglevel))
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut b = Server::builder().port(args.port).bind(args.bind.clone());
        if let Some(m) = args.maxclients {
            b = b.config("maxclients", m.to_string());
        }
        if let Some(a) = &args.appendonly {
            b = b.config("appendonly", a.clone());
        }
        if args.replicaof.is_some() {
            tracing::warn!("--replicaof is not supported yet; starting as a master");
        }
        for kv in &args.config {
            let Some((k, v)) = kv.split_once('=') else {
                eprintln!("--config expects NAME=VALUE, got {kv}");
                std::process::exit(2);
            };
            b = b.config(k, v);
        }
        let server = b.start().await?;
        tracing::info!(
            "latchkey-server {} ready to accept connections",
            env!("CARGO_PKG_VERSION")
        );
        println!("Ready to accept connections tcp on {}", server.addr());
        tokio::select! {
            _ = server.wait_for_shutdown() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        server.shutdown().await;
        Ok(())
    })
}
