//! Unit tests of the keyspace: expiry kept through every change, and the active cycle's steps.

use super::*;
use indexmap::IndexMap;

fn string(v: &str, expires_at: Option<u64>) -> Entry {
    Entry::with_expiry(Value::Str(Str::copy_from_slice(v.as_bytes())), expires_at)
}

#[test]
fn a_key_set_again_with_the_same_deadline_is_still_expired_actively() {
    let db = Db::default();
    let key = Bytes::from_static(b"k");
    db.insert(key.clone(), string("a", Some(100)));
    db.insert(key.clone(), string("b", Some(100)));
    assert_eq!(db.due_keys(100, 10), vec![key.clone()]);
    db.update(&key, 0, true, |_| (Update::Put(string("c", Some(100))), ()));
    assert_eq!(gone_keys(db.active_expire(100, 10, false)), vec![key]);
    assert!(db.is_empty());
    assert_eq!(db.expires_count(), 0);
}

#[test]
fn update_sees_an_expired_key_as_absent_and_deletes_it() {
    let db = Db::default();
    let key = Bytes::from_static(b"k");
    db.insert(key.clone(), string("old", Some(10)));
    let seen = db.update(&key, 20, true, |e| (Update::Keep, e.is_some()));
    assert!(!seen);
    assert!(db.is_empty(), "deleted, as a read would");
    assert_eq!(
        db.take_lazily_expired(),
        vec![key.clone()],
        "and noted for a DEL"
    );
    // On a replica (no lazy delete) it is hidden but left for the master's DEL.
    db.insert(key.clone(), string("old", Some(10)));
    let seen = db.update(&key, 20, false, |e| (Update::Keep, e.is_some()));
    assert!(!seen);
    assert_eq!(db.len(), 1);
}

#[test]
fn update_changes_a_deadline_in_place() {
    let db = Db::default();
    let key = Bytes::from_static(b"k");
    db.insert(key.clone(), string("v", Some(100)));
    db.update(&key, 0, true, |_| (Update::Expire(Some(50)), ()));
    assert_eq!(db.get(&key, 0, true).unwrap().expires_at(), Some(50));
    assert_eq!(gone_keys(db.active_expire(60, 10, false)), vec![key]);
}

fn gone_keys(gone: Vec<(Bytes, Entry)>) -> Vec<Bytes> {
    gone.into_iter().map(|(k, _)| k).collect()
}

#[test]
fn the_ttl_count_is_kept_through_every_change() {
    let db = Db::default();
    let (a, b) = (Bytes::from_static(b"a"), Bytes::from_static(b"b"));
    db.insert(a.clone(), string("v", Some(100)));
    db.insert(b.clone(), string("v", None));
    assert_eq!(db.expires_count(), 1);
    db.update(&b, 0, true, |_| (Update::Expire(Some(200)), ()));
    assert_eq!(db.expires_count(), 2);
    db.update(&a, 0, true, |_| (Update::Expire(None), ()));
    assert_eq!(db.expires_count(), 1);
    // An expired key recreated as a fresh hash loses its TTL; its stale pair is dropped
    // by the next pass without deleting the new key.
    drop(db.get_or_create(&b, 300, true, || Value::Hash(Box::new(IndexMap::new()))));
    assert_eq!(db.expires_count(), 0);
    assert!(db.has_due(300), "the stale pair is still due");
    assert!(db.active_expire(300, 10, false).is_empty());
    assert!(!db.has_due(300));
    assert_eq!(db.len(), 2);
    db.remove(&a);
    db.insert(a.clone(), string("v", Some(10)));
    db.clear();
    assert_eq!(db.expires_count(), 0);
    assert!(!db.has_due(u64::MAX));
}

#[test]
fn a_read_that_expires_a_key_leaves_its_pair_to_the_cycle() {
    let db = Db::default();
    let key = Bytes::from_static(b"k");
    db.insert(key.clone(), string("v", Some(10)));
    assert!(db.get(&key, 20, true).is_none());
    assert_eq!(db.len(), 0);
    assert_eq!(db.expires_count(), 0, "counted out at once");
    assert!(db.has_due(20), "the pair is left, due");
    // Recreated meanwhile: the stale pair must not delete the new key.
    db.insert(key.clone(), string("new", None));
    assert!(db.active_expire(20, 10, false).is_empty());
    assert!(!db.has_due(u64::MAX));
    assert_eq!(db.get(&key, 20, true).unwrap().value.type_name(), "string");
}

#[test]
fn an_async_flush_leaves_nothing_behind() {
    let db = Db::default();
    for i in 0..1000u32 {
        db.insert(Bytes::from(i.to_string()), string("v", Some(u64::from(i))));
    }
    db.clear_async();
    assert_eq!(db.len(), 0);
    assert_eq!(db.expires_count(), 0);
    assert!(!db.has_due(u64::MAX));
    assert!(db.get(b"1", 0, true).is_none());
}

#[test]
fn a_step_deletes_at_most_its_limit_in_deadline_order() {
    let db = Db::default();
    for i in 0..100u64 {
        db.insert(Bytes::from(format!("k{i:03}")), string("v", Some(i)));
    }
    // The earliest ten, deleted as one batch (in no particular order within it).
    let mut gone = gone_keys(db.active_expire(1_000, 10, false));
    gone.sort();
    let want: Vec<Bytes> = (0..10).map(|i| Bytes::from(format!("k{i:03}"))).collect();
    assert_eq!(gone, want);
    assert_eq!(db.len(), 90);
    assert_eq!(db.expires_count(), 90);
}

#[test]
fn a_batch_step_keeps_the_counts_and_tells_watchers() {
    let db = Db::default();
    db.insert(Bytes::from_static(b"plain"), string("v", None));
    let baseline = db.memory().entry_bytes();
    for i in 0..1000u64 {
        let deadline = if i % 2 == 0 { Some(10) } else { Some(1_000) };
        db.insert(Bytes::from(format!("k{i}")), string("value", deadline));
    }
    // A key renewed after its pair was laid: its old pair is due, the entry is not.
    db.update(&Bytes::from_static(b"k0"), 0, true, |_| {
        (Update::Expire(Some(5_000)), ())
    });
    let watched = Arc::new(WatchFlag::default());
    db.watch(Bytes::from_static(b"k2"), watched.clone());
    let spare = Arc::new(WatchFlag::default());
    db.watch(Bytes::from_static(b"k1"), spare.clone());
    let mut gone = 0;
    loop {
        let step = db.active_expire(100, 128, false);
        if step.is_empty() {
            break;
        }
        assert!(step.len() <= 128);
        gone += step.len();
    }
    assert_eq!(gone, 499, "the even keys but the renewed one");
    assert_eq!(db.len(), 502);
    assert_eq!(db.expires_count(), 501);
    assert_eq!(db.memory().volatile_keys(), 501);
    assert!(watched.is_dirty(), "a watcher of an expired key is told");
    assert!(!spare.is_dirty(), "a watcher of a live key is not");
    assert!(db.contains(b"k0", 100));
    db.check_expiry_index().unwrap();
    // Every key gone, the estimate is back where it started.
    while !db.active_expire(u64::MAX, 128, false).is_empty() {}
    assert_eq!(db.len(), 1);
    assert_eq!(db.expires_count(), 0);
    assert_eq!(db.memory().entry_bytes(), baseline);
}

/// How many holders the table's allocation of `key` has: 1 (the table alone) or 2 (the expiry
/// index's pair shares it).
fn holders(db: &Db, key: &[u8]) -> u32 {
    db.map.get(key).expect("the key is there").key().holders()
}

/// A key with a TTL is stored once: the expiry index's pair holds the table's allocation of
/// the key rather than a copy of its bytes, whichever way the deadline came (a new key with a
/// deadline, a deadline given later, one changed again), and lets it go with the deadline.
#[test]
fn the_expiry_index_shares_the_tables_key() {
    let db = Db::default();
    let key = Bytes::from_static(b"lease:1");
    db.update(&key, 0, true, |_| (Update::Put(string("v", Some(100))), ()));
    assert_eq!(holders(&db, &key), 2, "created with a deadline");
    db.update(&key, 0, true, |_| (Update::Expire(Some(200)), ()));
    assert_eq!(
        holders(&db, &key),
        2,
        "the old pair let go, the new one shares"
    );
    db.update(&key, 0, true, |_| (Update::Expire(None), ()));
    assert_eq!(holders(&db, &key), 1, "PERSIST: no pair left");
    db.update(&key, 0, true, |_| (Update::Expire(Some(300)), ()));
    assert_eq!(
        holders(&db, &key),
        2,
        "a deadline given to a key that had none"
    );
    db.update(&key, 0, true, |_| (Update::Put(string("w", None)), ()));
    assert_eq!(holders(&db, &key), 1, "overwritten without a TTL");
    db.insert(Bytes::from_static(b"other"), string("v", Some(100)));
    assert_eq!(holders(&db, b"other"), 2, "a key inserted whole");
    assert_eq!(
        gone_keys(db.active_expire(150, 10, false)),
        vec![Bytes::from_static(b"other")]
    );
    assert_eq!(db.len(), 1);
}
