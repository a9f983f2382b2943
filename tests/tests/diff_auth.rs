//! `requirepass`, `AUTH` and `HELLO ... AUTH` against a real redis-server, byte for byte: a
//! connection made while the default user has a password runs nothing but `AUTH`, `HELLO`,
//! `QUIT` and `RESET` until it authenticates (an unknown command and a wrong arity are still
//! told as such first), a connection made before keeps running, `RESET` logs a client out,
//! a wrong user or password is refused, and no password reaches the slow log.

use latchkey_tests::diff::split_args;
use latchkey_tests::{Diff, RawConn};

/// One new connection to each server, fed the same commands, replies compared.
struct Fresh {
    redis: RawConn,
    latchkey: RawConn,
}

impl Fresh {
    fn open(d: &Diff) -> Fresh {
        Fresh {
            redis: RawConn::connect(d.redis_proc.addr()).unwrap(),
            latchkey: RawConn::connect(d.latchkey_server.addr()).unwrap(),
        }
    }

    #[track_caller]
    fn check(&mut self, line: &str) -> Vec<u8> {
        let args = split_args(line);
        let (r, l) = (self.redis.cmd(&args), self.latchkey.cmd(&args));
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
}

#[test]
fn a_password_guards_new_connections_as_in_redis() {
    let mut d = Diff::new();
    d.table(&[
        "SET k v",
        "CONFIG SET requirepass s3cret",
        "CONFIG GET requirepass",
    ]);
    let mut c = Fresh::open(&d);
    c.table(&[
        "PING",
        "GET k",
        "NOSUCHCOMMAND",
        "GET",
        "MULTI",
        "CONFIG SET requirepass x",
        "HELLO 3",
        "HELLO 3 AUTH default wrong",
        "AUTH wrong",
        "AUTH default wrong",
        "AUTH nobody s3cret",
        "AUTH a b c",
        "PING",
        "AUTH s3cret",
        "PING",
        "GET k",
    ]);
    assert_eq!(c.check("GET k"), b"$1\r\nv\r\n");
    // HELLO authenticates and switches the protocol at once (the reply names the connection's
    // id, which differs between the servers: only its first line is compared).
    let mut h = Fresh::open(&d);
    let args = split_args("HELLO 3 AUTH default s3cret SETNAME me");
    let (r, l) = (h.redis.cmd(&args), h.latchkey.cmd(&args));
    assert!(
        r.starts_with(b"%7\r\n") && l.starts_with(b"%7\r\n"),
        "{r:?} {l:?}"
    );
    h.table(&["CLIENT GETNAME", "GET k"]);
    // RESET logs the client out again.
    let mut r = Fresh::open(&d);
    r.table(&["AUTH default s3cret", "PING", "RESET", "PING", "QUIT"]);
    // A connection made before the password keeps running.
    d.table(&["PING", "GET k"]);
    // No password in the slow log, whichever way it was given.
    let mut s = Fresh::open(&d);
    s.table(&[
        "AUTH s3cret",
        "CONFIG SET slowlog-log-slower-than 0",
        "SLOWLOG RESET",
    ]);
    s.check("AUTH default s3cret");
    // (HELLO's reply names the connection's id: sent to both, not compared.)
    let hello = split_args("HELLO 2 AUTH default s3cret");
    s.redis.cmd(&hello);
    s.latchkey.cmd(&hello);
    for reply in [
        s.redis.cmd(&["SLOWLOG", "GET"]),
        s.latchkey.cmd(&["SLOWLOG", "GET"]),
    ] {
        let text = String::from_utf8_lossy(&reply);
        assert!(!text.contains("s3cret"), "{text}");
        assert_eq!(text.matches("(redacted)").count(), 4, "{text}");
    }
    // Without a password again: AUTH with one argument is a mistake, any password opens
    // the default user, another user still fails.
    d.table(&["CONFIG SET requirepass ''"]);
    let mut n = Fresh::open(&d);
    n.table(&[
        "PING",
        "AUTH x",
        "AUTH default anything",
        "AUTH other x",
        "PING",
    ]);
}
