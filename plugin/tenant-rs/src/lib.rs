//! The example tenant in Rust (docs/TENANTS.md walks through it): one round of work on a
//! bucket through the standard `wasi:keyvalue` interfaces and the `latchkey:lease` proposal,
//! reported one line per step. `plugin/tenant-js/tenant.js` is the same tenant in JavaScript,
//! line for line.

// The bindings of `wit/world.wit` (which pulls the vendored standard and the proposal from
// `wit/deps/`): a module per imported interface, and a `Guest` trait for the exports.
wit_bindgen::generate!({
    world: "tenant",
    path: "wit",
    generate_all,
});

use latchkey::lease::lease::{acquire, release};
use wasi::keyvalue::atomics::{increment, swap, Cas, CasError};
use wasi::keyvalue::batch::{get_many, set_many};
use wasi::keyvalue::store::{open, Error};

const LANGUAGE: &str = "rust";

/// A `wasi:keyvalue/store.error` as text.
fn why(e: &Error) -> String {
    match e {
        Error::NoSuchStore => "no-such-store".into(),
        Error::AccessDenied => "access-denied".into(),
        Error::Other(text) => format!("other({text})"),
    }
}

struct Tenant;

impl Guest for Tenant {
    fn run(name: String) -> Vec<String> {
        match round(&name) {
            Ok(out) => out,
            Err(e) => vec![format!("error: {}", why(&e))],
        }
    }
}

/// The round itself; a store error ends it.
fn round(name: &str) -> Result<Vec<String>, Error> {
    let mut out = Vec::new();

    // 1. Bucket names are the host's to check: a bad one is `no-such-store`.
    match open("no/such") {
        Ok(_) => out.push("open no/such: opened".into()),
        Err(e) => out.push(format!("open no/such: {}", why(&e))),
    }
    let bucket = open(name)?;

    // 2. The lease on "report" (10 s) keeps other instances of this tenant out of the round.
    // Its fence grows with every grant: a storage service can refuse a write carrying an older
    // fence than one it has seen.
    let Some(grant) = acquire(&bucket, "report", 10_000)? else {
        out.push("lease: held by someone else, try later".into());
        return Ok(out);
    };
    out.push(format!("lease: fence {}", grant.fence));

    // 3. A counter: `increment` creates a missing key with the delta.
    out.push(format!("visits: {}", increment(&bucket, "visits", 1)?));

    // 4. Append to "log" with compare-and-swap: when someone wrote it since the handle was
    // made, `swap` fails with `cas-failed` and a fresh handle to retry with.
    let mut cas = Cas::new(&bucket, "log")?;
    let mut attempt = 1;
    loop {
        let now = cas.current()?.unwrap_or_default();
        let log = format!("{}{LANGUAGE};", String::from_utf8_lossy(&now));
        match swap(cas, log.as_bytes()) {
            Ok(()) => {
                out.push(format!("log: {log}"));
                break;
            }
            Err(CasError::CasFailed(fresh)) if attempt < 5 => cas = fresh,
            Err(CasError::CasFailed(_)) => return Err(Error::Other("log: too busy".into())),
            Err(CasError::StoreError(e)) => return Err(e),
        }
        attempt += 1;
    }

    // 5. A batch: set one key, read two (a missing key comes back without a value).
    set_many(&bucket, &[(format!("seen-by-{LANGUAGE}"), b"yes".to_vec())])?;
    let seen: Vec<String> = get_many(&bucket, &["seen-by-rust".into(), "seen-by-js".into()])?
        .into_iter()
        .map(|(key, value)| match value {
            Some(v) => format!("{key}={}", String::from_utf8_lossy(&v)),
            None => format!("{key}=none"),
        })
        .collect();
    out.push(format!("seen: {}", seen.join(" ")));

    // 6. Every key of the bucket, page by page (the cursor is the host's, opaque).
    let mut keys = Vec::new();
    let mut cursor = None;
    loop {
        let page = bucket.list_keys(cursor.as_deref())?;
        keys.extend(page.keys);
        cursor = page.cursor;
        if cursor.is_none() {
            break;
        }
    }
    keys.sort();
    keys.dedup();
    out.push(format!("keys: {}", keys.join(",")));

    // 7. Give the lease back: false would mean it ran out and someone else may hold it.
    out.push(format!("released: {}", release(&bucket, &grant)?));
    Ok(out)
}

export!(Tenant);
