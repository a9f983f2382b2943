//! Memory and client limits, abused over real TCP sockets: `maxmemory` with `noeviction` and
//! the eviction policies, `client-query-buffer-limit`, `proto-max-bulk-len`,
//! `client-output-buffer-limit normal`, `maxclients`. Each answers (or disconnects) as a real
//! `redis-server` does, the server's accounting stays bounded, and another client is served
//! meanwhile. (The pub/sub output limit is in `robustness.rs`.)

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use latchkey_server::{BlockingServer, Frame, Server};
use latchkey_tests::{Diff, RawConn};

const OOM: &[u8] = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n";

/// An `INFO` field of a server, as a number.
fn info_number(c: &mut RawConn, section: &str, field: &str) -> u64 {
    let text = String::from_utf8(c.cmd(&["INFO", section])).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}: {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// Sends bytes (ignoring a write the server refuses half-way by closing) and reads until
/// the server closes the connection; returns what it sent back.
fn abuse_until_closed(addr: SocketAddr, chunks: impl IntoIterator<Item = Vec<u8>>) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for c in chunks {
        if s.write_all(&c).is_err() {
            break;
        }
    }
    let mut out = Vec::new();
    let r = s.read_to_end(&mut out);
    assert!(
        r.is_ok()
            || r.as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the server did not close the connection: {r:?}"
    );
    out
}

#[test]
fn noeviction_refuses_what_may_grow_memory_as_redis_does() {
    let mut d = Diff::new();
    d.check(&["SET", "a", "b"]);
    // Bad values get Redis's words; a good one reads back in bytes.
    d.check(&["CONFIG", "SET", "maxmemory", "abc"]);
    d.check(&["CONFIG", "SET", "maxmemory-policy", "foo"]);
    d.check(&["CONFIG", "SET", "maxmemory-samples", "0"]);
    d.check(&["CONFIG", "SET", "lfu-log-factor", "-1"]);
    d.check(&["CONFIG", "SET", "maxmemory", "100mb"]);
    d.check(&["CONFIG", "GET", "maxmemory"]);
    d.check(&["CONFIG", "GET", "maxmemory-policy"]);
    d.check(&["CONFIG", "SET", "maxmemory", "1"]);
    let r = d.check(&["SET", "x", "y"]);
    assert_eq!(r, OOM);
    d.check(&["GET", "a"]);
    d.check(&["LPUSH", "l", "v"]);
    d.check(&["APPEND", "a", "more"]);
    // Scripts: refused before their first write, with the script's location appended.
    d.check(&["EVAL", "return redis.call('set','x','y')", "0"]);
    d.check(&[
        "EVAL",
        "redis.call('get','a'); return redis.call('set','x','y')",
        "0",
    ]);
    d.check(&["EVAL", "return redis.pcall('set','x','y')", "0"]);
    // Transactions: any command but EXEC/DISCARD is refused while queueing, and EXEC aborts.
    d.check(&["MULTI"]);
    d.check(&["SET", "x", "y"]);
    d.check(&["GET", "a"]);
    d.check(&["EXEC"]);
    d.check(&["MULTI"]);
    d.check(&["GET", "a"]);
    d.check(&["DISCARD"]);
    // Deleting is how an operator makes room: allowed.
    d.check(&["DEL", "a"]);
    d.check(&["SET", "x", "y"]);
    // Another client is served meanwhile (reads), and writes resume when the limit goes.
    let mut other = RawConn::connect(d.latchkey_server.addr()).unwrap();
    assert_eq!(other.cmd(&["PING"]), b"+PONG\r\n");
    d.check(&["CONFIG", "SET", "maxmemory", "0"]);
    d.check(&["SET", "x", "y"]);
    assert_eq!(
        info_number(&mut d.latchkey, "stats", "evicted_keys"),
        0,
        "noeviction evicts nothing"
    );
}

#[test]
fn config_errors_of_the_client_limits_match_redis() {
    let mut d = Diff::new();
    d.table(&[
        "CONFIG SET proto-max-bulk-len 1000",
        "CONFIG SET client-query-buffer-limit 1000",
        "CONFIG SET client-query-buffer-limit 2mb",
        "CONFIG GET client-query-buffer-limit",
        "CONFIG SET maxclients 0",
    ]);
    d.check(&["CONFIG", "SET", "client-output-buffer-limit", "foo 1 0 0"]);
    d.check(&["CONFIG", "SET", "client-output-buffer-limit", "normal 1 0"]);
    d.check(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal x 0 0",
    ]);
    d.check(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal 1mb 0 0",
    ]);
    d.check(&["CONFIG", "GET", "client-output-buffer-limit"]);
    d.check(&[
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "pubsub 1mb 512kb 10",
    ]);
    d.check(&["CONFIG", "GET", "client-output-buffer-limit"]);
}

/// A server with a virtual clock and an eviction policy, sampling every key so that the
/// approximation is exact and the test deterministic.
fn evicting_server(policy: &str) -> BlockingServer {
    Server::builder()
        .virtual_clock()
        .config("maxmemory-policy", policy)
        .config("maxmemory-samples", "100000")
        .start_blocking()
        .unwrap()
}

/// Caps memory at what is used now: the next write must evict.
fn cap_memory_here(c: &mut RawConn) -> u64 {
    let used = info_number(c, "memory", "used_memory");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", &used.to_string()]),
        b"+OK\r\n"
    );
    used
}

#[test]
fn allkeys_lru_evicts_the_idlest_key_even_a_held_lock() {
    let server = evicting_server("allkeys-lru");
    let clock = server.handle().clock().clone();
    let mut c = RawConn::connect(server.addr()).unwrap();
    // A client takes a lock for 30 s, then the cache around it fills up.
    assert_eq!(
        c.cmd(&["SET", "lock", "client-1", "NX", "PX", "30000"]),
        b"+OK\r\n"
    );
    let value = "v".repeat(1000);
    for i in 0..50 {
        clock.advance(Duration::from_millis(10));
        c.cmd(&["SET", &format!("cache:{i}"), &value]);
    }
    let cap = cap_memory_here(&mut c);
    for i in 50..100 {
        clock.advance(Duration::from_millis(10));
        assert_eq!(c.cmd(&["SET", &format!("cache:{i}"), &value]), b"+OK\r\n");
    }
    // The lock was the least recently used key: evicted long before its TTL, so a second
    // client now takes the lock the first one still believes it holds.
    assert_eq!(c.cmd(&["GET", "lock"]), b"$-1\r\n");
    assert_eq!(
        c.cmd(&["SET", "lock", "client-2", "NX", "PX", "30000"]),
        b"+OK\r\n"
    );
    let evicted = info_number(&mut c, "stats", "evicted_keys");
    assert!(evicted >= 40, "evicted {evicted} keys for 50 new ones");
    // The oldest cache keys went, the newest stayed, and memory is back near the cap.
    assert_eq!(c.cmd(&["EXISTS", "cache:0"]), b":0\r\n");
    assert_eq!(c.cmd(&["EXISTS", "cache:99"]), b":1\r\n");
    let used = info_number(&mut c, "memory", "used_memory");
    assert!(used <= cap + 4096, "used {used} over the cap {cap}");
    // Reading a key makes it recent: it survives the next evictions.
    clock.advance(Duration::from_millis(10));
    c.cmd(&["GET", "cache:60"]);
    for i in 100..130 {
        clock.advance(Duration::from_millis(10));
        c.cmd(&["SET", &format!("cache:{i}"), &value]);
    }
    assert_eq!(c.cmd(&["EXISTS", "cache:60"]), b":1\r\n");
    assert_eq!(c.cmd(&["EXISTS", "cache:61"]), b":0\r\n");
}

#[test]
fn volatile_policies_never_evict_a_key_without_ttl() {
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let server = evicting_server(policy);
        let clock = server.handle().clock().clone();
        let mut c = RawConn::connect(server.addr()).unwrap();
        let value = "v".repeat(500);
        for i in 0..30 {
            c.cmd(&["SET", &format!("keep:{i}"), &value]);
            // Shorter TTLs for later keys: volatile-ttl must take tmp:29 first.
            let ttl = (10_000 - i * 100).to_string();
            c.cmd(&["SET", &format!("tmp:{i}"), &value, "PX", &ttl]);
            clock.advance(Duration::from_millis(1));
        }
        cap_memory_here(&mut c);
        // Room for new keys comes from keys with a TTL only...
        for i in 0..10 {
            let r = c.cmd(&["SET", &format!("new:{i}"), &value, "EX", "100"]);
            assert_eq!(r, b"+OK\r\n", "{policy}");
        }
        assert!(info_number(&mut c, "stats", "evicted_keys") > 0, "{policy}");
        if policy == "volatile-ttl" {
            assert_eq!(c.cmd(&["EXISTS", "tmp:29"]), b":0\r\n", "{policy}");
            assert_eq!(c.cmd(&["EXISTS", "tmp:0"]), b":1\r\n", "{policy}");
        }
        // ... until there is none left: then writes are refused, as under noeviction.
        let mut refused = false;
        for i in 10..200 {
            let r = c.cmd(&["SET", &format!("new:{i}"), &value]);
            if r == OOM {
                refused = true;
                break;
            }
            assert_eq!(r, b"+OK\r\n", "{policy}");
        }
        assert!(refused, "{policy}: writes never refused");
        for i in 0..30 {
            assert_eq!(
                c.cmd(&["EXISTS", &format!("keep:{i}")]),
                b":1\r\n",
                "{policy} evicted keep:{i}, which has no TTL"
            );
        }
        let mut other = RawConn::connect(server.addr()).unwrap();
        assert_eq!(
            other.cmd(&["GET", "keep:0"]),
            format!("$500\r\n{value}\r\n").into_bytes()
        );
    }
}

#[test]
fn allkeys_random_and_lfu_stay_under_the_cap() {
    for policy in ["allkeys-random", "allkeys-lfu"] {
        let server = evicting_server(policy);
        let clock = server.handle().clock().clone();
        let mut c = RawConn::connect(server.addr()).unwrap();
        let value = "v".repeat(1000);
        for i in 0..50 {
            c.cmd(&["SET", &format!("k:{i}"), &value]);
        }
        // Under LFU, a key read often outlives the others.
        for _ in 0..200 {
            c.cmd(&["GET", "k:0"]);
        }
        let cap = cap_memory_here(&mut c);
        for i in 50..200 {
            clock.advance(Duration::from_millis(10));
            assert_eq!(c.cmd(&["SET", &format!("k:{i}"), &value]), b"+OK\r\n");
        }
        let used = info_number(&mut c, "memory", "used_memory");
        assert!(
            used <= cap + 4096,
            "{policy}: used {used} over the cap {cap}"
        );
        let keys = match server.cmd(["DBSIZE"]) {
            Frame::Integer(n) => n,
            other => panic!("{other:?}"),
        };
        assert!(keys < 100, "{policy}: {keys} keys left");
        if policy == "allkeys-lfu" {
            assert_eq!(c.cmd(&["EXISTS", "k:0"]), b":1\r\n");
        }
    }
}

#[test]
fn evicted_keys_reach_the_aof_as_dels() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::builder()
        .virtual_clock()
        .config("dir", dir.path().to_str().unwrap())
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .config("maxmemory-policy", "allkeys-lru")
        .config("maxmemory-samples", "100000")
        .start_blocking()
        .unwrap();
    let clock = server.handle().clock().clone();
    let mut c = RawConn::connect(server.addr()).unwrap();
    let value = "v".repeat(1000);
    c.cmd(&["SET", "oldest", &value]);
    for i in 0..20 {
        clock.advance(Duration::from_millis(10));
        c.cmd(&["SET", &format!("k:{i}"), &value]);
    }
    cap_memory_here(&mut c);
    clock.advance(Duration::from_millis(10));
    c.cmd(&["SET", "newest", &value]);
    let used = info_number(&mut c, "memory", "used_memory");
    let evicted = info_number(&mut c, "stats", "evicted_keys");
    assert_eq!(
        c.cmd(&["EXISTS", "oldest"]),
        b":0\r\n",
        "used {used}, evicted {evicted}"
    );
    // The AOF (what a restart replays) deletes the evicted key, as a replica's stream does.
    let mut aof = Vec::new();
    for entry in walk(dir.path()) {
        aof.extend(std::fs::read(entry).unwrap());
    }
    let del = RawConn::encode(&["DEL", "oldest"]);
    assert!(
        aof.windows(del.len()).any(|w| w == del.as_slice()),
        "no DEL oldest in the AOF"
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn used_memory_follows_the_keyspace() {
    let server = Server::builder().start_blocking().unwrap();
    let mut c = RawConn::connect(server.addr()).unwrap();
    let empty = info_number(&mut c, "memory", "used_memory");
    // Strings, and growth in place through a hash and a list (the in-place write path).
    for i in 0..2000 {
        c.cmd(&["SET", &format!("s:{i}"), &"x".repeat(100)]);
        c.cmd(&["HSET", "h", &format!("f{i}"), &"y".repeat(100)]);
        c.cmd(&["RPUSH", "l", &"z".repeat(100)]);
    }
    let full = info_number(&mut c, "memory", "used_memory");
    let payload = 3 * 2000 * 100;
    assert!(
        full > empty + payload && full < empty + payload * 4,
        "{empty} -> {full} for {payload} bytes of payload"
    );
    // Shrinking in place is seen too, and deleting gives it all back (but the tables).
    for _ in 0..2000 {
        c.cmd(&["RPOP", "l"]);
    }
    let popped = info_number(&mut c, "memory", "used_memory");
    assert!(
        popped < full - 2000 * 100,
        "{full} -> {popped} after popping"
    );
    c.cmd(&["FLUSHALL"]);
    let flushed = info_number(&mut c, "memory", "used_memory");
    // (The emptied hash tables keep their capacity, as hashbrown's do, and are counted.)
    assert!(
        flushed < full / 2,
        "{flushed} after FLUSHALL, {full} before"
    );
    let human = String::from_utf8(c.cmd(&["INFO", "memory"])).unwrap();
    assert!(human.contains("maxmemory_policy:noeviction"), "{human}");
}

#[test]
fn the_query_buffer_limit_closes_the_connection_as_redis_does() {
    let d = Diff::new();
    for addr in [d.redis_proc.addr(), d.latchkey_server.addr()] {
        let mut c = RawConn::connect(addr).unwrap();
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "client-query-buffer-limit", "1mb"]),
            b"+OK\r\n"
        );
        // A 10 MB argument (allowed by proto-max-bulk-len) sent in 64 KiB pieces: the
        // client is cut off at the 1 MB query buffer limit, with no reply.
        let head = b"*2\r\n$3\r\nGET\r\n$10000000\r\n".to_vec();
        let body = (0..160).map(|_| vec![b'x'; 64 * 1024]);
        let got = abuse_until_closed(addr, std::iter::once(head).chain(body));
        assert_eq!(got, b"", "{addr}");
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n", "others are served");
    }
    // latchkey also counts what a transaction queued (as newer Redis versions do): an
    // endless MULTI is cut off too, and its queue freed.
    let addr = d.latchkey_server.addr();
    let value = vec![b'v'; 100 * 1024];
    let mut multi = vec![RawConn::encode(&["MULTI"])];
    for i in 0..40 {
        multi.push(RawConn::encode(&[
            b"SET".to_vec(),
            format!("k{i}").into_bytes(),
            value.clone(),
        ]));
    }
    let got = abuse_until_closed(addr, multi);
    let queued = got.windows(9).filter(|w| w == b"+QUEUED\r\n").count();
    assert!(
        queued > 0 && queued < 12,
        "queued {queued} of 40 before the cut"
    );
    let mut c = RawConn::connect(addr).unwrap();
    assert_eq!(c.cmd(&["DBSIZE"]), b":0\r\n");
}

#[test]
fn proto_max_bulk_len_is_a_protocol_error_as_in_redis() {
    let d = Diff::new();
    let mut replies = Vec::new();
    for addr in [d.redis_proc.addr(), d.latchkey_server.addr()] {
        let mut c = RawConn::connect(addr).unwrap();
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]),
            b"+OK\r\n"
        );
        let got = abuse_until_closed(
            addr,
            [b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n".to_vec()],
        );
        replies.push(got);
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n", "others are served");
        assert_eq!(
            c.cmd(&["CONFIG", "GET", "proto-max-bulk-len"]),
            b"*2\r\n$18\r\nproto-max-bulk-len\r\n$7\r\n1048576\r\n"
        );
    }
    assert_eq!(replies[0], b"-ERR Protocol error: invalid bulk length\r\n");
    assert_eq!(replies[1], replies[0]);
}

#[test]
fn a_reply_over_the_normal_output_limit_disconnects_as_in_redis() {
    let d = Diff::new();
    let big = "x".repeat(2_000_000);
    for addr in [d.redis_proc.addr(), d.latchkey_server.addr()] {
        let mut c = RawConn::connect(addr).unwrap();
        assert_eq!(c.cmd(&["SET", "big", &big]), b"+OK\r\n");
        assert_eq!(
            c.cmd(&[
                "CONFIG",
                "SET",
                "client-output-buffer-limit",
                "normal 1mb 0 0"
            ]),
            b"+OK\r\n"
        );
        let got = abuse_until_closed(addr, [RawConn::encode(&["GET", "big"])]);
        assert!(
            got.len() < big.len(),
            "{addr}: {} bytes of the reply were sent",
            got.len()
        );
        // Replies under the limit still flow, to this client and others.
        assert_eq!(c.cmd(&["STRLEN", "big"]), b":2000000\r\n");
    }
}

#[test]
fn a_client_that_never_reads_its_replies_is_held_back_not_buffered() {
    let server = Server::builder().start_blocking().unwrap();
    let mut c = RawConn::connect(server.addr()).unwrap();
    // Pipeline 16 KiB echoes forever and never read a reply: once the sockets' buffers are
    // full the server stops reading this client (its replies are not piled up in memory),
    // so the sender blocks; everyone else is served on.
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let echo = RawConn::encode(&["ECHO", &"e".repeat(16 * 1024)]);
    let mut blocked = false;
    for _ in 0..100_000 {
        if let Err(e) = s.write_all(&echo) {
            assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "{e}"
            );
            blocked = true;
            break;
        }
    }
    assert!(
        blocked,
        "the server read 1.6 GB from a client that never reads"
    );
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    // And an operator can still cut it off.
    let list = String::from_utf8(c.cmd(&["CLIENT", "LIST"])).unwrap();
    let id = list
        .lines()
        .find(|l| l.contains("cmd=echo"))
        .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("id=")))
        .expect("the stalled client is listed")
        .to_string();
    assert_eq!(c.cmd(&["CLIENT", "KILL", "ID", &id]), b":1\r\n");
}

#[test]
fn maxclients_refuses_the_extra_connection_as_redis_does() {
    let mut d = Diff::new();
    // Diff holds one connection to each; one more fits, the next is refused.
    d.check(&["CONFIG", "SET", "maxclients", "2"]);
    let mut replies = Vec::new();
    for addr in [d.redis_proc.addr(), d.latchkey_server.addr()] {
        let mut second = RawConn::connect(addr).unwrap();
        assert_eq!(second.cmd(&["PING"]), b"+PONG\r\n");
        let got = abuse_until_closed(addr, [RawConn::encode(&["PING"])]);
        replies.push(got);
        assert_eq!(second.cmd(&["PING"]), b"+PONG\r\n", "others are served");
    }
    assert_eq!(replies[0], b"-ERR max number of clients reached\r\n");
    assert_eq!(replies[1], replies[0]);
    let refused = info_number(&mut d.latchkey, "stats", "rejected_connections");
    assert_eq!(refused, 1);
}

/// One command may not allocate past `maxmemory` in a single step: a `SETBIT` or `BITFIELD`
/// far past a string's end (up to 512 MB of zeros), or an `LCS` whose table would not fit, is
/// refused while memory is still under the limit, and changes nothing; smaller ones still run
/// and the server goes on.
#[test]
fn one_command_cannot_grow_past_maxmemory() {
    let server = Server::builder().start_blocking().unwrap();
    let mut c = RawConn::connect(server.addr()).unwrap();
    let used = info_number(&mut c, "memory", "used_memory");
    let cap = (used + 8 * 1024 * 1024).to_string();
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", &cap]), b"+OK\r\n");
    // 64 MB of zeros.
    assert_eq!(c.cmd(&["SETBIT", "big", "536870911", "1"]), OOM);
    assert_eq!(
        c.cmd(&["BITFIELD", "big", "SET", "u8", "#67108863", "1"]),
        OOM
    );
    assert_eq!(c.cmd(&["EXISTS", "big"]), b":0\r\n");
    assert_eq!(c.cmd(&["SETBIT", "big", "8000", "1"]), b":0\r\n");
    assert_eq!(c.cmd(&["SETBIT", "big", "536870911", "1"]), OOM);
    assert_eq!(c.cmd(&["STRLEN", "big"]), b":1001\r\n");
    assert_eq!(c.cmd(&["SETRANGE", "big", "67108863", "x"]), OOM);
    assert_eq!(c.cmd(&["SETRANGE", "big", "2000", "x"]), b":2001\r\n");
    // Two strings of 2000 bytes: a 16 MB table.
    let long = "x".repeat(2000);
    c.cmd(&["SET", "a", &long]);
    c.cmd(&["SET", "b", &long]);
    assert_eq!(
        c.cmd(&["LCS", "a", "b", "LEN"]),
        b"-ERR Insufficient memory, failed allocating transient memory for LCS\r\n"
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "maxmemory", "0"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["LCS", "a", "b", "LEN"]), b":2000\r\n");
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
}

/// `DEBUG POPULATE` of a billion keys cannot take the process down: with `maxmemory` set it
/// stops with Redis's OOM error once the next key would pass the limit, keeps the keys it
/// made, and the server goes on serving. (Redis itself would fill until the machine runs out.)
#[test]
fn debug_populate_stops_at_maxmemory() {
    let server = Server::builder().start_blocking().unwrap();
    let mut c = RawConn::connect(server.addr()).unwrap();
    let used = info_number(&mut c, "memory", "used_memory");
    let cap = used + 4 * 1024 * 1024;
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory", &cap.to_string()]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "1000000000"]), OOM);
    let dbsize = String::from_utf8(c.cmd(&["DBSIZE"])).unwrap();
    let keys: u64 = dbsize.trim_start_matches(':').trim().parse().unwrap();
    assert!(keys > 1000, "it filled up to the limit first: {keys} keys");
    assert!(keys < 1_000_000, "it stopped at the limit: {keys} keys");
    // Past the cap by no more than the last check let in: up to 64 keys, and the doubling of
    // the shard tables they landed in (an eighth of the keyspace's tables or so).
    let after = info_number(&mut c, "memory", "used_memory");
    assert!(
        after <= cap + cap / 4,
        "used {after} against a cap of {cap}"
    );
    assert_eq!(c.cmd(&["GET", "key:0"]), b"$7\r\nvalue:0\r\n");
    // A size that could never fit is refused before anything is made.
    assert_eq!(c.cmd(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(c.cmd(&["DEBUG", "POPULATE", "1", "big", "100000000"]), OOM);
    assert_eq!(c.cmd(&["DBSIZE"]), b":0\r\n");
}
