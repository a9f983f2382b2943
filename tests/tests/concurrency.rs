//! Commands run in parallel here (Redis runs them one at a time), so every read-modify-write
//! of a key must still be one step. Many clients over TCP race on the same keys; the outcome
//! must be one that some serial order of their commands gives: `SET NX` granted to exactly one
//! client per round, no increment or append lost, no field lost when several clients create
//! the same hash, list or sorted set at once.

use std::net::SocketAddr;
use std::sync::{Arc, Barrier};
use std::thread;

use latchkey_server::{BlockingServer, Server};
use latchkey_tests::RawConn;

const CLIENTS: usize = 8;

fn server() -> BlockingServer {
    Server::builder().start_blocking().expect("server")
}

/// Runs `work(client index, connection)` on `CLIENTS` threads at once, each with its own
/// connection, and returns what each returned.
fn race<T: Send + 'static>(
    addr: SocketAddr,
    work: impl Fn(usize, &mut RawConn) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let work = Arc::new(work);
    let start = Arc::new(Barrier::new(CLIENTS));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (work, start) = (work.clone(), start.clone());
            thread::spawn(move || {
                let mut c = RawConn::connect(addr).expect("connect");
                start.wait();
                work(i, &mut c)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("client"))
        .collect()
}

/// Sends `n` copies of a command in one pipeline and reads the `n` replies.
fn pipelined(c: &mut RawConn, args: &[&str], n: usize) -> Vec<Vec<u8>> {
    let one = RawConn::encode(args);
    let mut out = Vec::with_capacity(one.len() * n);
    for _ in 0..n {
        out.extend_from_slice(&one);
    }
    c.send_raw(&out);
    (0..n).map(|_| c.read_reply()).collect()
}

#[test]
fn no_increment_or_append_is_lost() {
    let s = server();
    let per_client = 500;
    race(s.addr(), move |i, c| {
        for reply in pipelined(c, &["INCR", "n"], per_client) {
            assert!(reply.starts_with(b":"), "{reply:?}");
        }
        pipelined(c, &["INCRBY", "by", "3"], per_client);
        pipelined(c, &["INCRBYFLOAT", "f", "1"], per_client);
        pipelined(c, &["HINCRBY", "h", "field", "1"], per_client);
        pipelined(c, &["APPEND", "log", "x"], per_client);
        pipelined(c, &["SETRANGE", "range", "0", "y"], 1);
        // Each client appends its own byte, once, at a distinct offset.
        pipelined(c, &["SETRANGE", "bytes", &i.to_string(), "z"], 1);
    });
    let total = CLIENTS * per_client;
    let mut c = RawConn::connect(s.addr()).unwrap();
    assert_eq!(
        c.cmd(&["GET", "n"]),
        format!("${}\r\n{total}\r\n", total.to_string().len()).into_bytes()
    );
    let by = (3 * total).to_string();
    assert_eq!(
        c.cmd(&["GET", "by"]),
        format!("${}\r\n{by}\r\n", by.len()).into_bytes()
    );
    let f = total.to_string();
    assert_eq!(
        c.cmd(&["GET", "f"]),
        format!("${}\r\n{f}\r\n", f.len()).into_bytes()
    );
    assert_eq!(
        c.cmd(&["HGET", "h", "field"]),
        format!("${}\r\n{total}\r\n", total.to_string().len()).into_bytes()
    );
    assert_eq!(
        c.cmd(&["STRLEN", "log"]),
        format!(":{total}\r\n").into_bytes()
    );
    assert_eq!(c.cmd(&["GET", "range"]), b"$1\r\ny\r\n");
    // Racing SETRANGEs at distinct offsets: none overwrote another's byte with its padding.
    let bytes = "z".repeat(CLIENTS);
    assert_eq!(
        c.cmd(&["GET", "bytes"]),
        format!("${CLIENTS}\r\n{bytes}\r\n").into_bytes()
    );
}

#[test]
fn set_nx_grants_each_lock_to_exactly_one_client() {
    let s = server();
    let rounds = 200;
    let start = Arc::new(Barrier::new(CLIENTS));
    let granted = race(s.addr(), move |i, c| {
        let mut won = Vec::new();
        for round in 0..rounds {
            start.wait();
            let key = format!("lock:{round}");
            let reply = c.cmd(&["SET", &key, &format!("client-{i}"), "NX", "PX", "60000"]);
            if reply == b"+OK\r\n" {
                won.push(round);
            } else {
                assert_eq!(reply, b"$-1\r\n");
            }
            // SETNX and SET NX GET take the same path.
            let key = format!("setnx:{round}");
            if c.cmd(&["SETNX", &key, &i.to_string()]) == b":1\r\n" {
                won.push(rounds + round);
            }
        }
        won
    });
    let mut all: Vec<usize> = granted.into_iter().flatten().collect();
    all.sort_unstable();
    let expected: Vec<usize> = (0..2 * rounds).collect();
    assert_eq!(all, expected, "every round has exactly one winner");
}

#[test]
fn clients_creating_the_same_key_all_add_to_it() {
    let s = server();
    let rounds = 100;
    let start = Arc::new(Barrier::new(CLIENTS));
    race(s.addr(), move |i, c| {
        for round in 0..rounds {
            start.wait();
            let f = format!("f{i}");
            c.cmd(&["HSET", &format!("h:{round}"), &f, "v"]);
            c.cmd(&["RPUSH", &format!("l:{round}"), &f]);
            c.cmd(&["ZADD", &format!("z:{round}"), "1", &f]);
        }
    });
    let mut c = RawConn::connect(s.addr()).unwrap();
    let n = format!(":{CLIENTS}\r\n").into_bytes();
    for round in 0..rounds {
        assert_eq!(c.cmd(&["HLEN", &format!("h:{round}")]), n, "hash {round}");
        assert_eq!(c.cmd(&["LLEN", &format!("l:{round}")]), n, "list {round}");
        assert_eq!(c.cmd(&["ZCARD", &format!("z:{round}")]), n, "zset {round}");
    }
}

#[test]
fn emptying_a_key_never_deletes_what_another_client_just_added() {
    let s = server();
    let rounds = 200;
    let mut setup = RawConn::connect(s.addr()).unwrap();
    for round in 0..rounds {
        setup.cmd(&["HSET", &format!("h:{round}"), "seed", "v"]);
        setup.cmd(&["RPUSH", &format!("l:{round}"), "seed"]);
        setup.cmd(&["ZADD", &format!("z:{round}"), "1", "seed"]);
    }
    let start = Arc::new(Barrier::new(CLIENTS));
    race(s.addr(), move |i, c| {
        for round in 0..rounds {
            start.wait();
            let (h, l, z) = (
                format!("h:{round}"),
                format!("l:{round}"),
                format!("z:{round}"),
            );
            if i == 0 {
                // Takes out the only element: the key goes, unless someone added to it.
                c.cmd(&["HDEL", &h, "seed"]);
                c.cmd(&["LREM", &l, "0", "seed"]);
                c.cmd(&["ZREM", &z, "seed"]);
            } else {
                let f = format!("f{i}");
                c.cmd(&["HSET", &h, &f, "v"]);
                c.cmd(&["RPUSH", &l, &f]);
                c.cmd(&["ZADD", &z, "1", &f]);
            }
        }
    });
    let added = format!(":{}\r\n", CLIENTS - 1).into_bytes();
    for round in 0..rounds {
        assert_eq!(
            setup.cmd(&["HLEN", &format!("h:{round}")]),
            added,
            "hash {round}"
        );
        assert_eq!(
            setup.cmd(&["LLEN", &format!("l:{round}")]),
            added,
            "list {round}"
        );
        assert_eq!(
            setup.cmd(&["ZCARD", &format!("z:{round}")]),
            added,
            "zset {round}"
        );
    }
}

#[test]
fn commands_over_several_keys_are_one_step() {
    let s = server();
    let rounds = 2000;
    // One element, moved back and forth between two lists by the writers.
    RawConn::connect(s.addr())
        .unwrap()
        .cmd(&["RPUSH", "left", "token"]);
    let seen = race(s.addr(), move |i, c| {
        let mut partial = 0;
        for _ in 0..rounds {
            if i % 2 == 0 {
                // Both keys appear together (MSET) and go together (DEL), and an element
                // moved between two lists is always in exactly one of them.
                c.cmd(&["MSET", "k1", "v", "k2", "v"]);
                c.cmd(&["DEL", "k1", "k2"]);
                c.cmd(&["LMOVE", "left", "right", "LEFT", "RIGHT"]);
                c.cmd(&["RPOPLPUSH", "right", "left"]);
            } else {
                let both = c.cmd(&["EXISTS", "k1", "k2"]);
                if both == b":1\r\n" {
                    partial += 1;
                }
                let values = c.cmd(&["MGET", "k1", "k2"]);
                if values != b"*2\r\n$1\r\nv\r\n$1\r\nv\r\n" && values != b"*2\r\n$-1\r\n$-1\r\n" {
                    partial += 1;
                }
                // The moved element is in exactly one of the two lists at every moment.
                if c.cmd(&["EXISTS", "left", "right"]) != b":1\r\n" {
                    partial += 1;
                }
            }
        }
        partial
    });
    assert_eq!(
        seen.iter().sum::<usize>(),
        0,
        "a half-done multi-key command was seen"
    );
    // And it is still there, once.
    let mut c = RawConn::connect(s.addr()).unwrap();
    let left = c.cmd(&["LRANGE", "left", "0", "-1"]);
    let right = c.cmd(&["LRANGE", "right", "0", "-1"]);
    let mut both = [left, right];
    both.sort();
    assert_eq!(
        both,
        [b"*0\r\n".to_vec(), b"*1\r\n$5\r\ntoken\r\n".to_vec()]
    );
}
