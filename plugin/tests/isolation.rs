//! Tenants cannot reach each other or the server: the isolation list of issue #6.

mod common;

use std::time::Duration;

use latchkey_plugin::{Backend, Extended, Released};
use latchkey_server::{Frame, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_see_release_or_extend_another_tenants_lock_of_the_same_name() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let host = common::host(<dyn Backend>::local(&server));
    let plugin = common::lock_client(&host);
    let mut a = host.tenant("a").instantiate(&plugin).await.unwrap();
    let mut b = host.tenant("b").instantiate(&plugin).await.unwrap();
    let ttl = Duration::from_secs(30);
    let la = a
        .try_lock("shared", ttl)
        .await
        .unwrap()
        .unwrap()
        .expect("free for a");
    let mut view = server.client();

    // B does not see A's lock: it can only ever touch its own key.
    assert_eq!(
        b.unlock("shared", la.clone()).await.unwrap().unwrap(),
        Released::AlreadyExpired
    );
    assert_eq!(
        b.extend("shared", la.clone(), Duration::from_secs(3600))
            .await
            .unwrap()
            .unwrap(),
        Extended::AlreadyExpired
    );
    let pttl = view.cmd(["PTTL", "{a:shared}"]).await;
    assert!(
        matches!(pttl, Frame::Integer(ms) if ms > 0 && ms <= 30_000),
        "{pttl:?}"
    );
    let lb = b
        .try_lock("shared", ttl)
        .await
        .unwrap()
        .unwrap()
        .expect("b has its own namespace");
    // Even holding its own lock of that name, B cannot release A's with A's lease.
    assert_eq!(
        b.unlock("shared", la.clone()).await.unwrap().unwrap(),
        Released::NotOwner
    );
    assert_eq!(
        view.cmd(["GET", "{a:shared}"]).await,
        Frame::bulk(la.token.clone())
    );
    assert_eq!(
        a.unlock("shared", la).await.unwrap().unwrap(),
        Released::Released
    );
    assert_eq!(
        b.unlock("shared", lb).await.unwrap().unwrap(),
        Released::Released
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_tenant_may_not_run_is_refused_and_changes_nothing() {
    let server = Server::builder().no_listener().start().await.unwrap();
    let host = common::host(<dyn Backend>::local(&server));
    let mut view = server.client();
    assert_eq!(
        view.cmd(["SET", "{victim:orders}", "theirs"]).await,
        Frame::ok()
    );
    assert_eq!(view.cmd(["SET", "outside", "kept"]).await, Frame::ok());
    let mut rogue = host
        .tenant("rogue")
        .instantiate(&common::rogue(&host))
        .await
        .unwrap();
    let mut raw = async |args: &[&str]| -> Result<String, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        rogue
            .call::<(Vec<String>,), (Result<String, String>,)>("raw", (args,))
            .await
            .unwrap()
            .0
    };
    for (cmd, why) in [
        (&["FLUSHALL"][..], "not allowed"),
        (&["FLUSHDB"], "not allowed"),
        (&["CONFIG", "SET", "maxclients", "1"], "not allowed"),
        (&["KEYS", "*"], "not allowed"),
        (&["SCAN", "0"], "not allowed"),
        (&["SELECT", "1"], "not allowed"),
        (&["SCRIPT", "FLUSH"], "not allowed"),
        (
            &["EVAL", "return redis.call('flushall')", "0"],
            "own scripts",
        ),
        (
            &["EVAL", "return redis.call('del', KEYS[1])", "1", "outside"],
            "own scripts",
        ),
        (
            &["EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff831", "0"],
            "own scripts",
        ),
    ] {
        let r = raw(cmd).await;
        assert!(matches!(&r, Err(e) if e.contains(why)), "{cmd:?} -> {r:?}");
    }
    // Keys outside the namespace cannot be named: they are rewritten into it.
    assert_eq!(raw(&["GET", "outside"]).await.unwrap(), "[Frame::Nil]");
    assert_eq!(
        raw(&["DEL", "outside", "{victim:orders}"]).await.unwrap(),
        "[Frame::Integer(0)]"
    );
    assert_eq!(
        raw(&["GET", "{victim:orders}"]).await.unwrap(),
        "[Frame::Nil]"
    );
    // A refusal is an answer, not a trap: the tenant goes on.
    assert_eq!(
        raw(&["SET", "mine", "v", "PX", "10000"]).await.unwrap(),
        "[Frame::Status(\"OK\")]"
    );

    assert_eq!(view.cmd(["GET", "outside"]).await, Frame::bulk("kept"));
    assert_eq!(
        view.cmd(["GET", "{victim:orders}"]).await,
        Frame::bulk("theirs")
    );
    assert_eq!(view.cmd(["GET", "rogue:mine"]).await, Frame::bulk("v"));
    assert_eq!(view.cmd(["DBSIZE"]).await, Frame::Integer(3));
}
