//! A `wasi:keyvalue` guest that knows nothing of latchkey: each export drives the standard
//! interfaces and reports what it saw, so that the host's tests can compare backends.

wit_bindgen::generate!({
    world: "latchkey-test:kv-guest/guest@0.1.0",
    path: ["../wit/keyvalue", "wit/guest.wit"],
    generate_all,
});

use wasi::keyvalue::atomics::{self, Cas, CasError};
use wasi::keyvalue::batch;
use wasi::keyvalue::store::{self, Bucket, Error};

struct Foreign;

/// An error as one word and its text.
fn err(e: &Error) -> String {
    match e {
        Error::NoSuchStore => "no-such-store".into(),
        Error::AccessDenied => "access-denied".into(),
        Error::Other(t) => format!("other({t})"),
    }
}

/// A value as text.
fn val(v: &Option<Vec<u8>>) -> String {
    match v {
        Some(b) => format!("some({})", String::from_utf8_lossy(b)),
        None => "none".into(),
    }
}

/// A result as text.
fn res<T>(r: &Result<T, Error>, ok: impl Fn(&T) -> String) -> String {
    match r {
        Ok(v) => format!("ok {}", ok(v)),
        Err(e) => format!("err {}", err(e)),
    }
}

/// A swap's result as text; a failed swap's fresh handle is returned for a retry.
fn swapped(r: Result<(), CasError>) -> (String, Option<Cas>) {
    match r {
        Ok(()) => ("swapped".into(), None),
        Err(CasError::CasFailed(fresh)) => ("cas-failed".into(), Some(fresh)),
        Err(CasError::StoreError(e)) => (format!("store-error {}", err(&e)), None),
    }
}

impl Guest for Foreign {
    fn transcript(name: String) -> Vec<String> {
        let mut t = Vec::new();
        let mut log = |s: String| t.push(s);
        log(res(&store::open("no such/bucket").map(|_| ()), |_| {
            String::new()
        }));
        let b: Bucket = store::open(&name).expect("the bucket opens");

        // store: a missing key, then set, get, exists, overwrite, delete.
        log(format!("get missing: {}", res(&b.get("k"), val)));
        log(format!(
            "exists missing: {}",
            res(&b.exists("k"), |e| e.to_string())
        ));
        log(format!(
            "set: {}",
            res(&b.set("k", b"v1"), |_| String::new())
        ));
        log(format!("get: {}", res(&b.get("k"), val)));
        log(format!(
            "exists: {}",
            res(&b.exists("k"), |e| e.to_string())
        ));
        log(format!(
            "overwrite: {}",
            res(&b.set("k", b"v2"), |_| String::new())
        ));
        log(format!("get: {}", res(&b.get("k"), val)));
        log(format!(
            "delete: {}",
            res(&b.delete("k"), |_| String::new())
        ));
        log(format!(
            "delete missing: {}",
            res(&b.delete("k"), |_| String::new())
        ));
        log(format!("get deleted: {}", res(&b.get("k"), val)));
        log(format!(
            "empty value: {}",
            res(&b.set("e", b""), |_| String::new())
        ));
        log(format!("get empty: {}", res(&b.get("e"), val)));

        // atomics: increment creates a missing key with the delta, goes negative, and fails on
        // a value that is not a number.
        let inc = |k: &str, d: i64| res(&atomics::increment(&b, k, d), |n| n.to_string());
        log(format!("increment missing by 5: {}", inc("n", 5)));
        log(format!("increment by -7: {}", inc("n", -7)));
        log(format!("get counter: {}", res(&b.get("n"), val)));
        log(format!(
            "increment a word: {}",
            inc("e", 1).starts_with("err other")
        ));
        log(format!(
            "increment past s64: {}",
            inc("n", i64::MIN).starts_with("err other")
        ));
        log(format!("counter unchanged: {}", res(&b.get("n"), val)));

        // cas: a swap on an unchanged key succeeds.
        b.set("c", b"a").unwrap();
        let c = Cas::new(&b, "c").unwrap();
        log(format!("cas current: {}", res(&c.current(), val)));
        log(format!(
            "swap unchanged: {}",
            swapped(atomics::swap(c, b"b")).0
        ));
        log(format!("after swap: {}", res(&b.get("c"), val)));
        // A change and a change back since the handle was made: the swap fails, and the fresh
        // handle it returns sees the latest value and succeeds.
        let c = Cas::new(&b, "c").unwrap();
        b.set("c", b"x").unwrap();
        b.set("c", b"b").unwrap();
        let (r, fresh) = swapped(atomics::swap(c, b"lost"));
        log(format!("swap after b->x->b: {r}"));
        let fresh = fresh.expect("a failed swap returns a fresh handle");
        log(format!("fresh current: {}", res(&fresh.current(), val)));
        log(format!(
            "swap fresh: {}",
            swapped(atomics::swap(fresh, b"won")).0
        ));
        log(format!("after retry: {}", res(&b.get("c"), val)));
        // A missing key: the swap creates it.
        let c = Cas::new(&b, "m").unwrap();
        log(format!("cas on missing: {}", res(&c.current(), val)));
        log(format!(
            "swap missing: {}",
            swapped(atomics::swap(c, b"made")).0
        ));
        log(format!("after: {}", res(&b.get("m"), val)));
        // A key created and deleted since a handle saw it missing: changed, so it fails.
        let c = Cas::new(&b, "g").unwrap();
        b.set("g", b"1").unwrap();
        b.delete("g").unwrap();
        log(format!(
            "swap after create+delete: {}",
            swapped(atomics::swap(c, b"2")).0
        ));
        // Deleted since: fails.
        let c = Cas::new(&b, "m").unwrap();
        b.delete("m").unwrap();
        log(format!(
            "swap after delete: {}",
            swapped(atomics::swap(c, b"z")).0
        ));
        log(format!("still deleted: {}", res(&b.get("m"), val)));

        // batch.
        let pairs: Vec<(String, Vec<u8>)> = [("a", "1"), ("b", "2"), ("c", "3")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect();
        log(format!(
            "set-many: {}",
            res(&batch::set_many(&b, &pairs), |_| String::new())
        ));
        let keys: Vec<String> = ["a", "zz", "c"].iter().map(|s| s.to_string()).collect();
        log(format!(
            "get-many: {}",
            res(&batch::get_many(&b, &keys), |v| v
                .iter()
                .map(|(k, v)| format!("{k}={}", val(v)))
                .collect::<Vec<_>>()
                .join(","))
        ));
        let gone: Vec<String> = ["a", "zz"].iter().map(|s| s.to_string()).collect();
        log(format!(
            "delete-many: {}",
            res(&batch::delete_many(&b, &gone), |_| String::new())
        ));
        log(format!(
            "a after delete-many: {}",
            res(&b.exists("a"), |e| e.to_string())
        ));
        log(format!(
            "get-many none: {}",
            res(&batch::get_many(&b, &[]), |v| v.len().to_string())
        ));

        // list-keys, every page.
        for i in 0..300 {
            b.set(&format!("p{i}"), b"x").unwrap();
        }
        let mut all = std::collections::BTreeSet::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let page = b.list_keys(cursor.as_deref()).expect("list-keys");
            all.extend(page.keys);
            pages += 1;
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
            assert!(pages < 10_000, "list-keys never ends");
        }
        log(format!(
            "list-keys: {} keys: {}",
            all.len(),
            all.iter()
                .filter(|k| !k.starts_with('p'))
                .cloned()
                .collect::<Vec<_>>()
                .join(",")
        ));
        t
    }

    fn get_many_flood(name: String, n: u32, size: u32) -> String {
        let b = store::open(&name).expect("the bucket opens");
        let key = "k".repeat(size as usize);
        let keys = vec![key; n as usize];
        res(&batch::get_many(&b, &keys), |v| {
            format!("{} answers", v.len())
        })
    }

    fn set_many_flood(name: String, n: u32, size: u32) -> String {
        let b = store::open(&name).expect("the bucket opens");
        let value = vec![b'v'; size as usize];
        let pairs: Vec<(String, Vec<u8>)> =
            (0..n).map(|i| (format!("k{i}"), value.clone())).collect();
        res(&batch::set_many(&b, &pairs), |()| "set".into())
    }

    fn fill(name: String, n: u32) -> (u32, String) {
        let b = match store::open(&name) {
            Ok(b) => b,
            Err(e) => return (0, err(&e)),
        };
        for i in 0..n {
            if let Err(e) = b.set(&format!("k{i}"), b"v") {
                return (i, err(&e));
            }
        }
        (n, String::new())
    }
}

export!(Foreign);
