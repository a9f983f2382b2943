//! Differential tests of pub/sub against a real redis-server.

use latchkey_tests::{Diff, RawConn};

#[test]
fn subscribed_mode_replies() {
    let mut d = Diff::new();
    d.check_raw(b"UNSUBSCRIBE\r\n");
    d.check_raw(b"PUNSUBSCRIBE\r\n");
    // SUBSCRIBE a b confirms each channel with its own reply.
    d.check(&["SUBSCRIBE", "a", "b"]);
    d.check_raw(b"");
    d.table(&[
        "GET x",
        "PING",
        "PING hi",
        "PSUBSCRIBE p*",
        "SSUBSCRIBE s",
        "SET k v",
    ]);
    // With no arguments the order follows Redis's dict order: leave one channel so both agree.
    d.check(&["UNSUBSCRIBE", "a"]);
    d.check(&["UNSUBSCRIBE"]);
    d.table(&["PUNSUBSCRIBE", "SUNSUBSCRIBE", "GET x", "PING"]);
}

#[test]
fn publish_reaches_subscribers_and_counts_them() {
    let mut d = Diff::new();
    let mut rs = RawConn::connect(d.redis_proc.addr()).unwrap();
    let mut ls = RawConn::connect(d.latchkey_server.addr()).unwrap();
    for c in [&mut rs, &mut ls] {
        c.cmd(&["SUBSCRIBE", "unlock:{a}"]);
        c.cmd(&["PSUBSCRIBE", "unlock:*"]);
    }
    d.table(&[
        "PUBLISH unlock:{a} 0",
        "PUBLISH unlock:{b} 0",
        "PUBLISH other 0",
        "PUBSUB NUMSUB unlock:{a} other",
        "PUBSUB NUMPAT",
        "PUBSUB CHANNELS",
        "PUBSUB CHANNELS unlock*",
        "PUBSUB CHANNELS x*",
        "PUBSUB SHARDCHANNELS",
        "PUBSUB SHARDNUMSUB s",
        "PUBSUB FOO",
        "PUBLISH a",
        "SPUBLISH s m",
    ]);
    for _ in 0..3 {
        assert_eq!(ls.read_reply(), rs.read_reply());
    }
}

#[test]
fn resp3_pushes() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    d.check(&["SUBSCRIBE", "a"]);
    d.table(&["GET x", "SSUBSCRIBE s", "SPUBLISH s m", "PUBLISH a m"]);
    d.check_raw(b"");
    d.table(&["RESET", "UNSUBSCRIBE"]);
}
