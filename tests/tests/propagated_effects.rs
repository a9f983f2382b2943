//! What commands whose effect their arguments do not fix send down the replication stream,
//! read from the stream itself on latchkey and on a real redis-server: a test connection says
//! `SYNC`, skips the snapshot and parses the commands that follow.
//!
//! `SPOP` picks at random, so a replica must get what it took, in Redis 7.0's form: `SREM key
//! member` for one member, `MULTI`, one `SREM` per member and `EXEC` for a count, `DEL key`
//! when the count takes the whole set. The blocking list commands send what they did when
//! they were served: `LPOP key n` with the number taken, `LMOVE`, `RPOPLPUSH`; the sorted-set
//! pops as `ZPOPMIN key [n]` (`n`: how many there were to take, up to the count).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use latchkey_server::Server;
use latchkey_tests::persisted::ReplicationStream;
use latchkey_tests::{RawConn, RedisProcess};

/// The replication stream, as these tests read it: commands as lossy text, upper-cased names,
/// without the link's own.
struct Stream(ReplicationStream);

impl Stream {
    fn open(addr: SocketAddr) -> Stream {
        Stream(ReplicationStream::open(addr))
    }

    /// The commands of the stream up to the test's closing `SET end ...`, which is left out.
    fn until_end(&mut self) -> Vec<Vec<String>> {
        let mut got = Vec::new();
        loop {
            let cmd = self.next();
            if cmd[0] == "SET" && cmd[1] == "end" {
                return got;
            }
            got.push(cmd);
        }
    }

    /// The next command of the stream, skipping the link's own (`PING`, `REPLCONF`, `SELECT`).
    fn next(&mut self) -> Vec<String> {
        loop {
            // Lossy: a `RESTORE` payload is binary; the tests that carry one replace it.
            let mut args: Vec<String> = self
                .0
                .next_args()
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let name = args[0].to_ascii_uppercase();
            if !matches!(name.as_str(), "PING" | "REPLCONF" | "SELECT") {
                args[0] = name;
                return args;
            }
        }
    }
}

/// Runs the pops on the server at `addr` and returns what the stream carried for them, with
/// the popped members (the stream's SREMs must name exactly those).
fn pops(addr: SocketAddr) -> Vec<Vec<String>> {
    let mut stream = Stream::open(addr);
    let mut c = RawConn::connect(addr).expect("connect");
    c.cmd(&["SADD", "s", "1", "2", "3", "4", "5", "6", "7", "8"]);
    let one = c.cmd(&["SPOP", "s"]);
    let three = c.cmd(&["SPOP", "s", "3"]);
    let rest = c.cmd(&["SPOP", "s", "100"]);
    assert!(
        rest.starts_with(b"*4\r\n"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
    assert_eq!(stream.next()[0], "SADD");
    let mut got = Vec::new();
    for _ in 0..7 {
        got.push(stream.next());
    }
    // The single pop is the SREM of the member the client got.
    let member = String::from_utf8_lossy(&one)
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    assert_eq!(got[0], ["SREM", "s", member.as_str()]);
    // The three the client got are the three SREMs in the transaction.
    let text = String::from_utf8_lossy(&three).into_owned();
    let mut popped: Vec<&str> = text.lines().skip(2).step_by(2).collect();
    let mut removed: Vec<&str> = got[2..5].iter().map(|c| c[2].as_str()).collect();
    popped.sort_unstable();
    removed.sort_unstable();
    assert_eq!(popped, removed);
    // Members replaced by a placeholder: what is compared across servers is the shape.
    got.iter()
        .map(|c| {
            c.iter()
                .enumerate()
                .map(|(i, a)| {
                    if i == 2 {
                        "<member>".to_string()
                    } else {
                        a.clone()
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn spop_reaches_the_stream_as_redis_sends_it() {
    let redis = RedisProcess::spawn(&[]);
    let latchkey = Server::builder().start_blocking().expect("start latchkey");
    let expected = pops(redis.addr());
    let srem = ["SREM", "s", "<member>"];
    assert_eq!(
        expected,
        [
            &srem[..],
            &["MULTI"],
            &srem,
            &srem,
            &srem,
            &["EXEC"],
            &["DEL", "s"],
        ],
        "redis-server's own stream"
    );
    assert_eq!(pops(latchkey.addr()), expected);
}

/// Waits until a client of the server at `addr` is inside command `name`.
fn wait_blocked_in(addr: SocketAddr, name: &str) {
    let mut c = RawConn::connect(addr).expect("connect");
    let deadline = Instant::now() + Duration::from_secs(30);
    let needle = format!("cmd={name} ");
    while !String::from_utf8_lossy(&c.cmd(&["CLIENT", "LIST"])).contains(&needle) {
        assert!(Instant::now() < deadline, "no client in {name}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `effects` on a fresh redis-server and on a fresh latchkey: redis-server's stream must
/// be `redis_sends` (one command line each, its arguments joined by spaces), so that the test
/// states what Redis does, and latchkey's must be the same, argument for argument.
fn same_stream_as_redis(effects: impl Fn(SocketAddr) -> Vec<Vec<String>>, redis_sends: &[&str]) {
    let redis = RedisProcess::spawn(&[]);
    let latchkey = Server::builder().start_blocking().expect("start latchkey");
    let expected = effects(redis.addr());
    let lines: Vec<String> = expected.iter().map(|c| c.join(" ")).collect();
    assert_eq!(lines, redis_sends, "redis-server's own stream");
    assert_eq!(effects(latchkey.addr()), expected);
}

/// Runs `lines` (one command each, split on spaces) on the server at `addr`, then `SET end 1`,
/// and returns what its replication stream carried up to that closing `SET`.
fn table_effects(addr: SocketAddr, lines: &[&str]) -> Vec<Vec<String>> {
    let mut stream = Stream::open(addr);
    let mut c = RawConn::connect(addr).expect("connect");
    for line in lines.iter().chain(&["SET end 1"]) {
        let args: Vec<&str> = line.split(' ').collect();
        c.cmd(&args);
    }
    stream.until_end()
}

/// The list pops and moves on the server at `addr`, served at once and after a wait, and what
/// the stream carried for them.
fn list_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    let mut stream = Stream::open(addr);
    let mut c = RawConn::connect(addr).expect("connect");
    let mut waiter = RawConn::connect(addr).expect("connect");
    c.cmd(&["RPUSH", "q", "a"]);
    c.cmd(&["LMPOP", "1", "q", "LEFT", "COUNT", "10"]);
    waiter.send_raw(&RawConn::encode(&[
        "BLMPOP", "0", "1", "q", "RIGHT", "COUNT", "5",
    ]));
    wait_blocked_in(addr, "blmpop");
    c.cmd(&["RPUSH", "q", "b", "c"]);
    waiter.read_reply();
    waiter.send_raw(&RawConn::encode(&[
        "BLMOVE", "s", "d", "RIGHT", "LEFT", "0",
    ]));
    wait_blocked_in(addr, "blmove");
    c.cmd(&["RPUSH", "s", "x"]);
    waiter.read_reply();
    waiter.send_raw(&RawConn::encode(&["BRPOPLPUSH", "s", "d", "0"]));
    wait_blocked_in(addr, "brpoplpush");
    c.cmd(&["RPUSH", "s", "y"]);
    waiter.read_reply();
    c.cmd(&["RPUSH", "s", "z"]);
    c.cmd(&["BRPOPLPUSH", "s", "d", "0"]);
    c.cmd(&["RPUSH", "s", "w"]);
    c.cmd(&["BLMOVE", "s", "d", "Left", "RIGHT", "0"]);
    (0..12).map(|_| stream.next()).collect()
}

#[test]
fn served_blocking_list_commands_reach_the_stream_as_redis_sends_them() {
    same_stream_as_redis(
        list_effects,
        &[
            "RPUSH q a",
            "LPOP q 1",
            "RPUSH q b c",
            "RPOP q 2",
            "RPUSH s x",
            "LMOVE s d right left",
            "RPUSH s y",
            "RPOPLPUSH s d",
            "RPUSH s z",
            "RPOPLPUSH s d",
            "RPUSH s w",
            "LMOVE s d Left RIGHT",
        ],
    );
}

/// Runs bitmap commands, some of which change nothing, and returns what the stream carried up
/// to the closing `SET end 1`.
fn bit_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    table_effects(
        addr,
        &[
            "SETBIT b 7 1",
            "SETBIT b 7 1",
            "SETBIT b 100 0",
            "BITFIELD b OVERFLOW FAIL INCRBY u2 0 9",
            "BITFIELD b SET u8 0 1",
            "BITFIELD b SET u8 0 2",
            "BITFIELD b SET u8 0 2",
            "BITFIELD b GET u8 0",
            "BITFIELD nb OVERFLOW FAIL INCRBY u2 0 9",
            "BITFIELD_RO b GET u8 0",
            "BITOP NOT d b",
            "BITOP AND d nokey",
            "BITOP AND d nokey",
            "LCS b d",
            "HSET h f v",
            "HRANDFIELD h -3",
        ],
    )
}

/// A bit command reaches replicas and the AOF only when it changed something, as in Redis 7.0:
/// a `SETBIT` of a bit to the value it has, a `BITFIELD` whose writes all failed or wrote the
/// same value, and reads are not sent.
#[test]
fn bit_commands_reach_the_stream_only_when_they_change_something() {
    let redis = RedisProcess::spawn(&[]);
    let latchkey = Server::builder().start_blocking().expect("start latchkey");
    let expected = bit_effects(redis.addr());
    let names: Vec<&str> = expected.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(
        names,
        ["SETBIT", "SETBIT", "BITFIELD", "BITOP", "BITOP", "HSET"],
        "redis-server's own stream: {expected:?}"
    );
    assert_eq!(bit_effects(latchkey.addr()), expected);
}

/// The sorted-set pops on the server at `addr`, served at once and after a wait, and what the
/// stream carried for them.
fn zset_pop_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    let mut stream = Stream::open(addr);
    let mut c = RawConn::connect(addr).expect("connect");
    let mut waiter = RawConn::connect(addr).expect("connect");
    c.cmd(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    c.cmd(&["ZMPOP", "2", "none", "z", "MIN", "COUNT", "10"]);
    c.cmd(&["ZADD", "z", "1", "a", "2", "b"]);
    c.cmd(&["BZPOPMAX", "z", "0"]);
    c.cmd(&["BZMPOP", "0", "1", "z", "MIN", "COUNT", "5"]);
    waiter.send_raw(&RawConn::encode(&["BZPOPMIN", "z", "0"]));
    wait_blocked_in(addr, "bzpopmin");
    c.cmd(&["ZADD", "z", "4", "d", "5", "e"]);
    waiter.read_reply();
    waiter.send_raw(&RawConn::encode(&[
        "BZMPOP", "0", "1", "y", "MAX", "COUNT", "3",
    ]));
    wait_blocked_in(addr, "bzmpop");
    c.cmd(&["ZUNIONSTORE", "y", "1", "z"]);
    waiter.read_reply();
    c.cmd(&["ZPOPMIN", "none"]);
    c.cmd(&["ZADD", "z", "6", "f"]);
    c.cmd(&["ZRANGESTORE", "d", "z", "0", "-1"]);
    (0..11).map(|_| stream.next()).collect()
}

#[test]
fn sorted_set_pops_reach_the_stream_as_redis_sends_them() {
    same_stream_as_redis(
        zset_pop_effects,
        &[
            "ZADD z 1 a 2 b 3 c",
            "ZPOPMIN z 3",
            "ZADD z 1 a 2 b",
            "ZPOPMAX z",
            "ZPOPMIN z 1",
            "ZADD z 4 d 5 e",
            "ZPOPMIN z",
            "ZUNIONSTORE y 1 z",
            "ZPOPMAX y 1",
            "ZADD z 6 f",
            "ZRANGESTORE d z 0 -1",
        ],
    );
}

/// `SORT`s on the server at `addr`, with and without `STORE`, and what the stream carried for
/// them up to the closing `SET end 1`.
fn sort_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    table_effects(
        addr,
        &[
            "RPUSH l 3 1 2",
            "SORT l",
            "SORT l STORE d",
            "SORT_RO l",
            "SORT l LIMIT 5 5 STORE nothing",
            "SORT nokey STORE nothing",
            "SORT nokey STORE d",
            "SADD s b a c",
            "SORT s BY nosort STORE d",
            "SORT l BY nosort GET # STORE d",
        ],
    )
}

/// A `SORT ... STORE` reaches replicas and the AOF as it was sent, when it stored a list or
/// deleted one (an empty result at an existing key); a `SORT` that stored nothing, and every
/// plain `SORT` and `SORT_RO`, are not sent. (A set sorted with `BY nosort STORE` is sorted
/// anyway, so the replica stores the same list.)
#[test]
fn sort_store_reaches_the_stream_as_redis_sends_it() {
    same_stream_as_redis(
        sort_effects,
        &[
            "RPUSH l 3 1 2",
            "SORT l STORE d",
            "SORT nokey STORE d",
            "SADD s b a c",
            "SORT s BY nosort STORE d",
            "SORT l BY nosort GET # STORE d",
        ],
    );
}

/// HyperLogLog commands on the server at `addr`, and what the stream carried for them up to
/// the closing `SET end 1`.
fn hll_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    table_effects(
        addr,
        &[
            "PFADD h a b c",
            "PFADD h a b c",
            "PFCOUNT h",
            "PFCOUNT h",
            "PFADD h2 x",
            "PFMERGE m h h2",
            "PFCOUNT h h2",
            "PFCOUNT m",
            "PFDEBUG TODENSE h",
            "PFDEBUG TODENSE h",
            "PFDEBUG ENCODING h",
            "PFDEBUG GETREG h2",
            "PFADD h",
            "PFADD new",
        ],
    )
}

/// `PFADD` and `PFMERGE` reach replicas and the AOF when they change the sketch, `PFCOUNT`
/// when it stores a newly computed count in the value, `PFDEBUG` when it turns a sketch dense:
/// the same stream as Redis 7.0's.
#[test]
fn hyperloglog_commands_reach_the_stream_as_redis_sends_them() {
    same_stream_as_redis(
        hll_effects,
        &[
            "PFADD h a b c",
            "PFCOUNT h",
            "PFADD h2 x",
            "PFMERGE m h h2",
            "PFCOUNT m",
            "PFDEBUG TODENSE h",
            "PFDEBUG GETREG h2",
            "PFADD new",
        ],
    );
}

/// Sketches written through the AOF come back byte for byte after a crash: the replayed
/// `PFADD`s, `PFMERGE`s and `PFCOUNT`s rebuild the very strings (sparse and dense, cached
/// counts included).
#[tokio::test]
async fn sketches_come_back_from_the_aof_byte_for_byte() {
    let tmp = tempfile::Builder::new()
        .prefix("latchkey-hll-aof-")
        .tempdir()
        .unwrap();
    let start = || {
        Server::builder()
            .no_listener()
            .config("dir", tmp.path().to_str().unwrap())
            .config("appendonly", "yes")
            .config("appendfsync", "always")
            .start()
    };
    let s = start().await.unwrap();
    let mut c = s.client();
    let many: Vec<String> = (0..5000).map(|i| format!("e{i}")).collect();
    let mut big = vec!["PFADD".to_string(), "big".to_string()];
    big.extend(many);
    c.cmd(big).await;
    c.cmd(["PFADD", "small", "a", "b", "c"]).await;
    c.cmd(["PFCOUNT", "small"]).await;
    c.cmd(["PFMERGE", "both", "small", "big"]).await;
    c.cmd(["PFADD", "small", "d"]).await;
    let keys = ["big", "small", "both"];
    let mut before = Vec::new();
    for k in keys {
        before.push(c.cmd(["GET", k]).await);
    }
    assert!(matches!(&before[0], latchkey_server::Frame::Bulk(b) if b.len() == 12304));
    s.crash().await;
    let s = start().await.unwrap();
    let mut c = s.client();
    for (k, want) in keys.iter().zip(before) {
        assert_eq!(c.cmd(["GET", k]).await, want, "{k}");
    }
}

/// Stream commands on the server at `addr`, and what the stream carried for them up to the
/// closing `SET end 1`.
fn stream_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    let mut stream = Stream::open(addr);
    let mut c = RawConn::connect(addr).expect("connect");
    let mut lines: Vec<String> = [
        "XADD s 1-1 a 1",
        "XADD s 1-* b 2",
        "XADD s 5-* c 3",
        "XADD s MAXLEN ~ 1 6-0 d 4",
        "XADD s 0-1 x y",
        "XTRIM s MAXLEN ~ 0",
        "XTRIM s MAXLEN 3",
        "XDEL s 5-0",
        "XDEL s 99-0",
        "XSETID s 100-0",
        "XADD s NOMKSTREAM MINID ~ 1 LIMIT 5 100-* e f",
        "XADD nokey NOMKSTREAM 1-1 a b",
        "XLEN s",
        "XRANGE s - +",
        "XREAD STREAMS s 0",
        "XINFO STREAM s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for i in 1..=250 {
        lines.push(format!("XADD t {i}-0 f v"));
    }
    lines.push("XTRIM t MAXLEN ~ 120".into());
    lines.push("XADD t MINID ~ 230 LIMIT 100 300-* f v".into());
    lines.push("XTRIM t MINID ~ 240".into());
    lines.push("SET end 1".into());
    for line in &lines {
        let args: Vec<&str> = line.split(' ').collect();
        c.cmd(&args);
    }
    stream.until_end()
}

/// `XADD` reaches replicas with the ID it generated (`ms-*` written out) and an approximate
/// trim as the exact one it turned out to be (`MAXLEN = <length left>`, `MINID = <first ID
/// left>`); a trim that removed nothing, an `XDEL` that found nothing and the reads are not
/// sent: the same stream as Redis 7.0's.
#[test]
fn stream_commands_reach_the_stream_as_redis_sends_them() {
    let redis = RedisProcess::spawn(&[]);
    let latchkey = Server::builder().start_blocking().expect("start latchkey");
    let expected = stream_effects(redis.addr());
    let names: Vec<String> = expected.iter().map(|c| c.join(" ")).collect();
    assert_eq!(
        names[..9],
        [
            "XADD s 1-1 a 1",
            "XADD s 1-2 b 2",
            "XADD s 5-0 c 3",
            "XADD s MAXLEN = 4 6-0 d 4",
            // `~ 0` takes the whole (only) node: all four entries.
            "XTRIM s MAXLEN = 0",
            "XSETID s 100-0",
            // On an empty stream the first ID on record is 0-0; the new entry is then the
            // first left.
            "XADD s NOMKSTREAM MINID = 100-1 LIMIT 5 100-1 e f",
            "XADD t 1-0 f v",
            "XADD t 2-0 f v",
        ],
        "redis-server's own stream"
    );
    assert_eq!(
        names[names.len() - 3..],
        [
            "XADD t 250-0 f v",
            "XTRIM t MAXLEN = 150",
            "XADD t MINID = 201-0 LIMIT 100 300-0 f v",
            // `MINID ~ 240` finds no whole node below 240 (the first runs 201..300):
            // nothing removed, nothing sent.
        ],
        "redis-server's own stream"
    );
    assert_eq!(stream_effects(latchkey.addr()), expected);
}

/// `RESTORE` on the server at `addr`, and what the stream carried for it up to the closing
/// `SET end 1`. The payload (binary) reads as `<payload>`, and a deadline the server computed
/// from a relative TTL (it depends on the moment) as `<deadline>` once checked to be about an
/// hour and a half ahead.
fn restore_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    let mut stream = Stream::open(addr);
    let mut c = RawConn::connect(addr).expect("connect");
    // What redis-server 7.0 answers to `SET foo bar` then `DUMP foo`.
    let payload: &[u8] = b"\x00\x03bar\x0a\x00\xe6\xbe\x49\x60\xee\x66\xfd\x17";
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    for line in [
        "RESTORE a 0 P",
        "RESTORE b 5400000 P",
        "RESTORE c 4102444800000 P ABSTTL",
        "RESTORE a 0 P",
        "RESTORE a 1 P ABSTTL REPLACE",
        "RESTORE d 1 P ABSTTL",
        "RESTORE e 0 garbage",
        "RESTORE b 5400000 P REPLACE IDLETIME 5",
        "SET end 1",
    ] {
        let args: Vec<&[u8]> = line
            .split(' ')
            .map(|a| if a == "P" { payload } else { a.as_bytes() })
            .collect();
        c.cmd(&args);
    }
    let payload_text = String::from_utf8_lossy(payload).into_owned();
    let mut got = Vec::new();
    loop {
        let mut cmd = stream.next();
        if cmd[0] == "SET" && cmd[1] == "end" {
            return got;
        }
        if cmd[0] == "RESTORE" {
            assert_eq!(cmd[3], payload_text, "the payload goes down unchanged");
            cmd[3] = "<payload>".into();
            let deadline: u64 = cmd[2].parse().expect("a TTL");
            if deadline != 0 && deadline != 4102444800000 {
                let ahead = deadline.saturating_sub(now_ms);
                assert!(
                    (5_300_000..=5_400_000 + 600_000).contains(&ahead),
                    "deadline {deadline} is {ahead} ms ahead"
                );
                cmd[2] = "<deadline>".into();
            }
        }
        got.push(cmd);
    }
}

/// `RESTORE` reaches replicas and the AOF as Redis 7.0 sends it: a relative TTL as an
/// absolute deadline with `ABSTTL` appended, a deadline already past as the `DEL` of the key
/// `REPLACE` removed (or nothing), a refused one not at all.
#[test]
fn restore_reaches_the_stream_as_redis_sends_it() {
    same_stream_as_redis(
        restore_effects,
        &[
            "RESTORE a 0 <payload>",
            "RESTORE b <deadline> <payload> ABSTTL",
            "RESTORE c 4102444800000 <payload> ABSTTL",
            "DEL a",
            "RESTORE b <deadline> <payload> REPLACE IDLETIME 5 ABSTTL",
        ],
    );
}

/// `FUNCTION RESTORE` on the server at `addr`, and what the stream carried up to the closing
/// `SET end 1`, payloads shown as `<payload>`.
fn function_restore_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    let mut stream = Stream::open(addr);
    let mut c = RawConn::connect(addr).expect("connect");
    c.cmd(&["FUNCTION", "FLUSH"]);
    c.cmd(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib1\nredis.register_function('f1', function() return 1 end)",
    ]);
    let reply = c.cmd(&["FUNCTION", "DUMP"]);
    let start = reply.iter().position(|b| *b == b'\n').unwrap() + 1;
    let payload = reply[start..reply.len() - 2].to_vec();
    let payload_text = String::from_utf8_lossy(&payload).into_owned();
    for extra in [&[][..], &["FLUSH"], &["APPEND"], &["REPLACE"], &["BAD"]] {
        let mut args: Vec<&[u8]> = vec![b"FUNCTION", b"RESTORE", &payload];
        args.extend(extra.iter().map(|e| e.as_bytes()));
        c.cmd(&args);
    }
    c.cmd(&["SET", "end", "1"]);
    let mut got = Vec::new();
    loop {
        let mut cmd = stream.next();
        if cmd[0] == "SET" && cmd[1] == "end" {
            return got;
        }
        if cmd.len() > 2 && cmd[2] == payload_text {
            cmd[2] = "<payload>".into();
        }
        got.push(cmd);
    }
}

/// `FUNCTION RESTORE` that changed the libraries reaches replicas and the AOF as it was given
/// (a refused one does not), as from Redis 7.0, after the `FUNCTION FLUSH` and `FUNCTION
/// LOAD` that set the test up.
#[test]
fn function_restore_reaches_the_stream_as_redis_sends_it() {
    let redis = RedisProcess::spawn(&[]);
    let latchkey = Server::builder().start_blocking().expect("start latchkey");
    let expected = function_restore_effects(redis.addr());
    let cmd = |s: &str| -> Vec<String> { s.split(' ').map(String::from).collect() };
    let load = vec![
        "FUNCTION".to_string(),
        "LOAD".into(),
        "#!lua name=lib1\nredis.register_function('f1', function() return 1 end)".into(),
    ];
    assert_eq!(
        expected,
        [
            cmd("FUNCTION FLUSH"),
            load,
            cmd("FUNCTION RESTORE <payload> FLUSH"),
            cmd("FUNCTION RESTORE <payload> REPLACE"),
        ],
        "redis-server's own stream"
    );
    assert_eq!(function_restore_effects(latchkey.addr()), expected);
}

/// A function library: `name`, registering `f_<name>`.
fn library(name: &str) -> String {
    format!("#!lua name={name}\nredis.register_function('f_{name}', function() return 1 end)")
}

/// The commands that change the function libraries, on the server at `addr`: those that
/// succeed and those refused, alone, in a transaction, from another database; and what the
/// stream carried up to the closing `SET end 1`, each library's code shown as `<code>`.
fn function_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    let mut stream = Stream::open(addr);
    let mut c = RawConn::connect(addr).expect("connect");
    let lib = library("lib1");
    let clash = "#!lua name=lib2\nredis.register_function('f_lib1', function() return 2 end)";
    let lines: Vec<Vec<&str>> = vec![
        vec!["FUNCTION", "FLUSH"],
        vec!["FUNCTION", "LOAD", &lib],
        // Refused: the library exists; a function of another library has the name; not Lua.
        vec!["FUNCTION", "LOAD", &lib],
        vec!["FUNCTION", "LOAD", clash],
        vec!["FUNCTION", "LOAD", "#!lua name=bad\nthis is not lua"],
        vec!["FUNCTION", "LOAD", "REPLACE", &lib],
        // `REPLACE` as often as given, in any case, and sent on as given.
        vec!["function", "load", "replace", "Replace", &lib],
        vec!["FUNCTION", "LOAD", "REPLACE", "bogus", &lib],
        vec!["FUNCTION", "DELETE", "nope"],
        vec!["FUNCTION", "DELETE", "lib1"],
        vec!["FUNCTION", "FLUSH", "async"],
        vec!["FUNCTION", "FLUSH", "SYNC"],
        vec!["FUNCTION", "FLUSH", "bad"],
        vec!["FUNCTION", "FLUSH", "sync", "extra"],
        // Reads reach nothing.
        vec!["FUNCTION", "LIST"],
        vec!["FUNCTION", "DUMP"],
        vec!["FUNCTION", "STATS"],
        // In a transaction: with another write, wrapped in MULTI ... EXEC; alone, not.
        vec!["MULTI"],
        vec!["FUNCTION", "LOAD", &lib],
        vec!["SET", "x", "1"],
        vec!["EXEC"],
        vec!["MULTI"],
        vec!["FUNCTION", "DELETE", "lib1"],
        vec!["EXEC"],
        vec!["SELECT", "3"],
        vec!["FUNCTION", "LOAD", &lib],
        vec!["SELECT", "0"],
        vec!["SET", "end", "1"],
    ];
    let mut replies = Vec::new();
    for args in &lines {
        replies.push(String::from_utf8_lossy(&c.cmd(args)).into_owned());
    }
    let mut got = stream.until_end();
    for cmd in &mut got {
        if let Some(code) = cmd.last_mut().filter(|a| a.starts_with("#!lua")) {
            *code = "<code>".into();
        }
    }
    // The replies too, so that a difference in what was refused shows here first.
    got.push(replies);
    got
}

/// `FUNCTION LOAD`, `DELETE` and `FLUSH` that changed the libraries (and a `FLUSH` always
/// does) reach replicas and the AOF as they were given, as from Redis 7.0; refused ones and
/// reads do not.
#[test]
fn function_changes_reach_the_stream_as_redis_sends_them() {
    let redis = RedisProcess::spawn(&[]);
    let latchkey = Server::builder().start_blocking().expect("start latchkey");
    let mut expected = function_effects(redis.addr());
    let mut got = function_effects(latchkey.addr());
    let (redis_replies, replies) = (expected.pop().unwrap(), got.pop().unwrap());
    // The replies (`FUNCTION STATS` and `FUNCTION DUMP` aside: what they show of the engine
    // and the payload's bytes are compared elsewhere).
    for (i, (r, l)) in redis_replies.iter().zip(&replies).enumerate() {
        if i == 15 || i == 16 {
            continue;
        }
        assert_eq!(l, r, "reply #{i}");
    }
    let lines: Vec<String> = expected.iter().map(|c| c.join(" ")).collect();
    assert_eq!(
        lines,
        [
            "FUNCTION FLUSH",
            "FUNCTION LOAD <code>",
            "FUNCTION LOAD REPLACE <code>",
            "FUNCTION load replace Replace <code>",
            "FUNCTION DELETE lib1",
            "FUNCTION FLUSH async",
            "FUNCTION FLUSH SYNC",
            "MULTI",
            "FUNCTION LOAD <code>",
            "SET x 1",
            "EXEC",
            "FUNCTION DELETE lib1",
            "FUNCTION LOAD <code>",
        ],
        "redis-server's own stream"
    );
    assert_eq!(got, expected);
}

/// Geo commands on the server at `addr`, and what the stream carried for them.
fn geo_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    table_effects(
        addr,
        &[
            "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
            "GEOADD g NX CH 13.361389 38.115556 Palermo 12.1 37.9 Marsala",
            "GEOADD g XX 14 37 Nowhere",
            "GEORADIUS g 15 37 200 km STORE d",
            "GEORADIUS g 15 37 200 km STOREDIST d2",
            "GEOSEARCHSTORE d3 g FROMMEMBER Palermo BYRADIUS 100 km",
            "GEOSEARCHSTORE d3 g FROMLONLAT 0 0 BYRADIUS 1 km",
            "GEORADIUS_RO g 15 37 200 km",
        ],
    )
}

/// `GEOADD` reaches replicas and the AOF as the `ZADD` of the encoded scores, with its
/// options; the storing searches as themselves: the same stream as Redis 7.0's.
#[test]
fn geo_commands_reach_the_stream_as_redis_sends_them() {
    same_stream_as_redis(
        geo_effects,
        &[
            "ZADD g 3479099956230698 Palermo 3479447370796909 Catania",
            "ZADD g NX CH 3479099956230698 Palermo 3478958618045023 Marsala",
            "GEORADIUS g 15 37 200 km STORE d",
            "GEORADIUS g 15 37 200 km STOREDIST d2",
            "GEOSEARCHSTORE d3 g FROMMEMBER Palermo BYRADIUS 100 km",
            "GEOSEARCHSTORE d3 g FROMLONLAT 0 0 BYRADIUS 1 km",
        ],
    );
}

/// Consumer-group commands on the server at `addr`, and what the stream carried for them,
/// with the delivery times of the `XCLAIM`s (each server's clock) read as `<time>`.
fn group_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    let mut got = table_effects(
        addr,
        &[
            "XGROUP CREATE s g $ MKSTREAM",
            "XADD s 1-1 a 1",
            "XADD s 2-1 b 2",
            "XADD s 3-1 c 3",
            "XREADGROUP GROUP g c1 COUNT 1 STREAMS s >",
            "XREADGROUP GROUP g c2 NOACK COUNT 1 STREAMS s >",
            "XREADGROUP GROUP g c1 STREAMS s 0",
            "XREADGROUP GROUP g c3 STREAMS s 0",
            "XREADGROUP GROUP g c1 STREAMS s >",
            "XREADGROUP GROUP g c1 STREAMS s >",
            "XACK s g 1-1 9-9",
            "XACK s g 1-1",
            "XCLAIM s g c4 0 1-1 3-1",
            "XCLAIM s g c4 0 3-1 JUSTID",
            "XGROUP SETID s g 0",
            "XAUTOCLAIM s g c5 0 0",
            "XGROUP DELCONSUMER s g c5",
            "XGROUP DELCONSUMER s g nosuch",
            "XGROUP CREATECONSUMER s g c6",
            "XGROUP CREATECONSUMER s g c6",
            "XGROUP DESTROY s g",
            "XGROUP DESTROY s g",
            "XGROUP CREATE s g2 $ ENTRIESREAD 3",
            "XGROUP SETID s g2 1-1 ENTRIESREAD 1",
            "XGROUP SETID s g2 $",
            "XCLAIM s g2 c9 0 3-1 FORCE",
            "XCLAIM s g2 c9 0 3-1 LASTID 5-5",
            "XCLAIM s g2 c9 0 9-9 LASTID 6-6",
            "XREADGROUP GROUP g2 c9 NOACK STREAMS s >",
            "XSETID s 10-0",
            "XADD s 11-0 d 4",
            "XADD s 12-0 e 5",
            "XREADGROUP GROUP g2 c9 STREAMS s >",
            "XDEL s 3-1",
            "XAUTOCLAIM s g2 c10 0 0",
        ],
    );
    for cmd in &mut got {
        if let Some(i) = cmd.iter().position(|a| a == "TIME") {
            cmd[i + 1] = "<time>".into();
        }
    }
    got
}

/// Consumer groups reach replicas as Redis 7.0 sends them: `XGROUP` and `XACK` as they were
/// sent when they changed something; each delivery of `XREADGROUP` and each claim as the
/// `XCLAIM ... TIME t RETRYCOUNT n FORCE JUSTID LASTID id` that recreates the pending entry
/// (several between `MULTI` and `EXEC`), a `NOACK` read as `XGROUP SETID ... ENTRIESREAD n`
/// (with the `XGROUP CREATECONSUMER` of the consumer it made), history reads as nothing.
#[test]
fn consumer_groups_reach_the_stream_as_redis_sends_them() {
    let claim = |c: &str, id: &str, n: u32, last: &str| {
        format!("XCLAIM s {c} 0 {id} TIME <time> RETRYCOUNT {n} FORCE JUSTID LASTID {last}")
    };
    let expected: Vec<String> = vec![
        "XGROUP CREATE s g $ MKSTREAM".into(),
        "XADD s 1-1 a 1".into(),
        "XADD s 2-1 b 2".into(),
        "XADD s 3-1 c 3".into(),
        claim("g c1", "1-1", 1, "1-1"),
        "MULTI".into(),
        "XGROUP CREATECONSUMER s g c2".into(),
        "XGROUP SETID s g 2-1 ENTRIESREAD 2".into(),
        "EXEC".into(),
        claim("g c1", "3-1", 1, "3-1"),
        "XACK s g 1-1 9-9".into(),
        claim("g c4", "3-1", 2, "3-1"),
        claim("g c4", "3-1", 2, "3-1"),
        "XGROUP SETID s g 0".into(),
        claim("g c5", "3-1", 3, "0-0"),
        "XGROUP DELCONSUMER s g c5".into(),
        "XGROUP CREATECONSUMER s g c6".into(),
        "XGROUP DESTROY s g".into(),
        "XGROUP CREATE s g2 $ ENTRIESREAD 3".into(),
        "XGROUP SETID s g2 1-1 ENTRIESREAD 1".into(),
        "XGROUP SETID s g2 $".into(),
        claim("g2 c9", "3-1", 2, "3-1"),
        claim("g2 c9", "3-1", 3, "5-5"),
        "XGROUP SETID s g2 6-6 ENTRIESREAD -1".into(),
        "XSETID s 10-0".into(),
        "XADD s 11-0 d 4".into(),
        "XADD s 12-0 e 5".into(),
        "MULTI".into(),
        claim("g2 c9", "11-0", 1, "11-0"),
        claim("g2 c9", "12-0", 1, "12-0"),
        "EXEC".into(),
        "XDEL s 3-1".into(),
        "MULTI".into(),
        claim("g2 c9", "3-1", 3, "12-0"),
        claim("g2 c10", "11-0", 2, "12-0"),
        claim("g2 c10", "12-0", 2, "12-0"),
        "EXEC".into(),
    ];
    let expected: Vec<&str> = expected.iter().map(|s| s.as_str()).collect();
    same_stream_as_redis(group_effects, &expected);
}

/// `MIGRATE`s to a fresh redis-server target, and what the stream carried for them.
fn migrate_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    let target = RedisProcess::spawn(&[]);
    let port = target.addr().port().to_string();
    let mut stream = Stream::open(addr);
    let mut c = RawConn::connect(addr).expect("connect");
    for args in [
        &["MSET", "a", "1", "b", "2", "c", "3", "d", "4"][..],
        &["MIGRATE", "127.0.0.1", &port, "a", "0", "5000"],
        &["MIGRATE", "127.0.0.1", &port, "b", "0", "5000", "COPY"],
        &[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "0",
            "5000",
            "KEYS",
            "b",
            "c",
            "d",
            "e",
        ],
        &["SET", "end", "1"],
    ] {
        c.cmd(args);
    }
    stream.until_end()
}

/// `MIGRATE` reaches replicas and the AOF as the `DEL` of the keys the target took (the one
/// the target refused, `b` already there after the `COPY`, stays), never as itself; a `COPY`
/// sends nothing.
#[test]
fn migrate_reaches_the_stream_as_the_del_of_the_moved_keys() {
    same_stream_as_redis(
        migrate_effects,
        &["MSET a 1 b 2 c 3 d 4", "DEL a", "DEL c d"],
    );
}

/// The deletions of expired keys on the server at `addr`, under each `lazyfree-lazy-expire`:
/// a time in the past given to `PEXPIREAT` and to `GETEX`, and a key that a read finds
/// expired. A deadline in the stream (`PEXPIREAT b <ms>`) is replaced by `<ms>`.
fn expiry_effects(addr: SocketAddr) -> Vec<Vec<String>> {
    let mut stream = Stream::open(addr);
    let mut c = RawConn::connect(addr).expect("connect");
    for lazy in ["no", "yes"] {
        c.cmd(&["CONFIG", "SET", "lazyfree-lazy-expire", lazy]);
        c.cmd(&["SET", "a", "1"]);
        c.cmd(&["PEXPIREAT", "a", "1"]);
        c.cmd(&["SET", "g", "1"]);
        c.cmd(&["GETEX", "g", "PXAT", "1"]);
        c.cmd(&["SET", "b", "1"]);
        c.cmd(&["PEXPIRE", "b", "1"]);
        // Past its deadline: the read below (or the expiry cycle, first) deletes it.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(c.cmd(&["GET", "b"]), b"$-1\r\n");
    }
    c.cmd(&["SET", "end", "1"]);
    stream
        .until_end()
        .into_iter()
        .map(|cmd| {
            if cmd[0] == "PEXPIREAT" {
                vec![cmd[0].clone(), cmd[1].clone(), "<ms>".into()]
            } else {
                cmd
            }
        })
        .collect()
}

/// An expired key's deletion reaches replicas and the AOF as `DEL` with
/// `lazyfree-lazy-expire no` and as `UNLINK` with `yes`, as Redis 7.0 sends it
/// (`propagateDeletion`, and `EXPIRE`/`GETEX` given a time in the past).
#[test]
fn expired_keys_reach_the_stream_as_del_or_unlink_as_redis_sends_them() {
    same_stream_as_redis(
        expiry_effects,
        &[
            "SET a 1",
            "DEL a",
            "SET g 1",
            "DEL g",
            "SET b 1",
            "PEXPIREAT b <ms>",
            "DEL b",
            "SET a 1",
            "UNLINK a",
            "SET g 1",
            "UNLINK g",
            "SET b 1",
            "PEXPIREAT b <ms>",
            "UNLINK b",
        ],
    );
}
