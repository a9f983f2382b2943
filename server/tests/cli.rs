//! The `latchkey-server` binary, driven by Redis's own tools: `redis-cli` and
//! `redis-benchmark` must work against it unmodified.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use latchkey_testkit::free_port;

struct ServerProcess {
    child: Child,
    port: u16,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli is installed (apt-get install redis-tools)");
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

fn start(extra: &[&str]) -> ServerProcess {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_latchkey-server"))
        .args(["--port", &port.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn latchkey-server");
    let pid = format!("process_id:{}", child.id());
    let server = ServerProcess { child, port };
    let deadline = Instant::now() + Duration::from_secs(10);
    // Up means this child answers, not another server that took the port first.
    while !cli(port, &["INFO", "server"])
        .lines()
        .any(|l| l.trim() == pid)
    {
        assert!(
            Instant::now() < deadline,
            "latchkey-server did not answer INFO"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

#[test]
fn redis_cli_works_unmodified() {
    let s = start(&[]);
    assert_eq!(
        cli(s.port, &["SET", "lock", "tok", "NX", "PX", "30000"]),
        "OK"
    );
    assert_eq!(
        cli(s.port, &["SET", "lock", "tok", "NX", "PX", "30000"]),
        ""
    );
    assert_eq!(cli(s.port, &["GET", "lock"]), "tok");
    let ttl: i64 = cli(s.port, &["PTTL", "lock"]).parse().unwrap();
    assert!(ttl > 0 && ttl <= 30000);
    assert!(cli(s.port, &["INFO", "server"]).contains("redis_version:"));
    assert_eq!(cli(s.port, &["--raw", "HSET", "h", "a", "1"]), "1");
    assert_eq!(
        cli(
            s.port,
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "lock"]
        ),
        "tok"
    );
    assert_eq!(
        cli(s.port, &["CONFIG", "GET", "maxclients"]),
        "maxclients\n10000"
    );
}

#[test]
fn redis_benchmark_completes_every_row() {
    let s = start(&[]);
    let out = Command::new("redis-benchmark")
        .args(["-p", &s.port.to_string(), "-q", "-n", "2000", "-c", "10"])
        .args(["-t", "ping,set,get,incr,lpush,rpush,lpop,rpop,hset,mset"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("redis-benchmark is installed (apt-get install redis-tools)");
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "\n");
    for row in [
        "PING_INLINE",
        "PING_MBULK",
        "SET",
        "GET",
        "INCR",
        "LPUSH",
        "RPUSH",
        "LPOP",
        "RPOP",
        "HSET",
        "MSET (10 keys)",
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{row}:")) && l.contains("requests per second"))
            .unwrap_or_else(|| panic!("no result row for {row} in:\n{text}"));
        assert!(!line.contains(" 0.00 requests"), "{line}");
    }
}

#[test]
fn maxclients_and_shutdown_over_the_wire() {
    let mut s = start(&["--maxclients", "2"]);
    // redis-cli's own connection counts: with one held open, a third is refused.
    let held = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let held2 = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(cli(s.port, &["PING"]), "ERR max number of clients reached");
    drop((held, held2));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(cli(s.port, &["PING"]), "PONG");
    // Redis answers nothing: the connection closes as the server exits.
    assert_eq!(cli(s.port, &["SHUTDOWN", "NOSAVE"]), "");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(status)) = s.child.try_wait() {
            assert!(status.success(), "latchkey-server exited with {status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "SHUTDOWN did not stop the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn redis_server_style_flags_are_accepted() {
    let s = start(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--hz",
        "10",
        "--bind",
        "127.0.0.1",
    ]);
    assert_eq!(cli(s.port, &["CONFIG", "GET", "hz"]), "hz\n10");
    assert_eq!(cli(s.port, &["CONFIG", "GET", "save"]), "save");
}

/// `io-threads` is Redis's directive, read at start only: one by default, the number given
/// otherwise, refused by `CONFIG SET` with Redis's words, and out of range refused at start.
#[test]
fn io_threads_is_read_at_start_as_in_redis() {
    let s = start(&[]);
    assert_eq!(
        cli(s.port, &["CONFIG", "GET", "io-threads"]),
        "io-threads\n1"
    );
    assert_eq!(
        cli(s.port, &["CONFIG", "SET", "io-threads", "2"]),
        "ERR CONFIG SET failed (possibly related to argument 'io-threads') - can't set immutable config"
    );
    let s = start(&["--io-threads", "3"]);
    assert_eq!(
        cli(s.port, &["CONFIG", "GET", "io-threads"]),
        "io-threads\n3"
    );
    let status = Command::new(env!("CARGO_BIN_EXE_latchkey-server"))
        .args(["--port", &free_port().to_string(), "--io-threads", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run latchkey-server");
    assert!(!status.success(), "io-threads 0 must stop the start");
}

/// One RESP command, written without waiting for its reply.
fn send(s: &mut std::net::TcpStream, args: &[&str]) {
    use std::io::Write;
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(out.as_bytes()).expect("send");
}

/// The next reply on `s`: one line, or a bulk string's contents.
fn reply(s: &mut std::io::BufReader<std::net::TcpStream>) -> String {
    use std::io::{BufRead, Read};
    let mut line = String::new();
    s.read_line(&mut line).expect("reply");
    let line = line.trim_end().to_string();
    match line.strip_prefix('$').map(str::parse::<i64>) {
        Some(Ok(n)) if n >= 0 => {
            let mut data = vec![0; n as usize + 2];
            s.read_exact(&mut data).expect("bulk");
            String::from_utf8_lossy(&data[..n as usize]).into_owned()
        }
        _ => line,
    }
}

/// With one io-thread (the default), a command one client sent before another client's runs
/// first, as on redis-server's event loop: a `SET` sent without reading its reply, then at
/// once a `GET` of the same key from a second connection, sees the value. Tests written for
/// Redis count on it (Redis's own suite does, with its deferring clients). Before the
/// runtime's LIFO slot was turned off, the `GET` ran first in most rounds (1,450 of 2,000 in a
/// run here); the bound leaves room for a rare reordering outside the server (redis-server
/// showed up to a few percent here on a loaded machine).
#[test]
fn commands_from_two_clients_run_in_arrival_order() {
    let s = start(&[]);
    let connect = || {
        let c = std::net::TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        c.set_nodelay(true).expect("nodelay");
        let r = std::io::BufReader::new(c.try_clone().expect("clone"));
        (c, r)
    };
    let ((mut a, mut ar), (mut b, mut br)) = (connect(), connect());
    let rounds = 1000;
    let mut reordered = 0;
    for i in 0..rounds {
        let v = i.to_string();
        send(&mut a, &["SET", "k", &v]);
        send(&mut b, &["GET", "k"]);
        if reply(&mut br) != v {
            reordered += 1;
        }
        assert_eq!(reply(&mut ar), "+OK");
    }
    assert!(
        reordered <= rounds / 50,
        "{reordered} of {rounds} GETs ran before the SET sent before them"
    );
}
