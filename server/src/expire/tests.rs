//! Expiry at scale, from inside the crate: the million keys are put straight into the keyspace
//! (a million commands would take longer in a debug build than what the test is about), and
//! the bound is the cycle's own step size.

use std::time::Duration;

use bytes::Bytes;

use super::{MAX_BURST_STEPS, STEP_KEYS};
use crate::db::{Entry, Str, Value};
use crate::{Frame, LocalClient, Server};

fn int(f: Frame) -> i64 {
    match f {
        Frame::Integer(n) => n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// The `expires=` count `INFO keyspace` reports for database `db` (0 when the line is absent).
async fn info_expires(c: &mut LocalClient, db: usize) -> (i64, i64) {
    let Frame::Bulk(info) = c.cmd(["INFO", "keyspace"]).await else {
        panic!("INFO")
    };
    let info = String::from_utf8_lossy(&info).into_owned();
    let prefix = format!("db{db}:keys=");
    let Some(line) = info.lines().find(|l| l.starts_with(&prefix)) else {
        return (0, 0);
    };
    let field = |name: &str| -> i64 {
        line.split(',')
            .find_map(|kv| kv.split_once('=').filter(|(k, _)| k.ends_with(name)))
            .map(|(_, v)| v.parse().unwrap())
            .unwrap()
    };
    (field("keys"), field("expires"))
}

async fn info_field(c: &mut LocalClient, section: &str, name: &str) -> String {
    let Frame::Bulk(info) = c.cmd(["INFO", section]).await else {
        panic!("INFO")
    };
    let info = String::from_utf8_lossy(&info).into_owned();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
        .trim()
        .to_string()
}

/// Keys in the million-key test.
const MILLION: usize = 1_000_000;

/// One advance past a million deadlines: the cycle deletes them in bounded steps between the
/// commands of a client that keeps running (its commands are answered throughout, and
/// between two of them at most a burst or two of steps go, `MAX_BURST_STEPS` steps each),
/// and once it has caught up nothing expired is left.
#[tokio::test]
async fn a_million_deadlines_pass_in_bounded_steps_between_commands() {
    let s = Server::builder()
        .no_listener()
        .virtual_clock()
        .start()
        .await
        .unwrap();
    let now = s.clock().now_ms();
    let db = s.shared().keyspace.db(0);
    // Loaded straight into the keyspace: a million commands would take longer in a debug
    // build, and the loading is not what this test is about.
    let token = Bytes::from_static(b"token");
    for i in 0..MILLION {
        db.insert(
            Bytes::from(format!("lock:{i}")),
            Entry::with_expiry(
                Value::Str(Str::from(token.clone())),
                Some(now + 5000 + (i % 5000) as u64),
            ),
        );
    }
    let mut c = s.client();
    c.cmd(["SET", "live", "v"]).await;
    assert_eq!(int(c.cmd(["DBSIZE"]).await), MILLION as i64 + 1);
    assert_eq!(
        info_expires(&mut c, 0).await,
        (MILLION as i64 + 1, MILLION as i64)
    );

    s.clock().advance(Duration::from_secs(60));
    // The most the cycle deletes in one go before it lets others run.
    let step = (STEP_KEYS * MAX_BURST_STEPS) as i64;
    let mut last = MILLION as i64 + 1;
    let (mut largest_drop, mut observations) = (0, 0);
    loop {
        // The client gives the scheduler a turn between commands, as a networked one would
        // while waiting for its next request.
        tokio::task::yield_now().await;
        assert_eq!(c.cmd(["GET", "live"]).await, Frame::bulk("v"));
        let size = int(c.cmd(["DBSIZE"]).await);
        largest_drop = largest_drop.max(last - size);
        last = size;
        observations += 1;
        if size == 1 {
            break;
        }
    }
    assert!(
        largest_drop <= 2 * step,
        "{largest_drop} keys went between two commands of one client: more than a burst or two"
    );
    assert!(observations as i64 >= MILLION as i64 / (2 * step));
    s.expiry_caught_up().await;
    assert_eq!(int(c.cmd(["DBSIZE"]).await), 1);
    assert_eq!(info_expires(&mut c, 0).await, (1, 0));
    assert_eq!(
        info_field(&mut c, "stats", "expired_keys").await,
        MILLION.to_string()
    );
    assert_eq!(
        c.cmd(["KEYS", "*"]).await,
        Frame::Array(vec![Frame::bulk("live")])
    );
    s.shutdown().await;
}

/// After a burst of leases expires, the keyspace's tables give their room back within a few
/// ticks of the expiry task (a shard at a time), and every key that was not due is still
/// found, by its hash, in the rebuilt shards.
#[tokio::test]
async fn tables_emptied_by_expiry_shrink_and_keep_the_live_keys() {
    let s = Server::builder()
        .no_listener()
        .virtual_clock()
        .start()
        .await
        .unwrap();
    let now = s.clock().now_ms();
    let db = s.shared().keyspace.db(0);
    let token = Bytes::from_static(b"token");
    for i in 0..200_000 {
        db.insert(
            Bytes::from(format!("lease:{i}")),
            Entry::with_expiry(Value::Str(Str::from(token.clone())), Some(now + 1000)),
        );
    }
    let mut c = s.client();
    for i in 0..100 {
        c.cmd(["SET".to_string(), format!("live:{i}"), i.to_string()])
            .await;
    }
    let peak = db.map().capacity();
    s.clock().advance(Duration::from_secs(2));
    s.expiry_caught_up().await;
    assert_eq!(int(c.cmd(["DBSIZE"]).await), 100);
    // Shrinking runs on the expiry task's real-time tick: wait for it (an outcome, not a
    // duration: the bound only stops a broken build from waiting for ever).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while db.map().capacity() * 10 >= peak {
        assert!(
            std::time::Instant::now() < deadline,
            "the tables kept {} of {peak} slots",
            db.map().capacity()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for i in 0..100 {
        assert_eq!(
            c.cmd(["GET".to_string(), format!("live:{i}")]).await,
            Frame::bulk(i.to_string())
        );
    }
    assert!(matches!(c.cmd(["RANDOMKEY"]).await, Frame::Bulk(k) if k.starts_with(b"live:")));
    assert_eq!(c.cmd(["SET", "after", "1"]).await, Frame::ok());
    assert_eq!(int(c.cmd(["DBSIZE"]).await), 101);
    s.shutdown().await;
}

/// A hash emptied down to a few fields by `HDEL` gives its table's room back at once:
/// `MEMORY USAGE` (which counts the table's slots) falls with it, and the fields left are
/// intact.
#[tokio::test]
async fn a_collection_mostly_deleted_gives_its_room_back() {
    let s = Server::builder()
        .no_listener()
        .virtual_clock()
        .start()
        .await
        .unwrap();
    let mut c = s.client();
    let mut hset = vec!["HSET".to_string(), "h".to_string()];
    for i in 0..20_000 {
        hset.push(format!("f{i}"));
        hset.push("v".to_string());
    }
    assert_eq!(int(c.cmd(hset).await), 20_000);
    let full = int(c.cmd(["MEMORY", "USAGE", "h"]).await);
    let mut hdel = vec!["HDEL".to_string(), "h".to_string()];
    hdel.extend((10..20_000).map(|i| format!("f{i}")));
    assert_eq!(int(c.cmd(hdel).await), 19_990);
    let left = int(c.cmd(["MEMORY", "USAGE", "h"]).await);
    assert!(left * 20 < full, "{left} bytes left of {full}");
    assert_eq!(int(c.cmd(["HLEN", "h"]).await), 10);
    assert_eq!(c.cmd(["HGET", "h", "f9"]).await, Frame::bulk("v"));
    s.shutdown().await;
}

/// With `lazyfree-lazy-expire no` (the default), the cycle frees a big expired value itself,
/// and the key counts in `DBSIZE` until that is done and the `expire-cycle` latency event is
/// recorded: a client that sees `DBSIZE` reach 0 can read the event at once, as after Redis's
/// cycle (Redis's `LATENCY of expire events are correctly collected` reads it that way). The
/// client polls from the other worker while the cycle frees. Before, the key left `DBSIZE`
/// as soon as it was taken out of the table, and the event came after the free and a yield.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_big_value_expired_counts_until_its_latency_event_is_recorded() {
    let s = Server::builder().no_listener().start().await.unwrap();
    let mut c = s.client();
    assert_eq!(
        c.cmd(["CONFIG", "SET", "latency-monitor-threshold", "1"])
            .await,
        Frame::ok()
    );
    for chunk in 0..200 {
        let mut sadd = vec!["SADD".to_string(), "big".to_string()];
        sadd.extend((0..1000).map(|i| format!("m{}", chunk * 1000 + i)));
        assert_eq!(int(c.cmd(sadd).await), 1000);
    }
    assert_eq!(int(c.cmd(["PEXPIRE", "big", "50"]).await), 1);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while int(c.cmd(["DBSIZE"]).await) != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the key never expired"
        );
        tokio::task::yield_now().await;
    }
    let Frame::Array(events) = c.cmd(["LATENCY", "LATEST"]).await else {
        panic!("LATENCY LATEST")
    };
    assert!(
        events.iter().any(|e| matches!(e, Frame::Array(fields)
            if fields.first() == Some(&Frame::bulk("expire-cycle")))),
        "no expire-cycle event once DBSIZE is 0: {events:?}"
    );
    s.shutdown().await;
}
