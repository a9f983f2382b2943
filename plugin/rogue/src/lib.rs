//! The rogue guest: each export misbehaves in one way the host must contain.

wit_bindgen::generate!({
    world: "latchkey:rogue/rogue@0.1.0",
    path: [
        "../../wasm-client/wit/redis.wit",
        "wit/random.wit",
        "wit/io.wit",
        "wit/clocks.wit",
        "wit/rogue.wit",
    ],
    generate_all,
});

use latchkey::locks::redis::{self as host, Frame};

struct Rogue;

// The host's `command` import as the canonical ABI has it, so that `flood-args` can hand it
// a list whose entries all point at one buffer (the generated binding would lower a list of
// distinct vectors): `(args pointer, args count, return area)`.
#[link(wasm_import_module = "latchkey:locks/redis@0.2.0")]
extern "C" {
    #[link_name = "command"]
    fn raw_command(args: *const u32, count: usize, ret: *mut u8);
}

/// The return area of `raw_command`: `result<list<frame>, string>` (tag, pointer, length).
#[repr(C, align(4))]
struct RetArea([u8; 12]);

/// A byte string of `n` bytes starting with `prefix`.
fn padded(prefix: &str, n: u32) -> String {
    let mut s = prefix.to_string();
    while s.len() < n as usize {
        s.push('x');
    }
    s
}

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

    fn flood_args(count: u32, size: u32) -> Result<String, String> {
        Self::flood(count, size)
    }

    fn keep_many(n: u32, key_bytes: u32, token_bytes: u32, ttl_ms: u64) -> (u32, String) {
        let token = padded("t", token_bytes);
        for i in 0..n {
            let key = padded(&format!("{{k{i}}}"), key_bytes);
            let args: Vec<Vec<u8>> = ["SET", &key, &token, "PX", &ttl_ms.to_string()]
                .iter()
                .map(|a| a.as_bytes().to_vec())
                .collect();
            if let Err(e) = host::command(&args) {
                return (i, e);
            }
            if let Err(e) = host::keep_lease(key.as_bytes(), &token, ttl_ms) {
                return (i, e);
            }
        }
        (n, String::new())
    }

    fn subscribe_many(n: u32, name_bytes: u32) -> (u32, String) {
        for i in 0..n {
            if let Err(e) = host::subscribe(padded(&format!("c{i}-"), name_bytes).as_bytes()) {
                return (i, e);
            }
        }
        (n, String::new())
    }

    fn unsubscribe_spam(n: u32) {
        for _ in 0..n {
            host::unsubscribe(u64::MAX);
        }
    }

    fn wait_on(channel: String, timeout_ms: u64) -> bool {
        let sub = host::subscribe(channel.as_bytes()).expect("the host subscribes");
        host::wait_message(sub, timeout_ms)
    }

    fn sleep_for(ms: u64) -> u64 {
        let start = std::time::Instant::now();
        host::sleep(ms);
        start.elapsed().as_millis() as u64
    }

    fn compute_chatty(ms: u32) {
        let start = std::time::Instant::now();
        let mut x: u64 = 0;
        let get: Vec<Vec<u8>> = vec![b"TIME".to_vec()];
        while start.elapsed() < std::time::Duration::from_millis(ms.into()) {
            let step = std::time::Instant::now();
            while step.elapsed() < std::time::Duration::from_millis(1) {
                for _ in 0..1_000 {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            host::sleep(0);
            let _ = std::hint::black_box(host::command(&get));
        }
    }

    fn random(len: u64, times: u32) -> u64 {
        let mut got = 0;
        for _ in 0..times {
            got += wasi::random::random::get_random_bytes(len).len() as u64;
        }
        got
    }

    fn open_pollables(n: u32) -> u32 {
        let mut held = Vec::new();
        for _ in 0..n {
            held.push(wasi::clocks::monotonic_clock::subscribe_duration(
                1_000_000_000,
            ));
        }
        held.len() as u32
    }

    fn hold_and_spin(key: String, ttl_ms: u64) {
        let token = take(&key, ttl_ms);
        host::keep_lease(key.as_bytes(), &token, ttl_ms).expect("the host keeps the lease");
        Self::spin()
    }
}

impl Rogue {
    fn flood(count: u32, size: u32) -> Result<String, String> {
        let buf = vec![b'x'; size as usize];
        let get = b"GET";
        let mut pairs: Vec<u32> = Vec::with_capacity(count as usize * 2);
        pairs.extend([get.as_ptr() as u32, get.len() as u32]);
        for _ in 1..count {
            pairs.extend([buf.as_ptr() as u32, buf.len() as u32]);
        }
        let mut ret = RetArea([0; 12]);
        // SAFETY: the pairs and the buffers they point at outlive the call; the return area
        // has the size and alignment the canonical ABI asks for this result type.
        unsafe { raw_command(pairs.as_ptr(), count as usize, ret.0.as_mut_ptr()) };
        let word = |at: usize| u32::from_le_bytes(ret.0[at..at + 4].try_into().unwrap());
        if ret.0[0] == 0 {
            return Ok("ok".into());
        }
        let (ptr, len) = (word(4) as usize, word(8) as usize);
        // SAFETY: the host wrote a string of `len` bytes at `ptr`, allocated through this
        // module's allocator.
        let bytes = unsafe { Vec::from_raw_parts(ptr as *mut u8, len, len) };
        Err(String::from_utf8_lossy(&bytes).into_owned())
    }
}

export!(Rogue);
