//! What a server does with its clients' buffers and with idle clients, checked the same way
//! on latchkey and on a real redis-server: a query buffer sized for the requests, given back
//! when the client goes idle, cut down after a big request; `timeout` closing an idle
//! ordinary client but never a subscriber.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use latchkey_server::Server;
use latchkey_tests::{RawConn, RedisProcess};

/// `qbuf + qbuf-free` and `idle` of the client named `name`, from `CLIENT LIST`.
fn query_buffer(watcher: &mut RawConn, name: &str) -> (usize, u64) {
    let list = String::from_utf8_lossy(&watcher.cmd(&["CLIENT", "LIST"])).into_owned();
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .unwrap_or_else(|| panic!("no client {name} in {list}"));
    let field = |f: &str| -> u64 {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(&format!("{f}=")))
            .unwrap_or_else(|| panic!("no {f} in {line}"))
            .parse()
            .unwrap()
    };
    ((field("qbuf") + field("qbuf-free")) as usize, field("idle"))
}

/// Polls `f` every 20 ms until it holds or `secs` pass.
fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn both(check: impl Fn(SocketAddr, &str)) {
    let latchkey = Server::builder().start_blocking().expect("latchkey");
    let redis = RedisProcess::spawn(&[]);
    check(redis.addr(), "redis-server");
    check(latchkey.addr(), "latchkey");
}

#[test]
fn an_idle_client_gives_its_query_buffer_back() {
    both(|addr, who| {
        let mut watcher = RawConn::connect(addr).unwrap();
        let mut c = RawConn::connect(addr).unwrap();
        assert_eq!(c.cmd(&["CLIENT", "SETNAME", "idler"]), b"+OK\r\n");
        let (size, _) = query_buffer(&mut watcher, "idler");
        assert!((16384..32768).contains(&size), "{who}: {size}");
        let given_back = eventually(6, || {
            let (size, idle) = query_buffer(&mut watcher, "idler");
            size == 0 && idle >= 2
        });
        assert!(
            given_back,
            "{who}: the idle client kept {:?}",
            query_buffer(&mut watcher, "idler")
        );
        // And it still works: the buffer comes back with the next request.
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n", "{who}");
    });
}

#[test]
fn a_big_request_s_buffer_is_cut_down_once_requests_are_small_again() {
    both(|addr, who| {
        let mut watcher = RawConn::connect(addr).unwrap();
        let mut c = RawConn::connect(addr).unwrap();
        assert_eq!(c.cmd(&["CLIENT", "SETNAME", "big"]), b"+OK\r\n");
        let value = "A".repeat(400_000);
        assert_eq!(c.cmd(&["SET", "x", &value]), b"+OK\r\n");
        let (after_big, _) = query_buffer(&mut watcher, "big");
        assert!(after_big > 32768, "{who}: {after_big}");
        let shrunk = eventually(3, || {
            c.cmd(&["SET", "x", "small"]);
            query_buffer(&mut watcher, "big").0 < after_big
        });
        assert!(
            shrunk,
            "{who}: still {:?}",
            query_buffer(&mut watcher, "big")
        );
        assert!(query_buffer(&mut watcher, "big").0 > 0, "{who}");
    });
}

#[test]
fn timeout_closes_idle_ordinary_clients_only() {
    both(|addr, who| {
        let mut admin = RawConn::connect(addr).unwrap();
        assert_eq!(admin.cmd(&["CONFIG", "SET", "timeout", "1"]), b"+OK\r\n");
        let mut idle = RawConn::connect(addr).unwrap();
        assert_eq!(idle.cmd(&["PING"]), b"+PONG\r\n");
        let mut sub = RawConn::connect(addr).unwrap();
        sub.cmd(&["SUBSCRIBE", "news"]);
        // Kept busy: a request every 200 ms.
        let mut busy = RawConn::connect(addr).unwrap();
        let deadline = Instant::now() + Duration::from_millis(3500);
        while Instant::now() < deadline {
            assert_eq!(
                busy.cmd(&["PING"]),
                b"+PONG\r\n",
                "{who}: the busy client was closed"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(
            idle.try_cmd(&["PING"]).is_err(),
            "{who}: the idle client is still open"
        );
        // (The first admin connection was idle too, and is gone as well.)
        assert!(
            admin.try_cmd(&["PING"]).is_err(),
            "{who}: the idle admin is still open"
        );
        let mut admin = RawConn::connect(addr).unwrap();
        assert_eq!(
            admin.cmd(&["PUBLISH", "news", "hi"]),
            b":1\r\n",
            "{who}: the subscriber was closed"
        );
        assert_eq!(admin.cmd(&["CONFIG", "SET", "timeout", "0"]), b"+OK\r\n");
        assert_eq!(
            admin.cmd(&["CONFIG", "SET", "timeout", "-1"]),
            b"-ERR CONFIG SET failed (possibly related to argument 'timeout') - argument must be between 0 and 2147483647 inclusive\r\n",
            "{who}"
        );
    });
}

/// A client that went idle before `timeout` was set is closed all the same.
#[test]
fn timeout_set_later_reaches_clients_already_idle() {
    both(|addr, who| {
        let mut idle = RawConn::connect(addr).unwrap();
        assert_eq!(idle.cmd(&["PING"]), b"+PONG\r\n");
        // Long enough for latchkey to have given its buffers back and stopped looking.
        std::thread::sleep(Duration::from_millis(2600));
        let mut admin = RawConn::connect(addr).unwrap();
        assert_eq!(admin.cmd(&["CONFIG", "SET", "timeout", "1"]), b"+OK\r\n");
        std::thread::sleep(Duration::from_millis(1500));
        assert!(
            idle.try_cmd(&["PING"]).is_err(),
            "{who}: the idle client is still open"
        );
        let mut admin = RawConn::connect(addr).unwrap();
        assert_eq!(admin.cmd(&["CONFIG", "SET", "timeout", "0"]), b"+OK\r\n");
    });
}
