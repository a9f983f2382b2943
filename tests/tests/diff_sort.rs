//! Differential tests of `SORT` and `SORT_RO` against a real redis-server, under RESP2 and
//! RESP3: every case runs on both servers and the reply bytes are compared.
//!
//! Inputs are lists, sorted sets and intsets (whose order is the same on both servers), or
//! sets of strings sorted by something that leaves no ties; a hash-table set's own order
//! depends on Redis's hash seed, so `BY nosort` of one is only compared where Redis sorts it
//! anyway (`STORE`, scripts).

use latchkey_tests::Diff;

/// Data the cases below read: weights as strings and as hash fields, one list, one intset,
/// one set of words, one sorted set.
const SETUP: &[&str] = &[
    "RPUSH l 3 10 1 2.5 -4 7",
    "MSET w_3 30 w_10 5 w_1 100 w_2.5 -1 w_-4 0 w_7 7.5",
    "HSET h_3 f 3",
    "HSET h_10 f 1",
    "HSET h_1 f 2",
    "HSET h_7 f x",
    "SADD ints 5 3 9 1 7",
    "SADD words pear apple fig banana kiwi",
    "MSET n_pear 5 n_apple 1 n_fig 4 n_banana 2 n_kiwi 3",
    "ZADD z 1 a 5 b 2 c 10 d 3 e",
    "MSET s_a x s_b y s_c w s_d v",
];

const SORTS: &[&str] = &[
    // Numbers, both ways, and windows of them.
    "SORT l",
    "SORT l DESC",
    "SORT l ASC",
    "SORT l LIMIT 1 3",
    "SORT l LIMIT 0 0",
    "SORT l LIMIT -5 2",
    "SORT l LIMIT 4 100",
    "SORT l LIMIT 6 1",
    "SORT l LIMIT 100 -1",
    "SORT l LIMIT 2 -1",
    "SORT l LIMIT 2 9223372036854775807",
    "SORT l LIMIT 9223372036854775807 9223372036854775807",
    "SORT l LIMIT -9223372036854775808 1",
    "SORT l LIMIT 1 2 DESC",
    "SORT l desc limit 1 2 asc",
    "SORT l ALPHA",
    "SORT l ALPHA DESC LIMIT 0 3",
    // By the weights at other keys, strings and hash fields; missing ones count as 0.
    "SORT l BY w_*",
    "SORT l BY w_* DESC",
    "SORT l BY w_* LIMIT 1 2",
    "SORT l BY h_*->f",
    "SORT l BY h_*->f ALPHA",
    "SORT l BY h_*->f ALPHA DESC",
    "SORT l BY w_* ALPHA",
    "SORT l BY missing_*",
    "SORT l BY missing_* ALPHA",
    "SORT l BY h_*->nofield",
    "SORT l BY w_*->f",
    // GET: the element, values at keys and fields, nulls for what is missing.
    "SORT l GET #",
    "SORT l GET # GET w_*",
    "SORT l BY w_* GET w_* GET h_*->f GET #",
    "SORT l GET nokey",
    "SORT l GET missing_* LIMIT 0 2",
    "SORT l GET h_*->f",
    "SORT l GET h_*-> LIMIT 0 2",
    "SORT l GET w_* GET w_* LIMIT 0 1",
    // No sorting: a list's and a sorted set's own order, reversed by DESC, cut by LIMIT.
    "SORT l BY nosort",
    "SORT l BY nosort DESC",
    "SORT l BY nosort LIMIT 1 2",
    "SORT l BY nosort DESC LIMIT 1 2",
    "SORT l BY nosort LIMIT 5 10",
    "SORT l BY nosort LIMIT -10 100",
    "SORT l BY nosort GET w_*",
    "SORT l BY nosort BY w_*",
    "SORT l BY w_* BY nosort",
    "SORT l BY # GET #",
    "SORT z",
    "SORT z ALPHA",
    "SORT z ALPHA DESC",
    "SORT z BY nosort",
    "SORT z BY nosort DESC",
    "SORT z BY nosort ASC LIMIT 0 1",
    "SORT z BY nosort DESC LIMIT 0 2",
    "SORT z BY nosort LIMIT 2 2",
    "SORT z BY nosort DESC LIMIT 2 2",
    "SORT z BY nosort LIMIT 5 10",
    "SORT z BY s_* ALPHA",
    "SORT z BY s_* ALPHA GET s_* GET #",
    // Sets: an intset keeps its order; strings sorted by their weights.
    "SORT ints",
    "SORT ints DESC LIMIT 1 2",
    "SORT ints BY nosort",
    "SORT ints ALPHA",
    "SORT words ALPHA",
    "SORT words ALPHA DESC",
    "SORT words BY n_*",
    "SORT words BY n_* DESC GET # GET n_*",
    "SORT words BY n_* LIMIT 1 3",
    "SORT_RO words ALPHA",
    "SORT_RO l BY w_* GET # LIMIT 0 3",
    // Errors, in Redis's order: options first (the first bad one answers), then the type.
    "SORT words",
    "SORT words BY h_*->f",
    "SORT l BY h_*->f",
    "SORT nokey",
    "SORT nokey ALPHA DESC LIMIT 0 10",
    "SORT l LIMIT",
    "SORT l LIMIT 1",
    "SORT l LIMIT x 1",
    "SORT l LIMIT 1 x",
    "SORT l LIMIT 1.5 1",
    "SORT l BY",
    "SORT l GET",
    "SORT l STORE",
    "SORT l FOO",
    "SORT l LIMIT x 1 FOO",
    "SORT l FOO LIMIT x 1",
    "SORT w_3",
    "SORT h_3",
    "SORT w_3 FOO",
    "SORT w_3 LIMIT x 1",
    "SORT_RO l STORE dst",
    "SORT_RO w_3",
    "SORT",
    "SORT_RO",
];

/// `STORE`: a list replacing the destination (TTL included), deleted by an empty result.
const STORES: &[&str] = &[
    "SORT l BY w_* STORE dst",
    "LRANGE dst 0 -1",
    "OBJECT ENCODING dst",
    "TYPE dst",
    "SORT l GET missing_* GET # STORE dst",
    "LRANGE dst 0 -1",
    "SET dst string",
    "EXPIRE dst 100",
    "SORT z BY nosort DESC STORE dst",
    "TTL dst",
    "LRANGE dst 0 -1",
    "SORT l LIMIT 10 10 STORE dst",
    "EXISTS dst",
    "SORT l LIMIT 10 10 STORE dst",
    "SORT nokey STORE dst",
    "SORT words BY nosort STORE dst",
    "LRANGE dst 0 -1",
    "SORT words BY const STORE dst",
    "LRANGE dst 0 -1",
    "SORT words BY nosort DESC STORE dst",
    "LRANGE dst 0 -1",
    "SORT l STORE a STORE b",
    "EXISTS a",
    "LRANGE b 0 -1",
    "SORT l STORE l",
    "LRANGE l 0 -1",
    "SORT words STORE dst",
    "LRANGE dst 0 -1",
    "SORT ints STORE ints",
    "TYPE ints",
    // WATCH sees a SORT that stored (even the client's own), not one that did not.
    "WATCH dst",
    "SORT z STORE dst",
    "MULTI",
    "PING",
    "EXEC",
    "WATCH other",
    "SORT z",
    "SORT nokey STORE other",
    "MULTI",
    "PING",
    "EXEC",
    // Inside a transaction and a script: a set is sorted when nothing else would sort it.
    "MULTI",
    "SORT z BY nosort ASC",
    "SORT z BY nosort DESC",
    "EXEC",
    "EVAL \"return redis.call('sort', KEYS[1], 'by', 'nosort')\" 1 words",
    "EVAL \"return redis.call('sort', KEYS[1], 'by', 'nosort', 'desc')\" 1 words",
    "EVAL \"return redis.call('sort', KEYS[1], 'by', 'nosort', 'desc')\" 1 z",
    "EVAL \"return redis.call('sort', KEYS[1], 'get', 'nokey_*')\" 1 ints",
    "EVAL \"return redis.call('sort', KEYS[1], 'store', 'x')\" 1 w_3",
    "EVAL \"return redis.call('sort_ro', KEYS[1], 'store', 'x')\" 1 z",
    // Where the keys are.
    "COMMAND GETKEYS sort abc store def",
    "COMMAND GETKEYS sort_ro abc",
    "COMMAND GETKEYS sort abc store invalid store stillbad store def",
    "COMMAND GETKEYS sort abc by store get store limit 1 2",
    "COMMAND GETKEYS sort abc STORE",
    "COMMAND GETKEYS sort_ro abc store def",
];

/// Weights as C's `strtod` reads them: blanks before, hex, infinities, empty values; and what
/// it refuses (trailing bytes, out of range, NaN).
const WEIGHTS: &[&str] = &[
    "RPUSH k a b c d",
    "MSET v_a ' 3' v_b 0x10 v_c -inf v_d ''",
    "SORT k BY v_*",
    "SORT k BY v_* DESC GET v_*",
    "MSET v_a 1e308 v_b 1e-300 v_c +2 v_d 5.",
    "SORT k BY v_*",
    "SET v_a nan",
    "SORT k BY v_*",
    "SET v_a '3 '",
    "SORT k BY v_*",
    "SET v_a ' '",
    "SORT k BY v_*",
    "SET v_a 0x1p3",
    "SORT k BY v_*",
    "SET v_a Infinity",
    "SORT k BY v_*",
    "SET v_a .5",
    "SORT k BY v_*",
    "SET v_a 1e",
    "SORT k BY v_*",
    "SET v_a 0x1p-1074",
    "SORT k BY v_*",
    "SET v_a 1",
    "SET v_b 1",
    "SET v_c 1",
    "SET v_d 1",
    "SORT k BY v_* DESC",
    "RPUSH dup 2 1 2 1 10",
    "SORT dup",
    "SORT dup DESC",
    "SORT dup ALPHA",
    // Out of range (`ERANGE`) last: after one, Redis's stale `errno` refuses good weights
    // too, until some system call of its event loop fails and overwrites it.
    "SET v_a 1e400",
    "SORT k BY v_*",
    "SET v_a 1e-400",
    "SORT k BY v_*",
    "SET v_a 1e-310",
    "SORT k BY v_*",
    "SET v_a 0x1p-1080",
    "SORT k BY v_*",
];

fn run(d: &mut Diff) {
    d.table(SETUP);
    d.table(SORTS);
    d.table(STORES);
}

#[test]
fn sort_resp2() {
    let mut d = Diff::new();
    run(&mut d);
}

#[test]
fn sort_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    run(&mut d);
}

/// Weights read as `strtod` reads them, on servers of their own: Redis 7.0 tests `errno`
/// after `strtod` without clearing it first, so an `ERANGE` left by an earlier command of the
/// same connection can make it refuse a good weight; fresh servers keep that out of the
/// comparison.
#[test]
fn weights_as_strtod_reads_them() {
    let mut d = Diff::new();
    d.table(WEIGHTS);
    d.both(&["HELLO", "3"]);
    d.table(&["SORT dup GET nokey GET #"]);
}

/// Bytes past a NUL: C's string functions stop there, in patterns, weights and `ALPHA`.
#[test]
fn nul_bytes_in_patterns_weights_and_alpha() {
    let mut d = Diff::new();
    d.check(&[&b"RPUSH"[..], b"k", b"a", b"b", b"a\x00z", b"a\x00b"]);
    d.check(&[&b"SET"[..], b"w_a", b"2\x00junk"]);
    d.check(&[&b"SET"[..], b"w_b", b"\x001"]);
    d.check(&[&b"SORT"[..], b"k", b"BY", b"w_*", b"GET", b"#"]);
    d.check(&[&b"SORT"[..], b"k", b"ALPHA"]);
    d.check(&[&b"SORT"[..], b"k", b"ALPHA", b"DESC"]);
    d.check(&[&b"SORT"[..], b"k", b"ALPHA", b"STORE", b"dst"]);
    d.check(&[&b"LRANGE"[..], b"dst", b"0", b"-1"]);
    // A `*` after a NUL is not seen: the pattern is constant (no sorting).
    d.check(&[&b"SORT"[..], b"k", b"BY", b"w\x00*"]);
    d.check(&[&b"SORT"[..], b"k", b"GET", b"w_\x00*"]);
    // `#` followed by a NUL is still `#`.
    d.check(&[&b"SORT"[..], b"k", b"GET", b"#\x00x", b"LIMIT", b"0", b"2"]);
    // A hash field name may hold a NUL.
    d.check(&[&b"HSET"[..], b"h_a", b"f\x00g", b"9"]);
    d.check(&[&b"SORT"[..], b"k", b"ALPHA", b"GET", b"h_*->f\x00g"]);
}

/// A large input and a large window: every element comes back, sorted, and the server stays
/// up; a `GET` per element of a big list answers one value each.
#[test]
fn large_inputs() {
    let mut d = Diff::new();
    let n = 20_000;
    let mut args: Vec<String> = vec!["RPUSH".into(), "big".into()];
    args.extend((0..n).map(|i| ((i * 7919) % n).to_string()));
    d.check(&args);
    for i in (0..n).step_by(97) {
        d.check(&["SET", &format!("g_{i}"), &format!("v{i}")]);
    }
    d.check(&["SORT", "big", "LIMIT", "19990", "100"]);
    d.check(&["SORT", "big", "DESC", "LIMIT", "0", "5"]);
    d.check(&["SORT", "big", "ALPHA", "LIMIT", "100", "5"]);
    d.check(&["SORT", "big", "GET", "g_*", "LIMIT", "0", "200"]);
    d.check(&["SORT", "big", "STORE", "sorted"]);
    d.check(&["LRANGE", "sorted", "19995", "-1"]);
    d.check(&["SORT", "big", "BY", "nosort", "LIMIT", "9999", "3"]);
    let whole = d.check(&["SORT", "big"]);
    assert!(whole.starts_with(b"*20000\r\n"));
}

/// A `SORT` that reads other keys is one step, as in Redis: while another client sets `w_a`
/// then `w_b` to the same rising number, `SORT l BY nosort GET w_*` (which reads `w_a`, then
/// `w_b`) never finds `w_b` ahead of `w_a` — it would, were the writes let in between its
/// two reads.
#[test]
fn a_patterned_sort_sees_no_write_half_way() {
    use latchkey_tests::RawConn;
    let server = latchkey_server::Server::builder()
        .start_blocking()
        .expect("start latchkey");
    let addr = server.addr();
    let mut c = RawConn::connect(addr).expect("connect");
    c.cmd(&["RPUSH", "l", "a", "b"]);
    c.cmd(&["MSET", "w_a", "0", "w_b", "0"]);
    let writer = std::thread::spawn(move || {
        let mut w = RawConn::connect(addr).expect("connect");
        for i in 1..=3000 {
            let i = i.to_string();
            w.cmd(&["SET", "w_a", &i]);
            w.cmd(&["SET", "w_b", &i]);
        }
    });
    let int = |line: &str| -> i64 { line.parse().expect("a number") };
    let mut seen = 0;
    while !writer.is_finished() || seen == 0 {
        let reply = c.cmd(&["SORT", "l", "BY", "nosort", "GET", "w_*"]);
        let text = String::from_utf8(reply).unwrap();
        let lines: Vec<&str> = text.split("\r\n").collect();
        let (a, b) = (int(lines[2]), int(lines[4]));
        assert!(b <= a && a - b <= 1, "SORT read w_a={a}, w_b={b}");
        seen += 1;
    }
    writer.join().unwrap();
    let last = c.cmd(&["SORT", "l", "BY", "nosort", "GET", "w_*"]);
    assert_eq!(last, b"*2\r\n$4\r\n3000\r\n$4\r\n3000\r\n");
}
