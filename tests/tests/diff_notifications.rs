//! Keyspace notifications (`notify-keyspace-events`), side by side with a real redis-server:
//! every write command of the table below runs on both servers, and the `__keyspace@` and
//! `__keyevent@` messages each one publishes must be the same bytes in the same order — the
//! event names (`incrby` for `INCR`, `rename_from`/`rename_to`, `zincr`), the `del` of a
//! collection emptied by a pop, and no event for a command that changed nothing.

use std::net::SocketAddr;

use latchkey_tests::diff::split_args;
use latchkey_tests::{RawConn, RedisProcess};

/// Every write command latchkey has, with the cases where Redis sends more or fewer events.
const TABLE: &[&str] = &[
    "SET s v",
    "SET s v2 XX GET",
    "SET s v3 NX",
    "SET s v4 KEEPTTL",
    "SET s2 v EX 100",
    "SETNX s3 v",
    "SETNX s3 v",
    "SETEX s4 100 v",
    "PSETEX s5 100000 v",
    "GETSET s v5",
    "GETDEL s5",
    "GETDEL nokey",
    "GETEX s4 PERSIST",
    "GETEX s EX 100",
    "GETEX s",
    "MSET m1 a m2 b",
    "MSETNX m3 a m4 b",
    "MSETNX m3 a m5 b",
    "APPEND s 123",
    "APPEND s6 x",
    "SETRANGE s 1 zz",
    r#"SETRANGE s7 0 """#,
    "INCR n",
    "DECR n",
    "INCRBY n 10",
    "DECRBY n 3",
    "INCRBYFLOAT n 1.5",
    "SETBIT b 7 1",
    "SETBIT b 7 1",
    "BITOP AND b2 b s",
    "BITOP OR b3 nokey nokey2",
    "BITFIELD bf SET u8 0 200",
    "BITFIELD bf GET u8 0",
    "DEL s nokey m1",
    "UNLINK m2",
    "EXPIRE s2 1000",
    "PEXPIRE s2 1000000",
    "EXPIREAT s2 1",
    "SET e v",
    "PEXPIREAT e 1",
    "SET e v",
    "EXPIRE e -1",
    "SET p v EX 100",
    "PERSIST p",
    "PERSIST p",
    "RENAME p p2",
    "RENAME p2 p2",
    "SET r v",
    "RENAMENX r p2",
    "RENAMENX r r2",
    "MOVE r2 1",
    "COPY s4 c1",
    "COPY s4 c1 REPLACE",
    "LPUSH l a b c",
    "RPUSH l d",
    "LPUSHX l e",
    "RPUSHX nokey e",
    "LPOP l",
    "RPOP l 2",
    "LINSERT l BEFORE b x",
    "LSET l 0 y",
    "LREM l 0 y",
    "LTRIM l 0 0",
    "LTRIM l 1 0",
    "RPUSH l a b",
    "RPOPLPUSH l l2",
    "LMOVE l l2 LEFT RIGHT",
    "LMOVE l2 l2 LEFT LEFT",
    "RPUSH l3 a b c",
    "LMPOP 1 l3 LEFT COUNT 2",
    "BLPOP l3 0",
    "RPUSH l4 a",
    "BRPOPLPUSH l4 l5 0",
    "BLMOVE l5 l6 LEFT LEFT 0",
    "SADD st a b c",
    "SADD st a",
    "SREM st a nope",
    "SREM st b",
    "SPOP st",
    "SPOP st",
    "SADD st 1 2",
    "SPOP st 5",
    "SADD st2 x y",
    "SMOVE st2 st3 x",
    "SMOVE st2 st3 y",
    "SADD sa 1 2 3",
    "SADD sb 2 3 4",
    "SINTERSTORE si sa sb",
    "SUNIONSTORE su sa sb",
    "SDIFFSTORE sd sa sb",
    "SDIFFSTORE sd sa sa",
    "HSET h f v g w",
    "HSET h f v",
    "HSETNX h f v",
    "HSETNX h k v",
    "HMSET h a 1",
    "HINCRBY h a 2",
    "HINCRBYFLOAT h a 1.5",
    "HDEL h f nope",
    "HDEL h g k a",
    "ZADD z 1 a 2 b 3 c",
    "ZADD z 1 a",
    "ZADD z INCR 5 a",
    "ZINCRBY z 1 b",
    "ZREM z nope",
    "ZREM z c",
    "ZADD z 3 c 4 d 5 e",
    "ZREMRANGEBYSCORE z 3 3",
    "ZREMRANGEBYRANK z 0 0",
    "ZADD zl 0 a 0 b 0 c",
    "ZREMRANGEBYLEX zl [a [a",
    "ZPOPMIN zl",
    "ZPOPMAX zl",
    "ZADD zp 1 x",
    "BZPOPMIN zp 0",
    "ZADD zm 1 x 2 y",
    "ZMPOP 1 zm MIN COUNT 5",
    "ZADD za 1 a 2 b",
    "ZADD zb 1 b 3 c",
    "ZUNIONSTORE zu 2 za zb",
    "ZINTERSTORE zi 2 za zb",
    "ZDIFFSTORE zd 2 za zb",
    "ZDIFFSTORE zd 2 za za",
    "ZRANGESTORE zr za 0 -1",
    "XADD x 1-0 f v",
    "XADD x 2-0 f v",
    "XADD x MAXLEN 1 3-0 f v",
    "XTRIM x MAXLEN 0",
    "XADD x 4-0 f v",
    "XDEL x 4-0",
    "XSETID x 10-0",
    "PFADD hl a b",
    "PFADD hl a",
    "PFMERGE hl2 hl",
    "PFCOUNT hl hl2",
    "RPUSH srt 3 1 2",
    "SORT srt STORE srt2",
    "SORT srt LIMIT 0 0 STORE srt3",
    r#"EVAL "redis.call('set','ev','1'); redis.call('del','ev'); return 1" 0"#,
    "FLUSHDB",
];

/// The messages a subscriber to every keyspace and keyevent channel receives while `lines`
/// run on `addr` with `flags`: one line per command, its reply then its messages. A `PING` on
/// the subscriber after each command marks where that command's messages end (they were
/// published before the command answered).
fn transcript(addr: SocketAddr, flags: &str, lines: &[&str]) -> Vec<String> {
    let mut c = RawConn::connect(addr).unwrap();
    let mut sub = RawConn::connect(addr).unwrap();
    assert_eq!(c.cmd(&["FLUSHALL"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", flags]),
        b"+OK\r\n"
    );
    sub.cmd(&["PSUBSCRIBE", "__key*@*"]);
    let mut out = Vec::new();
    for line in lines {
        let args = split_args(line);
        let reply = c.cmd(&args);
        sub.send_raw(&RawConn::encode(&["PING"]));
        let mut messages = Vec::new();
        loop {
            let m = sub.read_reply();
            if m.starts_with(b"*2\r\n$4\r\npong") {
                break;
            }
            messages.push(String::from_utf8_lossy(&m).replace("\r\n", " "));
        }
        out.push(format!(
            "{line} => {} | {}",
            String::from_utf8_lossy(&reply).trim_end(),
            messages.join(" ; ")
        ));
    }
    c.cmd(&["CONFIG", "SET", "notify-keyspace-events", ""]);
    out
}

/// Both servers' transcripts, compared line by line so that a failure names the command.
fn same_as_redis(flags: &str, lines: &[&str]) -> Vec<String> {
    let latchkey = latchkey_server::Server::builder()
        .start_blocking()
        .expect("start latchkey");
    let redis = RedisProcess::spawn(&["--enable-debug-command", "yes"]);
    let ours = transcript(latchkey.addr(), flags, lines);
    let theirs = transcript(redis.addr(), flags, lines);
    let differ: Vec<String> = ours
        .iter()
        .zip(&theirs)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  latchkey {a}\n     redis {b}"))
        .collect();
    assert!(
        differ.is_empty(),
        "{} of {} commands differ ({flags}):\n{}",
        differ.len(),
        lines.len(),
        differ.join("\n")
    );
    theirs
}

#[test]
fn every_write_command_notifies_as_redis_does() {
    let theirs = same_as_redis("AKE", TABLE);
    // What Redis said, so that two equally silent servers cannot pass.
    assert!(theirs[0].contains("__keyevent@0__:set"), "{}", theirs[0]);
}

/// With `n`, every key a command adds to a database is announced `new` first, as Redis's
/// `dbAdd` announces it: a key created, and a key Redis deletes and adds anew (`RENAME`,
/// `COPY ... REPLACE`, `RESTORE ... REPLACE`), but not one overwritten in place (`SET`).
#[test]
fn every_created_key_is_announced_new_as_redis_does() {
    let theirs = same_as_redis("AKEn", TABLE);
    assert!(theirs[0].contains("__keyevent@0__:new"), "{}", theirs[0]);
    let lines = [
        "SET a 1",
        "SET a 2",
        "SET b 1",
        "RENAME a b",
        "COPY b c",
        "COPY b c REPLACE",
        "DUMP c",
        "MOVE c 1",
        "SET e v PX 1",
        "DEBUG SLEEP 0.01",
        "SET e again",
        "SADD s x",
        "SADD s y",
        "RPOPLPUSH nosuch dst",
        "LPUSH src x",
        "RPOPLPUSH src dst",
        "SINTERSTORE s2 s s",
        "SINTERSTORE s2 s s",
        "ZADD z 1 m",
        "ZUNIONSTORE z2 1 z",
        "INCR n",
        "HSET h f v",
        "XADD st 1-1 f v",
        "PFADD hll a",
        "SETBIT bits 3 1",
        "APPEND ap x",
    ];
    for flags in ["En", "Kn", "KEn", "Kgn"] {
        same_as_redis(flags, &lines);
    }
}

/// Each class letter selects its commands' events only; `K` and `E` choose the channels.
#[test]
fn classes_and_channels_select_what_is_sent() {
    let lines = [
        "SET s v",
        "LPUSH l a",
        "SADD st a",
        "HSET h f v",
        "ZADD z 1 a",
        "EXPIRE s 100",
        "DEL s",
    ];
    for flags in ["K$", "El", "Ks", "Eh", "Kz", "Eg", "KEg$", "A", "KA", ""] {
        same_as_redis(flags, &lines);
    }
}

/// A key whose TTL ran out is announced `expired` once, by whoever deletes it: a command that
/// finds it (before that command's own events, as Redis deletes it on lookup) or the active
/// expiry cycle. The lazy path is compared with redis-server with the active cycle stopped
/// (`DEBUG SET-ACTIVE-EXPIRE 0`) so that both servers delete at the same command.
#[test]
fn an_expired_key_is_announced_before_the_command_that_found_it() {
    let lines = [
        "DEBUG SET-ACTIVE-EXPIRE 0",
        "SET a v PX 1",
        "SET b v PX 1",
        "SET c v PX 1",
        "DEBUG SLEEP 0.05",
        "GET a",
        "SET b v2",
        "EXISTS c",
        "GET a",
        "DEBUG SET-ACTIVE-EXPIRE 1",
    ];
    let theirs = same_as_redis("KEA", &lines);
    assert!(
        theirs[5].contains("__keyevent@0__:expired"),
        "{}",
        theirs[5]
    );
    assert!(!theirs[8].contains("expired"), "{}", theirs[8]);
}

/// The active expiry cycle announces what it deletes, with nobody asking for the key: the
/// notification a lock's waiter can listen for when a crashed holder's lease runs out.
#[test]
fn the_active_cycle_announces_each_expired_key() {
    let d = latchkey_tests::Diff::new();
    for addr in [d.latchkey_server.addr(), d.redis_proc.addr()] {
        let mut c = RawConn::connect(addr).unwrap();
        let mut sub = RawConn::connect(addr).unwrap();
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ex"]);
        sub.cmd(&["SUBSCRIBE", "__keyevent@0__:expired"]);
        assert_eq!(c.cmd(&["SET", "lease", "holder", "PX", "20"]), b"+OK\r\n");
        // No command touches the key: only the active cycle can delete it.
        let message = sub.read_reply();
        assert_eq!(
            message,
            b"*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:expired\r\n$5\r\nlease\r\n",
            "{addr}: {}",
            String::from_utf8_lossy(&message)
        );
        assert_eq!(c.cmd(&["EXISTS", "lease"]), b":0\r\n");
    }
}

/// A key evicted under `maxmemory` is announced `evicted` (latchkey alone: which key Redis
/// evicts, and when, depends on its allocator).
#[test]
fn an_evicted_key_is_announced() {
    let server = latchkey_server::Server::builder()
        .start_blocking()
        .expect("start latchkey");
    let mut w = RawConn::connect(server.addr()).unwrap();
    let mut sub = RawConn::connect(server.addr()).unwrap();
    let value = "v".repeat(1024);
    let keys: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
    for k in &keys {
        assert_eq!(w.cmd(&["SET", k, &value]), b"+OK\r\n");
    }
    w.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:evicted"]);
    latchkey_tests::raw::evict_some(&mut w);
    let message = sub.read_reply();
    let key = keys
        .iter()
        .find(|k| {
            let tail = format!("${}\r\n{k}\r\n", k.len());
            message.starts_with(b"*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:evicted\r\n")
                && message.ends_with(tail.as_bytes())
        })
        .unwrap_or_else(|| {
            panic!(
                "not an eviction of a key: {}",
                String::from_utf8_lossy(&message)
            )
        });
    assert_eq!(w.cmd(&["EXISTS", key]), b":0\r\n");
}
