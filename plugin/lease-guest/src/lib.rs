//! A guest of the `latchkey:lease` proposal: each export drives the interface and reports what
//! it saw.

wit_bindgen::generate!({
    world: "latchkey-test:lease-guest/guest@0.1.0",
    path: ["../wit/keyvalue", "../wit/lease", "wit/guest.wit"],
    generate_all,
});

use latchkey::lease::lease::{self, Grant};
use wasi::keyvalue::store::{self, Error};

struct LeaseGuest;

/// A result as text.
fn res<T>(r: &Result<T, Error>, ok: impl Fn(&T) -> String) -> String {
    match r {
        Ok(v) => format!("ok {}", ok(v)),
        Err(Error::NoSuchStore) => "err no-such-store".into(),
        Err(Error::AccessDenied) => "err access-denied".into(),
        Err(Error::Other(t)) => format!("err other({t})"),
    }
}

/// A grant as text: its fence (the token is random).
fn grant(g: &Option<Grant>) -> String {
    match g {
        Some(g) => format!("fence {}", g.fence),
        None => "held".into(),
    }
}

impl Guest for LeaseGuest {
    fn transcript(name: String) -> Vec<String> {
        let b = store::open(&name).expect("the bucket opens");
        let mut t = Vec::new();
        let first = lease::acquire(&b, "job", 10_000);
        t.push(format!("acquire: {}", res(&first, grant)));
        t.push(format!(
            "acquire held: {}",
            res(&lease::acquire(&b, "job", 10_000), grant)
        ));
        let g = first.unwrap().unwrap();
        t.push(format!(
            "renew: {}",
            res(&lease::renew(&b, &g, 20_000), |r| r.to_string())
        ));
        let stranger = Grant {
            key: g.key.clone(),
            token: "not-the-token".into(),
            fence: g.fence,
        };
        t.push(format!(
            "renew by a stranger: {}",
            res(&lease::renew(&b, &stranger, 20_000), |r| r.to_string())
        ));
        t.push(format!(
            "release by a stranger: {}",
            res(&lease::release(&b, &stranger), |r| r.to_string())
        ));
        t.push(format!(
            "release: {}",
            res(&lease::release(&b, &g), |r| r.to_string())
        ));
        t.push(format!(
            "release again: {}",
            res(&lease::release(&b, &g), |r| r.to_string())
        ));
        t.push(format!(
            "renew released: {}",
            res(&lease::renew(&b, &g, 1_000), |r| r.to_string())
        ));
        let again = lease::acquire(&b, "job", 10_000);
        t.push(format!("acquire again: {}", res(&again, grant)));
        t.push(format!(
            "another key: {}",
            res(&lease::acquire(&b, "other", 10_000), grant)
        ));
        t.push(format!(
            "ttl 0: {}",
            res(&lease::acquire(&b, "z", 0), grant).starts_with("err other")
        ));
        // The value of a key and the lease on it are separate.
        t.push(format!(
            "value of a leased key: {}",
            res(&b.get("job"), |v| format!("{v:?}"))
        ));
        t
    }

    fn take(bucket: String, key: String, ttl_ms: u64) -> u64 {
        let b = store::open(&bucket).expect("the bucket opens");
        match lease::acquire(&b, &key, ttl_ms) {
            Ok(Some(g)) => g.fence,
            Ok(None) => 0,
            Err(e) => panic!("{}", res::<()>(&Err(e), |_| String::new())),
        }
    }
}

export!(LeaseGuest);
