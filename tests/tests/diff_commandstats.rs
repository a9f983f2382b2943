//! `INFO commandstats` and `SLOWLOG` against a real redis-server: the same commands on both
//! servers give the same calls, refusals and failures per command (subcommands of containers
//! apart, calls inside `EXEC` and scripts counted), and the same slow-log entries — the
//! arguments as sent (cut as Redis cuts them), the client's name, `EXEC` left out, a blocked
//! command logged once served. Only what is a time (`usec`, an entry's timestamp and
//! duration) and the client's port may differ, and only they are masked.

use std::collections::BTreeMap;

use latchkey_tests::diff::split_args;
use latchkey_tests::{Diff, RawConn};

/// The text of a bulk or verbatim `INFO` reply, without the RESP framing.
fn body(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    let start = text.find("\r\n").map_or(0, |i| i + 2);
    text[start..].trim_start_matches("txt:").to_string()
}

/// `INFO commandstats` as `name -> calls,rejected_calls,failed_calls` (the times left out).
fn counts(reply: &[u8]) -> BTreeMap<String, String> {
    body(reply)
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .map(|l| {
            let (name, fields) = l.split_once(':').expect("name:fields");
            let kept: Vec<&str> = fields
                .split(',')
                .filter(|f| !f.starts_with("usec"))
                .collect();
            (name.to_string(), kept.join(","))
        })
        .collect()
}

const STEPS: &[&str] = &[
    "CONFIG RESETSTAT",
    "SET a 1",
    "GET a",
    "GET a b",
    "INCR a",
    "LPUSH a x",
    "NOSUCHCOMMAND",
    "MULTI",
    "SET b 1",
    "INCR b",
    "EXEC",
    "MULTI",
    "SET b 1",
    "GET b c",
    "EXEC",
    r#"EVAL "redis.call('set','k','v') return redis.call('get','k')" 0"#,
    r#"EVAL "return redis.pcall('lpush','k','x')" 0"#,
    "EVALSHA 0000000000000000000000000000000000000000 0",
    "CONFIG GET maxmemory",
    "CONFIG NOSUCHSUB",
    "CONFIG GET",
    "CLIENT SETNAME someone",
    "OBJECT ENCODING a",
    "PING",
];

#[test]
fn commandstats_count_as_redis_counts() {
    let mut d = Diff::new();
    for line in STEPS {
        d.check(&split_args(line));
    }
    let (r, l) = d.both(&["INFO", "commandstats"]);
    let (theirs, ours) = (counts(&r), counts(&l));
    assert_eq!(
        ours, theirs,
        "\n  redis:    {theirs:?}\n  latchkey: {ours:?}"
    );
    // What Redis said, so that two equally silent servers cannot pass.
    assert_eq!(
        theirs.get("get").map(String::as_str),
        Some("calls=2,rejected_calls=2,failed_calls=0")
    );
    assert!(theirs.contains_key("config|get"), "{theirs:?}");
    // Not in the default section set, in both.
    let (r, l) = d.both(&["INFO"]);
    assert!(!body(&r).contains("cmdstat_") && !body(&l).contains("cmdstat_"));
    // RESETSTAT empties it: what is left is the RESETSTAT itself, counted once it ran.
    d.check(&["CONFIG", "RESETSTAT"]);
    let (r, l) = d.both(&["INFO", "commandstats"]);
    assert_eq!(counts(&l), counts(&r));
    assert_eq!(
        counts(&r).into_iter().collect::<Vec<_>>(),
        [(
            "config|resetstat".to_string(),
            "calls=1,rejected_calls=0,failed_calls=0".to_string()
        )]
    );
}

/// A `SLOWLOG GET` reply with what is a time (each entry's timestamp and duration) and the
/// client's port masked: `*6` opens an entry, whose second and third fields are the times;
/// an `ip:port` field becomes `ADDR`.
fn masked(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    let lines: Vec<&str> = text.split("\r\n").collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let times_follow =
            i + 3 < lines.len() && lines[i + 1..=i + 3].iter().all(|l| l.starts_with(':'));
        if line == "*6" && times_follow {
            out.extend([line, lines[i + 1], ":T", ":T"]);
            i += 4;
            continue;
        }
        if line.starts_with('$') && lines.get(i + 1).is_some_and(|n| is_addr(n)) {
            out.extend(["$?", "ADDR"]);
            i += 2;
            continue;
        }
        out.push(line);
        i += 1;
    }
    out.join(" ")
}

fn is_addr(s: &str) -> bool {
    s.rsplit_once(':').is_some_and(|(ip, port)| {
        ip.parse::<std::net::IpAddr>().is_ok() && port.parse::<u16>().is_ok()
    })
}

#[track_caller]
fn same_slowlog(d: &mut Diff, args: &[&str]) -> String {
    let (r, l) = d.both(args);
    let (theirs, ours) = (masked(&r), masked(&l));
    assert_eq!(ours, theirs, "\n  redis:    {theirs}\n  latchkey: {ours}");
    theirs
}

#[test]
fn the_slow_log_keeps_what_redis_keeps() {
    let mut d = Diff::new();
    for line in [
        "CONFIG SET slowlog-log-slower-than 0",
        "CONFIG SET slowlog-max-len 6",
        "CLIENT SETNAME logged",
        "SLOWLOG RESET",
        "SET k v",
        // 33 arguments: the log keeps 31 and says how many more.
        "SADD set 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33",
        "MULTI",
        "INCR n",
        "EXEC",
    ] {
        d.check(&split_args(line));
    }
    let long = "A".repeat(129);
    d.check(&["SADD", "set", "foo", &long]);
    let all = same_slowlog(&mut d, &["SLOWLOG", "GET", "-1"]);
    assert!(all.contains("... (2 more arguments)"), "{all}");
    assert!(all.contains("... (1 more bytes)"), "{all}");
    assert!(!all.contains("EXEC"), "EXEC is not logged: {all}");
    assert!(all.contains("logged"), "the client's name: {all}");
    same_slowlog(&mut d, &["SLOWLOG", "GET", "2"]);
    same_slowlog(&mut d, &["SLOWLOG", "GET", "0"]);
    d.check(&["SLOWLOG", "LEN"]);
    // A lower maximum drops the oldest at once.
    d.check(&["CONFIG", "SET", "slowlog-max-len", "2"]);
    d.check(&["SLOWLOG", "LEN"]);
    same_slowlog(&mut d, &["SLOWLOG", "GET"]);
    // Disabled: nothing more is logged.
    d.check(&["CONFIG", "SET", "slowlog-max-len", "10"]);
    d.check(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    d.check(&["SLOWLOG", "RESET"]);
    d.check(&["SET", "k", "v"]);
    assert_eq!(d.check(&["SLOWLOG", "LEN"]), b":0\r\n");
    for line in [
        "SLOWLOG HELP",
        "SLOWLOG GET -2",
        "SLOWLOG GET abc",
        "SLOWLOG GET 1 2",
        "SLOWLOG LEN x",
        "SLOWLOG RESET x",
        "SLOWLOG NOSUCH",
        "SLOWLOG",
        "CONFIG SET slowlog-max-len -1",
        "CONFIG SET slowlog-log-slower-than -2",
        "CONFIG SET slowlog-log-slower-than x",
        "CONFIG GET slowlog-max-len",
        "CONFIG GET slowlog-log-slower-than",
    ] {
        d.check(&split_args(line));
    }
}

/// A blocked command is logged once served, as sent (`BLPOP`, not the `LPOP` it became for the
/// replicas), after the push that served it.
#[test]
fn a_blocked_command_is_logged_once_served() {
    let mut d = Diff::new();
    // Nothing is logged while the test waits for the clients to block: the servers may be
    // polled a different number of times, and each poll would take an entry id.
    d.check(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    let mut waiters = [
        RawConn::connect(d.redis_proc.addr()).unwrap(),
        RawConn::connect(d.latchkey_server.addr()).unwrap(),
    ];
    for w in &mut waiters {
        w.send_raw(&RawConn::encode(&["BLPOP", "l", "0"]));
    }
    latchkey_tests::raw::wait_blocked_clients(d.redis_proc.addr(), 1);
    latchkey_tests::raw::wait_blocked_clients(d.latchkey_server.addr(), 1);
    // The threshold when the command is served is the one that counts, in both.
    d.check(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    d.check(&["SLOWLOG", "RESET"]);
    d.check(&["LPUSH", "l", "a"]);
    for w in &mut waiters {
        assert_eq!(w.read_reply(), b"*2\r\n$1\r\nl\r\n$1\r\na\r\n");
    }
    let log = same_slowlog(&mut d, &["SLOWLOG", "GET"]);
    assert!(log.contains("BLPOP"), "{log}");
}
