//! One long synchronous command never freezes the runtime the server is embedded in.
//!
//! Each test embeds the server in a multi-thread tokio runtime with a single worker, the
//! harshest case: while that worker is inside a long synchronous step, nothing else of the
//! runtime runs unless the step handed the worker off first. A ticker task sleeps in 1 ms
//! steps and counts its wake-ups; the long step is one command that walks a large keyspace
//! (`KEYS` with a pattern that matches nothing: a cheap reply, a long walk), sent by an
//! in-process client, over a socket, or as a script's first and only `redis.call`. What is
//! asserted is counts and order, not speed: the ticker keeps counting while the command runs,
//! and a second client's `BLPOP` with a short timeout answers before the long command does.
//! The sorted-set commands whose keys follow a count (`ZUNIONSTORE`, `ZINTERCARD`) and a
//! `ZRANDMEMBER` with a large negative count are long steps of the same kind.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use latchkey_server::{Frame, Server, ServerHandle};
use latchkey_tests::RawConn;

/// Keys in the keyspace: far past the server's hand-off threshold, enough that walking them
/// takes many of the ticker's steps.
const KEYS: i64 = 300_000;

/// A server whose keyspace holds [`KEYS`] keys (filled by one script: one round trip).
async fn large_keyspace(listener: bool) -> ServerHandle {
    let builder = Server::builder();
    let builder = if listener {
        builder
    } else {
        builder.no_listener()
    };
    let server = builder.start().await.unwrap();
    let fill = "for i = 1, tonumber(ARGV[1]) do redis.call('set', 'k' .. i, 'v') end return redis.call('dbsize')";
    assert_eq!(
        server
            .client()
            .cmd(["EVAL", fill, "0", &KEYS.to_string()])
            .await,
        Frame::Integer(KEYS)
    );
    server
}

/// A task that wakes every millisecond and counts its wake-ups.
fn ticker() -> (Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
    let ticks = Arc::new(AtomicU64::new(0));
    let task = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                ticks.fetch_add(1, Ordering::AcqRel);
            }
        }
    });
    (ticks, task)
}

/// Waits until the ticker has ticked `n` times.
async fn ticked(ticks: &AtomicU64, n: u64) {
    while ticks.load(Ordering::Acquire) < n {
        tokio::task::yield_now().await;
    }
}

/// The long command, from an in-process client, on the runtime's only worker (a spawned task,
/// as a connection is): the ticker keeps ticking while it runs, and a second client's
/// `BLPOP` with a 10 ms timeout answers (nil) before `KEYS` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn keys_over_a_large_keyspace_leaves_the_runtimes_timers_running() {
    let server = large_keyspace(false).await;
    let reply = runs_beside_a_blpop(&server, &["KEYS", "nomatch*"]).await;
    assert_eq!(reply, Frame::Array(vec![]));
}

/// The same command from a client over TCP: the connection's task is the one that walks.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn keys_from_a_socket_leaves_the_runtimes_timers_running() {
    let server = large_keyspace(true).await;
    let addr = server.addr();
    let (ticks, ticker) = ticker();
    ticked(&ticks, 2).await;
    // The client blocks on its socket: it runs on a thread of its own, outside the runtime.
    let client = std::thread::spawn({
        let ticks = ticks.clone();
        move || {
            let mut conn = RawConn::connect(addr).unwrap();
            assert_eq!(conn.cmd(&["PING"]), b"+PONG\r\n");
            let before = ticks.load(Ordering::Acquire);
            let reply = conn.cmd(&["KEYS", "nomatch*"]);
            (before, ticks.load(Ordering::Acquire), reply)
        }
    });
    let (before, after, reply) = tokio::task::spawn_blocking(move || client.join().unwrap())
        .await
        .unwrap();
    ticker.abort();
    assert_eq!(reply, b"*0\r\n");
    assert!(
        after >= before + 3,
        "the ticker stood still while the socket's KEYS ran: {before} ticks before, {after} after"
    );
}

/// A script whose first (and only) `redis.call` is the long one: no time has passed yet when
/// the call starts, so nothing that waits for the script to have run a while can help; the
/// call itself must hand the worker off before it walks.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_scripts_first_slow_call_leaves_the_runtimes_timers_running() {
    let server = large_keyspace(false).await;
    let (ticks, ticker) = ticker();
    ticked(&ticks, 2).await;
    let script = tokio::spawn({
        let ticks = ticks.clone();
        let mut c = server.client();
        async move {
            let before = ticks.load(Ordering::Acquire);
            let reply = c
                .cmd(["EVAL", "return #redis.call('keys', 'nomatch*')", "0"])
                .await;
            (before, ticks.load(Ordering::Acquire), reply)
        }
    });
    let (before, after, reply) = script.await.unwrap();
    ticker.abort();
    assert_eq!(reply, Frame::Integer(0));
    assert!(
        after >= before + 3,
        "the ticker stood still during the script's one slow call: {before} ticks before, {after} after"
    );
}

/// `LCS` is quadratic (here as in Redis): two strings of 3,000 bytes fill a table of nine
/// million cells. It hands the worker off before it fills the table, so the ticker keeps
/// counting and a second client's `BLPOP` with a 10 ms timeout answers before `LCS` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_large_lcs_leaves_the_runtimes_timers_running() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let mut seed: u64 = 7;
    let mut text = |n: usize| -> String {
        (0..n)
            .map(|_| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                char::from(b'a' + (seed >> 59) as u8 % 4)
            })
            .collect()
    };
    let (a, b) = (text(3000), text(3000));
    let mut c = server.client();
    assert_eq!(c.cmd(["SET", "a", a.as_str()]).await, Frame::ok());
    assert_eq!(c.cmd(["SET", "b", b.as_str()]).await, Frame::ok());
    let reply = runs_beside_a_blpop(&server, &["LCS", "a", "b", "LEN"]).await;
    // Four letters at random: the common subsequence is long, and no longer than a string.
    match reply {
        Frame::Integer(n) => assert!((1500..=3000).contains(&n), "LCS length {n}"),
        other => panic!("LCS answered {other:?}"),
    }
}

/// Runs `cmd` from an in-process client on the runtime's only worker (a spawned task, as a
/// connection is) while a ticker runs and a second client waits in a `BLPOP` with a 10 ms
/// timeout. Checks that the ticker kept ticking meanwhile, and that the `BLPOP` timed out
/// (nil) before `cmd` answered; returns `cmd`'s reply.
async fn runs_beside_a_blpop(server: &ServerHandle, cmd: &[&str]) -> Frame {
    let (ticks, ticker) = ticker();
    ticked(&ticks, 2).await;
    // Who answered first: each task takes the next number when its command answers.
    let order = Arc::new(AtomicU64::new(0));
    let blpop = tokio::spawn({
        let mut c = server.client();
        let order = order.clone();
        async move {
            let reply = c.cmd(["BLPOP", "nothing", "0.01"]).await;
            (order.fetch_add(1, Ordering::AcqRel), reply)
        }
    });
    // The BLPOP is waiting before the long command starts.
    while latchkey_server::internals::node(server).blocked_clients() == 0 {
        tokio::task::yield_now().await;
    }
    let long = tokio::spawn({
        let ticks = ticks.clone();
        let order = order.clone();
        let mut c = server.client();
        let cmd: Vec<String> = cmd.iter().map(|a| a.to_string()).collect();
        async move {
            let before = ticks.load(Ordering::Acquire);
            let reply = c.cmd(cmd).await;
            let after = ticks.load(Ordering::Acquire);
            (order.fetch_add(1, Ordering::AcqRel), before, after, reply)
        }
    });
    let (long_order, before, after, reply) = long.await.unwrap();
    let (blpop_order, blpop_reply) = blpop.await.unwrap();
    ticker.abort();
    assert_eq!(blpop_reply, Frame::NullArray);
    assert!(
        after >= before + 3,
        "the ticker stood still while {cmd:?} ran: {before} ticks before, {after} after"
    );
    assert!(
        blpop_order < long_order,
        "the BLPOP's 10 ms timeout fired only after {cmd:?} had answered"
    );
    reply
}

/// Runs `cmd` from an in-process client while the ticker runs, and returns its reply after
/// checking that the ticker kept ticking meanwhile.
async fn ticks_through(server: &ServerHandle, cmd: &[&str]) -> Frame {
    let (ticks, ticker) = ticker();
    ticked(&ticks, 2).await;
    let run = tokio::spawn({
        let ticks = ticks.clone();
        let mut c = server.client();
        let cmd: Vec<String> = cmd.iter().map(|a| a.to_string()).collect();
        async move {
            let before = ticks.load(Ordering::Acquire);
            let reply = c.cmd(cmd).await;
            (before, ticks.load(Ordering::Acquire), reply)
        }
    });
    let (before, after, reply) = run.await.unwrap();
    ticker.abort();
    assert!(
        after >= before + 3,
        "the ticker stood still while {cmd:?} ran: {before} ticks before, {after} after"
    );
    reply
}

/// The sorted-set commands whose keys follow a count (`ZUNIONSTORE dst numkeys key...`) hand
/// the worker off once they know their keys, and a `ZRANDMEMBER` with a large negative count
/// (many picks from a small set) before it picks.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn large_sorted_set_algebra_and_picks_leave_the_runtimes_timers_running() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let fill = "for i = 1, tonumber(ARGV[1]) do redis.call('zadd', KEYS[1], i, 'm' .. i) redis.call('zadd', KEYS[2], -i, 'm' .. i) end return redis.call('zcard', KEYS[1])";
    assert_eq!(
        server
            .client()
            .cmd(["EVAL", fill, "2", "a", "b", "150000"])
            .await,
        Frame::Integer(150_000)
    );
    let reply = ticks_through(&server, &["ZUNIONSTORE", "u", "2", "a", "b"]).await;
    assert_eq!(reply, Frame::Integer(150_000));
    // Every score is i + -i.
    let mut c = server.client();
    assert_eq!(
        c.cmd(["ZCOUNT", "u", "0", "0"]).await,
        Frame::Integer(150_000)
    );
    let reply = ticks_through(&server, &["ZINTERCARD", "2", "a", "b"]).await;
    assert_eq!(reply, Frame::Integer(150_000));
    c.cmd(["ZADD", "small", "1", "x"]).await;
    match ticks_through(&server, &["ZRANDMEMBER", "small", "-2000000"]).await {
        Frame::Array(picks) => assert_eq!(picks.len(), 2_000_000),
        other => panic!("not an array: {other:?}"),
    }
}
