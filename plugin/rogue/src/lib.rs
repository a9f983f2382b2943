//! The rogue guest: each export misbehaves in one way the host must contain.

wit_bindgen::generate!({
    world: "latchkey:rogue/rogue@0.1.0",
    path: ["../../wasm-client/wit/redis.wit", "wit/rogue.wit"],
    generate_all,
});

use latchkey::locks::redis::{self as host, Frame};

struct Rogue;

/// Takes `key` for `ttl_ms` with a fixed token; panics (traps) if the host refuses.
fn take(key: &str, ttl_ms: u64) -> String {
    let token = "rogue-token".to_string();
    let args: Vec<Vec<u8>> = ["SET", key, &token, "NX", "PX", &ttl_ms.to_string()]
        .iter()
        .map(|a| a.as_bytes().to_vec())
        .collect();
    let reply = host::command(&args).expect("the host runs SET");
    assert!(
        matches!(reply.first(), Some(Frame::Status(s)) if s == "OK"),
        "the lock was free"
    );
    token
}

impl Guest for Rogue {
    fn spin() {
        let mut x: u64 = 0;
        loop {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }

    fn compute(ms: u32) {
        let start = std::time::Instant::now();
        let mut x: u64 = 0;
        while start.elapsed() < std::time::Duration::from_millis(ms.into()) {
            for _ in 0..1_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
    }

    fn alloc(step_kb: u32) -> u64 {
        let mut held: Vec<Vec<u8>> = Vec::new();
        let mut total = 0u64;
        loop {
            let mut v = Vec::new();
            if v.try_reserve_exact(step_kb as usize * 1024).is_err() {
                return total;
            }
            v.resize(step_kb as usize * 1024, 1u8);
            total += v.len() as u64;
            held.push(v);
        }
    }

    fn trap_holding(key: String, ttl_ms: u64, keep: bool) {
        let token = take(&key, ttl_ms);
        if keep {
            host::keep_lease(key.as_bytes(), &token, ttl_ms).expect("the host keeps the lease");
        }
        unreachable!("a tenant bug, while holding {key}");
    }

    fn raw(args: Vec<String>) -> Result<String, String> {
        let args: Vec<Vec<u8>> = args.into_iter().map(String::into_bytes).collect();
        host::command(&args).map(|frames| format!("{frames:?}"))
    }

    fn hold_and_spin(key: String, ttl_ms: u64) {
        let token = take(&key, ttl_ms);
        host::keep_lease(key.as_bytes(), &token, ttl_ms).expect("the host keeps the lease");
        Self::spin()
    }
}

export!(Rogue);
