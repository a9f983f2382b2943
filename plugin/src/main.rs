//! `latchkey`: hosts N tenants of a lock-client component against the embedded latchkey
//! server (default) or a Redis deployment, has each take and release a lock some times, and
//! prints what each did.
//!
//! Given `--redis` several times, the host's primary backend is the first server and tenants'
//! quorum locks run on all of them; `--redlock` has the workers take a RedLock over them
//! instead of the simple lock.
//!
//! `latchkey lesson NAME` plays a lesson instead (see [`latchkey_plugin::lesson`]);
//! `latchkey run COMPONENT...` runs `wasi:keyvalue` tenants (see [`latchkey_plugin::run_cli`]).
//!
//! ```text
//! latchkey lesson unprotected --html lesson.html
//! latchkey --tenants 4 --workers 2 --cycles 5
//! latchkey --redis redis://127.0.0.1:6379 --tenants 100
//! latchkey --redlock --redis redis://127.0.0.1:7001 --redis redis://127.0.0.1:7002 --redis redis://127.0.0.1:7003
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use latchkey_plugin::{component_path, Backend, Host, HostConfig, Instance, Limits, Released};
use latchkey_server::Server;

/// Command-line options.
#[derive(Parser, Debug)]
#[command(
    name = "latchkey",
    about = "Host lock-client tenants in wasmtime and let them take locks"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Args {
    /// `latchkey lesson NAME`: how a failover loses a lock, and what each defence changes.
    #[command(subcommand)]
    command: Option<Command>,
    /// How many tenants (each in its own namespace).
    #[arg(long, default_value_t = 3)]
    tenants: u32,
    /// Instances per tenant, contending for the tenant's lock.
    #[arg(long, default_value_t = 1)]
    workers: u32,
    /// Acquire/release cycles per worker.
    #[arg(long, default_value_t = 3)]
    cycles: u32,
    /// Lock TTL in milliseconds.
    #[arg(long, default_value_t = 5_000)]
    ttl_ms: u64,
    /// A Redis server (`redis://host:port`) instead of the embedded latchkey server. Given
    /// several times: independent servers for quorum locks (RedLock), the first also serving
    /// every other lock.
    #[arg(long)]
    redis: Vec<String>,
    /// Workers take a RedLock over the `--redis` servers (or the embedded server alone)
    /// instead of the simple lock.
    #[arg(long)]
    redlock: bool,
    /// The component (default: the lock client built from this workspace).
    #[arg(long)]
    component: Option<PathBuf>,
    /// Directory to cache compiled components in.
    #[arg(long)]
    cache: Option<PathBuf>,
    /// The bounds every tenant runs under (each defaults to `Limits::default()`).
    #[command(flatten)]
    limits: LimitArgs,
}

/// Subcommands (without one, `latchkey` hosts tenants as its options say).
#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Plays a lesson: how a failover (restart, pause, eviction) loses a lock and what each
    /// defence changes; without a name, lists the lessons.
    Lesson(latchkey_plugin::lesson::cli::LessonArgs),
    /// Runs tenants written against `wasi:keyvalue` and the lease proposal (each exports
    /// `run(bucket)`), one after the other as one tenant, and prints what they say.
    Run(latchkey_plugin::run_cli::RunArgs),
}

/// Per-tenant bounds (see SECURITY.md, "Tenants"); unset ones keep their default.
#[derive(clap::Args, Debug, Default)]
struct LimitArgs {
    /// Bytes one linear memory of an instance may grow to.
    #[arg(long)]
    memory_bytes: Option<usize>,
    /// Bytes all the memories of one instance may hold together.
    #[arg(long)]
    memory_total_bytes: Option<usize>,
    /// Linear memories one instance may create.
    #[arg(long)]
    memories: Option<usize>,
    /// Tables one instance may create.
    #[arg(long)]
    tables: Option<usize>,
    /// Guest running time (ms) one call into a guest may use in all.
    #[arg(long)]
    cpu_budget_ms: Option<u64>,
    /// Guest running time (ms) a tenant may use per second of wall time.
    #[arg(long)]
    cpu_per_sec_ms: Option<u64>,
    /// Host calls per second a tenant may make, on average.
    #[arg(long)]
    calls_per_sec: Option<f64>,
    /// Bytes of command arguments per second a tenant may send, on average.
    #[arg(long)]
    bytes_per_sec: Option<f64>,
    /// Arguments one command may carry.
    #[arg(long)]
    args_per_call: Option<usize>,
    /// Bytes all the arguments of one command may carry together.
    #[arg(long)]
    bytes_per_call: Option<usize>,
    /// The longest (ms) an import may keep a guest suspended (`sleep`, `wait-message`, `WAIT`).
    #[arg(long)]
    max_block_ms: Option<u64>,
    /// The longest TTL (ms) a key written with `SET` or `PEXPIRE` may have.
    #[arg(long)]
    key_ttl_max_ms: Option<u64>,
    /// Leases the host keeps for one tenant at once.
    #[arg(long)]
    leases: Option<usize>,
    /// Bytes of a kept lease's key.
    #[arg(long)]
    lease_key_bytes: Option<usize>,
    /// Bytes of a kept lease's token.
    #[arg(long)]
    lease_token_bytes: Option<usize>,
    /// The shortest TTL (ms) the host renews.
    #[arg(long)]
    lease_ttl_min_ms: Option<u64>,
    /// The longest TTL (ms) the host renews.
    #[arg(long)]
    lease_ttl_max_ms: Option<u64>,
    /// Subscriptions one tenant holds at once.
    #[arg(long)]
    subscriptions: Option<usize>,
    /// Bytes of a channel name.
    #[arg(long)]
    channel_bytes: Option<usize>,
    /// Bytes of a published message.
    #[arg(long)]
    publish_bytes: Option<usize>,
    /// WASI random bytes one call may ask for.
    #[arg(long)]
    random_bytes_per_call: Option<u64>,
    /// WASI random bytes per second a tenant may draw, on average.
    #[arg(long)]
    random_bytes_per_sec: Option<f64>,
    /// Entries one instance may hold in its WASI resource table (streams, pollables).
    #[arg(long)]
    wasi_resources: Option<usize>,
    /// Keys that never expire (fence counters, fair queues) one tenant may create.
    #[arg(long)]
    persistent_keys: Option<usize>,
    /// `wasi:keyvalue` buckets one tenant may open.
    #[arg(long)]
    kv_buckets: Option<usize>,
    /// Keys one `wasi:keyvalue` bucket may hold.
    #[arg(long)]
    kv_entries: Option<usize>,
    /// Bytes of one `wasi:keyvalue` key.
    #[arg(long)]
    kv_key_bytes: Option<usize>,
    /// Bytes of one `wasi:keyvalue` value.
    #[arg(long)]
    kv_value_bytes: Option<usize>,
}

impl LimitArgs {
    /// The defaults with the options given applied.
    fn limits(&self) -> Limits {
        let mut l = Limits::default();
        let ms = Duration::from_millis;
        macro_rules! set {
            ($($field:ident),*) => { $(if let Some(v) = self.$field { l.$field = v; })* };
        }
        set!(
            memory_bytes,
            memory_total_bytes,
            memories,
            tables,
            calls_per_sec,
            bytes_per_sec,
            args_per_call,
            bytes_per_call,
            leases,
            lease_key_bytes,
            lease_token_bytes,
            subscriptions,
            channel_bytes,
            publish_bytes,
            random_bytes_per_call,
            random_bytes_per_sec,
            wasi_resources,
            persistent_keys,
            kv_buckets,
            kv_entries,
            kv_key_bytes,
            kv_value_bytes
        );
        let durations = [
            (self.cpu_budget_ms, &mut l.cpu_budget),
            (self.cpu_per_sec_ms, &mut l.cpu_per_sec),
            (self.max_block_ms, &mut l.max_block),
            (self.key_ttl_max_ms, &mut l.key_ttl_max),
            (self.lease_ttl_min_ms, &mut l.lease_ttl_min),
            (self.lease_ttl_max_ms, &mut l.lease_ttl_max),
        ];
        for (given, field) in durations {
            if let Some(v) = given {
                *field = ms(v);
            }
        }
        l
    }
}

/// What one worker did.
struct Report {
    tenant: u32,
    worker: u32,
    acquired: u32,
    released: u32,
    host_calls: u64,
    error: Option<String>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    if let Some(Command::Lesson(lesson)) = args.command {
        if let Err(e) = latchkey_plugin::lesson::cli::main(lesson).await {
            eprintln!("latchkey: {e}");
            std::process::exit(1);
        }
        return Ok(());
    }
    if let Some(Command::Run(run)) = args.command {
        return latchkey_plugin::run_cli::main(run).await;
    }
    // The embedded server lives as long as `_server`.
    let mut nodes = Vec::new();
    for url in &args.redis {
        nodes.push(<dyn Backend>::redis(url).await?);
    }
    let (backend, _server, target): (Arc<dyn Backend>, _, String) = match nodes.first() {
        Some(first) => (first.clone(), None, args.redis.join(", ")),
        None => {
            let server = Server::builder().no_listener().start().await?;
            (
                <dyn Backend>::local(&server),
                Some(server),
                "the embedded latchkey server".into(),
            )
        }
    };
    let host = Host::with_nodes(
        backend,
        nodes,
        HostConfig {
            pool_instances: (args.tenants * args.workers).max(1),
            cache_dir: args.cache.clone(),
            limits: args.limits.limits(),
            ..HostConfig::default()
        },
    )?;
    let path = match &args.component {
        Some(p) => p.clone(),
        None => component_path()?,
    };
    let plugin = host.load(&path)?;
    println!(
        "hosting {} tenant(s) x {} worker(s) against {target} (pooled: {}, compiled {})",
        args.tenants,
        args.workers,
        host.pooled(),
        if plugin.from_cache {
            "from cache"
        } else {
            "now"
        }
    );
    let started = Instant::now();
    let ttl = Duration::from_millis(args.ttl_ms);
    let (redlock, nodes) = (args.redlock, host.nodes());
    let mut tasks = Vec::new();
    for t in 0..args.tenants {
        let tenant = host.tenant(&format!("tenant{t}"));
        for w in 0..args.workers {
            let (tenant, plugin, cycles) = (tenant.clone(), plugin.clone(), args.cycles);
            tasks.push(tokio::spawn(async move {
                let mut r = Report {
                    tenant: t,
                    worker: w,
                    acquired: 0,
                    released: 0,
                    host_calls: 0,
                    error: None,
                };
                let mut inst = match tenant.instantiate(&plugin).await {
                    Ok(i) => i,
                    Err(e) => {
                        r.error = Some(format!("{e:#}"));
                        return r;
                    }
                };
                for _ in 0..cycles {
                    if redlock {
                        match redlock_cycle(&mut inst, ttl, nodes).await {
                            Ok((acquired, released)) => {
                                r.acquired += u32::from(acquired);
                                r.released += u32::from(released);
                            }
                            Err(e) => {
                                r.error = Some(e);
                                break;
                            }
                        }
                        continue;
                    }
                    match inst.lock_wait("demo", ttl, ttl * 4).await {
                        Ok(Ok(Some(lease))) => {
                            r.acquired += 1;
                            // A release that fails says why, rather than only not counting.
                            match inst.unlock("demo", lease).await {
                                Ok(Ok(Released::Released)) => r.released += 1,
                                Ok(Ok(other)) => r.error = Some(format!("release: {other:?}")),
                                Ok(Err(e)) => r.error = Some(format!("release: {e}")),
                                Err(e) => {
                                    r.error = Some(format!("release: {e}"));
                                    break;
                                }
                            }
                        }
                        Ok(Ok(None)) => {}
                        Ok(Err(e)) => r.error = Some(e),
                        Err(e) => {
                            r.error = Some(e.to_string());
                            break;
                        }
                    }
                }
                r.host_calls = inst.host_calls();
                r
            }));
        }
    }
    let (mut acquired, mut failed) = (0, 0);
    for task in tasks {
        let r = task.await?;
        acquired += r.acquired;
        print!(
            "tenant{} worker{}: acquired {}/{}, released {}, host calls {}",
            r.tenant, r.worker, r.acquired, args.cycles, r.released, r.host_calls
        );
        match r.error {
            Some(e) => {
                failed += 1;
                println!(", error: {e}");
            }
            None => println!(),
        }
    }
    let kind = if args.redlock {
        format!("RedLock acquisitions over {nodes} node(s)")
    } else {
        "acquisitions".into()
    };
    println!("{acquired} {kind} in {:?}", started.elapsed());
    if failed > 0 {
        return Err(format!("{failed} worker(s) failed").into());
    }
    Ok(())
}

/// One RedLock cycle of a worker: tries the RedLock `demo` until it is taken or `ttl * 4` has
/// passed (RedLock has no waiting acquisition), then releases it. Returns whether it was taken
/// and whether a majority of the `nodes` released it.
async fn redlock_cycle(
    inst: &mut Instance,
    ttl: Duration,
    nodes: usize,
) -> Result<(bool, bool), String> {
    let node_timeout = Duration::from_millis(50);
    let deadline = Instant::now() + ttl * 4;
    loop {
        match inst.try_redlock("demo", ttl, node_timeout).await {
            Ok(Ok(Some(lease))) => {
                let released = inst
                    .unlock_redlock("demo", lease, node_timeout)
                    .await
                    .map_err(|e| e.to_string())??;
                return Ok((true, released as usize > nodes / 2));
            }
            Ok(Ok(None)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok(Ok(None)) => return Ok((false, false)),
            Ok(Err(e)) => return Err(e),
            Err(e) => return Err(e.to_string()),
        }
    }
}
