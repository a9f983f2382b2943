//! `SWAPDB` against a real redis-server: replies compared byte for byte (RESP2 and RESP3), the
//! clients blocked on a key that the swap brings (served, or left waiting when the value is of
//! another type), `WATCH`, and what the replication stream carries.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use latchkey_server::Server;
use latchkey_tests::persisted::ReplicationStream;
use latchkey_tests::{Diff, RawConn, RedisProcess};

const SWAPS: &[&str] = &[
    "SELECT 0",
    "SET a 1",
    "RPUSH l x y",
    "SELECT 1",
    "SET b 2",
    "HSET h f v",
    "SWAPDB 0 1",
    "GET a",
    "LRANGE l 0 -1",
    "GET b",
    "DBSIZE",
    "SELECT 0",
    "GET b",
    "HGET h f",
    "DBSIZE",
    "INFO keyspace",
    "SWAPDB 1 0",
    "GET a",
    "SWAPDB 0 0",
    "GET a",
    "SWAPDB 15 0",
    "DBSIZE",
    "SELECT 15",
    "GET a",
    "SWAPDB 0 15",
    "SELECT 0",
    "SET t v EX 100",
    "SWAPDB 0 2",
    "SELECT 2",
    "TTL t",
    "EXISTS t",
    "SELECT 0",
    "EXISTS t",
    // Errors: Redis's texts, and their order.
    "SWAPDB x 1",
    "SWAPDB 0 x",
    "SWAPDB x y",
    "SWAPDB 0 16",
    "SWAPDB 16 0",
    "SWAPDB -1 0",
    "SWAPDB 0 -1",
    "SWAPDB 2147483648 0",
    "SWAPDB 0 2147483647",
    "SWAPDB 0 -2147483649",
    "SWAPDB 0 1.5",
    "SWAPDB '' 0",
    "SWAPDB 0",
    "SWAPDB 0 1 2",
    // A transaction watching a key that exists in either database fails; one watching keys
    // that exist in neither goes through.
    "SELECT 0",
    "SET w 1",
    "WATCH w",
    "SWAPDB 0 3",
    "MULTI",
    "PING",
    "EXEC",
    "WATCH nowhere",
    "SWAPDB 0 3",
    "MULTI",
    "PING",
    "EXEC",
    "SELECT 4",
    "SET w4 1",
    "SELECT 0",
    "WATCH w4",
    "SWAPDB 0 4",
    "MULTI",
    "PING",
    "EXEC",
    "MULTI",
    "SWAPDB 0 5",
    "SWAPDB 0 99",
    "EXEC",
    "EVAL \"return redis.call('swapdb', 0, 5)\" 0",
    "EVAL \"return redis.call('swapdb', 0, 'x')\" 0",
    "DBSIZE",
    "COMMAND GETKEYS SWAPDB 0 1",
];

#[test]
fn swapdb_resp2() {
    let mut d = Diff::new();
    d.table(SWAPS);
}

#[test]
fn swapdb_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(SWAPS);
}

/// Waits until `n` clients of the server at `addr` are inside command `name`.
fn wait_blocked_in(addr: SocketAddr, name: &str, n: usize) {
    let mut c = RawConn::connect(addr).expect("connect");
    let deadline = Instant::now() + Duration::from_secs(30);
    let needle = format!("cmd={name} ");
    while String::from_utf8_lossy(&c.cmd(&["CLIENT", "LIST"]))
        .matches(&needle)
        .count()
        < n
    {
        assert!(Instant::now() < deadline, "no client in {name}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Clients blocked in database 9 when a swap brings their keys, on the server at `addr`: the
/// swap's reply, what each client got, and what is left.
fn blocked_clients(addr: SocketAddr) -> Vec<Vec<u8>> {
    let mut c = RawConn::connect(addr).expect("connect");
    let mut list_waiter = RawConn::connect(addr).expect("connect");
    let mut zset_waiter = RawConn::connect(addr).expect("connect");
    let mut wrong_type_waiter = RawConn::connect(addr).expect("connect");
    for w in [&mut list_waiter, &mut zset_waiter, &mut wrong_type_waiter] {
        w.cmd(&["SELECT", "9"]);
    }
    c.cmd(&["SELECT", "8"]);
    c.cmd(&["RPUSH", "l", "a", "b"]);
    c.cmd(&["ZADD", "z", "1", "m"]);
    c.cmd(&["SET", "s", "string"]);
    list_waiter.send_raw(&RawConn::encode(&["BLPOP", "l", "0"]));
    wait_blocked_in(addr, "blpop", 1);
    zset_waiter.send_raw(&RawConn::encode(&["BZPOPMIN", "z", "0"]));
    wait_blocked_in(addr, "bzpopmin", 1);
    wrong_type_waiter.send_raw(&RawConn::encode(&["BLPOP", "s", "0"]));
    wait_blocked_in(addr, "blpop", 2);
    let swap = c.cmd(&["SWAPDB", "8", "9"]);
    let list = list_waiter.read_reply();
    let zset = zset_waiter.read_reply();
    // The client blocked on a key that is now a string keeps waiting: a push to the list it
    // waits for (after deleting the string) serves it.
    c.cmd(&["SELECT", "9"]);
    let left = c.cmd(&["LRANGE", "l", "0", "-1"]);
    c.cmd(&["DEL", "s"]);
    c.cmd(&["RPUSH", "s", "late"]);
    let late = wrong_type_waiter.read_reply();
    vec![swap, list, zset, left, late]
}

#[test]
fn a_swap_serves_the_clients_blocked_on_keys_it_brings() {
    let redis = RedisProcess::spawn(&[]);
    let latchkey = Server::builder().start_blocking().expect("start latchkey");
    let expected = blocked_clients(redis.addr());
    assert_eq!(
        expected,
        [
            b"+OK\r\n".to_vec(),
            b"*2\r\n$1\r\nl\r\n$1\r\na\r\n".to_vec(),
            b"*3\r\n$1\r\nz\r\n$1\r\nm\r\n$1\r\n1\r\n".to_vec(),
            b"*1\r\n$1\r\nb\r\n".to_vec(),
            b"*2\r\n$1\r\ns\r\n$4\r\nlate\r\n".to_vec(),
        ],
        "redis-server's replies"
    );
    assert_eq!(blocked_clients(latchkey.addr()), expected);
}

/// What the replication stream carries for swaps, on the server at `addr`, up to the closing
/// `SET end 1`: every `SWAPDB` that answered `OK` (the same index twice included), none that
/// failed.
fn swap_effects(addr: SocketAddr) -> Vec<String> {
    let mut stream = ReplicationStream::open(addr);
    let mut c = RawConn::connect(addr).expect("connect");
    for cmd in [
        &["SET", "a", "1"][..],
        &["SWAPDB", "0", "1"],
        &["SWAPDB", "2", "2"],
        &["SWAPDB", "0", "99"],
        &["SWAPDB", "x", "0"],
        &["SET", "end", "1"],
    ] {
        c.cmd(cmd);
    }
    let mut got = Vec::new();
    loop {
        let args: Vec<String> = stream
            .next_args()
            .into_iter()
            .map(|a| String::from_utf8(a).expect("UTF-8 arguments"))
            .collect();
        let text = args.join(" ");
        if text == "SET end 1" {
            return got;
        }
        if !matches!(args[0].to_ascii_uppercase().as_str(), "PING" | "REPLCONF") {
            got.push(text);
        }
    }
}

#[test]
fn swaps_reach_the_stream_as_redis_sends_them() {
    let redis = RedisProcess::spawn(&[]);
    let latchkey = Server::builder().start_blocking().expect("start latchkey");
    let expected = swap_effects(redis.addr());
    assert_eq!(
        expected,
        ["SELECT 0", "SET a 1", "SWAPDB 0 1", "SWAPDB 2 2"],
        "redis-server's own stream"
    );
    assert_eq!(swap_effects(latchkey.addr()), expected);
}

/// The TTLs move with their keys: a key that expires after a swap is deleted by the active
/// expiry cycle in the database it went to (nobody reads it), and the other database keeps
/// its own keys.
#[test]
fn expiry_follows_the_swapped_keys() {
    let latchkey = Server::builder().start_blocking().expect("start latchkey");
    let mut c = RawConn::connect(latchkey.addr()).expect("connect");
    c.cmd(&["SET", "short", "v", "PX", "50"]);
    c.cmd(&["SET", "stays", "v"]);
    c.cmd(&["SELECT", "2"]);
    c.cmd(&["SET", "other", "v", "EX", "1000"]);
    assert_eq!(c.cmd(&["SWAPDB", "0", "2"]), b"+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = String::from_utf8(c.cmd(&["INFO", "keyspace"])).unwrap();
        if info.contains("db2:keys=1,expires=0,") {
            assert!(info.contains("db0:keys=1,expires=1,"), "{info}");
            break;
        }
        assert!(
            info.contains("db2:keys=2,expires=1,"),
            "before the expiry: {info}"
        );
        assert!(Instant::now() < deadline, "the key never expired: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.cmd(&["GET", "stays"]), b"$1\r\nv\r\n");
    assert_eq!(c.cmd(&["SELECT", "0"]), b"+OK\r\n");
    assert!(c.cmd(&["TTL", "other"]).starts_with(b":"));
    assert_eq!(c.cmd(&["EXISTS", "other"]), b":1\r\n");
}
