//! `DEBUG DIGEST` and `DEBUG DIGEST-VALUE` compared with redis-server 7.0: the same data set,
//! built by the same commands on both servers, must have the same digest, and so must each
//! value, for every type and both of Redis's encodings of each (small and large), with and
//! without a TTL, in several databases. Redis's Tcl suite compares servers with these digests.

use latchkey_tests::Diff;

/// Builds every type on both servers, small and large encodings alike.
fn fill(d: &mut Diff) {
    d.table(&[
        "SET s hello",
        "SET n 12345",
        "SET neg -7",
        "SET ttl v EX 1000",
        "RPUSH l a b c 1 2 3",
        "SADD iset 1 2 3 -4 100000",
        "SADD set a b c 1 2",
        "ZADD z 1 a 2.5 b -3 c 0 d",
        "ZADD zinf +inf top -inf bottom 0.1 tenth 1e300 big",
        "HSET h f v g w n 1",
        "XADD st 1-1 f v g w",
        "XADD st 2-5 x 1",
        "XGROUP CREATE st grp 0",
        "SELECT 3",
        "SET three 3",
        "LPUSH l3 x",
        "SELECT 0",
    ]);
    // Large encodings: a long list, a hashtable set, a skiplist sorted set, a hashtable hash.
    let many: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let mut rpush = vec!["RPUSH".to_string(), "biglist".to_string()];
    rpush.extend(many.iter().cloned());
    d.check(&rpush);
    let mut sadd = vec!["SADD".to_string(), "bigset".to_string()];
    sadd.extend(many.iter().cloned());
    d.check(&sadd);
    let mut zadd = vec!["ZADD".to_string(), "bigz".to_string()];
    for (i, m) in many.iter().enumerate() {
        zadd.push(format!("{}.5", i));
        zadd.push(m.clone());
    }
    d.check(&zadd);
    let mut hset = vec!["HSET".to_string(), "bighash".to_string()];
    for m in &many {
        hset.push(m.clone());
        hset.push(format!("value of {m}"));
    }
    d.check(&hset);
}

#[test]
fn digests_equal_redis_for_every_type() {
    let mut d = Diff::with_redis_args(&["--enable-debug-command", "yes"]);
    // An empty data set: forty zeros on both.
    assert_eq!(
        d.check(&["DEBUG", "DIGEST"]),
        b"+0000000000000000000000000000000000000000\r\n"
    );
    fill(&mut d);
    let whole = d.check(&["DEBUG", "DIGEST"]);
    assert_ne!(whole, b"+0000000000000000000000000000000000000000\r\n");
    d.table(&[
        "DEBUG DIGEST-VALUE s n neg ttl l iset set z zinf h st biglist bigset bigz bighash nokey",
        "DEBUG DIGEST-VALUE",
        "SELECT 3",
        "DEBUG DIGEST-VALUE three l3",
        "SELECT 0",
        "DEBUG DIGEST x y",
    ]);
    // Every change shows: a TTL removed, an element moved, a database's key renamed.
    let mut before = whole;
    for steps in [
        &["PERSIST ttl"][..],
        &["LMOVE l l LEFT RIGHT"],
        &["ZINCRBY z 1 a"],
        &["HDEL h n"],
        &["SREM bigset m7"],
        &["SELECT 3", "RENAME three tres", "SELECT 0"],
    ] {
        d.table(steps);
        let now = d.check(&["DEBUG", "DIGEST"]);
        assert_ne!(now, before, "after {steps:?}");
        before = now;
    }
}
