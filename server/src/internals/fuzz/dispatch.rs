//! `dispatch`: arbitrary command arrays against an in-process server, then the server's
//! invariants.
//!
//! The input is structured (with `arbitrary`): a list of steps, each a command for one of two
//! clients — its name picked from the server's real command table (or arbitrary bytes), its
//! arguments picked from a few keys, numbers, option words and script bodies, or arbitrary
//! bytes — or a move of the virtual clock. A command that does not finish (it blocks) is
//! cancelled, as if its client had disconnected mid-command. Afterwards:
//! - a new client still gets `PONG`;
//! - the canary key, set before the first step, still holds its value with no TTL (unless the
//!   input could legitimately have touched it; see [`may_touch_canary`]);
//! - every key with a TTL has its deadline in its database's expiry index.

use crate::cmd::all_commands;
use crate::Frame;
use arbitrary::{Arbitrary, Unstructured};

/// The canary's name and value. Its database is 0.
pub const CANARY: &str = "__fuzz_canary__";
const CANARY_VALUE: &str = "still-here";

/// Keys the fuzzer uses, so that commands meet each other's data.
const KEYS: &[&str] = &["k", "l", "h", "z", "s", "{a}x", "{a}y", "", "\u{0}k"];

/// Arguments that unlock options and code paths a random byte string rarely would.
const WORDS: &[&str] = &[
    "NX",
    "XX",
    "GT",
    "LT",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "KEEPTTL",
    "GET",
    "PERSIST",
    "CH",
    "INCR",
    "LIMIT",
    "WITHSCORES",
    "REV",
    "BYSCORE",
    "BYLEX",
    "MATCH",
    "COUNT",
    "TYPE",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "RANK",
    "MAXLEN",
    "-inf",
    "+inf",
    "inf",
    "nan",
    "(1",
    "[a",
    "-",
    "+",
    "*",
    "?",
    "[",
    "\\",
    "0",
    "-1",
    "1",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "1e308",
    "-1e308",
    "0.1",
    "1.7976931348623157e308",
    "LIST",
    "KILL",
    "ID",
    "SETNAME",
    "GETNAME",
    "INFO",
    "HELP",
    "LOAD",
    "FLUSH",
    "REPLACE",
    "EXISTS",
    "SLEEP",
    "SET-ACTIVE-EXPIRE",
    "RESETSTAT",
    "SET",
    "NO-EVICT",
    "ON",
    "OFF",
    "CHANNELS",
    "NUMSUB",
    "NUMPAT",
    "DOCS",
    "COUNT",
    "GETKEYS",
    "maxmemory",
    "maxclients",
    "proto-max-bulk-len",
    "busy-reply-threshold",
    "lua-time-limit",
    "3",
    "2",
    "AUTH",
    "default",
    "SETINFO",
    "lib-name",
    "REPLY",
    "SKIP",
    "NOLOOP",
    "TRACKING",
    "USER",
    "ADDR",
    "LADDR",
    "LIBRARYNAME",
    "WITHCODE",
    "ACK",
    "GETACK",
    "listening-port",
    "capa",
];

/// Script bodies for `EVAL`/`FUNCTION LOAD`: they reach the dispatcher from inside a script
/// (`redis.call` with fuzzed arguments). Fuzzing Lua itself is the `lua_eval` target's job.
const SCRIPTS: &[&str] = &[
    "return redis.call(unpack(ARGV))",
    "return redis.pcall(unpack(ARGV))",
    "return redis.call(ARGV[1], KEYS[1], unpack(ARGV, 2))",
    "redis.setresp(3) return redis.call(unpack(ARGV))",
    "return {KEYS[1], ARGV[1], {ARGV[2]}}",
    "return redis.status_reply(ARGV[1] or 'x')",
    "return redis.error_reply(ARGV[1] or 'x')",
    "return tonumber(ARGV[1])",
    "#!lua name=lib\nredis.register_function('f', function(k, a) return redis.call(unpack(a)) end)",
    "#!lua name=lib2\nredis.register_function{function_name='g', callback=function(k, a) return #k end, flags={'no-writes'}}",
];

/// One argument.
#[derive(Arbitrary, Debug)]
pub enum Arg {
    /// One of [`KEYS`].
    Key(u8),
    /// A decimal integer.
    Int(i64),
    /// One of [`WORDS`].
    Word(u8),
    /// One of [`SCRIPTS`].
    Script(u8),
    /// Anything.
    Raw(Vec<u8>),
}

/// One step of a fuzz input.
#[derive(Arbitrary, Debug)]
pub enum Step {
    /// A command from the server's table, sent by client `client % 2`.
    Known {
        /// Which client sends it.
        client: u8,
        /// Index into the command table.
        name: u16,
        /// Arguments after the name.
        args: Vec<Arg>,
    },
    /// A command whose name is arbitrary bytes.
    Unknown {
        /// Which client sends it.
        client: u8,
        /// The whole command, name first.
        args: Vec<Arg>,
    },
    /// Moves the virtual clock forward by this many milliseconds (keys expire).
    Advance(u16),
}

/// The fuzz target's body: decodes the steps from `data` and runs them.
pub fn check(data: &[u8]) {
    let u = Unstructured::new(data);
    let Ok(steps) = Vec::<Step>::arbitrary_take_rest(u) else {
        return;
    };
    run(steps);
}

fn arg_bytes(a: &Arg) -> Vec<u8> {
    match a {
        Arg::Key(i) => KEYS[*i as usize % KEYS.len()].as_bytes().to_vec(),
        Arg::Int(n) => n.to_string().into_bytes(),
        Arg::Word(i) => WORDS[*i as usize % WORDS.len()].as_bytes().to_vec(),
        Arg::Script(i) => SCRIPTS[*i as usize % SCRIPTS.len()].as_bytes().to_vec(),
        Arg::Raw(b) => b.clone(),
    }
}

/// Whether a command could legitimately delete or change the canary: it names it, flushes or
/// swaps databases, or hands a script something that lists keys (`KEYS`, `SCAN`,
/// `RANDOMKEY`) whose names the script could then use.
pub fn may_touch_canary(args: &[Vec<u8>]) -> bool {
    const WORDS: &[&str] = &[
        "canary",
        "flush",
        "swapdb",
        "keys",
        "scan",
        "randomkey",
        "restart",
    ];
    args.iter().any(|a| {
        let a = String::from_utf8_lossy(a).to_ascii_lowercase();
        WORDS.iter().any(|w| a.contains(w))
    })
}

/// The same run from text, for hand-written regression inputs: one command per line in
/// Redis's inline syntax (quotes and `\xHH` escapes), or `@advance <ms>` to move the clock.
pub fn check_lines(text: &[u8]) {
    let mut steps = Vec::new();
    for line in text.split(|b| *b == b'\n') {
        let Some(words) = crate::codec::split_args(line) else {
            panic!("unbalanced quotes in {:?}", String::from_utf8_lossy(line));
        };
        match words.first().map(|w| &w[..]) {
            None => {}
            Some(b"@advance") => {
                let ms = std::str::from_utf8(&words[1]).unwrap().parse().unwrap();
                steps.push(Step::Advance(ms));
            }
            Some(_) => steps.push(Step::Unknown {
                client: 0,
                args: words.iter().map(|w| Arg::Raw(w.to_vec())).collect(),
            }),
        }
    }
    run(steps);
}

/// Runs the steps against a fresh server and checks the invariants.
pub fn run(steps: Vec<Step>) {
    super::rt::block_on(async move {
        let server = super::rt::server().await;
        let table = all_commands();
        let mut setup = server.client();
        assert_eq!(
            setup.cmd(["SET", CANARY, CANARY_VALUE]).await,
            Frame::ok(),
            "setting the canary"
        );
        let mut clients = [server.client(), server.client()];
        let mut canary_fair_game = false;
        for step in steps {
            let (client, args) = match step {
                Step::Advance(ms) => {
                    server
                        .clock()
                        .advance(std::time::Duration::from_millis(ms as u64));
                    // Let the active expiry cycle run at the new time.
                    tokio::task::yield_now().await;
                    continue;
                }
                Step::Known { client, name, args } => {
                    let spec = table[name as usize % table.len()];
                    let mut all = vec![spec.name.as_bytes().to_vec()];
                    all.extend(args.iter().map(arg_bytes));
                    (client, all)
                }
                Step::Unknown { client, args } => {
                    if args.is_empty() {
                        continue;
                    }
                    (client, args.iter().map(arg_bytes).collect())
                }
            };
            if super::rt::forbidden(&args[0]) || super::rt::forbidden_config(&args) {
                continue;
            }
            // Inside MULTI or a script the name may hide in any argument.
            if args.iter().any(|a| super::rt::forbidden(a)) {
                continue;
            }
            canary_fair_game |= may_touch_canary(&args);
            let c = &mut clients[client as usize % 2];
            // A command still running after the timeout is blocked: cancel it, as a client
            // that disconnects while blocked would.
            let _ = tokio::time::timeout(super::rt::COMMAND_TIMEOUT, c.cmd(&args)).await;
        }
        drop(clients);
        let mut probe = server.client();
        let pong = tokio::time::timeout(super::rt::COMMAND_TIMEOUT, probe.cmd(["PING"])).await;
        assert_eq!(
            pong.ok(),
            Some(Frame::Simple("PONG".into())),
            "the server stopped answering PING"
        );
        if !canary_fair_game {
            let got = probe.cmd(["GET", CANARY]).await;
            assert_eq!(got, Frame::Bulk(CANARY_VALUE.into()), "the canary was lost");
            assert_eq!(probe.cmd(["TTL", CANARY]).await, Frame::Integer(-1));
        }
        for (i, db) in server.shared().keyspace.iter() {
            if let Err(e) = db.check_expiry_index() {
                panic!("db {i}: {e}");
            }
        }
        drop(probe);
        drop(setup);
        server.shutdown().await;
    });
}
