//! The sparse representation: the registers run-length encoded, for sketches with few
//! non-zero registers. Three opcodes, read left to right, cover the 16384 registers in order:
//!
//! - `ZERO`  `00xxxxxx`: 1..=64 registers at 0 (`xxxxxx` + 1);
//! - `XZERO` `01xxxxxx yyyyyyyy`: 1..=16384 registers at 0 (the 14 bits + 1);
//! - `VAL`   `1vvvvvxx`: 1..=4 registers (`xx` + 1) at value 1..=32 (`vvvvv` + 1).
//!
//! An empty sketch is `XZERO:16384`, two bytes. A register that must go above 32, or a sketch
//! that would grow past `hll-sparse-max-bytes`, turns the whole value dense for good.
//!
//! The bytes are a client's: `SET` can store anything after a valid header. Every walk here
//! reads inside the slice (the second byte of an `XZERO` cut off by the end reads as 0, which
//! is what Redis reads there: the terminating zero of its string), and says when the opcodes
//! do not cover exactly 16384 registers. The edits are those of Redis, step for step, so that
//! the same additions leave the same bytes.

use super::{dense, Corrupt, HEADER, HISTOGRAM, REGISTERS};

/// The largest value a `VAL` opcode holds.
pub(crate) const VAL_MAX_VALUE: u8 = 32;
/// The longest run of a `VAL` opcode.
const VAL_MAX_LEN: usize = 4;
/// The longest run of a `ZERO` opcode.
const ZERO_MAX_LEN: usize = 64;

/// One opcode: how many registers it covers, their value, and its size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Op {
    /// Registers covered (at least 1).
    pub run: usize,
    /// Their value (0 for `ZERO`/`XZERO`).
    pub value: u8,
    /// Bytes the opcode takes: 2 for `XZERO`, else 1.
    pub size: usize,
}

impl Op {
    fn is_xzero(&self) -> bool {
        self.size == 2
    }
}

/// The opcode at `at` of `body` (which must be inside it). An `XZERO` whose second byte is
/// past the end reads that byte as 0.
pub(crate) fn op_at(body: &[u8], at: usize) -> Op {
    let b = body[at];
    if b & 0x80 != 0 {
        Op {
            run: usize::from(b & 0x3) + 1,
            value: ((b >> 2) & 0x1f) + 1,
            size: 1,
        }
    } else if b & 0x40 != 0 {
        let low = body.get(at + 1).copied().unwrap_or(0);
        Op {
            run: ((usize::from(b & 0x3f) << 8) | usize::from(low)) + 1,
            value: 0,
            size: 2,
        }
    } else {
        Op {
            run: usize::from(b & 0x3f) + 1,
            value: 0,
            size: 1,
        }
    }
}

/// The opcodes of `body` in order, each with its offset.
pub(crate) fn ops(body: &[u8]) -> impl Iterator<Item = (usize, Op)> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= body.len() {
            return None;
        }
        let op = op_at(body, at);
        let here = at;
        at += op.size;
        Some((here, op))
    })
}

fn val(value: u8, run: usize) -> u8 {
    0x80 | ((value - 1) << 2) | (run as u8 - 1)
}

/// Appends a run of `run` zero registers: `ZERO` up to 64, `XZERO` past it.
fn push_zeros(seq: &mut Vec<u8>, run: usize) {
    if run > ZERO_MAX_LEN {
        let l = run - 1;
        seq.push(0x40 | (l >> 8) as u8);
        seq.push((l & 0xff) as u8);
    } else {
        seq.push((run - 1) as u8);
    }
}

/// The bytes of an empty sketch's registers.
pub(crate) fn empty_body() -> [u8; 2] {
    let l = REGISTERS - 1;
    [0x40 | (l >> 8) as u8, (l & 0xff) as u8]
}

/// What [`set`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SetOutcome {
    /// The register already held as much: nothing changed.
    Unchanged,
    /// The register was raised in place.
    Raised,
    /// The value must go dense first: the register needs more than a `VAL` holds, or the
    /// sketch would pass the size limit. Nothing was changed.
    Promote,
}

/// Raises register `index` of the sparse value `v` (header included) to `count` if it holds
/// less, splitting the opcode that covers it, then merging equal neighbours. `max_bytes` is
/// `hll-sparse-max-bytes`. Corrupt when no opcode covers `index`.
pub(crate) fn set(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: u64,
) -> Result<SetOutcome, Corrupt> {
    if count > VAL_MAX_VALUE {
        return Ok(SetOutcome::Promote);
    }
    // Step 1: the opcode covering `index`, the one before it, and where it starts.
    let (mut at, mut first, mut prev) = (HEADER, 0usize, None);
    let mut found = None;
    while at < v.len() {
        let op = op_at(&v[..], at);
        if index < first + op.run {
            found = Some(op);
            break;
        }
        prev = Some(at);
        at += op.size;
        first += op.run;
    }
    let Some(op) = found else {
        return Err(Corrupt);
    };
    // Step 2: the cases that need no split.
    let last = first + op.run - 1;
    if op.value > 0 {
        if op.value >= count {
            return Ok(SetOutcome::Unchanged);
        }
        if op.run == 1 {
            v[at] = val(count, 1);
            merge_neighbours(v, prev);
            return Ok(SetOutcome::Raised);
        }
    } else if !op.is_xzero() && op.run == 1 {
        v[at] = val(count, 1);
        merge_neighbours(v, prev);
        return Ok(SetOutcome::Raised);
    }
    // The general case: the run splits into up to three (what is before the register, the
    // register, what is after it): at most five bytes.
    let mut seq = Vec::with_capacity(5);
    if op.value == 0 {
        if index != first {
            push_zeros(&mut seq, index - first);
        }
        seq.push(val(count, 1));
        if index != last {
            push_zeros(&mut seq, last - index);
        }
    } else {
        if index != first {
            seq.push(val(op.value, index - first));
        }
        seq.push(val(count, 1));
        if index != last {
            seq.push(val(op.value, last - index));
        }
    }
    // Step 3: put the new opcodes in the old one's place, unless that grows the value past
    // the limit.
    let delta = seq.len() as i64 - op.size as i64;
    if delta > 0 && v.len() as u64 + delta as u64 > max_bytes {
        return Ok(SetOutcome::Promote);
    }
    let new_len = (v.len() as i64 + delta) as usize;
    let end = (at + op.size).min(v.len());
    v.splice(at..end, seq);
    // An `XZERO` cut off by the end of the value was read as if a zero byte followed: the
    // value keeps the length it would have had, the bytes past it being dropped.
    v.truncate(new_len);
    merge_neighbours(v, prev);
    Ok(SetOutcome::Raised)
}

/// Step 4 of [`set`]: merges adjacent `VAL` opcodes of equal value whose runs fit in one,
/// looking at up to five opcodes from the one before the change (`prev`, or the first).
fn merge_neighbours(v: &mut Vec<u8>, prev: Option<usize>) {
    let mut at = prev.unwrap_or(HEADER);
    let mut budget = 5;
    while at < v.len() && budget > 0 {
        budget -= 1;
        let op = op_at(&v[..], at);
        if op.value == 0 {
            at += op.size;
            continue;
        }
        if at + 1 < v.len() && v[at + 1] & 0x80 != 0 {
            let next = op_at(&v[..], at + 1);
            let run = op.run + next.run;
            if next.value == op.value && run <= VAL_MAX_LEN {
                v[at + 1] = val(op.value, run);
                v.remove(at);
                // Again from here: the merged run may merge with the one after it.
                continue;
            }
        }
        at += 1;
    }
}

/// Walks the opcodes of `body`, calling `f` with the first register of each run and the
/// run. Corrupt unless the runs cover exactly the 16384 registers: the walk stops at the
/// first run that would pass the end, before `f` sees it (as Redis's walks do since the fix
/// of CVE-2025-32023, where runs summed past the end overflowed the index).
pub(crate) fn walk(body: &[u8], mut f: impl FnMut(usize, Op)) -> Result<(), Corrupt> {
    let mut idx = 0usize;
    for (_, op) in ops(body) {
        if idx + op.run > REGISTERS {
            return Err(Corrupt);
        }
        f(idx, op);
        idx += op.run;
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// Writes the registers of the sparse `body` into the dense `regs` (all zero before).
pub(crate) fn to_dense_registers(body: &[u8], regs: &mut [u8]) -> Result<(), Corrupt> {
    walk(body, |first, op| {
        if op.value > 0 {
            for i in first..first + op.run {
                dense::set(regs, i, op.value);
            }
        }
    })
}

/// Counts how many registers hold each value.
pub(crate) fn histogram(body: &[u8], hist: &mut [u32; HISTOGRAM]) -> Result<(), Corrupt> {
    walk(body, |_, op| hist[usize::from(op.value)] += op.run as u32)
}

/// Raises each of `max` (one byte a register) to the register of the sparse `body`.
pub(crate) fn merge_into(max: &mut [u8], body: &[u8]) -> Result<(), Corrupt> {
    walk(body, |first, op| {
        for m in &mut max[first..first + op.run] {
            *m = (*m).max(op.value);
        }
    })
}

/// `PFDEBUG DECODE`'s text: `z:N` for `ZERO`, `Z:N` for `XZERO`, `v:VALUE,N` for `VAL`,
/// separated by spaces.
pub(crate) fn decode(body: &[u8]) -> String {
    let words: Vec<String> = ops(body)
        .map(|(_, op)| match (op.value, op.size) {
            (0, 1) => format!("z:{}", op.run),
            (0, _) => format!("Z:{}", op.run),
            (v, _) => format!("v:{},{}", v, op.run),
        })
        .collect();
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sketch(body: &[u8]) -> Vec<u8> {
        let mut v = super::super::empty();
        v.truncate(HEADER);
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn setting_registers_splits_and_merges_runs_as_redis_does() {
        let mut v = super::super::empty();
        assert_eq!(set(&mut v, 1000, 2, 3000), Ok(SetOutcome::Raised));
        assert_eq!(decode(&v[HEADER..]), "Z:1000 v:2,1 Z:15383");
        assert_eq!(set(&mut v, 1020, 3, 3000), Ok(SetOutcome::Raised));
        assert_eq!(set(&mut v, 1021, 3, 3000), Ok(SetOutcome::Raised));
        assert_eq!(
            decode(&v[HEADER..]),
            "Z:1000 v:2,1 z:19 v:3,2 Z:15362",
            "the example of Redis's documentation"
        );
        assert_eq!(set(&mut v, 1020, 3, 3000), Ok(SetOutcome::Unchanged));
        assert_eq!(set(&mut v, 1020, 33, 3000), Ok(SetOutcome::Promote));
        // The size limit: a split that would grow the value past it promotes instead.
        let len = v.len() as u64;
        assert_eq!(set(&mut v, 5000, 1, len), Ok(SetOutcome::Promote));
        assert_eq!(v.len() as u64, len);
    }

    #[test]
    fn walks_catch_wrong_register_counts() {
        let mut hist = [0u32; HISTOGRAM];
        assert!(histogram(&empty_body(), &mut hist).is_ok());
        assert_eq!(hist[0], REGISTERS as u32);
        // One register short, one too many.
        let short = [0x7f, 0xfe];
        assert_eq!(histogram(&short, &mut [0; HISTOGRAM]), Err(Corrupt));
        let long = [0x7f, 0xff, 0x80];
        assert_eq!(histogram(&long, &mut [0; HISTOGRAM]), Err(Corrupt));
        let mut max = vec![0u8; REGISTERS];
        assert_eq!(merge_into(&mut max, &long), Err(Corrupt));
        // Nothing covers register 16383.
        let mut v = sketch(&short);
        assert_eq!(set(&mut v, REGISTERS - 1, 1, 3000), Err(Corrupt));
        // An XZERO cut off by the end reads its second byte as 0: 0x7f alone is 16129 zeros.
        assert_eq!(decode(&[0x7f]), "Z:16129");
        let mut v = sketch(&[0x7f]);
        assert_eq!(set(&mut v, 3, 1, 3000), Ok(SetOutcome::Raised));
        // Split as if the zero byte were there, at the length Redis leaves (one byte short of
        // the new opcodes: the last XZERO is cut off again, and reads as zero again).
        assert_eq!(v.len(), HEADER + 3);
        assert_eq!(decode(&v[HEADER..]), "z:3 v:1,1 Z:15873");
    }
}
