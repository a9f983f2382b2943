//! One kind of acquire+release cycle, repeated, against the latchkey server in-process: for
//! instruction counts under `valgrind --tool=callgrind`, which are repeatable on a busy machine
//! where wall time is not.
//!
//! ```text
//! cargo build -p latchkey-client --target wasm32-wasip2 --release
//! cargo build -p latchkey-plugin --release --example cycle_profile
//! valgrind --tool=callgrind target/release/examples/cycle_profile wasm 10000
//! valgrind --tool=callgrind target/release/examples/cycle_profile wasm 0
//! ```
//!
//! The first argument is `wasm` (the lock inside the component) or `native` (the same lock,
//! native), the second the number of cycles. The difference between two runs that differ only
//! in the count, divided by it, is the cost of one cycle without the start-up.
//!
//! `instantiate` (pooled) and `instantiate-on-demand` instead start an instance of the
//! component and drop it, that many times: the cost of one tenant's instance, start to end.

use std::path::Path;
use std::time::Duration;

use latchkey_client::locks::SimpleLock;
use latchkey_client::native::LocalTransport;
use latchkey_plugin::{component_path, Backend, Host, HostConfig, Limits};
use latchkey_server::Server;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "wasm".into());
    let n: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let server = Server::builder().no_listener().start().await?;
    match mode.as_str() {
        "native" => {
            let lock = SimpleLock::new(LocalTransport::new(&server), "profile");
            for _ in 0..n {
                let l = lock
                    .try_acquire(Duration::from_secs(10))
                    .await?
                    .expect("free");
                lock.release(&l).await?;
            }
        }
        "wasm" | "instantiate" | "instantiate-on-demand" => {
            let release = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/wasm32-wasip2/release/latchkey_client.wasm");
            let path = if release.exists() {
                release
            } else {
                component_path()?
            };
            let host = Host::new(
                <dyn Backend>::local(&server),
                HostConfig {
                    pool_instances: if mode == "instantiate-on-demand" {
                        0
                    } else {
                        4
                    },
                    cache_dir: Some(std::env::temp_dir().join("latchkey-profile-cache")),
                    limits: Limits {
                        cpu_budget: Duration::from_secs(3600),
                        calls_per_sec: 1e12,
                        ..Limits::default()
                    },
                    ..HostConfig::default()
                },
            )?;
            let plugin = host.load(&path)?;
            if mode != "wasm" {
                let tenant = host.tenant("profile");
                for _ in 0..n {
                    drop(tenant.instantiate(&plugin).await?);
                }
                return Ok(());
            }
            let mut inst = host.tenant("profile").instantiate(&plugin).await?;
            inst.run(|(store, _, l)| {
                Box::pin(async move {
                    let locks = l.expect("lock client").latchkey_locks_locks().simple_lock();
                    let lock = locks.call_constructor(&mut *store, "profile").await?;
                    for _ in 0..n {
                        let lease = locks.call_try_acquire(&mut *store, lock, 10_000).await?;
                        let lease = lease.map_err(wasmtime::Error::msg)?.expect("free");
                        locks
                            .call_release(&mut *store, lock, &lease)
                            .await?
                            .map_err(wasmtime::Error::msg)?;
                    }
                    lock.resource_drop_async(&mut *store).await?;
                    Ok(())
                })
            })
            .await?;
        }
        other => {
            return Err(format!(
                "mode is wasm, native, instantiate or instantiate-on-demand, not {other}"
            )
            .into())
        }
    }
    Ok(())
}
