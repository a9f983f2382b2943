//! Scripts and transactions run as one step: no other client observes them half-done.
//!
//! Writers keep two keys equal by updating both in one script (or one MULTI/EXEC); readers
//! read both in one MGET from other connections. Any moment where the two differ would be a
//! torn read.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use latchkey_server::{Frame, Server};
use latchkey_tests::RawConn;

const BUMP_BOTH: &str = "redis.call('incr', KEYS[1]); redis.call('incr', KEYS[2]); return 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scripts_and_exec_are_never_observed_half_done_in_process() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let mut c = server.client();
        writers.push(tokio::spawn(async move {
            for _ in 0..300 {
                if w % 2 == 0 {
                    let r = c.cmd(["EVAL", BUMP_BOTH, "2", "a", "b"]).await;
                    assert_eq!(r, Frame::Integer(1));
                } else {
                    c.cmd(["MULTI"]).await;
                    c.cmd(["INCR", "a"]).await;
                    c.cmd(["INCR", "b"]).await;
                    assert!(matches!(c.cmd(["EXEC"]).await, Frame::Array(_)));
                }
            }
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let mut c = server.client();
        let stop = stop.clone();
        readers.push(tokio::spawn(async move {
            let mut reads = 0u64;
            while !stop.load(Ordering::Acquire) {
                let r = c.cmd(["MGET", "a", "b"]).await;
                let Frame::Array(v) = r else {
                    panic!("MGET reply {r:?}")
                };
                assert_eq!(v[0], v[1], "torn read: {v:?}");
                reads += 1;
                tokio::task::yield_now().await;
            }
            reads
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    stop.store(true, Ordering::Release);
    for r in readers {
        assert!(r.await.unwrap() > 0, "the readers must have read");
    }
    let mut c = server.client();
    assert_eq!(c.cmd(["GET", "a"]).await, Frame::bulk("1200"));
    assert_eq!(c.cmd(["GET", "b"]).await, Frame::bulk("1200"));
}

#[test]
fn scripts_are_never_observed_half_done_over_tcp() {
    let server = Server::builder().start_blocking().unwrap();
    let addr = server.addr();
    // Both keys exist from the start, so every MGET reply has the same shape.
    server.cmd(["MSET", "x", "0", "y", "0"]);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = RawConn::connect(addr).unwrap();
                for _ in 0..300 {
                    assert_eq!(c.cmd(&["EVAL", BUMP_BOTH, "2", "x", "y"]), b":1\r\n");
                }
            })
        })
        .collect();
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut c = RawConn::connect(addr).unwrap();
            let mut reads = 0;
            while !stop.load(Ordering::Acquire) {
                let r = String::from_utf8(c.cmd(&["MGET", "x", "y"])).unwrap();
                let parts: Vec<&str> = r.split("\r\n").collect();
                assert_eq!(parts[2], parts[4], "torn read: {r:?}");
                reads += 1;
            }
            reads
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Release);
    assert!(reader.join().unwrap() > 0);
    let mut c = RawConn::connect(addr).unwrap();
    assert_eq!(c.cmd(&["GET", "x"]), b"$3\r\n900\r\n");
}

/// What a script run leaves for replication: nothing when it only read, the bare command for
/// one write, MULTI ... EXEC around several.
#[tokio::test]
async fn script_effects_are_recorded_as_redis_7_propagates_them() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let mut c = server.client();
    let node = latchkey_server::internals::node(&server);
    node.record_script_effects(true);
    let effects = || node.last_script_effects();
    let strings = |v: Vec<Vec<bytes::Bytes>>| -> Vec<Vec<String>> {
        v.into_iter()
            .map(|c| {
                c.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .collect()
    };
    c.cmd(["EVAL", "return redis.call('get', 'a')", "0"]).await;
    assert!(effects().is_empty());
    c.cmd(["EVAL", "return redis.call('set', 'a', '1')", "0"])
        .await;
    assert_eq!(strings(effects()), vec![vec!["set", "a", "1"]]);
    c.cmd([
        "EVAL",
        "redis.call('incr', 'a'); redis.call('get', 'a'); redis.call('del', 'nokey'); return redis.call('del', 'a')",
        "0",
    ])
    .await;
    assert_eq!(
        strings(effects()),
        vec![
            vec!["MULTI"],
            vec!["incr", "a"],
            vec!["del", "a"],
            vec!["EXEC"]
        ]
    );
}

/// The lock client's multi-key acquire: one value (here 4 MiB) set under every key. After the
/// script the scripting engine holds what it held before (nothing of the run's writes nor
/// its arguments), and the 64 keys share one copy of the value rather than 64.
#[tokio::test]
async fn a_scripts_writes_are_not_held_after_it_and_one_value_is_stored_once() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let mut c = server.client();
    let acquire = r#"for i, key in ipairs(KEYS) do
  if redis.call('exists', key) == 1 then return 0 end
end
for i, key in ipairs(KEYS) do
  redis.call('set', key, ARGV[1], 'PX', ARGV[2])
end
return 1"#;
    // Warm the engine up (the script cached, the heap at its working size).
    c.cmd(["EVAL", acquire, "1", "warm", "v", "60000"]).await;
    c.cmd(["DEL", "warm"]).await;
    let node = latchkey_server::internals::node(&server);
    let before = node.script_retained_bytes();
    let value = "x".repeat(4 << 20);
    let keys: Vec<String> = (0..64).map(|i| format!("lock:{i}")).collect();
    let mut args: Vec<&str> = vec!["EVAL", acquire, "64"];
    args.extend(keys.iter().map(String::as_str));
    args.extend([value.as_str(), "60000"]);
    assert_eq!(c.cmd(args).await, latchkey_server::Frame::Integer(1));
    let after = node.script_retained_bytes();
    assert!(
        after <= before + (256 << 10),
        "the engine holds {} bytes more after the script than before it",
        after.saturating_sub(before)
    );
    // Every key holds the value, all of them the same bytes.
    let mut first = None;
    for key in &keys {
        let latchkey_server::Frame::Bulk(v) = c.cmd(["GET", key.as_str()]).await else {
            panic!("{key} holds a value");
        };
        assert_eq!(v.len(), value.len());
        let at = v.as_ptr();
        assert_eq!(
            *first.get_or_insert(at),
            at,
            "{key} holds a copy of its own"
        );
    }
}
