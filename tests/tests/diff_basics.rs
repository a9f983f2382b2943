//! Differential basics: the connection commands and `GET`/`SET`, byte for byte against Redis.

use latchkey_tests::Diff;

#[test]
fn ping_echo_select_and_unknown_commands() {
    let mut d = Diff::new();
    d.table(&[
        "PING",
        "PING hello",
        "PING a b",
        "ECHO hi",
        "ECHO",
        "SELECT 3",
        "SELECT 16",
        "SELECT -1",
        "SELECT x",
        "SELECT 0",
        "NOSUCHCOMMAND a b c",
        "nosuch",
    ]);
    d.check(&["foo", "a\r\nb", &"x".repeat(300)]);
}

#[test]
fn set_options_and_get() {
    let mut d = Diff::new();
    d.table(&[
        "SET k v",
        "GET k",
        "GET missing",
        "SET k v2 NX",
        "SET k v3 XX",
        "GET k",
        "SET k2 v XX",
        "SET k v NX XX",
        "SET k v EX 0",
        "SET k v EX -5",
        "SET k v PX abc",
        "SET k v EX 10 PX 10",
        "SET k v KEEPTTL EX 10",
        "SET k v EX 100",
        "SET k v4 GET",
        "SET k v5 KEEPTTL GET",
        "SET nk v NX GET",
        "SET nk v2 NX GET",
        "SET k v BOGUS",
        "SET k",
        "DEL k nk k2",
        "EXISTS k nk",
    ]);
}

#[test]
fn inline_commands_and_pipelines() {
    let mut d = Diff::new();
    d.check_raw(b"SET a \"hello world\"\r\n");
    d.check_raw(b"GET a\r\n");
    d.check_raw(b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n");
}
