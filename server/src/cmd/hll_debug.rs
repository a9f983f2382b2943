//! The HyperLogLog debugging commands: `PFDEBUG GETREG|DECODE|ENCODING|TODENSE key` (what a
//! sketch holds and how) and `PFSELFTEST` (the representation checked against itself), as in
//! Redis 7.0, replies and errors included.

use bytes::Bytes;

use super::hll::{put_back, take_sketch};
use super::{spec, CommandSpec, Ctx, ADMIN, DENYOOM, WRITE};
use crate::frame::Frame;
use crate::hll::{self, dense, Encoding, CORRUPT_ERROR, HEADER, REGISTERS};

/// The HyperLogLog debugging commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("pfdebug", 3, WRITE | DENYOOM | ADMIN, 2, 2, 1, pfdebug),
    spec("pfselftest", 1, ADMIN, 0, 0, 0, pfselftest),
];

/// The longest sparse body `PFDEBUG DECODE` prints.
const MAX_DECODED_BODY: usize = 64 * 1024;

/// `PFDEBUG subcommand key`. The key is looked up and checked before the subcommand is read,
/// as in Redis. `GETREG` and `TODENSE` turn a sparse sketch dense for good; that change goes
/// to replicas and the AOF (Redis counts it as a change but tells no `WATCH`).
fn pfdebug(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let key = &args[2];
    let (db, now, lazy) = (ctx.db(), ctx.now_ms, ctx.lazy_delete());
    let Some(mut entry) = db.get_mut(key, now, lazy) else {
        return Frame::error("ERR The specified key does not exist");
    };
    let mut v = match take_sketch(&mut entry) {
        Ok(v) => v,
        Err(e) => return e,
    };
    let sparse = hll::encoding_of(&v) == Some(Encoding::Sparse);
    let sub = args[1].to_ascii_lowercase();
    let mut converted = false;
    let reply = match &sub[..] {
        b"getreg" | b"todense" => match hll::to_dense(&mut v) {
            Err(hll::Corrupt) => Frame::error(CORRUPT_ERROR),
            Ok(c) => {
                converted = c;
                if sub == b"getreg" {
                    Frame::Array(
                        hll::registers(&v)
                            .into_iter()
                            .map(|r| Frame::Integer(i64::from(r)))
                            .collect(),
                    )
                } else {
                    Frame::Integer(i64::from(c))
                }
            }
        },
        // The text takes up to 7 bytes an opcode byte: a damaged value of hundreds of
        // megabytes would make gigabytes. No well-formed sketch has more than 32 KiB of
        // opcodes (16384 runs of at most 2 bytes), so a body past twice that is refused as
        // damaged (Redis would print it all).
        b"decode" if sparse && v.len() - HEADER > MAX_DECODED_BODY => Frame::error(CORRUPT_ERROR),
        b"decode" if sparse => Frame::bulk(hll::sparse::decode(&v[HEADER..])),
        b"decode" => Frame::error("ERR HLL encoding is not sparse"),
        b"encoding" => Frame::simple(if sparse { "sparse" } else { "dense" }),
        _ => {
            // C's `%s`: the name up to its first NUL byte.
            let name = args[1].split(|b| *b == 0).next().unwrap_or_default();
            Frame::error(format!(
                "ERR Unknown PFDEBUG subcommand '{}'",
                String::from_utf8_lossy(name)
            ))
        }
    };
    put_back(&mut entry, v);
    drop(entry);
    if converted {
        ctx.changed();
    }
    reply
}

/// `PFSELFTEST`: sets every dense register to random values and reads them back (1000
/// times), then adds ten million elements to a dense and a sparse sketch side by side,
/// checking at each power of ten that the sparse one is still sparse while small, that both
/// estimate the same, and that the estimate is within six standard errors. `OK`, or Redis's
/// `TESTFAILED ...` error.
fn pfselftest(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    // Seconds of work: move this worker's other clients away first.
    crate::hand_off::before_long_step();
    let max_sparse = ctx.shared.config.hll_sparse_max_bytes();
    match selftest(max_sparse) {
        Ok(()) => Frame::ok(),
        Err(e) => Frame::error(format!("TESTFAILED {e}")),
    }
}

/// The checks of [`pfselftest`]; the failure's text.
pub(crate) fn selftest(max_sparse: u64) -> Result<(), String> {
    let mut regs = vec![0u8; dense::REGISTER_BYTES];
    let mut bytes = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = rand::random_range(0..64u8);
            dense::set(&mut regs, i, *b);
        }
        for (i, b) in bytes.iter().enumerate() {
            let got = dense::get(&regs, i);
            if got != *b {
                return Err(format!("Register {i} should be {b} but is {got}"));
            }
        }
    }
    let mut d = hll::empty();
    hll::to_dense(&mut d).map_err(|_| "dense conversion failed".to_string())?;
    let mut s = hll::empty();
    let rel_err = 1.04 / (REGISTERS as f64).sqrt();
    let seed: u64 = rand::random();
    let mut checkpoint: u64 = 1;
    for j in 1..=10_000_000u64 {
        let element = (j ^ seed).to_le_bytes();
        let corrupt = |_| "sparse representation corrupted".to_string();
        hll::add(&mut d, &element, max_sparse).map_err(corrupt)?;
        hll::add(&mut s, &element, max_sparse).map_err(corrupt)?;
        if j != checkpoint {
            continue;
        }
        if j < max_sparse / 2 && hll::encoding_of(&s) != Some(Encoding::Sparse) {
            return Err("sparse encoding not used".into());
        }
        let card = hll::count(&d).map_err(corrupt)?;
        if hll::count(&s).map_err(corrupt)? != card {
            return Err("dense/sparse disagree".into());
        }
        let abs_err = checkpoint.abs_diff(card);
        // At 10 a collision makes a larger error likely enough to fail now and then.
        let max_err = if j == 10 {
            1
        } else {
            (rel_err * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abs_err > max_err {
            return Err(format!("Too big error. card:{checkpoint} abserr:{abs_err}"));
        }
        checkpoint *= 10;
    }
    Ok(())
}
