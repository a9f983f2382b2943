//! Differential tests of the bitmap commands (`SETBIT`, `GETBIT`, `BITCOUNT`, `BITPOS`,
//! `BITOP`, `BITFIELD`, `BITFIELD_RO`), `LCS` and `HRANDFIELD` against a real redis-server:
//! replies byte for byte in RESP2 and RESP3, errors and the order in which arguments are
//! checked included.

use latchkey_tests::Diff;

/// Bitmaps: edges of ranges in bytes and bits, negative indexes, errors in every position.
const BITMAPS: &[&str] = &[
    "SETBIT b 7 1",
    "SETBIT b 7 1",
    "SETBIT b 7 0",
    "SETBIT b 100 1",
    "GET b",
    "STRLEN b",
    "GETBIT b 100",
    "GETBIT b 99",
    "GETBIT b 1000000",
    "GETBIT nokey 5",
    "GETBIT b -1",
    "GETBIT b x",
    "SETBIT b -1 1",
    "SETBIT b x 1",
    "SETBIT b 1 2",
    "SETBIT b 1 -1",
    "SETBIT b 1 x",
    "SETBIT b 4294967296 1",
    "SET s foobar",
    "BITCOUNT s",
    "BITCOUNT s 0 0",
    "BITCOUNT s 1 1",
    "BITCOUNT s 1 -2",
    "BITCOUNT s -3 -1",
    "BITCOUNT s -1 -3",
    "BITCOUNT s -1 -3 foo",
    "BITCOUNT s 5 30 BIT",
    "BITCOUNT s 5 30 bit",
    "BITCOUNT s 0 -1 BYTE",
    "BITCOUNT s 3 3 BIT",
    "BITCOUNT s 9 3 BIT",
    "BITCOUNT s -7 -1 BIT",
    "BITCOUNT s 0 100 BIT",
    "BITCOUNT s 0 1 FOO",
    "BITCOUNT s 0",
    "BITCOUNT s x 1",
    "BITCOUNT s 0 y",
    "BITCOUNT s 0 1 BIT extra",
    "BITCOUNT nokey x y",
    "BITCOUNT nokey 0",
    "BITPOS s 1",
    "BITPOS s 0",
    "BITPOS s 1 2",
    "BITPOS s 1 2 -1",
    "BITPOS s 0 2 -1",
    "BITPOS s 1 7 15 BIT",
    "BITPOS s 0 7 15 BIT",
    "BITPOS s 1 9 9 BIT",
    "BITPOS s 0 9 9 BIT",
    "BITPOS s 1 -5 -1 BIT",
    "BITPOS s 0 -1 -1 BIT",
    "BITPOS s 1 5 BIT",
    "BITPOS s 1 20 10",
    "BITPOS s 2",
    "BITPOS s x",
    "BITPOS s 1 x",
    "BITPOS s 1 0 x",
    "BITPOS s 1 0 -1 FOO",
    "BITPOS s 1 0 -1 BIT x",
    "BITPOS nokey 1",
    "BITPOS nokey 0",
    "BITPOS nokey 0 x",
    "BITPOS nokey 2",
    "SET ones \"\\xff\\xff\\xff\"",
    "BITPOS ones 0",
    "BITPOS ones 0 0",
    "BITPOS ones 0 0 -1",
    "BITPOS ones 0 3 BIT",
    "BITPOS ones 0 3 -1 BIT",
    "BITPOS ones 1 100",
    "SET zeros \"\\x00\\x00\"",
    "BITPOS zeros 1",
    "BITPOS zeros 0",
    "BITPOS zeros 1 4 12 BIT",
    "SET empty ''",
    "BITPOS empty 0",
    "BITPOS empty 1",
    "BITCOUNT empty",
    "BITCOUNT empty 0 -1 BIT",
    "SET n 12345",
    "BITCOUNT n",
    "GETBIT n 2",
    "SETBIT n 0 1",
    "GET n",
    "HSET h f v",
    "SETBIT h 0 1",
    "GETBIT h 0",
    "BITCOUNT h",
    "BITCOUNT h x y",
    "BITPOS h 1",
    "BITPOS h 5",
    "BITOP AND dest s ones",
    "GET dest",
    "BITOP OR dest s zeros b",
    "GET dest",
    "BITOP XOR dest s ones zeros",
    "GET dest",
    "BITOP NOT dest s",
    "GET dest",
    "BITOP not dest s",
    "BITOP NOT dest s ones",
    "BITOP NAND dest s",
    "BITOP AND dest s h",
    "BITOP AND dest nokey1 nokey2",
    "EXISTS dest",
    "SET dest x EX 100",
    "BITOP OR dest s",
    "TTL dest",
    "BITOP AND dest nokey",
    "EXISTS dest",
    "BITOP AND h s",
    "TYPE h",
    "SETBIT",
    "SETBIT b 1",
    "GETBIT b",
    "BITCOUNT",
    "BITPOS b",
    "BITOP AND d",
];

#[test]
fn bitmaps_resp2() {
    Diff::new().table(BITMAPS);
}

#[test]
fn bitmaps_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(BITMAPS);
}

/// `BITFIELD`: every type width, `#` offsets, the three overflow rules, and the errors.
const BITFIELD: &[&str] = &[
    "BITFIELD bf",
    "BITFIELD bf GET u8 0",
    "EXISTS bf",
    "BITFIELD bf SET u8 0 255 GET u8 0 GET i8 0 GET u4 4 GET i4 4",
    "BITFIELD bf SET i5 7 -3 GET i5 7 GET u5 7 GET u63 0 GET i64 0 GET i1 0 GET u1 0",
    "BITFIELD bf INCRBY u2 100 1 INCRBY u2 100 1 INCRBY u2 100 1 INCRBY u2 100 1",
    "BITFIELD bf OVERFLOW SAT INCRBY u2 102 1 INCRBY u2 102 1 INCRBY u2 102 1 INCRBY u2 102 -9",
    "BITFIELD bf OVERFLOW FAIL INCRBY u2 104 1 INCRBY u2 104 1 INCRBY u2 104 1 INCRBY u2 104 1",
    "BITFIELD bf OVERFLOW FAIL INCRBY u2 104 -100",
    "BITFIELD bf OVERFLOW WRAP INCRBY i8 200 127 INCRBY i8 200 1 INCRBY i8 200 -1000",
    "BITFIELD bf OVERFLOW SAT INCRBY i8 208 127 INCRBY i8 208 1 INCRBY i8 208 -1000",
    "BITFIELD bf OVERFLOW FAIL INCRBY i8 216 127 INCRBY i8 216 1 INCRBY i8 216 -1000",
    "BITFIELD bf SET i64 300 9223372036854775807 INCRBY i64 300 1 GET i64 300",
    "BITFIELD bf OVERFLOW SAT SET i64 300 9223372036854775807 INCRBY i64 300 1",
    "BITFIELD bf OVERFLOW FAIL INCRBY i64 300 -1 INCRBY i64 300 1 INCRBY i64 300 1",
    "BITFIELD bf SET i64 400 -9223372036854775808 INCRBY i64 400 -1",
    "BITFIELD bf OVERFLOW SAT INCRBY i64 400 -9223372036854775808",
    "BITFIELD bf SET u63 500 9223372036854775807 INCRBY u63 500 1 GET u63 500",
    "BITFIELD bf OVERFLOW SAT SET u63 500 -1 GET u63 500 SET u8 600 256 SET u8 600 -1",
    "BITFIELD bf OVERFLOW WRAP SET u8 600 256 SET u8 600 -1 SET i8 600 200 SET i8 600 -129",
    "BITFIELD bf OVERFLOW FAIL SET u8 600 256 SET u8 600 255 SET i8 600 200",
    "BITFIELD bf SET u8 #3 65 GET u8 #3 GET u8 24 INCRBY i16 #10 1000 GET i16 160",
    "BITFIELD bf GET u8 #-1",
    "BITFIELD bf GET u8 #9223372036854775807",
    "BITFIELD bf GET u8 ##1",
    "BITFIELD bf GET u8 #",
    "BITFIELD bf SET u8 # 1",
    "GET bf",
    "STRLEN bf",
    "BITFIELD bf GET u64 0",
    "BITFIELD bf GET i65 0",
    "BITFIELD bf GET i0 0",
    "BITFIELD bf GET x8 0",
    "BITFIELD bf GET U8 0",
    "BITFIELD bf GET u 0",
    "BITFIELD bf GET '' 0",
    "BITFIELD bf GET u8 -1",
    "BITFIELD bf GET u8 x",
    "BITFIELD bf GET u8 4294967296",
    "BITFIELD bf GET u8 4294967295",
    "BITFIELD bf SET u8 0 x",
    "BITFIELD bf SET u8 0",
    "BITFIELD bf GET u8",
    "BITFIELD bf INCRBY u8 0",
    "BITFIELD bf OVERFLOW",
    "BITFIELD bf OVERFLOW FOO GET u8 0",
    "BITFIELD bf FOO u8 0",
    "BITFIELD bf GET u8 0 SET u8 0 1 OVERFLOW BAD",
    "BITFIELD bf GET u64 0 OVERFLOW BAD",
    "BITFIELD bf get u8 0 set u8 0 9 incrby u8 0 1 overflow sat",
    "BITFIELD nb OVERFLOW FAIL INCRBY u2 100 5",
    "STRLEN nb",
    "BITFIELD_RO bf GET u8 0 GET i16 #2",
    "BITFIELD_RO bf",
    "BITFIELD_RO nokey GET u8 0",
    "BITFIELD_RO bf SET u8 0 1",
    "BITFIELD_RO bf GET u8 0 INCRBY u8 0 1",
    "BITFIELD_RO bf OVERFLOW SAT",
    "BITFIELD_RO bf GET u64 0",
    "HSET h f v",
    "BITFIELD h GET u8 0",
    "BITFIELD h SET u8 0 1",
    "BITFIELD_RO h GET u8 0",
    "BITFIELD_RO h SET u8 0 1",
    "BITFIELD h GET u64 0",
    "BITFIELD",
    "BITFIELD_RO",
];

#[test]
fn bitfield_resp2() {
    Diff::new().table(BITFIELD);
}

#[test]
fn bitfield_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(BITFIELD);
}

/// The largest offsets under a lowered `proto-max-bulk-len` (the limit of a bit offset is the
/// largest string): the last bit in, the first bit out, for every command that takes one.
#[test]
fn offsets_at_the_largest_string() {
    let mut d = Diff::new();
    d.table(&[
        "CONFIG SET proto-max-bulk-len 1mb",
        "SETBIT big 8388607 1",
        "STRLEN big",
        "SETBIT big 8388608 1",
        "GETBIT big 8388607",
        "GETBIT big 8388608",
        "BITFIELD big GET u8 8388600",
        "BITFIELD big GET u8 8388601",
        "BITFIELD big GET u8 8388608",
        "BITFIELD big SET u1 #8388607 1",
        "BITFIELD big SET u2 #4194304 1",
        "BITFIELD big SET u8 8388607 1",
        "STRLEN big",
        "BITCOUNT big",
        "BITPOS big 1",
        "BITPOS big 1 -1",
        "BITPOS big 0 -1",
        "CONFIG SET proto-max-bulk-len 512mb",
        "GETBIT big 4294967295",
        "GETBIT big 4294967296",
        "BITFIELD big GET i64 4294967295",
        "BITFIELD big GET i64 4294967296",
    ]);
}

/// A pseudo-random walk of writes and reads over a few small bitmaps, every reply compared:
/// the bit arithmetic of every command against Redis's own.
#[test]
fn random_bit_walk() {
    let mut d = Diff::new();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let types = [
        "u1", "u3", "u8", "u13", "u63", "i1", "i7", "i16", "i33", "i64",
    ];
    let rules = ["WRAP", "SAT", "FAIL"];
    for _ in 0..1500 {
        let key = format!("k{}", next(3));
        let a = next(200) as i64 - 20;
        let b = next(200) as i64 - 20;
        let v = next(1 << 40) as i64 - (1 << 39);
        let t = types[next(types.len() as u64) as usize];
        let rule = rules[next(3) as usize];
        let unit = ["", " BIT", " BYTE"][next(3) as usize];
        let line = match next(8) {
            0 => format!("SETBIT {key} {} {}", next(160), next(2)),
            1 => format!("GETBIT {key} {}", next(200)),
            2 => format!("BITCOUNT {key} {a} {b}{unit}"),
            3 => format!("BITPOS {key} {} {a} {b}{unit}", next(2)),
            4 => format!("BITPOS {key} {} {a}", next(2)),
            5 => format!(
                "BITFIELD {key} OVERFLOW {rule} INCRBY {t} {} {v} GET {t} {a}",
                next(150)
            ),
            6 => format!("BITFIELD {key} OVERFLOW {rule} SET {t} #{} {v}", next(20)),
            _ => format!(
                "BITOP {} k{} k0 k1 k2",
                ["AND", "OR", "XOR"][next(3) as usize],
                next(3)
            ),
        };
        d.table(&[&line]);
    }
    for k in ["k0", "k1", "k2"] {
        d.check(&["GET", k]);
    }
}

/// `LCS`: the string, `LEN`, `IDX` with and without `MINMATCHLEN`/`WITHMATCHLEN`, and errors.
const LCS: &[&str] = &[
    "SET a ohmytext",
    "SET b mynewtext",
    "LCS a b",
    "LCS a b LEN",
    "LCS a b IDX",
    "LCS a b IDX MINMATCHLEN 4",
    "LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN",
    "LCS a b idx withmatchlen minmatchlen -5",
    "LCS a b IDX WITHMATCHLEN",
    "LCS b a IDX WITHMATCHLEN",
    "LCS a a IDX WITHMATCHLEN",
    "LCS a nokey",
    "LCS a nokey IDX",
    "LCS nokey1 nokey2 LEN",
    "SET x ''",
    "LCS x a IDX",
    "SET c rosettacode",
    "SET d raisethysword",
    "LCS c d",
    "LCS c d IDX WITHMATCHLEN",
    "SET e aaaaaaaaaa",
    "SET f aaaa",
    "LCS e f IDX",
    "LCS a b LEN IDX",
    "LCS a b MINMATCHLEN",
    "LCS a b MINMATCHLEN x",
    "LCS a b FOO",
    "LCS a b WITHMATCHLEN",
    "HSET h f v",
    "LCS a h",
    "LCS h a FOO",
    "LCS a",
    "SET n 12345",
    "SET m 2x4y5",
    "LCS n m IDX WITHMATCHLEN",
];

#[test]
fn lcs_resp2() {
    Diff::new().table(LCS);
}

#[test]
fn lcs_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(LCS);
}

/// `LCS` of strings whose table passes `proto-max-bulk-len` is refused with Redis's error, and
/// one under it is answered; both on random-looking DNA-like strings.
#[test]
fn lcs_table_limit_and_a_larger_pair() {
    let mut d = Diff::new();
    let mut seed: u64 = 42;
    let mut dna = |n: usize| -> String {
        (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                b"ACGT"[(seed >> 62) as usize] as char
            })
            .collect()
    };
    let (x, y) = (dna(700), dna(650));
    d.check(&["SET", "x", &x]);
    d.check(&["SET", "y", &y]);
    d.table(&[
        "LCS x y LEN",
        "LCS x y",
        "LCS x y IDX MINMATCHLEN 5 WITHMATCHLEN",
        "CONFIG SET proto-max-bulk-len 1mb",
        "LCS x y LEN",
        "LCS x y IDX",
        "CONFIG SET proto-max-bulk-len 512mb",
    ]);
}

/// `HRANDFIELD`: what does not depend on chance (counts covering the hash, zero, missing keys,
/// errors), byte for byte.
const HRANDFIELD: &[&str] = &[
    "HSET h a 1 b 2 c 3",
    "HRANDFIELD h 3",
    "HRANDFIELD h 10",
    "HRANDFIELD h 3 WITHVALUES",
    "HRANDFIELD h 100 withvalues",
    "HRANDFIELD h 0",
    "HRANDFIELD h 0 WITHVALUES",
    "HRANDFIELD nokey",
    "HRANDFIELD nokey 5",
    "HRANDFIELD nokey -5 WITHVALUES",
    "HRANDFIELD nokey x",
    "HRANDFIELD h x",
    "HRANDFIELD h 1 FOO",
    "HRANDFIELD h 1 WITHVALUES x",
    "HRANDFIELD h -9223372036854775808",
    "HRANDFIELD h -9223372036854775807 WITHVALUES",
    "HRANDFIELD h 9223372036854775807 WITHVALUES",
    "HRANDFIELD h -4611686018427387904 WITHVALUES",
    "HRANDFIELD h 4611686018427387904 WITHVALUES",
    "HSET one only 1",
    "HRANDFIELD one",
    "HRANDFIELD one -3",
    "HRANDFIELD one -2 WITHVALUES",
    "HRANDFIELD one 1 WITHVALUES",
    "SET s x",
    "HRANDFIELD s",
    "HRANDFIELD s 3",
    "HRANDFIELD",
];

#[test]
fn hrandfield_resp2() {
    Diff::new().table(HRANDFIELD);
}

#[test]
fn hrandfield_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(HRANDFIELD);
}

/// What `HRANDFIELD` picks by chance: distinct fields for a positive count smaller than the
/// hash, repeats allowed (and seen) for a negative one, values that go with their fields.
#[test]
fn hrandfield_picks() {
    let mut d = Diff::new();
    let mut hset = vec!["HSET".to_string(), "h".into()];
    for i in 0..50 {
        hset.push(format!("f{i}"));
        hset.push(format!("v{i}"));
    }
    d.check(&hset);
    let fields = |reply: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(reply)
            .lines()
            .filter(|l| !l.starts_with(['*', '$']))
            .map(str::to_string)
            .collect()
    };
    let (_, l) = d.both(&["HRANDFIELD", "h", "20"]);
    let mut got = fields(&l);
    assert_eq!(got.len(), 20);
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 20, "a positive count gives distinct fields");
    assert!(got.iter().all(|f| f.starts_with('f')));
    let (_, l) = d.both(&["HRANDFIELD", "h", "-200"]);
    let mut got = fields(&l);
    assert_eq!(got.len(), 200);
    got.sort();
    got.dedup();
    assert!(got.len() < 200, "200 picks among 50 fields repeat some");
    for resp in ["2", "3"] {
        d.both(&["HELLO", resp]);
        let (_, l) = d.both(&["HRANDFIELD", "h", "-30", "WITHVALUES"]);
        let text = String::from_utf8_lossy(&l).into_owned();
        let head = if resp == "2" { "*60\r\n" } else { "*30\r\n" };
        assert!(text.starts_with(head), "{text}");
        let items = fields(&l);
        assert_eq!(items.len(), 60);
        for pair in items.chunks(2) {
            assert_eq!(pair[0][1..], pair[1][1..], "a value goes with its field");
        }
    }
}

/// A `SETBIT` of a bit to the value it already has, inside the string, changes nothing: a
/// transaction that watched the key still runs (Redis 7.0 signals only real changes); one
/// that changes the bit or grows the string aborts it.
#[test]
fn watch_sees_only_real_bit_changes() {
    let mut d = Diff::new();
    let mut others = (
        latchkey_tests::RawConn::connect(d.redis_proc.addr()).unwrap(),
        latchkey_tests::RawConn::connect(d.latchkey_server.addr()).unwrap(),
    );
    d.table(&["SET w @"]);
    for (change, aborts) in [
        ("SETBIT w 1 1", false),
        ("BITFIELD w SET u8 0 64 INCRBY u8 0 0", false),
        ("BITFIELD w OVERFLOW FAIL INCRBY u8 0 1000", false),
        ("SETBIT w 2 1", true),
        ("SETBIT w 2 1", false),
        ("SETBIT w 100 0", true),
        ("BITFIELD w SET u8 0 1", true),
    ] {
        d.table(&["WATCH w", "MULTI", "PING"]);
        let args: Vec<&str> = change.split(' ').collect();
        let r = others.0.cmd(&args);
        let l = others.1.cmd(&args);
        assert_eq!(r, l, "{change}");
        let exec = d.check(&["EXEC"]);
        let aborted = exec.starts_with(b"*-1") || exec.starts_with(b"_");
        assert_eq!(aborted, aborts, "{change}");
    }
}

/// The other commands that grow a string stop at `proto-max-bulk-len` with Redis's error:
/// `APPEND` past it, `SETRANGE` past it (an empty value changes nothing, even far out).
#[test]
fn append_and_setrange_stop_at_the_largest_string() {
    let mut d = Diff::new();
    let part = "a".repeat(600_000);
    d.check(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]);
    d.check(&["SET", "k", &part]);
    d.check(&["APPEND", "k", &part]);
    d.check(&["APPEND", "k", &"b".repeat(448_576)]);
    d.check(&["APPEND", "k", "c"]);
    d.check(&["STRLEN", "k"]);
    d.table(&[
        "SETRANGE r 1048575 x",
        "SETRANGE r 1048576 x",
        "SETRANGE r 1048575 xy",
        "SETRANGE r 99999999999 ''",
        "SETRANGE nokey 99999999999 ''",
        "SETRANGE nokey 99999999999 x",
        "EXISTS nokey",
        "STRLEN r",
        "HSET h f v",
        "SETRANGE h 99999999999 x",
        "SETRANGE h 0 x",
        "APPEND h x",
    ]);
}
