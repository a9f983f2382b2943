//! An expiry storm, side by side: `latchkey-server` and `redis-server` each take N lock keys
//! in one burst (`SET lock:N token NX PX 5000`), then serve `GET`s from 50 connections while
//! the keys expire together. Reports, for each server:
//! - how long after the last deadline `DBSIZE` reaches 0 (and after the first deadline);
//! - the `GET` rate during the storm (first deadline until `DBSIZE` is 0) against the rate
//!   before it (after the load, before the first deadline), as a ratio;
//! - `GET` p99 before and during the storm, and the server's CPU share before (to show it was
//!   the bottleneck, not the load generator).
//!
//! Run each server on core 0 and this load on core 1:
//!
//! ```text
//! cargo build --release -p latchkey-server --bin latchkey-server --example expiry_storm
//! taskset -c 1 target/release/examples/expiry_storm --latchkey target/release/latchkey-server
//! ```
//!
//! On a machine shared with other work, prefix `chrt -f 10` (the servers inherit it), or the
//! numbers measure the scheduler. Results and the machine they came from:
//! `bench/results/expiry.md`.
//!
//! Options: `--keys N` (default 1000000), `--ttl-ms MS` (5000; raise it if the load takes
//! longer than the TTL minus a second), `--clients N` (50), `--pipeline N` (GETs in flight per
//! connection, 1), `--latchkey PATH`, `--redis PATH` (`redis-server`), `--only latchkey|redis`,
//! `--core N` (the core servers are pinned to, 0).
//! A benchmark, not a test: it asserts nothing, it prints numbers.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// Command-line options.
#[derive(Clone, Debug)]
struct Opts {
    keys: u64,
    ttl_ms: u64,
    clients: usize,
    pipeline: usize,
    latchkey: String,
    redis: String,
    only: Option<String>,
    core: u32,
}

fn parse_opts() -> Opts {
    let mut o = Opts {
        keys: 1_000_000,
        ttl_ms: 5000,
        clients: 50,
        pipeline: 1,
        latchkey: "target/release/latchkey-server".into(),
        redis: "redis-server".into(),
        only: None,
        core: 0,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--keys" => o.keys = v.parse().expect("--keys N"),
            "--ttl-ms" => o.ttl_ms = v.parse().expect("--ttl-ms MS"),
            "--clients" => o.clients = v.parse().expect("--clients N"),
            "--pipeline" => o.pipeline = v.parse().expect("--pipeline N"),
            "--latchkey" => o.latchkey = v,
            "--redis" => o.redis = v,
            "--only" => o.only = Some(v),
            "--core" => o.core = v.parse().expect("--core N"),
            other => panic!("unknown option {other}"),
        }
        i += 2;
    }
    o
}

/// A connection that sends raw RESP and reads replies.
struct Conn {
    r: BufReader<OwnedReadHalf>,
    w: OwnedWriteHalf,
    line: Vec<u8>,
}

/// One reply, reduced to what the benchmark looks at.
#[derive(Debug, PartialEq)]
enum Reply {
    Ok,
    Int(i64),
    Nil,
    Bulk,
    Other(String),
}

impl Conn {
    async fn connect(addr: SocketAddr) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let (r, w) = s.into_split();
        Ok(Conn {
            r: BufReader::with_capacity(64 * 1024, r),
            w,
            line: Vec::new(),
        })
    }

    async fn send(&mut self, buf: &[u8]) {
        self.w.write_all(buf).await.expect("write");
    }

    async fn reply(&mut self) -> Reply {
        self.line.clear();
        self.r
            .read_until(b'\n', &mut self.line)
            .await
            .expect("read");
        let l = &self.line[..self.line.len().saturating_sub(2)];
        match l.first() {
            Some(b'+') if l == b"+OK" => Reply::Ok,
            Some(b':') => Reply::Int(std::str::from_utf8(&l[1..]).unwrap().parse().unwrap()),
            Some(b'$') if l == b"$-1" => Reply::Nil,
            Some(b'$') => {
                let n: usize = std::str::from_utf8(&l[1..]).unwrap().parse().unwrap();
                let mut body = vec![0; n + 2];
                self.r.read_exact(&mut body).await.expect("read bulk");
                Reply::Bulk
            }
            _ => Reply::Other(String::from_utf8_lossy(l).into_owned()),
        }
    }

    async fn cmd(&mut self, args: &[&str]) -> Reply {
        let mut b = Vec::new();
        encode(&mut b, args);
        self.send(&b).await;
        self.reply().await
    }
}

fn encode(out: &mut Vec<u8>, args: &[&str]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
}

/// A server child process pinned to one core, killed on drop.
struct Proc {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn spawn(kind: &str, bin: &str, core: u32) -> Proc {
    let port = free_port();
    let mut c = Command::new("taskset");
    c.arg("-c").arg(core.to_string()).arg(bin);
    c.args(["--port", &port.to_string()]);
    // Persistence off on both (each saves a snapshot by default after enough writes).
    c.args(["--save", "", "--appendonly", "no"]);
    if kind != "redis" {
        c.args(["--loglevel", "warn"]);
    }
    let child = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn taskset {bin}: {e}"));
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let start = Instant::now();
    loop {
        if let Ok(mut c) = Conn::connect(addr).await {
            if let Reply::Other(s) = c.cmd(&["PING"]).await {
                if s == "+PONG" {
                    break;
                }
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{kind} never came up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Proc { child, addr }
}

/// CPU time (user + system) a process has used, in seconds, from `/proc`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// Loads the keys from a few pipelined connections. Returns (first send, last reply).
async fn load(addr: SocketAddr, o: &Opts) -> (Instant, Instant) {
    let loaders = 4u64;
    let start = Instant::now();
    let ttl = o.ttl_ms.to_string();
    let mut tasks = Vec::new();
    for l in 0..loaders {
        let ttl = ttl.clone();
        let n = o.keys;
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::connect(addr).await.unwrap();
            let mut i = l;
            let mut buf = Vec::new();
            let mut ok = 0u64;
            while i < n {
                buf.clear();
                let mut sent = 0;
                while i < n && sent < 1000 {
                    let key = format!("lock:{i}");
                    encode(&mut buf, &["SET", &key, "token", "NX", "PX", &ttl]);
                    sent += 1;
                    i += loaders;
                }
                c.send(&buf).await;
                for _ in 0..sent {
                    if c.reply().await == Reply::Ok {
                        ok += 1;
                    }
                }
            }
            ok
        }));
    }
    let mut ok = 0;
    for t in tasks {
        ok += t.await.unwrap();
    }
    assert_eq!(ok, o.keys, "every SET NX took its lock");
    (start, Instant::now())
}

/// `(time since t0 in ms, latency in µs)` of every GET one connection completed.
type Samples = Vec<(u32, u32)>;

async fn get_load(
    addr: SocketAddr,
    keys: u64,
    pipeline: usize,
    t0: Instant,
    stop: Arc<AtomicBool>,
) -> Samples {
    let mut c = Conn::connect(addr).await.unwrap();
    let mut out = Vec::with_capacity(1 << 20);
    let mut buf = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        buf.clear();
        for _ in 0..pipeline {
            let key = format!("lock:{}", rand::random_range(0..keys));
            encode(&mut buf, &["GET", &key]);
        }
        let sent = Instant::now();
        c.send(&buf).await;
        for _ in 0..pipeline {
            c.reply().await;
        }
        let done = Instant::now();
        let lat = done.duration_since(sent).as_micros() as u32;
        let at = done.duration_since(t0).as_millis() as u32;
        for _ in 0..pipeline {
            out.push((at, lat));
        }
    }
    out
}

/// What one run measured.
struct Outcome {
    load_s: f64,
    after_last_s: f64,
    after_first_s: f64,
    rate_before: f64,
    rate_storm: f64,
    p99_before_ms: f64,
    p99_storm_ms: f64,
    cpu_before: f64,
}

fn p99(mut lat: Vec<u32>) -> f64 {
    if lat.is_empty() {
        return f64::NAN;
    }
    lat.sort_unstable();
    lat[(lat.len() * 99 / 100).min(lat.len() - 1)] as f64 / 1000.0
}

async fn run(kind: &str, bin: &str, o: &Opts) -> Outcome {
    let p = spawn(kind, bin, o.core).await;
    let pid = p.child.id();
    let addr = p.addr;
    let (t0, loaded) = load(addr, o).await;
    let load_s = loaded.duration_since(t0).as_secs_f64();
    let ttl = Duration::from_millis(o.ttl_ms);
    // Deadlines: the first key's is at least t0 + ttl; the last's at most `loaded` + ttl.
    let first_deadline = t0 + ttl;
    let last_deadline = loaded + ttl;
    assert!(
        first_deadline > loaded + Duration::from_millis(700),
        "the load took {load_s:.2}s: raise --ttl-ms to leave a second before the first deadline"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..o.clients)
        .map(|_| tokio::spawn(get_load(addr, o.keys, o.pipeline, t0, stop.clone())))
        .collect();
    // The "before" window: from a moment after the load to just before the first deadline.
    let before_from = loaded + Duration::from_millis(200);
    let before_to = first_deadline - Duration::from_millis(100);
    tokio::time::sleep_until(before_from.into()).await;
    let cpu0 = cpu_seconds(pid);
    tokio::time::sleep_until(before_to.into()).await;
    let cpu_before =
        (cpu_seconds(pid) - cpu0) / before_to.duration_since(before_from).as_secs_f64();
    // Poll DBSIZE until it is 0 after the last deadline.
    let mut mon = Conn::connect(addr).await.unwrap();
    let reclaimed = loop {
        tokio::time::sleep(Duration::from_millis(5)).await;
        if let Reply::Int(0) = mon.cmd(&["DBSIZE"]).await {
            break Instant::now();
        }
        assert!(
            Instant::now() < last_deadline + Duration::from_secs(600),
            "{kind}: keys still there ten minutes after their deadline"
        );
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let mut samples = Vec::new();
    for w in workers {
        samples.extend(w.await.unwrap());
    }
    let ms = |t: Instant| t.duration_since(t0).as_millis() as u32;
    let window = |from: Instant, to: Instant| -> Vec<u32> {
        let (a, b) = (ms(from), ms(to));
        samples
            .iter()
            .filter(|(at, _)| *at >= a && *at < b)
            .map(|(_, l)| *l)
            .collect()
    };
    let before = window(before_from, before_to);
    // The storm: from the first deadline until DBSIZE is 0 (at least 100 ms, to have samples).
    let storm_to = reclaimed.max(first_deadline + Duration::from_millis(100));
    let storm = window(first_deadline, storm_to);
    let secs = |a: Instant, b: Instant| b.duration_since(a).as_secs_f64();
    Outcome {
        load_s,
        after_last_s: reclaimed
            .saturating_duration_since(last_deadline)
            .as_secs_f64(),
        after_first_s: secs(first_deadline, reclaimed),
        rate_before: before.len() as f64 / secs(before_from, before_to),
        rate_storm: storm.len() as f64 / secs(first_deadline, storm_to),
        p99_before_ms: p99(before),
        p99_storm_ms: p99(storm),
        cpu_before,
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let o = parse_opts();
    println!(
        "expiry storm: {} keys, SET lock:N token NX PX {}, GETs from {} connections, {} in flight each, servers on core {}",
        o.keys, o.ttl_ms, o.clients, o.pipeline, o.core
    );
    println!(
        "| server | load s | DBSIZE 0 after last deadline s | after first deadline s | GET/s before | GET/s storm | ratio | p99 before ms | p99 storm ms | server CPU before |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut kinds = vec![("latchkey", o.latchkey.clone()), ("redis", o.redis.clone())];
    if let Some(only) = &o.only {
        kinds.retain(|(k, _)| k == only);
    }
    for (kind, bin) in kinds {
        let r = run(kind, &bin, &o).await;
        println!(
            "| {kind} | {:.2} | {:.2} | {:.2} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0}% |",
            r.load_s,
            r.after_last_s,
            r.after_first_s,
            r.rate_before,
            r.rate_storm,
            r.rate_storm / r.rate_before,
            r.p99_before_ms,
            r.p99_storm_ms,
            r.cpu_before * 100.0
        );
    }
}
