//! The cost of reclaiming one expired key, in-process: fills a database with N lock keys
//! the way `SET lock:N token NX PX ttl` does (arguments detached from the read buffer, the
//! key stored through `Db::update`), then deletes them all with the active expiry cycle's
//! step (`Db::active_expire`, `STEP_KEYS` at a time) and frees what each step returns, as
//! the cycle does. Prints nanoseconds per key for the deletions and for the freeing.
//!
//! ```text
//! cargo build --release -p latchkey-server --features internals --example expire_cost
//! taskset -c 1 target/release/examples/expire_cost --keys 1000000
//! ```
//!
//! For counts that do not depend on what else the machine runs, run it under
//! `valgrind --tool=callgrind` (instructions, not seconds). A benchmark, not a test.

use latchkey_server::internals::expire_cost;
use latchkey_server::CountingAllocator;

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
    let cost = expire_cost(keys);
    let per = |d: std::time::Duration| d.as_nanos() as f64 / keys.max(1) as f64;
    println!(
        "{keys} keys: load {:.0} ns/key, delete {:.0} ns/key, free {:.0} ns/key, total reclaim {:.0} ns/key",
        per(cost.load),
        per(cost.delete),
        per(cost.free),
        per(cost.delete + cost.free)
    );
}
