//! Differential tests of hashes, lists and sorted sets against a real redis-server, under
//! RESP2 and RESP3.

use latchkey_tests::Diff;

const HASHES: &[&str] = &[
    "HSET h a 1 b 2",
    "HSET h a 3 c 4",
    "HSET h a",
    "HGET h a",
    "HGET h nofield",
    "HGET nokey a",
    "HMGET h a nofield c",
    "HMGET nokey a b",
    "HMSET h d 5",
    "HSETNX h a 9",
    "HSETNX h e 9",
    "HGETALL h",
    "HKEYS h",
    "HVALS h",
    "HLEN h",
    "HSTRLEN h a",
    "HEXISTS h a",
    "HEXISTS h zz",
    "HDEL h a nofield",
    "HGETALL h",
    "HINCRBY h n 5",
    "HINCRBY h n -7",
    "HINCRBY h n x",
    "HINCRBY h c 1",
    "HSET h s abc",
    "HINCRBY h s 1",
    "HSET h big 9223372036854775807",
    "HINCRBY h big 1",
    "HINCRBYFLOAT h f 1.5",
    "HINCRBYFLOAT h s 1",
    "HSCAN h 0",
    "HSCAN h 0 MATCH [ab]*",
    "HDEL h b c d e n s big f",
    "EXISTS h",
    "HGETALL nokey",
    "SET str v",
    "HSET str a 1",
    "HGET str a",
    "HGETALL str",
    "HDEL str a",
    "HLEN str",
];

const LISTS: &[&str] = &[
    "RPUSH l a b c d e",
    "LPUSH l z",
    "LPUSHX nol a",
    "RPUSHX l f",
    "LLEN l",
    "LRANGE l 0 -1",
    "LRANGE l 1 2",
    "LRANGE l -2 -1",
    "LRANGE l 5 1",
    "LRANGE l -100 100",
    "LRANGE l x 1",
    "LINDEX l 0",
    "LINDEX l -1",
    "LINDEX l 99",
    "LSET l 0 Z",
    "LSET l 99 x",
    "LSET nol 0 x",
    "LINSERT l BEFORE c c0",
    "LINSERT l AFTER c c1",
    "LINSERT l AFTER nopivot x",
    "LINSERT l MIDDLE c x",
    "LINSERT nol AFTER c x",
    "RPUSH r x y x z x",
    "LREM r 2 x",
    "LRANGE r 0 -1",
    "LREM r -1 x",
    "LREM r 0 nothing",
    "LPOS l c",
    "LPOS l c RANK -1",
    "LPOS l c RANK 0",
    "LPOS l c COUNT 0",
    "LPOS l nothing",
    "LPOS l nothing COUNT 2",
    "LPOP l",
    "RPOP l",
    "LPOP l 2",
    "RPOP l 0",
    "LPOP l -1",
    "LPOP nol",
    "LPOP nol 2",
    "LPOP l 100",
    "EXISTS l",
    "RPUSH t 1 2 3 4 5",
    "LTRIM t 1 -2",
    "LRANGE t 0 -1",
    "LTRIM t 5 10",
    "EXISTS t",
    "RPUSH src a b c",
    "RPOPLPUSH src dst",
    "LMOVE src dst LEFT RIGHT",
    "LMOVE src dst UP DOWN",
    "LRANGE dst 0 -1",
    "RPOPLPUSH nol dst",
    "SET str v",
    "LPUSH str a",
    "LRANGE str 0 1",
    "RPOPLPUSH dst str",
    "LRANGE dst 0 -1",
    "BLPOP nol 0.01",
    "BLPOP dst 0",
    "BLPOP nol x",
    "BLPOP nol -1",
    "BRPOP str 0",
];

const ZSETS: &[&str] = &[
    "ZADD z 1 a 2 b 3 c",
    "ZADD z NX XX 1 a",
    "ZADD z GT LT 1 a",
    "ZADD z GT NX 1 a",
    "ZADD z INCR 1 a 2 b",
    "ZADD z x a",
    "ZADD z nan a",
    "ZADD z 1",
    "ZADD z NX 1",
    "ZADD z INCR 5 a",
    "ZADD z XX INCR 1 q",
    "ZADD z NX INCR 1 a",
    "ZADD z CH 10 a 2 b 4 d",
    "ZADD z GT CH 1 a 20 b",
    "ZADD z LT 0.5 c",
    "ZADD z 0.1 e",
    "ZSCORE z e",
    "ZSCORE z nomember",
    "ZSCORE noz a",
    "ZMSCORE z a e nomember",
    "ZCARD z",
    "ZCARD noz",
    "ZCOUNT z -inf +inf",
    "ZCOUNT z (0.5 4",
    "ZCOUNT z x y",
    "ZRANK z a",
    "ZREVRANK z a",
    "ZRANK z nomember",
    "ZRANGE z 0 -1",
    "ZRANGE z 0 -1 WITHSCORES",
    "ZRANGE z 0 -1 REV WITHSCORES",
    "ZRANGE z 0 -1 LIMIT 0 1",
    "ZRANGE z (0.5 4 BYSCORE WITHSCORES",
    "ZRANGE z 4 (0.5 BYSCORE REV",
    "ZRANGE z -inf +inf BYSCORE LIMIT 1 2",
    "ZRANGE z -inf +inf BYSCORE LIMIT 1 -1",
    "ZRANGE z -inf +inf BYSCORE LIMIT -1 2",
    "ZRANGE z 0 -1 BOGUS",
    "ZREVRANGE z 0 1 WITHSCORES",
    "ZRANGEBYSCORE z -inf +inf WITHSCORES LIMIT 0 2",
    "ZRANGEBYSCORE z a b",
    "ZRANGEBYSCORE z -inf +inf LIMIT 0 x",
    "ZREVRANGEBYSCORE z +inf -inf",
    "ZINCRBY z 2.5 a",
    "ZINCRBY z x a",
    "ZINCRBY z 1 new",
    "ZREM z a nomember",
    "ZREMRANGEBYSCORE z -inf (1",
    "ZREMRANGEBYRANK z 0 0",
    "ZRANGE z 0 -1 WITHSCORES",
    "ZPOPMIN z",
    "ZPOPMAX z 2",
    "ZPOPMIN z -1",
    "ZPOPMIN noz",
    "ZRANGE z 0 -1",
    "ZREM z b c d e new",
    "EXISTS z",
    "SET str v",
    "ZADD str 1 a",
    "ZSCORE str a",
    "ZRANGE str 0 1",
    "ZADD inf +inf a -inf b",
    "ZRANGE inf 0 -1 WITHSCORES",
    "ZADD inf INCR -inf a",
];

#[test]
fn hashes_resp2() {
    Diff::new().table(HASHES);
}

#[test]
fn hashes_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(HASHES);
}

#[test]
fn lists_resp2() {
    Diff::new().table(LISTS);
}

#[test]
fn lists_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(LISTS);
}

#[test]
fn zsets_resp2() {
    Diff::new().table(ZSETS);
}

#[test]
fn zsets_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(ZSETS);
}

/// `LMPOP`, `BLMPOP`, `BLMOVE`, `BRPOPLPUSH` served at once or timing out (the waits have
/// their tests in blocking.rs), with Redis's errors.
const LIST_MULTI: &[&str] = &[
    "LMPOP 0 a LEFT",
    "LMPOP x a LEFT",
    "LMPOP 2 a LEFT",
    "LMPOP 5 a b LEFT",
    "LMPOP 1 a MIDDLE",
    "LMPOP 1 a LEFT COUNT 0",
    "LMPOP 1 a LEFT COUNT x",
    "LMPOP 1 a LEFT COUNT 1 COUNT 2",
    "LMPOP 1 a LEFT FOO",
    "RPUSH l a b c d",
    "LMPOP 2 nokey l RIGHT COUNT 2",
    "LMPOP 1 l LEFT",
    "LMPOP 1 l LEFT COUNT 10",
    "EXISTS l",
    "LMPOP 1 nokey LEFT",
    "BLMPOP 0.01 1 nokey LEFT",
    "BLMPOP -1 1 nokey LEFT",
    "BLMPOP x 1 nokey LEFT",
    "RPUSH l2 1 2 3",
    "BLMPOP 0 2 nokey l2 RIGHT COUNT 2",
    "SET str v",
    "LMPOP 1 str LEFT",
    "LMPOP 2 nokey str LEFT",
    "BLMPOP 0 2 nokey str LEFT",
    "BLMOVE a b LEFT MIDDLE 0",
    "BLMOVE a b LEFT LEFT -1",
    "BLMOVE nokey dst LEFT LEFT 0.01",
    "BRPOPLPUSH nokey dst 0.01",
    "RPUSH src 1 2 3",
    "BLMOVE src dst RIGHT LEFT 0",
    "BRPOPLPUSH src dst 0",
    "LRANGE dst 0 -1",
    "BRPOPLPUSH src str 0",
    "LRANGE src 0 -1",
    "BRPOPLPUSH nokey str 0.01",
    "MULTI",
    "BLMPOP 0 1 nokey LEFT",
    "BRPOPLPUSH nokey dst 0",
    "BLMOVE nokey dst LEFT RIGHT 0",
    "EXEC",
    "EVAL \"return redis.call('lmpop', 1, KEYS[1], 'left')\" 1 src",
];

#[test]
fn list_multi_resp2() {
    Diff::new().table(LIST_MULTI);
}

#[test]
fn list_multi_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(LIST_MULTI);
}

#[test]
fn wrong_arity() {
    Diff::new().table(&[
        "HSET h a",
        "HGET h",
        "HDEL h",
        "LPUSH l",
        "LRANGE l 0",
        "LPOP",
        "LPOP l 1 2",
        "BLPOP l",
        "ZADD z",
        "ZRANGE z 0",
        "ZSCORE z",
        "LMPOP 1 a",
        "BLMPOP 0 1 a",
        "BLMOVE a b LEFT LEFT",
        "BRPOPLPUSH a b",
    ]);
}

/// One `HSCAN`/`SSCAN`/`ZSCAN` reply: the next cursor and the elements (for `HSCAN` and
/// `ZSCAN`, fields and values alternate). The elements are plain words here, so the reply
/// splits on line ends.
fn scan_reply(reply: &[u8]) -> (String, Vec<String>) {
    let text = String::from_utf8(reply.to_vec()).unwrap();
    let lines: Vec<&str> = text.split("\r\n").collect();
    assert_eq!(lines[0], "*2", "not a SCAN reply: {text}");
    let cursor = lines[2].to_string();
    let items = lines[4..]
        .iter()
        .skip(1)
        .step_by(2)
        .map(|s| s.to_string())
        .collect();
    (cursor, items)
}

/// A full `HSCAN`, `SSCAN` and `ZSCAN` of a large collection returns every element present
/// from the start to the end of the iteration, while between calls other elements are
/// deleted (moving elements around inside the table) and new ones added — Redis's promise,
/// asserted on both servers. Each call returns a page, not the whole collection.
#[test]
fn collection_scans_keep_every_element_present_throughout() {
    let mut d = Diff::new();
    for (setup, scan, del, add, stride) in [
        ("HSET", "HSCAN", "HDEL", "HSET", 2),
        ("SADD", "SSCAN", "SREM", "SADD", 1),
        ("ZADD", "ZSCAN", "ZREM", "ZADD", 2),
    ] {
        for conn in [&mut d.redis, &mut d.latchkey] {
            let key = format!("big-{scan}");
            for chunk in (0..2000).collect::<Vec<u32>>().chunks(500) {
                let mut args = vec![setup.to_string(), key.clone()];
                for i in chunk {
                    if setup == "ZADD" {
                        args.push(i.to_string());
                    }
                    args.push(format!("e{i}"));
                    if setup == "HSET" {
                        args.push("v".into());
                    }
                }
                conn.cmd(&args);
            }
            let mut seen = std::collections::BTreeSet::new();
            let (mut cursor, mut step, mut calls) = ("0".to_string(), 0u32, 0);
            loop {
                let (next, items) = scan_reply(&conn.cmd(&[scan, &key, &cursor, "COUNT", "20"]));
                assert!(
                    items.len() / stride <= 200,
                    "{scan} returned a whole collection"
                );
                seen.extend(items.into_iter().step_by(stride));
                calls += 1;
                cursor = next;
                if cursor == "0" {
                    break;
                }
                // Odd elements go, two per call; new ones come.
                step += 1;
                let gone = format!("e{}", (step * 2 * 37 + 1) % 2000);
                conn.cmd(&[del, &key, &gone]);
                let added = format!("n{step}");
                match add {
                    "HSET" => conn.cmd(&[add, &key, &added, "v"]),
                    "ZADD" => conn.cmd(&[add, &key, "5", &added]),
                    _ => conn.cmd(&[add, &key, &added]),
                };
            }
            assert!(calls > 10, "{scan} paged in {calls} calls");
            for i in (0..2000).step_by(2) {
                assert!(
                    seen.contains(&format!("e{i}")),
                    "{scan} never returned e{i}"
                );
            }
        }
    }
}
