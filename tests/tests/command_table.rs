//! The command table, checked by machine against redis-server 7.0's: every command latchkey
//! answers is a Redis command (or one of latchkey's own `LATCHKEY.*`), with Redis's arity,
//! key positions and flags, as `COMMAND INFO` reports them on both servers. A client library
//! or a proxy that routes by `COMMAND INFO` (cluster clients do) must find the same table.

use std::collections::BTreeMap;

use latchkey_server::{BlockingServer, Server};
use latchkey_tests::{RawConn, RedisProcess};

/// A RESP2 reply, as far as `COMMAND INFO` needs.
#[derive(Debug, Clone, PartialEq)]
enum Resp {
    Str(String),
    Int(i64),
    Array(Vec<Resp>),
    Nil,
}

fn parse(b: &[u8], at: &mut usize) -> Resp {
    let end = b[*at..]
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("a CRLF")
        + *at;
    let line = std::str::from_utf8(&b[*at + 1..end]).expect("UTF-8");
    let kind = b[*at];
    *at = end + 2;
    match kind {
        b'+' | b'-' => Resp::Str(line.to_string()),
        b':' => Resp::Int(line.parse().expect("an integer")),
        b'$' => {
            let n: i64 = line.parse().expect("a length");
            if n < 0 {
                return Resp::Nil;
            }
            let s = String::from_utf8_lossy(&b[*at..*at + n as usize]).into_owned();
            *at += n as usize + 2;
            Resp::Str(s)
        }
        b'*' => {
            let n: i64 = line.parse().expect("a count");
            if n < 0 {
                return Resp::Nil;
            }
            Resp::Array((0..n).map(|_| parse(b, at)).collect())
        }
        other => panic!("unexpected RESP type {:?}", other as char),
    }
}

/// What the table says of one command: arity, flags, first key, last key, step.
#[derive(Debug, PartialEq)]
struct Info {
    arity: i64,
    flags: Vec<String>,
    keys: (i64, i64, i64),
}

/// `COMMAND INFO name` on `c`, `None` for a command the server does not have.
fn info(c: &mut RawConn, name: &str) -> Option<Info> {
    let reply = c.cmd(&["COMMAND", "INFO", name]);
    let Resp::Array(mut outer) = parse(&reply, &mut 0) else {
        panic!("COMMAND INFO {name}: not an array");
    };
    let Resp::Array(fields) = outer.remove(0) else {
        return None;
    };
    let int = |i: usize| match &fields[i] {
        Resp::Int(n) => *n,
        other => panic!("COMMAND INFO {name}: field {i} is {other:?}"),
    };
    let Resp::Array(flags) = &fields[2] else {
        panic!("COMMAND INFO {name}: no flags");
    };
    let mut flags: Vec<String> = flags
        .iter()
        .map(|f| match f {
            Resp::Str(s) => s.clone(),
            other => panic!("COMMAND INFO {name}: flag {other:?}"),
        })
        .collect();
    flags.sort();
    Some(Info {
        arity: int(1),
        flags,
        keys: (int(3), int(4), int(5)),
    })
}

/// Every command name `COMMAND` lists on `c`.
fn names(c: &mut RawConn) -> Vec<String> {
    let Resp::Array(all) = parse(&c.cmd(&["COMMAND", "LIST"]), &mut 0) else {
        panic!("COMMAND LIST: not an array");
    };
    let mut names: Vec<String> = all
        .into_iter()
        .map(|n| match n {
            Resp::Str(s) => s.to_ascii_lowercase(),
            other => panic!("COMMAND LIST: {other:?}"),
        })
        .collect();
    names.sort();
    names
}

/// Commands of a later Redis that latchkey answers (with that release's behaviour), which
/// redis-server 7.0 does not have: `WAITAOF` (7.2), for the lock that waits for the AOF.
const NEWER: &[&str] = &["waitaof"];

/// Where latchkey's table knowingly differs, and why. The test fails if one of these stops
/// differing too, so the list stays true.
const KNOWN: &[(&str, &str)] = &[(
    "watch",
    "no allow_busy: Redis runs WATCH during a busy script; latchkey makes it wait for the \
     script, because WATCH's read may expire (delete) the key, a write that must not fall \
     inside the script's",
)];

#[test]
fn every_command_is_redis_s_with_redis_s_arity_keys_and_flags() {
    let latchkey: BlockingServer = Server::builder().start_blocking().expect("start latchkey");
    let redis = RedisProcess::spawn(&[]);
    let mut l = RawConn::connect(latchkey.addr()).expect("connect latchkey");
    let mut r = RawConn::connect(redis.addr()).expect("connect redis-server");

    let ours = names(&mut l);
    // The public table agrees with what the server lists.
    let mut table: Vec<String> = latchkey_server::commands::all()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    table.sort();
    assert_eq!(
        ours, table,
        "COMMAND LIST and latchkey_server::commands::all()"
    );

    let mut not_redis = Vec::new();
    let mut differ = BTreeMap::new();
    for name in &ours {
        if name.starts_with("latchkey.") || NEWER.contains(&name.as_str()) {
            continue;
        }
        let (Some(mine), theirs) = (info(&mut l, name), info(&mut r, name)) else {
            panic!("COMMAND LIST names {name}, COMMAND INFO {name} does not know it");
        };
        match theirs {
            None => not_redis.push(name.clone()),
            Some(theirs) if KNOWN.iter().any(|(n, _)| n == name) => {
                assert_ne!(
                    theirs, mine,
                    "{name} no longer differs: take it out of KNOWN"
                );
            }
            Some(theirs) if theirs != mine => {
                differ.insert(
                    name.clone(),
                    format!("latchkey {mine:?}\n    redis {theirs:?}"),
                );
            }
            Some(_) => {}
        }
    }
    assert!(
        not_redis.is_empty(),
        "commands Redis 7.0 does not have: {not_redis:?}"
    );
    assert!(
        differ.is_empty(),
        "{} commands differ from Redis's table:\n{}",
        differ.len(),
        differ
            .iter()
            .map(|(n, d)| format!("  {n}:\n    {d}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Redis's commands latchkey does not answer are refused as unknown (never accepted and
    // ignored): each of them, sent with no arguments, gets Redis's unknown-command error.
    // (Subcommands, `client|kill`, are listed by Redis 7.0 too; they belong to containers.)
    let missing: Vec<String> = names(&mut r)
        .into_iter()
        .filter(|n| !n.contains('|') && !ours.contains(n))
        .collect();
    for name in &missing {
        let reply = String::from_utf8_lossy(&l.cmd(&[name.as_str()])).into_owned();
        assert!(
            reply.starts_with(&format!("-ERR unknown command '{name}'")),
            "{name} is not in the table but answers {reply:?}"
        );
    }
    eprintln!(
        "{} commands checked against redis-server; {} of Redis's are not answered: {}",
        ours.len(),
        missing.len(),
        missing.join(" ")
    );
}
