//! A script, a function or `EXEC` that writes more than once reaches the replicas and the AOF
//! between `MULTI` and `EXEC`, as in Redis 7.0, so that a replica or an AOF replay never
//! applies half of one; one write goes out bare, none goes out as nothing.
//!
//! The same commands run against latchkey and a real `redis-server`; what each sends down its
//! replication stream (read by a raw replica that sent `SYNC`, `persisted::ReplicationStream`) and appends to its AOF is
//! compared, command by command, with the other and with the sequence written out below.
//! Then a real `redis-server` replica and a latchkey replica follow a latchkey master through
//! the same commands and end with the same data.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use latchkey_server::Server;
use latchkey_tests::persisted::{latchkey_aof, temp_dir, ReplicationStream};
use latchkey_tests::{RawConn, RedisProcess};

/// A function library with a two-write function and a one-write function.
const LIBRARY: &str = "#!lua name=unitlib\n\
redis.register_function('two', function(keys) redis.call('set', keys[1], 'f1') redis.call('set', keys[2], 'f2') end)\n\
redis.register_function('one', function(keys) redis.call('set', keys[1], 'f3') end)";

/// The commands the tests send, in order (each a full command line).
fn workload() -> Vec<Vec<&'static str>> {
    vec![
        // A script with two writes, then one write, then none.
        vec![
            "EVAL",
            "redis.call('set', KEYS[1], '1') redis.call('set', KEYS[2], '2')",
            "2",
            "a",
            "b",
        ],
        vec!["EVAL", "redis.call('set', KEYS[1], '3')", "1", "c"],
        vec!["EVAL", "return redis.call('get', KEYS[1])", "1", "a"],
        // Functions: two writes, one write.
        vec!["FUNCTION", "LOAD", LIBRARY],
        vec!["FCALL", "two", "2", "d", "e"],
        vec!["FCALL", "one", "1", "f"],
        // Transactions: two writes, one write, none.
        vec!["MULTI"],
        vec!["SET", "g", "1"],
        vec!["SET", "h", "2"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["SET", "i", "1"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["GET", "i"],
        vec!["EXEC"],
        // A script that changes database between its writes.
        vec![
            "EVAL",
            "redis.call('set', KEYS[1], 'x') redis.call('select', '1') redis.call('set', KEYS[1], 'y')",
            "1",
            "k",
        ],
        // The end marker.
        vec!["SET", "end", "1"],
    ]
}

/// What the stream and the AOF carry for [`workload`] (command names in lowercase; the
/// `FUNCTION LOAD` is left out, see [`comparable`]).
fn expected() -> Vec<Vec<String>> {
    let lines: &[&[&str]] = &[
        &["select", "0"],
        &["multi"],
        &["set", "a", "1"],
        &["set", "b", "2"],
        &["exec"],
        &["set", "c", "3"],
        &["multi"],
        &["set", "d", "f1"],
        &["set", "e", "f2"],
        &["exec"],
        &["set", "f", "f3"],
        &["multi"],
        &["set", "g", "1"],
        &["set", "h", "2"],
        &["exec"],
        &["set", "i", "1"],
        &["multi"],
        &["set", "k", "x"],
        &["select", "1"],
        &["set", "k", "y"],
        &["exec"],
        &["select", "0"],
        &["set", "end", "1"],
    ];
    lines
        .iter()
        .map(|l| l.iter().map(|s| s.to_string()).collect())
        .collect()
}

/// A command as compared: its name in lowercase (Redis passes a script's `set` on as the
/// script spelled it; latchkey writes the effect as `SET`), `PING`s (sent by the master's
/// timer whenever it fires) and the `FUNCTION LOAD` left out.
fn comparable(commands: Vec<Vec<String>>) -> Vec<Vec<String>> {
    commands
        .into_iter()
        .map(|mut c| {
            c[0] = c[0].to_ascii_lowercase();
            c
        })
        .filter(|c| c[0] != "ping" && c[0] != "function")
        .collect()
}

fn send(c: &mut RawConn, args: &[&str]) -> String {
    String::from_utf8_lossy(&c.cmd(args)).into_owned()
}

/// Runs [`workload`], checking the replies that tell whether the commands ran.
fn run_workload(addr: SocketAddr) {
    let mut c = RawConn::connect(addr).unwrap();
    for args in workload() {
        let reply = send(&mut c, &args);
        assert!(!reply.starts_with('-'), "{args:?} failed: {reply}");
    }
}

/// Reads one RESP array of bulk strings (a command of an AOF).
fn read_command(r: &mut impl BufRead) -> std::io::Result<Vec<String>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let n: usize = line
        .strip_prefix('*')
        .and_then(|l| l.trim_end().parse().ok())
        .unwrap_or_else(|| panic!("not a command: {line:?}"));
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        line.clear();
        r.read_line(&mut line)?;
        let len: usize = line[1..].trim_end().parse().unwrap();
        let mut buf = vec![0; len + 2];
        r.read_exact(&mut buf)?;
        buf.truncate(len);
        out.push(String::from_utf8_lossy(&buf).into_owned());
    }
    Ok(out)
}

/// The stream's commands up to and including the end marker.
fn stream_until_end(stream: &mut ReplicationStream) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    loop {
        let c: Vec<String> = stream
            .next_args()
            .into_iter()
            .map(|a| String::from_utf8_lossy(&a).into_owned())
            .collect();
        let end = c.len() == 3 && c[0].eq_ignore_ascii_case("set") && c[1] == "end";
        out.push(c);
        if end {
            return out;
        }
    }
}

/// Every command of an AOF file.
fn aof_commands(path: &Path) -> Vec<Vec<String>> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = BufReader::new(&bytes[..]);
    let mut out = Vec::new();
    while !r.fill_buf().unwrap().is_empty() {
        out.push(read_command(&mut r).unwrap());
    }
    out
}

/// Polls `f` until it holds; panics with `what` after 20 s (a bound for a loaded machine, not
/// a speed check).
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_stream_wraps_units_of_several_writes_as_redis_does() {
    let redis = RedisProcess::spawn(&[]);
    let mut from_redis = ReplicationStream::open(redis.addr());
    run_workload(redis.addr());
    let redis_stream = comparable(stream_until_end(&mut from_redis));

    let latchkey = Server::builder().start_blocking().unwrap();
    let mut from_latchkey = ReplicationStream::open(latchkey.addr());
    run_workload(latchkey.addr());
    let latchkey_stream = comparable(stream_until_end(&mut from_latchkey));

    assert_eq!(
        latchkey_stream, redis_stream,
        "latchkey's stream vs redis-server's"
    );
    assert_eq!(latchkey_stream, expected());
}

#[test]
fn the_aof_wraps_units_of_several_writes_as_redis_does() {
    let redis_dir = temp_dir("units-redis");
    let redis = RedisProcess::spawn(&[
        "--appendonly",
        "yes",
        "--dir",
        redis_dir.path().to_str().unwrap(),
    ]);
    run_workload(redis.addr());
    // Redis 7's AOF is in parts: the commands since start are in the incremental file.
    let incr = std::fs::read_dir(redis_dir.path().join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .expect("redis-server's incremental AOF");
    let redis_aof = comparable(aof_commands(&incr));

    let dir = temp_dir("units-latchkey");
    let latchkey = latchkey_aof(dir.path());
    run_workload(latchkey.addr());
    let latchkey_file = comparable(aof_commands(&dir.path().join("appendonly.aof")));

    assert_eq!(latchkey_file, redis_aof, "latchkey's AOF vs redis-server's");
    assert_eq!(latchkey_file, expected());

    // Replayed at a restart, the AOF gives back every write.
    drop(latchkey);
    let restarted = latchkey_aof(dir.path());
    let mut c = RawConn::connect(restarted.addr()).unwrap();
    assert_eq!(send(&mut c, &["MGET", "a", "b", "c", "d", "e", "f", "g", "h", "i", "k"]),
        "*10\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\nf1\r\n$2\r\nf2\r\n$2\r\nf3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n1\r\n$1\r\nx\r\n");
    assert_eq!(send(&mut c, &["SELECT", "1"]), "+OK\r\n");
    assert_eq!(send(&mut c, &["GET", "k"]), "$1\r\ny\r\n");
}

/// Both kinds of replica apply latchkey's transactions and end with the master's data.
#[test]
fn redis_and_latchkey_replicas_apply_the_transactions() {
    let master = Server::builder().start_blocking().unwrap();
    let port = master.addr().port().to_string();
    let redis = RedisProcess::spawn(&["--replicaof", "127.0.0.1", &port]);
    let replica = Server::builder().start_blocking().unwrap();
    let mut r = RawConn::connect(replica.addr()).unwrap();
    assert_eq!(send(&mut r, &["REPLICAOF", "127.0.0.1", &port]), "+OK\r\n");
    let mut m = RawConn::connect(master.addr()).unwrap();
    until("two replicas online", || {
        send(&mut m, &["INFO", "replication"]).contains("connected_slaves:2")
            && send(&mut m, &["INFO", "replication"])
                .matches("state=online")
                .count()
                == 2
    });
    run_workload(master.addr());
    let mut rr = RawConn::connect(redis.addr()).unwrap();
    for c in [&mut rr, &mut r] {
        until("the end marker on the replica", || {
            send(c, &["GET", "end"]) == "$1\r\n1\r\n"
        });
        assert_eq!(send(c, &["MGET", "a", "b", "c", "d", "e", "f", "g", "h", "i", "k"]),
            "*10\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$2\r\nf1\r\n$2\r\nf2\r\n$2\r\nf3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n1\r\n$1\r\nx\r\n");
        assert_eq!(send(c, &["SELECT", "1"]), "+OK\r\n");
        assert_eq!(send(c, &["GET", "k"]), "$1\r\ny\r\n");
        assert_eq!(send(c, &["SELECT", "0"]), "+OK\r\n");
    }
}
