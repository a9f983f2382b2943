//! How far behind its master does a replica run under write load? Measured the same way on a
//! latchkey pair and on a real `redis-server` pair, side by side.
//!
//! ```text
//! cargo run --release -p latchkey-tests --example replication_lag
//! cargo build --release -p latchkey-server
//! LATCHKEY_SERVER=target/release/latchkey-server cargo run --release -p latchkey-tests --example replication_lag
//! ```
//!
//! For each server a master and a replica are started (latchkey: two servers in this
//! process, sharing its runtime with the sampler and each other, and, with `LATCHKEY_SERVER`
//! set, also two `latchkey-server` processes; Redis: two `redis-server` processes, the
//! replica following the master directly)
//! and `redis-benchmark -t set -n 200000 -P 16 -c 50` writes to the master. Meanwhile:
//!
//! - every 10 ms a sampler reads the master's `master_repl_offset` (bytes of stream produced
//!   so far), the offset its replica last acknowledged (`slave0:...,offset=N`), and the
//!   replica's own processed offset (`slave_repl_offset` in the replica's `INFO`). Lag in
//!   bytes is master offset minus replica offset; lag in ms is how long ago the master had
//!   produced the replica's current offset (interpolated between master samples). A replica
//!   acknowledges once a second unless asked (`REPLCONF GETACK`, which `WAIT` sends), so the
//!   acknowledged lag shows that rhythm; the replica-side offset is the precise one;
//! - a stamper writes the time (`SET lag-stamp <µs>`) to the master every millisecond, and
//!   the sampler reads it back from the replica: the age of the newest stamp the replica
//!   holds is how stale its data is, with no offsets involved;
//! - a prober times `SET` + `WAIT 1 1000` round trips: how long a write takes to be confirmed
//!   by the replica under load (a reply of 0 is counted as a timeout).

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use latchkey_tests::pair::wait_link_up;
use latchkey_tests::{LatchkeyPair, RawConn, RedisProcess, ReplicatedPair};

const REQUESTS: &str = "200000";
/// Benchmark runs per server, back to back, so the percentiles rest on a few hundred samples.
const ROUNDS: usize = 5;
const SAMPLE_EVERY: Duration = Duration::from_millis(10);
const STAMP_EVERY: Duration = Duration::from_millis(1);

/// One sample of both sides' offsets, and the replica's newest stamp.
struct Sample {
    master_at: Instant,
    master: i64,
    acked: i64,
    replica_at: Instant,
    replica: i64,
    stamp_age_ms: Option<f64>,
}

/// Reads `field:value` from an INFO reply.
fn field(info: &str, name: &str) -> Option<i64> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// The acknowledged offset of the first replica, from the master's `slave0:` line.
fn acked(info: &str) -> Option<i64> {
    let line = info.lines().find_map(|l| l.strip_prefix("slave0:"))?;
    line.split(',')
        .find_map(|kv| kv.strip_prefix("offset="))
        .and_then(|v| v.parse().ok())
}

fn info(c: &mut RawConn) -> String {
    String::from_utf8_lossy(&c.cmd(&["INFO", "replication"])).into_owned()
}

/// Microseconds since `epoch`, the stamps' unit.
fn micros(epoch: Instant) -> u128 {
    epoch.elapsed().as_micros()
}

/// Samples both offsets and the replica's stamp every 10 ms until `stop` is set.
fn sample(
    master: SocketAddr,
    replica: SocketAddr,
    epoch: Instant,
    stop: Arc<AtomicBool>,
) -> Vec<Sample> {
    let mut m = RawConn::connect(master).expect("connect master");
    let mut r = RawConn::connect(replica).expect("connect replica");
    let mut out = Vec::new();
    while !stop.load(Ordering::Acquire) {
        let next = Instant::now() + SAMPLE_EVERY;
        let master_at = Instant::now();
        let mi = info(&mut m);
        let replica_at = Instant::now();
        let ri = info(&mut r);
        let stamp = r.cmd(&["GET", "lag-stamp"]);
        let read_at = micros(epoch);
        let stamp_age_ms = String::from_utf8_lossy(&stamp)
            .lines()
            .nth(1)
            .and_then(|v| v.parse::<u128>().ok())
            .map(|written| read_at.saturating_sub(written) as f64 / 1e3);
        out.push(Sample {
            master_at,
            master: field(&mi, "master_repl_offset").unwrap_or(0),
            acked: acked(&mi).unwrap_or(0),
            replica_at,
            replica: field(&ri, "slave_repl_offset").unwrap_or(0),
            stamp_age_ms,
        });
        thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    out
}

/// Writes the current time to the master every millisecond until `stop` is set.
fn stamp(master: SocketAddr, epoch: Instant, stop: Arc<AtomicBool>) {
    let mut c = RawConn::connect(master).expect("connect master");
    while !stop.load(Ordering::Acquire) {
        c.cmd(&["SET", "lag-stamp", &micros(epoch).to_string()]);
        thread::sleep(STAMP_EVERY);
    }
}

/// Times `SET` + `WAIT 1 1000` round trips until `stop` is set; `None` for a timeout.
fn probe_wait(master: SocketAddr, stop: Arc<AtomicBool>) -> Vec<Option<f64>> {
    let mut c = RawConn::connect(master).expect("connect master");
    let mut out = Vec::new();
    while !stop.load(Ordering::Acquire) {
        let t = Instant::now();
        c.cmd(&["SET", "lag-probe", "x"]);
        let confirmed = c.cmd(&["WAIT", "1", "1000"]) == b":1\r\n";
        out.push(confirmed.then(|| t.elapsed().as_secs_f64() * 1e3));
        thread::sleep(SAMPLE_EVERY);
    }
    out
}

/// The final `SET: N requests per second` of a `redis-benchmark -q` run.
fn requests_per_second(stdout: &[u8]) -> Option<f64> {
    String::from_utf8_lossy(stdout)
        .split(['\r', '\n'])
        .filter_map(|l| l.strip_prefix("SET: "))
        .rfind(|l| l.contains("requests per second"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
}

/// When the master's offset first reached `offset`, interpolated between samples.
fn produced_at(samples: &[Sample], offset: i64) -> Option<Instant> {
    let j = samples.iter().position(|s| s.master >= offset)?;
    if j == 0 {
        return Some(samples[0].master_at);
    }
    let (a, b) = (&samples[j - 1], &samples[j]);
    let span = (b.master - a.master).max(1) as f64;
    let frac = (offset - a.master) as f64 / span;
    Some(a.master_at + (b.master_at - a.master_at).mul_f64(frac.clamp(0.0, 1.0)))
}

/// `(median, p99, max)` of some values.
fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    (at(0.5), at(0.99), v[v.len() - 1])
}

/// What one run measured.
struct Report {
    server: &'static str,
    ops_per_sec: String,
    samples: usize,
    bytes: (f64, f64, f64),
    ms: (f64, f64, f64),
    ack_bytes: (f64, f64, f64),
    stamp_ms: (f64, f64, f64),
    wait_ms: (f64, f64, f64),
    wait_timeouts: usize,
    /// Time until the replica's offset reached the master's after the load, or how many
    /// bytes short it stayed.
    catch_up: Result<f64, i64>,
}

/// Drives redis-benchmark at `master` while sampling; returns the lag figures.
fn measure(server: &'static str, master: SocketAddr, replica: SocketAddr) -> Report {
    let epoch = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        thread::spawn(move || sample(master, replica, epoch, stop))
    };
    let stamper = {
        let stop = stop.clone();
        thread::spawn(move || stamp(master, epoch, stop))
    };
    let prober = {
        let stop = stop.clone();
        thread::spawn(move || probe_wait(master, stop))
    };
    let mut rates = Vec::new();
    for _ in 0..ROUNDS {
        let bench = Command::new("redis-benchmark")
            .args(["-h", "127.0.0.1", "-p", &master.port().to_string()])
            .args(["-t", "set", "-n", REQUESTS, "-P", "16", "-c", "50", "-q"])
            .stderr(Stdio::null())
            .output()
            .expect("run redis-benchmark (apt-get install redis-tools)");
        rates.extend(requests_per_second(&bench.stdout));
    }
    stop.store(true, Ordering::Release);
    let samples = sampler.join().expect("sampler");
    stamper.join().expect("stamper");
    let waits = prober.join().expect("prober");
    let (median_rate, _, _) = stats(rates);
    let ops_per_sec = format!("{median_rate:.0}");

    // After the load: how long until the replica's offset reaches the master's?
    let end = Instant::now();
    let mut m = RawConn::connect(master).expect("connect master");
    let mut r = RawConn::connect(replica).expect("connect replica");
    let target = field(&info(&mut m), "master_repl_offset").unwrap_or(0);
    let catch_up = loop {
        let now = field(&info(&mut r), "slave_repl_offset").unwrap_or(0);
        if now >= target {
            break Ok(end.elapsed().as_secs_f64() * 1e3);
        }
        if end.elapsed() > Duration::from_secs(5) {
            break Err(target - now);
        }
        thread::sleep(Duration::from_millis(1));
    };

    let bytes = samples
        .iter()
        .map(|s| (s.master - s.replica).max(0) as f64)
        .collect();
    let ack_bytes = samples
        .iter()
        .map(|s| (s.master - s.acked).max(0) as f64)
        .collect();
    let ms = samples
        .iter()
        .filter_map(|s| {
            let at = produced_at(&samples, s.replica)?;
            Some(s.replica_at.saturating_duration_since(at).as_secs_f64() * 1e3)
        })
        .collect();
    Report {
        server,
        ops_per_sec,
        samples: samples.len(),
        bytes: stats(bytes),
        ms: stats(ms),
        ack_bytes: stats(ack_bytes),
        stamp_ms: stats(samples.iter().filter_map(|s| s.stamp_age_ms).collect()),
        wait_ms: stats(waits.iter().flatten().copied().collect()),
        wait_timeouts: waits.iter().filter(|w| w.is_none()).count(),
        catch_up,
    }
}

fn latchkey() -> Report {
    let pair = LatchkeyPair::start();
    measure("latchkey", pair.master(), pair.replica())
}

/// Two `latchkey-server` processes, like redis-server's pair: run when `LATCHKEY_SERVER` names
/// the binary (`cargo build --release -p latchkey-server` builds it).
fn latchkey_processes(bin: &str) -> Report {
    let master = RedisProcess::spawn_binary(bin, &[]);
    let port = master.addr().port().to_string();
    let replica = RedisProcess::spawn_binary(bin, &["--replicaof", "127.0.0.1", &port]);
    wait_link_up(replica.addr());
    measure("latchkey (processes)", master.addr(), replica.addr())
}

fn redis() -> Report {
    let master = RedisProcess::spawn(&["--repl-diskless-sync-delay", "0"]);
    let port = master.addr().port().to_string();
    let replica = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port]);
    wait_link_up(replica.addr());
    measure("redis-server", master.addr(), replica.addr())
}

/// `median / p99 / max` in whole bytes.
fn bytes((a, b, c): (f64, f64, f64)) -> String {
    format!("{a:.0} / {b:.0} / {c:.0}")
}

/// `median / p99 / max` in milliseconds.
fn ms((a, b, c): (f64, f64, f64)) -> String {
    format!("{a:.2} / {b:.2} / {c:.2}")
}

/// How one row of the table reads its figure from a report.
type Column = dyn Fn(&Report) -> String;

fn main() {
    let mut reports = vec![latchkey()];
    if let Ok(bin) = std::env::var("LATCHKEY_SERVER") {
        reports.push(latchkey_processes(&bin));
    }
    reports.push(redis());
    println!(
        "{ROUNDS} x redis-benchmark -t set -n {REQUESTS} -P 16 -c 50 at the master; sampled \
         every {} ms; figures are median / p99 / max\n",
        SAMPLE_EVERY.as_millis()
    );
    let rows: [(&str, &Column); 9] = [
        ("SET requests/s (median run)", &|r| r.ops_per_sec.clone()),
        ("samples", &|r| r.samples.to_string()),
        ("replica offset lag, bytes", &|r| bytes(r.bytes)),
        ("replica offset lag, ms", &|r| ms(r.ms)),
        ("acked offset lag, bytes", &|r| bytes(r.ack_bytes)),
        ("stamp age on replica, ms", &|r| ms(r.stamp_ms)),
        ("SET + WAIT 1, ms", &|r| ms(r.wait_ms)),
        ("WAIT 1 1000 timeouts", &|r| {
            format!("{} of {}", r.wait_timeouts, r.samples)
        }),
        ("offset catch-up after load", &|r| match r.catch_up {
            Ok(ms) => format!("{ms:.1} ms"),
            Err(short) => format!("never: {short} B short"),
        }),
    ];
    print!("{:<30}", "");
    for r in &reports {
        print!(" {:>28}", r.server);
    }
    println!();
    for (name, f) in rows {
        print!("{name:<30}");
        for r in &reports {
            print!(" {:>28}", f(r));
        }
        println!();
    }
}
