//! Differential tests of sets against a real redis-server, under RESP2 and RESP3: every case
//! is run on both servers and the reply bytes compared.
//!
//! A set of integers within `set-max-intset-entries` is an intset, whose members Redis keeps
//! (and replies) in ascending order, so replies of such sets are compared whole. A set with
//! other members is a hash table whose order depends on Redis's hash seed: those are compared
//! through replies that do not depend on order (counts, membership, one-member results).

use latchkey_tests::Diff;

const SETS: &[&str] = &[
    "SADD s 3 1 2",
    "SADD s 2 4",
    "SADD s",
    "SMEMBERS s",
    "SMEMBERS nokey",
    "OBJECT ENCODING s",
    "SCARD s",
    "SCARD nokey",
    "SISMEMBER s 3",
    "SISMEMBER s 03",
    "SISMEMBER nokey 3",
    "SMISMEMBER s 1 9 4",
    "SMISMEMBER nokey 1",
    "SREM s 4 99",
    "SMEMBERS s",
    "SADD neg -5 100000 -9223372036854775808 9223372036854775807 0",
    "SMEMBERS neg",
    "OBJECT ENCODING neg",
    "SADD h a b c",
    "OBJECT ENCODING h",
    "SCARD h",
    "SISMEMBER h b",
    "SADD mixed 1 2 x",
    "OBJECT ENCODING mixed",
    "SREM mixed x",
    "OBJECT ENCODING mixed",
    "SADD one x",
    "SMEMBERS one",
    "SADD t 2 3 5 7",
    "SINTER s t",
    "SINTER s t nokey",
    "SINTER nokey s",
    "SINTERCARD 2 s t",
    "SINTERCARD 2 s t LIMIT 1",
    "SINTERCARD 2 s t LIMIT 0",
    "SINTERCARD 1 nokey",
    "SINTERCARD 0 s",
    "SINTERCARD x s",
    "SINTERCARD 3 s t",
    "SINTERCARD 2 s t LIMIT -1",
    "SINTERCARD 2 s t LIMIT",
    "SINTERCARD 2 s t BOGUS 1",
    "SUNION s t",
    "SUNION s nokey t",
    "SDIFF t s",
    "SDIFF nokey s",
    "SDIFF t",
    "SINTERSTORE d s t",
    "SMEMBERS d",
    "OBJECT ENCODING d",
    "SUNIONSTORE d s t",
    "SMEMBERS d",
    "SDIFFSTORE d t s",
    "SMEMBERS d",
    "SET dead v",
    "EXPIRE d 100",
    "SINTERSTORE d s nokey",
    "EXISTS d",
    "SUNIONSTORE d h",
    "SCARD d",
    "TTL d",
    "SINTERSTORE h2 h mixed",
    "EXISTS h2",
    "SMOVE s t 1",
    "SMEMBERS s",
    "SMEMBERS t",
    "SMOVE s t 99",
    "SMOVE nokey t 1",
    "SMOVE s newset 2",
    "SMEMBERS newset",
    "SMOVE t t 5",
    "SMOVE t t 99",
    "SMOVE one newset x",
    "EXISTS one",
    "OBJECT ENCODING newset",
    "SRANDMEMBER s 10",
    "SRANDMEMBER s 0",
    "SRANDMEMBER nokey",
    "SRANDMEMBER nokey 5",
    "SRANDMEMBER nokey -5",
    "SRANDMEMBER s x",
    "SRANDMEMBER s -0",
    "SRANDMEMBER s -9223372036854775808",
    "SRANDMEMBER s 1 2",
    "SRANDMEMBER one",
    "SADD single only",
    "SRANDMEMBER single",
    "SRANDMEMBER single -3",
    "SRANDMEMBER single 3",
    "SPOP single",
    "EXISTS single",
    "SPOP nokey",
    "SPOP nokey 3",
    "SPOP t 0",
    "SPOP t -1",
    "SPOP t x",
    "SPOP t 1 2",
    "SADD p 10 20 30",
    "SPOP p 3",
    "EXISTS p",
    "SADD p 10 20 30",
    "SPOP p 9223372036854775807",
    "SSCAN s 0",
    "SSCAN s 0 MATCH 3*",
    "SSCAN s 0 COUNT 0",
    "SSCAN s x",
    "SSCAN nokey 0",
    "SSCAN one 0",
    "SET str v",
    "SADD str a",
    "SREM str a",
    "SMEMBERS str",
    "SCARD str",
    "SISMEMBER str a",
    "SMISMEMBER str a",
    "SPOP str",
    "SPOP str 2",
    "SPOP str 0",
    "SRANDMEMBER str",
    "SRANDMEMBER str 0",
    "SINTER s str",
    "SINTER nokey str",
    "SINTERCARD 2 s str",
    "SUNION s str",
    "SDIFF nokey str",
    "SINTERSTORE d str",
    "SMOVE str s a",
    "SMOVE s str 3",
    "SMOVE nokey str 3",
    "SSCAN str 0",
    "TYPE s",
    "TYPE h",
    "SCAN 0 MATCH s TYPE set COUNT 1000",
    "SCAN 0 MATCH str TYPE set COUNT 1000",
    "SCAN 0 MATCH s TYPE string COUNT 1000",
    "OBJECT ENCODING nokey",
    "OBJECT ENCODING",
    "OBJECT BOGUS s",
    "OBJECT ENCODING s extra",
    "OBJECT REFCOUNT s",
    "OBJECT FREQ s",
    "OBJECT HELP",
    "EVAL \"return redis.call('smembers', KEYS[1])\" 1 s",
    "EVAL \"return redis.call('smembers', KEYS[1])\" 1 nokey",
    "EVAL \"redis.setresp(3); return redis.call('smembers', KEYS[1])\" 1 s",
    "EVAL \"redis.setresp(3); return redis.call('sismember', KEYS[1], 3)\" 1 s",
    "EVAL \"return redis.call('spop', KEYS[1], 100)\" 1 neg",
    "EVAL \"return redis.call('sadd', KEYS[1], 'a')\" 1 str",
];

/// The set encoding parameters: `set-max-intset-entries` decides when a set of integers stops
/// being an intset (which changes `OBJECT ENCODING` and the order of replies).
const INTSET_LIMIT: &[&str] = &[
    "CONFIG SET set-max-intset-entries 3",
    "CONFIG GET set-max-intset-entries",
    "SADD s 3 2 1",
    "OBJECT ENCODING s",
    "SADD s 0",
    "OBJECT ENCODING s",
    "SREM s 0",
    "OBJECT ENCODING s",
    "SADD t 5 6 7",
    "SUNIONSTORE u t",
    "OBJECT ENCODING u",
    "SADD u 8",
    "SCARD u",
    "SINTERSTORE v t",
    "OBJECT ENCODING v",
    "CONFIG SET set-max-intset-entries 0",
    "SADD w 1",
    "OBJECT ENCODING w",
    "CONFIG SET set-max-intset-entries -1",
    "CONFIG SET set-max-intset-entries x",
    "CONFIG SET set-max-listpack-entries 5",
    "CONFIG SET set-max-intset-entries 512",
];

/// The other encoding parameters, accepted with Redis 7.0's ranges and aliases.
const ENCODING_PARAMS: &[&str] = &[
    "CONFIG GET list-max-ziplist-size",
    "CONFIG GET list-max-listpack-size",
    "CONFIG GET list-compress-depth",
    "CONFIG GET hash-max-ziplist-entries",
    "CONFIG GET hash-max-listpack-value",
    "CONFIG GET zset-max-ziplist-entries",
    "CONFIG GET zset-max-listpack-value",
    "CONFIG SET list-max-ziplist-size -6",
    "CONFIG GET list-max-listpack-size",
    "CONFIG SET list-max-ziplist-size 99999999999",
    "CONFIG SET list-max-ziplist-size abc",
    "CONFIG SET list-max-listpack-size 4",
    "CONFIG GET list-max-ziplist-size",
    "CONFIG SET list-compress-depth -1",
    "CONFIG SET list-compress-depth 2",
    "CONFIG GET list-compress-depth",
    "CONFIG SET hash-max-ziplist-entries -1",
    "CONFIG SET hash-max-ziplist-entries 5k",
    "CONFIG SET hash-max-ziplist-entries 2",
    "CONFIG GET hash-max-listpack-entries",
    "CONFIG SET hash-max-ziplist-value 4",
    "CONFIG GET hash-max-listpack-value",
    "HSET h a 1 b 2",
    "OBJECT ENCODING h",
    "HSET h c 3",
    "OBJECT ENCODING h",
    "HSET h2 a 12345",
    "OBJECT ENCODING h2",
    "CONFIG SET zset-max-ziplist-entries 2",
    "CONFIG SET zset-max-ziplist-value 3",
    "ZADD z 1 a 2 b",
    "OBJECT ENCODING z",
    "ZADD z 3 c",
    "OBJECT ENCODING z",
    "ZADD z2 1 abcd",
    "OBJECT ENCODING z2",
    "RPUSH l a b c",
    "OBJECT ENCODING l",
    "SET n 12345",
    "OBJECT ENCODING n",
    "SET e hello",
    "OBJECT ENCODING e",
    "SET r 012345678901234567890123456789012345678901234567890",
    "OBJECT ENCODING r",
    "CONFIG SET hash-max-ziplist-entries 512 hash-max-ziplist-value 64",
    "CONFIG SET zset-max-ziplist-entries 128 zset-max-ziplist-value 64",
    "CONFIG SET list-max-ziplist-size -2 list-compress-depth 0",
];

#[test]
fn sets_resp2() {
    Diff::new().table(SETS);
}

#[test]
fn sets_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(SETS);
}

#[test]
fn intset_limit() {
    Diff::new().table(INTSET_LIMIT);
}

#[test]
fn encoding_parameters() {
    Diff::new().table(ENCODING_PARAMS);
}

#[test]
fn wrong_arity() {
    Diff::new().table(&[
        "SADD s",
        "SREM s",
        "SMEMBERS",
        "SMEMBERS a b",
        "SISMEMBER s",
        "SMISMEMBER s",
        "SCARD",
        "SPOP",
        "SRANDMEMBER",
        "SMOVE a b",
        "SINTER",
        "SINTERCARD 1",
        "SINTERSTORE d",
        "SUNION",
        "SUNIONSTORE d",
        "SDIFF",
        "SDIFFSTORE d",
        "SSCAN s",
        "OBJECT",
    ]);
}

/// `MEMORY USAGE`: its errors and its answer for a missing key are Redis's; the number itself
/// is latchkey's own estimate, so it is checked to be positive and to grow with the value.
#[test]
fn memory_usage() {
    let mut d = Diff::new();
    d.table(&[
        "SADD s 1 2 3",
        "MEMORY USAGE nokey",
        "MEMORY USAGE s SAMPLES",
        "MEMORY USAGE s SAMPLES x",
        "MEMORY USAGE s SAMPLES -1",
        "MEMORY USAGE s FOO 1",
        "MEMORY USAGE",
        "MEMORY BOGUS",
    ]);
    let usage = |d: &mut Diff, key: &str| -> i64 {
        let (_, l) = d.both(&["MEMORY", "USAGE", key, "SAMPLES", "0"]);
        let text = String::from_utf8(l).unwrap();
        text.trim()
            .strip_prefix(':')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not an integer: {text:?}"))
    };
    let small = usage(&mut d, "s");
    assert!(small > 0);
    let mut sadd = vec!["SADD".to_string(), "s".into()];
    sadd.extend((0..1000).map(|i| format!("member-{i}")));
    d.both(&sadd);
    assert!(usage(&mut d, "s") > small + 1000 * 8);
}
