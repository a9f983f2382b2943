//! Differential tests of the sorted-set commands against a real redis-server, under RESP2 and
//! RESP3: every case runs on both servers and the reply bytes are compared. Errors are cases
//! too, in the order Redis checks them (a key count before the keys' types, the types before
//! the options, the options before the range).
//!
//! Random replies (`ZRANDMEMBER` with a count below the set's size) are checked for what does
//! not depend on chance: their shape, their size, that every member belongs to the set.

use latchkey_tests::Diff;

/// Sorted sets and sets to combine, with the edge scores the algebra must treat as Redis does.
const SETUP: &[&str] = &[
    "ZADD za 1 a 2 b 3 c",
    "ZADD zb 10 b 20 c 30 d",
    "ZADD zinf +inf x -inf y 1 z",
    "ZADD zninf -inf x +inf y 2 z",
    "SADD plain a d e",
    "SET str v",
    "ZADD lex 0 a 0 b 0 c 0 d 0 e 0 f 0 g",
    "ZADD mixed 1 a 2 b 3 c",
];

const ALGEBRA: &[&str] = &[
    "ZUNION 2 za zb",
    "ZUNION 2 za zb WITHSCORES",
    "ZUNION 2 za zb WEIGHTS 2 0.5 WITHSCORES",
    "ZUNION 2 za zb AGGREGATE MIN WITHSCORES",
    "ZUNION 2 za zb AGGREGATE max WITHSCORES",
    "ZUNION 3 za zb plain WITHSCORES",
    "ZUNION 2 za nokey WITHSCORES",
    "ZUNION 2 zinf zninf WITHSCORES",
    "ZUNION 2 zinf zninf AGGREGATE MIN WITHSCORES",
    "ZUNION 1 zinf WEIGHTS 0 WITHSCORES",
    "ZINTER 2 za zb WITHSCORES",
    "ZINTER 2 za zb WEIGHTS 1 -1 WITHSCORES",
    "ZINTER 2 zinf zninf WITHSCORES",
    "ZINTER 2 zinf zninf AGGREGATE MAX WITHSCORES",
    "ZINTER 2 za plain WITHSCORES",
    "ZINTER 2 za nokey",
    "ZINTER 2 za za WITHSCORES",
    "ZDIFF 2 za zb",
    "ZDIFF 2 za zb WITHSCORES",
    "ZDIFF 3 za plain zb WITHSCORES",
    "ZDIFF 1 nokey",
    "ZDIFF 2 za zb WEIGHTS 1 2",
    "ZDIFF 2 za zb AGGREGATE SUM",
    "ZINTERCARD 2 za zb",
    "ZINTERCARD 2 za zb LIMIT 1",
    "ZINTERCARD 2 za zb LIMIT 0",
    "ZINTERCARD 2 za plain",
    "ZINTERCARD 2 za zb LIMIT -1",
    "ZINTERCARD 2 za zb LIMIT x",
    "ZINTERCARD 2 za zb WITHSCORES",
    "ZINTERCARD 0 za",
    "ZINTERCARD 3 za zb",
    "ZUNIONSTORE d 2 za zb",
    "ZRANGE d 0 -1 WITHSCORES",
    "ZUNIONSTORE d 2 za zb WEIGHTS 1 2 AGGREGATE MAX",
    "ZRANGE d 0 -1 WITHSCORES",
    "ZINTERSTORE d 2 za zb",
    "ZRANGE d 0 -1 WITHSCORES",
    "ZDIFFSTORE d 2 za zb",
    "ZRANGE d 0 -1 WITHSCORES",
    "EXPIRE d 100",
    "ZINTERSTORE d 2 za nokey",
    "EXISTS d",
    "ZUNIONSTORE d 1 plain",
    "TYPE d",
    "TTL d",
    "ZUNIONSTORE za 2 za zb",
    "ZRANGE za 0 -1 WITHSCORES",
    "ZUNIONSTORE d 2 za zb WITHSCORES",
    "ZUNION 0 za",
    "ZUNIONSTORE d 0 za",
    "ZINTER 0 za",
    "ZDIFF 0 za",
    "ZDIFFSTORE d 0 za",
    "ZUNION -1 za",
    "ZUNION x za",
    "ZUNION 3 za zb",
    "ZUNION 9223372036854775807 za",
    "ZUNION 2 za str",
    "ZUNION 2 str za BOGUS",
    "ZUNION 2 za zb BOGUS",
    "ZUNION 2 za zb WEIGHTS 1",
    "ZUNION 2 za zb WEIGHTS 1 x",
    "ZUNION 2 za zb WEIGHTS 1 nan",
    "ZUNION 2 za zb AGGREGATE",
    "ZUNION 2 za zb AGGREGATE avg",
    "ZINTERSTORE d 2 za str",
    "ZDIFFSTORE d 2 str za",
];

const LEX: &[&str] = &[
    "ZRANGEBYLEX lex - +",
    "ZRANGEBYLEX lex [b (e",
    "ZRANGEBYLEX lex (b [e",
    "ZRANGEBYLEX lex [b [b",
    "ZRANGEBYLEX lex (b (b",
    "ZRANGEBYLEX lex + -",
    "ZRANGEBYLEX lex - -",
    "ZRANGEBYLEX lex [ +",
    "ZRANGEBYLEX lex ( +",
    "ZRANGEBYLEX lex - + LIMIT 1 2",
    "ZRANGEBYLEX lex - + LIMIT 1 -1",
    "ZRANGEBYLEX lex - + LIMIT -1 2",
    "ZRANGEBYLEX lex - + LIMIT 100 2",
    "ZRANGEBYLEX lex - + LIMIT 0 0",
    "ZRANGEBYLEX lex - + WITHSCORES",
    "ZRANGEBYLEX lex - + LIMIT 1",
    "ZRANGEBYLEX lex - + LIMIT x 1",
    "ZRANGEBYLEX lex a +",
    "ZRANGEBYLEX lex - b",
    "ZRANGEBYLEX lex -a +",
    "ZRANGEBYLEX lex - ++",
    "ZRANGEBYLEX lex \"\" +",
    "ZRANGEBYLEX nokey - +",
    "ZRANGEBYLEX str - +",
    "ZRANGEBYLEX str foo +",
    "ZREVRANGEBYLEX lex + -",
    "ZREVRANGEBYLEX lex [e (b",
    "ZREVRANGEBYLEX lex (e [b LIMIT 1 2",
    "ZREVRANGEBYLEX lex - +",
    "ZRANGE lex [b [d BYLEX",
    "ZRANGE lex [d [b BYLEX REV",
    "ZRANGE lex - + BYLEX LIMIT 2 3",
    "ZRANGE lex - + BYLEX WITHSCORES",
    "ZRANGE lex - + BYLEX BYSCORE",
    "ZRANGE lex 0 -1 BYLEX",
    "ZLEXCOUNT lex - +",
    "ZLEXCOUNT lex [b (e",
    "ZLEXCOUNT lex + -",
    "ZLEXCOUNT lex x +",
    "ZLEXCOUNT nokey - +",
    "ZLEXCOUNT str - +",
    "ZREMRANGEBYLEX lex [b (d",
    "ZRANGE lex 0 -1",
    "ZREMRANGEBYLEX lex (z +",
    "ZREMRANGEBYLEX lex - x",
    "ZREMRANGEBYLEX nokey - +",
    "ZREMRANGEBYLEX str - +",
    "ZREMRANGEBYLEX lex - +",
    "EXISTS lex",
];

const RANGES: &[&str] = &[
    "ZRANGE mixed 0 -1",
    "ZRANGE mixed 0 -1 WITHSCORES",
    "ZRANGE mixed 0 -1 REV WITHSCORES",
    "ZRANGE mixed -2 100",
    "ZRANGE mixed 2 1",
    "ZRANGE mixed 0 -1 LIMIT 0 -1",
    "ZRANGE mixed 0 -1 LIMIT 0 1",
    "ZRANGE mixed (1 +inf BYSCORE",
    "ZRANGE mixed +inf (1 BYSCORE REV WITHSCORES",
    "ZRANGE mixed -inf +inf BYSCORE LIMIT 1 1",
    "ZRANGE mixed -inf +inf BYSCORE LIMIT 5 1",
    "ZRANGE mixed x 1 BYSCORE",
    "ZRANGE mixed 0 x",
    "ZRANGE mixed 0 1 REV REV",
    "ZRANGE mixed 0 1 WITHSCORES BOGUS",
    "ZREVRANGE mixed 0 -1 WITHSCORES",
    "ZREVRANGE mixed 0 -1 REV",
    "ZREVRANGE mixed 0 -1 LIMIT 0 1",
    "ZRANGEBYSCORE mixed -inf +inf WITHSCORES LIMIT 1 5",
    "ZRANGEBYSCORE mixed -inf +inf BYSCORE",
    "ZREVRANGEBYSCORE mixed +inf -inf WITHSCORES",
    "ZREVRANGEBYSCORE mixed 2 (1",
    "ZRANGESTORE dst mixed 0 -1",
    "ZRANGE dst 0 -1 WITHSCORES",
    "ZRANGESTORE dst mixed 2 +inf BYSCORE",
    "ZRANGE dst 0 -1 WITHSCORES",
    "ZRANGESTORE dst mixed +inf 2 BYSCORE REV LIMIT 0 1",
    "ZRANGE dst 0 -1 WITHSCORES",
    "ZRANGESTORE dst mixed [a [b BYLEX",
    "ZRANGE dst 0 -1",
    "ZRANGESTORE dst mixed 5 10",
    "EXISTS dst",
    "ZRANGESTORE dst nokey 0 -1",
    "ZRANGESTORE dst mixed 0 -1 WITHSCORES",
    "ZRANGESTORE dst mixed 0 -1 LIMIT 0 1",
    "ZRANGESTORE dst str 0 -1",
    "SET str2 v",
    "ZRANGESTORE str2 mixed 0 -1",
    "TYPE str2",
];

const POPS: &[&str] = &[
    "ZADD p 1 a 2 b 3 c 4 d 5 e",
    "ZPOPMIN p",
    "ZPOPMAX p",
    "ZPOPMIN p 2",
    "ZPOPMIN p 0",
    "ZPOPMIN p -1",
    "ZPOPMIN p x",
    "ZPOPMIN p 1 2",
    "ZPOPMIN nokey",
    "ZPOPMIN nokey 2",
    "ZPOPMAX str",
    "ZPOPMAX p 100",
    "EXISTS p",
    "ZADD p 1 a 2 b 3 c",
    "ZMPOP 2 nokey p MIN",
    "ZMPOP 1 p MAX COUNT 10",
    "EXISTS p",
    "ZMPOP 1 p MIN",
    "ZMPOP 2 str p MIN",
    "ZMPOP 0 p MIN",
    "ZMPOP -1 p MIN",
    "ZMPOP x p MIN",
    "ZMPOP 2 p MIN",
    "ZMPOP 1 p LEFT",
    "ZMPOP 1 p MIN COUNT",
    "ZMPOP 1 p MIN COUNT 0",
    "ZMPOP 1 p MIN COUNT 1 COUNT 2",
    "ZMPOP 1 p MIN BOGUS",
    "ZMPOP 9223372036854775807 p MIN",
    "ZADD q 1 a 2 b",
    "BZPOPMIN nokey q 0",
    "BZPOPMAX q 0",
    "BZPOPMIN q str 0",
    "BZPOPMIN str q 0",
    "BZPOPMIN q -1",
    "BZPOPMIN q x",
    "BZPOPMIN q 1e300",
    "BZPOPMIN q 1e17",
    "BZMPOP 1e300 1 q MIN",
    "BLPOP q 1e300",
    "ZADD q 1 a 2 b 3 c",
    "BZMPOP 0 2 nokey q MAX COUNT 2",
    "BZMPOP 0 1 q MIN",
    "BZMPOP x 0 q MIN",
    "BZMPOP x 1 q MIN",
    "BZMPOP -1 1 q MIN",
    "BZMPOP 0 1 q SIDEWAYS",
    "BZPOPMIN nokey 0.01",
    "BZMPOP 0.01 1 nokey MIN",
    "MULTI",
    "BZPOPMIN nokey 0",
    "BZMPOP 0 1 nokey MAX",
    "EXEC",
    "EVAL \"return redis.call('bzmpop', 0, 1, KEYS[1], 'min')\" 1 nokey",
    "EVAL \"return redis.call('zmpop', 1, KEYS[1], 'min')\" 1 nokey",
];

const RANDOM: &[&str] = &[
    "ZADD r 1 a 2 b 3 c",
    "ZRANDMEMBER nokey",
    "ZRANDMEMBER nokey 5",
    "ZRANDMEMBER nokey -5 WITHSCORES",
    "ZRANDMEMBER r 0",
    "ZRANDMEMBER r 3",
    "ZRANDMEMBER r 10 WITHSCORES",
    "ZRANDMEMBER r 1 2",
    "ZRANDMEMBER r 1 WITHSCORE",
    "ZRANDMEMBER r x",
    "ZRANDMEMBER r -9223372036854775808",
    "ZRANDMEMBER r -9223372036854775807 WITHSCORES",
    "ZRANDMEMBER r 9223372036854775807 WITHSCORES",
    "ZRANDMEMBER str",
    "ZRANDMEMBER str 3",
    "ZADD one 7 only",
    "ZRANDMEMBER one",
    "ZRANDMEMBER one -3 WITHSCORES",
    "ZRANDMEMBER one 1 WITHSCORES",
];

/// `ZSCAN` of sorted sets small enough to come back whole: the order, the scores written as
/// Redis writes them (bulk strings under RESP3 too), and the errors.
const SCANS: &[&str] = &[
    "ZADD sc 1.5 a 2 b -0.1 c 1e20 d 0.1 e",
    "ZSCAN sc 0",
    "ZSCAN sc 0 COUNT 1",
    "ZSCAN sc 0 MATCH [ab]",
    "ZSCAN sc 0 MATCH nothing",
    "ZSCAN zinf 0",
    "ZSCAN nokey 0",
    "ZSCAN str 0",
    "ZSCAN sc x",
    "ZSCAN sc -1",
    "ZSCAN sc 0 COUNT 0",
    "ZSCAN sc 0 TYPE zset",
    "ZSCAN sc 0 MATCH",
    "ZSCAN sc",
];

/// Every table, in order, on a fresh pair of servers.
fn run(resp3: bool) {
    let mut d = Diff::new();
    if resp3 {
        d.both(&["HELLO", "3"]);
    }
    d.table(SETUP);
    d.table(ALGEBRA);
    d.table(LEX);
    d.table(RANGES);
    d.table(POPS);
    d.table(RANDOM);
    d.table(SCANS);
}

#[test]
fn zsets_resp2() {
    run(false);
}

#[test]
fn zsets_resp3() {
    run(true);
}

#[test]
fn wrong_arity() {
    Diff::new().table(&[
        "ZUNION 1",
        "ZINTER",
        "ZDIFF 1",
        "ZINTERCARD 1",
        "ZUNIONSTORE d 1",
        "ZINTERSTORE d",
        "ZDIFFSTORE d 1",
        "ZRANGESTORE d s 0",
        "ZRANGEBYLEX k -",
        "ZREVRANGEBYLEX k +",
        "ZLEXCOUNT k -",
        "ZLEXCOUNT k - + x",
        "ZREMRANGEBYLEX k -",
        "ZRANDMEMBER",
        "ZMPOP 1 k",
        "BZMPOP 0 1 k",
        "BZPOPMIN k",
        "BZPOPMAX",
        "ZPOPMIN",
    ]);
}

/// `COMMAND INFO` of the new commands: arity, flags and key positions as Redis 7.0 declares
/// them (the fields latchkey fills the same way: the name, arity, flags and first/last/step),
/// `movablekeys` included for the commands whose keys follow a count.
#[test]
fn command_info_arity_and_keys() {
    let mut d = Diff::new();
    for name in [
        "zunionstore",
        "zinterstore",
        "zdiffstore",
        "zunion",
        "zinter",
        "zdiff",
        "zintercard",
        "zmpop",
        "bzmpop",
        "sintercard",
        "lmpop",
        "blmpop",
        "zrangestore",
        "zrangebylex",
        "zlexcount",
        "zremrangebylex",
        "bzpopmin",
        "bzpopmax",
        "zpopmin",
    ] {
        let (redis, latchkey) = d.both(&["COMMAND", "INFO", name]);
        // The head of the reply: the name, the arity, the flags and the key positions, up to
        // the ACL categories (which latchkey only approximates).
        let head = |r: &[u8]| -> String {
            let text = String::from_utf8_lossy(r).into_owned();
            let at = text.find('@').unwrap_or(text.len());
            let cut = text[..at].rfind("\r\n*").unwrap_or(at);
            text[..cut].to_string()
        };
        assert_eq!(head(&latchkey), head(&redis), "COMMAND INFO {name}");
    }
}

/// A distinct random sample has the asked size, distinct members of the set, and the scores
/// that go with them; picks that may repeat have the asked size and members of the set.
#[test]
fn zrandmember_samples_belong_to_the_set() {
    let mut d = Diff::new();
    let mut zadd = vec!["ZADD".to_string(), "big".into()];
    for i in 0..100 {
        zadd.push(i.to_string());
        zadd.push(format!("m{i}"));
    }
    d.both(&zadd);
    let lines = |r: Vec<u8>| -> Vec<String> {
        String::from_utf8(r)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    };
    let (_, distinct) = d.both(&["ZRANDMEMBER", "big", "10", "WITHSCORES"]);
    let l = lines(distinct);
    assert_eq!(l[0], "*20");
    let mut members = Vec::new();
    for pair in l[1..].chunks(4) {
        let member = &pair[1];
        let score = &pair[3];
        assert_eq!(&format!("m{score}"), member, "a member with its own score");
        members.push(member.clone());
    }
    members.sort();
    members.dedup();
    assert_eq!(members.len(), 10, "distinct members");
    let (_, repeated) = d.both(&["ZRANDMEMBER", "big", "-500"]);
    let l = lines(repeated);
    assert_eq!(l[0], "*500");
    for m in l[1..].iter().skip(1).step_by(2) {
        let n: u32 = m.strip_prefix('m').unwrap().parse().unwrap();
        assert!(n < 100, "{m} is a member");
    }
    // Under RESP3, WITHSCORES pairs are arrays of two.
    d.both(&["HELLO", "3"]);
    let (_, r3) = d.both(&["ZRANDMEMBER", "big", "-2", "WITHSCORES"]);
    let l = lines(r3);
    assert_eq!(l[0], "*2");
    assert_eq!(l[1], "*2");
    assert!(l[4].starts_with(','), "a RESP3 double: {}", l[4]);
}

/// A large `ZUNIONSTORE` gives the same result on both servers (and the hand-off before its
/// walk changes nothing about it).
#[test]
fn large_union_matches() {
    let mut d = Diff::new();
    for key in ["l1", "l2"] {
        let mut zadd = vec!["ZADD".to_string(), key.into()];
        for i in 0..20_000 {
            zadd.push((i % 97).to_string());
            zadd.push(format!("{key}-{}", i % 15_000));
        }
        d.both(&zadd);
    }
    d.table(&[
        "ZUNIONSTORE big 2 l1 l2 WEIGHTS 1 3",
        "ZCARD big",
        "ZRANGE big 0 9 WITHSCORES",
        "ZRANGE big -10 -1 WITHSCORES",
        "ZINTERCARD 2 l1 big",
        "ZRANGEBYSCORE big 100 120 LIMIT 30 5 WITHSCORES",
    ]);
}

/// `COMMAND GETKEYS` finds the keys that follow a count, as Redis does, and refuses a count
/// that names more keys than there are.
#[test]
fn getkeys_of_counted_keys() {
    Diff::new().table(&[
        "COMMAND GETKEYS ZUNIONSTORE d 2 a b WEIGHTS 1 2",
        "COMMAND GETKEYS ZUNIONSTORE d 5 a",
        "COMMAND GETKEYS ZINTERSTORE d x a",
        "COMMAND GETKEYS ZDIFFSTORE d 1 a",
        "COMMAND GETKEYS ZUNION 2 a b WITHSCORES",
        "COMMAND GETKEYS ZINTER 3 a b",
        "COMMAND GETKEYS ZDIFF 0 a",
        "COMMAND GETKEYS ZINTERCARD 2 a b LIMIT 1",
        "COMMAND GETKEYS ZMPOP 2 a b MIN",
        "COMMAND GETKEYS BZMPOP 0 2 a b MAX COUNT 3",
        "COMMAND GETKEYS BZPOPMIN a b 0",
        "COMMAND GETKEYS ZRANGESTORE d s 0 -1",
        "COMMAND GETKEYS SINTERCARD 2 a b",
        "COMMAND GETKEYS LMPOP 1 a LEFT",
        "COMMAND GETKEYS BLMPOP 0 2 a b RIGHT",
    ]);
}

/// Client-side caching: a client that read a sorted set through `ZUNION`, `ZINTERCARD` or
/// `ZRANGEBYLEX` is told when another client changes it, as Redis tells it.
#[test]
fn tracking_invalidates_keys_read_by_the_new_commands() {
    use latchkey_tests::RawConn;
    let d = Diff::new();
    for addr in [d.redis_proc.addr(), d.latchkey_server.addr()] {
        let mut reader = RawConn::connect(addr).unwrap();
        let mut writer = RawConn::connect(addr).unwrap();
        writer.cmd(&["ZADD", "ta", "1", "a"]);
        writer.cmd(&["ZADD", "tb", "1", "b"]);
        writer.cmd(&["ZADD", "tc", "0", "c"]);
        reader.cmd(&["HELLO", "3"]);
        assert_eq!(reader.cmd(&["CLIENT", "TRACKING", "ON"]), b"+OK\r\n");
        reader.cmd(&["ZUNION", "2", "ta", "tb"]);
        reader.cmd(&["ZINTERCARD", "1", "tc"]);
        reader.cmd(&["ZRANGEBYLEX", "tc", "-", "+"]);
        writer.cmd(&["ZADD", "tb", "2", "b2"]);
        assert_eq!(
            reader.read_reply(),
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\ntb\r\n",
            "on {addr}"
        );
        writer.cmd(&["ZADD", "tc", "1", "c2"]);
        assert_eq!(
            reader.read_reply(),
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\ntc\r\n",
            "on {addr}"
        );
    }
}
