//! The fuzz targets' findings, replayed on stable in the normal test suite.
//!
//! Each file under `fuzz/regressions/<target>/` is an input that once crashed, hung or
//! exhausted memory (minimized with `cargo fuzz tmin`), or a hand-made input for a bug found
//! by reading the code. It is replayed through the very check the fuzz target runs: the fuzz
//! crate's `src/` is included here by path, so there is one copy of each check. A check
//! panics when an invariant breaks, which fails the test.

#[path = "../../fuzz/src/lib.rs"]
// The fuzz crate's lib (its counting allocator, and the checks it takes from
// `latchkey_server::internals::fuzz`); included here as a module its public items are
// unreachable from outside, and the tests below use only some of them.
#[allow(dead_code, unreachable_pub, missing_docs)]
mod fuzz_checks;

use std::path::PathBuf;

/// Every input under `fuzz/regressions/<dir>`, with its name; panics if there is none, so a
/// test can never pass by replaying nothing.
fn inputs(dir: &str) -> Vec<(String, Vec<u8>)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(dir);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .filter(|(name, _)| !name.starts_with('.'))
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no inputs in {}", path.display());
    out
}

fn replay(dir: &str, check: impl Fn(&[u8])) {
    // The counting allocator of `fuzz_checks::alloc` is this test binary's global allocator:
    // its meter makes the memory bounds of the checks real here too.
    fuzz_checks::init();
    for (name, data) in inputs(dir) {
        eprintln!("replaying {dir}/{name}");
        check(&data);
    }
}

#[test]
fn resp_decode() {
    replay("resp_decode", fuzz_checks::resp::check);
}

#[test]
fn dispatch() {
    replay("dispatch", fuzz_checks::dispatch::check);
}

#[test]
fn dispatch_commands() {
    replay("dispatch_commands", fuzz_checks::dispatch::check_lines);
}

#[test]
fn hll_decode() {
    replay("hll_decode", fuzz_checks::hll::check);
}

#[test]
fn rdb_load() {
    replay("rdb_load", fuzz_checks::loaders::check_rdb);
}

#[test]
fn rdb_load_refuses_impossible_claims() {
    // The hand-made files claim sizes no file of theirs can hold: each is refused.
    for (name, data) in inputs("rdb_load") {
        if name.contains("claims") || name.contains("overflows") {
            assert!(
                !fuzz_checks::loaders::rdb_parses(&data),
                "{name} was accepted"
            );
        }
    }
}

#[test]
fn aof_load() {
    replay("aof_load", fuzz_checks::loaders::check_aof);
}

#[test]
fn replica_stream() {
    replay("replica_stream", fuzz_checks::loaders::check_replica);
}

#[test]
fn replica_master_bytes() {
    replay("replica_master_bytes", |b| {
        fuzz_checks::loaders::check_master_bytes(b, true)
    });
}

#[test]
fn lua_eval() {
    replay("lua_eval", fuzz_checks::lua::check);
}

/// Hand-made scripts for the classes `lua_eval` found (thousands of arguments or results
/// through the libraries, library calls nested through metamethods), written as Lua so
/// that each states its case plainly; run through the same check as the target's inputs.
#[test]
fn lua_eval_scripts() {
    replay("lua_eval_scripts", |b| {
        fuzz_checks::lua::run(std::str::from_utf8(b).expect("a Lua script in UTF-8"))
    });
}

#[test]
fn restore_payload() {
    replay("restore_payload", fuzz_checks::restore::check);
}

#[test]
fn restore_payload_seeds_are_what_they_say() {
    // `seed-redis-*` are bodies redis-server 7.0 dumped (every type and encoding): each
    // restores. `set-ints-descending` is well-formed too; every other file is hostile and
    // refused.
    for (name, data) in inputs("restore_payload") {
        let good = name.starts_with("seed-redis-") || name == "set-ints-descending";
        assert_eq!(fuzz_checks::restore::restores(&data), good, "{name}");
    }
}
