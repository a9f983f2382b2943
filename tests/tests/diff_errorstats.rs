//! Error statistics against a real redis-server: after each step, `INFO errorstats` (whole)
//! and `total_error_replies` (from `INFO stats`) are the same on both servers. Steps cover
//! refusals before a command runs, failures, errors inside `EXEC`, the ways a script can
//! fail (each counted once), `CONFIG RESETSTAT`, and both protocols.

use latchkey_tests::Diff;

/// Runs one command on both servers (replies compared), then, outside a transaction,
/// compares the error statistics.
#[track_caller]
fn step(d: &mut Diff, line: &str, in_multi: &mut bool) {
    let args = latchkey_tests::diff::split_args(line);
    let reply = d.check(&args);
    let name = args[0].to_ascii_uppercase();
    if name == "MULTI" && reply.starts_with(b"+OK") {
        *in_multi = true;
    }
    if matches!(name.as_str(), "EXEC" | "DISCARD") {
        *in_multi = false;
    }
    if *in_multi {
        return;
    }
    let (r, l) = d.both(&["INFO", "errorstats"]);
    assert_eq!(
        body(&l),
        body(&r),
        "INFO errorstats after {line:?}\n  redis:    {}\n  latchkey: {}",
        body(&r),
        body(&l)
    );
    let (r, l) = d.both(&["INFO", "stats"]);
    assert_eq!(total(&l), total(&r), "total_error_replies after {line:?}");
}

/// The text of a bulk or verbatim `INFO` reply, without the RESP framing.
fn body(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply).into_owned();
    let start = text.find("\r\n").map_or(0, |i| i + 2);
    text[start..].trim_start_matches("txt:").to_string()
}

/// `total_error_replies` from an `INFO stats` reply.
fn total(reply: &[u8]) -> Option<u64> {
    body(reply)
        .lines()
        .find_map(|l| l.strip_prefix("total_error_replies:"))
        .and_then(|v| v.trim().parse().ok())
}

const STEPS: &[&str] = &[
    "CONFIG RESETSTAT",
    "SET s v",
    "LPUSH s x",
    "GET",
    "NOSUCHCOMMAND a b",
    "INCR s",
    "SELECT 99",
    "EVALSHA 0000000000000000000000000000000000000000 0",
    "MULTI",
    "SET a b",
    "LPUSH s x",
    "INCR s",
    "EXEC",
    "MULTI",
    "SET",
    "EXEC",
    "EXEC",
    "DISCARD",
    // Scripts: a failed call counts when it fails, and not again when the script ends with it.
    "EVAL \"return redis.call('lpush', 's', 'x')\" 0",
    "EVAL \"return redis.pcall('lpush', 's', 'x')\" 0",
    "EVAL \"local t = redis.pcall('lpush', 's', 'x') return 1\" 0",
    "EVAL \"return {redis.pcall('incr', 's')}\" 0",
    "EVAL \"return redis.call('nosuch')\" 0",
    "EVAL \"return redis.call('get')\" 0",
    "EVAL \"return redis.call()\" 0",
    "EVAL \"return redis.pcall({})\" 0",
    "EVAL \"return redis.error_reply('MY_CODE custom')\" 0",
    "EVAL \"return redis.error_reply('')\" 0",
    "EVAL \"return {err = 'OTHER thing'}\" 0",
    "EVAL \"error('boom')\" 0",
    "EVAL \"return nosuchfunction()\" 0",
    "EVAL_RO \"return redis.call('set', 'x', 'y')\" 1 x",
    "EVAL_RO \"return redis.pcall('set', 'x', 'y')\" 1 x",
    "EVAL \"return redis.pcall('set', 'x', 'y').ignore_error_stats_update\" 0",
    "EVAL \"return redis.pcall('lpush', 's', 'x').ignore_error_stats_update\" 0",
    "EVAL \"local ok, e = pcall(redis.call, 'lpush', 's', 'x') return e\" 0",
    "EVAL",
    "EVAL a",
    // A prefix is the first word when a space comes within the first 31 bytes.
    "EVAL \"return redis.error_reply('ABCDEFGHIJKLMNOPQRSTUVWXYZABCD x')\" 0",
    "EVAL \"return redis.error_reply('ABCDEFGHIJKLMNOPQRSTUVWXYZABCDE x')\" 0",
    "EVAL \"return redis.error_reply('NOSPACE')\" 0",
    "EVAL \"return redis.error_reply(' leading')\" 0",
    "SORT s",
    "SORT_RO s STORE d",
    "SWAPDB x 0",
    "CONFIG RESETSTAT",
    "INCR s",
];

#[test]
fn errorstats_resp2() {
    let mut d = Diff::new();
    let mut in_multi = false;
    for line in STEPS {
        step(&mut d, line, &mut in_multi);
    }
}

#[test]
fn errorstats_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    let mut in_multi = false;
    for line in STEPS {
        step(&mut d, line, &mut in_multi);
    }
}
