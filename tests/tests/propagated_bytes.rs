//! The bytes a write leaves in the AOF and sends down the replication stream, compared with
//! what a real redis-server 7.0 writes for the same commands.
//!
//! Redis 7.0 propagates a command as its client sent it (`set`, lowercase, stays `set`), except
//! where it rewrites it to make it deterministic: a `SET` with an expiry becomes
//! `SET k v PXAT <ms>` (its `NX`/`XX`/`GET`/`KEEPTTL` dropped), `SET ... GET` loses its
//! `GET`s, `SETEX`/`PSETEX` become `SET ... PXAT`, `GETSET` becomes `SET`, `GETDEL` `DEL`,
//! `GETEX` `PEXPIREAT`/`PERSIST`/`DEL`, the `EXPIRE` family `PEXPIREAT` with its options
//! kept (or `DEL` for a time in the past), the float increments the value they stored. So
//! each test runs one list of commands on both servers and compares, command for command and
//! byte for byte, what they wrote.
//!
//! Absolute times the test gives (`PXAT 4102444800000`, in 2100) are compared as they are.
//! The deadlines a relative expiry (`EX 100`) becomes depend on each server's clock, so only
//! timestamps within a day of now are replaced by a placeholder before comparing.

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use latchkey_server::Server;
use latchkey_tests::persisted::{latchkey_aof, redis_aof, temp_dir, ReplicationStream};
use latchkey_tests::{RawConn, RedisProcess};

/// One propagated command, its arguments as raw bytes.
type Command = Vec<Vec<u8>>;

/// The commands compared: the whole `SET` family with its options (their case as sent), the
/// commands Redis rewrites, and a few it does not. Commands that change nothing (a failed
/// `NX`, `GETEX` without options) must propagate nothing on either server.
const COMMANDS: &[&str] = &[
    "SET k1 v",
    "set k2 v",
    "Set k3 v NX",
    "SET k3 v2 XX",
    "set k3 v3 xx GET",
    "SET k4 v GET",
    "SET k4 v NX GET",
    "SET k4 w get get",
    "SET k5 v EX 100",
    "SET k5 v px 100000 NX",
    "SET k6 v PX 100000 XX",
    "set k5 v2 PX 100000 XX GET",
    "SET k7 v EXAT 4102444800",
    "SET k8 v PXAT 4102444800000 GET",
    "SET k8 w KEEPTTL",
    "set k8 x keepttl get",
    "SET k9 v get nx",
    "SET get get get",
    "SET k7 v2 nx",
    "SETEX k11 100 v",
    "setex k11 100 v",
    "PSETEX k12 100000 v",
    "SETNX k13 v",
    "setnx k13 v",
    "GETSET k13 w",
    "getset k14 w",
    "GETDEL k14",
    "getdel k14",
    "GETEX k13 EX 100",
    "getex k13 pxat 4102444800000",
    "GETEX k13 PXAT 4102444800000",
    "getex k13 persist",
    "GETEX k13 PERSIST",
    "GETEX k13",
    "GETEX k5 EXAT 1",
    "EXPIRE k1 100",
    "expire k1 100 NX",
    "pexpire k1 200000 XX",
    "expireat k1 4102444800 gt",
    "pexpireat k1 4102444800001",
    "PEXPIREAT k1 4102444800002 LT",
    "EXPIRE k1 50 GT",
    "PERSIST k1",
    "persist k1",
    "EXPIRE k2 -1",
    "pexpireat k3 1",
    "INCRBYFLOAT f 1.5",
    "incrbyfloat f 2.25",
    "HINCRBYFLOAT h f 1.5",
    "hset h g v",
    "MULTI",
    "set a 1",
    "SET b 2 EX 100",
    "getset a 3",
    "EXEC",
    "SADD s only",
    "MULTI",
    "spop s",
    "set c 1",
    "EXEC",
    "EVAL \"redis.call('set', KEYS[1], '1', 'ex', '100'); return redis.call('getdel', KEYS[2])\" 2 e1 k9",
    "EVAL \"return redis.call('set', KEYS[1], '1', 'get')\" 1 e2",
    "select 3",
    "set three 3 px 100000",
    "SELECT 0",
];

/// Splits a line of [`COMMANDS`] on spaces, keeping a double-quoted argument whole.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        rest = rest.trim_start();
        if let Some(q) = rest.strip_prefix('"') {
            let end = q.find('"').expect("closing quote");
            out.push(q[..end].to_string());
            rest = &q[end + 1..];
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    out
}

/// Runs [`COMMANDS`] then `SET end 1` on the server at `addr`.
fn run_commands(addr: SocketAddr) {
    let mut c = RawConn::connect(addr).expect("connect");
    for line in COMMANDS.iter().chain(&["SET end 1"]) {
        c.cmd(&words(line));
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The commands with every timestamp within a day of now replaced by `<now+>`: the deadlines
/// relative expiries became, which differ by the servers' clocks.
fn normalized(commands: &[Command]) -> Vec<Command> {
    let now = now_ms();
    commands
        .iter()
        .map(|c| {
            c.iter()
                .map(|a| {
                    let n = std::str::from_utf8(a)
                        .ok()
                        .and_then(|s| s.parse::<i64>().ok());
                    match n {
                        Some(t) if a.len() >= 12 && (t - now).abs() < 86_400_000 => {
                            b"<now+>".to_vec()
                        }
                        _ => a.clone(),
                    }
                })
                .collect()
        })
        .collect()
}

/// Parses RESP commands from `bytes`, checking that each is encoded as Redis encodes them
/// (`*n`, then `$len` and the bytes for each argument) and that nothing is left over.
fn parse_commands(mut bytes: &[u8]) -> Vec<Command> {
    let mut out = Vec::new();
    let line = |b: &mut &[u8]| -> String {
        let end = b.windows(2).position(|w| w == b"\r\n").expect("a line");
        let l = String::from_utf8(b[..end].to_vec()).unwrap();
        *b = &b[end + 2..];
        l
    };
    while !bytes.is_empty() {
        let head = line(&mut bytes);
        let n: usize = head
            .strip_prefix('*')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not a command: {head:?}"));
        let mut args = Vec::with_capacity(n);
        for _ in 0..n {
            let len: usize = line(&mut bytes)[1..].parse().expect("a bulk length");
            args.push(bytes[..len].to_vec());
            assert_eq!(&bytes[len..len + 2], b"\r\n");
            bytes = &bytes[len + 2..];
        }
        out.push(args);
    }
    out
}

fn show(commands: &[Command]) -> Vec<String> {
    commands
        .iter()
        .map(|c| {
            c.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// Asserts that latchkey wrote what redis-server wrote, command for command and argument for
/// argument, after [`normalized`].
#[track_caller]
fn same_commands(ours: &[Command], theirs: &[Command]) {
    let (ours, theirs) = (normalized(ours), normalized(theirs));
    assert_eq!(
        show(&ours),
        show(&theirs),
        "latchkey's commands, then redis-server's"
    );
}

// ---------------------------------------------------------------------------------------------
// The replication stream

/// The stream's commands up to the closing `SET end 1` (left out), less the link's own
/// `PING`s, which each server sends on its own clock.
fn until_end(stream: &mut ReplicationStream) -> Vec<Command> {
    let mut got = Vec::new();
    loop {
        let cmd = parse_commands(&stream.next_raw()).remove(0);
        if cmd == [&b"SET"[..], b"end", b"1"] {
            return got;
        }
        if !cmd[0].eq_ignore_ascii_case(b"PING") {
            got.push(cmd);
        }
    }
}

fn stream_of(addr: SocketAddr) -> Vec<Command> {
    let mut stream = ReplicationStream::open(addr);
    run_commands(addr);
    until_end(&mut stream)
}

/// The replication stream carries latchkey's writes as redis-server's carries them.
#[test]
fn the_stream_carries_the_commands_as_redis_sends_them() {
    let redis = RedisProcess::spawn(&[]);
    let latchkey = Server::builder().start_blocking().expect("start latchkey");
    let theirs = stream_of(redis.addr());
    // What Redis does, stated here so that the test shows it: the case of a command not
    // rewritten is kept; a relative expiry becomes `PXAT`, dropping the other options.
    let shown = show(&normalized(&theirs));
    for expected in [
        "set k2 v",
        "Set k3 v NX",
        "set k3 v3 xx",
        "SET k5 v PXAT <now+>",
        "SET k8 w KEEPTTL",
        "SET k13 w",
        "DEL k14",
        "PEXPIREAT k1 <now+> XX",
        "DEL k2",
    ] {
        assert!(
            shown.iter().any(|l| l == expected),
            "redis-server sent no {expected:?}: {shown:#?}"
        );
    }
    same_commands(&stream_of(latchkey.addr()), &theirs);
}

/// With `lazyfree-lazy-expire yes` an expiry in the past deletes the key as an `UNLINK`.
#[test]
fn the_stream_says_unlink_for_a_past_expiry_under_lazy_expire() {
    let redis = RedisProcess::spawn(&["--lazyfree-lazy-expire", "yes"]);
    let latchkey = Server::builder()
        .config("lazyfree-lazy-expire", "yes")
        .start_blocking()
        .expect("start latchkey");
    let theirs = stream_of(redis.addr());
    assert!(show(&theirs).iter().any(|l| l == "UNLINK k2"));
    same_commands(&stream_of(latchkey.addr()), &theirs);
}

// ---------------------------------------------------------------------------------------------
// The AOF

/// The AOF holds latchkey's writes as redis-server's holds them (`appendfsync always`, and
/// no RDB preamble, so both files are commands only), and the two files have the same length
/// apart from the digits of the relative deadlines.
#[test]
fn the_aof_holds_the_commands_as_redis_writes_them() {
    let redis = RedisProcess::spawn(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--aof-use-rdb-preamble",
        "no",
    ]);
    let dir = temp_dir("aof-bytes");
    let latchkey = latchkey_aof(dir.path());
    run_commands(redis.addr());
    run_commands(latchkey.addr());
    let theirs = redis_aof(redis.dir());
    let ours = std::fs::read(dir.path().join("appendonly.aof")).unwrap();
    same_commands(&parse_commands(&ours), &parse_commands(&theirs));
    assert_eq!(ours.len(), theirs.len(), "the files' lengths");
    drop(latchkey);
    // And the file latchkey wrote brings the same keys back.
    let again = latchkey_aof(dir.path());
    let mut c = RawConn::connect(again.addr()).unwrap();
    let mut r = RawConn::connect(redis.addr()).unwrap();
    for key in [
        "k1", "k3", "k4", "k8", "k13", "f", "a", "b", "c", "e1", "e2", "get",
    ] {
        assert_eq!(c.cmd(&["GET", key]), r.cmd(&["GET", key]), "GET {key}");
        // A TTL or none, alike (the milliseconds left differ by the servers' clocks).
        let ttl = |c: &mut RawConn| c.cmd(&["PTTL", key]).starts_with(b":-");
        assert_eq!(ttl(&mut c), ttl(&mut r), "PTTL {key}");
    }
    assert_eq!(c.cmd(&["HGETALL", "h"]), r.cmd(&["HGETALL", "h"]));
}
