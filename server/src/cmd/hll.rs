//! HyperLogLog commands: `PFADD`, `PFCOUNT`, `PFMERGE`. The sketch and its format are
//! [`crate::hll`]; here is how the commands find, check and store it, in Redis 7.0's order of
//! checks (the first key that is not a HyperLogLog decides the error).
//!
//! A sketch is a string value, so the commands take any string a client stored: one that is
//! not a sketch is refused with `WRONGTYPE Key is not a valid HyperLogLog string value.`, one
//! whose registers do not add up with `INVALIDOBJ Corrupted HLL object detected`.

use bytes::Bytes;

use super::strings::read_string;
use super::util::wrongtype;
use super::{spec, CommandSpec, Ctx, DENYOOM, FAST, MAY_RECORD, MULTI_KEY, READONLY, WRITE};
use crate::db::{Str, Value};
use crate::frame::Frame;
use crate::hll::{self, Encoding, CORRUPT_ERROR, NOT_HLL_ERROR, REGISTERS};
use crate::memory::EntryMut;

/// The HyperLogLog commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("pfadd", -2, WRITE | DENYOOM | FAST, 1, 1, 1, pfadd),
    spec(
        "pfcount",
        -2,
        READONLY | MULTI_KEY | MAY_RECORD,
        1,
        -1,
        1,
        pfcount,
    ),
    spec(
        "pfmerge",
        -2,
        WRITE | DENYOOM | MULTI_KEY,
        1,
        -1,
        1,
        pfmerge,
    ),
];

/// Checks that `v` is a sketch: its encoding, or Redis's error.
pub(crate) fn check(v: &[u8]) -> Result<Encoding, Frame> {
    hll::encoding_of(v).ok_or_else(|| Frame::error(NOT_HLL_ERROR))
}

/// The string of a live entry as a sketch, taken out for change (the entry holds an empty
/// string until [`put_back`]); the error for another type or a string that is not a sketch.
pub(crate) fn take_sketch(entry: &mut EntryMut<'_>) -> Result<Vec<u8>, Frame> {
    let Value::Str(s) = &mut entry.value else {
        return Err(wrongtype());
    };
    check(s)?;
    // In place when no reader shares the bytes (the usual case), else one copy.
    Ok(Vec::from(std::mem::take(s).into_bytes()))
}

/// Stores `v` back into the entry [`take_sketch`] took it from.
pub(crate) fn put_back(entry: &mut EntryMut<'_>, v: Vec<u8>) {
    entry.value = Value::Str(Str::from(v));
}

/// The live entry at `key` for change, created as an empty sketch when absent; says whether
/// it was created.
fn entry_or_new<'a>(ctx: &Ctx<'a>, key: &Bytes) -> (EntryMut<'a>, bool) {
    let (db, now, lazy) = (ctx.db(), ctx.now_ms, ctx.lazy_delete());
    if let Some(e) = db.get_mut(key, now, lazy) {
        return (e, false);
    }
    let mut created = false;
    let e = db.get_or_create(key, now, lazy, || {
        created = true;
        Value::Str(Str::from(hll::empty()))
    });
    (e, created)
}

/// `PFADD key [element ...]`: 1 when a register changed (or the key was created), else 0.
fn pfadd(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let max_sparse = ctx.shared.config.hll_sparse_max_bytes();
    let key = &args[1];
    let (mut entry, created) = entry_or_new(ctx, key);
    let mut v = match take_sketch(&mut entry) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let mut updated = u64::from(created);
    let mut corrupt = false;
    for element in &args[2..] {
        match hll::add(&mut v, element, max_sparse) {
            Ok(true) => updated += 1,
            Ok(false) => {}
            Err(hll::Corrupt) => {
                corrupt = true;
                break;
            }
        }
    }
    if updated > 0 {
        hll::invalidate(&mut v);
    }
    put_back(&mut entry, v);
    drop(entry);
    if updated > 0 {
        // Counted as Redis counts it (one change per register raised). A corrupt sketch
        // keeps the registers raised before the damage was found, and the command still goes
        // to replicas and the AOF, which then make the same partial change (Redis sends
        // nothing there, leaving its replicas behind).
        ctx.modified(key);
        ctx.dirty += updated - 1;
        ctx.notify(crate::notify::STRING, "pfadd", key);
    }
    if corrupt {
        return Frame::error(CORRUPT_ERROR);
    }
    Frame::Integer(i64::from(updated > 0))
}

/// `PFCOUNT key [key ...]`: the estimate of one sketch (cached in the value), or of the union
/// of several (computed, stored nowhere).
fn pfcount(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args.len() > 2 {
        let mut max = vec![0u8; REGISTERS];
        for key in &args[1..] {
            let v = match read_string(ctx, key) {
                Ok(Some(v)) => v,
                // A missing key is an empty sketch.
                Ok(None) => continue,
                Err(e) => return e,
            };
            if let Err(e) = check(&v) {
                return e;
            }
            if hll::merge_into(&mut max, &v).is_err() {
                return Frame::error(CORRUPT_ERROR);
            }
        }
        return Frame::Integer(hll::count_registers(&max) as i64);
    }
    let key = &args[1];
    let (db, now, lazy) = (ctx.db(), ctx.now_ms, ctx.lazy_delete());
    let Some(mut entry) = db.get_mut(key, now, lazy) else {
        return Frame::Integer(0);
    };
    let Value::Str(s) = &entry.value else {
        return wrongtype();
    };
    if let Err(e) = check(s) {
        return e;
    }
    if let Some(card) = hll::cached(s) {
        return Frame::Integer(card as i64);
    }
    let card = match hll::count(s) {
        Ok(c) => c,
        Err(hll::Corrupt) => return Frame::error(CORRUPT_ERROR),
    };
    // The count is kept in the value: a change of the key that replicas and the AOF receive
    // (as the PFCOUNT itself), and that a WATCH sees, as in Redis.
    let mut v = match take_sketch(&mut entry) {
        Ok(v) => v,
        Err(e) => return e,
    };
    hll::store_cache(&mut v, card);
    put_back(&mut entry, v);
    drop(entry);
    ctx.modified(key);
    Frame::Integer(card as i64)
}

/// `PFMERGE destkey [sourcekey ...]`: the destination (itself a source) becomes the union.
fn pfmerge(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let max_sparse = ctx.shared.config.hll_sparse_max_bytes();
    let mut max = vec![0u8; REGISTERS];
    let mut use_dense = false;
    for key in &args[1..] {
        let v = match read_string(ctx, key) {
            Ok(Some(v)) => v,
            Ok(None) => continue,
            Err(e) => return e,
        };
        match check(&v) {
            Ok(Encoding::Dense) => use_dense = true,
            Ok(Encoding::Sparse) => {}
            Err(e) => return e,
        }
        if hll::merge_into(&mut max, &v).is_err() {
            return Frame::error(CORRUPT_ERROR);
        }
    }
    let key = &args[1];
    let (mut entry, _) = entry_or_new(ctx, key);
    // Checked again under the key's lock: with the destination as its only key, PFMERGE
    // runs beside other commands, which may have changed it since it was read.
    let mut v = match take_sketch(&mut entry) {
        Ok(v) => v,
        Err(e) => return e,
    };
    // A dense source makes the destination dense at once, as in Redis (rather than growing
    // it sparse until it promotes itself).
    if use_dense && hll::to_dense(&mut v).is_err() {
        put_back(&mut entry, v);
        return Frame::error(CORRUPT_ERROR);
    }
    for (i, m) in max.iter().enumerate() {
        if *m != 0 {
            // The destination was walked whole above: no register is out of its reach.
            let _ = hll::set_register(&mut v, i, *m, max_sparse);
        }
    }
    hll::invalidate(&mut v);
    put_back(&mut entry, v);
    drop(entry);
    ctx.modified(key);
    ctx.notify(crate::notify::STRING, "pfadd", key);
    Frame::ok()
}
