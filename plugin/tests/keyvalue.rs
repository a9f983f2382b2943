//! `wasi:keyvalue` (0.2.0-draft2) on the host: a guest written only against the upstream WIT
//! (`plugin/kv-guest`, no latchkey crate) runs unchanged, and sees exactly what the standard
//! says, on the embedded server and on a real `redis-server`; buckets stay inside the tenant's
//! namespace.

mod common;

use std::sync::Arc;

use latchkey_client::Reply;
use latchkey_plugin::guest::kv_guest_path;
use latchkey_plugin::{Backend, Host, Instance, Limits, Plugin};
use latchkey_server::{Server, ServerHandle};

/// A host over one backend, the guest loaded, and a plain connection to look at the server.
struct Bed {
    host: Host,
    admin: Arc<dyn Backend>,
    guest: Plugin,
    what: &'static str,
    _server: Option<ServerHandle>,
    _redis: Option<common::RedisProcess>,
}

impl Bed {
    async fn both(limits: Limits) -> [Bed; 2] {
        let server = Server::builder().no_listener().start().await.unwrap();
        let local = <dyn Backend>::local(&server);
        let redis = common::RedisProcess::spawn();
        let backend = <dyn Backend>::redis(&redis.url()).await.unwrap();
        let admin = <dyn Backend>::redis(&redis.url()).await.unwrap();
        [
            Bed::over(
                local.clone(),
                local,
                &limits,
                "embedded",
                Some(server),
                None,
            ),
            Bed::over(backend, admin, &limits, "redis-server", None, Some(redis)),
        ]
    }

    fn over(
        backend: Arc<dyn Backend>,
        admin: Arc<dyn Backend>,
        limits: &Limits,
        what: &'static str,
        server: Option<ServerHandle>,
        redis: Option<common::RedisProcess>,
    ) -> Bed {
        let host = Host::new(backend, common::config(limits.clone())).unwrap();
        let guest = host
            .load(&kv_guest_path().expect("the wasi:keyvalue guest builds"))
            .expect("the guest links against the host's wasi:keyvalue");
        Bed {
            host,
            admin,
            guest,
            what,
            _server: server,
            _redis: redis,
        }
    }

    async fn guest(&self, tenant: &str) -> Instance {
        self.host
            .tenant(tenant)
            .instantiate(&self.guest)
            .await
            .unwrap()
    }

    async fn cmd(&self, args: &[&str]) -> Reply {
        let args = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self.admin.command(args).await.unwrap()
    }
}

async fn transcript(inst: &mut Instance, bucket: &str) -> Vec<String> {
    inst.call::<(String,), (Vec<String>,)>("transcript", (bucket.into(),))
        .await
        .unwrap()
        .0
}

/// What the standard says the guest must see, step by step (see `plugin/kv-guest`).
const EXPECTED: &[&str] = &[
    "err no-such-store",
    "get missing: ok none",
    "exists missing: ok false",
    "set: ok ",
    "get: ok some(v1)",
    "exists: ok true",
    "overwrite: ok ",
    "get: ok some(v2)",
    "delete: ok ",
    "delete missing: ok ",
    "get deleted: ok none",
    "empty value: ok ",
    "get empty: ok some()",
    "increment missing by 5: ok 5",
    "increment by -7: ok -2",
    "get counter: ok some(-2)",
    "increment a word: true",
    "increment past s64: true",
    "counter unchanged: ok some(-2)",
    "cas current: ok some(a)",
    "swap unchanged: swapped",
    "after swap: ok some(b)",
    "swap after b->x->b: cas-failed",
    "fresh current: ok some(b)",
    "swap fresh: swapped",
    "after retry: ok some(won)",
    "cas on missing: ok none",
    "swap missing: swapped",
    "after: ok some(made)",
    "swap after create+delete: cas-failed",
    "swap after delete: cas-failed",
    "still deleted: ok none",
    "set-many: ok ",
    "get-many: ok a=some(1),zz=none,c=some(3)",
    "delete-many: ok ",
    "a after delete-many: ok false",
    "get-many none: ok 0",
    "list-keys: 304 keys: b,c,e,n",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_written_against_plain_wasi_keyvalue_sees_the_standard_on_both_backends() {
    let mut seen = Vec::new();
    for bed in Bed::both(Limits::default()).await {
        let mut inst = bed.guest("edge").await;
        let before = inst.host_calls();
        let t = transcript(&mut inst, "main").await;
        assert_eq!(t, EXPECTED, "{}", bed.what);
        // Every key-value call went through the tenant's rate limiter.
        assert!(inst.host_calls() - before > 300, "{}", bed.what);
        // The bucket is a hash inside the tenant's namespace.
        assert_eq!(
            bed.cmd(&["HGET", "{edge:kv:main}", "c"]).await,
            Reply::Bulk(b"3".to_vec()),
            "{}",
            bed.what
        );
        seen.push(t);
    }
    assert_eq!(seen[0], seen[1], "the same transcript on both backends");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_opening_the_same_bucket_never_meet() {
    for bed in Bed::both(Limits::default()).await {
        let mut a = bed.guest("a").await;
        let mut b = bed.guest("b").await;
        let fill = |n: u32| ("shared".to_string(), n);
        let (n, e) = a
            .call::<(String, u32), ((u32, String),)>("fill", fill(3))
            .await
            .unwrap()
            .0;
        assert_eq!((n, e.as_str()), (3, ""), "{}", bed.what);
        // Tenant b's bucket of the same name is empty: its transcript is the standard's.
        assert_eq!(transcript(&mut b, "shared").await, EXPECTED, "{}", bed.what);
        assert_eq!(
            bed.cmd(&["HLEN", "{a:kv:shared}"]).await,
            Reply::Int(3),
            "{}",
            bed.what
        );
        assert_eq!(
            bed.cmd(&["HEXISTS", "{a:kv:shared}", "p0"]).await,
            Reply::Int(0),
            "{}",
            bed.what
        );
    }
}

#[test]
fn bucket_names_are_checked() {
    use latchkey_plugin::keyvalue::valid_bucket;
    for good in ["", "a", "main", "A-b_c.9", &"x".repeat(64)] {
        assert!(valid_bucket(good), "{good}");
    }
    for bad in [
        "a:b",
        "{a}",
        "a}",
        "a b",
        "é",
        "no such/bucket",
        &"x".repeat(65),
    ] {
        assert!(!valid_bucket(bad), "{bad}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_of_the_lease_proposal_takes_renews_and_releases_with_fencing() {
    let path = latchkey_plugin::guest::lease_guest_path().expect("the lease guest builds");
    for bed in Bed::both(Limits::default()).await {
        let plugin = bed.host.load(&path).expect("the lease guest links");
        let tenant = bed.host.tenant("edge");
        let mut inst = tenant.instantiate(&plugin).await.unwrap();
        let t = transcript(&mut inst, "main").await;
        assert_eq!(
            t,
            [
                "acquire: ok fence 1",
                "acquire held: ok held",
                "renew: ok true",
                "renew by a stranger: ok false",
                "release by a stranger: ok false",
                "release: ok true",
                "release again: ok false",
                "renew released: ok false",
                "acquire again: ok fence 2",
                "another key: ok fence 1",
                "ttl 0: true",
                "value of a leased key: ok None",
            ],
            "{}",
            bed.what
        );
        // The lease is a key with a TTL inside the tenant's namespace, beside the bucket.
        assert!(
            matches!(bed.cmd(&["PTTL", "{edge:kv:main}:lease:job"]).await, Reply::Int(ms) if ms > 0 && ms <= 10_000),
            "{}",
            bed.what
        );
        // A holder that vanishes frees the lease by itself, and the next grant's fence is
        // larger.
        let take = async |inst: &mut Instance| {
            inst.call::<(String, String, u64), (u64,)>("take", ("main".into(), "short".into(), 200))
                .await
                .unwrap()
                .0
        };
        let mut other = tenant.instantiate(&plugin).await.unwrap();
        assert_eq!(take(&mut inst).await, 1, "{}", bed.what);
        assert_eq!(take(&mut other).await, 0, "held: {}", bed.what);
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        assert_eq!(take(&mut other).await, 2, "{}", bed.what);
    }
}

/// What the 0.2.0-draft guest sees on wasmtime's own in-memory `wasi:keyvalue` host
/// (`wasmtime-wasi-keyvalue`), in a plain wasmtime store of its own.
fn transcript_on_wasmtimes_host(component: &std::path::Path) -> Vec<String> {
    use wasmtime::component::{Component, Linker, ResourceTable};
    use wasmtime::{Engine, Store};
    use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
    use wasmtime_wasi_keyvalue::{WasiKeyValue, WasiKeyValueCtx, WasiKeyValueCtxBuilder};

    struct Ctx {
        table: ResourceTable,
        wasi: WasiCtx,
        kv: WasiKeyValueCtx,
    }
    impl WasiView for Ctx {
        fn ctx(&mut self) -> WasiCtxView<'_> {
            WasiCtxView {
                ctx: &mut self.wasi,
                table: &mut self.table,
            }
        }
    }
    let engine = Engine::default();
    let mut linker = Linker::<Ctx>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).unwrap();
    wasmtime_wasi_keyvalue::add_to_linker(&mut linker, |h: &mut Ctx| {
        WasiKeyValue::new(&h.kv, &mut h.table)
    })
    .unwrap();
    let mut store = Store::new(
        &engine,
        Ctx {
            table: ResourceTable::new(),
            wasi: WasiCtx::builder().build(),
            kv: WasiKeyValueCtxBuilder::new().build(),
        },
    );
    let component = Component::from_file(&engine, component).unwrap();
    let instance = linker.instantiate(&mut store, &component).unwrap();
    let f = instance
        .get_typed_func::<(), (Vec<String>,)>(&mut store, "transcript")
        .unwrap();
    f.call(&mut store, ()).unwrap().0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_guest_sees_the_same_on_latchkey_as_on_wasmtimes_own_keyvalue_host() {
    let path = latchkey_plugin::guest::kv_draft_guest_path().expect("the draft guest builds");
    let on_path = path.clone();
    let reference = tokio::task::spawn_blocking(move || transcript_on_wasmtimes_host(&on_path))
        .await
        .unwrap();
    // The reference itself says what the standard says.
    assert_eq!(
        reference,
        [
            "open unknown: err no-such-store",
            "get missing: ok none",
            "exists missing: ok false",
            "set: ok ",
            "get: ok some(v1)",
            "overwrite: ok ",
            "get: ok some(v2)",
            "exists: ok true",
            "delete: ok ",
            "delete missing: ok ",
            "get deleted: ok none",
            "increment missing by 5: ok 5",
            "increment by 7: ok 12",
            "get counter: ok some(12)",
            "increment a word: err other",
            "increment past u64: err other",
            "counter unchanged: ok some(12)",
            "set-many: ok ",
            "get-many: ok a=1,none,c=3",
            "delete-many: ok ",
            "a after delete-many: ok false",
            "list-keys: b,c,n,w",
        ]
    );
    for bed in Bed::both(Limits::default()).await {
        let plugin = bed.host.load(&path).expect("the draft guest links");
        let mut inst = bed.host.tenant("edge").instantiate(&plugin).await.unwrap();
        let t = inst
            .call::<(), (Vec<String>,)>("transcript", ())
            .await
            .unwrap()
            .0;
        assert_eq!(t, reference, "{}", bed.what);
        // The default bucket is inside the tenant's namespace too.
        assert_eq!(
            bed.cmd(&["HGET", "{edge:kv:}", "n"]).await,
            Reply::Bulk(b"12".to_vec()),
            "{}",
            bed.what
        );
    }
}
