//! `MIGRATE` against a real redis-server 7.0, in every direction: latchkey → redis-server,
//! redis-server → latchkey, latchkey → latchkey (and redis-server → redis-server, the
//! reference). Both sources, a redis-server and a latchkey, run the same commands, each
//! migrating to a target of its own of the same kind; their replies must be the same bytes,
//! and so must what the two targets then hold and what stays on the sources.
//!
//! Also: a target that accepts and never answers (`IOERR` after the timeout, on both), and,
//! on latchkey, other clients served while a `MIGRATE` waits on such a target.

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc;

use latchkey_server::{BlockingServer, Server};
use latchkey_tests::diff::split_args;
use latchkey_tests::raw::show;
use latchkey_tests::{Diff, RawConn, RedisProcess};

/// The kind of server a target is.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Redis,
    Latchkey,
}

/// A target server of either kind, kept alive for the test.
enum Target {
    Redis(RedisProcess),
    Latchkey(BlockingServer),
}

impl Target {
    fn start(kind: Kind) -> Target {
        match kind {
            Kind::Redis => Target::Redis(RedisProcess::spawn(&[])),
            Kind::Latchkey => {
                Target::Latchkey(Server::builder().start_blocking().expect("start latchkey"))
            }
        }
    }

    fn addr(&self) -> SocketAddr {
        match self {
            Target::Redis(r) => r.addr(),
            Target::Latchkey(l) => l.addr(),
        }
    }

    fn conn(&self) -> RawConn {
        RawConn::connect(self.addr()).expect("connect the target")
    }
}

/// Two sources (in the [`Diff`]) and one target for each, both of one kind.
struct Setup {
    diff: Diff,
    /// The redis-server source's target.
    for_redis: Target,
    /// The latchkey source's target.
    for_latchkey: Target,
}

impl Setup {
    fn new(kind: Kind) -> Setup {
        Setup {
            diff: Diff::new(),
            for_redis: Target::start(kind),
            for_latchkey: Target::start(kind),
        }
    }

    /// Runs `line` on both sources, `PORT` replaced by each source's target port, and
    /// checks the replies are the same bytes.
    #[track_caller]
    fn source(&mut self, line: &str) -> Vec<u8> {
        let args = |port: u16| -> Vec<String> {
            split_args(line)
                .into_iter()
                .map(|a| a.replace("PORT", &port.to_string()))
                .collect()
        };
        let r = self.diff.redis.cmd(&args(self.for_redis.addr().port()));
        let l = self
            .diff
            .latchkey
            .cmd(&args(self.for_latchkey.addr().port()));
        assert!(
            r == l,
            "reply differs for {line}\n  redis:    {}\n  latchkey: {}",
            show(&r),
            show(&l)
        );
        r
    }

    /// Runs `line` on both targets and checks they answer the same bytes.
    #[track_caller]
    fn target(&mut self, line: &str) -> Vec<u8> {
        let args = split_args(line);
        let r = self.for_redis.conn().cmd(&args);
        let l = self.for_latchkey.conn().cmd(&args);
        assert!(
            r == l,
            "targets differ for {line}\n  redis's target:    {}\n  latchkey's target: {}",
            show(&r),
            show(&l)
        );
        r
    }
}

/// A key of every type and encoding both servers hold, on both sources.
fn fill(s: &mut Setup) {
    let mut lines: Vec<String> = [
        "FLUSHALL",
        "SET str hello",
        "SET int 12345",
        "SET long xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "RPUSH list a b c 1 2 3",
        "HSET hash f1 v1 f2 v2",
        "SADD iset 3 1 2 -7 70000",
        "SADD sset a b c",
        "ZADD zset 1 a 2.5 b -3 c",
        "XADD stream 1-1 f v",
        "XADD stream 2-1 g w",
        "XGROUP CREATE stream grp 0",
        "XREADGROUP GROUP grp alice COUNT 1 STREAMS stream >",
        "PFADD hll a b c d",
        "PEXPIRE list 100000",
    ]
    .iter()
    .map(|l| l.to_string())
    .collect();
    // Large ones, in the other encodings (quicklist, hashtable, skiplist).
    let many =
        |prefix: &str, n: usize| -> String { (0..n).map(|i| format!(" {prefix}{i}")).collect() };
    lines.push(format!("RPUSH biglist{}", many("element-", 300)));
    lines.push(format!(
        "HSET bighash{}",
        (0..300).map(|i| format!(" f{i} v{i}")).collect::<String>()
    ));
    lines.push(format!("SADD bigset{}", many("m", 300)));
    lines.push(format!(
        "ZADD bigzset{}",
        (0..300).map(|i| format!(" {i} m{i}")).collect::<String>()
    ));
    for l in &lines {
        s.source(l);
    }
}

/// What a target must hold after every key was migrated, read back on both targets.
const READ_BACK: &[&str] = &[
    "DBSIZE",
    "GET str",
    "GET int",
    "GET long",
    "LRANGE list 0 -1",
    "HMGET hash f1 f2",
    "SORT iset",
    "SORT sset ALPHA",
    "ZRANGE zset 0 -1 WITHSCORES",
    "XRANGE stream - +",
    "XPENDING stream grp",
    "PFCOUNT hll",
    "LRANGE biglist 0 -1",
    "HLEN bighash",
    "HMGET bighash f0 f150 f299",
    "SCARD bigset",
    "SISMEMBER bigset m299",
    "ZRANGE bigzset 0 -1 WITHSCORES",
    "TYPE hll",
    "TYPE stream",
];

/// Every key, one `MIGRATE` each, then all read back on the targets.
fn every_type_one_by_one(kind: Kind) {
    let mut s = Setup::new(kind);
    fill(&mut s);
    for key in [
        "str", "int", "long", "list", "hash", "iset", "sset", "zset", "stream", "hll", "biglist",
        "bighash", "bigset", "bigzset",
    ] {
        s.source(&format!("MIGRATE 127.0.0.1 PORT {key} 0 5000"));
        s.source(&format!("EXISTS {key}"));
    }
    for line in READ_BACK {
        s.target(line);
    }
    // The TTL went along, as a relative one: the same in seconds on both targets (their
    // milliseconds differ by the time between the two migrations), and in range.
    s.target("TTL list");
    let ttl = s.for_latchkey.conn().cmd(&split_args("PTTL list"));
    let ms: i64 = String::from_utf8_lossy(&ttl[1..ttl.len() - 2])
        .parse()
        .unwrap_or(-1);
    assert!(
        (1..=100_000).contains(&ms),
        "PTTL list on the targets: {ms}"
    );
    s.source("DBSIZE");
}

#[test]
fn every_type_moves_from_both_sources_to_redis_server() {
    every_type_one_by_one(Kind::Redis);
}

#[test]
fn every_type_moves_from_both_sources_to_latchkey() {
    every_type_one_by_one(Kind::Latchkey);
}

/// The options and errors, the `KEYS` form, `COPY`, `REPLACE`, a target that refuses
/// (`BUSYKEY`, a database out of range), `AUTH` and `AUTH2`, in one conversation per target
/// kind (so the cached connection and its selected database are exercised too).
fn options_and_errors(kind: Kind) {
    let mut s = Setup::new(kind);
    fill(&mut s);
    for line in [
        // Syntax and argument errors, before anything is sent.
        "MIGRATE 127.0.0.1 PORT str 0 5000 BOGUS",
        "MIGRATE 127.0.0.1 PORT str 0 5000 AUTH",
        "MIGRATE 127.0.0.1 PORT str 0 5000 AUTH2 user",
        "MIGRATE 127.0.0.1 PORT str 0 5000 KEYS str",
        "MIGRATE 127.0.0.1 PORT str x 5000",
        "MIGRATE 127.0.0.1 PORT str 0 x",
        "MIGRATE 127.0.0.1 PORT str x x",
        "MIGRATE 127.0.0.1 PORT str 0",
        "MIGRATE 127.0.0.1 PORT nokey 0 5000",
        "MIGRATE 127.0.0.1 PORT '' 0 5000 KEYS nokey other",
        "MIGRATE 127.0.0.1 PORT '' 0 5000 KEYS",
        "MIGRATE 127.0.0.1 PORT '' 0 5000",
        // The keys the command names, as Redis finds them.
        "COMMAND GETKEYS MIGRATE 127.0.0.1 PORT str 0 5000",
        "COMMAND GETKEYS MIGRATE 127.0.0.1 PORT '' 0 5000 AUTH keys KEYS a b",
        "COMMAND GETKEYS MIGRATE 127.0.0.1 PORT '' 0 5000 AUTH2 keys keys KEYS a",
        "COMMAND GETKEYS MIGRATE 127.0.0.1 PORT x 0 5000 KEYS a",
        // COPY keeps the source; a second copy meets BUSYKEY, REPLACE overwrites.
        "MIGRATE 127.0.0.1 PORT str 0 5000 COPY",
        "EXISTS str",
        "MIGRATE 127.0.0.1 PORT str 0 5000 COPY",
        "SET str changed",
        "MIGRATE 127.0.0.1 PORT str 0 5000 COPY REPLACE",
        "MIGRATE 127.0.0.1 PORT str 0 5000",
        "EXISTS str",
        // Another database, then an invalid one (the target's error is forwarded).
        "MIGRATE 127.0.0.1 PORT int 3 5000 COPY",
        "MIGRATE 127.0.0.1 PORT int 99 5000",
        "EXISTS int",
        "MIGRATE 127.0.0.1 PORT int -1 5000",
        // The KEYS form: the ones the target accepted go, the refused one stays.
        "MIGRATE 127.0.0.1 PORT '' 3 5000 KEYS list int hash nokey",
        "EXISTS list int hash",
        "SET list again",
        "MIGRATE 127.0.0.1 PORT '' 0 5000 REPLACE KEYS list sset zset",
        "EXISTS list sset zset",
        // AUTH to a target without a password.
        "MIGRATE 127.0.0.1 PORT iset 0 5000 AUTH secret",
        "MIGRATE 127.0.0.1 PORT iset 0 5000 AUTH2 default secret",
        "MIGRATE 127.0.0.1 PORT iset 0 5000 AUTH2 nobody secret",
        "EXISTS iset",
        // Inside MULTI, and from a script: allowed, and done in place.
        "MULTI",
        "MIGRATE 127.0.0.1 PORT iset 0 5000",
        "EXISTS iset",
        "EXEC",
        "EVAL \"return redis.call('migrate', '127.0.0.1', ARGV[1], 'stream', '0', '5000')\" 0 PORT",
        "EXISTS stream",
        "DBSIZE",
    ] {
        s.source(line);
    }
    for line in READ_BACK {
        s.target(line);
    }
    for line in [
        "SELECT 3",
        "DBSIZE",
        "GET int",
        "LRANGE list 0 -1",
        "HMGET hash f1 f2",
    ] {
        s.target(line);
    }
    // A target with a password: refused without it, accepted with it. The connection the
    // last MIGRATE left cached is still open and unauthenticated.
    s.target("CONFIG SET requirepass secret");
    for line in [
        "MIGRATE 127.0.0.1 PORT bighash 0 5000",
        "MIGRATE 127.0.0.1 PORT bighash 0 5000 AUTH wrong",
        "MIGRATE 127.0.0.1 PORT bighash 0 5000 AUTH secret",
        "MIGRATE 127.0.0.1 PORT bigset 0 5000 AUTH2 default secret",
        "EXISTS bighash bigset",
    ] {
        s.source(line);
    }
}

#[test]
fn options_and_errors_match_redis_with_a_redis_server_target() {
    options_and_errors(Kind::Redis);
}

#[test]
fn options_and_errors_match_redis_with_a_latchkey_target() {
    options_and_errors(Kind::Latchkey);
}

/// A listener that accepts connections and reads what is sent, never answering. Each
/// accepted connection is reported on the channel once its first bytes arrived.
fn silent_target() -> (SocketAddr, mpsc::Receiver<std::net::TcpStream>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut first = [0u8; 1];
            if conn.read_exact(&mut first).is_ok() && tx.send(conn).is_err() {
                return;
            }
        }
    });
    (addr, rx)
}

/// Sends, on a connection of its own, a `MIGRATE` of `k` from `server` to a silent target
/// with a ten-minute timeout, without reading the reply: the connection, and the target's
/// accepted connections.
fn migrate_to_silent_target(
    server: &BlockingServer,
) -> (RawConn, mpsc::Receiver<std::net::TcpStream>) {
    let (addr, accepted) = silent_target();
    let port = addr.port().to_string();
    let mut migrating = RawConn::connect(server.addr()).unwrap();
    migrating.send_raw(&RawConn::encode(&[
        "MIGRATE",
        "127.0.0.1",
        &port,
        "k",
        "0",
        "600000",
    ]));
    (migrating, accepted)
}

#[test]
fn a_silent_target_gives_redis_s_ioerr_after_the_timeout() {
    let mut d = Diff::new();
    let (addr, _accepted) = silent_target();
    let port = addr.port().to_string();
    d.table(&["SET k v", "RPUSH l a b"]);
    for migrate in [
        vec!["MIGRATE", "127.0.0.1", &port, "k", "0", "200"],
        vec![
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "0",
            "200",
            "KEYS",
            "k",
            "l",
        ],
        vec!["MIGRATE", "127.0.0.1", &port, "k", "0", "200", "AUTH", "pw"],
    ] {
        d.check(&migrate);
    }
    d.table(&["EXISTS k l", "INFO keyspace"]);
    // A port nothing listens on: Redis reports the refused connection as a failed write.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port().to_string();
    drop(closed);
    d.check(&["MIGRATE", "127.0.0.1", &closed_port, "k", "0", "200"]);
    d.check(&["MIGRATE", "127.0.0.1", "not-a-port", "k", "0", "200"]);
}

/// While a `MIGRATE` waits on a target that does not answer, latchkey serves its other
/// clients (Redis would stand still until the timeout): they read and write, even the keys
/// being migrated. When the target goes away, the `MIGRATE` fails and the key stays.
#[test]
fn other_clients_are_served_while_migrate_waits() {
    let server = Server::builder().start_blocking().expect("start latchkey");
    let mut c = RawConn::connect(server.addr()).unwrap();
    assert_eq!(c.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    let (mut migrating, accepted) = migrate_to_silent_target(&server);
    // The request reached the target: the MIGRATE is waiting for its answer now.
    let conn = accepted.recv().expect("the MIGRATE connects");
    for _ in 0..100 {
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
        assert_eq!(c.cmd(&["INCR", "n"])[0], b':');
        assert_eq!(c.cmd(&["GET", "k"]), b"$1\r\nv\r\n");
    }
    // The target closes the connection: one retry, refused, and Redis's error.
    drop(conn);
    drop(accepted);
    assert_eq!(
        migrating.read_reply(),
        b"-IOERR error or timeout reading to target instance\r\n"
    );
    assert_eq!(c.cmd(&["EXISTS", "k"]), b":1\r\n");
}

/// A key changed while its `MIGRATE` waited for the target is kept: the target got the older
/// value, and the newer write is not lost.
#[test]
fn a_key_changed_during_the_migration_is_not_deleted() {
    let server = Server::builder().start_blocking().expect("start latchkey");
    let target = Server::builder().start_blocking().expect("start target");
    let mut c = RawConn::connect(server.addr()).unwrap();
    assert_eq!(c.cmd(&["SET", "k", "old"]), b"+OK\r\n");
    let (mut migrating, accepted) = migrate_to_silent_target(&server);
    let mut conn = accepted.recv().expect("the MIGRATE connects");
    assert_eq!(c.cmd(&["SET", "k", "new"]), b"+OK\r\n");
    // Now the silent target answers, as a real one would: SELECT, then RESTORE.
    std::io::Write::write_all(&mut conn, b"+OK\r\n+OK\r\n").unwrap();
    assert_eq!(migrating.read_reply(), b"+OK\r\n");
    assert_eq!(c.cmd(&["GET", "k"]), b"$3\r\nnew\r\n");
    // And an unchanged key does go.
    let tport = target.addr().port().to_string();
    assert_eq!(
        c.cmd(&["MIGRATE", "127.0.0.1", &tport, "k", "0", "5000"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["EXISTS", "k"]), b":0\r\n");
    let mut t = RawConn::connect(target.addr()).unwrap();
    assert_eq!(t.cmd(&["GET", "k"]), b"$3\r\nnew\r\n");
    assert!(
        String::from_utf8_lossy(&c.cmd(&["INFO", "stats"])).contains("migrate_cached_sockets:2")
    );
}
