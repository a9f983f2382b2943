//! `DEBUG POPULATE count [prefix] [size]`: fills the current database with `count` string keys
//! in one command, as Redis's own test suite and benchmarks do to get a large keyspace fast.
//!
//! As in Redis 7.0: key `j` is `prefix:j` (prefix `key` by default; the name is cut at 127
//! bytes, Redis's buffer) holding `value:j`, or with `size` a value of exactly `size` bytes
//! that starts with `value:j` and is zero-filled; a key that already exists is left as it is;
//! nothing is propagated to replicas or the AOF (Redis does not propagate it either).
//!
//! Unlike Redis, the count cannot take the process down: with `maxmemory` set, filling stops
//! with Redis's OOM error as soon as the next key would pass it (the keys made so far stay),
//! and a large fill hands its worker off first, so other clients are served meanwhile.

use bytes::{BufMut, Bytes, BytesMut};

use super::util::parse_i64;
use super::Ctx;
use crate::db::{Entry, Update, Value};
use crate::frame::Frame;

/// Redis builds each key name in a 128-byte C buffer: at most 127 bytes survive.
const MAX_NAME: usize = 127;

/// The largest count accepted: Redis asks its dict to grow to `count` buckets first and
/// answers `OOM in dictTryExpand` when that allocation fails.
const MAX_COUNT: i64 = 1 << 32;

/// How often (in keys) the fill checks `maxmemory`.
const MEMORY_CHECK_EVERY: i64 = 64;

/// Runs `DEBUG POPULATE`; `args[0..2]` are `DEBUG POPULATE`.
pub(super) fn populate(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let count = match positive(&args[2]) {
        Ok(n) => n,
        Err(e) => return e,
    };
    if count > MAX_COUNT {
        return Frame::error("ERR OOM in dictTryExpand");
    }
    let size = match args.get(4) {
        Some(a) => match positive(a) {
            Ok(n) => Some(n as usize),
            Err(e) => return e,
        },
        None => None,
    };
    if let Some(size) = size {
        if let Err(e) = crate::oom::check_growth(ctx, size) {
            return e;
        }
    }
    // A C string: the prefix ends at its first NUL.
    let prefix: &[u8] = match args.get(3) {
        Some(p) => p.split(|b| *b == 0).next().unwrap_or_default(),
        None => b"key",
    };
    if count as usize > crate::walk::HEAVY_WALK {
        crate::hand_off::before_long_step();
    }
    let (now, lazy) = (ctx.now_ms, ctx.lazy_delete());
    for j in 0..count {
        if j % MEMORY_CHECK_EVERY == 0 {
            let per_key = prefix.len() + 24 + size.unwrap_or(16);
            if let Err(e) = crate::oom::check_growth(ctx, per_key) {
                return e;
            }
        }
        let mut name = BytesMut::with_capacity(prefix.len() + 21);
        name.put_slice(prefix);
        name.put_slice(format!(":{j}").as_bytes());
        name.truncate(MAX_NAME);
        let key = name.freeze();
        let text = format!("value:{j}");
        let value = match size {
            None => Bytes::from(text),
            Some(size) => {
                let mut v = vec![0u8; size];
                let n = size.min(text.len());
                v[..n].copy_from_slice(&text.as_bytes()[..n]);
                Bytes::from(v)
            }
        };
        ctx.db().update(&key, now, lazy, |old| match old {
            Some(_) => (Update::Keep, ()),
            None => (Update::Put(Entry::new(Value::Str(value.into()))), ()),
        });
    }
    Frame::ok()
}

/// Redis's `getPositiveLongFromObjectOrReply`: an integer, zero or more; anything else,
/// a word as much as a negative number, is "out of range".
fn positive(arg: &[u8]) -> Result<i64, Frame> {
    match parse_i64(arg) {
        Ok(n) if n >= 0 => Ok(n),
        _ => Err(Frame::error("ERR value is out of range, must be positive")),
    }
}
