//! The `latchkey run` subcommand: runs tenants written against `wasi:keyvalue` and the
//! `latchkey:lease` proposal (see `docs/TENANTS.md`), one after the other, as one tenant.
//!
//! Each component must export `run: func(bucket: string) -> list<string>`; its lines are
//! printed as they come back. The components share the tenant's namespace, so a second one sees
//! what the first left in the bucket (that is how the walkthrough shows a Rust tenant and a
//! JavaScript tenant working on the same data).

use std::path::PathBuf;

use latchkey_server::Server;

use crate::{Backend, Host, HostConfig};

/// `latchkey run [OPTIONS] COMPONENT...`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The components to run, in this order (each a `.wasm` exporting `run`).
    #[arg(required = true)]
    pub components: Vec<PathBuf>,
    /// The bucket each component is given.
    #[arg(long, default_value = "main")]
    pub bucket: String,
    /// The tenant the components run as (its name is their namespace on the server).
    #[arg(long, default_value = "me")]
    pub tenant: String,
    /// A Redis server (`redis://host:port`) instead of the embedded latchkey server.
    #[arg(long)]
    pub redis: Option<String>,
    /// Directory to cache compiled components in (a large component compiles in seconds).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Accept a component importing interfaces the host does not serve; calling one traps.
    /// JavaScript components made by `componentize-js` need it (they import `wasi:http`).
    #[arg(long)]
    pub trap_unknown_imports: bool,
}

/// Runs the subcommand: each component's `run`, its lines on stdout, prefixed by the
/// component's file name.
pub async fn main(args: RunArgs) -> Result<(), Box<dyn std::error::Error>> {
    // The embedded server lives as long as `_server`.
    let (backend, _server) = match &args.redis {
        Some(url) => (<dyn Backend>::redis(url).await?, None),
        None => {
            let server = Server::builder().no_listener().start().await?;
            (<dyn Backend>::local(&server), Some(server))
        }
    };
    let host = Host::new(
        backend,
        HostConfig {
            pool_instances: 1,
            cache_dir: args.cache.clone(),
            trap_unknown_imports: args.trap_unknown_imports,
            ..HostConfig::default()
        },
    )?;
    let tenant = host.tenant(&args.tenant);
    for path in &args.components {
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        let plugin = host.load(path).map_err(|e| {
            let hint = if args.trap_unknown_imports {
                ""
            } else {
                " (if it imports interfaces it never calls, try --trap-unknown-imports)"
            };
            format!("{name}: cannot be loaded: {e:#}{hint}")
        })?;
        let mut inst = tenant.instantiate(&plugin).await?;
        let (lines,) = inst
            .call::<(String,), (Vec<String>,)>("run", (args.bucket.clone(),))
            .await
            .map_err(|e| format!("{name}: run failed: {e}"))?;
        for line in lines {
            println!("{name}: {line}");
        }
    }
    Ok(())
}
