//! The cost of reclaiming one expired key, in-process: fills a database with N lock keys
//! the way `SET lock:N token NX PX ttl` does (arguments detached from the read buffer, the
//! key stored through [`Db::update`]), then deletes them all with the active expiry cycle's
//! step ([`Db::active_expire`], [`STEP_KEYS`] at a time) and frees what each step returns, as
//! the cycle does. Prints nanoseconds per key for the deletions and for the freeing.
//!
//! ```text
//! cargo build --release -p latchkey-server --example expire_cost
//! taskset -c 1 target/release/examples/expire_cost --keys 1000000
//! ```
//!
//! For counts that do not depend on what else the machine runs, run it under
//! `valgrind --tool=callgrind` (instructions, not seconds). A benchmark, not a test.

use std::time::Instant;

use bytes::Bytes;
use latchkey_server::db::{Entry, Keyspace, Update, Value};
use latchkey_server::expire::STEP_KEYS;
use latchkey_server::memory::CountingAllocator;

/// The allocator the `latchkey-server` binary installs: its count is part of each free.
#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

fn main() {
    let mut keys: u64 = 1_000_000;
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, n] = args.as_slice() {
        assert_eq!(flag, "--keys", "usage: expire_cost --keys N");
        keys = n.parse().expect("--keys N");
    }
    let ks = Keyspace::default();
    let db = ks.db(0);
    // Deadlines spread over a second and a half, as a burst of SETs lays them out.
    let t0 = Instant::now();
    for i in 0..keys {
        let key = Bytes::copy_from_slice(format!("lock:{i}").as_bytes());
        let deadline = 1_000 + i * 1_500 / keys.max(1);
        db.update(&key, 0, true, |old| {
            let put = Update::Put(Entry::with_expiry(
                Value::Str(Bytes::copy_from_slice(b"token")),
                Some(deadline),
            ));
            (if old.is_none() { put } else { Update::Keep }, ())
        });
    }
    let load = t0.elapsed();
    let (mut delete, mut free) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
    let mut gone_total = 0u64;
    loop {
        let t = Instant::now();
        let gone = db.active_expire(u64::MAX / 2, STEP_KEYS);
        delete += t.elapsed();
        if gone.is_empty() {
            break;
        }
        gone_total += gone.len() as u64;
        let t = Instant::now();
        // Small values: what the cycle's lazy free drops at once.
        drop(gone);
        free += t.elapsed();
    }
    assert_eq!(gone_total, keys, "every key expired");
    assert_eq!(db.len(), 0);
    let per = |d: std::time::Duration| d.as_nanos() as f64 / keys.max(1) as f64;
    println!(
        "{keys} keys: load {:.0} ns/key, delete {:.0} ns/key, free {:.0} ns/key, total reclaim {:.0} ns/key",
        per(load),
        per(delete),
        per(free),
        per(delete + free)
    );
}
