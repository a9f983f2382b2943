//! A hostile tenant gets its own error and nothing more. Each test has the rogue guest attack
//! one quota, asserts the refusal (or the trap), and asserts that a well-behaved tenant running
//! the lock client meanwhile (lock cycles, and a lease the host keeps for it) never noticed:
//! against the embedded server and against a real `redis-server` the test spawns.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latchkey_client::Reply;
use latchkey_plugin::{Backend, Host, Instance, Limits, Plugin, Released};
use latchkey_server::{Server, ServerHandle};
use wasmtime::component::ResourceAny;

/// The server a test runs against, with a host over it and a backend that sends commands as
/// they are (not namespaced), to look at what tenants did.
struct Bed {
    host: Host,
    admin: Arc<dyn Backend>,
    lock_client: Plugin,
    rogue: Plugin,
    what: &'static str,
    _server: Option<ServerHandle>,
    _redis: Option<common::RedisProcess>,
}

impl Bed {
    async fn embedded(limits: Limits) -> Bed {
        let server = Server::builder().no_listener().start().await.unwrap();
        let backend = <dyn Backend>::local(&server);
        Bed::over(
            backend.clone(),
            backend,
            limits,
            "embedded",
            Some(server),
            None,
        )
    }

    async fn redis(limits: Limits) -> Bed {
        let redis = common::RedisProcess::spawn();
        let backend = <dyn Backend>::redis(&redis.url()).await.unwrap();
        let admin = <dyn Backend>::redis(&redis.url()).await.unwrap();
        Bed::over(backend, admin, limits, "redis-server", None, Some(redis))
    }

    fn over(
        backend: Arc<dyn Backend>,
        admin: Arc<dyn Backend>,
        limits: Limits,
        what: &'static str,
        server: Option<ServerHandle>,
        redis: Option<common::RedisProcess>,
    ) -> Bed {
        let host = Host::new(backend, common::config(limits)).unwrap();
        Bed {
            lock_client: common::lock_client(&host),
            rogue: common::rogue(&host),
            host,
            admin,
            what,
            _server: server,
            _redis: redis,
        }
    }

    async fn cmd(&self, args: &[&str]) -> Reply {
        let args = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self.admin.command(args).await.unwrap()
    }

    async fn rogue(&self, tenant: &str) -> Instance {
        self.host
            .tenant(tenant)
            .instantiate(&self.rogue)
            .await
            .unwrap()
    }
}

type Attack<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// The embedded server, then a real `redis-server`, each with a host under `limits`.
async fn both(limits: Limits) -> [Bed; 2] {
    [
        Bed::embedded(limits.clone()).await,
        Bed::redis(limits).await,
    ]
}

/// The well-behaved tenant "good": takes a watched lock whose lease the host keeps (TTL
/// 600 ms, so it lives only while renewals get through), and cycles another lock (take,
/// release) while `attack` runs. Asserts it completed cycles meanwhile, every one cleanly, and
/// that its kept lease is still held, on the server too.
async fn meanwhile(bed: &Bed, attack: Attack<'_>) {
    let good = bed.host.tenant("good");
    let mut keeper = good.instantiate(&bed.lock_client).await.unwrap();
    let lock = watched(&mut keeper, "kept").await;
    assert!(acquire(&mut keeper, lock, 600).await, "{}", bed.what);
    let mut worker = good.instantiate(&bed.lock_client).await.unwrap();
    let attacking = Arc::new(AtomicBool::new(true));
    let a = attacking.clone();
    // The cycles start with the attack and go on until it is over, and at least one was
    // completed.
    let cycles = tokio::spawn(async move {
        let mut total = 0u32;
        while a.load(Ordering::SeqCst) || total == 0 {
            let lease = worker
                .try_lock("job", Duration::from_secs(5))
                .await
                .expect("the good tenant never traps")
                .expect("its commands always get through")
                .expect("its lock is free");
            let released = worker.unlock("job", lease).await.unwrap().unwrap();
            assert_eq!(released, Released::Released);
            total += 1;
            // A well-behaved tenant: busy, not a busy loop.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        total
    });
    attack.await;
    attacking.store(false, Ordering::SeqCst);
    let total = tokio::time::timeout(Duration::from_secs(30), cycles)
        .await
        .expect("the good tenant's cycles never stall")
        .unwrap();
    assert!(total > 0, "{}", bed.what);
    // Two TTLs more: the lease lives only if its renewals got through all along.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(
        held(&mut keeper, lock).await,
        "{}: the kept lease was lost",
        bed.what
    );
    assert!(
        matches!(bed.cmd(&["PTTL", "{good:kept}"]).await, Reply::Int(ms) if ms > 0),
        "{}",
        bed.what
    );
    assert_eq!(
        release(&mut keeper, lock).await,
        Released::Released,
        "{}",
        bed.what
    );
}

async fn watched(inst: &mut Instance, name: &str) -> ResourceAny {
    let name = name.to_string();
    inst.run(move |(store, _, l)| {
        Box::pin(async move {
            let w = l.unwrap().latchkey_locks_watchdog().watched_lock();
            w.call_constructor(&mut *store, &name).await
        })
    })
    .await
    .unwrap()
}

async fn acquire(inst: &mut Instance, lock: ResourceAny, ttl_ms: u64) -> bool {
    inst.run(move |(store, _, l)| {
        Box::pin(async move {
            let w = l.unwrap().latchkey_locks_watchdog().watched_lock();
            w.call_acquire(&mut *store, lock, ttl_ms).await
        })
    })
    .await
    .unwrap()
    .unwrap()
}

async fn held(inst: &mut Instance, lock: ResourceAny) -> bool {
    inst.run(move |(store, _, l)| {
        Box::pin(async move {
            let w = l.unwrap().latchkey_locks_watchdog().watched_lock();
            w.call_held(&mut *store, lock).await
        })
    })
    .await
    .unwrap()
}

async fn release(inst: &mut Instance, lock: ResourceAny) -> Released {
    inst.run(move |(store, _, l)| {
        Box::pin(async move {
            let w = l.unwrap().latchkey_locks_watchdog().watched_lock();
            w.call_release(&mut *store, lock).await
        })
    })
    .await
    .unwrap()
    .unwrap()
}

/// The rogue's `raw`: one command, its reply rendered or the host's refusal.
async fn raw(inst: &mut Instance, args: &[&str]) -> Result<String, String> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    inst.call::<(Vec<String>,), (Result<String, String>,)>("raw", (args,))
        .await
        .expect("a refusal is an error for the tenant, not a trap")
        .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_with_too_many_arguments_or_bytes_is_refused_before_it_is_copied() {
    for bed in both(Limits::default()).await {
        let bed = &bed;
        meanwhile(
            bed,
            Box::pin(async move {
                let mut rogue = bed.rogue("rogue").await;
                let mut flood = async |count: u32, size: u32| {
                    rogue
                        .call::<(u32, u32), (Result<String, String>,)>("flood-args", (count, size))
                        .await
                        .unwrap()
                        .0
                };
                // A hundred thousand entries pointing at one 64 KiB buffer: 6.5 GB once copied.
                let e = flood(100_000, 64 << 10).await.unwrap_err();
                assert_eq!(
                    e,
                    "100000 arguments is over the tenant's limit of 1024 per command"
                );
                // Few entries, but 2 MiB in all.
                let e = flood(512, 4 << 10).await.unwrap_err();
                assert!(
                    e.contains("bytes of arguments is over the tenant's limit of 1048576"),
                    "{e}"
                );
                // Within both: the command runs (a GET of one key).
                assert_eq!(flood(2, 8).await, Ok("ok".into()));
            }),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_leases_are_bounded_in_count_key_token_and_ttl() {
    let limits = Limits {
        leases: 8,
        lease_key_bytes: 64,
        lease_token_bytes: 48,
        lease_ttl_min: Duration::from_millis(100),
        lease_ttl_max: Duration::from_secs(10),
        ..Limits::default()
    };
    for bed in both(limits).await {
        let bed = &bed;
        meanwhile(
            bed,
            Box::pin(async move {
                let mut rogue = bed.rogue("rogue").await;
                let mut keep = async |n: u32, key: u32, token: u32, ttl: u64| {
                    rogue
                        .call::<(u32, u32, u32, u64), ((u32, String),)>(
                            "keep-many",
                            (n, key, token, ttl),
                        )
                        .await
                        .unwrap()
                        .0
                };
                let (kept, e) = keep(1, 65, 8, 1_000).await;
                assert_eq!(
                    (kept, e.as_str()),
                    (0, "a kept lease's key may have at most 64 bytes, not 65")
                );
                // (The lock client's own tokens are 40 bytes.)
                let (kept, e) = keep(1, 8, 49, 1_000).await;
                assert_eq!(
                    (kept, e.as_str()),
                    (0, "a kept lease's token may have at most 48 bytes, not 49")
                );
                for ttl in [50, 20_000] {
                    let (kept, e) = keep(1, 8, 8, ttl).await;
                    assert_eq!(kept, 0);
                    assert_eq!(
                        e,
                        "ttl-ms must be between 100 and 10000 for the host to keep the lease"
                    );
                }
                let (kept, e) = keep(20, 8, 8, 1_000).await;
                assert_eq!(
                    (kept, e.as_str()),
                    (8, "the tenant already has 8 leases kept, its limit")
                );
                assert_eq!(rogue.kept_leases(), 8);
                // The quota is the tenant's, not the instance's.
                let mut second = bed.rogue("rogue").await;
                let (kept, e) = second
                    .call::<(u32, u32, u32, u64), ((u32, String),)>("keep-many", (1, 8, 8, 1_000))
                    .await
                    .unwrap()
                    .0;
                assert_eq!(
                    (kept, e.as_str()),
                    (0, "the tenant already has 8 leases kept, its limit")
                );
                // Closing the instance gives its leases back.
                rogue.close().await;
                let (kept, _) = second
                    .call::<(u32, u32, u32, u64), ((u32, String),)>("keep-many", (1, 8, 8, 1_000))
                    .await
                    .unwrap()
                    .0;
                assert_eq!(kept, 1);
                second.close().await;
            }),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_renewals_are_charged_to_the_tenants_rate() {
    // 20 calls a second. The rogue keeps ten leases of 300 ms: their renewals alone would take
    // 100 calls a second. Uncharged, the host would send them all; charged, they wait their
    // turn, the leases lapse, and the rogue is interrupted for it. The good tenant (same
    // limits, its own bucket) is not.
    let limits = Limits {
        calls_per_sec: 20.0,
        burst: 5.0,
        ..Limits::default()
    };
    for bed in both(limits).await {
        let bed = &bed;
        meanwhile(
            bed,
            Box::pin(async move {
                let mut rogue = bed.rogue("rogue").await;
                let started = rogue
                    .call::<(u32, u32, u32, u64), ((u32, String),)>("keep-many", (10, 8, 8, 300))
                    .await;
                let lost = match started {
                    Err(trapped) => trapped.0,
                    Ok(_) => loop {
                        match rogue
                            .call::<(Vec<String>,), (Result<String, String>,)>(
                                "raw",
                                (vec!["GET".into(), "x".into()],),
                            )
                            .await
                        {
                            Err(trapped) => break trapped.0,
                            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                        }
                    },
                };
                assert!(lost.contains("lost"), "{lost}");
            }),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_bounded_and_unsubscribe_is_charged() {
    let limits = Limits {
        subscriptions: 8,
        channel_bytes: 64,
        publish_bytes: 1_024,
        ..Limits::default()
    };
    for bed in both(limits).await {
        let bed = &bed;
        meanwhile(
            bed,
            Box::pin(async move {
                let mut rogue = bed.rogue("rogue").await;
                let mut subscribe = async |n: u32, bytes: u32| {
                    rogue
                        .call::<(u32, u32), ((u32, String),)>("subscribe-many", (n, bytes))
                        .await
                        .unwrap()
                        .0
                };
                let (got, e) = subscribe(1, 65).await;
                assert_eq!(
                    (got, e.as_str()),
                    (
                        0,
                        "channel name of 65 bytes is over the tenant's limit of 64"
                    )
                );
                let (got, e) = subscribe(20, 16).await;
                assert_eq!(
                    (got, e.as_str()),
                    (8, "the tenant already holds 8 subscriptions, its limit")
                );
                let big = "x".repeat(1_025);
                let e = raw(&mut rogue, &["PUBLISH", "c", &big]).await.unwrap_err();
                assert_eq!(
                    e,
                    "message of 1025 bytes is over the tenant's limit of 1024"
                );
                let long = "c".repeat(65);
                let e = raw(&mut rogue, &["PUBLISH", &long, "m"]).await.unwrap_err();
                assert_eq!(
                    e,
                    "channel name of 65 bytes is over the tenant's limit of 64"
                );
                let before = rogue.host_calls();
                rogue
                    .call::<(u32,), ()>("unsubscribe-spam", (30,))
                    .await
                    .unwrap();
                assert_eq!(
                    rogue.host_calls() - before,
                    30,
                    "each unsubscribe is a call"
                );
            }),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_calling_the_host_often_still_has_one_cpu_budget_per_call() {
    let limits = Limits {
        cpu_budget: Duration::from_millis(100),
        cpu_per_sec: Duration::from_secs(60),
        ..Limits::default()
    };
    for bed in both(limits).await {
        let bed = &bed;
        meanwhile(
            bed,
            Box::pin(async move {
                let mut rogue = bed.rogue("rogue").await;
                // Three seconds of computing, a host call every millisecond (half of them returning
                // a list the host must allocate in the guest).
                let e = rogue
                    .call::<(u32,), ()>("compute-chatty", (3_000,))
                    .await
                    .unwrap_err();
                assert!(
                    e.0.contains("ran for over 100 ms of CPU in one call"),
                    "{e}"
                );
            }),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_over_its_cpu_per_second_is_trapped_though_each_call_is_short() {
    let limits = Limits {
        cpu_budget: Duration::from_millis(200),
        cpu_per_sec: Duration::from_millis(150),
        ..Limits::default()
    };
    for bed in both(limits).await {
        let bed = &bed;
        meanwhile(
            bed,
            Box::pin(async move {
                let mut rogue = bed.rogue("rogue").await;
                let mut trapped = None;
                for _ in 0..20 {
                    if let Err(e) = rogue.call::<(u32,), ()>("compute", (80,)).await {
                        trapped = Some(e.0);
                        break;
                    }
                }
                let e = trapped.expect("1.6 s of CPU at 150 ms a second is stopped");
                assert!(e.contains("used over 150 ms of CPU per second"), "{e}");
            }),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_block_no_longer_than_the_ceiling_and_wait_runs_alone() {
    let limits = Limits {
        max_block: Duration::from_millis(300),
        ..Limits::default()
    };
    for bed in both(limits).await {
        let bed = &bed;
        meanwhile(
            bed,
            Box::pin(async move {
                let mut rogue = bed.rogue("rogue").await;
                let hour = 3_600_000u64;
                let slept = rogue
                    .call::<(u64,), (u64,)>("sleep-for", (hour,))
                    .await
                    .unwrap()
                    .0;
                assert!(slept < hour, "slept {slept} ms");
                let woke = rogue
                    .call::<(String, u64), (bool,)>("wait-on", ("quiet".into(), hour))
                    .await
                    .unwrap()
                    .0;
                assert!(!woke, "nothing was published");
                // WAIT with no timeout would block its connection forever: refused.
                let e = raw(&mut rogue, &["WAIT", "1", "0"]).await.unwrap_err();
                assert!(
                    e.contains("WAIT needs a timeout between 1 and 300 ms"),
                    "{e}"
                );
                // With one, it runs on a connection of its own, again and again: the good
                // tenant's commands and renewals never queue behind it.
                for _ in 0..5 {
                    let r = raw(&mut rogue, &["WAIT", "1", "200"]).await.unwrap();
                    assert_eq!(r, "[Frame::Integer(0)]");
                }
            }),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_keys_must_expire_within_the_ceiling() {
    let limits = Limits {
        key_ttl_max: Duration::from_secs(60),
        ..Limits::default()
    };
    for bed in both(limits).await {
        let bed = &bed;
        meanwhile(bed, Box::pin(async move {
            let mut rogue = bed.rogue("rogue").await;
            let e = raw(&mut rogue, &["SET", "k", "v"]).await.unwrap_err();
            assert!(e.contains("SET needs PX or EX (at most 60000 ms)"), "{e}");
            let e = raw(&mut rogue, &["SET", "k", "v", "EX", "61"]).await.unwrap_err();
            assert!(e.contains("over the tenant's limit of 60000 ms"), "{e}");
            let e = raw(&mut rogue, &["SET", "k", "v", "KEEPTTL"]).await.unwrap_err();
            assert!(e.contains("not KEEPTTL"), "{e}");
            assert_eq!(raw(&mut rogue, &["SET", "k", "v", "PX", "60000"]).await.unwrap(), "[Frame::Status(\"OK\")]");
            let e = raw(&mut rogue, &["PEXPIRE", "k", "60001"]).await.unwrap_err();
            assert!(e.contains("over the tenant's limit"), "{e}");
            assert!(matches!(bed.cmd(&["PTTL", "rogue:k"]).await, Reply::Int(ms) if ms > 0 && ms <= 60_000));
        }))
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasi_random_bytes_are_bounded_per_call() {
    let limits = Limits {
        random_bytes_per_call: 1_024,
        random_bytes_per_sec: 64.0 * 1_024.0,
        ..Limits::default()
    };
    for bed in both(limits).await {
        let bed = &bed;
        meanwhile(
            bed,
            Box::pin(async move {
                let mut rogue = bed.rogue("rogue").await;
                let got = rogue
                    .call::<(u64, u32), (u64,)>("random", (1_024, 4))
                    .await
                    .unwrap()
                    .0;
                assert_eq!(got, 4 * 1_024);
                let e = rogue
                    .call::<(u64, u32), (u64,)>("random", (32 << 20, 1))
                    .await
                    .unwrap_err();
                assert!(
                    e.0.contains("over the tenant's limit of 1024 per call"),
                    "{e}"
                );
            }),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_names_that_could_meet_are_refused() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let host = common::host(<dyn Backend>::local(&server));
    for bad in ["", "a:b", "{a", "a}", "a b", "ü"] {
        let e = host.try_tenant(bad).err().expect(bad);
        assert!(e.contains("ASCII letters, digits"), "{e}");
    }
    assert!(host.try_tenant("a-b_9").is_ok());
}

/// The Lua script that keeps a server busy for `busy_ms` (it spins on `TIME`).
fn busy_script(busy_ms: u64) -> String {
    format!(
        "local s = redis.call('TIME') local e = s[1] * 1000000 + s[2] + {} \
         while true do local n = redis.call('TIME') if n[1] * 1000000 + n[2] > e then break end end \
         return 1",
        busy_ms * 1_000
    )
}

/// Makes the server of `bed` busy for `busy_ms`: its busy threshold set to 20 ms, then a script
/// that spins that long, so that everyone else (the keeper included) is answered `BUSY`.
async fn make_busy(bed: &Bed, busy_ms: u64) {
    let script = busy_script(busy_ms);
    match &bed._redis {
        None => {
            let set = |a: &[&str]| a.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
            let threshold = set(&["CONFIG", "SET", "busy-reply-threshold", "20"]);
            assert_eq!(
                bed.admin.command(threshold).await.unwrap(),
                Reply::Status("OK".into())
            );
            let r = bed
                .admin
                .command(set(&["EVAL", &script, "0"]))
                .await
                .unwrap();
            assert_eq!(r, Reply::Int(1));
        }
        Some(redis) => {
            // A plain connection: redis-rs's multiplexed one gives up on a reply after 500 ms.
            let url = redis.url();
            tokio::task::spawn_blocking(move || {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                let () = redis::cmd("CONFIG")
                    .arg(&["SET", "busy-reply-threshold", "20"])
                    .query(&mut c)
                    .unwrap();
                let one: i64 = redis::cmd("EVAL")
                    .arg(&script)
                    .arg(0)
                    .query(&mut c)
                    .unwrap();
                assert_eq!(one, 1);
            })
            .await
            .unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_server_is_retried_within_the_ttl_not_taken_for_a_lost_lease() {
    for bed in [
        Bed::embedded(Limits::default()).await,
        Bed::redis(Limits::default()).await,
    ] {
        let good = bed.host.tenant("good");
        let mut keeper = good.instantiate(&bed.lock_client).await.unwrap();
        let lock = watched(&mut keeper, "kept").await;
        assert!(acquire(&mut keeper, lock, 1_500).await);
        // Renewals come every 500 ms: at least one meets BUSY in 800 ms of it.
        tokio::time::sleep(Duration::from_millis(100)).await;
        make_busy(&bed, 800).await;
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        assert!(
            held(&mut keeper, lock).await,
            "{}: taken for lost",
            bed.what
        );
        assert_eq!(
            release(&mut keeper, lock).await,
            Released::Released,
            "{}",
            bed.what
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_subscriber_connection_comes_back_with_its_subscriptions() {
    // The latchkey server over TCP, and a real redis-server: both kill pub/sub clients on
    // `CLIENT KILL TYPE pubsub`, as the output-buffer limit would.
    let server = Server::builder()
        .port(0)
        .bind("127.0.0.1")
        .start()
        .await
        .unwrap();
    let redis = common::RedisProcess::spawn();
    for url in [server.url(), redis.url()] {
        let backend = <dyn Backend>::redis(&url).await.unwrap();
        let admin = <dyn Backend>::redis(&url).await.unwrap();
        let host = Host::new(backend, common::config(Limits::default())).unwrap();
        let rogue = common::rogue(&host);
        let mut waiter = host.tenant("w").instantiate(&rogue).await.unwrap();
        let cmd = |a: &[&str]| a.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        // The waiter subscribes and waits; the subscription connection is killed under it.
        let waiting = tokio::spawn(async move {
            let woke = waiter
                .call::<(String, u64), (bool,)>("wait-on", ("ch".into(), 30_000))
                .await
                .unwrap()
                .0;
            (woke, waiter)
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while admin
            .command(cmd(&["PUBSUB", "NUMSUB", "w:ch"]))
            .await
            .unwrap()
            != Reply::Array(vec![Reply::Bulk(b"w:ch".to_vec()), Reply::Int(1)])
        {
            assert!(Instant::now() < deadline, "{url}: never subscribed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let killed = admin
            .command(cmd(&["CLIENT", "KILL", "TYPE", "pubsub"]))
            .await
            .unwrap();
        assert_eq!(killed, Reply::Int(1), "{url}");
        // The waiter is woken (a message may have been missed meanwhile), and its
        // subscription is back on a new connection.
        let (woke, mut waiter) = waiting.await.unwrap();
        assert!(woke, "{url}: the waiter was never woken");
        let deadline = Instant::now() + Duration::from_secs(10);
        while admin
            .command(cmd(&["PUBSUB", "NUMSUB", "w:ch"]))
            .await
            .unwrap()
            != Reply::Array(vec![Reply::Bulk(b"w:ch".to_vec()), Reply::Int(1)])
        {
            assert!(
                Instant::now() < deadline,
                "{url}: the subscription never came back"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // A message published now reaches a waiter through the restored subscription.
        let publisher = tokio::spawn(async move {
            for _ in 0..200 {
                admin.command(cmd(&["PUBLISH", "w:ch", "m"])).await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
        let woke = waiter
            .call::<(String, u64), (bool,)>("wait-on", ("ch".into(), 10_000))
            .await
            .unwrap()
            .0;
        publisher.abort();
        assert!(woke, "{url}: a message after the reconnection was missed");
    }
}

/// A component of `n` core instances of one module, each with a linear memory of its own (one
/// 64 KiB page to start), exporting `grow-<i>`: `memory.grow` on memory `i` by `pages`, the old
/// size in pages (or -1). Written by hand: no toolchain makes a component with several memories
/// on purpose, and a hostile tenant need not use one.
fn memories_component(n: usize) -> Vec<u8> {
    let mut text = String::from(
        "(component
           (core module $m
             (memory 1)
             (func (export \"grow\") (param i32) (result i32) local.get 0 memory.grow))\n",
    );
    for i in 0..n {
        text.push_str(&format!("(core instance $i{i} (instantiate $m))\n"));
        text.push_str(&format!(
            "(func (export \"grow-{i}\") (param \"pages\" u32) (result s32)
               (canon lift (core func $i{i} \"grow\")))\n"
        ));
    }
    text.push(')');
    wat::parse_str(&text).expect("the component text is valid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_total_over_several_memories_traps_though_each_is_under_its_own_limit() {
    let limits = Limits {
        memory_bytes: 16 << 20,
        memory_total_bytes: 24 << 20,
        memories: 4,
        ..Limits::default()
    };
    for bed in both(limits).await {
        let bed = &bed;
        meanwhile(
            bed,
            Box::pin(async move {
                let three = bed.host.load_bytes(&memories_component(3)).unwrap();
                let tenant = bed.host.tenant("rogue");
                let grow = async |inst: &mut Instance, i: usize, pages: u32| {
                    inst.call::<(u32,), (i32,)>(&format!("grow-{i}"), (pages,))
                        .await
                        .map(|r| r.0)
                };
                // 160 pages are 10 MiB: each memory alone may take them (16 MiB each)...
                let mut alone = tenant.instantiate(&three).await.unwrap();
                assert_eq!(grow(&mut alone, 2, 160).await, Ok(1), "{}", bed.what);
                // ...but not all three together (24 MiB in all).
                let mut rogue = tenant.instantiate(&three).await.unwrap();
                assert_eq!(grow(&mut rogue, 0, 160).await, Ok(1), "{}", bed.what);
                assert_eq!(grow(&mut rogue, 1, 160).await, Ok(1), "{}", bed.what);
                let e = grow(&mut rogue, 2, 160).await.unwrap_err();
                assert!(
                    e.0.contains("over the tenant's limit of 25165824 bytes"),
                    "{}: {e}",
                    bed.what
                );
                assert!(rogue.trapped().is_some());
                // A memory alone over its own limit traps too.
                let mut big = tenant.instantiate(&three).await.unwrap();
                let e = grow(&mut big, 0, 300).await.unwrap_err();
                assert!(
                    e.0.contains("exceeds the tenant's limit of 16777216 bytes per memory"),
                    "{}: {e}",
                    bed.what
                );
                // More memories than `memories` do not even start: the pooling allocator
                // refuses the component when it is loaded, the limiter when it is instantiated.
                let five = match bed.host.load_bytes(&memories_component(5)) {
                    Err(e) => format!("{e:#}"),
                    Ok(p) => format!("{:#}", tenant.instantiate(&p).await.err().expect("refused")),
                };
                assert!(five.contains("memor"), "{}: {five}", bed.what);
            }),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_opening_wasi_resources_without_end_is_trapped_at_its_table_bound() {
    let limits = Limits {
        wasi_resources: 64,
        ..Limits::default()
    };
    for bed in both(limits).await {
        let bed = &bed;
        meanwhile(
            bed,
            Box::pin(async move {
                let mut rogue = bed.rogue("rogue").await;
                let mut open = async |n: u32| {
                    rogue
                        .call::<(u32,), (u32,)>("open-pollables", (n,))
                        .await
                        .map(|r| r.0)
                };
                // Under the bound, twice: what a guest drops is given back. (Each pollable of
                // a clock is two entries: the deadline and the pollable on it.)
                assert_eq!(open(24).await, Ok(24), "{}", bed.what);
                assert_eq!(open(24).await, Ok(24), "{}", bed.what);
                let e = open(1_000_000).await.unwrap_err();
                assert!(
                    e.0.contains("resource table has no free keys"),
                    "{}: {e}",
                    bed.what
                );
                assert!(rogue.trapped().is_some());
            }),
        )
        .await;
    }
}

/// `EVAL` of one of the lock client's scripts, as the rogue's `raw` takes it.
fn eval_args(
    script: &latchkey_client::scripts::Script,
    keys: &[&str],
    argv: &[&str],
) -> Vec<String> {
    let mut v = vec![
        "EVAL".to_string(),
        script.body.to_string(),
        keys.len().to_string(),
    ];
    v.extend(keys.iter().map(|k| k.to_string()));
    v.extend(argv.iter().map(|a| a.to_string()));
    v
}

async fn raw_owned(inst: &mut Instance, args: Vec<String>) -> Result<String, String> {
    inst.call::<(Vec<String>,), (Result<String, String>,)>("raw", (args,))
        .await
        .expect("a refusal is an error for the tenant, not a trap")
        .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scripts_ttl_arguments_are_bounded_and_keys_that_never_expire_are_counted() {
    use latchkey_client::scripts::{EXTEND, FENCED_ACQUIRE, WRITE_ACQUIRE};
    let limits = Limits {
        key_ttl_max: Duration::from_secs(60),
        persistent_keys: 5,
        ..Limits::default()
    };
    for bed in both(limits.clone()).await {
        let (bed, limits) = (&bed, &limits);
        meanwhile(bed, Box::pin(async move {
            let mut rogue = bed.rogue("rogue").await;
            // A TTL over the ceiling, or one that is not a number, is refused before the
            // script runs: `write_acquire` writes its hash before it sets the expiry, and a
            // Lua error between the two would leave a hash that never expires.
            for bad in ["60001", "x", "0"] {
                let e = raw_owned(&mut rogue, eval_args(&WRITE_ACQUIRE, &["{w}"], &["tok", bad]))
                    .await
                    .unwrap_err();
                assert_eq!(
                    e,
                    "the script 'write_acquire' needs ARGV[2] to be a TTL from 1 to 60000 ms for tenants",
                    "{}", bed.what
                );
            }
            assert_eq!(bed.cmd(&["EXISTS", "{rogue:w}"]).await, Reply::Int(0), "{}", bed.what);
            let e = raw_owned(&mut rogue, eval_args(&EXTEND, &["{w}"], &["tok", "3600000"]))
                .await
                .unwrap_err();
            assert!(e.contains("ARGV[2] to be a TTL from 1 to 60000 ms"), "{e}");
            // Within it, the script runs and its key expires.
            let ok = raw_owned(&mut rogue, eval_args(&WRITE_ACQUIRE, &["{w}"], &["tok", "60000"]))
                .await
                .unwrap();
            assert_eq!(ok, "[Frame::Integer(1)]");
            assert!(matches!(bed.cmd(&["PTTL", "{rogue:w}"]).await, Reply::Int(ms) if ms > 0 && ms <= 60_000));

            // Fencing counters never expire: five names are allowed, the sixth is refused.
            let fenced = async |rogue: &mut Instance, i: u32| {
                let (lock, fence) = (format!("{{f{i}}}"), format!("{{f{i}}}:fence"));
                raw_owned(rogue, eval_args(&FENCED_ACQUIRE, &[&lock, &fence], &["tok", "60000"])).await
            };
            for i in 0..5 {
                assert_eq!(fenced(&mut rogue, i).await, Ok("[Frame::Integer(1)]".into()), "{}", bed.what);
            }
            let refused = "the tenant already has 5 keys that never expire (fenced locks' counters, fair locks' queues), its limit";
            assert_eq!(fenced(&mut rogue, 5).await, Err(refused.into()), "{}", bed.what);
            assert_eq!(bed.cmd(&["EXISTS", "{rogue:f5}:fence", "{rogue:f5}"]).await, Reply::Int(0));
            // A name already counted is used again freely (the lock is held: -1).
            assert_eq!(fenced(&mut rogue, 0).await, Ok("[Frame::Integer(-1)]".into()));
            // The count is kept on the server, where no tenant can name it.
            assert_eq!(bed.cmd(&["HLEN", ":latchkey:persistent:rogue"]).await, Reply::Int(5));
            // A counter the tenant deleted no longer counts: the sixth name now fits.
            assert_eq!(raw(&mut rogue, &["DEL", "{f1}:fence"]).await.unwrap(), "[Frame::Integer(1)]");
            assert_eq!(fenced(&mut rogue, 5).await, Ok("[Frame::Integer(1)]".into()), "{}", bed.what);
            assert_eq!(fenced(&mut rogue, 6).await, Err(refused.into()), "{}", bed.what);
            // Another host over the same server (a restart) counts the same names.
            let again = Host::new(bed.admin.clone(), common::config(limits.clone())).unwrap();
            let mut later = again.tenant("rogue").instantiate(&common::rogue(&again)).await.unwrap();
            assert_eq!(fenced(&mut later, 7).await, Err(refused.into()), "{}", bed.what);
            // Another tenant has a count of its own: the good tenant takes a fenced lock.
            let mut good = bed.host.tenant("good").instantiate(&bed.lock_client).await.unwrap();
            let (_, token) = good
                .try_fenced("f0", Duration::from_secs(5))
                .await
                .unwrap()
                .unwrap()
                .expect("free");
            assert_eq!(token, 1);
        }))
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasi_keyvalue_is_bounded_like_every_other_import() {
    let limits = Limits {
        kv_buckets: 2,
        kv_entries: 10,
        ..Limits::default()
    };
    let path = latchkey_plugin::guest::kv_guest_path().expect("the wasi:keyvalue guest builds");
    for bed in both(limits).await {
        let (bed, path) = (&bed, &path);
        meanwhile(
            bed,
            Box::pin(async move {
                let guest = bed.host.load(path).unwrap();
                let mut rogue = bed.host.tenant("rogue").instantiate(&guest).await.unwrap();
                let mut flood = async |n: u32, size: u32| {
                    rogue
                        .call::<(String, u32, u32), (String,)>(
                            "get-many-flood",
                            ("b1".into(), n, size),
                        )
                        .await
                        .expect("a refusal is the tenant's error, not a trap")
                        .0
                };
                assert_eq!(
                    flood(100_000, 8).await,
                    "err other(a batch of 100000 keys is over the tenant's limit of 1024 per call)",
                    "{}",
                    bed.what
                );
                assert_eq!(
                    flood(512, 4_096).await,
                    "err other(a batch of over 1048576 bytes is over the tenant's limit per call)",
                    "{}",
                    bed.what
                );
                assert_eq!(flood(2, 8).await, "ok 2 answers", "{}", bed.what);
                // The same for writes: a flood of `set-many` is refused whole, from the list's
                // shape, from a value's size or from the bucket's bound, and writes nothing.
                let mut set_flood = async |n: u32, size: u32| {
                    rogue
                        .call::<(String, u32, u32), (String,)>(
                            "set-many-flood",
                            ("b1".into(), n, size),
                        )
                        .await
                        .expect("a refusal is the tenant's error, not a trap")
                        .0
                };
                for (n, size, refusal) in [
                    (
                        100_000,
                        8,
                        "err other(a batch of 100000 keys is over the tenant's limit of 1024 per call)",
                    ),
                    (
                        512,
                        4_096,
                        "err other(a batch of over 1048576 bytes is over the tenant's limit per call)",
                    ),
                    (
                        1,
                        70_000,
                        "err other(a value of 70000 bytes is over the tenant's limit of 65536)",
                    ),
                    (20, 1, "err other(the bucket holds its limit of 10 keys)"),
                ] {
                    assert_eq!(set_flood(n, size).await, refusal, "{}", bed.what);
                    assert_eq!(
                        bed.cmd(&["EXISTS", "{rogue:kv:b1}"]).await,
                        Reply::Int(0),
                        "{}: nothing of a refused batch is written",
                        bed.what
                    );
                }
                let mut fill = async |bucket: &str, n: u32| {
                    rogue
                        .call::<(String, u32), ((u32, String),)>("fill", (bucket.into(), n))
                        .await
                        .unwrap()
                        .0
                };
                assert_eq!(
                    fill("b1", 20).await,
                    (10, "other(the bucket holds its limit of 10 keys)".into()),
                    "{}",
                    bed.what
                );
                assert_eq!(fill("b2", 1).await, (1, String::new()), "{}", bed.what);
                assert_eq!(
                    fill("b3", 1).await,
                    (
                        0,
                        "other(the tenant already has 2 wasi:keyvalue buckets, its limit)".into()
                    ),
                    "{}",
                    bed.what
                );
                assert_eq!(
                    bed.cmd(&["HLEN", "{rogue:kv:b1}"]).await,
                    Reply::Int(10),
                    "{}",
                    bed.what
                );
                assert_eq!(bed.cmd(&["EXISTS", "{rogue:kv:b3}"]).await, Reply::Int(0));
            }),
        )
        .await;
    }
}
