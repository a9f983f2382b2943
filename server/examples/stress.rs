//! Stress run for issue 11: starts a release `latchkey-server` on a free loopback port, throws
//! tens of thousands of random, malformed and hostile requests and scripts at it from several
//! threads, samples the server's resident memory from `/proc/<pid>/status` meanwhile, and
//! checks at the end that it still answers and that a canary key survived.
//!
//! Run it with `scripts/stress` (which builds it and the server in release mode). Arguments:
//! `stress <server-binary> [REQUESTS] [MAX_SECONDS] [RSS_LIMIT_MB]` (defaults 50000, 120, 512).
//! It exits non-zero when the server dies, stops answering, loses the canary, or its resident
//! memory passes the limit. Traffic goes to 127.0.0.1 only, and the run is bounded both in
//! requests and in time.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const CANARY: &[u8] = b"__stress_canary__";
const THREADS: u64 = 8;

/// Kinds of abuse, counted separately in the summary.
const KINDS: [&str; 6] = [
    "random bytes",
    "malformed RESP",
    "inline garbage",
    "valid commands, random arguments",
    "scripts",
    "pipelines",
];

/// Commands the stress may send with random arguments: everything a client may, except what
/// stops, empties or moves the server (SHUTDOWN, FLUSHALL, FLUSHDB, SWAPDB, REPLICAOF,
/// DEBUG, CONFIG, LATCHKEY.FAILOVER, CLIENT KILL): those are not abuse but an operator's
/// commands, and would end the run.
const COMMANDS: &[&str] = &[
    "GET",
    "SET",
    "DEL",
    "INCR",
    "INCRBY",
    "INCRBYFLOAT",
    "APPEND",
    "SETRANGE",
    "GETRANGE",
    "MGET",
    "MSET",
    "EXPIRE",
    "PEXPIRE",
    "TTL",
    "PERSIST",
    "EXISTS",
    "TYPE",
    "KEYS",
    "SCAN",
    "HSET",
    "HGET",
    "HGETALL",
    "HINCRBY",
    "HINCRBYFLOAT",
    "HDEL",
    "LPUSH",
    "RPUSH",
    "LPOP",
    "LRANGE",
    "LINSERT",
    "LREM",
    "LTRIM",
    "LPOS",
    "ZADD",
    "ZRANGE",
    "ZRANGEBYSCORE",
    "ZINCRBY",
    "ZREM",
    "ZPOPMIN",
    "PUBLISH",
    "PUBSUB",
    "ECHO",
    "PING",
    "TIME",
    "DBSIZE",
    "INFO",
    "COMMAND",
    "MULTI",
    "EXEC",
    "DISCARD",
    "WATCH",
    "UNWATCH",
    "SELECT",
    "HELLO",
    "GETEX",
    "GETDEL",
    "STRLEN",
    "RENAME",
    "EVALSHA",
    "SCRIPT",
    "FUNCTION",
    "FCALL",
    "OBJECT",
    "WAIT",
];

const WORDS: &[&str] = &[
    "k",
    "l",
    "h",
    "z",
    "0",
    "-1",
    "1",
    "100",
    "-100",
    "9223372036854775807",
    "-9223372036854775808",
    "1e308",
    "inf",
    "-inf",
    "nan",
    "NX",
    "XX",
    "PX",
    "EX",
    "GET",
    "KEEPTTL",
    "WITHSCORES",
    "LIMIT",
    "*",
    "[a",
    "(1",
    "MATCH",
    "COUNT",
    "BEFORE",
    "AFTER",
    "3",
    "2",
    "LIST",
    "HELP",
    "FLUSH",
    "536870911",
    "4294967296",
];

/// Lua snippets: bounded loops, errors, hostile arguments to the libraries.
const SCRIPTS: &[&str] = &[
    "return redis.call('GET', KEYS[1])",
    "local i = 0 while i < 10000 do i = i + 1 end return i",
    "return redis.pcall('NOSUCH')",
    "return redis.call('SET')",
    "error('boom')",
    "return cjson.decode(ARGV[1])",
    "return cjson.encode({ARGV[1], {ARGV[1]}})",
    "return cmsgpack.unpack(ARGV[1])",
    "return struct.unpack('>I', ARGV[1])",
    "return bit.band(tonumber(ARGV[1]) or 0, 255)",
    "local t = {} for i = 1, 1000 do t[i] = i end return t",
    "local t = {} t[1] = t return 1",
    "return {err = 'custom'}",
    "return {ok = 'fine'}",
    "return tostring(ARGV[1]):rep(10)",
    "return loadstring",
    "return unpack({1, 2, 3})",
    "redis.setresp(3) return redis.call('HGETALL', KEYS[1])",
    "return string.format('%s', ARGV[1])",
    "return redis.sha1hex(ARGV[1])",
    "local ok, e = pcall(function() return redis.call('INCR', KEYS[1]) end) return tostring(ok)",
    // The Lua sandbox's doors (see SECURITY.md, "Lua sandbox"): each gets an error or a
    // bounded reply, never an abort.
    "local t = {} t[1] = t return t",
    "local t = {} for i = 1, 7990 do t[i] = {} end return #cmsgpack.pack(unpack(t))",
    "local t = {} for i = 1, 7990 do t[i] = 'x' .. i end redis.log(redis.LOG_DEBUG, unpack(t)) return bit.bor(unpack(t, 1, 1))",
    "local p p = setmetatable({}, {__index = function() return cmsgpack.pack({p[1]}) end}) return {pcall(cmsgpack.pack, {p[1]})}",
    "return cmsgpack.pack(cmsgpack.unpack(ARGV[1]))",
    "return {pcall(cjson.decode, string.rep('[', 5000))}",
    "local t = {} t.a = t return {pcall(cjson.encode, t)}",
    "return struct.pack('i999999999', 1)",
    "return {pcall(struct.unpack, string.rep('c1', 9000), ARGV[1])}",
    "return loadstring(string.dump(function() return 1 end))",
    "return {pcall(loadstring, '\\27Lua')}",
    "return unpack({}, 1, 1e8)",
    "return {pcall(setmetatable, _G, {})}",
    "getmetatable('').__index = {} return 1",
    "return bit.tohex(tonumber(ARGV[1]) or -1, -2147483648)",
    "collectgarbage('stop') local t = {} for i = 1, 10000 do t[i] = {} end return #t",
    "return type(debug)",
];

fn encode(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn random_arg(rng: &mut StdRng) -> Vec<u8> {
    if rng.random_bool(0.7) {
        WORDS[rng.random_range(0..WORDS.len())].as_bytes().to_vec()
    } else {
        let n = rng.random_range(0..40);
        (0..n).map(|_| rng.random()).collect()
    }
}

/// One request of the given kind.
fn request(kind: usize, rng: &mut StdRng) -> Vec<u8> {
    match kind {
        0 => {
            let n = rng.random_range(1..4096);
            (0..n).map(|_| rng.random()).collect()
        }
        1 => {
            const BAD: &[&[u8]] = &[
                b"*3000000000\r\n",
                b"*1\r\n$600000000\r\n",
                b"*1\r\n$-5\r\n",
                b"*1\r\n+foo\r\n",
                b"*x\r\n",
                b"*2\r\n$3\r\nGET\r\n$500000000\r\nabc",
                b"*1048576\r\n",
                b"*-1\r\n*0\r\n",
                b"*2\r\n$4\r\nPING\r\n:1\r\n",
                b"$5\r\nhello\r\n",
            ];
            let mut v = BAD[rng.random_range(0..BAD.len())].to_vec();
            if rng.random_bool(0.5) {
                let cut = rng.random_range(0..=v.len());
                v.truncate(cut);
            }
            v
        }
        2 => {
            const INLINE: &[&[u8]] = &[
                b"\0\r\n",
                b"SET k v\0rest\r\n",
                b"SET a \"unbalanced\r\n",
                b"GET 'x\r\n",
                b"\"\\x\"\r\n",
                b"   \r\n",
                b"\x0b\x0c\r\n",
                b"ECHO \"a\"b\r\n",
            ];
            let mut v = INLINE[rng.random_range(0..INLINE.len())].to_vec();
            if rng.random_bool(0.3) {
                v.extend(std::iter::repeat_n(b'x', 70_000));
            }
            v
        }
        3 => {
            let mut args = vec![COMMANDS[rng.random_range(0..COMMANDS.len())]
                .as_bytes()
                .to_vec()];
            for _ in 0..rng.random_range(0..6) {
                args.push(random_arg(rng));
            }
            encode(&args)
        }
        4 => {
            let script = SCRIPTS[rng.random_range(0..SCRIPTS.len())];
            let mut args = vec![b"EVAL".to_vec(), script.as_bytes().to_vec(), b"1".to_vec()];
            args.push(WORDS[rng.random_range(0..4)].as_bytes().to_vec());
            args.push(random_arg(rng));
            encode(&args)
        }
        _ => {
            let mut v = Vec::new();
            for _ in 0..rng.random_range(2..50) {
                let k = rng.random_range(1..5);
                v.extend(request(k, rng));
            }
            v
        }
    }
}

/// Sends one request on a fresh connection, half-closes, and drains the answer (bounded).
fn send(addr: SocketAddr, bytes: &[u8]) -> std::io::Result<usize> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut buf = [0u8; 16 * 1024];
    let mut total = 0;
    while total < 64 << 20 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
    Ok(total)
}

fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One command on a fresh connection, its reply read until it is complete enough to compare.
fn command(addr: SocketAddr, args: &[&[u8]]) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    s.write_all(&encode(&args))?;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.ends_with(b"\r\n") {
            break;
        }
    }
    Ok(out)
}

struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let bin = argv
        .get(1)
        .expect("usage: stress <server-binary> [REQUESTS] [MAX_SECONDS] [RSS_LIMIT_MB]");
    let requests: u64 = argv.get(2).map_or(50_000, |s| s.parse().expect("REQUESTS"));
    let max_secs: u64 = argv.get(3).map_or(120, |s| s.parse().expect("MAX_SECONDS"));
    let limit_mb: u64 = argv
        .get(4)
        .map_or(512, |s| s.parse().expect("RSS_LIMIT_MB"));

    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(bin)
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--loglevel",
            "error",
            // No snapshot in the working folder (the binary's default save points).
            "--save",
            "",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("start the server");
    let pid = child.id();
    let mut server = Guard(child);
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut up = false;
    for _ in 0..500 {
        if command(addr, &[b"PING"]).is_ok_and(|r| r == b"+PONG\r\n") {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(up, "the server did not come up");
    assert_eq!(
        command(addr, &[b"SET", CANARY, b"alive"]).unwrap(),
        b"+OK\r\n"
    );
    let rss_start = rss_kb(pid).unwrap_or(0);

    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(rss_start));
    let sampler = {
        let (done, peak) = (done.clone(), peak.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Some(kb) = rss_kb(pid) {
                    peak.fetch_max(kb, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    let sent: Arc<[AtomicU64; 6]> = Arc::new(Default::default());
    let failed_connects = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(max_secs);
    let started = Instant::now();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (sent, failed) = (sent.clone(), failed_connects.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(0x5eed + t);
                for _ in 0..requests / THREADS {
                    if Instant::now() > deadline {
                        break;
                    }
                    let kind = rng.random_range(0..KINDS.len());
                    let bytes = request(kind, &mut rng);
                    if send(addr, &bytes).is_err() {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    sent[kind].fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let elapsed = started.elapsed();

    let alive = server.0.try_wait().unwrap().is_none();
    let pong = command(addr, &[b"PING"]).ok();
    let canary = command(addr, &[b"GET", CANARY]).ok();
    let rss_end = rss_kb(pid).unwrap_or(0);
    // What the server says it holds: its heap, the Lua interpreter's, and the keys.
    let info = command(addr, &[b"INFO", b"memory"]).unwrap_or_default();
    let info = String::from_utf8_lossy(&info);
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or("?")
            .to_string()
    };
    let dbsize = command(addr, &[b"DBSIZE"]).unwrap_or_default();
    let peak_kb = peak.load(Ordering::Relaxed);

    println!(
        "stress: {:.1}s against pid {pid} on {addr}",
        elapsed.as_secs_f64()
    );
    let total: u64 = sent.iter().map(|c| c.load(Ordering::Relaxed)).sum();
    for (k, name) in KINDS.iter().enumerate() {
        println!("  {:>7}  {name}", sent[k].load(Ordering::Relaxed));
    }
    println!(
        "  {total:>7}  requests in all ({} connections refused or failed)",
        failed_connects.load(Ordering::Relaxed)
    );
    println!(
        "  RSS: {} MiB at start, {} MiB peak, {} MiB at the end (limit {limit_mb} MiB)",
        rss_start / 1024,
        peak_kb / 1024,
        rss_end / 1024
    );
    println!(
        "  INFO memory: used_memory {} (human {}), used_memory_lua {}; DBSIZE {}",
        field("used_memory"),
        field("used_memory_human"),
        field("used_memory_lua"),
        String::from_utf8_lossy(&dbsize).trim()
    );
    println!(
        "  server alive: {alive}; PING: {:?}; canary: {:?}",
        pong.as_deref().map(String::from_utf8_lossy),
        canary.as_deref().map(String::from_utf8_lossy)
    );
    let ok = alive
        && pong.as_deref() == Some(b"+PONG\r\n")
        && canary.as_deref() == Some(b"$5\r\nalive\r\n")
        && peak_kb <= limit_mb * 1024
        && total >= requests.min(10_000);
    if ok {
        println!("stress: PASS");
    } else {
        println!("stress: FAIL");
        std::process::exit(1);
    }
}
