//! Client-side caching (`CLIENT TRACKING`) side by side with a real redis-server: the same
//! commands on connections to each, every reply and every invalidation message compared byte
//! for byte. A message that must *not* arrive is checked by sending `PING` after: had one been
//! queued, it would come before the `PONG`, on both servers.

use std::net::SocketAddr;
use std::time::Duration;

use latchkey_server::{BlockingServer, Server};
use latchkey_tests::raw::show;
use latchkey_tests::{RawConn, RedisProcess};

/// A real Redis and a latchkey server, started together.
struct Servers {
    redis: RedisProcess,
    latchkey: BlockingServer,
}

impl Servers {
    fn start() -> Servers {
        Servers {
            redis: RedisProcess::spawn(&[]),
            latchkey: Server::builder().start_blocking().expect("start latchkey"),
        }
    }

    /// A new connection to each.
    fn conn(&self) -> Pair {
        Pair::connect(self.redis.addr(), self.latchkey.addr())
    }
}

/// One connection to each server, driven in step.
struct Pair {
    r: RawConn,
    l: RawConn,
}

impl Pair {
    fn connect(redis: SocketAddr, latchkey: SocketAddr) -> Pair {
        Pair {
            r: RawConn::connect(redis).unwrap(),
            l: RawConn::connect(latchkey).unwrap(),
        }
    }

    /// Sends a command to both and asserts the same reply; returns it.
    fn cmd(&mut self, args: &[&str]) -> Vec<u8> {
        let r = self.r.cmd(args);
        let l = self.l.cmd(args);
        assert_eq!(
            show(&l),
            show(&r),
            "{args:?}: latchkey (left) and redis (right) differ"
        );
        r
    }

    /// Sends a command built per server (with each server's own client ids) and asserts the
    /// same reply.
    fn cmd_each(&mut self, args: impl Fn(Side) -> Vec<String>) -> Vec<u8> {
        let (ra, la) = (args(Side::Redis), args(Side::Latchkey));
        let r = self.r.cmd(&ra);
        let l = self.l.cmd(&la);
        assert_eq!(show(&l), show(&r), "{la:?}: latchkey and redis differ");
        r
    }

    /// Reads the next message or reply on both and asserts they are the same bytes, and
    /// these bytes.
    fn expect(&mut self, want: &[u8]) {
        let r = self.r.read_reply();
        let l = self.l.read_reply();
        assert_eq!(show(&r), show(want), "redis sent something else");
        assert_eq!(show(&l), show(want), "latchkey sent something else");
    }

    /// Asserts that no message is waiting: the next thing read after a `PING` is its reply.
    fn expect_nothing(&mut self, pong: &[u8]) {
        let r = self.r.cmd(&["PING"]);
        let l = self.l.cmd(&["PING"]);
        assert_eq!(show(&r), show(pong), "redis had a message queued");
        assert_eq!(show(&l), show(pong), "latchkey had a message queued");
    }

    /// `HELLO 3` on both (its reply carries each server's own client id).
    fn hello3(&mut self) {
        for c in [&mut self.r, &mut self.l] {
            assert!(c.cmd(&["HELLO", "3"]).starts_with(b"%7\r\n"));
        }
    }

    /// `CLIENT ID` on each side.
    fn ids(&mut self) -> Ids {
        let parse =
            |b: Vec<u8>| -> u64 { String::from_utf8(b).unwrap()[1..].trim().parse().unwrap() };
        Ids {
            redis: parse(self.r.cmd(&["CLIENT", "ID"])),
            latchkey: parse(self.l.cmd(&["CLIENT", "ID"])),
        }
    }

    /// Closes both connections and waits until each server has seen it (`CLIENT LIST ID`
    /// on `observer` no longer shows them).
    fn close(self, ids: Ids, observer: &mut Pair) {
        drop(self);
        for (conn, id) in [
            (&mut observer.r, ids.redis),
            (&mut observer.l, ids.latchkey),
        ] {
            loop {
                let list = conn.cmd(&["CLIENT", "LIST", "ID", &id.to_string()]);
                if !String::from_utf8_lossy(&list).contains("id=") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Side {
    Redis,
    Latchkey,
}

#[derive(Clone, Copy)]
struct Ids {
    redis: u64,
    latchkey: u64,
}

impl Ids {
    fn of(&self, side: Side) -> u64 {
        match side {
            Side::Redis => self.redis,
            Side::Latchkey => self.latchkey,
        }
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A RESP3 invalidation push of these keys.
fn push(keys: &[&str]) -> Vec<u8> {
    let mut out = format!(">2\r\n$10\r\ninvalidate\r\n*{}\r\n", keys.len()).into_bytes();
    for k in keys {
        out.extend_from_slice(format!("${}\r\n{k}\r\n", k.len()).as_bytes());
    }
    out
}

const PONG3: &[u8] = b"+PONG\r\n";

/// A RESP3 connection with tracking on, with these options.
fn tracker(s: &Servers, options: &[&str]) -> Pair {
    let mut a = s.conn();
    a.hello3();
    let mut args = vec!["CLIENT", "TRACKING", "ON"];
    args.extend_from_slice(options);
    assert_eq!(a.cmd(&args), b"+OK\r\n");
    a
}

#[test]
fn every_bad_combination_gets_redis_s_error() {
    let s = Servers::start();
    let mut c = s.conn();
    let own = c.ids();
    for line in [
        "CLIENT TRACKING",
        "CLIENT TRACKING maybe",
        "CLIENT TRACKING on foo",
        "CLIENT TRACKING on redirect",
        "CLIENT TRACKING on prefix",
        "CLIENT TRACKING on redirect x",
        "CLIENT TRACKING on redirect 0",
        "CLIENT TRACKING on redirect -1",
        "CLIENT TRACKING on redirect 99999",
        "CLIENT TRACKING on prefix a",
        "CLIENT TRACKING on bcast optin",
        "CLIENT TRACKING on bcast optout",
        "CLIENT TRACKING on optin optout",
        "CLIENT TRACKING on bcast prefix a prefix ab",
        "CLIENT TRACKING on bcast prefix ab prefix a",
        "CLIENT TRACKING on bcast prefix a prefix a",
        "CLIENT TRACKING on bcast prefix x prefix",
        "CLIENT CACHING yes",
        "CLIENT CACHING",
        "CLIENT CACHING yes no",
        "CLIENT GETREDIR",
        "CLIENT GETREDIR x",
        "CLIENT TRACKINGINFO",
        "CLIENT TRACKINGINFO x",
        "CLIENT TRACKING off",
        "CLIENT TRACKING off bcast",
        // Default mode on: CACHING needs OPTIN or OPTOUT; BCAST can't be switched on.
        "CLIENT TRACKING on",
        "CLIENT CACHING yes",
        "CLIENT CACHING no",
        "CLIENT TRACKING on bcast",
        "CLIENT GETREDIR",
        "CLIENT TRACKINGINFO",
        "CLIENT TRACKING on optin",
        "CLIENT CACHING no",
        "CLIENT CACHING maybe",
        "CLIENT CACHING yes",
        "CLIENT TRACKINGINFO",
        "CLIENT TRACKING on optout",
        "CLIENT TRACKINGINFO",
        "CLIENT TRACKING off",
        "CLIENT TRACKING on optout noloop",
        "CLIENT CACHING yes",
        "CLIENT CACHING no",
        "CLIENT TRACKINGINFO",
        "CLIENT TRACKING on optin",
        "CLIENT TRACKING off",
        "CLIENT TRACKING on bcast prefix ab",
        "CLIENT TRACKING on bcast prefix a",
        "CLIENT TRACKING on bcast prefix abc",
        "CLIENT TRACKING on bcast prefix b noloop",
        "CLIENT TRACKING on",
        "CLIENT TRACKINGINFO",
        "CLIENT TRACKING off",
        "CLIENT TRACKINGINFO",
    ] {
        let args: Vec<&str> = line.split(' ').collect();
        c.cmd(&args);
    }
    // Two redirections, even to an existing client.
    c.cmd_each(|side| {
        let id = own.of(side).to_string();
        strings(&["CLIENT", "TRACKING", "on", "REDIRECT", &id, "REDIRECT", &id])
    });
    // The same in RESP3, where TRACKINGINFO is a map with a set of flags.
    c.hello3();
    c.cmd(&["CLIENT", "TRACKINGINFO"]);
    c.cmd(&[
        "CLIENT", "TRACKING", "on", "bcast", "prefix", "p:", "noloop",
    ]);
    c.cmd(&["CLIENT", "TRACKINGINFO"]);
    c.cmd_each(|side| {
        strings(&[
            "CLIENT",
            "TRACKING",
            "on",
            "bcast",
            "redirect",
            &own.of(side).to_string(),
        ])
    });
    let r = c.r.cmd(&["CLIENT", "GETREDIR"]);
    let l = c.l.cmd(&["CLIENT", "GETREDIR"]);
    assert_eq!(r, format!(":{}\r\n", own.redis).into_bytes());
    assert_eq!(l, format!(":{}\r\n", own.latchkey).into_bytes());
}

#[test]
fn default_mode_tells_each_reader_once_per_read() {
    let s = Servers::start();
    let mut w = s.conn();
    w.cmd(&["MSET", "k", "1", "a", "1", "b", "1", "mine", "1"]);
    let mut a = tracker(&s, &[]);
    a.cmd(&["GET", "k"]);
    w.cmd(&["SET", "k", "2"]);
    a.expect(&push(&["k"]));
    // Forgotten once sent: the next change says nothing until the key is read again.
    w.cmd(&["SET", "k", "3"]);
    a.expect_nothing(PONG3);
    // A multi-key read, then a multi-key write: one message per key, in the write's order.
    a.cmd(&["MGET", "b", "a"]);
    w.cmd(&["MSET", "a", "2", "b", "2"]);
    a.expect(&push(&["a"]));
    a.expect(&push(&["b"]));
    // The client's own change: the message comes after its reply.
    a.cmd(&["GET", "mine"]);
    a.r.send_raw(&RawConn::encode(&["SET", "mine", "2"]));
    a.l.send_raw(&RawConn::encode(&["SET", "mine", "2"]));
    a.expect(b"+OK\r\n");
    a.expect(&push(&["mine"]));
    // Deletion, expiry set, and a key of another database (the table is keyed by name).
    a.cmd(&["GET", "k"]);
    w.cmd(&["DEL", "k"]);
    a.expect(&push(&["k"]));
    a.cmd(&["GET", "k"]);
    w.cmd(&["SELECT", "3"]);
    w.cmd(&["SET", "k", "other-db"]);
    a.expect(&push(&["k"]));
    // A failed conditional write changes nothing and says nothing.
    a.cmd(&["GET", "k"]);
    w.cmd(&["SELECT", "0"]);
    w.cmd(&["SET", "k", "v"]);
    a.expect(&push(&["k"]));
    a.cmd(&["GET", "k"]);
    w.cmd(&["SET", "k", "v", "NX"]);
    a.expect_nothing(PONG3);
    // FLUSHDB and FLUSHALL: a null, to every tracking client, read anything or not.
    w.cmd(&["FLUSHDB"]);
    a.expect(b">2\r\n$10\r\ninvalidate\r\n_\r\n");
    w.cmd(&["FLUSHALL"]);
    a.expect(b">2\r\n$10\r\ninvalidate\r\n_\r\n");
    a.expect_nothing(PONG3);
    // The client's own FLUSHALL: the null comes after its reply.
    a.r.send_raw(&RawConn::encode(&["FLUSHALL"]));
    a.l.send_raw(&RawConn::encode(&["FLUSHALL"]));
    a.expect(b"+OK\r\n");
    a.expect(b">2\r\n$10\r\ninvalidate\r\n_\r\n");
    // Reads inside a script and a transaction are remembered like any other.
    a.cmd(&["EVAL", "return redis.call('GET', KEYS[1])", "1", "s"]);
    a.cmd(&["EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "ro"]);
    a.cmd(&["MULTI"]);
    a.cmd(&["GET", "t"]);
    a.cmd(&["EXEC"]);
    w.cmd(&["MSET", "s", "1", "ro", "1", "t", "1"]);
    a.expect(&push(&["s"]));
    a.expect(&push(&["ro"]));
    a.expect(&push(&["t"]));
    // Off: nothing more.
    a.cmd(&["GET", "k"]);
    a.cmd(&["CLIENT", "TRACKING", "OFF"]);
    w.cmd(&["SET", "k", "x"]);
    a.expect_nothing(PONG3);
}

#[test]
fn noloop_leaves_out_one_s_own_changes() {
    let s = Servers::start();
    let mut w = s.conn();
    let mut a = tracker(&s, &["NOLOOP"]);
    a.cmd(&["GET", "k"]);
    a.cmd(&["SET", "k", "mine"]);
    a.expect_nothing(PONG3);
    a.cmd(&["GET", "k"]);
    w.cmd(&["SET", "k", "theirs"]);
    a.expect(&push(&["k"]));
}

#[test]
fn bcast_sends_the_changes_under_each_prefix_together() {
    let s = Servers::start();
    let mut w = s.conn();
    let mut a = tracker(&s, &["BCAST", "PREFIX", "user:", "PREFIX", "obj:"]);
    // Nothing read: every change under a prefix is sent, gathered per prefix and sorted.
    w.cmd(&[
        "MSET", "user:2", "a", "user:1", "b", "other", "c", "obj:1", "d",
    ]);
    a.expect(&push(&["obj:1"]));
    a.expect(&push(&["user:1", "user:2"]));
    w.cmd(&["SET", "other", "x"]);
    a.expect_nothing(PONG3);
    // Its own changes too (after the reply), unless NOLOOP.
    a.r.send_raw(&RawConn::encode(&["SET", "user:9", "x"]));
    a.l.send_raw(&RawConn::encode(&["SET", "user:9", "x"]));
    a.expect(b"+OK\r\n");
    a.expect(&push(&["user:9"]));
    // No prefix: every key. NOLOOP: not its own.
    let mut b = tracker(&s, &["BCAST", "NOLOOP"]);
    b.cmd(&["SET", "mine", "1"]);
    b.expect_nothing(PONG3);
    w.cmd(&["DEL", "mine", "other"]);
    b.expect(&push(&["mine", "other"]));
    a.expect_nothing(PONG3);
    a.cmd(&["CLIENT", "TRACKINGINFO"]);
    // FLUSHALL reaches broadcast clients too.
    w.cmd(&["FLUSHALL"]);
    b.expect(b">2\r\n$10\r\ninvalidate\r\n_\r\n");
}

#[test]
fn optin_and_optout_follow_client_caching() {
    let s = Servers::start();
    let mut w = s.conn();
    let mut a = tracker(&s, &["OPTIN"]);
    a.cmd(&["GET", "k1"]);
    a.cmd(&["CLIENT", "CACHING", "YES"]);
    a.cmd(&["GET", "k2"]);
    a.cmd(&["GET", "k3"]);
    // A transaction after CACHING YES counts as one command.
    a.cmd(&["CLIENT", "CACHING", "YES"]);
    a.cmd(&["MULTI"]);
    a.cmd(&["GET", "k4"]);
    a.cmd(&["GET", "k5"]);
    a.cmd(&["EXEC"]);
    a.cmd(&["GET", "k6"]);
    w.cmd(&[
        "MSET", "k1", "x", "k2", "x", "k3", "x", "k4", "x", "k5", "x", "k6", "x",
    ]);
    a.expect(&push(&["k2"]));
    a.expect(&push(&["k4"]));
    a.expect(&push(&["k5"]));
    a.expect_nothing(PONG3);

    let mut b = tracker(&s, &["OPTOUT"]);
    b.cmd(&["CLIENT", "CACHING", "NO"]);
    b.cmd(&["GET", "k1"]);
    b.cmd(&["GET", "k2"]);
    w.cmd(&["MSET", "k1", "y", "k2", "y"]);
    b.expect(&push(&["k2"]));
    b.expect_nothing(PONG3);
}

#[test]
fn a_resp2_client_hears_through_a_subscribed_redirection() {
    let s = Servers::start();
    let mut w = s.conn();
    let mut r = s.conn();
    let rid = r.ids();
    r.cmd(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut a = s.conn();
    a.cmd_each(|side| {
        strings(&[
            "CLIENT",
            "TRACKING",
            "ON",
            "REDIRECT",
            &rid.of(side).to_string(),
        ])
    });
    a.cmd(&["GET", "k"]);
    w.cmd(&["SET", "k", "v"]);
    r.expect(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n");
    // The tracking client itself hears nothing (RESP2 has no pushes).
    a.expect_nothing(b"+PONG\r\n");
    // A flush: the null of the tracking client's protocol.
    w.cmd(&["FLUSHALL"]);
    r.expect(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n");
    // Any subscription puts the target in subscribed mode, where it hears the message.
    let mut other = s.conn();
    let oid = other.ids();
    other.cmd(&["SUBSCRIBE", "elsewhere"]);
    a.cmd_each(|side| {
        strings(&[
            "CLIENT",
            "TRACKING",
            "ON",
            "REDIRECT",
            &oid.of(side).to_string(),
        ])
    });
    a.cmd(&["GET", "k"]);
    w.cmd(&["SET", "k", "v2"]);
    other.expect(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n");
    // A RESP2 target that is not subscribed hears nothing.
    let mut plain = s.conn();
    let pid = plain.ids();
    a.cmd_each(|side| {
        strings(&[
            "CLIENT",
            "TRACKING",
            "ON",
            "REDIRECT",
            &pid.of(side).to_string(),
        ])
    });
    a.cmd(&["GET", "k"]);
    w.cmd(&["SET", "k", "v3"]);
    plain.expect_nothing(b"+PONG\r\n");
    // A RESP3 redirection target needs no subscription.
    let mut r3 = s.conn();
    r3.hello3();
    let r3id = r3.ids();
    a.cmd_each(|side| {
        strings(&[
            "CLIENT",
            "TRACKING",
            "ON",
            "REDIRECT",
            &r3id.of(side).to_string(),
        ])
    });
    a.cmd(&["GET", "k"]);
    w.cmd(&["SET", "k", "w"]);
    r3.expect(&push(&["k"]));
    r.expect_nothing(b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
}

#[test]
fn a_redirection_that_left_is_reported_broken() {
    let s = Servers::start();
    let mut w = s.conn();
    let mut r = s.conn();
    let rid = r.ids();
    let mut a = s.conn();
    a.hello3();
    a.cmd_each(|side| {
        strings(&[
            "CLIENT",
            "TRACKING",
            "ON",
            "REDIRECT",
            &rid.of(side).to_string(),
        ])
    });
    a.cmd(&["GET", "k"]);
    r.close(rid, &mut w);
    w.cmd(&["SET", "k", "v"]);
    let broken = |id: u64| format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{id}\r\n");
    assert_eq!(show(&a.r.read_reply()), show(broken(rid.redis).as_bytes()));
    assert_eq!(
        show(&a.l.read_reply()),
        show(broken(rid.latchkey).as_bytes())
    );
    // TRACKINGINFO says so, and CLIENT LIST shows `tR` and the redirection.
    let info = |id: u64| {
        format!(
            "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$15\r\nbroken_redirect\r\n$8\r\nredirect\r\n:{id}\r\n$8\r\nprefixes\r\n*0\r\n"
        )
    };
    assert_eq!(
        show(&a.r.cmd(&["CLIENT", "TRACKINGINFO"])),
        show(info(rid.redis).as_bytes())
    );
    assert_eq!(
        show(&a.l.cmd(&["CLIENT", "TRACKINGINFO"])),
        show(info(rid.latchkey).as_bytes())
    );
    for (conn, id) in [(&mut a.r, rid.redis), (&mut a.l, rid.latchkey)] {
        let line = String::from_utf8(conn.cmd(&["CLIENT", "INFO"])).unwrap();
        assert!(line.contains(" flags=tR "), "{line}");
        assert!(line.contains(&format!(" redir={id} ")), "{line}");
    }
}

#[test]
fn client_list_shows_tracking_flags() {
    let s = Servers::start();
    let mut a = tracker(&s, &["BCAST"]);
    let mut b = s.conn();
    for (conn, flags, redir) in [
        (&mut a.r, "tB", "0"),
        (&mut a.l, "tB", "0"),
        (&mut b.r, "N", "-1"),
        (&mut b.l, "N", "-1"),
    ] {
        let line = String::from_utf8(conn.cmd(&["CLIENT", "INFO"])).unwrap();
        assert!(line.contains(&format!(" flags={flags} ")), "{line}");
        assert!(line.contains(&format!(" redir={redir} ")), "{line}");
    }
}

#[test]
fn the_table_is_bounded_by_tracking_table_max_keys() {
    let s = Servers::start();
    let mut w = s.conn();
    w.cmd(&["CONFIG", "GET", "tracking-table-max-keys"]);
    for v in ["-1", "x", "1k"] {
        w.cmd(&["CONFIG", "SET", "tracking-table-max-keys", v]);
    }
    w.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "1"]);
    w.cmd(&["CONFIG", "GET", "tracking-table-max-keys"]);
    let mut a = tracker(&s, &[]);
    a.cmd(&["GET", "a"]);
    a.cmd(&["GET", "b"]);
    // One key picked at random is invalidated to fit: Redis does it before the next command
    // runs, latchkey once the read that overfilled the table has answered; on the wire both
    // put the message between GET b's reply and PING's.
    a.r.send_raw(&RawConn::encode(&["PING"]));
    a.l.send_raw(&RawConn::encode(&["PING"]));
    for conn in [&mut a.r, &mut a.l] {
        let first = conn.read_reply();
        assert!(
            first == push(&["a"]) || first == push(&["b"]),
            "{}",
            show(&first)
        );
        assert_eq!(conn.read_reply(), PONG3);
    }
    for conn in [&mut w.r, &mut w.l] {
        let info = String::from_utf8(conn.cmd(&["INFO", "stats"])).unwrap();
        assert!(info.contains("tracking_total_keys:1\r\n"), "{info}");
        assert!(info.contains("tracking_total_items:1\r\n"), "{info}");
        let info = String::from_utf8(conn.cmd(&["INFO", "clients"])).unwrap();
        assert!(info.contains("tracking_clients:1\r\n"), "{info}");
    }
    // A tracking client that leaves is no longer counted.
    let ids = a.ids();
    a.close(ids, &mut w);
    for conn in [&mut w.r, &mut w.l] {
        let info = String::from_utf8(conn.cmd(&["INFO", "clients"])).unwrap();
        assert!(info.contains("tracking_clients:0\r\n"), "{info}");
    }
    w.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "0"]);
}

/// Expiry is a change: a tracked key that expires sends its invalidation, whether a read
/// finds it expired or the active expiry cycle deletes it (latchkey alone, on a virtual
/// clock).
#[test]
fn an_expiring_tracked_key_is_invalidated() {
    let server = Server::builder()
        .virtual_clock()
        .start_blocking()
        .expect("start latchkey");
    let mut a = RawConn::connect(server.addr()).unwrap();
    let mut w = RawConn::connect(server.addr()).unwrap();
    a.cmd(&["HELLO", "3"]);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "ON"]), b"+OK\r\n");
    assert_eq!(w.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), b"+OK\r\n");
    w.cmd(&["SET", "lazy", "v", "PX", "100"]);
    a.cmd(&["GET", "lazy"]);
    server.handle().clock().advance(Duration::from_millis(200));
    // Found expired by another client's read.
    assert_eq!(w.cmd(&["GET", "lazy"]), b"$-1\r\n");
    assert_eq!(show(&a.read_reply()), show(&push(&["lazy"])));
    assert_eq!(a.cmd(&["PING"]), PONG3);
    // Deleted by the active cycle, with nobody reading.
    w.cmd(&["SET", "active", "v", "PX", "100"]);
    a.cmd(&["GET", "active"]);
    assert_eq!(w.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), b"+OK\r\n");
    server.handle().clock().advance(Duration::from_millis(200));
    assert_eq!(show(&a.read_reply()), show(&push(&["active"])));
    assert_eq!(w.cmd(&["EXISTS", "active"]), b":0\r\n");
}

/// The one deliberate difference (docs/COMPATIBILITY.md): Redis 7.0.15 answers an overlap
/// found after the first new prefix with the error *and* `+OK`, and turns tracking on with the
/// overlapping prefixes. latchkey answers the error alone and leaves tracking off.
#[test]
fn an_overlap_among_later_prefixes_is_refused_whole() {
    let server = Server::builder().start_blocking().expect("start latchkey");
    let mut c = RawConn::connect(server.addr()).unwrap();
    assert_eq!(
        show(&c.cmd(&[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "b", "PREFIX", "bc",
        ])),
        show(b"-ERR Prefix 'b' overlaps with another provided prefix 'bc'. Prefixes for a single client must not overlap.\r\n")
    );
    assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(c.cmd(&["CLIENT", "GETREDIR"]), b":-1\r\n");
}

/// Eviction is a change: a tracked key evicted under `maxmemory` sends its invalidation
/// (latchkey alone: which key Redis evicts, and when, depends on its allocator).
#[test]
fn an_evicted_tracked_key_is_invalidated() {
    let server = Server::builder().start_blocking().expect("start latchkey");
    let mut a = RawConn::connect(server.addr()).unwrap();
    let mut w = RawConn::connect(server.addr()).unwrap();
    let value = "v".repeat(1024);
    let keys: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
    for k in &keys {
        assert_eq!(w.cmd(&["SET", k, &value]), b"+OK\r\n");
    }
    a.cmd(&["HELLO", "3"]);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "ON"]), b"+OK\r\n");
    let mut mget = vec!["MGET".to_string()];
    mget.extend(keys.iter().cloned());
    a.cmd(&mget);
    latchkey_tests::raw::evict_some(&mut w);
    // The first message names a key that was tracked and is gone now.
    let first = a.read_reply();
    let key = keys
        .iter()
        .find(|k| first == push(&[k.as_str()]))
        .unwrap_or_else(|| panic!("not an invalidation of a tracked key: {}", show(&first)));
    assert_eq!(w.cmd(&["EXISTS", key]), b":0\r\n");
}

/// A client may redirect to itself: its own change is still told after its reply.
#[test]
fn a_redirection_to_oneself_follows_the_reply() {
    let s = Servers::start();
    let mut a = s.conn();
    a.hello3();
    let me = a.ids();
    a.cmd_each(|side| {
        strings(&[
            "CLIENT",
            "TRACKING",
            "ON",
            "REDIRECT",
            &me.of(side).to_string(),
        ])
    });
    a.cmd(&["GET", "k"]);
    a.r.send_raw(&RawConn::encode(&["SET", "k", "v"]));
    a.l.send_raw(&RawConn::encode(&["SET", "k", "v"]));
    a.expect(b"+OK\r\n");
    a.expect(&push(&["k"]));
}
