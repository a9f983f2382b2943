//! Differential tests of the string commands against a real redis-server.

use latchkey_tests::Diff;

#[test]
fn set_family() {
    let mut d = Diff::new();
    d.table(&[
        "SETNX a 1",
        "SETNX a 2",
        "GET a",
        "SETEX b 100 v",
        "TTL b",
        "SETEX b 0 v",
        "SETEX b -1 v",
        "SETEX b x v",
        "PSETEX c 100000 v",
        "PSETEX c 0 v",
        "GETSET a 3",
        "GETSET nokey 1",
        "GETDEL a",
        "GETDEL a",
        "SET k v PXAT 1",
        "EXISTS k",
        "SET k v EXAT 99999999999",
        "TTL k",
        "SET k v EX 9223372036854775807",
        "SET k v PX 9223372036854775807",
        "SET k v EXAT 0",
        "SET k v GET NX",
        "SET k v KEEPTTL",
        "TTL k",
    ]);
}

#[test]
fn getex() {
    let mut d = Diff::new();
    d.table(&[
        "SET k v",
        "GETEX k",
        "GETEX k EX 100",
        "TTL k",
        "GETEX k PERSIST",
        "TTL k",
        "GETEX k PX 100000",
        "TTL k",
        "GETEX k EXAT 1",
        "EXISTS k",
        "GETEX nokey EX 10",
        "GETEX k EX 0",
        "GETEX k EX",
        "GETEX k PERSIST EX 10",
        "GETEX k EX 10 PX 10",
        "GETEX k BOGUS",
    ]);
}

#[test]
fn counters() {
    let mut d = Diff::new();
    d.table(&[
        "INCR n",
        "INCRBY n 10",
        "DECR n",
        "DECRBY n 5",
        "INCRBY n abc",
        "INCRBY n 1.5",
        "SET s hello",
        "INCR s",
        "SET n 9223372036854775807",
        "INCR n",
        "SET n -9223372036854775808",
        "DECR n",
        "DECRBY n -9223372036854775808",
        "SET n 007",
        "INCR n",
        "SET n ' 1'",
        "GET n",
        "INCR n",
        "SET t 10",
        "EXPIRE t 100",
        "INCR t",
        "TTL t",
        "INCRBYFLOAT f 1.5",
        "INCRBYFLOAT f 0.1",
        "INCRBYFLOAT f -1.6",
        "INCRBYFLOAT f abc",
        "INCRBYFLOAT s 1",
        "SET f 10.50",
        "INCRBYFLOAT f 0.1",
        // Redis adds in C's long double (80-bit on x86) and prints 17 decimals: sums show it
        // in their last digits ("5010.60000000000000009", 0.1 + 0.2 = "0.3").
        "INCRBYFLOAT f 4.4",
        "INCRBYFLOAT f 2.0e3",
        "INCRBYFLOAT f inf",
        "INCRBYFLOAT f 5000",
        "INCRBYFLOAT g 0.1",
        "INCRBYFLOAT g 0.2",
        "INCRBYFLOAT g 1.23456789012345678901234",
        "INCRBYFLOAT g -0.0",
        "INCRBYFLOAT h 0x10",
        "INCRBYFLOAT h 1e400",
        "INCRBYFLOAT h -1e400",
        "INCRBYFLOAT h 1e-5000",
        "INCRBYFLOAT h ' 1'",
        "INCRBYFLOAT h nan",
        "SET h 1e10",
        "INCRBYFLOAT h 1",
        "HINCRBYFLOAT hf a 0.1",
        "HINCRBYFLOAT hf a 0.2",
        "HINCRBYFLOAT hf a inf",
        "HINCRBYFLOAT hf a abc",
        "HINCRBYFLOAT hf a 1e4000",
        "HINCRBYFLOAT hf a -1e4000",
        "HSET hf s abc",
        "HINCRBYFLOAT hf s 1",
        "HINCRBYFLOAT f a 1",
    ]);
    // The quoted cases sent what they say: a value with a leading space, which is not an
    // integer nor a float to either server.
    assert_eq!(d.check(&["GET", "n"]), b"$2\r\n 1\r\n");
    assert_eq!(
        d.check(&["INCR", "n"]),
        b"-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        d.check(&["INCRBYFLOAT", "h", " 1"]),
        b"-ERR value is not a valid float\r\n"
    );
}

#[test]
fn multi_key_and_ranges() {
    let mut d = Diff::new();
    d.table(&[
        "MSET a 1 b 2 c 3",
        "MGET a b c nokey",
        "MSET a",
        "MSET a 1 b",
        "MSETNX a 9 z 9",
        "MSETNX y 1 z 2",
        "MGET y z",
        "APPEND a xyz",
        "APPEND new abc",
        "STRLEN a",
        "STRLEN nokey",
        "SET s 'Hello World'",
        "GETRANGE s 0 4",
        "GETRANGE s -5 -1",
        "GETRANGE s 5 2",
        "GETRANGE s -1 -5",
        "GETRANGE s 0 100",
        "GETRANGE nokey 0 10",
        "GETRANGE s a b",
        "SETRANGE s 6 Redis",
        "GET s",
        "SETRANGE pad 5 x",
        "GET pad",
        "SETRANGE s -1 x",
        "SETRANGE s 0 ''",
        "SETRANGE empty 3 ''",
        "EXISTS empty",
    ]);
    // The quoted cases sent what they say: one argument with a space, and empty ones (a
    // SETRANGE with an empty value changes nothing and creates no key).
    assert_eq!(
        d.check(&["GETRANGE", "s", "0", "10"]),
        b"$11\r\nHello Redis\r\n"
    );
    assert_eq!(d.check(&["SETRANGE", "s", "0", ""]), b":11\r\n");
    assert_eq!(d.check(&["EXISTS", "empty"]), b":0\r\n");
}

#[test]
fn wrong_types_and_arity() {
    let mut d = Diff::new();
    d.table(&[
        "GET",
        "SET a",
        "SETNX a",
        "GETEX",
        "MGET",
        "INCR",
        "INCRBY a",
        "STRLEN",
        "APPEND a",
        "GETRANGE a 0",
    ]);
}

/// `SET`'s options as a lock uses them (`NX`, `XX`, `PX`, `GET`, `KEEPTTL`): which
/// combinations are refused, what is written and what is left alone, the TTL each leaves, and
/// the bounds of the expire value. (Mutation testing found these unchecked: see
/// docs/MUTANTS.md.)
#[test]
fn set_options_for_locks() {
    let mut d = Diff::new();
    d.table(&[
        // Contradicting options, in either order, and options missing their value.
        "SET k v NX XX",
        "SET k v XX NX",
        "SET k v EX 10 PX 100",
        "SET k v PX 100 EX 10",
        "SET k v EXAT 99999999999 PXAT 99999999999000",
        "SET k v PX 100 PXAT 99999999999000",
        "SET k v EX 10 KEEPTTL",
        "SET k v KEEPTTL EX 10",
        "SET k v KEEPTTL PX 10",
        "SET k v EX",
        "SET k v PX",
        "SET k v BOGUS",
        "SET k v NX BOGUS",
        "EXISTS k",
        // The same option twice: the last value counts.
        "SET k v EX 10 EX 200",
        "TTL k",
        "SET k v NX NX",
        "SET k v xx px 300000",
        "TTL k",
        // XX on a missing key writes nothing; NX on a held key leaves the holder's value and
        // TTL; XX on a held key replaces the value and clears the TTL.
        "DEL k",
        "SET k v XX",
        "EXISTS k",
        "SET k v NX PX 100000",
        "TTL k",
        "SET k w NX",
        "SET k w NX EX 5",
        "GET k",
        "TTL k",
        "SET k w XX",
        "GET k",
        "TTL k",
        // KEEPTTL keeps the deadline; a plain SET clears it.
        "SET k v1 EX 100",
        "SET k v2 KEEPTTL",
        "GET k",
        "TTL k",
        "SET k v3",
        "TTL k",
        "SET k v4 KEEPTTL",
        "TTL k",
        "SET nottl v KEEPTTL",
        "TTL nottl",
        // GET returns the old value, also when NX or XX refuses the write.
        "SET k v GET",
        "SET k v2 NX GET",
        "GET k",
        "SET k v3 XX GET",
        "GET k",
        "SET missing v XX GET",
        "EXISTS missing",
        "SET fresh v NX GET",
        "GET fresh",
        // Another type: GET refuses and changes nothing; a plain SET replaces it.
        "RPUSH l a",
        "SET l v GET",
        "TYPE l",
        "SET l v NX",
        "TYPE l",
        "SET l v XX",
        "TYPE l",
        "GET l",
        "RPUSH l2 a",
        "SET l2 v",
        "TYPE l2",
        "GETSET l2 w",
        "RPUSH l3 a",
        "GETSET l3 w",
        "GETDEL l3",
        "TYPE l3",
        // The expire value's bounds: zero and negatives are refused, one is not; seconds that
        // would overflow milliseconds are refused, as are deadlines past i64.
        "SET k v PX 0",
        "SET k v PX -5",
        "SET k v EX 0",
        "SET k v EX -1",
        "SET k v PXAT 0",
        "SET k v PXAT -1",
        "SET k v PX 1",
        "SET k v EX 9223372036854775",
        "SET k v EX 9223372036854776",
        "SET k v EXAT 9223372036854775",
        "TTL k",
        "SET k v EXAT 9223372036854776",
        "SET k v PXAT 9223372036854775807",
        "TTL k",
        "SET k v PX 9223372036854775806",
        "SET k v PX abc",
        "SET k v EX 1.5",
        // A deadline already passed: the key is written expired, so it is gone.
        "SET k v EXAT 1",
        "EXISTS k",
        "SET k v PXAT 1000",
        "GET k",
        // SETEX / PSETEX: the value lands with the deadline; bad deadlines write nothing.
        "SETEX sx 100 v",
        "TTL sx",
        "GET sx",
        "PSETEX px 100000 v",
        "TTL px",
        "GET px",
        "PSETEX px2 0 v",
        "EXISTS px2",
        "SETEX sx2 9223372036854775 v",
        "SETEX sx2 9223372036854776 v",
        "EXISTS sx2",
        "SETNX sn v",
        "SETNX sn w",
        "GET sn",
        "TTL sn",
        "GETDEL sn",
        "EXISTS sn",
        "GETDEL sn",
    ]);
}
