//! What a replica does with its master's stream and its own AOF, as Redis 7.0 does it.
//!
//! - The master's commands are not refused by checks meant for clients: while a script runs
//!   past `busy-reply-threshold` on the replica, other clients get `-BUSY`, but the master's
//!   stream waits for the script to end and is then applied (Redis stops reading its master
//!   meanwhile). A `BUSY` answered to the link would be read by no one, and the master's
//!   write lost. Run on latchkey and on a real redis-server pair alike.
//! - A replica with `appendonly yes` rewrites its AOF after a full sync (Redis's
//!   `restartAOFAfterSYNC`): the file then holds the master's data set, not the keys the
//!   snapshot replaced, and a restart from it finds what the master has.

use std::net::SocketAddr;
use std::time::Duration;

use latchkey_server::Server;
use latchkey_tests::pair::{cmd, info_offset, until, wait_link_up};
use latchkey_tests::persisted::{latchkey_aof, temp_dir};
use latchkey_tests::{RawConn, RedisProcess};

/// Makes `replica` follow `master` and waits until the link is up.
fn follow(replica: SocketAddr, master: SocketAddr) {
    let port = master.port().to_string();
    assert_eq!(cmd(replica, &["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    wait_link_up(replica);
}

/// Waits until `replica` applied everything `master` sent (their offsets meet).
fn wait_in_sync(master: SocketAddr, replica: SocketAddr) {
    until("the replica to catch up", Duration::from_secs(30), || {
        info_offset(master, "master_repl_offset") == info_offset(replica, "master_repl_offset")
    });
}

/// Sends `GET probe` to the replica until it answers `-BUSY` (its script ran past the
/// threshold).
fn wait_until_busy(replica: SocketAddr) {
    let mut c = RawConn::connect(replica).unwrap();
    until("the script to be busy", Duration::from_secs(20), || {
        c.cmd(&["GET", "probe"]).starts_with(b"-BUSY")
    });
}

/// The scenario, on any master and replica (whose `busy-reply-threshold` is small): a script
/// spins on the replica; the master writes; the write is applied once the script is killed.
fn master_write_during_a_busy_script(master: SocketAddr, replica: SocketAddr) {
    follow(replica, master);
    let mut runner = RawConn::connect(replica).unwrap();
    runner.send_raw(&RawConn::encode(&["EVAL", "while true do end", "0"]));
    wait_until_busy(replica);
    let mut m = RawConn::connect(master).unwrap();
    assert_eq!(m.cmd(&["SET", "x", "1"]), b"+OK\r\n");
    // The replica cannot have applied it while the script runs, so it does not acknowledge
    // it (on latchkey before the fix it dropped the write with a `BUSY` and acknowledged it).
    // The wait also lets the write reach the replica before the script is killed.
    assert_eq!(m.cmd(&["WAIT", "1", "1500"]), b":0\r\n");
    assert_eq!(cmd(replica, &["SCRIPT", "KILL"]), b"+OK\r\n");
    let killed = runner.read_reply();
    assert!(killed.starts_with(b"-ERR Script killed"), "{killed:?}");
    assert_eq!(m.cmd(&["WAIT", "1", "20000"]), b":1\r\n");
    wait_in_sync(master, replica);
    assert_eq!(cmd(replica, &["GET", "x"]), b"$1\r\n1\r\n");
}

#[test]
fn a_busy_script_on_the_replica_delays_the_masters_stream_on_redis() {
    let master = RedisProcess::spawn(&[]);
    let replica = RedisProcess::spawn(&["--busy-reply-threshold", "50"]);
    master_write_during_a_busy_script(master.addr(), replica.addr());
}

#[test]
fn a_busy_script_on_the_replica_delays_the_masters_stream_on_latchkey() {
    let master = Server::builder().start_blocking().unwrap();
    let replica = Server::builder()
        .config("busy-reply-threshold", "50")
        .start_blocking()
        .unwrap();
    master_write_during_a_busy_script(master.addr(), replica.addr());
}

/// `KEYS *`, sorted, as text lines.
fn keys(addr: SocketAddr) -> Vec<String> {
    let reply = String::from_utf8(cmd(addr, &["KEYS", "*"])).unwrap();
    let mut keys: Vec<String> = reply
        .split("\r\n")
        .skip(2)
        .step_by(2)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    keys.sort();
    keys
}

fn persistence_field(addr: SocketAddr, field: &str) -> String {
    let info = String::from_utf8(cmd(addr, &["INFO", "persistence"])).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in {info}"))
        .to_string()
}

/// The replica's keys before it follows a master are in its AOF; after the full sync the AOF
/// is rewritten from the master's data set, so a restart from it has the master's keys (those
/// of the snapshot and those the stream brought after), not the replaced ones.
#[test]
fn a_replica_rewrites_its_aof_after_a_full_sync() {
    let master = Server::builder().start_blocking().unwrap();
    for (k, v) in [("m1", "a"), ("m2", "b")] {
        assert_eq!(cmd(master.addr(), &["SET", k, v]), b"+OK\r\n");
    }
    let dir = temp_dir("replica-aof");
    let replica = latchkey_aof(dir.path());
    for k in ["stale1", "stale2", "m1"] {
        assert_eq!(cmd(replica.addr(), &["SET", k, "old"]), b"+OK\r\n");
    }
    follow(replica.addr(), master.addr());
    // The rewrite the sync started has finished and its file is the AOF.
    until("the AOF rewrite", Duration::from_secs(30), || {
        persistence_field(replica.addr(), "aof_rewrite_in_progress") == "0"
            && persistence_field(replica.addr(), "aof_rewrite_scheduled") == "0"
    });
    assert_eq!(persistence_field(replica.addr(), "aof_enabled"), "1");
    assert_eq!(
        persistence_field(replica.addr(), "aof_last_bgrewrite_status"),
        "ok"
    );
    // A write after the sync reaches the replica's new file through the stream.
    assert_eq!(cmd(master.addr(), &["SET", "m3", "c"]), b"+OK\r\n");
    assert_eq!(cmd(master.addr(), &["WAIT", "1", "20000"]), b":1\r\n");
    wait_in_sync(master.addr(), replica.addr());
    let expected = keys(master.addr());
    assert_eq!(expected, ["m1", "m2", "m3"]);
    assert_eq!(keys(replica.addr()), expected);
    drop(replica);
    let restarted = latchkey_aof(dir.path());
    assert_eq!(keys(restarted.addr()), expected);
    assert_eq!(cmd(restarted.addr(), &["GET", "m1"]), b"$1\r\na\r\n");
}
