//! Every container command's `HELP` against a real redis-server 7.0.15, byte for byte, in
//! RESP2 and in RESP3.
//!
//! A container whose subcommands latchkey all runs answers exactly Redis's text. One where
//! latchkey runs only some (`DEBUG`, `SCRIPT`, `COMMAND`) answers Redis's text without the
//! entries of the others: a help must not offer what the server then refuses. The test
//! checks both halves: the expected reply is Redis's with those entries taken out, and each
//! subcommand taken out is refused by latchkey as unknown.

use latchkey_tests::raw::show;
use latchkey_tests::{Diff, RawConn};

/// The containers of Redis 7.0.15 with a `HELP` (`MODULE` aside: see
/// [`module_is_not_a_command`]), and for each the subcommands of Redis's text that latchkey
/// does not run.
const CONTAINERS: &[(&str, &[&str])] = &[
    ("ACL", &[]),
    ("CLIENT", &[]),
    ("CLUSTER", &[]),
    ("COMMAND", &["GETKEYSANDFLAGS"]),
    ("CONFIG", &[]),
    (
        "DEBUG",
        &[
            "AOF-FLUSH-SLEEP",
            "ASSERT",
            "CHANGE-REPL-ID",
            "CONFIG-REWRITE-FORCE-ALL",
            "CRASH-AND-RECOVER",
            "ERROR",
            "LEAK",
            "LOG",
            "HTSTATS",
            "HTSTATS-KEY",
            "LOADAOF",
            "REPLICATE",
            "MALLCTL",
            "MALLCTL-STR",
            "DROP-CLUSTER-PACKET-FILTER",
            "OOM",
            "PANIC",
            "RESTART",
            "SDSLEN",
            "SEGFAULT",
            "QUICKLIST-PACKED-THRESHOLD",
            "SET-SKIP-CHECKSUM-VALIDATION",
            "STRINGMATCH-TEST",
            "STRUCTSIZE",
            "LISTPACK",
            "QUICKLIST",
            "CLIENT-EVICTION",
            "PAUSE-CRON",
            "REPLYBUFFER",
            "CLUSTERLINK",
        ],
    ),
    ("FUNCTION", &[]),
    ("LATENCY", &[]),
    ("MEMORY", &[]),
    ("OBJECT", &[]),
    ("PUBSUB", &[]),
    ("SCRIPT", &["DEBUG"]),
    ("SLOWLOG", &[]),
    ("XGROUP", &[]),
    ("XINFO", &[]),
];

/// The status lines of a `HELP` reply (an array of simple strings).
fn lines(reply: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(reply);
    let mut rows = text.split("\r\n");
    let head = rows.next().unwrap_or_default();
    let n: usize = head
        .strip_prefix('*')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not an array: {}", show(reply)));
    let out: Vec<String> = rows
        .take(n)
        .map(|l| {
            l.strip_prefix('+')
                .unwrap_or_else(|| panic!("not a status line {l:?} in {}", show(reply)))
                .to_string()
        })
        .collect();
    assert_eq!(out.len(), n, "{}", show(reply));
    out
}

/// `lines` (a `HELP` text: a first line, then entries, each a synopsis and its indented
/// description) without the entries whose synopsis starts with one of `dropped`, as a RESP
/// array of status lines.
fn without(lines: &[String], dropped: &[&str]) -> Vec<u8> {
    let mut kept: Vec<&String> = vec![&lines[0]];
    let mut keep = true;
    for line in &lines[1..] {
        if !line.starts_with(' ') {
            let name = line.split(' ').next().unwrap_or_default();
            keep = !dropped.contains(&name);
        }
        if keep {
            kept.push(line);
        }
    }
    let mut out = format!("*{}\r\n", kept.len()).into_bytes();
    for l in kept {
        out.extend_from_slice(format!("+{l}\r\n").as_bytes());
    }
    out
}

fn same_help(d: &mut Diff) {
    for (container, not_run) in CONTAINERS {
        let (r, l) = d.both(&[container, &"HELP"]);
        if r.starts_with(b"-") {
            // `CLUSTER HELP` on a server not in cluster mode: Redis's error, on both.
            assert_eq!(show(&l), show(&r), "{container} HELP");
            continue;
        }
        let theirs = lines(&r);
        // Every entry said to be missing is in Redis's text: the list is not stale.
        for sub in *not_run {
            assert!(
                theirs.iter().any(|t| t.split(' ').next() == Some(sub)),
                "{container} HELP of redis-server has no {sub}"
            );
        }
        let expected = without(&theirs, not_run);
        assert!(
            l == expected,
            "{container} HELP differs\n  expected: {}\n  latchkey: {}",
            show(&expected),
            show(&l)
        );
    }
}

#[test]
fn every_container_help_is_redis_s_text_in_resp2_and_resp3() {
    let mut d = Diff::with_redis_args(&["--enable-debug-command", "yes"]);
    same_help(&mut d);
    let (r, l) = d.both(&["HELLO", "3"]);
    assert!(r.starts_with(b"%") && l.starts_with(b"%"), "{}", show(&l));
    same_help(&mut d);
}

/// What a help leaves out, latchkey refuses: each subcommand taken out of Redis's text is
/// unknown to latchkey (with the arguments Redis's synopsis shows, so that no arity check
/// answers first).
#[test]
fn subcommands_left_out_of_a_help_are_refused() {
    let server = latchkey_server::Server::builder()
        .start_blocking()
        .expect("start latchkey");
    let mut c = RawConn::connect(server.addr()).expect("connect");
    for (container, not_run) in CONTAINERS {
        for sub in *not_run {
            for args in [vec![*container, sub], vec![*container, sub, "x", "y"]] {
                let reply = String::from_utf8_lossy(&c.cmd(&args)).into_owned();
                // DEBUG words an unknown subcommand as Redis's DEBUG does.
                let refused = reply.starts_with(&format!("-ERR unknown subcommand '{sub}'."))
                    || reply.starts_with(&format!(
                        "-ERR unknown subcommand or wrong number of arguments for '{sub}'."
                    ));
                assert!(refused, "{args:?}: {reply:?}");
            }
        }
    }
}

/// `MODULE` has a `HELP` on Redis; latchkey loads no modules and has no `MODULE` command, so
/// it answers Redis's own text for an unknown command.
#[test]
fn module_is_not_a_command() {
    let mut d = Diff::new();
    let (r, l) = d.both(&["MODULE", "HELP"]);
    assert!(r.starts_with(b"*"), "{}", show(&r));
    assert_eq!(
        show(&l),
        show(b"-ERR unknown command 'MODULE', with args beginning with: 'HELP' \r\n")
    );
}
