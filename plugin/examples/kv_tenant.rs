//! Runs a tenant written against plain `wasi:keyvalue` on the latchkey host, over the embedded
//! server: the steps of `plugin/KEYVALUE.md` ("Writing a tenant"), as a program.
//!
//! ```text
//! cargo run -p latchkey-plugin --example kv_tenant                 # builds plugin/kv-guest
//! cargo run -p latchkey-plugin --example kv_tenant -- my_tenant.wasm
//! ```
//!
//! A component given on the command line must export `transcript: func(bucket: string) ->
//! list<string>`, as `plugin/kv-guest` does.

use std::path::PathBuf;

use latchkey_plugin::{guest::kv_guest_path, Backend, Host, HostConfig};
use latchkey_server::Server;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = match std::env::args_os().nth(1) {
        Some(p) => PathBuf::from(p),
        None => kv_guest_path()?,
    };
    // The server in-process; `<dyn Backend>::redis("redis://...")` would use a Redis instead.
    let server = Server::builder().no_listener().start().await?;
    let host = Host::new(<dyn Backend>::local(&server), HostConfig::default())?;
    let plugin = host.load(&path)?;
    let mut tenant = host.tenant("me").instantiate(&plugin).await?;
    let (lines,) = tenant
        .call::<(String,), (Vec<String>,)>("transcript", ("main".into(),))
        .await?;
    for line in lines {
        println!("{line}");
    }
    Ok(())
}
