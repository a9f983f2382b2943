//! The lock client against each server kind, side by side, as ratios (issue 17):
//!
//!     cargo build --release -p latchkey-server --bin latchkey-server
//!     cargo run --release -p latchkey-tests --example lock_bench
//!
//! Both servers run as processes of their own, started alike (`RedisProcess`): the
//! `latchkey-server` binary (`LATCHKEY_SERVER`, default the workspace's release build) and
//! `redis-server`. An embedded latchkey reached in-process is measured too, alone (redis has no
//! such thing). Prints a Markdown section that `scripts/bench` appends to `bench/RESULTS.md`:
//!
//! - uncontended acquire+release cycles per second, one client;
//! - hand-off: from a release to the next holder's acquisition, with 1, 8 and 64 clients
//!   waiting on the lock (each woken by the unlock `PUBLISH`; its backoff alone would wait
//!   seconds), p50 and p99;
//! - RedLock over 3 and 5 independent servers: acquire+release cycles per second.
//!
//! `BENCH_REPS` (default 3) runs alternate the two servers; a ratio is the median of the
//! per-run ratios, with their spread. `BENCH_ROWS` (default every row) runs only the rows
//! named, comma-separated, out of `cycles`, `handoff` (or one waiter count of it: `handoff-1`,
//! `handoff-8`, `handoff-64`), `redlock` and `embedded`: e.g. `BENCH_ROWS=handoff-8` to look
//! at the hand-off with 8 waiters alone.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use latchkey_client::locks::{Backoff, RedLock, SimpleLock};
use latchkey_client::native::{LocalTransport, RedisTransport};
use latchkey_client::Transport;
use latchkey_server::Server;
use latchkey_tests::RedisProcess;

const TTL: Duration = Duration::from_secs(10);

/// A hand-off slower than this is counted apart, in the detail column.
const SLOW: Duration = Duration::from_millis(2);

/// The latchkey-server binary to run as a process.
fn latchkey_binary() -> String {
    std::env::var("LATCHKEY_SERVER").unwrap_or_else(|_| {
        let target = std::env::var("CARGO_TARGET_DIR")
            .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../target").into());
        format!("{target}/release/latchkey-server")
    })
}

/// The two servers a row compares.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Latchkey,
    Redis,
}

fn spawn(kind: Kind) -> RedisProcess {
    match kind {
        Kind::Latchkey => RedisProcess::spawn_binary(&latchkey_binary(), &[]),
        Kind::Redis => RedisProcess::spawn(&[]),
    }
}

/// Uncontended acquire+release cycles per second, one client.
async fn cycles<T: Transport + Clone>(t: T, n: u32) -> f64 {
    let lock = SimpleLock::new(t, "bench");
    let start = Instant::now();
    for _ in 0..n {
        let l = lock.try_acquire(TTL).await.unwrap().expect("free");
        lock.release(&l).await.unwrap();
    }
    f64::from(n) / start.elapsed().as_secs_f64()
}

/// Hand-off times with `waiters` clients waiting: the holder releases, the next one to get
/// the lock measures from that release to its acquisition, releases at once, and so on until
/// every waiter had the lock once; `runs` times. Each waiter has its own connection; its
/// backoff is seconds long, so only the unlock message wakes it in time.
async fn handoffs(url: &str, waiters: usize, runs: usize) -> Vec<Duration> {
    let mut conns = Vec::new();
    for _ in 0..=waiters {
        conns.push(RedisTransport::connect(url).await.unwrap());
    }
    let backoff = Backoff {
        base: Duration::from_secs(5),
        max: Duration::from_secs(5),
    };
    let samples = Arc::new(Mutex::new(Vec::new()));
    for run in 0..runs {
        let name = format!("handoff-{waiters}-{run}");
        let holder = SimpleLock::new(conns[0].clone(), &name);
        let held = holder.try_acquire(TTL).await.unwrap().expect("free");
        // When the lock was last released: the next holder measures from it.
        let released = Arc::new(Mutex::new(None::<Instant>));
        let mut tasks = Vec::new();
        for conn in &conns[1..] {
            let lock = SimpleLock::new(conn.clone(), &name);
            let (released, samples) = (released.clone(), samples.clone());
            tasks.push(tokio::spawn(async move {
                let l = lock
                    .acquire_wait(TTL, Duration::from_secs(60), backoff)
                    .await
                    .unwrap()
                    .expect("acquired before the deadline");
                let at = Instant::now();
                let from = released.lock().unwrap().take().expect("released before");
                samples.lock().unwrap().push(at - from);
                *released.lock().unwrap() = Some(Instant::now());
                lock.release(&l).await.unwrap();
            }));
        }
        // Let every waiter try once and block on the unlock channel.
        tokio::time::sleep(Duration::from_millis(50 + 2 * waiters as u64)).await;
        *released.lock().unwrap() = Some(Instant::now());
        holder.release(&held).await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
    }
    let mut s = std::mem::take(&mut *samples.lock().unwrap());
    s.sort();
    s
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i]
}

/// RedLock acquire+release cycles per second over `nodes` servers of one kind.
async fn redlock_cycles(kind: Kind, nodes: usize, n: u32) -> f64 {
    let procs: Vec<RedisProcess> = (0..nodes).map(|_| spawn(kind)).collect();
    let mut conns = Vec::new();
    for p in &procs {
        conns.push(RedisTransport::connect(&p.url()).await.unwrap());
    }
    let red = RedLock::new(conns, Duration::from_millis(50));
    for _ in 0..n / 10 {
        let l = red.acquire("warm", TTL).await.unwrap().expect("free");
        red.release(&l).await;
    }
    let start = Instant::now();
    for _ in 0..n {
        let l = red.acquire("bench", TTL).await.unwrap().expect("free");
        assert_eq!(red.release(&l).await, nodes, "released everywhere");
    }
    f64::from(n) / start.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A ratio column: the median of the per-run ratios, and their spread.
fn ratio(r: &[f64]) -> String {
    let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = r.iter().copied().fold(0.0, f64::max);
    format!("{:.2}× ({lo:.2}–{hi:.2})", median(r.to_vec()))
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

/// Whether `BENCH_ROWS` asks for the rows named `name` (every row when it is unset); a
/// family's name (`handoff`) asks for each of its rows (`handoff-8`).
fn wanted(name: &str) -> bool {
    std::env::var("BENCH_ROWS").map_or(true, |rows| {
        rows.split(',').map(str::trim).any(|r| {
            r == name
                || name
                    .strip_prefix(r)
                    .is_some_and(|rest| rest.starts_with('-'))
        })
    })
}

#[tokio::main]
async fn main() {
    let reps: usize = std::env::var("BENCH_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let n = 5_000;
    println!("## Lock client: latchkey-server vs redis-server, both as processes over TCP");
    println!();
    println!(
        "From `cargo run -p latchkey-tests --release --example lock_bench` in the same run; \
         {reps} repetitions alternating the servers; a ratio is the median of the per-run \
         ratios (min–max). Cycles: higher is better; hand-off: lower is better."
    );
    println!();
    println!("| row | latchkey / redis | detail |");
    println!("|---|---|---|");

    if wanted("cycles") {
        cycles_row(reps, n).await;
    }
    for waiters in [1usize, 8, 64] {
        if wanted(&format!("handoff-{waiters}")) {
            handoff_rows(reps, waiters).await;
        }
    }
    if wanted("redlock") {
        for nodes in [3usize, 5] {
            redlock_row(reps, nodes, n).await;
        }
    }
    if wanted("embedded") {
        embedded_row(n).await;
    }
}

/// Uncontended acquire+release cycles per second, one client, on each server kind.
async fn cycles_row(reps: usize, n: u32) {
    let (mut r, mut last) = (Vec::new(), (0.0, 0.0));
    for _ in 0..reps {
        let mut rate = [0.0; 2];
        for (i, kind) in [Kind::Latchkey, Kind::Redis].into_iter().enumerate() {
            let p = spawn(kind);
            let t = RedisTransport::connect(&p.url()).await.unwrap();
            cycles(t.clone(), n / 10).await;
            rate[i] = cycles(t, n).await;
        }
        r.push(rate[0] / rate[1]);
        last = (rate[0], rate[1]);
    }
    println!(
        "| acquire+release cycles/s, one client | {} | latchkey {:.0}/s, redis {:.0}/s |",
        ratio(&r),
        last.0,
        last.1
    );
}

/// The hand-off rows with `waiters` clients waiting, p50 and p99.
async fn handoff_rows(reps: usize, waiters: usize) {
    let runs = (400 / waiters).max(4);
    let (mut p50, mut p99) = (Vec::new(), Vec::new());
    let mut detail = String::new();
    for _ in 0..reps {
        let mut q = [(Duration::ZERO, Duration::ZERO); 2];
        // The tail behind the p99, which is only the 4th slowest of 400: how many hand-offs
        // took longer than `SLOW`.
        let mut slow = [0; 2];
        for (i, kind) in [Kind::Latchkey, Kind::Redis].into_iter().enumerate() {
            let p = spawn(kind);
            let s = handoffs(&p.url(), waiters, runs).await;
            q[i] = (quantile(&s, 0.5), quantile(&s, 0.99));
            slow[i] = s.iter().filter(|d| **d > SLOW).count();
        }
        p50.push(q[0].0.as_secs_f64() / q[1].0.as_secs_f64());
        p99.push(q[0].1.as_secs_f64() / q[1].1.as_secs_f64());
        detail = format!(
            "latchkey p50 {} p99 {}, {} over {}; redis p50 {} p99 {}, {} over {} ({} hand-offs)",
            us(q[0].0),
            us(q[0].1),
            slow[0],
            us(SLOW),
            us(q[1].0),
            us(q[1].1),
            slow[1],
            us(SLOW),
            runs * waiters
        );
    }
    println!(
        "| hand-off, {waiters} waiting, p50 | {} | {detail} |",
        ratio(&p50)
    );
    println!("| hand-off, {waiters} waiting, p99 | {} |  |", ratio(&p99));
}

/// RedLock acquire+release cycles per second over `nodes` servers, each kind.
async fn redlock_row(reps: usize, nodes: usize, n: u32) {
    let (mut r, mut last) = (Vec::new(), (0.0, 0.0));
    for _ in 0..reps {
        let a = redlock_cycles(Kind::Latchkey, nodes, n / 5).await;
        let b = redlock_cycles(Kind::Redis, nodes, n / 5).await;
        r.push(a / b);
        last = (a, b);
    }
    println!(
        "| RedLock over {nodes} servers, cycles/s | {} | latchkey {:.0}/s, redis {:.0}/s |",
        ratio(&r),
        last.0,
        last.1
    );
}

/// The embedded server, in-process: no redis counterpart.
async fn embedded_row(n: u32) {
    let embedded = Server::builder().no_listener().start().await.unwrap();
    let local = LocalTransport::new(&embedded);
    cycles(local.clone(), n).await;
    let rate = cycles(local, 4 * n).await;
    println!();
    println!(
        "Embedded latchkey reached in-process (`LocalTransport`, no socket): {rate:.0} \
         acquire+release cycles/s, one client."
    );
}
