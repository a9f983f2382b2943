//! Differential tests of the stream commands (`XADD`, `XLEN`, `XRANGE`, `XREVRANGE`, `XDEL`,
//! `XTRIM`, `XSETID`) against a real redis-server: every reply byte for byte, RESP2 and RESP3.
//!
//! Generated IDs (`XADD *`) take each server's clock, so the tables use explicit IDs and
//! `ms-*`; the `*` form is checked apart, by shape and order. Approximate trimming (`~`)
//! depends on where Redis's listpack nodes end (100 entries each by default): the long test
//! below fills streams past several node boundaries and compares what each trim leaves.

use latchkey_tests::Diff;

/// The commands one by one, their options and their errors.
const BASICS: &[&str] = &[
    "XADD s 1-1 a 1",
    "XADD s 1-1 a 1",
    "XADD s 0-0 a 1",
    "XADD s 0 a 1",
    "XADD s 1-* b 2",
    "XADD s 1-* b 2",
    "XADD s 0-* b 2",
    "XADD s 5 c 3 d 4",
    "XADD s 3-* x y",
    "XADD s 18446744073709551616-1 x y",
    "XADD s 1-18446744073709551616 x y",
    "XADD s -1-1 x y",
    "XADD s + x y",
    "XADD s - x y",
    "XADD s abc x y",
    "XADD s 1-a x y",
    "XADD s 10-1 x",
    "XADD s 10-1",
    "XADD s 10-1 a b c",
    "XADD s",
    "XADD s MAXLEN 2 LIMIT 5 10-1 x y",
    "XADD s MAXLEN ~ 2 LIMIT -1 10-1 x y",
    "XADD s MAXLEN ~ 2 LIMIT x 10-1 x y",
    "XADD s MAXLEN -1 10-1 x y",
    "XADD s MAXLEN x 10-1 x y",
    "XADD s MAXLEN 1 MINID 1 10-1 x y",
    "XADD s MINID 1 MAXLEN 1 10-1 x y",
    "XADD s MINID - 10-1 x y",
    "XADD s MINID bad 10-1 x y",
    "XADD s LIMIT 5 10-1 x y",
    "XADD s LIMIT 0 10-1 x y",
    "XADD s NOMKSTREAM MAXLEN = 3 10-1 x y",
    "XADD s MAXLEN",
    "XADD s MAXLEN ~",
    "XADD nokey NOMKSTREAM 1-1 a b",
    "EXISTS nokey",
    "XADD nokey NOMKSTREAM 0-0 a b",
    "XADD nokey2 0-0 a b",
    "EXISTS nokey2",
    "XLEN s",
    "XLEN nokey",
    "XLEN s extra",
    "XRANGE s - +",
    "XRANGE s - + COUNT 2",
    "XRANGE s - + COUNT 0",
    "XRANGE s - + COUNT -1",
    "XRANGE s - + COUNT x",
    "XRANGE s - + COUNT",
    "XRANGE s - + count 1 COUNT 3",
    "XRANGE s (1-1 +",
    "XRANGE s (1 +",
    "XRANGE s - (5",
    "XRANGE s (18446744073709551615-18446744073709551615 +",
    "XRANGE s - (0-0",
    "XRANGE s (- +",
    "XRANGE s - (+",
    "XRANGE s ( +",
    "XRANGE s 1 1",
    "XRANGE s 5 1",
    "XRANGE s 5-0 5-0",
    "XRANGE s x +",
    "XREVRANGE s + - COUNT 1",
    "XREVRANGE s + (5-0",
    "XREVRANGE s (10 (1",
    "XREVRANGE s - +",
    "XRANGE s - + FOO",
    "XRANGE nokey - +",
    "XREVRANGE nokey + -",
    "XRANGE nokey - + COUNT 0",
    "XDEL s 1-2 9-9",
    "XDEL s 1-2",
    "XDEL s bad",
    "XDEL s 5-0 bad",
    "XDEL s +",
    "XDEL nokey 1-1",
    "XRANGE s - +",
    "XLEN s",
    "XADD s 1-9 x y",
    "XTRIM s MAXLEN 1",
    "XTRIM s LIMIT 1",
    "XTRIM s",
    "XTRIM s FOO 1",
    "XTRIM s MAXLEN ~ 0 LIMIT 1",
    "XTRIM s MAXLEN = 0 LIMIT 1",
    "XTRIM s MAXLEN 1 NOMKSTREAM",
    "XTRIM nokey MAXLEN 0",
    "XTRIM nokey FOO",
    "XRANGE s - +",
    "XSETID s 1-0",
    "XSETID s 100-0 ENTRIESADDED 1",
    "XSETID s 100-0 ENTRIESADDED -1",
    "XSETID s 100-0 ENTRIESADDED x",
    "XSETID s 100-0 MAXDELETEDID 200-0",
    "XSETID s 100-0 MAXDELETEDID bad",
    "XSETID s 100-0 FOO 1",
    "XSETID s 100-0 ENTRIESADDED",
    "XSETID s +",
    "XSETID s 100",
    "XSETID s 100-0 ENTRIESADDED 10 MAXDELETEDID 50-0",
    "XSETID nokey 1-1",
    "XADD s 100-0 a b",
    "XADD s 100-* a b",
    "XADD s 99-* a b",
    "TYPE s",
    "OBJECT ENCODING s",
    "SET str x",
    "XADD str 1-1 a b",
    "XADD str NOMKSTREAM 1-1 a b",
    "XLEN str",
    "XRANGE str - +",
    "XREVRANGE str + -",
    "XDEL str 1-1",
    "XTRIM str MAXLEN 0",
    "XSETID str 1-1",
    "XADD s2 MAXLEN ~ 5 1-1 a b",
    "XTRIM s MINID 0",
    "XTRIM s MINID 100-1",
    "XRANGE s - +",
    "XTRIM s MINID ~ 99999999999999",
    "XLEN s",
    "XADD m 18446744073709551615-18446744073709551615 a b",
    "XADD m 18446744073709551615-* a b",
    "XADD m 1-1 a b",
    "XRANGE m (18446744073709551615-18446744073709551614 +",
    "XADD e 5-5 a b",
    "XDEL e 5-5",
    "XLEN e",
    "EXISTS e",
    "TYPE e",
    "XADD e 5-5 a b",
    "XADD e 5-6 '' ''",
    "XRANGE e - +",
    "DEL s s2 m e",
    "XADD r 1-1 a 1",
    "XADD r 2-1 b 2",
    "XADD r2 3-0 c 3",
    "XREAD STREAMS r 0",
    "XREAD COUNT 1 STREAMS r r2 0 0",
    "XREAD STREAMS r r2 1-1 $",
    "XREAD STREAMS r r2 2-1 2",
    "XREAD STREAMS r $",
    "XREAD STREAMS r",
    "XREAD STREAMS r r2 0",
    "XREAD COUNT -5 STREAMS r 0",
    "XREAD COUNT 0 STREAMS r 0",
    "XREAD COUNT x STREAMS r 0",
    "XREAD BLOCK -1 STREAMS r 0",
    "XREAD BLOCK x STREAMS r 0",
    "XREAD BLOCK 1.5 STREAMS r 0",
    "XREAD BLOCK 9223372036854775807 STREAMS r 0",
    "XREAD BLOCK 100 STREAMS r 0",
    "XREAD BLOCK 0 COUNT 1 STREAMS r 1",
    "XREAD FOO STREAMS r 0",
    "XREAD GROUP g c STREAMS r 0",
    "XREAD NOACK STREAMS r 0",
    "XREAD STREAMS r >",
    "XREAD STREAMS r -",
    "XREAD STREAMS r +",
    "XREAD STREAMS r bad",
    "XREAD STREAMS r 18446744073709551615-18446744073709551615",
    "XREAD STREAMS str 0",
    "XREAD STREAMS r str 0 bad",
    "XREAD STREAMS nokey 0",
    "XREAD STREAMS nokey $",
    "XREAD STREAMS r 0 r 1",
    "XREAD STREAMS r r 0 1",
    "XREAD COUNT 1",
    "XREAD STREAMS",
    "XREAD",
    "MULTI",
    "XREAD BLOCK 0 STREAMS r $",
    "XREAD BLOCK 0 STREAMS r 0",
    "EXEC",
    "DEL r r2",
    "XADD x MAXLEN 0 1-1 a b",
    "XINFO STREAM x",
    "XINFO STREAM x FULL",
    "XADD y 1-1 a b",
    "XADD y 2-0 c d e f",
    "XDEL y 1-1",
    "XINFO STREAM y",
    "XINFO STREAM y FULL",
    "XINFO STREAM y FULL COUNT 0",
    "XINFO STREAM y FULL COUNT -1",
    "XINFO STREAM y FULL COUNT x",
    "XINFO STREAM y FULL COUNT",
    "XINFO STREAM y FOO",
    "XINFO STREAM y FULL FOO 1",
    "XINFO STREAM nokey",
    "XINFO STREAM nokey FOO",
    "XINFO STREAM str",
    "XINFO STREAM",
    "XINFO GROUPS y",
    "XINFO GROUPS nokey",
    "XINFO GROUPS str",
    "XINFO GROUPS y extra",
    "XINFO CONSUMERS y g",
    "XINFO CONSUMERS nokey g",
    "XINFO CONSUMERS y",
    "XINFO HELP",
    "XINFO help extra",
    "XINFO FOO y",
    "XINFO",
    "XSETID y 9-9 ENTRIESADDED 7 MAXDELETEDID 3-0",
    "XINFO STREAM y FULL",
    "DEL x y",
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

/// Streams filled past several of Redis's 100-entry nodes, deleted from and trimmed every
/// way: what `~` leaves (whole nodes only, bounded by `LIMIT`) and what `=` leaves must be
/// Redis's, entry for entry.
#[test]
fn trimming_follows_redis_nodes() {
    let mut d = Diff::new();
    for round in 0..6u64 {
        d.check(&["DEL", "t"]);
        for i in 1..=1000u64 {
            let id = format!("{}-{}", i, round);
            d.check(&["XADD", "t", &id, "f", &i.to_string()]);
        }
        // Holes in some nodes, a whole node deleted.
        for i in (150..250u64).chain((400..430).step_by(3)) {
            d.check(&["XDEL", "t", &format!("{}-{}", i, round)]);
        }
        let trims: &[&[&str]] = &[
            &["XTRIM", "t", "MAXLEN", "~", "950"],
            &["XTRIM", "t", "MAXLEN", "~", "600", "LIMIT", "150"],
            &["XTRIM", "t", "MAXLEN", "~", "555"],
            &["XTRIM", "t", "MINID", "~", "705"],
            &["XTRIM", "t", "MINID", "~", "800", "LIMIT", "0"],
            &["XTRIM", "t", "MAXLEN", "=", "123"],
            &["XTRIM", "t", "MINID", "950"],
        ];
        let t = trims[round as usize % trims.len()];
        d.check(t);
        d.check(&["XLEN", "t"]);
        d.check(&["XRANGE", "t", "-", "+", "COUNT", "3"]);
        d.check(&["XREVRANGE", "t", "+", "-", "COUNT", "3"]);
        let next = trims[(round as usize + 3) % trims.len()];
        d.check(next);
        d.check(&["XLEN", "t"]);
        d.check(&["XADD", "t", "MAXLEN", "~", "300", "2000-1", "g", "h"]);
        d.check(&["XLEN", "t"]);
        d.check(&["XADD", "t", "MINID", "~", "900", "2000-2", "g", "h"]);
        d.check(&["XLEN", "t"]);
        d.check(&["XRANGE", "t", "-", "+", "COUNT", "2"]);
    }
}

/// `XADD *` takes the clock: IDs are `ms-seq`, increasing, never below the last ID a
/// client set, on latchkey as on Redis.
#[test]
fn generated_ids_increase() {
    let mut d = Diff::new();
    let id = |reply: &[u8]| -> (u64, u64) {
        let text = std::str::from_utf8(reply).unwrap();
        let body = text.lines().nth(1).expect("a bulk string");
        let (ms, seq) = body.split_once('-').expect("ms-seq");
        (ms.parse().unwrap(), seq.parse().unwrap())
    };
    for conn in [true, false] {
        let c = if conn { &mut d.latchkey } else { &mut d.redis };
        let mut last = (0, 0);
        for _ in 0..50 {
            let got = id(&c.cmd(&["XADD", "g", "*", "a", "b"]));
            assert!(got > last, "{got:?} after {last:?}");
            assert!(
                got.0 > 1_600_000_000_000,
                "a clock in milliseconds: {got:?}"
            );
            last = got;
        }
        // Past the clock, `*` counts on from the last ID.
        c.cmd(&["XSETID", "g", "99999999999999-5"]);
        assert_eq!(
            id(&c.cmd(&["XADD", "g", "*", "a", "b"])),
            (99_999_999_999_999, 6)
        );
        c.cmd(&["DEL", "g"]);
    }
}

/// Node boundaries follow `stream-node-max-entries` and `stream-node-max-bytes` as Redis's
/// do (entries of the master's fields and of others, values of several sizes), which `~`
/// trims show.
#[test]
fn node_limits_decide_what_approximate_trims_leave() {
    let mut d = Diff::new();
    for (entries, bytes) in [("10", "4096"), ("0", "300"), ("7", "150"), ("100", "0")] {
        d.check(&["CONFIG", "SET", "stream-node-max-entries", entries]);
        d.check(&["CONFIG", "SET", "stream-node-max-bytes", bytes]);
        d.check(&["CONFIG", "GET", "stream-node-max-entries"]);
        d.check(&["CONFIG", "GET", "stream-node-max-bytes"]);
        d.check(&["DEL", "t"]);
        for i in 1..=300u64 {
            let id = format!("{i}-0");
            let value = "v".repeat((i % 23) as usize * 3);
            if i % 5 == 0 {
                d.check(&["XADD", "t", &id, "other", &value]);
            } else {
                d.check(&["XADD", "t", &id, "f", &value, "g", "1"]);
            }
            if i % 37 == 0 {
                d.check(&["XTRIM", "t", "MAXLEN", "~", &(i / 3).to_string()]);
                d.check(&["XLEN", "t"]);
            }
        }
        d.check(&["XTRIM", "t", "MINID", "~", "250"]);
        d.check(&["XLEN", "t"]);
        d.check(&[
            "XADD", "t", "MAXLEN", "~", "5", "LIMIT", "30", "9999-0", "a", "b",
        ]);
        d.check(&["XLEN", "t"]);
    }
    d.check(&["CONFIG", "SET", "stream-node-max-entries", "-1"]);
    d.check(&["CONFIG", "SET", "stream-node-max-bytes", "-1"]);
    d.check(&["CONFIG", "SET", "stream-node-max-bytes", "1k"]);
    d.check(&["CONFIG", "GET", "stream-node-max-bytes"]);
}
