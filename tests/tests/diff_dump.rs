//! Differential tests of `DUMP` and `RESTORE` against a real redis-server, RESP2 and RESP3.
//!
//! Three kinds of check:
//! - where Redis's payload does not depend on its internal encoding choices (strings, LZF
//!   compression included, so HyperLogLogs too; integers; small intsets), `DUMP` gives the
//!   very same bytes on both servers;
//! - every error and option of `RESTORE` answers as on Redis;
//! - payloads cross over: what redis-server dumps (listpacks, quicklists, hashtables, skiplists,
//!   LZF-compressed strings, HyperLogLogs, streams) restores on latchkey, and what latchkey dumps
//!   restores on redis-server, with the same contents read back on both.

use latchkey_tests::raw::bulk_payload;
use latchkey_tests::Diff;

/// Values whose payload Redis writes the same whatever happened to them before: the test
/// compares `DUMP`'s bytes.
const SAME_BYTES: &[&str] = &[
    "SET s bar",
    "DUMP s",
    "SET s ''",
    "DUMP s",
    "SET s 12345",
    "DUMP s",
    "SET s -1",
    "DUMP s",
    "SET s 2147483647",
    "DUMP s",
    "SET s 2147483648",
    "DUMP s",
    "SET s -2147483648",
    "DUMP s",
    "SET s 007",
    "DUMP s",
    "SET s 01234567890123456789",
    "DUMP s",
    "SET s xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "DUMP s",
    "SET s 'the quick brown fox jumps over the lazy dog, the quick brown fox jumps again'",
    "DUMP s",
    "SET s abcdefghijklmnopqrstuvwxyz0123456789",
    "DUMP s",
    "PFADD h a b c",
    "DUMP h",
    "PFADD d 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
    "PFDEBUG TODENSE d",
    "DUMP d",
    "SADD i 3 1 2",
    "DUMP i",
    "SADD j -1 3 70000",
    "DUMP j",
    "DUMP nokey",
    "DUMP",
    "DUMP a b",
];

/// `RESTORE`'s errors, options and their order, on payloads made by `DUMP` on each server.
const RESTORE_TABLE: &[&str] = &[
    "RESTORE",
    "RESTORE k 0",
    "SET k v",
    // The key is checked before the TTL and the payload.
    "RESTORE k 0 garbage",
    "RESTORE k -1 garbage",
    "RESTORE k abc garbage REPLACE",
    "RESTORE k -1 garbage REPLACE",
    "RESTORE k 0 garbage REPLACE",
    "RESTORE k 0 '' REPLACE",
    "RESTORE k 0 0123456789 REPLACE",
    "RESTORE k 0 garbage FOO",
    "RESTORE k 0 garbage REPLACE IDLETIME",
    "RESTORE k 0 garbage REPLACE IDLETIME x",
    "RESTORE k 0 garbage REPLACE IDLETIME -1",
    "RESTORE k 0 garbage REPLACE FREQ 256",
    "RESTORE k 0 garbage REPLACE FREQ -1",
    "RESTORE k 0 garbage REPLACE FREQ x",
    "RESTORE k 0 garbage REPLACE IDLETIME 1 FREQ 1",
    "RESTORE k 0 garbage REPLACE FREQ 1 IDLETIME 1",
    "GET k",
    "TYPE k",
];

/// The payload `DUMP key` answers on redis-server (asserted to be a bulk string).
fn redis_dump(d: &mut Diff, key: &str) -> Vec<u8> {
    bulk_payload(&d.redis.cmd(&["DUMP", key]))
}

/// The payload `DUMP key` answers on latchkey.
fn latchkey_dump(d: &mut Diff, key: &str) -> Vec<u8> {
    bulk_payload(&d.latchkey.cmd(&["DUMP", key]))
}

/// Restores `payload` under `to` on both servers (replies compared), then checks that reading
/// it with each of `reads` (the key spliced in for `{}`) answers the same on both.
#[track_caller]
fn restore_both(d: &mut Diff, to: &str, payload: &[u8], reads: &[&str]) {
    let reply = d.check(&[
        b"RESTORE".as_slice(),
        to.as_bytes(),
        b"0",
        payload,
        b"REPLACE",
    ]);
    assert_eq!(reply, b"+OK\r\n", "restore {to}");
    for read in reads {
        let args: Vec<String> = read
            .split(' ')
            .map(|a| if a == "{}" { to.to_string() } else { a.into() })
            .collect();
        d.check(&args);
    }
}

fn tables(d: &mut Diff) {
    d.table(SAME_BYTES);
    d.table(RESTORE_TABLE);
    // A payload with one bit changed: the checksum says so on both servers.
    d.both(&["SET", "v", "hello"]);
    let mut bad = redis_dump(d, "v");
    bad[1] ^= 1;
    d.check(&[b"RESTORE".as_slice(), b"w", b"0", &bad]);
    d.check(&["DUMP", "w"]);
    // The payload cut short: too short for its footer, or its footer gone.
    d.check(&[b"RESTORE".as_slice(), b"w", b"0", &bad[..5]]);
    d.check(&[b"RESTORE".as_slice(), b"w", b"0", &bad[..bad.len() - 1]]);
}

#[test]
fn dump_and_restore_resp2() {
    let mut d = Diff::new();
    tables(&mut d);
}

#[test]
fn dump_and_restore_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    tables(&mut d);
}

/// Makes the same value under `key` on both servers with `build` (one command a line).
fn build(d: &mut Diff, lines: &[String]) {
    for line in lines {
        let args: Vec<&str> = line.split(' ').collect();
        d.check(&args);
    }
}

/// Every type, in every encoding Redis picks for it, crosses from redis-server to latchkey and
/// back: each server restores the other's payload, and both read back the same value.
#[test]
fn payloads_cross_between_the_servers() {
    let mut d = Diff::new();
    let n = |count: usize, f: &dyn Fn(usize) -> String| (0..count).map(f).collect::<Vec<_>>();
    let mut lines = vec![
        "SET str hello".to_string(),
        format!("SET long {}", "abcdefgh".repeat(100)),
        format!("SET huge {}", "xyz".repeat(5000)),
        "SET int 1234567890123".to_string(),
        "PFADD hll a b c d e f g".to_string(),
        "RPUSH small_list a 1 b -2 c 300000 d".to_string(),
        "HSET small_hash f1 v1 f2 2 f3 v3".to_string(),
        "ZADD small_zset 1 a 2.5 b -3 c inf d".to_string(),
        "SADD small_set a b c".to_string(),
        "SADD int_set 1 2 3 4 5 6 7 8 9 10 11 12 -100000 100000000000".to_string(),
    ];
    lines.push("XADD small_stream 1-1 a 1 b 2".to_string());
    lines.push("XADD small_stream 2-1 a 3 c 4".to_string());
    lines.extend(n(250, &|i| {
        format!("XADD big_stream {}-0 field {i}", i + 1)
    }));
    lines.push("XDEL big_stream 3-0 100-0".to_string());
    lines.push("XADD empty_stream 5-5 a 1".to_string());
    lines.push("XDEL empty_stream 5-5".to_string());
    lines.extend(n(300, &|i| format!("RPUSH big_list element-{i}")));
    lines.push(format!("RPUSH big_list {}", "v".repeat(10000)));
    lines.extend(n(300, &|i| format!("HSET big_hash field-{i} value-{i}")));
    lines.extend(n(300, &|i| format!("ZADD big_zset {i}.5 member-{i}")));
    lines.extend(n(600, &|i| format!("SADD big_set member-{i}")));
    lines.extend(n(1000, &|i| format!("SADD big_int_set {i}")));
    lines.extend(n(2000, &|i| format!("PFADD big_hll e{i}")));
    build(&mut d, &lines);

    let hash_reads: Vec<String> = std::iter::once("HLEN {}".to_string())
        .chain((0..300).map(|i| format!("HGET {{}} field-{i}")))
        .collect();
    let set_reads: Vec<String> = std::iter::once("SCARD {}".to_string())
        .chain((0..600).map(|i| format!("SISMEMBER {{}} member-{i}")))
        .collect();
    let int_set_reads = [
        "SCARD {}",
        "SMISMEMBER {} 0 1 999 1000 -100000 100000000000",
    ];
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("str", vec!["GET {}", "TYPE {}"]),
        ("long", vec!["GET {}"]),
        ("huge", vec!["GET {}"]),
        ("int", vec!["GET {}", "INCR {}"]),
        ("hll", vec!["GET {}", "PFCOUNT {}"]),
        ("big_hll", vec!["GET {}", "PFCOUNT {}"]),
        ("small_list", vec!["LRANGE {} 0 -1"]),
        ("big_list", vec!["LLEN {}", "LRANGE {} 0 -1"]),
        ("small_hash", vec!["HGETALL {}"]),
        ("big_hash", hash_reads.iter().map(String::as_str).collect()),
        ("small_zset", vec!["ZRANGE {} 0 -1 WITHSCORES"]),
        ("big_zset", vec!["ZRANGE {} 0 -1 WITHSCORES"]),
        ("small_set", vec!["SCARD {}", "SMISMEMBER {} a b c d"]),
        ("int_set", vec!["SMEMBERS {}", "OBJECT ENCODING {}"]),
        ("big_set", set_reads.iter().map(String::as_str).collect()),
        ("big_int_set", int_set_reads.to_vec()),
        ("small_stream", vec!["XRANGE {} - +", "XINFO STREAM {}"]),
        // Not `XINFO STREAM`: its `radix-tree-nodes` after a load follows Redis's radix tree,
        // which latchkey models only for streams built by `XADD`.
        ("big_stream", vec!["XRANGE {} - +", "XLEN {}"]),
        (
            "empty_stream",
            vec!["XINFO STREAM {}", "XLEN {}", "EXISTS {}"],
        ),
    ];
    for (key, reads) in &cases {
        let from_redis = redis_dump(&mut d, key);
        restore_both(&mut d, &format!("{key}_from_redis"), &from_redis, reads);
        let from_latchkey = latchkey_dump(&mut d, key);
        restore_both(
            &mut d,
            &format!("{key}_from_latchkey"),
            &from_latchkey,
            reads,
        );
    }
}

/// TTLs, absolute and relative, and one already past: the key is not created (and an old one
/// that `REPLACE` removed is gone), on both servers alike.
#[test]
fn ttls_and_the_past() {
    let mut d = Diff::new();
    d.both(&["SET", "src", "v"]);
    let payload = redis_dump(&mut d, "src");
    let restore = |ttl: &str, extra: &[&str]| -> Vec<Vec<u8>> {
        let mut a: Vec<Vec<u8>> = vec![b"RESTORE".to_vec(), b"k".to_vec(), ttl.into()];
        a.push(payload.clone());
        a.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
        a
    };
    d.check(&restore("100000", &[]));
    d.check_ttl(&["TTL", "k"], 0, 1);
    d.check(&restore("1", &["ABSTTL"]));
    d.check(&restore("1", &["ABSTTL", "REPLACE"]));
    d.check(&["EXISTS", "k"]);
    d.check(&restore("1", &["ABSTTL"]));
    d.check(&["EXISTS", "k"]);
    d.check(&restore("0", &[]));
    d.check(&["TTL", "k"]);
    // A key whose TTL has passed is no obstacle (no REPLACE needed).
    d.check(&["PEXPIRE", "k", "1"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    d.check(&restore("0", &[]));
    d.check(&["GET", "k"]);
    d.check(&restore(
        "4102444800000",
        &["ABSTTL", "REPLACE", "IDLETIME", "100"],
    ));
    d.check(&["OBJECT", "IDLETIME", "k"]);
    d.check(&["OBJECT", "FREQ", "k"]);
    d.check(&["PEXPIRETIME", "k"]);
    // Under an LFU policy, FREQ sets the counter and IDLETIME is ignored.
    d.check(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"]);
    d.check(&restore("0", &["REPLACE", "FREQ", "100"]));
    d.check(&["OBJECT", "FREQ", "k"]);
    d.check(&restore("0", &["REPLACE", "IDLETIME", "100"]));
    d.check(&["OBJECT", "FREQ", "k"]);
}

/// Strings of every length up to 300 bytes (and a few long ones), from alphabets of 2 to 256
/// letters so that LZF saves anywhere from nothing to most of a string. Where Redis cannot
/// compress (20 bytes or less, or random bytes), `DUMP` gives Redis's bytes. Where it can, its
/// bytes come from liblzf 3.6 with a hash table left uninitialised (`INIT_HTAB 0`: stale
/// entries may find extra matches), which no other compressor can promise to mirror, and the
/// `lzf` crate ports an older liblzf that stops looking for matches a byte earlier: those
/// payloads are checked by crossing instead, each server restoring the other's.
#[test]
fn strings_dump_with_redis_s_bytes_or_cross() {
    let mut d = Diff::new();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let lengths = (0..300).chain([1000, 4095, 4096, 4097, 20000]);
    for len in lengths {
        for alphabet in [2u64, 5, 16, 40, 256] {
            let value: Vec<u8> = (0..len)
                .map(|_| (b'a' as u64 + next() % alphabet) as u8)
                .collect();
            d.check(&[b"SET".as_slice(), b"s", &value]);
            if len <= 20 || alphabet == 256 && len < 1000 {
                d.check(&["DUMP", "s"]);
                continue;
            }
            let from_redis = redis_dump(&mut d, "s");
            let from_latchkey = latchkey_dump(&mut d, "s");
            restore_both(&mut d, "r", &from_redis, &["GET {}"]);
            assert_eq!(bulk_payload(&d.latchkey.cmd(&["GET", "r"])), value);
            restore_both(&mut d, "l", &from_latchkey, &["GET {}"]);
            assert_eq!(bulk_payload(&d.redis.cmd(&["GET", "l"])), value);
        }
    }
}
