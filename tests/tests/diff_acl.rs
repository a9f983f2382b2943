//! ACL users against a real redis-server 7.0, byte for byte, in RESP2 and RESP3: the rules
//! of `ACL SETUSER` and their errors, how `ACL GETUSER` and `ACL LIST` describe a user after
//! a sequence of rules, every subcommand of `ACL` and its errors, `AUTH` and `HELLO ... AUTH`
//! as a user, and what a user may run: commands and subcommands, keys (read and write),
//! channels, inside scripts and `MULTI`; `ACL DELUSER` disconnecting the user's clients, the
//! ACL log (its times and client descriptions masked) and `ACL DRYRUN`.
//!
//! Redis walks its command table in hash order where it lists several commands (`ACL CAT
//! read`, a user described with several single commands): those replies are compared as
//! sets; every other reply is compared whole.

use latchkey_tests::diff::split_args;
use latchkey_tests::{Diff, RawConn};

/// One new connection to each server, fed the same commands, replies compared.
struct Pair {
    redis: RawConn,
    latchkey: RawConn,
}

impl Pair {
    fn open(d: &Diff) -> Pair {
        Pair {
            redis: RawConn::connect(d.redis_proc.addr()).unwrap(),
            latchkey: RawConn::connect(d.latchkey_server.addr()).unwrap(),
        }
    }

    /// A connection to each, switched to RESP3 (`HELLO 3`, whose reply names the
    /// connection's id: not compared).
    fn open_resp3(d: &Diff) -> Pair {
        let mut p = Pair::open(d);
        p.both(&split_args("HELLO 3"));
        p
    }

    fn both(&mut self, args: &[String]) -> (Vec<u8>, Vec<u8>) {
        (self.redis.cmd(args), self.latchkey.cmd(args))
    }

    #[track_caller]
    fn check(&mut self, line: &str) -> Vec<u8> {
        let (r, l) = self.both(&split_args(line));
        // Bytes, not lossy text: two different invalid byte strings read alike as text.
        assert!(
            l == r,
            "reply differs for {line:?}\n  redis:    {}\n  latchkey: {}",
            latchkey_tests::raw::show(&r),
            latchkey_tests::raw::show(&l)
        );
        r
    }

    #[track_caller]
    fn table(&mut self, lines: &[&str]) {
        for line in lines {
            self.check(line);
        }
    }

    /// Compares a reply as a tree whose arrays may come in any order (Redis lists commands
    /// in hash order) and whose rule texts are sets of words.
    #[track_caller]
    fn check_unordered(&mut self, line: &str) -> Value {
        let (r, l) = self.both(&split_args(line));
        let (r, l) = (parse(&r).normalized(), parse(&l).normalized());
        assert_eq!(l, r, "reply differs for {line:?}");
        r
    }

    /// Compares a reply that describes users (`ACL LIST`, `ACL GETUSER`) whole, except the
    /// order of the single commands that end a selector's rules, which Redis lists in hash
    /// order.
    #[track_caller]
    fn check_rules(&mut self, line: &str) -> Value {
        let (r, l) = self.both(&split_args(line));
        let (r, l) = (parse(&r).rules_sorted(), parse(&l).rules_sorted());
        assert_eq!(l, r, "reply differs for {line:?}");
        r
    }

    /// Compares an `ACL LOG` reply with each entry's age and client description masked;
    /// checks that latchkey's description is a client line of the logged user.
    #[track_caller]
    fn check_log(&mut self, line: &str) -> Value {
        let (r, l) = self.both(&split_args(line));
        let (r, l) = (parse(&r), parse(&l));
        if let Value::Array(entries) = &l {
            for e in entries {
                let info = e.field("client-info").expect("client-info");
                let user = e.field("username").expect("username");
                let (Value::Bulk(info), Value::Bulk(user)) = (info, user) else {
                    panic!("{e:?}")
                };
                let info = String::from_utf8_lossy(info);
                assert!(info.starts_with("id="), "{info}");
                if e.field("reason") != Some(&Value::Bulk(b"auth".to_vec())) {
                    let user = String::from_utf8_lossy(user);
                    assert!(info.contains(&format!(" user={user} ")), "{info}");
                }
            }
        }
        let (r, l) = (r.masked(), l.masked());
        assert_eq!(l, r, "reply differs for {line:?}");
        r
    }

    /// Whether both connections were closed by their servers.
    #[track_caller]
    fn assert_closed(&mut self) {
        let ping = split_args("PING");
        let r = self.redis.try_cmd(&ping);
        let l = self.latchkey.try_cmd(&ping);
        assert!(r.is_err(), "redis kept the connection: {r:?}");
        assert!(l.is_err(), "latchkey kept the connection: {l:?}");
    }
}

/// A RESP reply as a tree.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Value {
    Line(u8, Vec<u8>),
    Bulk(Vec<u8>),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Masked,
}

impl Value {
    fn field(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Map(pairs) => pairs
                .iter()
                .find(|(k, _)| *k == Value::Bulk(name.as_bytes().to_vec()))
                .map(|(_, v)| v),
            Value::Array(items) => items
                .chunks(2)
                .find(|kv| kv[0] == Value::Bulk(name.as_bytes().to_vec()))
                .map(|kv| &kv[1]),
            _ => None,
        }
    }

    fn masked(self) -> Value {
        let mut mask_next = false;
        match self {
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .map(|v| {
                        if std::mem::take(&mut mask_next) {
                            return Value::Masked;
                        }
                        mask_next = matches!(&v, Value::Bulk(b) if b == b"age-seconds" || b == b"client-info");
                        v.masked()
                    })
                    .collect(),
            ),
            Value::Map(pairs) => Value::Map(
                pairs
                    .into_iter()
                    .map(|(k, v)| {
                        let hidden = matches!(&k, Value::Bulk(b) if b == b"age-seconds" || b == b"client-info");
                        (k, if hidden { Value::Masked } else { v.masked() })
                    })
                    .collect(),
            ),
            other => other,
        }
    }

    fn rules_sorted(self) -> Value {
        match self {
            Value::Array(items) => {
                Value::Array(items.into_iter().map(Value::rules_sorted).collect())
            }
            Value::Map(pairs) => Value::Map(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k, v.rules_sorted()))
                    .collect(),
            ),
            Value::Bulk(b) => {
                Value::Bulk(sort_single_commands(&String::from_utf8_lossy(&b)).into_bytes())
            }
            other => other,
        }
    }

    fn normalized(self) -> Value {
        match self {
            Value::Array(items) => {
                let mut items: Vec<Value> = items.into_iter().map(Value::normalized).collect();
                items.sort();
                Value::Array(items)
            }
            Value::Map(pairs) => Value::Map(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k, v.normalized()))
                    .collect(),
            ),
            Value::Bulk(b) => {
                let text = String::from_utf8_lossy(&b);
                let mut words: Vec<&str> = text.split(' ').collect();
                words.sort();
                Value::Bulk(words.join(" ").into_bytes())
            }
            other => other,
        }
    }
}

/// Sorts each run of single-command rules (`+get -set`, not `+@read`) in a rule text,
/// keeping a selector's closing parenthesis at its end.
fn sort_single_commands(text: &str) -> String {
    let single = |w: &str| (w.starts_with('+') || w.starts_with('-')) && !w[1..].starts_with('@');
    let words: Vec<&str> = text.split(' ').collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if !single(words[i]) {
            out.push(words[i].to_string());
            i += 1;
            continue;
        }
        let mut run = Vec::new();
        let mut closes = false;
        while i < words.len() && single(words[i]) && !closes {
            closes = words[i].ends_with(')');
            run.push(words[i].trim_end_matches(')').to_string());
            i += 1;
        }
        run.sort();
        if closes {
            if let Some(last) = run.last_mut() {
                last.push(')');
            }
        }
        out.extend(run);
    }
    out.join(" ")
}

fn parse(b: &[u8]) -> Value {
    let mut at = 0;
    let v = parse_at(b, &mut at);
    assert_eq!(at, b.len(), "one reply: {}", String::from_utf8_lossy(b));
    v
}

fn parse_at(b: &[u8], at: &mut usize) -> Value {
    let end = *at
        + b[*at..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a line");
    let kind = b[*at];
    let body = b[*at + 1..end].to_vec();
    *at = end + 2;
    let n = || -> i64 { String::from_utf8_lossy(&body).parse().unwrap_or(-1) };
    match kind {
        b'$' | b'=' if n() >= 0 => {
            let len = n() as usize;
            let v = b[*at..*at + len].to_vec();
            *at += len + 2;
            Value::Bulk(v)
        }
        b'*' | b'~' | b'>' if n() >= 0 => Value::Array((0..n()).map(|_| parse_at(b, at)).collect()),
        b'%' => Value::Map(
            (0..n())
                .map(|_| (parse_at(b, at), parse_at(b, at)))
                .collect(),
        ),
        k => Value::Line(k, body),
    }
}

/// A Diff whose servers have user `name` with `rules` (and the password `pw`), and a
/// connection to each authenticated as that user.
fn as_user(d: &mut Diff, name: &str, rules: &str) -> Pair {
    d.table(&[&format!("ACL SETUSER {name} reset on >pw {rules}")]);
    let mut p = Pair::open(d);
    p.check(&format!("AUTH {name} pw"));
    p.check("ACL WHOAMI");
    p
}

#[test]
fn setuser_rules_and_how_getuser_and_list_describe_them() {
    let mut d = Diff::new();
    let mut p = Pair::open(&d);
    let mut p3 = Pair::open_resp3(&d);
    let steps: &[&str] = &[
        "ACL SETUSER alice",
        "ACL SETUSER alice on",
        "ACL SETUSER alice >p1 >p2 >p1",
        "ACL SETUSER alice <p2",
        "ACL SETUSER alice #5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
        "ACL SETUSER alice !5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
        "ACL SETUSER alice nopass",
        "ACL SETUSER alice resetpass >again",
        "ACL SETUSER alice ~obj:* ~user:*",
        "ACL SETUSER alice %R~read:* %W~write:* %RW~both:* %R~obj:*",
        "ACL SETUSER alice resetkeys %W~w",
        "ACL SETUSER alice allkeys",
        "ACL SETUSER alice resetkeys ~a",
        "ACL SETUSER alice &news.* &chat",
        "ACL SETUSER alice allchannels",
        "ACL SETUSER alice resetchannels &one",
        "ACL SETUSER alice +get",
        "ACL SETUSER alice +@hash",
        "ACL SETUSER alice -hget",
        "ACL SETUSER alice +@read",
        "ACL SETUSER alice -@read",
        "ACL SETUSER alice +config|get",
        "ACL SETUSER alice -config|get +config",
        "ACL SETUSER alice -config|set",
        "ACL SETUSER alice nocommands +select|0 +select|1",
        "ACL SETUSER alice -select",
        "ACL SETUSER alice allcommands",
        "ACL SETUSER alice -@dangerous",
        "ACL SETUSER alice +@all -@write -@admin",
        "ACL SETUSER alice +@all -flushall",
        "ACL SETUSER alice -@all +@set +@sortedset",
        "ACL SETUSER alice -@all +@string -set",
        "ACL SETUSER alice -@all +@all",
        "ACL SETUSER alice skip-sanitize-payload",
        "ACL SETUSER alice sanitize-payload",
        "ACL SETUSER alice off",
        "ACL SETUSER alice (~sel:* +get) (%R~r* &ch +@read -@all +hget)",
        "ACL SETUSER alice (~x +set",
        // A selector's rules split as sdssplitargs splits them: quotes, and an unbalanced
        // quote that splits into nothing (an empty selector).
        r#"ACL SETUSER alice "(~q* \"+get\" '+set')""#,
        r#"ACL SETUSER alice "(\"+get)""#,
        "ACL SETUSER alice clearselectors",
        "ACL SETUSER alice reset",
        "ACL SETUSER alice ON NOPASS ALLKEYS ALLCHANNELS ALLCOMMANDS",
        "ACL SETUSER bob on >x ~* &* +@all",
        "ACL SETUSER \"\" on",
        "ACL SETUSER alice \"\"",
    ];
    for step in steps {
        p.check(step);
        for conn in [&mut p, &mut p3] {
            conn.check_rules("ACL GETUSER alice");
            conn.check_rules("ACL LIST");
            conn.check("ACL USERS");
        }
    }
    // Several single commands: Redis lists them in hash order.
    for step in [
        "ACL SETUSER carol on +@all -get -set -hset",
        "ACL SETUSER dave on -@all +get +set +config|get +client|id",
    ] {
        p.check(step);
        p.check_rules("ACL LIST");
        p3.check_rules("ACL GETUSER carol");
        p3.check_rules("ACL GETUSER dave");
    }
    p.table(&[
        "ACL GETUSER nobody",
        "ACL DELUSER alice bob nobody",
        "ACL USERS",
    ]);
    d.table(&["ACL WHOAMI"]);
    // No rule (a password among them) reaches the slow log.
    d.table(&["CONFIG SET slowlog-log-slower-than 0", "SLOWLOG RESET"]);
    d.both(&split_args("ACL SETUSER secretive on >hunter2 ~k"));
    for reply in [
        d.redis.cmd(&["SLOWLOG", "GET", "1"]),
        d.latchkey.cmd(&["SLOWLOG", "GET", "1"]),
    ] {
        let text = String::from_utf8_lossy(&reply);
        assert!(
            !text.contains("hunter2") && !text.contains("secretive"),
            "{text}"
        );
        assert_eq!(text.matches("(redacted)").count(), 4, "{text}");
    }
}

#[test]
fn setuser_errors_name_the_rule_and_change_nothing() {
    let mut d = Diff::new();
    d.table(&["ACL SETUSER eve on >pw ~k &c +get"]);
    let lines: &[&str] = &[
        "ACL SETUSER",
        "ACL SETUSER 'a b'",
        "ACL SETUSER \"a\\x00b\"",
        "ACL SETUSER eve off +nosuch",
        "ACL SETUSER eve off -nosuch",
        "ACL SETUSER eve off +@nosuch",
        "ACL SETUSER eve off -@nosuch",
        "ACL SETUSER eve allkeys ~more",
        "ACL SETUSER eve allkeys %R~more",
        "ACL SETUSER eve allchannels &more",
        "ACL SETUSER eve <notapassword",
        "ACL SETUSER eve #tooshort",
        "ACL SETUSER eve #5E884898DA28047151D0E56F8DC6292773603D0D6AABBDD62A11EF721D1542D8",
        "ACL SETUSER eve !5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
        "ACL SETUSER eve !short",
        "ACL SETUSER eve +config|get|x",
        "ACL SETUSER eve +get|",
        "ACL SETUSER eve +config|nosuch",
        "ACL SETUSER eve -config|nosuch",
        "ACL SETUSER eve -get|x",
        "ACL SETUSER eve +nosuch|x",
        "ACL SETUSER eve %X~k",
        "ACL SETUSER eve %RR~k",
        "ACL SETUSER eve %R",
        "ACL SETUSER eve %~k",
        "ACL SETUSER eve %",
        "ACL SETUSER eve %Rk",
        "ACL SETUSER eve %W~",
        "ACL SETUSER eve %rw~lower",
        "ACL SETUSER eve %WR~both",
        "ACL SETUSER eve '~a b'",
        "ACL SETUSER eve '&a b'",
        "ACL SETUSER eve bogus",
        "ACL SETUSER eve *",
        "ACL SETUSER eve (~a",
        "ACL SETUSER eve (~a +get",
        "ACL SETUSER eve (+nosuch)",
        "ACL SETUSER eve (on)",
        "ACL SETUSER eve ()",
        "ACL GETUSER eve",
        "ACL LIST",
    ];
    d.table(lines);
    let mut p3 = Pair::open_resp3(&d);
    p3.table(&["ACL SETUSER eve +nosuch", "ACL GETUSER eve"]);
}

#[test]
fn acl_subcommands_and_their_errors() {
    let mut d = Diff::new();
    d.table(&[
        "ACL",
        "ACL HELP",
        "ACL help extra",
        "ACL NOSUCH",
        "ACL LIST extra",
        "ACL USERS extra",
        "ACL WHOAMI extra",
        "ACL GETUSER",
        "ACL GETUSER a b",
        "ACL DELUSER",
        "ACL DELUSER default",
        "ACL DELUSER nobody default",
        "ACL DELUSER nobody",
        "ACL CAT",
        "ACL CAT nosuch",
        "ACL CAT a b",
        "ACL GENPASS 0",
        "ACL GENPASS -1",
        "ACL GENPASS 4097",
        "ACL GENPASS abc",
        "ACL GENPASS 1 2",
        "ACL LOG abc",
        "ACL LOG 1 2",
        "ACL LOG RESET",
        "ACL LOG",
        "ACL LOG -1",
        "ACL LOAD",
        "ACL SAVE",
        "ACL LOAD extra",
        "ACL DRYRUN",
        "ACL DRYRUN default",
        "ACL DRYRUN default get",
        "ACL DRYRUN nobody get k",
        "ACL DRYRUN default nosuch k",
        "ACL DRYRUN default config nosuch",
        "ACL DRYRUN default config",
        "ACL DRYRUN default get a b",
        "ACL DRYRUN default config get",
        "ACL DRYRUN default get k",
        "ACL DRYRUN default config get x",
        "ACL DRYRUN default config|get x",
        "ACL DRYRUN default CONFIG GET x",
    ]);
    // The categories, then one category's commands (as a set: Redis lists them in hash
    // order).
    let mut p = Pair::open(&d);
    for cat in [
        "read",
        "write",
        "keyspace",
        "admin",
        "dangerous",
        "scripting",
        "pubsub",
        "connection",
        "fast",
        "slow",
        "blocking",
        "transaction",
        "STRING",
    ] {
        p.check_unordered(&format!("ACL CAT {cat}"));
    }
    // GENPASS: hex, of the length the bits ask for (random, so only its shape is compared).
    for (bits, len) in [
        (None, 64),
        (Some(1), 1),
        (Some(5), 2),
        (Some(128), 32),
        (Some(4096), 1024),
    ] {
        let mut line = vec!["ACL".to_string(), "GENPASS".to_string()];
        line.extend(bits.map(|b: i32| b.to_string()));
        let (r, l) = p.both(&line);
        for reply in [r, l] {
            let payload = latchkey_tests::raw::bulk_payload(&reply);
            assert_eq!(payload.len(), len, "{line:?}");
            assert!(payload.iter().all(u8::is_ascii_hexdigit), "{line:?}");
        }
    }
    let mut p3 = Pair::open_resp3(&d);
    p3.table(&[
        "ACL CAT",
        "ACL HELP",
        "ACL LOG",
        "ACL WHOAMI",
        "ACL USERS",
        "ACL GETUSER default",
    ]);
}

#[test]
fn commands_and_subcommands_a_user_may_not_run_are_refused() {
    let mut d = Diff::new();
    d.table(&["SET k v", "SET other v"]);
    let mut p = as_user(
        &mut d,
        "u",
        "~* &* +@read +config|get +client|id +select|0 -strlen",
    );
    p.table(&[
        "GET k",
        "STRLEN k",
        "SET k v2",
        "DEL k",
        "CONFIG GET maxmemory",
        "CONFIG SET maxmemory 0",
        "CONFIG RESETSTAT",
        "CONFIG NOSUCH",
        "CONFIG GET",
        "CLIENT LIST",
        "SELECT 0",
        "SELECT 1",
        "NOSUCHCOMMAND",
        "GET",
        "GET a b",
        "AUTH u pw",
        "HELLO 4",
        "PING",
        "ACL WHOAMI",
        "ACL LIST",
        "FLUSHALL",
        "SWAPDB 0 1",
    ]);
    // (Its id differs between the servers: only the reply's type is compared.)
    let (r, l) = p.both(&split_args("CLIENT ID"));
    assert!(r.starts_with(b":") && l.starts_with(b":"), "{r:?} {l:?}");
    let mut p3 = Pair::open_resp3(&d);
    p3.table(&["AUTH u pw", "SET k v3", "GET k", "ACL WHOAMI"]);
    // Rules changed under a connection apply to its next command.
    d.table(&["ACL SETUSER u +set"]);
    p.table(&["SET k v4", "GET k"]);
    d.table(&["ACL SETUSER u -@all"]);
    p.table(&[
        "GET k",
        "PING",
        "ACL WHOAMI",
        "AUTH u pw",
        "HELLO 2 AUTH u wrong",
        "QUIT",
    ]);
}

#[test]
fn keys_are_checked_for_reading_and_writing() {
    let mut d = Diff::new();
    d.table(&[
        "SET r1 a",
        "SET w1 b",
        "SET rw1 c",
        "SET x1 d",
        "LPUSH rl a b",
        "LPUSH wl a",
    ]);
    let mut p = as_user(&mut d, "k", "+@all %R~r* %W~w* ~rw* &*");
    p.table(&[
        "GET r1",
        "GET w1",
        "GET rw1",
        "GET x1",
        "SET r1 v",
        "SET w1 v",
        "SET w1 v GET",
        "SET rw1 v GET",
        "APPEND w1 x",
        "MGET r1 rw1",
        "MGET r1 w1",
        "MSET w1 a w2 b",
        "MSET w1 a r2 b",
        "COPY r1 w9",
        "COPY w1 w9",
        "COPY r1 r9",
        "RENAME w1 w2",
        "LMOVE rl wl LEFT RIGHT",
        "LMOVE wl rl LEFT RIGHT",
        "DEL w2",
        "DEL r1",
        "EXISTS r1",
        "EXISTS x1",
        "SORT rl ALPHA",
        "SORT rl ALPHA STORE w5",
        "SORT rl ALPHA STORE r5",
        "SORT rl BY nosort",
        "SORT rl BY w* ALPHA",
        "SORT rl GET # ALPHA",
        "SORT_RO rl GET w* ALPHA",
        "BITFIELD w3 GET u8 0",
        "BITFIELD r3 GET u8 0",
        "BITFIELD r3 SET u8 0 1",
        "XREAD STREAMS rs ws 0 0",
        "EVAL 'return 1' 1 rw1",
        "EVAL 'return 1' 1 r1",
        "DBSIZE",
        "FLUSHDB",
        "ACL DRYRUN k GET w1",
        "ACL DRYRUN k SET r1 v",
        "ACL DRYRUN k MGET rw1 x1 r1",
    ]);
    // In a selector: a command allowed only there on the keys only it names.
    let mut s = as_user(&mut d, "s", "~a* +get (~b* +set)");
    s.table(&[
        "GET a1",
        "GET b1",
        "SET b1 v",
        "SET a1 v",
        "MSET b1 v b2 v",
        "DEL b1",
    ]);
    // SORT reads the keys of its BY and GET patterns only for a user who may read every key.
    let mut r = as_user(&mut d, "sorter", "+sort ~rl (+sort %R~*)");
    r.table(&["SORT rl BY w* ALPHA", "SORT rl GET # ALPHA"]);
    let mut w = as_user(&mut d, "sorter2", "+sort ~rl (+sort ~rl %W~*)");
    w.table(&[
        "SORT rl BY w* ALPHA",
        "SORT rl GET # ALPHA",
        "SORT rl BY const ALPHA",
    ]);
}

#[test]
fn channels_are_checked_on_publish_and_subscribe() {
    let mut d = Diff::new();
    let mut p = as_user(&mut d, "c", "+@all ~* resetchannels &news.* &chat");
    p.table(&[
        "PUBLISH news.1 m",
        "PUBLISH chat m",
        "PUBLISH other m",
        "SPUBLISH other m",
        "PUBSUB NUMSUB other",
        "ACL DRYRUN c PUBLISH other m",
        "ACL DRYRUN c SUBSCRIBE chat other",
        "ACL DRYRUN c PSUBSCRIBE news.*",
        "ACL DRYRUN c PSUBSCRIBE news.1",
        "SUBSCRIBE other",
        "SUBSCRIBE chat other",
        "PSUBSCRIBE news.1",
        "SSUBSCRIBE other",
        "PSUBSCRIBE news.*",
        "UNSUBSCRIBE other",
        "SUBSCRIBE chat",
    ]);
    // Taking a channel away from the user disconnects its subscriber to it.
    d.table(&["ACL SETUSER c resetchannels &news.*"]);
    p.assert_closed();
    let mut q = as_user(&mut d, "c2", "+@all ~* resetchannels &a &b");
    q.check("SUBSCRIBE a");
    // Adding a channel keeps it connected.
    d.table(&["ACL SETUSER c2 &c"]);
    q.check("SUBSCRIBE b");
}

#[test]
fn scripts_run_as_their_callers_user() {
    let mut d = Diff::new();
    d.table(&["SET k v"]);
    let mut p = as_user(&mut d, "lua", "+@all -set -config|set %R~k ~w* &*");
    p.table(&[
        "EVAL \"return redis.call('get', KEYS[1])\" 1 k",
        "EVAL \"return redis.call('set', 'w1', 'x')\" 0",
        "EVAL \"return redis.pcall('set', 'w1', 'x')\" 0",
        "EVAL \"return redis.call('config', 'set', 'maxmemory', '0')\" 0",
        "EVAL \"return redis.call('config', 'get', 'maxmemory')\" 0",
        "EVAL \"return redis.call('append', 'k', 'x')\" 0",
        "EVAL \"return redis.pcall('append', 'k', 'x')\" 0",
        "EVAL \"return redis.call('append', 'w2', 'x')\" 0",
        "EVAL \"return redis.pcall('publish', 'ch', 'x')\" 0",
        "GET w2",
        "EVAL \"return redis.acl_check_cmd('get', 'k')\" 0",
        "EVAL \"return redis.acl_check_cmd('set', 'w1', 'x')\" 0",
        "EVAL \"return redis.acl_check_cmd('append', 'k', 1)\" 0",
        "EVAL \"return redis.acl_check_cmd('append', 'w3', 1)\" 0",
        "EVAL \"return redis.acl_check_cmd('config', 'get', 'x')\" 0",
        "EVAL \"return redis.acl_check_cmd('config', 'set', 'x', 'y')\" 0",
        "EVAL \"return redis.acl_check_cmd('config', 'nosuch')\" 0",
        "EVAL \"return redis.acl_check_cmd('nosuch')\" 0",
        "EVAL \"return redis.acl_check_cmd()\" 0",
        "EVAL \"return redis.acl_check_cmd({})\" 0",
    ]);
    let mut q = as_user(&mut d, "lua2", "+@all ~* resetchannels &ok");
    q.table(&[
        "EVAL \"return redis.pcall('publish', 'no', 'x')\" 0",
        "EVAL \"return redis.pcall('publish', 'ok', 'x')\" 0",
    ]);
    let mut r = as_user(&mut d, "noeval", "-@all +get ~*");
    r.check("EVAL 'return 1' 0");
}

#[test]
fn transactions_refuse_denied_commands_when_queued_and_at_exec() {
    let mut d = Diff::new();
    let mut p = as_user(&mut d, "m", "+@all -set ~* &*");
    p.table(&["MULTI", "INCR n", "SET k v", "EXEC", "GET n"]);
    p.table(&["MULTI", "INCR n", "EXEC"]);
    // The rules change between the queueing and EXEC.
    p.table(&["MULTI", "INCR n", "GET n"]);
    d.table(&["ACL SETUSER m -incr"]);
    p.table(&["EXEC", "GET n"]);
    let mut q = as_user(&mut d, "m2", "+@all ~a* &*");
    q.table(&[
        "MULTI",
        "SET b v",
        "SET a v",
        "EXEC",
        "MULTI",
        "AUTH m2 wrong",
        "AUTH m2 pw",
        "EXEC",
    ]);
}

#[test]
fn auth_and_hello_log_in_as_a_user() {
    let mut d = Diff::new();
    d.table(&[
        "ACL SETUSER on1 on >pw1 >pw2 +@all ~*",
        "ACL SETUSER off1 off >pw +@all ~*",
        "ACL SETUSER free on nopass +@all ~*",
    ]);
    let mut p = Pair::open(&d);
    p.table(&[
        "AUTH on1 pw1",
        "ACL WHOAMI",
        "AUTH on1 pw2",
        "AUTH on1 wrong",
        "ACL WHOAMI",
        "AUTH off1 pw",
        "AUTH nobody pw",
        "AUTH free anything",
        "ACL WHOAMI",
        "AUTH pw1",
        "HELLO 2 AUTH off1 pw",
        "HELLO 2 AUTH on1 wrong",
        "ACL WHOAMI",
        "RESET",
        "ACL WHOAMI",
    ]);
    // HELLO AUTH logs in and switches protocol at once (its reply names the connection's id:
    // only the first line, the map of 7, is compared).
    let mut h = Pair::open(&d);
    let (r, l) = h.both(&split_args("HELLO 3 AUTH on1 pw1"));
    assert!(
        r.starts_with(b"%7\r\n") && l.starts_with(b"%7\r\n"),
        "{r:?} {l:?}"
    );
    h.table(&["ACL WHOAMI", "ACL GETUSER on1"]);
    // The default user with a password (requirepass) or turned off.
    d.table(&["CONFIG SET requirepass secret", "ACL LIST"]);
    let mut n = Pair::open(&d);
    n.table(&["GET k", "ACL WHOAMI", "AUTH secret", "ACL WHOAMI"]);
    d.table(&[
        "ACL SETUSER default resetpass >other",
        "ACL GETUSER default",
        "CONFIG GET requirepass",
    ]);
    let mut o = Pair::open(&d);
    o.table(&["PING", "AUTH secret", "AUTH other", "PING"]);
    d.table(&["CONFIG SET requirepass ''", "ACL LIST"]);
    let mut f = Pair::open(&d);
    f.table(&["PING", "AUTH x"]);
    d.table(&["ACL SETUSER default off"]);
    let mut g = Pair::open(&d);
    g.table(&[
        "PING",
        "AUTH default x",
        "AUTH free x",
        "PING",
        "ACL WHOAMI",
    ]);
    d.table(&["ACL SETUSER default on"]);
    let mut ok = Pair::open(&d);
    ok.table(&["PING"]);
}

#[test]
fn deleting_a_user_disconnects_its_clients_and_off_does_not() {
    let mut d = Diff::new();
    d.table(&[
        "ACL SETUSER gone on >pw +@all ~* &*",
        "ACL SETUSER stays on >pw +@all ~* &*",
    ]);
    let mut a = Pair::open(&d);
    a.check("AUTH gone pw");
    let mut b = Pair::open(&d);
    b.check("AUTH stays pw");
    // Turning a user off keeps its connections (Redis 7.0 only refuses new logins).
    d.table(&["ACL SETUSER stays off"]);
    b.table(&["PING", "ACL WHOAMI"]);
    let mut c = Pair::open(&d);
    c.table(&["AUTH stays pw"]);
    d.table(&["ACL DELUSER gone", "ACL USERS"]);
    a.assert_closed();
    // A client deleting its own user gets the reply, then is disconnected.
    b.table(&["ACL SETUSER stays on", "ACL DELUSER stays"]);
    b.assert_closed();
    d.table(&["ACL USERS", "ACL WHOAMI"]);
    // CLIENT KILL USER closes the user's connections, and knows which users exist.
    let mut k = as_user(&mut d, "killed", "+@all ~* &*");
    d.table(&[
        "CLIENT KILL USER nobody",
        "CLIENT KILL USER killed",
        "CLIENT KILL USER killed",
    ]);
    k.assert_closed();
}

/// The link to a master obeys what it carries, whatever the replica's default user may run
/// (Redis's master client has no user); a replica logs in to its master as `masteruser`.
#[test]
fn replication_links_are_not_bound_by_the_acls() {
    use latchkey_tests::pair::{cmd, until, wait_link_up};
    use std::time::Duration;
    let master = latchkey_server::Server::builder().start_blocking().unwrap();
    let replica = latchkey_server::Server::builder().start_blocking().unwrap();
    let ok = b"+OK\r\n".to_vec();
    let on = |addr, line: &str| {
        cmd(
            addr,
            &split_args(line)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        on(master.addr(), "ACL SETUSER repl on >rpw +@all ~* &*"),
        ok
    );
    assert_eq!(on(master.addr(), "ACL SETUSER default resetpass >mpw"), ok);
    for line in ["CONFIG SET masteruser repl", "CONFIG SET masterauth rpw"] {
        assert_eq!(on(replica.addr(), line), ok);
    }
    let port = master.addr().port().to_string();
    assert_eq!(cmd(replica.addr(), &["REPLICAOF", "127.0.0.1", &port]), ok);
    wait_link_up(replica.addr());
    // The replica's default user may run nothing; an admin reads what arrived.
    let mut admin = RawConn::connect(replica.addr()).unwrap();
    assert_eq!(
        admin.cmd(&split_args("ACL SETUSER admin on >apw +@all ~* &*")),
        ok
    );
    assert_eq!(admin.cmd(&split_args("AUTH admin apw")), ok);
    assert_eq!(
        admin.cmd(&split_args("ACL SETUSER default -@all resetkeys")),
        ok
    );
    let mut m = RawConn::connect(master.addr()).unwrap();
    assert_eq!(m.cmd(&split_args("AUTH mpw")), ok);
    assert_eq!(m.cmd(&split_args("SET k v")), ok);
    until("the write on the replica", Duration::from_secs(10), || {
        admin.cmd(&split_args("GET k")) == b"$1\r\nv\r\n"
    });
    let list = String::from_utf8(admin.cmd(&split_args("CLIENT LIST"))).unwrap();
    assert!(
        list.lines()
            .any(|l| l.contains(" flags=M ") && l.contains(" user=(superuser) ")),
        "{list}"
    );
    let mut plain = RawConn::connect(replica.addr()).unwrap();
    assert_eq!(
        plain.cmd(&split_args("GET k")),
        b"-NOPERM this user has no permissions to run the 'get' command\r\n"
    );
}

#[test]
fn the_acl_log_records_refusals_and_failed_logins() {
    let mut d = Diff::new();
    d.table(&[
        "ACL LOG RESET",
        "ACL SETUSER l on >pw +@all -flushall %R~r* &ch",
    ]);
    let mut p = Pair::open(&d);
    p.table(&[
        "AUTH l wrong",
        "auth l wrong",
        "HELLO 2 AUTH l wrong",
        "AUTH nobody x",
        "AUTH l pw",
        "FLUSHALL",
        "FLUSHALL",
        "SET r1 v",
        "GET x1",
        "PUBLISH other m",
        "EVAL \"return redis.pcall('flushall')\" 0",
        "MULTI",
        "FLUSHALL",
        "DISCARD",
    ]);
    p.check_log("ACL LOG");
    p.check_log("ACL LOG 2");
    p.check_log("ACL LOG 0");
    let mut p3 = Pair::open_resp3(&d);
    p3.check_log("ACL LOG");
    // The log keeps acllog-max-len entries.
    d.table(&["CONFIG SET acllog-max-len 2", "CONFIG GET acllog-max-len"]);
    p.table(&["GET a1"]);
    p.check_log("ACL LOG");
    d.table(&["ACL LOG RESET", "ACL LOG", "CONFIG SET acllog-max-len 128"]);
}

#[test]
fn acl_pubsub_default_decides_the_channels_new_users_start_with() {
    let mut d = Diff::new();
    d.table(&[
        "CONFIG GET acl-pubsub-default",
        "CONFIG SET acl-pubsub-default nosuch",
        "CONFIG SET acl-pubsub-default ALLCHANNELS",
        "CONFIG GET acl-pubsub-default",
        "ACL SETUSER fresh",
        "ACL SETUSER fresh (+get)",
        "ACL SETUSER older resetchannels &a",
        "ACL SETUSER older reset",
        "ACL LIST",
        "CONFIG SET acl-pubsub-default resetchannels",
        "ACL SETUSER later",
        "ACL SETUSER older reset",
        "ACL LIST",
    ]);
}

/// Two servers reading and writing one ACL file, in turn.
struct AclFile {
    _dir: tempfile::TempDir,
    path: String,
}

impl AclFile {
    fn new(text: &str) -> AclFile {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users.acl").to_str().unwrap().to_string();
        std::fs::write(&path, text).unwrap();
        AclFile { _dir: dir, path }
    }

    fn write(&self, text: &str) {
        std::fs::write(&self.path, text).unwrap();
    }

    fn read(&self) -> String {
        std::fs::read_to_string(&self.path).unwrap()
    }

    /// Both servers, started on this file.
    fn diff(&self) -> Diff {
        let redis_proc = latchkey_tests::RedisProcess::spawn(&["--aclfile", &self.path]);
        let latchkey_server = latchkey_server::Server::builder()
            .config("aclfile", self.path.clone())
            .start_blocking()
            .expect("start latchkey");
        let redis = RawConn::connect(redis_proc.addr()).unwrap();
        let latchkey = RawConn::connect(latchkey_server.addr()).unwrap();
        Diff {
            redis_proc,
            latchkey_server,
            redis,
            latchkey,
        }
    }
}

#[test]
fn the_acl_file_is_read_at_start_loaded_and_saved_as_redis_does() {
    let file = AclFile::new(
        "user default on nopass ~* &* +@all\n\n  user reader on #5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8 %R~* resetchannels -@all +@read\nuser writer on >wpw ~w* &* +@all -@dangerous\n",
    );
    let mut d = file.diff();
    let mut p = Pair::open(&d);
    p.table(&[
        "ACL LIST",
        "AUTH reader password",
        "GET k",
        "SET k v",
        "CONFIG SET aclfile elsewhere",
        "CONFIG GET aclfile",
    ]);
    // ACL SAVE writes what ACL LIST shows, one user a line.
    d.table(&["ACL SETUSER added on >apw ~a* +get", "ACL SAVE"]);
    let saved_by_redis = file.read();
    d.both(&split_args("ACL SAVE"));
    let saved_by_latchkey = file.read();
    assert_eq!(saved_by_latchkey, saved_by_redis);
    assert!(
        saved_by_redis.starts_with("user added on #"),
        "{saved_by_redis}"
    );
    // A file with errors changes nothing and says why, line by line.
    file.write(concat!(
        "user ok on nopass +@all\n",
        "notauser x\n",
        "user\n",
        "user bad1 on +nosuch -alsonosuch\n",
        "user bad2 on ~a allkeys ~b %X~c\n",
        "user ok off\n",
        "user bad3 (~a +get\n",
        "user bad4 (~a +nosuch) <nopassword\n",
        "user bad5\ton\n",
    ));
    d.table(&["ACL LOAD", "ACL USERS"]);
    p.table(&["ACL WHOAMI", "GET k"]);
    // A good file replaces every user: their clients go, the default user's stay.
    let mut w = Pair::open(&d);
    w.table(&["AUTH writer wpw", "SET w1 v"]);
    let mut plain = Pair::open(&d);
    plain.check("PING");
    file.write("user writer on >new ~w* +@all\r\nuser default on nopass ~* &* +@all -flushall\n");
    d.table(&["ACL LOAD", "ACL LIST", "ACL USERS"]);
    p.assert_closed();
    w.assert_closed();
    plain.table(&["PING", "GET k", "ACL WHOAMI"]);
    // No default user in the file: it gets Redis's defaults.
    file.write("user only on nopass +@all\n");
    d.table(&["ACL LOAD", "ACL LIST"]);
    // A missing file.
    file.write("");
    std::fs::remove_file(&file.path).unwrap();
    d.table(&["ACL LOAD", "ACL LIST"]);
    // A server refuses to start on a file it cannot read, as redis-server exits.
    assert!(latchkey_server::Server::builder()
        .config("aclfile", file.path.clone())
        .start_blocking()
        .is_err());
}
