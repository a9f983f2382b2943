//! The command table, checked by machine against redis-server 7.0's: every command latchkey
//! answers is a Redis command (or one of latchkey's own `LATCHKEY.*`), with Redis's arity,
//! key positions, flags and ACL categories, as `COMMAND INFO` reports them on both servers,
//! and under Redis's group in `COMMAND DOCS`. A client library
//! or a proxy that routes by `COMMAND INFO` (cluster clients do) must find the same table.

use std::collections::BTreeMap;

use latchkey_client::native::RedisTransport;
use latchkey_client::transport::args;
use latchkey_client::{Reply, Transport};
use latchkey_server::Server;
use latchkey_tests::RedisProcess;

/// What the table says of one command: arity, flags, first key, last key, step, ACL
/// categories (in the order the server lists them), and its group in `COMMAND DOCS`.
#[derive(Debug, PartialEq)]
struct Info {
    arity: i64,
    flags: Vec<String>,
    keys: (i64, i64, i64),
    categories: Vec<String>,
    group: String,
}

/// A string element of a reply (a flag, a command name), whichever way it came.
fn text(r: &Reply) -> String {
    match r {
        Reply::Status(s) => s.clone(),
        Reply::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("expected a string, got {other:?}"),
    }
}

async fn call(c: &RedisTransport, a: &[&str]) -> Reply {
    c.command(args(a.iter().copied()))
        .await
        .expect("the server answers")
}

/// `COMMAND INFO name` on `c`, `None` for a command the server does not have.
async fn info(c: &RedisTransport, name: &str) -> Option<Info> {
    let Reply::Array(mut outer) = call(c, &["COMMAND", "INFO", name]).await else {
        panic!("COMMAND INFO {name}: not an array");
    };
    let Reply::Array(fields) = outer.remove(0) else {
        return None;
    };
    let int = |i: usize| match &fields[i] {
        Reply::Int(n) => *n,
        other => panic!("COMMAND INFO {name}: field {i} is {other:?}"),
    };
    let Reply::Array(flags) = &fields[2] else {
        panic!("COMMAND INFO {name}: no flags");
    };
    let mut flags: Vec<String> = flags.iter().map(text).collect();
    flags.sort();
    let Reply::Array(categories) = &fields[6] else {
        panic!("COMMAND INFO {name}: no ACL categories");
    };
    Some(Info {
        arity: int(1),
        flags,
        keys: (int(3), int(4), int(5)),
        categories: categories.iter().map(text).collect(),
        group: group(c, name).await,
    })
}

/// The `group` field of `COMMAND DOCS name` (a map, flattened to pairs in RESP2).
async fn group(c: &RedisTransport, name: &str) -> String {
    let Reply::Array(docs) = call(c, &["COMMAND", "DOCS", name]).await else {
        panic!("COMMAND DOCS {name}: not an array");
    };
    let Some(Reply::Array(fields)) = docs.get(1) else {
        panic!("COMMAND DOCS {name}: no documentation");
    };
    fields
        .chunks(2)
        .find(|kv| text(&kv[0]) == "group")
        .map(|kv| text(&kv[1]))
        .unwrap_or_else(|| panic!("COMMAND DOCS {name}: no group"))
}

/// Every command name `COMMAND LIST` gives on `c` (its subcommands, `config|get`, left out).
async fn names(c: &RedisTransport) -> Vec<String> {
    let Reply::Array(all) = call(c, &["COMMAND", "LIST"]).await else {
        panic!("COMMAND LIST: not an array");
    };
    let mut names: Vec<String> = all
        .iter()
        .map(|n| text(n).to_ascii_lowercase())
        .filter(|n| !n.contains('|'))
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

#[tokio::test]
async fn every_command_is_redis_s_with_redis_s_arity_keys_flags_categories_and_group() {
    let latchkey = Server::builder().start().await.expect("start latchkey");
    let redis = RedisProcess::spawn(&[]);
    let l = RedisTransport::connect(&latchkey.url())
        .await
        .expect("connect latchkey");
    let r = RedisTransport::connect(&redis.url())
        .await
        .expect("connect redis-server");

    let ours = names(&l).await;
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
        let (Some(mine), theirs) = (info(&l, name).await, info(&r, name).await) else {
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
    let missing: Vec<String> = names(&r)
        .await
        .into_iter()
        .filter(|n| !n.contains('|') && !ours.contains(n))
        .collect();
    for name in &missing {
        let reply = call(&l, &[name.as_str()]).await;
        assert!(
            reply
                .error()
                .is_some_and(|e| e.starts_with(&format!("ERR unknown command '{name}'"))),
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
