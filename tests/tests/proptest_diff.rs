//! Random command sequences over a small key space, sent to real Redis and to latchkey, every
//! reply compared byte for byte. Keys collide on purpose, so commands meet wrong types, missing
//! keys and empty containers.

use latchkey_tests::Diff;
use proptest::prelude::*;

fn key() -> impl Strategy<Value = String> {
    (0..4u8).prop_map(|i| format!("k{i}"))
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        (-3i64..30).prop_map(|i| i.to_string()),
        "[a-c]{0,3}",
        Just("1.5".to_string()),
    ]
}

fn command() -> impl Strategy<Value = Vec<String>> {
    let v = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    prop_oneof![
        (key(), value()).prop_map(move |(k, x)| v(&["SET", &k, &x])),
        (key(), value()).prop_map(move |(k, x)| v(&["SET", &k, &x, "NX"])),
        (key(), value()).prop_map(move |(k, x)| v(&["SET", &k, &x, "XX", "GET"])),
        key().prop_map(move |k| v(&["GET", &k])),
        key().prop_map(move |k| v(&["DEL", &k])),
        key().prop_map(move |k| v(&["INCR", &k])),
        (key(), value()).prop_map(move |(k, x)| v(&["INCRBY", &k, &x])),
        (key(), value()).prop_map(move |(k, x)| v(&["APPEND", &k, &x])),
        key().prop_map(move |k| v(&["STRLEN", &k])),
        key().prop_map(move |k| v(&["TYPE", &k])),
        key().prop_map(move |k| v(&["EXISTS", &k])),
        key().prop_map(move |k| v(&["EXPIRE", &k, "1000"])),
        key().prop_map(move |k| v(&["PERSIST", &k])),
        key().prop_map(move |k| v(&["TTL", &k])),
        (key(), key()).prop_map(move |(a, b)| v(&["RENAME", &a, &b])),
        (key(), value(), value()).prop_map(move |(k, f, x)| v(&["HSET", &k, &f, &x])),
        (key(), value()).prop_map(move |(k, f)| v(&["HGET", &k, &f])),
        (key(), value()).prop_map(move |(k, f)| v(&["HDEL", &k, &f])),
        (key(), value()).prop_map(move |(k, f)| v(&["HINCRBY", &k, &f, "2"])),
        key().prop_map(move |k| v(&["HGETALL", &k])),
        key().prop_map(move |k| v(&["HLEN", &k])),
        (key(), value()).prop_map(move |(k, x)| v(&["LPUSH", &k, &x])),
        (key(), value()).prop_map(move |(k, x)| v(&["RPUSH", &k, &x])),
        key().prop_map(move |k| v(&["LPOP", &k])),
        key().prop_map(move |k| v(&["RPOP", &k, "2"])),
        key().prop_map(move |k| v(&["LRANGE", &k, "0", "-1"])),
        (key(), value()).prop_map(move |(k, x)| v(&["LREM", &k, "0", &x])),
        key().prop_map(move |k| v(&["LLEN", &k])),
        (key(), value(), value()).prop_map(move |(k, s, m)| v(&["ZADD", &k, &s, &m])),
        (key(), value(), value()).prop_map(move |(k, s, m)| v(&["ZINCRBY", &k, &s, &m])),
        (key(), value()).prop_map(move |(k, m)| v(&["ZREM", &k, &m])),
        (key(), value()).prop_map(move |(k, m)| v(&["ZSCORE", &k, &m])),
        key().prop_map(move |k| v(&["ZRANGE", &k, "0", "-1", "WITHSCORES"])),
        key().prop_map(move |k| v(&["ZRANGEBYSCORE", &k, "-inf", "(5"])),
        key().prop_map(move |k| v(&["ZCARD", &k])),
        (key(), value()).prop_map(move |(k, x)| v(&[
            "EVAL",
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
            "1",
            &k,
            &x
        ])),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_agree_with_redis(cmds in prop::collection::vec(command(), 1..40)) {
        let mut d = Diff::new();
        for c in &cmds {
            d.check(c);
        }
    }
}
