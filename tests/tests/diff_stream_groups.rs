//! Differential tests of stream consumer groups (`XGROUP`, `XREADGROUP`, `XACK`, `XPENDING`,
//! `XCLAIM`, `XAUTOCLAIM`, `XINFO GROUPS|CONSUMERS|STREAM FULL`) against a real redis-server:
//! every reply byte for byte, in RESP2 and RESP3, errors included.
//!
//! Idle times and delivery times depend on the moment each server ran the command, so the
//! tables keep to replies without them; the replies that carry them are compared with
//! [`check_times`], which lets only those numbers differ, and only a little.

use latchkey_tests::raw::show;
use latchkey_tests::Diff;

/// The commands one by one, their options and their errors, on replies without times.
const BASICS: &[&str] = &[
    "XGROUP HELP",
    "XGROUP help extra",
    "XGROUP FOO",
    "XGROUP",
    "XGROUP CREATE s",
    "XGROUP CREATE s g $",
    "XGROUP CREATE s g $ MKSTREAM",
    "XGROUP CREATE s g $ MKSTREAM",
    "XINFO GROUPS s",
    "XADD s 1-1 a 1",
    "XADD s 2-1 b 2",
    "XADD s 3-1 c 3",
    "XINFO GROUPS s",
    "XGROUP CREATE s g2 0 ENTRIESREAD 1",
    "XGROUP CREATE s g3 0 ENTRIESREAD -2",
    "XGROUP CREATE s g3 0 ENTRIESREAD -1",
    "XGROUP CREATE s g4 0 ENTRIESREAD 99",
    "XGROUP CREATE s g5 0 ENTRIESREAD x",
    "XGROUP CREATE s g5 0 FOO",
    "XGROUP CREATE s g5 0 MKSTREAM MKSTREAM",
    "XGROUP CREATE s g6 +",
    "XGROUP CREATE s g6 -",
    "XGROUP CREATE s g6 bad",
    "XGROUP CREATE s g6 $ ENTRIESREAD",
    "XGROUP CREATE s g7 $",
    "XINFO GROUPS s",
    "XINFO STREAM s",
    "XREADGROUP GROUP g c1 COUNT 1 STREAMS s >",
    "XREADGROUP GROUP g c2 NOACK COUNT 1 STREAMS s >",
    "XREADGROUP GROUP g c1 STREAMS s >",
    "XREADGROUP GROUP g c1 STREAMS s >",
    "XREADGROUP GROUP g c3 STREAMS s 0",
    "XREADGROUP GROUP g nobody STREAMS s 0",
    "XINFO GROUPS s",
    "XPENDING s g",
    "XREADGROUP GROUP g2 c1 STREAMS s >",
    "XINFO GROUPS s",
    "XREADGROUP GROUP g c STREAMS s $",
    "XREADGROUP GROUP g c STREAMS s bad",
    "XREADGROUP GROUP g c STREAMS s 0 s >",
    "XREADGROUP GROUP g STREAMS s >",
    "XREADGROUP STREAMS s >",
    "XREADGROUP GROUP g c COUNT 1 BLOCK 10 NOACK STREAMS s > extra",
    "XREADGROUP GROUP g c COUNT x STREAMS s >",
    "XREADGROUP GROUP g c BLOCK -1 STREAMS s >",
    "XREADGROUP GROUP g c FOO STREAMS s >",
    "XREADGROUP COUNT 1 STREAMS s > s >",
    "XREADGROUP GROUP nog c STREAMS s >",
    "XREADGROUP GROUP g c STREAMS nokey >",
    "XREADGROUP GROUP g c STREAMS s nokey > >",
    "XREADGROUP GROUP g c BLOCK 10 STREAMS s >",
    "XACK s g",
    "XACK s g bad",
    "XACK s nog 1-1",
    "XACK nokey g 1-1",
    "XACK nokey g bad",
    "XACK s g 1-1 bad",
    "XACK s g 1-1 9-9",
    "XACK s g 1-1",
    "XPENDING s g",
    "XPENDING s",
    "XPENDING s nog",
    "XPENDING nokey g",
    "XPENDING s g - +",
    "XPENDING s g - + x",
    "XPENDING s g - + -1",
    "XPENDING s g - + 0",
    "XPENDING s g IDLE 100000 - + 5",
    "XPENDING s g IDLE x - + 5",
    "XPENDING s g IDLE 10",
    "XPENDING s g bad + 5",
    "XPENDING s g (18446744073709551615-18446744073709551615 + 5",
    "XPENDING s g - (0-0 5",
    "XPENDING s g - + 5 nobody",
    "XPENDING s g 1 2 3 4 5 6 7",
    "XCLAIM s g c x 1-1",
    "XCLAIM s g c 0 bad",
    "XCLAIM s nog c 0 1-1",
    "XCLAIM nokey g c 0 1-1",
    "XCLAIM nokey g c 0 1-1 FOO",
    "XCLAIM s g c 0 1-1 IDLE x",
    "XCLAIM s g c 0 1-1 TIME x",
    "XCLAIM s g c 0 1-1 RETRYCOUNT x",
    "XCLAIM s g c 0 1-1 LASTID x",
    "XCLAIM s g c 0 1-1 FOO",
    "XCLAIM s g c 0 1-1 IDLE",
    "XCLAIM s g c 0 1-1 2-2 bad",
    "XCLAIM s g c4 0 1-1 3-1",
    "XCLAIM s g c4 0 3-1 JUSTID",
    "XCLAIM s g c4 3600000 3-1 JUSTID",
    "XCLAIM s g c5 0 2-1 JUSTID",
    "XCLAIM s g c5 0 2-1 FORCE JUSTID RETRYCOUNT 7",
    "XCLAIM s g c5 0 9-9 FORCE JUSTID",
    "XCLAIM s g c5 0 3-1 LASTID 10-0 JUSTID",
    "XINFO GROUPS s",
    "XGROUP SETID s g 0",
    "XAUTOCLAIM s g c 0 0 COUNT 0",
    "XAUTOCLAIM s g c 0 0 COUNT -1",
    "XAUTOCLAIM s g c x 0",
    "XAUTOCLAIM s g c 0 bad",
    "XAUTOCLAIM s g c 0 0 FOO",
    "XAUTOCLAIM s nog c 0 0",
    "XAUTOCLAIM nokey g c 0 0",
    "XAUTOCLAIM nokey g c 0 0 FOO",
    "XAUTOCLAIM s g c6 0 0 COUNT 1",
    "XAUTOCLAIM s g c6 0 (2-1 JUSTID",
    "XAUTOCLAIM s g c6 0 0 COUNT 100000000",
    "XAUTOCLAIM s g c6 3600000 0",
    "XAUTOCLAIM s g c6 0 (18446744073709551615-18446744073709551615",
    "XGROUP SETID s g 0 FOO 1",
    "XGROUP SETID s g 0 ENTRIESREAD -3",
    "XGROUP SETID s g 0 ENTRIESREAD",
    "XGROUP SETID s g",
    "XGROUP SETID s nog 0",
    "XGROUP SETID s g +",
    "XINFO GROUPS s",
    "XGROUP SETID s g -",
    "XINFO GROUPS s",
    "XGROUP SETID s g 2-1 ENTRIESREAD 5",
    "XINFO GROUPS s",
    "XGROUP SETID s g $",
    "XINFO GROUPS s",
    "XGROUP DESTROY s",
    "XGROUP DESTROY nokey g",
    "XGROUP SETID nokey g 0",
    "XGROUP CREATECONSUMER nokey g c",
    "XGROUP CREATECONSUMER s nog c",
    "XGROUP DELCONSUMER s nog c",
    "XGROUP CREATECONSUMER s g c9",
    "XGROUP CREATECONSUMER s g c9",
    "XGROUP DELCONSUMER s g c6",
    "XGROUP DELCONSUMER s g nobody",
    "XGROUP DELCONSUMER s g c9",
    "XGROUP DESTROY s g2",
    "XGROUP DESTROY s g2",
    "XINFO CONSUMERS s nog",
    "XINFO CONSUMERS nokey g",
    "XGROUP CREATE nokey g 0 ENTRIESREAD 5 MKSTREAM",
    "XINFO GROUPS nokey",
    "XINFO STREAM nokey",
    "XINFO STREAM nokey FULL",
    "SET str x",
    "XREADGROUP GROUP g c STREAMS str >",
    "XGROUP CREATE str g 0",
    "XGROUP DESTROY str g",
    "XACK str g 1-1",
    "XPENDING str g",
    "XCLAIM str g c 0 1-1",
    "XAUTOCLAIM str g c 0 0",
    "XINFO GROUPS str",
    "XINFO CONSUMERS str g",
    "MULTI",
    "XREADGROUP GROUP g c BLOCK 0 STREAMS s >",
    "EXEC",
    "DEL s nokey str",
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

/// Deleted entries: a history read names them with a null, `XCLAIM` and `XAUTOCLAIM` drop
/// them from the pending list, and the lag of a group behind a deletion is unknown until it
/// reads past it, as Redis counts it.
const DELETIONS: &[&str] = &[
    "XADD d 1-0 a 1",
    "XADD d 2-0 b 2",
    "XADD d 3-0 c 3",
    "XADD d 4-0 d 4",
    "XADD d 5-0 e 5",
    "XGROUP CREATE d g 0",
    "XGROUP CREATE d h 0",
    "XGROUP CREATE d k $",
    "XREADGROUP GROUP g a COUNT 3 STREAMS d >",
    "XINFO GROUPS d",
    "XDEL d 2-0",
    "XINFO GROUPS d",
    "XREADGROUP GROUP g a STREAMS d 0",
    "XREADGROUP GROUP h b COUNT 1 STREAMS d >",
    "XINFO GROUPS d",
    "XREADGROUP GROUP h b STREAMS d >",
    "XINFO GROUPS d",
    "XDEL d 3-0",
    "XCLAIM d g z 0 1-0 2-0 3-0 JUSTID",
    "XPENDING d g",
    "XDEL d 4-0",
    "XAUTOCLAIM d h y 0 0 COUNT 2",
    "XAUTOCLAIM d h y 0 0",
    "XPENDING d h",
    "XTRIM d MAXLEN 0",
    "XINFO GROUPS d",
    "XADD d 6-0 f 6",
    "XINFO GROUPS d",
    "XREADGROUP GROUP g a STREAMS d >",
    "XINFO GROUPS d",
    "XGROUP CREATE e g $ MKSTREAM",
    "XINFO GROUPS e",
    "XADD e 1-0 a 1",
    "XDEL e 1-0",
    "XINFO GROUPS e",
    "XREADGROUP GROUP g a STREAMS e >",
    "XINFO STREAM e",
    "XSETID e 5-0 ENTRIESADDED 3 MAXDELETEDID 2-0",
    "XINFO GROUPS e",
    "XGROUP SETID e g 0 ENTRIESREAD 0",
    "XINFO GROUPS e",
];

#[test]
fn deletions_resp2() {
    Diff::new().table(DELETIONS);
}

#[test]
fn deletions_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.table(DELETIONS);
}

/// Sends `args` to both servers and compares the replies line by line: a line may differ
/// only where both are integers at most `tolerance` apart (the replies checked with it hold
/// times there — idle, delivery and seen times — beside counts too small to be confused
/// with them).
#[track_caller]
fn check_times(d: &mut Diff, args: &[&str], tolerance: i64) {
    let (r, l) = d.both(args);
    let same = latchkey_tests::diff::same_but_near_integers(&r, &l, tolerance, |_| true);
    assert!(
        same,
        "reply differs for {args:?} beyond times\n  redis:    {}\n  latchkey: {}",
        show(&r),
        show(&l)
    );
}

/// The replies that carry times: `XPENDING`'s idle times, `XINFO CONSUMERS`' idle times, and
/// the delivery and seen times of `XINFO STREAM FULL`, within a second of each other (the
/// counts around them are small numbers, which the tolerance cannot confuse with a time in
/// milliseconds since 1970; idle times are compared after a pause that dwarfs the gap).
#[test]
fn times() {
    for resp3 in [false, true] {
        let mut d = Diff::new();
        if resp3 {
            d.both(&["HELLO", "3"]);
        }
        d.table(&[
            "XADD s 1-0 a 1",
            "XADD s 2-0 b 2",
            "XADD s 3-0 c 3",
            "XGROUP CREATE s g 0",
            "XREADGROUP GROUP g alice COUNT 2 STREAMS s >",
            "XREADGROUP GROUP g bob STREAMS s >",
            "XGROUP CREATECONSUMER s g carol",
        ]);
        check_times(&mut d, &["XPENDING", "s", "g", "-", "+", "10"], 1000);
        check_times(
            &mut d,
            &["XPENDING", "s", "g", "-", "+", "10", "alice"],
            1000,
        );
        check_times(&mut d, &["XINFO", "CONSUMERS", "s", "g"], 1000);
        check_times(&mut d, &["XINFO", "STREAM", "s", "FULL"], 1000);
        check_times(
            &mut d,
            &["XINFO", "STREAM", "s", "FULL", "COUNT", "1"],
            1000,
        );
        std::thread::sleep(std::time::Duration::from_millis(1200));
        check_times(
            &mut d,
            &["XPENDING", "s", "g", "IDLE", "1000", "-", "+", "10"],
            1000,
        );
        check_times(
            &mut d,
            &["XPENDING", "s", "g", "IDLE", "1000", "-", "+", "10", "bob"],
            1000,
        );
        d.table(&[
            "XPENDING s g IDLE 100000 - + 10",
            "XCLAIM s g carol 1000 1-0 JUSTID",
            "XCLAIM s g carol 1000 1-0 JUSTID",
            "XAUTOCLAIM s g dave 1000 0 JUSTID",
            "XAUTOCLAIM s g dave 1000 0 JUSTID",
        ]);
        check_times(
            &mut d,
            &["XCLAIM", "s", "g", "erin", "0", "2-0", "IDLE", "5000"],
            1000,
        );
        check_times(&mut d, &["XPENDING", "s", "g", "-", "+", "10"], 1000);
        check_times(
            &mut d,
            &[
                "XCLAIM", "s", "g", "erin", "0", "3-0", "TIME", "1000", "JUSTID",
            ],
            1000,
        );
        check_times(&mut d, &["XINFO", "STREAM", "s", "FULL"], 1000);
    }
}

/// Builds a stream with two groups, consumers and pending entries (one of them deleted since)
/// on the connection `c`.
fn fill(c: &mut latchkey_tests::RawConn) {
    for line in [
        "XADD g 1-0 a 1",
        "XADD g 2-0 b 2",
        "XADD g 3-0 c 3",
        "XADD g 4-0 d 4",
        "XGROUP CREATE g one 0",
        "XGROUP CREATE g two $ ENTRIESREAD 3",
        "XREADGROUP GROUP one alice COUNT 2 STREAMS g >",
        "XREADGROUP GROUP one bob STREAMS g >",
        "XGROUP CREATECONSUMER g one carol",
        "XGROUP CREATECONSUMER g two ''",
        "XDEL g 2-0",
    ] {
        let args = latchkey_tests::diff::split_args(line);
        c.cmd(&args);
    }
}

/// A stream with consumer groups moves between latchkey and redis-server both ways by
/// `DUMP`/`RESTORE` (the payload in Redis 7.0's `STREAM_LISTPACKS_2` form): groups, pending
/// entries with their delivery times and counts, consumers with their seen times, all as
/// they were, byte for byte.
#[test]
fn groups_move_both_ways_with_dump_and_restore() {
    use latchkey_tests::raw::bulk_payload;
    let mut d = Diff::new();
    fill(&mut d.redis);
    let from_redis = bulk_payload(&d.redis.cmd(&["DUMP", "g"]));
    let reply = d.latchkey.cmd(&[&b"RESTORE"[..], b"g", b"0", &from_redis]);
    assert_eq!(reply, b"+OK\r\n", "{}", show(&reply));
    d.check(&["XINFO", "STREAM", "g", "FULL"]);
    d.check(&["XINFO", "GROUPS", "g"]);
    d.check(&["XPENDING", "g", "one"]);
    // And back: latchkey's payload restores on redis-server to the same thing.
    let from_latchkey = bulk_payload(&d.latchkey.cmd(&["DUMP", "g"]));
    d.check(&["DEL", "g"]);
    let reply = d.redis.cmd(&[&b"RESTORE"[..], b"g", b"0", &from_latchkey]);
    assert_eq!(reply, b"+OK\r\n", "{}", show(&reply));
    let reply = d
        .latchkey
        .cmd(&[&b"RESTORE"[..], b"g", b"0", &from_latchkey]);
    assert_eq!(reply, b"+OK\r\n", "{}", show(&reply));
    d.check(&["XINFO", "STREAM", "g", "FULL"]);
    d.check(&["XREADGROUP", "GROUP", "one", "alice", "STREAMS", "g", "0"]);
    // COPY takes the groups along.
    d.check(&["COPY", "g", "h"]);
    d.check(&["XINFO", "STREAM", "h", "FULL"]);
    d.check(&["OBJECT", "ENCODING", "h"]);
}

/// A hostile payload: every length of the groups' part cut short or blown up is refused,
/// never a panic, and the server still answers.
#[test]
fn damaged_group_payloads_are_refused() {
    use latchkey_tests::raw::bulk_payload;
    let mut d = Diff::new();
    fill(&mut d.latchkey);
    let good = bulk_payload(&d.latchkey.cmd(&["DUMP", "g"]));
    let body = good.len() - 10; // the version and the checksum follow the value
    for cut in (1..body).step_by(3) {
        let mut p = good[..cut].to_vec();
        p.extend_from_slice(&good[body..]);
        let reply = d
            .latchkey
            .cmd(&[&b"RESTORE"[..], b"x", b"0", &p, b"REPLACE"]);
        assert!(reply.starts_with(b"-"), "cut at {cut}: {}", show(&reply));
    }
    for at in body.saturating_sub(120)..body {
        for byte in [0x00, 0x7f, 0xff, 0x81] {
            let mut p = good.clone();
            p[at] = byte;
            // The checksum would refuse it first: zero means "not computed", as Redis takes it.
            let n = p.len();
            p[n - 8..].fill(0);
            d.latchkey
                .cmd(&[&b"RESTORE"[..], b"x", b"0", &p, b"REPLACE"]);
        }
    }
    assert_eq!(d.latchkey.cmd(&["PING"]), b"+PONG\r\n");
}

/// A client blocked in `XREADGROUP` hears when its stream goes away: deleted, overwritten with
/// another type, flushed or swapped out, it answers `UNBLOCKED ...` at once, on both servers
/// (Redis's `signalDeletedKeyAsReady`). The test waits until each server counts the client
/// as blocked before it removes the stream.
#[test]
fn a_blocked_group_reader_hears_its_stream_go() {
    for removal in [
        "DEL s",
        "SET s notastream",
        "FLUSHDB",
        "FLUSHALL ASYNC",
        "SWAPDB 0 1",
    ] {
        let mut d = Diff::new();
        d.table(&["FLUSHALL", "XGROUP CREATE s g $ MKSTREAM"]);
        let addrs = [d.redis_proc.addr(), d.latchkey_server.addr()];
        let mut readers: Vec<latchkey_tests::RawConn> = addrs
            .iter()
            .map(|a| latchkey_tests::RawConn::connect(*a).unwrap())
            .collect();
        for r in &mut readers {
            r.send_raw(&latchkey_tests::RawConn::encode(&[
                "XREADGROUP",
                "GROUP",
                "g",
                "alice",
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">",
            ]));
        }
        for a in addrs {
            latchkey_tests::raw::wait_blocked_clients(a, 1);
        }
        d.check(&latchkey_tests::diff::split_args(removal));
        let replies: Vec<Vec<u8>> = readers.iter_mut().map(|r| r.read_reply()).collect();
        assert_eq!(show(&replies[1]), show(&replies[0]), "after {removal}");
        assert_eq!(
            replies[0], b"-UNBLOCKED the stream key no longer exists\r\n",
            "redis-server after {removal}"
        );
    }
}

/// What the blocked readers of `readers` (consumer, group) got on the server at `addr` as
/// entries arrive one at a time, each reader blocking after the one before it was counted
/// as blocked: the replies in the order they were read.
fn served_in_turn(addr: std::net::SocketAddr, readers: &[(&str, &str)]) -> Vec<Vec<u8>> {
    use latchkey_tests::raw::wait_blocked_clients;
    use latchkey_tests::RawConn;
    let mut c = RawConn::connect(addr).unwrap();
    c.cmd(&["FLUSHALL"]);
    c.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    c.cmd(&["XGROUP", "CREATE", "s", "h", "$"]);
    let mut conns: Vec<RawConn> = Vec::new();
    for (i, (consumer, group)) in readers.iter().enumerate() {
        let mut r = RawConn::connect(addr).unwrap();
        r.send_raw(&RawConn::encode(&[
            "XREADGROUP",
            "GROUP",
            group,
            consumer,
            "COUNT",
            "1",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ]));
        conns.push(r);
        wait_blocked_clients(addr, i + 1);
    }
    let mut got = Vec::new();
    // 1-1: the first blocked reader of each group (c0 of g, c2 of h); c1 and c3 stay.
    c.cmd(&["XADD", "s", "1-1", "n", "1"]);
    got.push(conns[0].read_reply());
    got.push(conns[2].read_reply());
    wait_blocked_clients(addr, 2);
    // 2-1: g's next, c1; then 3-1: c3.
    c.cmd(&["XADD", "s", "2-1", "n", "2"]);
    got.push(conns[1].read_reply());
    wait_blocked_clients(addr, 1);
    c.cmd(&["XADD", "s", "3-1", "n", "3"]);
    got.push(conns[3].read_reply());
    wait_blocked_clients(addr, 0);
    got.push(c.cmd(&["XINFO", "CONSUMERS", "s", "g"]));
    got
}

/// A group's blocked `XREADGROUP` readers are served one at a time, in the order they
/// blocked: an entry goes to the first, the others stay blocked for the next entries. Each
/// group has its own line (the first reader of `h` gets the same entry as `g`'s first).
/// latchkey used to wake every reader at once and let whichever ran first take the entry.
#[test]
fn a_group_s_blocked_readers_are_served_in_the_order_they_blocked() {
    let d = Diff::new();
    let readers = [("c0", "g"), ("c1", "g"), ("c2", "h"), ("c3", "g")];
    let theirs = served_in_turn(d.redis_proc.addr(), &readers);
    let ours = served_in_turn(d.latchkey_server.addr(), &readers);
    assert!(
        show(&theirs[0]).contains("1-1") && show(&theirs[2]).contains("2-1"),
        "redis-server: {:?}",
        theirs.iter().map(|r| show(r)).collect::<Vec<_>>()
    );
    for (i, (r, l)) in theirs.iter().zip(&ours).enumerate() {
        // XINFO CONSUMERS carries idle times: compared without them.
        if i == theirs.len() - 1 {
            assert_eq!(
                consumer_names(r),
                [
                    "name=c0",
                    "pending=:1",
                    "name=c1",
                    "pending=:1",
                    "name=c3",
                    "pending=:1"
                ],
                "redis-server"
            );
            assert_eq!(consumer_names(l), consumer_names(r));
        } else {
            assert_eq!(show(l), show(r), "reply {i}");
        }
    }
}

/// The consumer names and pending counts of an `XINFO CONSUMERS` reply, in order.
fn consumer_names(reply: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(reply);
    let lines: Vec<&str> = text.split("\r\n").collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        // `name` is followed by its bulk (a length line, then the text), `pending` by an
        // integer line.
        match *l {
            "name" => out.push(format!("name={}", lines.get(i + 2).unwrap_or(&""))),
            "pending" => out.push(format!("pending={}", lines.get(i + 1).unwrap_or(&""))),
            _ => {}
        }
    }
    out
}
