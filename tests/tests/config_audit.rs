//! No configuration parameter is accepted and then ignored: every parameter `CONFIG GET *`
//! lists is in `docs/COMPATIBILITY.md`'s table, and `CONFIG SET` of another value does what
//! the table says — an *applied* parameter changes, every other one is refused with an error
//! and keeps its value.

use std::collections::HashMap;

use latchkey_server::Server;
use latchkey_tests::RawConn;

/// The table of `docs/COMPATIBILITY.md`: parameter → `applied`, `fixed`, `immutable` or `protected`.
fn documented() -> HashMap<String, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/COMPATIBILITY.md");
    let text = std::fs::read_to_string(path).expect("docs/COMPATIBILITY.md");
    let section = text
        .split("## `CONFIG SET`")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("a CONFIG SET section");
    section
        .lines()
        .filter_map(|l| {
            let cells: Vec<_> = l.split('|').map(str::trim).collect();
            let name = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let rule = cells.get(2)?.split_whitespace().next()?;
            Some((name.to_string(), rule.to_string()))
        })
        .collect()
}

/// Every `(name, value)` of `CONFIG GET *`.
fn all_params(c: &mut RawConn) -> Vec<(String, String)> {
    let reply = String::from_utf8(c.cmd(&["CONFIG", "GET", "*"])).unwrap();
    // A flat array of bulk strings: `*N`, then a `$len` line before each text line.
    let texts: Vec<&str> = reply.split("\r\n").skip(2).step_by(2).collect();
    texts
        .chunks(2)
        .filter(|p| p.len() == 2)
        .map(|p| (p[0].to_string(), p[1].to_string()))
        .collect()
}

/// A valid value other than `current` for the parameter.
fn another_value(name: &str, current: &str) -> String {
    match name {
        "maxmemory-policy" => "allkeys-lru".into(),
        "client-output-buffer-limit" => {
            current.replace("pubsub 33554432 8388608 60", "pubsub 33554432 8388608 61")
        }
        "loglevel" => "warning".into(),
        "bind" => "127.0.0.2".into(),
        "dir" | "appendfilename" | "aclfile" => "elsewhere".into(),
        "dbfilename" => "other.rdb".into(),
        "acl-pubsub-default" => "allchannels".into(),
        "appendfsync" => "always".into(),
        "save" => "900 1".into(),
        "notify-keyspace-events" => "KEA".into(),
        "requirepass" | "masterauth" | "masteruser" => "s3cret".into(),
        "list-max-listpack-size" | "list-max-ziplist-size" => "-3".into(),
        "latency-tracking-info-percentiles" => "50 99".into(),
        "shutdown-on-sigint" | "shutdown-on-sigterm" => "save".into(),
        _ if current == "yes" => "no".into(),
        _ if current == "no" => "yes".into(),
        _ => match current.parse::<i64>() {
            Ok(n) => (n + 1).to_string(),
            Err(_) => panic!("no other value known for {name} = {current:?}"),
        },
    }
}

#[test]
fn every_parameter_is_documented_and_none_is_accepted_then_ignored() {
    // Its own folder: turning `appendonly` on writes the AOF there.
    let dir = tempfile::Builder::new()
        .prefix("latchkey-config-audit-")
        .tempdir()
        .unwrap();
    let server = Server::builder()
        .config("dir", dir.path().to_str().unwrap())
        .start_blocking()
        .expect("latchkey");
    let mut c = RawConn::connect(server.addr()).unwrap();
    let docs = documented();
    let params = all_params(&mut c);
    assert!(params.len() >= 30, "CONFIG GET * listed {params:?}");
    for (name, current) in params {
        let rule = docs
            .get(&name)
            .unwrap_or_else(|| panic!("`{name}` is not in docs/COMPATIBILITY.md"));
        // Setting what is already there is always fine.
        let same = c.cmd(&["CONFIG", "SET", &name, &current]);
        if rule == "immutable" || rule == "protected" {
            assert!(same.starts_with(b"-ERR CONFIG SET failed"), "{name}");
        } else {
            assert_eq!(same, b"+OK\r\n", "{name} = {current:?}");
        }
        let other = another_value(&name, &current);
        let reply = String::from_utf8_lossy(&c.cmd(&["CONFIG", "SET", &name, &other])).into_owned();
        let now = String::from_utf8_lossy(&c.cmd(&["CONFIG", "GET", &name])).into_owned();
        match rule.as_str() {
            "applied" => {
                assert_eq!(reply, "+OK\r\n", "{name} -> {other:?}");
                assert!(
                    !now.contains(&format!("\r\n{current}\r\n")),
                    "{name} kept {current:?}: {now}"
                );
                // Back to the default, for the parameters after it.
                assert_eq!(
                    c.cmd(&["CONFIG", "SET", &name, &current]),
                    b"+OK\r\n",
                    "{name}"
                );
            }
            "fixed" | "immutable" | "protected" => {
                assert!(
                    reply.starts_with(&format!(
                        "-ERR CONFIG SET failed (possibly related to argument '{name}') - "
                    )),
                    "{name} -> {other:?}: {reply}"
                );
                assert!(
                    now.ends_with(&format!("\r\n{current}\r\n")),
                    "{name} changed: {now}"
                );
            }
            other => panic!("unknown rule {other:?} for {name}"),
        }
    }
}
