//! Differential tests of the HyperLogLog commands (`PFADD`, `PFCOUNT`, `PFMERGE`, `PFDEBUG`)
//! against a real redis-server: every reply byte for byte in RESP2 and RESP3, and the value's
//! own bytes (`GET`) after each change, so that a sketch written by one server is the very
//! string the other writes — sparse opcodes, promotion to dense, cached count and all — and
//! damaged sketches get the same answers.

use latchkey_tests::raw::bulk_payload;
use latchkey_tests::Diff;

/// The commands one by one: creation, cache, errors, debugging, merging.
const BASICS: &[&str] = &[
    "PFADD h",
    "GET h",
    "PFCOUNT h",
    "GET h",
    "PFADD h",
    "PFADD h a b c",
    "GET h",
    "PFADD h a b c",
    "PFADD h ''",
    "PFCOUNT h",
    "GET h",
    "PFCOUNT h",
    "PFADD h 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
    "GET h",
    "PFDEBUG ENCODING h",
    "PFDEBUG encoding h",
    "PFDEBUG DECODE h",
    "PFDEBUG FOO h",
    "PFDEBUG ENCODING nokey",
    "PFDEBUG FOO nokey",
    "PFDEBUG",
    "PFDEBUG ENCODING",
    "PFDEBUG ENCODING h extra",
    "PFADD g x y z",
    "PFDEBUG TODENSE g",
    "PFDEBUG TODENSE g",
    "PFDEBUG ENCODING g",
    "PFDEBUG DECODE g",
    "GET g",
    "PFCOUNT g",
    "PFADD g x y z w",
    "GET g",
    "PFADD r 1 2 3",
    "PFDEBUG GETREG r",
    "PFDEBUG ENCODING r",
    "PFMERGE m h g",
    "GET m",
    "PFCOUNT m",
    "PFMERGE m2 h",
    "GET m2",
    "PFMERGE m3",
    "GET m3",
    "PFMERGE m nokey",
    "GET m",
    "PFCOUNT h g",
    "PFCOUNT h g nokey",
    "PFCOUNT nokey1 nokey2",
    "PFCOUNT nokey",
    "SET s notanhll",
    "PFADD s a",
    "PFCOUNT s",
    "PFCOUNT h s",
    "PFCOUNT s h",
    "PFMERGE h s",
    "PFMERGE s h",
    "PFDEBUG ENCODING s",
    "PFDEBUG GETREG s",
    "LPUSH l a",
    "PFADD l a",
    "PFCOUNT l",
    "PFCOUNT h l",
    "PFMERGE l h",
    "PFMERGE h l",
    "PFDEBUG DECODE l",
    "SET n 1234567890123456789",
    "PFADD n a",
    "PFCOUNT",
    "PFADD",
    "PFMERGE",
    "PFSELFTEST extra",
    "CONFIG GET hll-sparse-max-bytes",
    "CONFIG SET hll-sparse-max-bytes 1kb",
    "CONFIG GET hll-sparse-max-bytes",
    "CONFIG SET hll-sparse-max-bytes -1",
    "CONFIG SET hll-sparse-max-bytes abc",
    "CONFIG SET hll-sparse-max-bytes 9223372036854775808",
    "CONFIG SET hll-sparse-max-bytes 18446744073709551615",
    "CONFIG SET hll-sparse-max-bytes 18446744073709551616",
    "CONFIG SET hll-sparse-max-bytes -0",
    "CONFIG SET hll-sparse-max-bytes 1.5",
    "CONFIG SET hll-sparse-max-bytes 1k",
    "CONFIG GET hll-sparse-max-bytes",
    "CONFIG SET hll-sparse-max-bytes 0",
    "PFADD z a",
    "GET z",
    "PFDEBUG ENCODING z",
    "CONFIG SET hll-sparse-max-bytes 3000",
    "SET e x EX 100",
    "DEL e",
    "PFADD e a",
    "TTL e",
    "SET t x",
    "DEL t",
    "PFADD t a",
    "EXPIRE t 100",
    "PFADD t b",
    "TTL t",
    "PFCOUNT t",
    "TTL t",
    "TYPE t",
    "OBJECT ENCODING h",
];

#[test]
fn basics_resp2() {
    Diff::new().table(BASICS);
}

#[test]
fn basics_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(BASICS);
}

/// A xorshift stream, the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Elements added a few at a time until the sketch turns dense, the value's bytes compared
/// after every step: the sparse edits (splits, merges of equal neighbours) and the moment
/// of promotion are Redis's, at the default limit and at a small one.
#[test]
fn sparse_edits_and_promotion_leave_redis_s_bytes() {
    let mut d = Diff::new();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for limit in ["3000", "200", "17"] {
        d.check(&["CONFIG", "SET", "hll-sparse-max-bytes", limit]);
        d.check(&["DEL", "h"]);
        let mut n = 0;
        loop {
            let batch = 1 + rng.next(20);
            let mut args = vec!["PFADD".to_string(), "h".to_string()];
            for _ in 0..batch {
                args.push(format!("e{}", rng.next(1_000_000)));
            }
            n += batch;
            d.check(&args);
            d.check(&["GET", "h"]);
            if n % 7 == 0 {
                d.check(&["PFCOUNT", "h"]);
                d.check(&["GET", "h"]);
            }
            let enc = d.check(&["PFDEBUG", "ENCODING", "h"]);
            if enc == b"+dense\r\n" {
                break;
            }
        }
        d.check(&["PFCOUNT", "h"]);
        // Dense from here on: more elements, then the count.
        for i in 0..50 {
            d.check(&["PFADD", "h", &format!("late{i}"), &format!("later{i}")]);
        }
        d.check(&["GET", "h"]);
        d.check(&["PFCOUNT", "h"]);
    }
}

/// Large sketches: counts in the tens of thousands, merges of dense and sparse sketches into
/// new and existing destinations, and `PFCOUNT` over many keys at once.
#[test]
fn merges_and_counts_over_many_keys() {
    let mut d = Diff::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut keys = Vec::new();
    for k in 0..40 {
        let key = format!("{{t}}k{k}");
        // Sizes from a handful (sparse) to thousands (dense).
        let size = [3, 30, 300, 3000][k % 4];
        let mut args = vec!["PFADD".to_string(), key.clone()];
        for _ in 0..size {
            args.push(rng.next(20_000).to_string());
        }
        d.check(&args);
        d.check(&["GET", &key]);
        keys.push(key);
    }
    let mut all = vec!["PFCOUNT".to_string()];
    all.extend(keys.iter().cloned());
    all.push("{t}missing".into());
    d.check(&all);
    for w in keys.chunks(5) {
        let mut args = vec!["PFCOUNT".to_string()];
        args.extend(w.iter().cloned());
        d.check(&args);
        // A merge into a new key, then into one of the sources.
        let mut m = vec!["PFMERGE".to_string(), "{t}dest".to_string()];
        m.extend(w.iter().cloned());
        d.check(&m);
        d.check(&["GET", "{t}dest"]);
        d.check(&["PFCOUNT", "{t}dest"]);
        let mut m = vec!["PFMERGE".to_string(), w[0].clone()];
        m.extend(w[1..].iter().cloned());
        d.check(&m);
        d.check(&["GET", &w[0]]);
        d.check(&["DEL", "{t}dest"]);
    }
    // Sparse sources only: the destination stays sparse as long as it can.
    d.check(&["PFMERGE", "{t}sparse", "{t}k0", "{t}k1", "{t}k4", "{t}k5"]);
    d.check(&["PFDEBUG", "ENCODING", "{t}sparse"]);
    d.check(&["GET", "{t}sparse"]);
}

/// A sketch's bytes taken from Redis and stored with `SET` on both servers are read the same
/// way: counted, added to, merged.
#[test]
fn redis_s_bytes_are_read_as_redis_reads_them() {
    let mut d = Diff::new();
    let mut small = vec!["PFADD".to_string(), "src".to_string()];
    let mut big = vec!["PFADD".to_string(), "big".to_string()];
    for i in 0..50 {
        small.push(format!("s{i}"));
    }
    for i in 0..20_000 {
        big.push(format!("b{i}"));
    }
    // Built on Redis only; its bytes then go to both.
    d.redis.cmd(&small);
    d.redis.cmd(&big);
    for (from, to) in [("src", "copy"), ("big", "bigcopy")] {
        let bytes = bulk_payload(&d.redis.cmd(&["GET", from]));
        d.check(&[b"SET".as_slice(), to.as_bytes(), &bytes]);
        d.check(&["PFCOUNT", to]);
        d.check(&["PFDEBUG", "ENCODING", to]);
        d.check(&["PFADD", to, "one", "more", "element"]);
        d.check(&["GET", to]);
        d.check(&["PFCOUNT", to]);
    }
    d.check(&["PFCOUNT", "copy", "bigcopy"]);
    d.check(&["PFMERGE", "copy", "bigcopy"]);
    d.check(&["GET", "copy"]);
}

/// A header for a hand-made value: `HYLL`, the encoding, the cached count marked stale.
fn header(encoding: u8) -> Vec<u8> {
    let mut h = b"HYLL".to_vec();
    h.push(encoding);
    h.extend_from_slice(&[0; 10]);
    h.push(0x80);
    h
}

/// Hand-made damaged values (the shapes of CVE-2019-10192/10193 among them: runs that
/// cover more registers than there are, a `VAL` past the end), each put through every
/// command that reads it.
#[test]
fn damaged_values_get_redis_s_answers() {
    let mut d = Diff::new();
    let sparse = |body: &[u8]| {
        let mut v = header(1);
        v.extend_from_slice(body);
        v
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty body", sparse(&[])),
        ("one register short", sparse(&[0x7f, 0xfe])),
        ("a zero run too many", sparse(&[0x7f, 0xff, 0x00])),
        ("a VAL past the end", sparse(&[0x7f, 0xff, 0x80])),
        (
            "a VAL past the end, then zeros",
            sparse(&[0x7f, 0xff, 0x80, 0x00]),
        ),
        // Many XZERO:16384 runs: far more registers than exist.
        ("runs far past the end", sparse(&[0x7f, 0xff].repeat(200))),
        ("VALs far past the end", {
            let mut b = vec![0x7f, 0xfe];
            b.extend(std::iter::repeat_n(0xff, 300));
            sparse(&b)
        }),
        // An XZERO cut off by the end: its second byte reads as Redis's terminating zero.
        ("a cut-off XZERO", sparse(&[0x3f, 0x3f, 0x3f, 0x3e, 0x7f])),
        ("a lone cut-off XZERO", sparse(&[0x7f])),
        ("VAL at 32 everywhere", sparse(&[0xff].repeat(4096))),
        ("header only, dense", header(0)),
        ("dense one byte short", {
            let mut v = header(0);
            v.resize(12303, 0x41);
            v
        }),
        ("dense, all registers at 63", {
            let mut v = header(0);
            v.resize(12304, 0xff);
            v
        }),
        ("dense, arbitrary bytes", {
            let mut v = header(0);
            v.extend((0..12288u32).map(|i| (i * 37 % 251) as u8));
            v
        }),
        ("unknown encoding", {
            let mut v = header(2);
            v.extend_from_slice(&[0x7f, 0xff]);
            v
        }),
        ("short header", b"HYLL\x01\0\0".to_vec()),
        ("wrong magic", {
            let mut v = sparse(&[0x7f, 0xff]);
            v[0] = b'h';
            v
        }),
        ("valid cache on a damaged body", {
            let mut v = sparse(&[0x7f]);
            v[15] = 0;
            v[8] = 42;
            v
        }),
    ];
    let commands: &[&[&str]] = &[
        &["PFCOUNT", "{x}bad"],
        &["PFCOUNT", "{x}bad", "{x}ok"],
        &["PFDEBUG", "DECODE", "{x}bad"],
        &["PFDEBUG", "ENCODING", "{x}bad"],
        &["PFADD", "{x}bad", "a", "b", "c", "d", "e", "f", "g"],
        &["GET", "{x}bad"],
        &["PFMERGE", "{x}dst", "{x}ok", "{x}bad"],
        &["GET", "{x}dst"],
        &["PFMERGE", "{x}bad", "{x}ok"],
        &["GET", "{x}bad"],
        &["PFCOUNT", "{x}bad"],
        &["PFDEBUG", "GETREG", "{x}bad"],
        &["PFDEBUG", "TODENSE", "{x}bad"],
        &["GET", "{x}bad"],
    ];
    for (name, value) in &cases {
        eprintln!("case: {name}");
        d.check(&["DEL", "{x}bad", "{x}ok", "{x}dst"]);
        d.check(&["PFADD", "{x}ok", "p", "q"]);
        d.check(&[b"SET".as_slice(), b"{x}bad", value]);
        for c in commands {
            d.check(c);
        }
    }
}

/// Redis's own fuzzing of damaged sketches (`unit/hyperloglog`), every reply compared: real
/// sketches, sparse and dense, with a few bytes overwritten at random, then counted, merged
/// and added to.
#[test]
fn randomly_damaged_sketches_answer_as_in_redis() {
    let mut d = Diff::new();
    let mut rng = Rng(0xdead_beef_cafe_f00d);
    for round in 0..300 {
        d.check(&["DEL", "{y}h", "{y}m"]);
        let n = [5, 50, 500, 3000][round % 4];
        let mut args = vec!["PFADD".to_string(), "{y}h".to_string()];
        for _ in 0..n {
            args.push(rng.next(1 << 40).to_string());
        }
        d.check(&args);
        let r = d.check(&["STRLEN", "{y}h"]);
        let len: u64 = std::str::from_utf8(&r[1..r.len() - 2])
            .unwrap()
            .parse()
            .unwrap();
        for _ in 0..1 + rng.next(5) {
            let pos = rng.next(len).to_string();
            let byte = [rng.next(256) as u8];
            d.check(&[b"SETRANGE".as_slice(), b"{y}h", pos.as_bytes(), &byte]);
        }
        d.check(&["PFCOUNT", "{y}h"]);
        d.check(&["PFCOUNT", "{y}h", "{y}none"]);
        d.check(&[
            "PFADD",
            "{y}h",
            "x1",
            "x2",
            "x3",
            &rng.next(1000).to_string(),
        ]);
        d.check(&["PFMERGE", "{y}m", "{y}h"]);
        d.check(&["GET", "{y}m"]);
        d.check(&["PFCOUNT", "{y}h"]);
        d.check(&["GET", "{y}h"]);
    }
}

/// `PFSELFTEST` passes on both: the registers read back what was written, and ten million
/// elements added to a dense and a sparse sketch give the same, accurate estimates.
#[test]
fn the_self_test_passes() {
    let mut d = Diff::new();
    assert_eq!(d.check(&["PFSELFTEST"]), b"+OK\r\n");
}

/// The one place latchkey answers otherwise on purpose: `PFDEBUG DECODE` of a damaged sparse
/// body larger than any well-formed one (here 100 KB of opcodes, which Redis prints as 400 KB
/// of text) is refused as damaged, so that a value of hundreds of megabytes cannot make
/// gigabytes of reply. Every other command still answers as Redis does.
#[test]
fn decoding_a_huge_damaged_body_is_refused() {
    let mut d = Diff::new();
    let mut v = header(1);
    v.extend_from_slice(&[0x7f, 0xff].repeat(50_000));
    d.check(&[b"SET".as_slice(), b"huge", &v]);
    let (redis, latchkey) = d.both(&["PFDEBUG", "DECODE", "huge"]);
    assert!(
        redis.starts_with(b"$399999\r\nZ:16384 Z:16384"),
        "{}",
        redis.len()
    );
    assert_eq!(latchkey, b"-INVALIDOBJ Corrupted HLL object detected\r\n");
    d.check(&["PFCOUNT", "huge"]);
    d.check(&["PFADD", "huge", "a"]);
    d.check(&["GET", "huge"]);
}
