//! `hll_decode`: the HyperLogLog representation on values a client chose. A sketch is a
//! string anyone can `SET` to any bytes, and Redis had out-of-bounds writes here
//! (CVE-2019-10192/10193, CVE-2025-32023), so every function that reads or edits a sketch
//! gets arbitrary values: mostly behind a valid header (else they are refused before any
//! walk), with sparse bodies of arbitrary opcodes and dense bodies of arbitrary registers.
//!
//! Invariants checked:
//! - nothing panics, and a value that passed the header check still passes it after any edit
//!   (a sparse value never grows more than 3 bytes a step, a dense one keeps its length);
//! - on a well-formed sparse value (its runs cover exactly 16384 registers), raising a
//!   register agrees with doing the same on its dense form, register for register, and leaves
//!   a well-formed value; both forms count the same;
//! - merged registers stay within 0..=63;
//! - the same value through the commands of an in-process server (`SET`, `PFADD`, `PFCOUNT`,
//!   `PFMERGE`, `PFDEBUG`) leaves the server answering.

use arbitrary::{Arbitrary, Unstructured};

use crate::hll::{self, sparse, Encoding, DENSE_LEN, HEADER, REGISTERS};
use crate::Frame;

/// One operation on the value.
#[derive(Arbitrary, Debug)]
enum Op {
    Add(Vec<u8>),
    Raise { index: u16, count: u8 },
    Count,
    Merge,
    ToDense,
    Decode,
}

/// The value under test, and what to do with it. Read from the input's bytes as laid out in
/// [`Input::parse`], so that a seed can be written by hand from a real sketch.
#[derive(Debug)]
struct Input {
    /// 0: the body raw; 1: behind a sparse header; 2: behind a dense header, padded or cut to
    /// the dense length; 3: the whole value raw.
    shape: u8,
    /// `hll-sparse-max-bytes`, picked among a few.
    limit: u8,
    header_tail: [u8; 11],
    body: Vec<u8>,
    ops: Vec<Op>,
}

impl Input {
    /// `shape`, `limit`, the body's length (2 bytes, little-endian), the last 11 bytes of the
    /// header, the body, then the operations (`arbitrary`'s encoding of [`Op`]s).
    fn parse(data: &[u8]) -> Option<Input> {
        let (&[shape, limit, l0, l1], rest) = data.split_first_chunk::<4>()?;
        let (tail, rest) = rest.split_first_chunk::<11>()?;
        let len = usize::from(u16::from_le_bytes([l0, l1])).min(rest.len());
        let (body, rest) = rest.split_at(len);
        let ops = Vec::<Op>::arbitrary_take_rest(Unstructured::new(rest)).ok()?;
        Some(Input {
            shape,
            limit,
            header_tail: *tail,
            body: body.to_vec(),
            ops,
        })
    }
}

fn value_of(input: &Input) -> Vec<u8> {
    let mut v = b"HYLL".to_vec();
    match input.shape % 4 {
        0 | 3 => return input.body.clone(),
        1 => v.push(1),
        _ => v.push(0),
    }
    v.extend_from_slice(&input.header_tail);
    v.extend_from_slice(&input.body);
    if input.shape % 4 == 2 {
        v.resize(DENSE_LEN, 0);
    }
    v
}

/// Whether a sparse value's runs cover exactly the registers.
fn well_formed(v: &[u8]) -> bool {
    sparse::walk(&v[HEADER..], |_, _| {}).is_ok()
}

/// `hll_decode`: see the module's documentation.
pub fn check(data: &[u8]) {
    let Some(input) = Input::parse(data) else {
        return;
    };
    let limit = [0u64, 17, 64, 300, 3000][usize::from(input.limit % 5)];
    let mut v = value_of(&input);
    let original = v.clone();
    if hll::encoding_of(&v).is_some() {
        for op in input.ops.iter().take(64) {
            step(&mut v, op, limit);
        }
    }
    through_the_server(&original, &input.ops, limit);
}

fn step(v: &mut Vec<u8>, op: &Op, limit: u64) {
    let enc = hll::encoding_of(v).expect("checked before every step");
    let before = v.len();
    match op {
        Op::Add(element) => {
            let _ = hll::add(v, element, limit);
        }
        Op::Raise { index, count } => {
            let (index, count) = (usize::from(*index) % REGISTERS, count % 64);
            if enc == Encoding::Sparse && well_formed(v) {
                let mut d = v.clone();
                hll::to_dense(&mut d).expect("a well-formed sparse value converts");
                let want = hll::dense::raise(&mut d[HEADER..], index, count);
                let got = hll::set_register(v, index, count, limit);
                assert_eq!(got, Ok(want), "sparse and dense disagree on the change");
                if hll::encoding_of(v) == Some(Encoding::Sparse) {
                    assert!(well_formed(v), "a sparse edit broke the runs");
                }
                let mut now = v.clone();
                hll::to_dense(&mut now).expect("still converts");
                assert_eq!(hll::registers(&now), hll::registers(&d));
                assert_eq!(hll::count(v), hll::count(&d));
            } else {
                let _ = hll::set_register(v, index, count, limit);
            }
        }
        Op::Count => {
            let c = hll::count(v);
            if enc == Encoding::Dense || well_formed(v) {
                assert!(c.is_ok());
            }
        }
        Op::Merge => {
            let mut max = vec![0u8; REGISTERS];
            if hll::merge_into(&mut max, v).is_ok() {
                assert!(max.iter().all(|m| *m < 64));
                hll::count_registers(&max);
            }
        }
        Op::ToDense => {
            let mut d = v.clone();
            if hll::to_dense(&mut d).is_ok() {
                assert_eq!(d.len(), DENSE_LEN);
                assert_eq!(hll::encoding_of(&d), Some(Encoding::Dense));
            }
        }
        Op::Decode => {
            if enc == Encoding::Sparse {
                let text = sparse::decode(&v[HEADER..]);
                assert!(text.len() <= 12 * v.len());
            }
        }
    }
    let enc_after = hll::encoding_of(v).expect("an edit broke the header");
    match enc_after {
        Encoding::Dense => assert_eq!(v.len(), DENSE_LEN),
        Encoding::Sparse => assert!(v.len() <= before + 3, "{before} -> {}", v.len()),
    }
}

thread_local! {
    /// One in-process server for every input of this thread (emptied before each): starting
    /// a server per input would spend most of the fuzzing time on starts.
    static SERVER: std::cell::RefCell<Option<crate::ServerHandle>> = const { std::cell::RefCell::new(None) };
}

/// The value through the commands, then a health check.
fn through_the_server(value: &[u8], ops: &[Op], limit: u64) {
    SERVER.with(|slot| {
        let mut slot = slot.borrow_mut();
        let server = slot.get_or_insert_with(|| super::rt::block_on(super::rt::server()));
        run_commands(server, value, ops, limit);
    });
}

fn run_commands(server: &crate::ServerHandle, value: &[u8], ops: &[Op], limit: u64) {
    super::rt::block_on(async {
        let mut c = server.client();
        assert_eq!(c.cmd(["FLUSHALL"]).await, Frame::ok());
        let limit = limit.to_string();
        assert_eq!(
            c.cmd(["CONFIG", "SET", "hll-sparse-max-bytes", &limit])
                .await,
            Frame::ok()
        );
        let v = bytes::Bytes::copy_from_slice(value);
        assert_eq!(
            c.cmd([bytes::Bytes::from_static(b"SET"), "k".into(), v])
                .await,
            Frame::ok()
        );
        c.cmd(["PFADD", "other", "a", "b"]).await;
        for op in ops.iter().take(16) {
            let args: Vec<bytes::Bytes> = match op {
                Op::Add(e) => vec!["PFADD".into(), "k".into(), e.clone().into()],
                Op::Raise { .. } => vec!["PFMERGE".into(), "other".into(), "k".into()],
                Op::Count => vec!["PFCOUNT".into(), "k".into()],
                Op::Merge => vec!["PFCOUNT".into(), "k".into(), "other".into()],
                Op::ToDense => vec!["PFDEBUG".into(), "GETREG".into(), "k".into()],
                Op::Decode => vec!["PFDEBUG".into(), "DECODE".into(), "k".into()],
            };
            c.cmd(args).await;
        }
        c.cmd(["GET", "k"]).await;
        assert_eq!(c.cmd(["PING"]).await, Frame::Simple("PONG".into()));
    });
}
