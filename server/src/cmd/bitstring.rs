//! The string under a bit command (`SETBIT`, `BITFIELD`): parsing a bit offset with Redis's
//! limits, and growing the string in place, zero-padded, up to the highest bit written.

use bytes::{Bytes, BytesMut};

use super::util::wrongtype;
use super::Ctx;
use crate::db::{Str, Value};
use crate::frame::Frame;

/// Redis's error for a bit offset that is not an integer, negative, or past the largest
/// string (`proto-max-bulk-len`, 512 MB by default: offsets up to 2^32 - 1).
pub(crate) const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// Past this many bytes of zero padding, growing a string is long enough work to hand the
/// worker off first (see [`crate::hand_off`]): a `SETBIT` at offset 2^32 - 1 zeroes 512 MB.
const HEAVY_GROWTH: usize = 16 * 1024 * 1024;

/// Parses a bit offset as Redis's `getBitOffsetFromArgument`: a plain integer, or with
/// `width` given (`BITFIELD`), `#N` meaning `N * width`. Refused when negative or when its byte
/// lies past `proto-max-bulk-len`, except on the master's link (Redis obeys its master).
pub(crate) fn parse_bit_offset(
    ctx: &Ctx<'_>,
    arg: &[u8],
    width: Option<u32>,
) -> Result<u64, Frame> {
    let bad = || Frame::error(BAD_OFFSET);
    let (digits, times) = match (arg.first(), width) {
        (Some(b'#'), Some(w)) => (&arg[1..], Some(w)),
        _ => (arg, None),
    };
    let mut n = crate::codec::parse_int(digits).ok_or_else(bad)?;
    if let Some(w) = times {
        // C multiplies without checking; an overflow that wraps negative is refused below,
        // as there.
        n = n.wrapping_mul(i64::from(w));
    }
    let max = ctx.shared.config.proto_max_bulk_len();
    if n < 0 || (!ctx.client.is_replication_link && (n as u64 >> 3) >= max) {
        return Err(bad());
    }
    Ok(n as u64)
}

/// Runs `f` on the bytes of the string at `key`, grown with zeros to at least `min_len` bytes
/// (created when absent; its TTL kept). `f` is told whether the string grew (a new key
/// counts) and says whether it changed anything: only then is the key signalled (`WATCH`,
/// tracking) and the command counted as a write, as Redis does (a `SETBIT` of a bit to the
/// value it has, at an offset inside the string, changes nothing). WRONGTYPE when the key holds another type; Redis's OOM error when
/// the growth alone would pass `maxmemory` (see [`crate::oom::check_growth`]).
///
/// The bytes are changed in place when no reader holds the string (the usual case), so a bit
/// set in a large bitmap costs one bit, not a copy of the bitmap.
pub(crate) fn with_grown_string<R>(
    ctx: &mut Ctx<'_>,
    key: &Bytes,
    min_len: usize,
    f: impl FnOnce(&mut [u8], bool) -> (R, bool),
) -> Result<R, Frame> {
    let (db, now, lazy) = (ctx.db(), ctx.now_ms, ctx.lazy_delete());
    let current = match db.get(key, now, lazy) {
        Some(e) => match &e.value {
            Value::Str(s) => Some(s.len()),
            _ => return Err(wrongtype()),
        },
        None => None,
    };
    let extra = min_len.saturating_sub(current.unwrap_or(0));
    crate::oom::check_growth(ctx, extra)?;
    if extra > HEAVY_GROWTH {
        crate::hand_off::before_long_step();
    }
    let mut entry = match db.get_mut(key, now, lazy) {
        Some(e) => e,
        None => db.get_or_create(key, now, lazy, || Value::Str(Str::new())),
    };
    // Looked at again under the key's lock: another client may have changed it meanwhile.
    let Value::Str(s) = &mut entry.value else {
        return Err(wrongtype());
    };
    let created = s.is_empty() && current.is_none();
    let mut buf = match std::mem::take(s).into_bytes().try_into_mut() {
        Ok(b) => b,
        Err(shared) => BytesMut::from(&shared[..]),
    };
    let grew = buf.len() < min_len || created;
    if buf.len() < min_len {
        if buf.is_empty() {
            // Zeroed by the allocator: pages of a large new bitmap are not touched until used.
            buf = BytesMut::zeroed(min_len);
        } else {
            buf.resize(min_len, 0);
        }
    }
    let (r, changed) = f(&mut buf, grew);
    *s = Str::from(buf.freeze());
    drop(entry);
    if changed {
        ctx.modified(key);
        // `SETBIT` and `BITFIELD` both notify `setbit`, as in Redis.
        ctx.notify(crate::notify::STRING, "setbit", key);
    }
    Ok(r)
}
