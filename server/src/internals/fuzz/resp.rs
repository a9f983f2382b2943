//! `resp_decode`: the request decoder ([`crate::codec::Decoder`]) against a simple
//! reference decoder written here, whole-buffer and fed in pieces.
//!
//! Asserted for every input:
//! - no panic;
//! - the same commands and the same protocol error (or none) whether the bytes arrive at once,
//!   one byte per read, or in pieces cut where the input's own bytes say, and the same as the
//!   reference decoder below, which follows Redis's `processMultibulkBuffer` and
//!   `processInlineBuffer` rules on the whole buffer;
//! - no parse call allocates more than a small multiple of the bytes it was given plus a
//!   constant (a claimed count or length is never allocated ahead of its bytes).

use crate::codec::{parse_int, split_args, Decoder, Parsed, INLINE_MAX};
use bytes::{Bytes, BytesMut};

/// What a decode of a whole input comes to: the commands, in order (an empty request is an
/// empty list), and the protocol error that ended it, if any.
#[derive(Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Every complete request, in order.
    pub commands: Vec<Vec<Bytes>>,
    /// The error text that ended decoding, if one did.
    pub error: Option<String>,
}

/// `proto-max-bulk-len` for the run: small, so the length check is reachable by the fuzzer.
const MAX_BULK: u64 = 1000;

/// How much one parse call may allocate: this many times the buffered bytes ...
const ALLOC_FACTOR: usize = 64;
/// ... plus this (the decoder reserves up to 1 MiB ahead for a bulk whose bytes are arriving,
/// and a multibulk's argument list starts at up to 1024 slots).
const ALLOC_CONST: usize = (1 << 20) + 128 * 1024;

/// The fuzz target's body.
pub fn check(data: &[u8]) {
    let reference = reference_decode(data, MAX_BULK);
    let whole = decode_in_pieces(data, &[data.len()]);
    assert_eq!(whole, reference, "decoder and reference disagree");
    let bytewise = decode_in_pieces(data, &vec![1; data.len()]);
    assert_eq!(bytewise, reference, "one byte per read changes the verdict");
    // Cut points from the input itself: each byte says how far to the next cut.
    let cuts: Vec<usize> = data.iter().map(|b| (*b as usize % 17) + 1).collect();
    let pieces = decode_in_pieces(data, &cuts);
    assert_eq!(pieces, reference, "reads of {cuts:?} change the verdict");
    // Every two-piece split, for short inputs (longer ones get the byte-wise run above).
    if data.len() <= 64 {
        for at in 0..=data.len() {
            let two = decode_in_pieces(data, &[at, data.len() - at]);
            assert_eq!(two, reference, "a split at byte {at} changes the verdict");
        }
    }
}

/// Feeds `data` to one decoder in reads of the given sizes (what is left after the sizes run
/// out comes in one last read), parsing everything parsable after each read, as the
/// connection loop does.
fn decode_in_pieces(data: &[u8], sizes: &[usize]) -> Verdict {
    let mut decoder = Decoder::default();
    let mut buf = BytesMut::new();
    let mut commands = Vec::new();
    let mut fed = 0;
    let mut reads = sizes.iter().copied().chain(std::iter::once(usize::MAX));
    while fed < data.len() {
        let n = reads.next().unwrap_or(usize::MAX).min(data.len() - fed);
        buf.extend_from_slice(&data[fed..fed + n]);
        fed += n;
        loop {
            let before = buf.len();
            let base = super::alloc_start();
            let parsed = decoder.parse(&mut buf, MAX_BULK);
            let used = super::alloc_peak_since(base);
            assert!(
                used <= ALLOC_FACTOR * before + ALLOC_CONST,
                "one parse of {before} buffered bytes allocated {used} bytes"
            );
            assert!(
                buf.capacity() <= 2 * fed + ALLOC_CONST,
                "the read buffer grew to {} bytes after {fed} bytes received",
                buf.capacity()
            );
            match parsed {
                Ok(Some(Parsed::Command(args))) => commands.push(args),
                Ok(Some(Parsed::Empty)) => commands.push(Vec::new()),
                Ok(None) => break,
                Err(e) => {
                    return Verdict {
                        commands,
                        error: Some(e.0),
                    }
                }
            }
        }
    }
    Verdict {
        commands,
        error: None,
    }
}

/// A deliberately plain decoder of a whole buffer, written from Redis's rules rather than from
/// the incremental decoder: index arithmetic on a slice, no state carried between reads.
pub fn reference_decode(data: &[u8], max_bulk: u64) -> Verdict {
    let mut commands = Vec::new();
    let mut pos = 0;
    let fail = |commands, msg: String| Verdict {
        commands,
        error: Some(format!("Protocol error: {msg}")),
    };
    let crlf_within = |from: usize, limit: usize| -> Option<usize> {
        let end = data.len().min(from + limit + 2);
        (from..end.saturating_sub(1)).find(|i| data[*i] == b'\r' && data[*i + 1] == b'\n')
    };
    while pos < data.len() {
        let rest = data.len() - pos;
        if data[pos] != b'*' {
            // Inline: a line up to '\n' (a '\r' before it is dropped), words split by quotes.
            // Redis finds the newline with strchr: a NUL before it hides it.
            let nl = (pos..data.len().min(pos + INLINE_MAX + 1))
                .find(|i| data[*i] == b'\n' || data[*i] == 0)
                .filter(|i| data[*i] == b'\n');
            let Some(nl) = nl else {
                if rest > INLINE_MAX {
                    return fail(commands, "too big inline request".into());
                }
                break;
            };
            let mut line = &data[pos..nl];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            match split_args(line) {
                Some(args) => commands.push(args),
                None => return fail(commands, "unbalanced quotes in request".into()),
            }
            pos = nl + 1;
            continue;
        }
        let Some(nl) = crlf_within(pos, INLINE_MAX) else {
            if rest > INLINE_MAX {
                return fail(commands, "too big mbulk count string".into());
            }
            break;
        };
        let count = match parse_int(&data[pos + 1..nl]) {
            Some(n) if n <= i32::MAX as i64 => n,
            _ => return fail(commands, "invalid multibulk length".into()),
        };
        let mut at = nl + 2;
        if count <= 0 {
            commands.push(Vec::new());
            pos = at;
            continue;
        }
        let mut args = Vec::new();
        let mut complete = true;
        for _ in 0..count {
            if at >= data.len() {
                complete = false;
                break;
            }
            if data[at] != b'$' {
                return fail(
                    commands,
                    format!("expected '$', got '{}'", data[at] as char),
                );
            }
            let Some(nl) = crlf_within(at, INLINE_MAX) else {
                if data.len() - at > INLINE_MAX {
                    return fail(commands, "too big bulk count string".into());
                }
                complete = false;
                break;
            };
            let len = match parse_int(&data[at + 1..nl]) {
                Some(n) if n >= 0 && n as u64 <= max_bulk => n as usize,
                _ => return fail(commands, "invalid bulk length".into()),
            };
            // The payload and the two bytes after it (not checked to be CRLF, as in Redis).
            if data.len() < nl + 2 + len + 2 {
                complete = false;
                break;
            }
            args.push(Bytes::copy_from_slice(&data[nl + 2..nl + 2 + len]));
            at = nl + 2 + len + 2;
        }
        if !complete {
            break;
        }
        commands.push(args);
        pos = at;
    }
    Verdict {
        commands,
        error: None,
    }
}
