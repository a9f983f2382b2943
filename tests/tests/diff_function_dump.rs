//! Differential tests of `FUNCTION DUMP` and `FUNCTION RESTORE` against a real redis-server,
//! RESP2 and RESP3: the payload of one library is the same bytes on both servers, each server
//! restores the other's, and every policy and error answers as on Redis, leaving the libraries
//! as Redis leaves them.

use latchkey_tests::raw::bulk_payload;
use latchkey_tests::Diff;

/// Redis's CRC-64 (Jones, reflected, starting from zero), bit by bit: for hand-made payloads.
fn crc64(data: &[u8]) -> u64 {
    let mut crc = 0u64;
    for b in data {
        crc ^= *b as u64;
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// `body` with a correct footer: RDB version 10 and the checksum.
fn with_footer(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(&[10, 0]);
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

const LIB1: &str = "#!lua name=lib1\nredis.register_function('f1', function() return 1 end)";
const LIB2: &str = "#!lua name=lib2\nredis.register_function('f2', function() return 2 end)";
const LIB3: &str = "#!lua name=lib3\nredis.register_function('f1', function() return 3 end)";

/// What both servers hold, library by library (one at a time: the two list several in
/// different orders).
fn same_libraries(d: &mut Diff) {
    for lib in ["lib1", "lib2", "lib3"] {
        d.check(&["FUNCTION", "LIST", "LIBRARYNAME", lib, "WITHCODE"]);
    }
    d.check(&["FCALL", "f1", "0"]);
    d.check(&["FCALL", "f2", "0"]);
}

/// `FUNCTION RESTORE` with `payload` and the given extra arguments, on both servers.
#[track_caller]
fn restore(d: &mut Diff, payload: &[u8], extra: &[&str]) {
    let mut args: Vec<Vec<u8>> = vec![b"FUNCTION".to_vec(), b"RESTORE".to_vec(), payload.to_vec()];
    args.extend(extra.iter().map(|e| e.as_bytes().to_vec()));
    d.check(&args);
    same_libraries(d);
}

fn scenario(d: &mut Diff) {
    d.check(&["FUNCTION", "FLUSH"]);
    d.check(&["FUNCTION", "DUMP"]);
    d.check(&["FUNCTION", "DUMP", "x"]);
    d.check(&["FUNCTION", "RESTORE"]);
    d.check(&["FUNCTION", "LOAD", LIB1]);
    // One library: the same bytes on both servers.
    let payload = bulk_payload(&d.check(&["FUNCTION", "DUMP"]));
    restore(d, &payload, &[]);
    restore(d, &payload, &["APPEND"]);
    restore(d, &payload, &["REPLACE"]);
    restore(d, &payload, &["replace"]);
    restore(d, &payload, &["FOO"]);
    restore(d, &payload, &["FLUSH", "x"]);
    restore(d, b"xxxxx", &[]);
    restore(d, &payload[..payload.len() - 1], &[]);
    // Hand-made payloads with correct footers.
    for body in [
        &b"\xf5\x40"[..],
        b"\x00\x03bar",
        b"\xf6\x03bar",
        b"\xf5\x03bar",
        b"\xf5",
        b"",
    ] {
        restore(d, &with_footer(body), &[]);
    }
    d.check(&["FUNCTION", "LOAD", LIB2]);
    restore(d, &payload, &["APPEND"]);
    d.check(&["FUNCTION", "DELETE", "lib1"]);
    d.check(&["FUNCTION", "LOAD", LIB3]);
    // A function name taken by another library: refused, whatever the policy, and nothing
    // changes.
    restore(d, &payload, &["APPEND"]);
    restore(d, &payload, &["REPLACE"]);
    restore(d, &payload, &["FLUSH"]);
    d.check(&["FUNCTION", "DUMP"]);
    // Two libraries in one payload, and the same library twice.
    d.check(&["FUNCTION", "LOAD", LIB2]);
    let two = bulk_payload(&d.redis.cmd(&["FUNCTION", "DUMP"]));
    restore(d, &two, &["FLUSH"]);
    let mut twice = payload[..payload.len() - 10].to_vec();
    twice.extend_from_slice(&payload[..payload.len() - 10]);
    restore(d, &with_footer(&twice), &["FLUSH"]);
}

#[test]
fn function_dump_and_restore_resp2() {
    let mut d = Diff::new();
    scenario(&mut d);
}

#[test]
fn function_dump_and_restore_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    scenario(&mut d);
}

/// Each server restores what the other dumped, several libraries at once.
#[test]
fn function_payloads_cross_between_the_servers() {
    let mut d = Diff::new();
    for lib in [LIB1, LIB2] {
        d.check(&["FUNCTION", "LOAD", lib]);
    }
    let from_redis = bulk_payload(&d.redis.cmd(&["FUNCTION", "DUMP"]));
    let from_latchkey = bulk_payload(&d.latchkey.cmd(&["FUNCTION", "DUMP"]));
    for payload in [from_redis, from_latchkey] {
        restore(&mut d, &payload, &["FLUSH"]);
        restore(&mut d, &payload, &["REPLACE"]);
    }
}
