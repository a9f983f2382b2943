//! Options that latchkey used to accept and then ignore, each now done or refused as Redis 7.0
//! does (the list is the "Commands" section of `docs/COMPATIBILITY.md`). Every reply is
//! compared byte for byte with a real redis-server over TCP, and where the option has an
//! effect, the effect is checked on both servers.

use latchkey_server::Server;
use latchkey_tests::{Diff, RawConn, RedisProcess};

/// A [`Diff`] whose redis-server runs in a directory where it cannot write, so that a save
/// fails there, and latchkey likewise (its `dir` is `/proc` too). `/proc` refuses
/// new files even to root.
fn diff_with_unwritable_dir() -> Diff {
    let latchkey_server = Server::builder()
        .config("dir", "/proc")
        .start_blocking()
        .expect("start latchkey");
    Diff::of(RedisProcess::spawn(&["--dir", "/proc"]), latchkey_server)
}

/// `HELLO ... AUTH user pass`: only `default` exists (with no password, so any password opens
/// it); another user is refused with `WRONGPASS`. As in Redis 7.0 the options act in order (a
/// name set before the failure stays set, one after it is not), and a refused `HELLO` never
/// switches the protocol (it used to switch before reading the options).
#[test]
fn hello_auth_checks_the_user_and_a_refused_hello_keeps_the_protocol() {
    let mut d = Diff::new();
    // RESP2 shows an empty hash as `*0`, RESP3 as `%0`: the probe for the protocol in use.
    assert_eq!(d.check(&["HGETALL", "nokey"]), b"*0\r\n");

    assert_eq!(
        d.check(&["HELLO", "3", "AUTH", "bob", "secret"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(d.check(&["CLIENT", "GETNAME"]), b"$-1\r\n");
    d.check(&["HELLO", "3", "SETNAME", "x", "AUTH", "bob", "secret"]);
    assert_eq!(d.check(&["CLIENT", "GETNAME"]), b"$1\r\nx\r\n");
    d.check(&["HELLO", "3", "AUTH", "bob", "secret", "SETNAME", "w"]);
    assert_eq!(d.check(&["CLIENT", "GETNAME"]), b"$1\r\nx\r\n");
    d.check(&["HELLO", "3", "SETNAME", "y", "bogus"]);
    assert_eq!(d.check(&["CLIENT", "GETNAME"]), b"$1\r\ny\r\n");
    d.check(&["HELLO", "3", "SETNAME", "bad name"]);
    // Still RESP2 after every refusal.
    assert_eq!(d.check(&["HGETALL", "nokey"]), b"*0\r\n");

    // The default user with any password is let in, and the rest of the HELLO applies.
    // (The replies carry each server's own connection id, so only their effects are compared.)
    let (r, l) = d.both(&["HELLO", "3", "AUTH", "default", "anything", "SETNAME", "me"]);
    assert!(r.starts_with(b"%7\r\n") && l.starts_with(b"%7\r\n"));
    assert_eq!(d.check(&["HGETALL", "nokey"]), b"%0\r\n");
    assert_eq!(d.check(&["CLIENT", "GETNAME"]), b"$2\r\nme\r\n");
}

/// `SHUTDOWN SAVE` needs a snapshot written; where none can be (a `dir` nobody may write in),
/// the shutdown is refused and the server stays up, unless `FORCE` is given. `ABORT` goes alone,
/// and `SAVE` with `NOSAVE` is a contradiction.
#[test]
fn shutdown_save_fails_without_force_and_flags_are_checked() {
    let mut d = diff_with_unwritable_dir();
    assert_eq!(
        d.check(&["SHUTDOWN", "SAVE"]),
        b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n"
    );
    d.check(&["SHUTDOWN", "SAVE", "NOW"]);
    assert_eq!(
        d.check(&["SHUTDOWN", "SAVE", "NOSAVE"]),
        b"-ERR syntax error\r\n"
    );
    d.check(&["SHUTDOWN", "ABORT", "NOW"]);
    d.check(&["SHUTDOWN", "NOSAVE", "ABORT"]);
    assert_eq!(
        d.check(&["SHUTDOWN", "ABORT", "ABORT"]),
        b"-ERR No shutdown in progress.\r\n"
    );
    d.check(&["SHUTDOWN", "BOGUS"]);
    // Both are still up.
    assert_eq!(d.check(&["PING"]), b"+PONG\r\n");

    // With FORCE the failed save does not stop the shutdown: both close the connection
    // without a reply.
    let r = d.redis.try_cmd(&["SHUTDOWN", "SAVE", "FORCE"]);
    let l = d.latchkey.try_cmd(&["SHUTDOWN", "SAVE", "FORCE"]);
    assert!(r.is_err(), "redis answered {r:?}");
    assert!(l.is_err(), "latchkey answered {l:?}");
}

/// `FUNCTION FLUSH` takes only `SYNC` or `ASYNC`; anything else is refused and flushes nothing.
#[test]
fn function_flush_checks_its_mode() {
    let mut d = Diff::new();
    let lib = "#!lua name=audit\nredis.register_function('one', function() return 1 end)";
    d.check(&["FUNCTION", "LOAD", lib]);
    assert_eq!(
        d.check(&["FUNCTION", "FLUSH", "bogus"]),
        b"-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n"
    );
    // Refused: the library is still there.
    assert_eq!(d.check(&["FCALL", "one", "0"]), b":1\r\n");
    assert_eq!(d.check(&["FUNCTION", "FLUSH", "async"]), b"+OK\r\n");
    // Done: it is gone when OK is sent.
    assert!(d.check(&["FCALL", "one", "0"]).starts_with(b"-"));
    d.check(&["FUNCTION", "LOAD", lib]);
    assert_eq!(d.check(&["FUNCTION", "FLUSH", "SYNC"]), b"+OK\r\n");
    assert!(d.check(&["FCALL", "one", "0"]).starts_with(b"-"));
}

/// `COMMAND LIST FILTERBY PATTERN|MODULE` filters (it used to list every command whatever the
/// filter).
#[test]
fn command_list_filters() {
    let mut d = Diff::new();
    // Patterns with one match each, so that the (hash-ordered) lists compare byte for byte.
    assert_eq!(
        d.check(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "pexpire?t"]),
        b"*1\r\n$9\r\npexpireat\r\n"
    );
    // Matched without regard to case, as in Redis.
    d.check(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "ZRANK"]);
    assert_eq!(
        d.check(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "nosuch*"]),
        b"*0\r\n"
    );
    assert_eq!(
        d.check(&["COMMAND", "LIST", "FILTERBY", "MODULE", "foo"]),
        b"*0\r\n"
    );
    for bad in [
        &["COMMAND", "LIST", "bogus"][..],
        &["COMMAND", "LIST", "FILTERBY"],
        &["COMMAND", "LIST", "FILTERBY", "PATTERN"],
        &["COMMAND", "LIST", "FILTERBY", "PATTERN", "a", "b"],
        &["COMMAND", "LIST", "FILTERBY", "bogus", "x"],
        &["COMMAND", "LIST", "NOTFILTERBY", "PATTERN", "x"],
    ] {
        assert_eq!(d.check(bad), b"-ERR syntax error\r\n");
    }
    // `*` lists every command and subcommand: what `COMMAND LIST` lists.
    let all = d
        .latchkey
        .cmd(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "*"]);
    assert_eq!(all, d.latchkey.cmd(&["COMMAND", "LIST"]));
    // `ACLCAT` is compared with redis-server in `diff_introspection.rs`.
}

/// The `name:value` fields of one `INFO` section, in order.
fn info_fields(c: &mut RawConn, section: &str) -> Vec<(String, String)> {
    let reply = String::from_utf8(c.cmd(&["INFO", section])).unwrap();
    reply
        .lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The value of `INFO clients`' `blocked_clients`.
fn blocked_clients(c: &mut RawConn) -> String {
    info_fields(c, "clients")
        .into_iter()
        .find(|(k, _)| k == "blocked_clients")
        .expect("a blocked_clients field")
        .1
}

/// Waits until `probe` holds, failing after a generous deadline.
fn until(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !probe() {
        assert!(
            std::time::Instant::now() < deadline,
            "never happened: {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// `INFO clients`' `blocked_clients` counts the clients waiting in `BLPOP` (it was always 0),
/// on both servers alike: one while it waits, none once it is served, none once a waiting
/// client hangs up.
#[test]
fn info_blocked_clients_counts_waiting_clients() {
    let mut d = Diff::new();
    let servers = [d.redis_proc.addr(), d.latchkey_server.addr()];
    for (i, addr) in servers.into_iter().enumerate() {
        let mut admin = RawConn::connect(addr).unwrap();
        assert_eq!(blocked_clients(&mut admin), "0", "server {i}");
        let mut waiter = RawConn::connect(addr).unwrap();
        waiter.send_raw(&RawConn::encode(&["BLPOP", "queue", "0"]));
        until("BLPOP counted", || blocked_clients(&mut admin) == "1");
        assert_eq!(admin.cmd(&["RPUSH", "queue", "job"]), b":1\r\n");
        assert_eq!(
            waiter.read_reply(),
            b"*2\r\n$5\r\nqueue\r\n$3\r\njob\r\n",
            "server {i}"
        );
        until("served BLPOP uncounted", || {
            blocked_clients(&mut admin) == "0"
        });

        let mut quitter = RawConn::connect(addr).unwrap();
        quitter.send_raw(&RawConn::encode(&["BLPOP", "queue", "0"]));
        until("BLPOP counted", || blocked_clients(&mut admin) == "1");
        drop(quitter);
        until("hung-up BLPOP uncounted", || {
            blocked_clients(&mut admin) == "0"
        });
    }
    // The same fields on both, in the same order, and now the same values.
    d.check(&["PING"]);
}

/// `INFO cpu` reports the CPU time the process used (it was a constant 0), under Redis's own
/// field names, and `INFO clients`/`INFO stats` show no field latchkey does not measure:
/// every field latchkey prints there is one redis-server prints too, and the unmeasured ones
/// (`keyspace_hits`, ...) are absent rather than a made-up 0.
#[test]
fn info_reports_only_measured_fields() {
    let mut d = Diff::new();
    // Some work, so that the CPU time is not zero.
    for i in 0..2000 {
        d.latchkey.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    let cpu = info_fields(&mut d.latchkey, "cpu");
    let seconds: f64 = cpu
        .iter()
        .filter(|(k, _)| k == "used_cpu_sys" || k == "used_cpu_user")
        .map(|(_, v)| v.parse::<f64>().expect("a number of seconds"))
        .sum();
    assert!(seconds > 0.0, "{cpu:?}");
    for section in ["cpu", "clients", "stats"] {
        let ours = info_fields(&mut d.latchkey, section);
        let theirs: Vec<String> = info_fields(&mut d.redis, section)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        for (k, _) in &ours {
            // `pubsub_clients` is a Redis 7.4 field, counted for real (docs/COMPATIBILITY.md).
            assert!(
                theirs.contains(k) || k == "pubsub_clients",
                "INFO {section}: {k} is not a Redis field"
            );
        }
    }
    let all = String::from_utf8(d.latchkey.cmd(&["INFO", "everything"])).unwrap();
    for unmeasured in [
        "keyspace_hits",
        "keyspace_misses",
        "client_recent_max_input_buffer",
        "client_recent_max_output_buffer",
        "clients_in_timeout_table",
    ] {
        assert!(!all.contains(unmeasured), "{unmeasured} is shown");
    }
}

/// `CONFIG RESETSTAT` zeroes the replication counters of `INFO stats` too (`sync_full` stayed
/// as it was), as on redis-server: each master served one full sync to its replica, and
/// after the reset both say none.
#[test]
fn config_resetstat_zeroes_the_sync_counters() {
    use latchkey_tests::pair::cmd;
    use latchkey_tests::{LatchkeyPair, RedisPair, ReplicatedPair};
    let stat = |addr, field: &str| {
        info_fields(&mut RawConn::connect(addr).unwrap(), "stats")
            .into_iter()
            .find(|(k, _)| k == field)
            .map(|(_, v)| v)
    };
    let pairs: [Box<dyn ReplicatedPair>; 2] = [
        Box::new(RedisPair::start()),
        Box::new(LatchkeyPair::start()),
    ];
    for pair in &pairs {
        let master = pair.master();
        let name = pair.name();
        assert_eq!(stat(master, "sync_full").as_deref(), Some("1"), "{name}");
        assert_eq!(cmd(master, &["CONFIG", "RESETSTAT"]), b"+OK\r\n", "{name}");
        for counter in ["sync_full", "sync_partial_ok", "sync_partial_err"] {
            assert_eq!(
                stat(master, counter).as_deref(),
                Some("0"),
                "{name}: {counter}"
            );
        }
    }
}

/// Options given twice or with too many arguments are refused as Redis refuses them (they
/// used to be taken, the last one winning, or answered as if absent), and a refused flush
/// flushes nothing.
#[test]
fn repeated_or_extra_options_are_refused() {
    let mut d = Diff::new();
    let sha = d.check(&["SCRIPT", "LOAD", "return 1"]);
    let sha = String::from_utf8_lossy(&sha[5..sha.len() - 2]).into_owned();
    for bad in [
        &["SCRIPT", "FLUSH", "bogus"][..],
        &["SCRIPT", "FLUSH", "ASYNC", "x"],
        &["SCRIPT", "FLUSH", "SYNC", "ASYNC", "x"],
        &["FUNCTION", "FLUSH", "ASYNC", "x"],
        &["FUNCTION", "LIST", "WITHCODE", "WITHCODE"],
        &["FUNCTION", "LIST", "LIBRARYNAME", "a", "LIBRARYNAME", "b"],
        &["FUNCTION", "LIST", "LIBRARYNAME"],
        &["FUNCTION", "LIST", "bogus"],
        &["PUBSUB", "HELP", "x"],
    ] {
        assert!(d.check(bad).starts_with(b"-ERR "), "{bad:?}");
    }
    // The refused SCRIPT FLUSH left the script cached.
    assert_eq!(d.check(&["SCRIPT", "EXISTS", &sha]), b"*1\r\n:1\r\n");
    assert_eq!(d.check(&["SCRIPT", "FLUSH", "ASYNC"]), b"+OK\r\n");
    assert_eq!(d.check(&["SCRIPT", "EXISTS", &sha]), b"*1\r\n:0\r\n");
}

/// `COMMAND GETKEYS` finds the keys of scripts and functions from their key count (it said
/// they had none), and checks its own arity as Redis does.
#[test]
fn command_getkeys_reads_the_key_count() {
    let mut d = Diff::new();
    assert_eq!(
        d.check(&["COMMAND", "GETKEYS", "EVAL", "return 1", "2", "a", "b", "c"]),
        b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        d.check(&["COMMAND", "GETKEYS", "FCALL_RO", "f", "1", "k", "arg"]),
        b"*1\r\n$1\r\nk\r\n"
    );
    for line in [
        "COMMAND GETKEYS EVALSHA abc 0",
        "COMMAND GETKEYS EVAL x 2 onlyone",
        "COMMAND GETKEYS EVAL x notanumber k",
        "COMMAND GETKEYS EVAL x -1",
        "COMMAND GETKEYS GET",
        "COMMAND GETKEYS PING",
        "COMMAND GETKEYS ECHO a b",
        "COMMAND GETKEYS GET a b",
        "COMMAND GETKEYS NOSUCH a",
        "COMMAND GETKEYS BLPOP a b 0",
        "COMMAND GETKEYS MSET a 1 b 2",
    ] {
        let args: Vec<&str> = line.split(' ').collect();
        d.check(&args);
    }
}

/// `INFO` has the `Modules` (empty: latchkey loads none) and `Cluster` sections Redis shows by
/// default; asked for by name they used to come back empty.
#[test]
fn info_modules_and_cluster_sections() {
    let mut d = Diff::new();
    assert_eq!(d.check(&["INFO", "modules"]), b"$11\r\n# Modules\r\n\r\n");
    assert_eq!(
        d.check(&["INFO", "cluster"]),
        b"$30\r\n# Cluster\r\ncluster_enabled:0\r\n\r\n"
    );
    d.check(&["INFO", "nosuchsection"]);
    let titles = |reply: Vec<u8>| -> Vec<String> {
        String::from_utf8(reply)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("# "))
            .map(str::to_string)
            .collect()
    };
    // The default sections, in order (`Errorstats` included).
    let (r, l) = d.both(&["INFO"]);
    assert_eq!(titles(l), titles(r));
}

/// `ZRANGE` takes `BYSCORE` and `REV` once each (a second one was taken silently); `SET` and
/// `GETEX` take the same expiry option again, the last value counting (they refused what
/// Redis accepts), but never two different ones. Replies and resulting TTLs match Redis.
#[test]
fn repeated_range_and_expiry_options() {
    let mut d = Diff::new();
    d.check(&["ZADD", "z", "1", "a", "2", "b"]);
    for line in [
        "ZRANGE z 0 -1 REV REV",
        "ZRANGE z 0 -1 BYSCORE BYSCORE",
        "ZRANGE z 0 -1 REV",
        "ZRANGE z 0 -1 WITHSCORES WITHSCORES",
        "ZRANGE z -inf +inf BYSCORE LIMIT 0 1 LIMIT 1 1",
        "ZREVRANGE z 0 -1 LIMIT 0 1",
        "ZREVRANGE z 0 -1 LIMIT 0",
        "SET k v EX 10 PX 10",
        "SET k v KEEPTTL EX 10",
        "GETEX k PX 100 EX 100",
        "GETEX k PERSIST EX 100",
        "PUBSUB CHANNELS a b",
        "CLIENT LIST ID",
    ] {
        let args: Vec<&str> = line.split(' ').collect();
        d.check(&args);
    }
    // The last of repeated values is the one applied.
    let seconds = |reply: Vec<u8>| -> i64 {
        String::from_utf8_lossy(&reply[1..reply.len() - 2])
            .parse()
            .unwrap()
    };
    assert_eq!(
        d.check(&["SET", "k", "v", "EX", "5", "EX", "1000"]),
        b"+OK\r\n"
    );
    assert!(seconds(d.check_ttl(&["TTL", "k"], 0, 1)) > 900);
    assert_eq!(
        d.check(&["GETEX", "k", "PX", "1", "PX", "2000000"]),
        b"$1\r\nv\r\n"
    );
    assert!(seconds(d.check_ttl(&["TTL", "k"], 0, 1)) > 1900);
    assert_eq!(
        d.check(&["GETEX", "k", "PERSIST", "PERSIST"]),
        b"$1\r\nv\r\n"
    );
    assert_eq!(d.check(&["TTL", "k"]), b":-1\r\n");
}
