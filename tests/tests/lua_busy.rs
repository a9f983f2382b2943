//! A runaway script: other clients get `-BUSY` past the threshold, `SCRIPT KILL` stops it, and
//! a script that has written cannot be killed.

use std::time::{Duration, Instant};

use latchkey_server::Server;
use latchkey_tests::RawConn;

fn busy_server() -> latchkey_server::BlockingServer {
    Server::builder()
        .config("busy-reply-threshold", "50")
        .start_blocking()
        .unwrap()
}

/// Sends GET until the server answers -BUSY (the script is running and past the threshold).
fn wait_until_busy(conn: &mut RawConn) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = String::from_utf8(conn.cmd(&["GET", "probe"])).unwrap();
        if reply.starts_with("-BUSY Redis is busy running a script") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the script never became busy: {reply}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn busy_script_is_reported_and_killed() {
    let server = busy_server();
    let addr = server.addr();
    let mut runner = RawConn::connect(addr).unwrap();
    runner.send_raw(&RawConn::encode(&["EVAL", "while true do end", "0"]));
    let mut other = RawConn::connect(addr).unwrap();
    wait_until_busy(&mut other);
    assert_eq!(other.cmd(&["SCRIPT", "KILL"]), b"+OK\r\n");
    let killed = String::from_utf8(runner.read_reply()).unwrap();
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "{killed}"
    );
    // The server is usable again, for both clients.
    assert_eq!(other.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    assert_eq!(runner.cmd(&["GET", "k"]), b"$1\r\nv\r\n");
    assert_eq!(
        other.cmd(&["SCRIPT", "KILL"]),
        b"-NOTBUSY No scripts in execution right now.\r\n"
    );
}

#[test]
fn a_script_that_wrote_is_unkillable() {
    let server = busy_server();
    let addr = server.addr();
    let mut runner = RawConn::connect(addr).unwrap();
    // Writes, then spins for a bounded time (the test must end on its own).
    runner.send_raw(&RawConn::encode(&[
        "EVAL",
        "redis.call('set','w','1'); local i = 0; while i < 50000000 do i = i + 1 end; return i",
        "0",
    ]));
    let mut other = RawConn::connect(addr).unwrap();
    wait_until_busy(&mut other);
    let reply = String::from_utf8(other.cmd(&["SCRIPT", "KILL"])).unwrap();
    assert!(reply.starts_with("-UNKILLABLE"), "{reply}");
    assert_eq!(runner.read_reply(), b":50000000\r\n");
    assert_eq!(other.cmd(&["GET", "w"]), b"$1\r\n1\r\n");
}

/// A script whose time goes into a few slow `redis.call`s (reading a long list whole) runs very
/// few Lua instructions, so nothing that counts instructions ever notices it. Embedded in a
/// runtime with one worker, it must still not stop that worker's timers: a task sleeping in
/// short steps keeps waking while the script runs. What is asserted is order, not speed: the
/// ticker's count when the script answers is past its count when the script started.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn slow_calls_in_a_script_do_not_freeze_the_runtimes_timers() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    let server = Server::builder().no_listener().start().await.unwrap();
    let mut c = server.client();
    // A long list of numbers (built by a script: one round trip).
    let fill = "for i = 1, tonumber(ARGV[1]) do redis.call('rpush', KEYS[1], (i * 7919) % 100003) end return redis.call('llen', KEYS[1])";
    assert_eq!(
        c.cmd(["EVAL", fill, "1", "big", "200000"]).await,
        latchkey_server::Frame::Integer(200000)
    );
    let ticks = Arc::new(AtomicU64::new(0));
    let ticker = {
        let ticks = ticks.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                ticks.fetch_add(1, Ordering::AcqRel);
            }
        })
    };
    // Let the ticker start ticking.
    while ticks.load(Ordering::Acquire) < 2 {
        tokio::task::yield_now().await;
    }
    // The script runs on the runtime's only worker (a spawned task, as a connection is).
    let script = tokio::spawn({
        let ticks = ticks.clone();
        let mut c = server.client();
        async move {
            let before = ticks.load(Ordering::Acquire);
            let reply = c
                .cmd([
                    "EVAL",
                    "local n = 0 for i = 1, 8 do n = n + #redis.call('lrange', KEYS[1], 0, -1) end return n",
                    "1",
                    "big",
                ])
                .await;
            (before, ticks.load(Ordering::Acquire), reply)
        }
    });
    let (before, after, reply) = script.await.unwrap();
    ticker.abort();
    assert_eq!(reply, latchkey_server::Frame::Integer(8 * 200000));
    assert!(
        after >= before + 3,
        "the ticker's sleeps stood still while the script ran: {before} ticks before, {after} after"
    );
}

/// A script that loops over slow `redis.call`s runs a handful of Lua instructions per call,
/// so Redis's instruction hook (every 100,000 instructions) would not see a `SCRIPT KILL` for
/// thousands of calls. The kill takes effect at the next call: the script answers the kill
/// error instead of finishing its loop, and wrote nothing.
#[test]
fn a_loop_of_slow_calls_is_killed_at_the_next_call() {
    let server = busy_server();
    let addr = server.addr();
    let mut runner = RawConn::connect(addr).unwrap();
    // A long list, pushed by one command (no Lua instructions spent on it).
    let mut push: Vec<String> = vec!["RPUSH".into(), "big".into()];
    push.extend((0..20_000).map(|i| i.to_string()));
    assert_eq!(runner.cmd(&push), b":20000\r\n");
    // About ten instructions per call: 3000 calls stay far below the hook's 100,000.
    runner.send_raw(&RawConn::encode(&[
        "EVAL",
        "local n = 0 for i = 1, 3000 do n = n + #redis.call('lrange', KEYS[1], 0, -1) end return 'finished'",
        "1",
        "big",
    ]));
    let mut other = RawConn::connect(addr).unwrap();
    wait_until_busy(&mut other);
    assert_eq!(other.cmd(&["SCRIPT", "KILL"]), b"+OK\r\n");
    let killed = String::from_utf8(runner.read_reply()).unwrap();
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "the script ran on past SCRIPT KILL: {killed}"
    );
    assert_eq!(runner.cmd(&["LLEN", "big"]), b":20000\r\n");
}

/// A killed script that catches the kill error with `pcall` meets it again at its next line,
/// as in Redis (whose hook fires on every line once a script is killed): it cannot loop on.
#[test]
fn a_kill_caught_by_pcall_still_stops_the_script() {
    let server = busy_server();
    let addr = server.addr();
    let mut runner = RawConn::connect(addr).unwrap();
    // Each round spins inside a pcall (where the hook's kill error lands, and is caught) for
    // a bounded time; the test ends on its own either way.
    runner.send_raw(&RawConn::encode(&[
        "EVAL",
        "local rounds = 0 while rounds < 40 do pcall(function() local i = 0 while i < 3000000 do i = i + 1 end end) rounds = rounds + 1 end return 'survived'",
        "0",
    ]));
    let mut other = RawConn::connect(addr).unwrap();
    wait_until_busy(&mut other);
    assert_eq!(other.cmd(&["SCRIPT", "KILL"]), b"+OK\r\n");
    let killed = String::from_utf8(runner.read_reply()).unwrap();
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "pcall caught the kill and the script ran to its end: {killed}"
    );
    // The next script runs under the usual hook again, and to its end.
    assert_eq!(
        runner.cmd(&[
            "EVAL",
            "local i = 0 while i < 300000 do i = i + 1 end return i",
            "0"
        ]),
        b":300000\r\n"
    );
}

/// What a transaction sees of a script that runs past its time limit, on latchkey and on a
/// real redis-server, byte for byte: a command sent inside `MULTI` while the script is busy is
/// refused with `BUSY` and dooms the transaction (`EXECABORT` at `EXEC`, once the script is
/// killed), and an `EXEC` sent while it is busy is refused as `EXECABORT ... BUSY` and ends the
/// transaction. Before, latchkey queued the command and ran the transaction without it.
#[test]
fn a_busy_script_dooms_the_transaction_it_refuses_a_command_of() {
    let server = busy_server();
    let redis = latchkey_tests::RedisProcess::spawn(&["--busy-reply-threshold", "50"]);
    let transcript = |addr: std::net::SocketAddr| -> Vec<String> {
        let mut out = Vec::new();
        let mut c = RawConn::connect(addr).unwrap();
        let mut admin = RawConn::connect(addr).unwrap();
        let mut runner = RawConn::connect(addr).unwrap();
        let mut say = |c: &mut RawConn, args: &[&str]| {
            out.push(format!(
                "{} -> {}",
                args.join(" "),
                String::from_utf8_lossy(&c.cmd(args)).trim_end()
            ));
        };
        say(&mut c, &["SET", "xx", "1"]);
        // A command refused while the script is busy dooms the transaction.
        say(&mut c, &["MULTI"]);
        runner.send_raw(&RawConn::encode(&["EVAL", "while true do end", "0"]));
        wait_until_busy(&mut admin);
        say(&mut c, &["INCR", "xx"]);
        say(&mut admin, &["SCRIPT", "KILL"]);
        runner.read_reply();
        say(&mut c, &["INCR", "xx"]);
        say(&mut c, &["EXEC"]);
        say(&mut c, &["GET", "xx"]);
        say(&mut c, &["PING", "out of the transaction"]);
        // An EXEC refused while the script is busy ends the transaction.
        say(&mut c, &["MULTI"]);
        say(&mut c, &["INCR", "xx"]);
        runner.send_raw(&RawConn::encode(&["EVAL", "while true do end", "0"]));
        wait_until_busy(&mut admin);
        say(&mut c, &["EXEC"]);
        say(&mut admin, &["SCRIPT", "KILL"]);
        runner.read_reply();
        say(&mut c, &["EXEC"]);
        say(&mut c, &["GET", "xx"]);
        out
    };
    let ours = transcript(server.addr());
    let theirs = transcript(redis.addr());
    assert_eq!(ours, theirs);
    // What both said, so that the comparison cannot pass on two equally wrong transcripts.
    assert!(
        theirs.contains(
            &"EXEC -> -EXECABORT Transaction discarded because of previous errors.".to_string()
        ),
        "{theirs:#?}"
    );
    assert!(
        theirs.iter().any(|l| l.starts_with(
            "EXEC -> -EXECABORT Transaction discarded because of: BUSY Redis is busy running a script."
        )),
        "{theirs:#?}"
    );
    assert_eq!(theirs.last().unwrap(), "GET xx -> $1\r\n1");
}
