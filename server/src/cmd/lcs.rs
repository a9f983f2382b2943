//! `LCS`: the longest common subsequence of two strings, as the string itself, its length
//! (`LEN`), or the matching ranges of both strings (`IDX`, with `MINMATCHLEN` and
//! `WITHMATCHLEN`).
//!
//! Redis fills the classic dynamic-programming table of `(len(a)+1) * (len(b)+1)` 32-bit
//! lengths and walks it back from the end; so does this, so that the subsequence and the
//! ranges chosen among equally long ones are Redis's. The work is quadratic, so two bounds
//! apply, Redis's and one of latchkey's:
//!
//! - the table may not exceed `proto-max-bulk-len` bytes (Redis's refusal, with its text), and
//!   must fit under `maxmemory` (see [`crate::oom::check_growth`]);
//! - past [`HEAVY_CELLS`] cells the worker is handed off first (see [`crate::hand_off`]), so
//!   that a large `LCS` holds up no other client's task. It runs under the shared gate, so
//!   other commands go on in parallel meanwhile.

use bytes::Bytes;

use super::strings::read_string;
use super::util::{is, parse_i64, syntax_error};
use super::{spec, CommandSpec, Ctx, READONLY};
use crate::frame::Frame;

/// The `LCS` command.
pub(crate) const COMMANDS: &[CommandSpec] = &[spec("lcs", -3, READONLY, 1, 2, 1, lcs)];

/// Past this many table cells (about a millisecond of work) the worker is handed off first.
const HEAVY_CELLS: u64 = 1 << 20;

/// What `LCS` was asked for.
struct Options {
    idx: bool,
    len: bool,
    with_match_len: bool,
    min_match_len: u64,
}

fn parse(args: &[Bytes]) -> Result<Options, Frame> {
    let mut o = Options {
        idx: false,
        len: false,
        with_match_len: false,
        min_match_len: 0,
    };
    let mut j = 3;
    while j < args.len() {
        let a = &args[j];
        if is(a, "idx") {
            o.idx = true;
        } else if is(a, "len") {
            o.len = true;
        } else if is(a, "withmatchlen") {
            o.with_match_len = true;
        } else if is(a, "minmatchlen") && j + 1 < args.len() {
            o.min_match_len = parse_i64(&args[j + 1])?.max(0) as u64;
            j += 1;
        } else {
            return Err(syntax_error());
        }
        j += 1;
    }
    if o.idx && o.len {
        return Err(Frame::error(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    Ok(o)
}

fn lcs(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    // Both keys first (a key of another type is refused before the options are read).
    let (a, b) = match (read_string(ctx, &args[1]), read_string(ctx, &args[2])) {
        (Ok(a), Ok(b)) => (a.unwrap_or_default(), b.unwrap_or_default()),
        _ => return Frame::error("ERR The specified keys must contain string values"),
    };
    let o = match parse(args) {
        Ok(o) => o,
        Err(e) => return e,
    };
    if a.len() as u64 >= u64::from(u32::MAX - 1) || b.len() as u64 >= u64::from(u32::MAX - 1) {
        return Frame::error("ERR String too long for LCS");
    }
    let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
    if cells * 4 > ctx.shared.config.proto_max_bulk_len() {
        return Frame::error(
            "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        );
    }
    let no_room =
        || Frame::error("ERR Insufficient memory, failed allocating transient memory for LCS");
    if crate::oom::check_growth(ctx, (cells * 4) as usize).is_err() {
        return no_room();
    }
    let mut table: Vec<u32> = Vec::new();
    if table.try_reserve_exact(cells as usize).is_err() {
        return no_room();
    }
    if cells > HEAVY_CELLS {
        crate::hand_off::before_long_step();
    }
    fill(&mut table, &a, &b);
    answer(&table, &a, &b, &o)
}

/// Fills `table` (room reserved) so that cell `i * (len(b)+1) + j` holds the length of the
/// longest common subsequence of `a[..i]` and `b[..j]`.
fn fill(table: &mut Vec<u32>, a: &[u8], b: &[u8]) {
    let width = b.len() + 1;
    table.resize(width, 0);
    for i in 1..=a.len() {
        table.push(0);
        for j in 1..=b.len() {
            let v = if a[i - 1] == b[j - 1] {
                table[(i - 1) * width + j - 1] + 1
            } else {
                table[(i - 1) * width + j].max(table[i * width + j - 1])
            };
            table.push(v);
        }
    }
}

/// Walks the table back from its last cell, as Redis does, and builds the reply.
fn answer(table: &[u32], a: &[u8], b: &[u8], o: &Options) -> Frame {
    let width = b.len() + 1;
    let at = |i: usize, j: usize| table[i * width + j];
    let total = at(a.len(), b.len());
    if o.len && !o.idx {
        return Frame::Integer(i64::from(total));
    }
    let mut result = vec![0u8; total as usize];
    let mut matches = Vec::new();
    let (mut i, mut j, mut k) = (a.len(), b.len(), total as usize);
    // The range being grown backwards: (a start, a end, b start, b end).
    let mut range: Option<(usize, usize, usize, usize)> = None;
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[k - 1] = a[i - 1];
            range = match range {
                None => Some((i - 1, i - 1, j - 1, j - 1)),
                // Each match after a match is the cell just before it: the range grows.
                Some((_, ae, _, be)) => Some((i - 1, ae, j - 1, be)),
            };
            if range.is_some_and(|(as_, _, bs, _)| as_ == 0 || bs == 0) {
                emit = true;
            }
            k -= 1;
            i -= 1;
            j -= 1;
        } else {
            if at(i - 1, j) > at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = range.is_some();
        }
        if emit {
            if let Some((as_, ae, bs, be)) = range.take() {
                let len = (ae - as_ + 1) as u64;
                if o.idx && (o.min_match_len == 0 || len >= o.min_match_len) {
                    let mut m = vec![
                        Frame::Array(vec![Frame::Integer(as_ as i64), Frame::Integer(ae as i64)]),
                        Frame::Array(vec![Frame::Integer(bs as i64), Frame::Integer(be as i64)]),
                    ];
                    if o.with_match_len {
                        m.push(Frame::Integer(len as i64));
                    }
                    matches.push(Frame::Array(m));
                }
            }
        }
    }
    if o.idx {
        return Frame::Map(vec![
            (Frame::bulk("matches"), Frame::Array(matches)),
            (Frame::bulk("len"), Frame::Integer(i64::from(total))),
        ]);
    }
    Frame::Bulk(Bytes::from(result))
}
