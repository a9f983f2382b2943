//! A `wasi:keyvalue@0.2.0-draft` guest: one export drives the interfaces and reports what it
//! saw, so that two hosts can be compared.

wit_bindgen::generate!({
    world: "latchkey-test:kv-draft-guest/guest@0.1.0",
    path: ["../wit/keyvalue-draft", "wit/guest.wit"],
    generate_all,
});

use wasi::keyvalue::store::{self, Error};
use wasi::keyvalue::{atomics, batch};

struct DraftGuest;

/// A result as text.
fn res<T>(r: &Result<T, Error>, ok: impl Fn(&T) -> String) -> String {
    match r {
        Ok(v) => format!("ok {}", ok(v)),
        Err(Error::NoSuchStore) => "err no-such-store".into(),
        Err(Error::AccessDenied) => "err access-denied".into(),
        Err(Error::Other(_)) => "err other".into(),
    }
}

/// A value as text.
fn val(v: &Option<Vec<u8>>) -> String {
    match v {
        Some(b) => format!("some({})", String::from_utf8_lossy(b)),
        None => "none".into(),
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl Guest for DraftGuest {
    fn transcript() -> Vec<String> {
        let mut t = Vec::new();
        t.push(format!(
            "open unknown: {}",
            res(&store::open("no such/bucket").map(|_| ()), |_| String::new(
            ))
        ));
        let b = store::open("").expect("the default bucket opens");
        let unit = |_: &()| String::new();
        t.push(format!("get missing: {}", res(&b.get("k"), val)));
        t.push(format!(
            "exists missing: {}",
            res(&b.exists("k"), |e| e.to_string())
        ));
        t.push(format!("set: {}", res(&b.set("k", b"v1"), unit)));
        t.push(format!("get: {}", res(&b.get("k"), val)));
        t.push(format!("overwrite: {}", res(&b.set("k", b"v2"), unit)));
        t.push(format!("get: {}", res(&b.get("k"), val)));
        t.push(format!(
            "exists: {}",
            res(&b.exists("k"), |e| e.to_string())
        ));
        t.push(format!("delete: {}", res(&b.delete("k"), unit)));
        t.push(format!("delete missing: {}", res(&b.delete("k"), unit)));
        t.push(format!("get deleted: {}", res(&b.get("k"), val)));
        let inc = |k: &str, d: u64| res(&atomics::increment(&b, k, d), |n| n.to_string());
        t.push(format!("increment missing by 5: {}", inc("n", 5)));
        t.push(format!("increment by 7: {}", inc("n", 7)));
        t.push(format!("get counter: {}", res(&b.get("n"), val)));
        b.set("w", b"word").unwrap();
        t.push(format!("increment a word: {}", inc("w", 1)));
        t.push(format!("increment past u64: {}", inc("n", u64::MAX)));
        t.push(format!("counter unchanged: {}", res(&b.get("n"), val)));
        let pairs: Vec<(String, Vec<u8>)> = [("a", "1"), ("b", "2"), ("c", "3")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect();
        t.push(format!(
            "set-many: {}",
            res(&batch::set_many(&b, &pairs), unit)
        ));
        t.push(format!(
            "get-many: {}",
            res(&batch::get_many(&b, &strings(&["a", "zz", "c"])), |v| v
                .iter()
                .map(|p| match p {
                    Some((k, v)) => format!("{k}={}", String::from_utf8_lossy(v)),
                    None => "none".into(),
                })
                .collect::<Vec<_>>()
                .join(","))
        ));
        t.push(format!(
            "delete-many: {}",
            res(&batch::delete_many(&b, &strings(&["a", "zz"])), unit)
        ));
        t.push(format!(
            "a after delete-many: {}",
            res(&b.exists("a"), |e| e.to_string())
        ));
        let mut keys = Vec::new();
        let mut cursor = None;
        for _ in 0..1_000 {
            let page = b.list_keys(cursor).expect("list-keys");
            keys.extend(page.keys);
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        keys.sort();
        keys.dedup();
        t.push(format!("list-keys: {}", keys.join(",")));
        t
    }
}

export!(DraftGuest);
