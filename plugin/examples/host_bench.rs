//! Numbers for the host: component size, compile time cold and from the disk cache,
//! instantiation per tenant with and without the pool (1000 instances alive at once, twice: the
//! row is the second round, which reuses the pool's slots as a long-running host does, and the
//! first round is shown beside it), memory per live tenant, the host path of
//! one command, and an acquire+release cycle inside wasm against the native client over the
//! same server, for three servers: latchkey in-process, latchkey over TCP, and a real
//! `redis-server` (spawned on a free port, persistence off) over TCP. Then many tenants at
//! once (`BENCH_TENANTS`, default 10 000): instantiated together, each doing one lock cycle
//! (time and memory), and each keeping one lease that the host's keeper renews every ttl/3
//! (renewals per second, the process's CPU, and how late renewals come, measured from the
//! server's `expire` keyspace events); and how long an embedded server takes to answer its
//! first command.
//!
//! ```text
//! cargo build -p latchkey-client --target wasm32-wasip2 --release
//! cargo run -p latchkey-plugin --release --example host_bench [component.wasm]
//! ```
//!
//! `BENCH_CYCLES` (default 20 000) sets the in-process cycles per run, `BENCH_TCP_CYCLES`
//! (default 2 000) the TCP ones, `BENCH_REPS` (default 5) the runs whose median is printed.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use latchkey_client::locks::SimpleLock;
use latchkey_client::native::{LocalTransport, RedisTransport};
use latchkey_client::Transport;
use latchkey_plugin::{component_path, Backend, Host, HostConfig, Instance, Limits};
use latchkey_server::{Server, ServerHandle};

const TENANTS: u32 = 1_000;

/// The TTL of each kept lease in the many-tenants run: renewed every second.
const KEPT_TTL_MS: u64 = 3_000;

/// Resident memory of this process, in bytes (Linux).
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// The `expire` events seen: the key each names, and when it arrived.
type Events = std::sync::Arc<std::sync::Mutex<Vec<(Vec<u8>, Instant)>>>;

/// CPU time this process has used (user + system), from `/proc/self/stat` (Linux; clock
/// ticks of 10 ms).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// The kernel's limit on the memory areas one process maps (`vm.max_map_count`), as text.
fn max_map_count() -> String {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// `n` tenants at once against an embedded server: each instantiated and doing one lock
/// cycle, then each keeping one lease renewed by the host. Prints time, memory, renewals per
/// second, CPU and renewal lateness.
async fn many_tenants(
    server: &ServerHandle,
    path: &Path,
    config: &dyn Fn(u32) -> HostConfig,
    n: u32,
) -> Result<(), Box<dyn std::error::Error>> {
    let host = Host::new(<dyn Backend>::local(server), config(n))?;
    let plugin = host.load(path)?;
    let before = rss();
    let t = Instant::now();
    let mut live = Vec::with_capacity(n as usize);
    for i in 0..n {
        let mut inst = match host.tenant(&format!("m{i}")).instantiate(&plugin).await {
            Ok(inst) => inst,
            Err(e) => {
                // Say where the machine ran out, and measure the tenants that did start. The
                // usual limit is the kernel's count of memory areas a process may map: each
                // tenant maps a few (its memory, table and stack slots, each beside a guard).
                let maps = std::fs::read_to_string("/proc/self/maps")
                    .map(|m| m.lines().count())
                    .unwrap_or(0);
                println!(
                    "{n} tenants at once       instantiation {i} failed: {e:#} ({maps} areas \
                     mapped, vm.max_map_count {})",
                    max_map_count()
                );
                break;
            }
        };
        let lease = inst
            .try_lock("x", Duration::from_secs(60))
            .await?
            .map_err(|e| e.to_string())?
            .expect("free");
        inst.unlock("x", lease).await?.map_err(|e| e.to_string())?;
        live.push(inst);
    }
    let took = t.elapsed();
    let grown = rss().saturating_sub(before);
    let n = u32::try_from(live.len()).unwrap_or(u32::MAX);
    println!(
        "{n} tenants at once       {took:.2?} to instantiate each and run a lock cycle \
         ({} per tenant), {:.0} MiB resident for all ({:.1} KiB each), pooled: {}, \
         vm.max_map_count {}",
        per(took, n),
        grown as f64 / (1 << 20) as f64,
        grown as f64 / 1024.0 / f64::from(n),
        host.pooled(),
        max_map_count()
    );

    // Each tenant now keeps one lease (a watched lock, TTL 3 s, renewed every second by the
    // host). The server announces each renewal's PEXPIRE, and the acquisition's SET ... PX,
    // as an `expire` event naming the key: the time between two events of one key, less
    // ttl/3, is how late that renewal came.
    let reply = LocalTransport::new(server)
        .command(
            ["CONFIG", "SET", "notify-keyspace-events", "Eg"]
                .map(|a| a.as_bytes().to_vec())
                .to_vec(),
        )
        .await?;
    assert_eq!(
        reply,
        latchkey_client::Reply::Status("OK".into()),
        "keyspace events on"
    );
    let client = redis::Client::open(server.url())?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe("__keyevent@0__:expire").await?;
    let seen: Events = Default::default();
    let collector = {
        let seen = seen.clone();
        tokio::spawn(async move {
            use futures_util::StreamExt;
            let mut messages = pubsub.on_message();
            while let Some(m) = messages.next().await {
                let key: Vec<u8> = m.get_payload().unwrap_or_default();
                seen.lock().unwrap().push((key, Instant::now()));
            }
        })
    };
    for inst in &mut live {
        inst.run(|(store, _, l)| {
            Box::pin(async move {
                let w = l
                    .expect("lock client")
                    .latchkey_locks_watchdog()
                    .watched_lock();
                let lock = w.call_constructor(&mut *store, "kept").await?;
                let took = w.call_acquire(&mut *store, lock, KEPT_TTL_MS).await?;
                assert!(took.map_err(wasmtime::Error::msg)?, "the lock is free");
                Ok(())
            })
        })
        .await?;
    }
    let kept: usize = live.iter().map(|i| i.kept_leases()).sum();
    // Settle, then measure a 10 s window.
    tokio::time::sleep(Duration::from_millis(KEPT_TTL_MS)).await;
    let (cpu0, t0, seen0) = (cpu_time(), Instant::now(), seen.lock().unwrap().len());
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (cpu, wall) = (cpu_time() - cpu0, t0.elapsed());
    let events = seen.lock().unwrap().len() - seen0;
    collector.abort();
    let mut last: std::collections::HashMap<Vec<u8>, Instant> = Default::default();
    let mut late = Vec::new();
    let period = Duration::from_millis(KEPT_TTL_MS / 3);
    for (key, at) in seen.lock().unwrap().iter() {
        if let Some(prev) = last.insert(key.clone(), *at) {
            late.push(at.saturating_duration_since(prev).saturating_sub(period));
        }
    }
    late.sort();
    let q = |p: f64| late[((late.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{kept} kept leases         {:.0} renewals/s (ttl {KEPT_TTL_MS} ms: {:.0}/s due); \
         process CPU {:.0} % of a core (server, keeper and tenants together); renewal \
         lateness p50 {:?}, p99 {:?}, max {:?} ({} renewals)",
        events as f64 / wall.as_secs_f64(),
        kept as f64 * 1000.0 / (KEPT_TTL_MS / 3) as f64,
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64(),
        q(0.5),
        q(0.99),
        late.last().copied().unwrap_or_default(),
        late.len()
    );
    drop(live);
    Ok(())
}

/// The release component when it was built, else whatever [`component_path`] finds.
fn component() -> PathBuf {
    if let Some(p) = std::env::args().nth(1) {
        return p.into();
    }
    let release = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/wasm32-wasip2/release/latchkey_client.wasm");
    if release.exists() {
        return release;
    }
    component_path().expect("the latchkey-client component")
}

/// A number from the environment, or `default`.
fn env_or<N: std::str::FromStr>(name: &str, default: N) -> N {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A real `redis-server` on a free port, persistence off, killed on drop.
struct RedisServer {
    child: Child,
    url: String,
}

impl RedisServer {
    fn spawn() -> Result<RedisServer, Box<dyn std::error::Error>> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let server = RedisServer {
            child,
            url: format!("redis://127.0.0.1:{port}"),
        };
        // Ready once it accepts a connection.
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("redis-server did not start".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(server)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` acquire+release cycles of the native `SimpleLock`.
async fn native_cycles<T: Transport + Clone>(
    lock: &SimpleLock<T>,
    n: u32,
) -> Result<Duration, Box<dyn std::error::Error>> {
    let ttl = Duration::from_secs(10);
    let t = Instant::now();
    for _ in 0..n {
        let l = lock.try_acquire(ttl).await?.expect("free");
        lock.release(&l).await?;
    }
    Ok(t.elapsed())
}

/// `n` acquire+release cycles of the same lock inside the component (one resource, two
/// guest calls per cycle).
async fn wasm_cycles(inst: &mut Instance, n: u32) -> Result<Duration, Box<dyn std::error::Error>> {
    let d = inst
        .run(|(store, _, l)| {
            Box::pin(async move {
                let locks = l.expect("lock client").latchkey_locks_locks().simple_lock();
                let lock = locks.call_constructor(&mut *store, "bench-wasm").await?;
                let t = Instant::now();
                for _ in 0..n {
                    let lease = locks.call_try_acquire(&mut *store, lock, 10_000).await?;
                    let lease = lease.map_err(wasmtime::Error::msg)?.expect("free");
                    locks
                        .call_release(&mut *store, lock, &lease)
                        .await?
                        .map_err(wasmtime::Error::msg)?;
                }
                let d = t.elapsed();
                lock.resource_drop_async(&mut *store).await?;
                Ok(d)
            })
        })
        .await?;
    Ok(d)
}

/// Native and wasm cycle times against one server: a warm-up of a tenth of `n` each, then
/// `reps` alternating runs of `n` cycles each; the medians.
async fn compare<T: Transport + Clone>(
    native: T,
    inst: &mut Instance,
    n: u32,
    reps: usize,
) -> Result<(Duration, Duration), Box<dyn std::error::Error>> {
    let lock = SimpleLock::new(native, "bench-native");
    native_cycles(&lock, n / 10).await?;
    wasm_cycles(inst, n / 10).await?;
    let (mut native_d, mut wasm_d) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        native_d.push(native_cycles(&lock, n).await?);
        wasm_d.push(wasm_cycles(inst, n).await?);
    }
    native_d.sort();
    wasm_d.sort();
    Ok((native_d[reps / 2], wasm_d[reps / 2]))
}

/// One line of the cycle table.
fn print_row(server: &str, n: u32, (native, wasm): (Duration, Duration)) {
    println!(
        "  {server:<18} native {:>10}   wasm {:>10}   wasm/native {:.3}   ({n} cycles)",
        per(native, n),
        per(wasm, n),
        wasm.as_secs_f64() / native.as_secs_f64()
    );
}

fn per(d: Duration, n: u32) -> String {
    format!("{:.2} µs", d.as_secs_f64() * 1e6 / n as f64)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Lock cycles per measurement (`BENCH_CYCLES`, default 20 000).
    let cycles: u32 = std::env::var("BENCH_CYCLES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(20_000);
    let path = component();
    let server = Server::builder().no_listener().start().await?;
    let cache = std::env::temp_dir().join(format!("latchkey-bench-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let config = |pool: u32| HostConfig {
        pool_instances: pool,
        cache_dir: Some(cache.clone()),
        // The bench's own loops call the guest many times within one `run`, whose CPU budget
        // counts from its start, and faster than the default rate limit (100 000 host calls a
        // second per tenant): lift both, this measures the host, not its policy.
        limits: Limits {
            cpu_budget: Duration::from_secs(3600),
            calls_per_sec: 1e12,
            ..Limits::default()
        },
        ..HostConfig::default()
    };

    let host = Host::new(<dyn Backend>::local(&server), config(TENANTS))?;
    let t = Instant::now();
    let plugin = host.load(&path)?;
    let cold = t.elapsed();
    let t = Instant::now();
    let cached = host.load(&path)?;
    let warm = t.elapsed();
    assert!(!plugin.from_cache && cached.from_cache);
    println!(
        "component                 {} ({} bytes)",
        // The file's name only: the report goes into the repository.
        path.file_name().unwrap_or_default().to_string_lossy(),
        plugin.size
    );
    println!("compile, cold             {cold:?}");
    println!("load from the disk cache  {warm:?}");
    println!("pooling allocator         {}", host.pooled());

    // Instantiation, and memory per live tenant (each has made one call). Each host runs two
    // rounds of TENANTS instances alive at once: the first takes every slot of the pool (and
    // the process's heap) for the first time, the second reuses them, as a long-running host
    // does; the second is the row, the first is shown beside it.
    let mut pooled = [Duration::ZERO; 2];
    for (round, took) in pooled.iter_mut().enumerate() {
        let before = rss();
        let mut live = Vec::new();
        for i in 0..TENANTS {
            let tenant = host.tenant(&format!("t{i}"));
            let t = Instant::now();
            let mut inst = tenant.instantiate(&plugin).await?;
            *took += t.elapsed();
            inst.try_lock("x", Duration::from_secs(60))
                .await?
                .map_err(|e| e.to_string())?;
            live.push(inst);
        }
        if round == 0 {
            let grown = rss().saturating_sub(before);
            println!(
                "memory per live tenant    {:.1} KiB ({TENANTS} tenants, resident)",
                grown as f64 / 1024.0 / TENANTS as f64
            );
        }
        drop(live);
    }
    println!(
        "instantiate, pooled       {} per tenant (slots reused; first use of a slot {})",
        per(pooled[1], TENANTS),
        per(pooled[0], TENANTS)
    );

    let od_host = Host::new(<dyn Backend>::local(&server), config(0))?;
    let od_plugin = od_host.load(&path)?;
    let mut on_demand = [Duration::ZERO; 2];
    for took in &mut on_demand {
        let mut live = Vec::new();
        let t = Instant::now();
        for i in 0..TENANTS {
            live.push(
                od_host
                    .tenant(&format!("o{i}"))
                    .instantiate(&od_plugin)
                    .await?,
            );
        }
        *took = t.elapsed();
        drop(live);
    }
    println!(
        "instantiate, on demand    {} per tenant (first round {})",
        per(on_demand[1], TENANTS),
        per(on_demand[0], TENANTS)
    );

    // One acquire+release cycle, native vs inside wasm, against each of three servers.
    let reps: usize = env_or("BENCH_REPS", 5);
    let tcp_cycles: u32 = env_or("BENCH_TCP_CYCLES", 2_000);
    let native = LocalTransport::new(&server);
    let mut inst = host.tenant("bench").instantiate(&plugin).await?;
    let calls_before = inst.host_calls();
    let in_process = compare(native.clone(), &mut inst, cycles, reps).await?;
    let per_cycle = (inst.host_calls() - calls_before) as f64
        / (cycles as f64 * reps as f64 + (cycles / 10) as f64);

    // The latchkey server over a real socket, on a runtime of its own (as a separate server
    // process would be), and a real redis-server: both reached through redis-rs, natively and
    // from the host's backend.
    // (Its runtime is started and dropped off this one's thread: tokio forbids both inside.)
    let tcp_server = std::thread::spawn(|| Server::builder().start_blocking())
        .join()
        .expect("server thread")?;
    let latchkey_url = format!("redis://{}", tcp_server.addr());
    let redis = RedisServer::spawn()?;
    let mut tcp = Vec::new();
    for (label, url) in [
        ("latchkey, TCP", &latchkey_url),
        ("redis-server, TCP", &redis.url),
    ] {
        let backend = <dyn Backend>::redis(url).await?;
        let tcp_host = Host::new(backend, config(4))?;
        let tcp_plugin = tcp_host.load(&path)?;
        let mut inst = tcp_host.tenant("bench").instantiate(&tcp_plugin).await?;
        let native = RedisTransport::connect(url).await?;
        tcp.push((label, compare(native, &mut inst, tcp_cycles, reps).await?));
    }

    // What a call costs by itself: into the guest and straight back (a `held()` of a watched
    // lock never acquired: no host call), and with one host call (`held()` once acquired).
    let (bare, one_host_call) = inst
        .run(|(store, _, l)| {
            Box::pin(async move {
                let w = l
                    .expect("lock client")
                    .latchkey_locks_watchdog()
                    .watched_lock();
                let idle = w.call_constructor(&mut *store, "bench-idle").await?;
                let t = Instant::now();
                for _ in 0..cycles {
                    w.call_held(&mut *store, idle).await?;
                }
                let bare = t.elapsed();
                let kept = w.call_constructor(&mut *store, "bench-kept").await?;
                let took = w.call_acquire(&mut *store, kept, 60_000).await?;
                assert!(took.map_err(wasmtime::Error::msg)?);
                let t = Instant::now();
                for _ in 0..cycles {
                    w.call_held(&mut *store, kept).await?;
                }
                Ok((bare, t.elapsed()))
            })
        })
        .await?;
    // One command, from the rogue guest's raw export, against native `GET`: the host path of
    // a single command (a refused one never reaches the server).
    let rogue = host.load(&latchkey_plugin::guest::rogue_path()?)?;
    let mut raw = host.tenant("raw").instantiate(&rogue).await?;
    let mut time_raw = async |args: &[&str]| -> Result<Duration, Box<dyn std::error::Error>> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let t = Instant::now();
        for _ in 0..cycles {
            let _ = raw
                .call::<_, (Result<String, String>,)>("raw", (args.clone(),))
                .await?;
        }
        Ok(t.elapsed())
    };
    let refused = time_raw(&["FLUSHALL"]).await?;
    let get_wasm = time_raw(&["GET", "k"]).await?;
    let t = Instant::now();
    for _ in 0..cycles {
        native.command(vec![b"GET".to_vec(), b"k".to_vec()]).await?;
    }
    let get_native = t.elapsed();
    println!("raw call, refused         {}", per(refused, cycles));
    println!("raw call, GET             {}", per(get_wasm, cycles));
    println!("native GET                {}", per(get_native, cycles));
    println!("redis host calls / cycle  {per_cycle:.2}");
    println!("guest call, no host call  {}", per(bare, cycles));
    println!("guest call + 1 host call  {}", per(one_host_call, cycles));
    println!("acquire+release cycle, native vs wasm: median of {reps} runs");
    print_row("in-process", cycles, in_process);
    for (label, times) in tcp {
        print_row(label, tcp_cycles, times);
    }
    // The TCP server is dropped off this runtime's thread (tokio forbids blocking inside it),
    // before anything below can return early.
    std::thread::spawn(move || drop(tcp_server))
        .join()
        .expect("server thread");

    // An embedded server from nothing to its first reply, in-process.
    let mut firsts = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let s = Server::builder().no_listener().start().await?;
        LocalTransport::new(&s)
            .command(vec![b"PING".to_vec()])
            .await?;
        firsts.push(t.elapsed());
        drop(s);
    }
    firsts.sort();
    println!(
        "embedded start to PONG    {:?} (median of 20)",
        firsts[firsts.len() / 2]
    );

    let many: u32 = env_or("BENCH_TENANTS", 10_000);
    let listening = Server::builder().start().await?;
    many_tenants(&listening, &path, &config, many).await?;

    let _ = std::fs::remove_dir_all(&cache);
    Ok(())
}
