//! The chunked list against a `VecDeque` doing the same operations.

use std::collections::VecDeque;

use super::*;

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// An element of a few kinds of length: empty, short, one needing a two-byte length, one
/// larger than a chunk.
fn element(rng: &mut Rng) -> Vec<u8> {
    let len = match rng.below(10) {
        0 => 0,
        1 => 200,
        2 if rng.below(20) == 0 => CHUNK_BYTES + 100,
        _ => rng.below(4),
    };
    vec![b'a' + rng.below(3) as u8; len]
}

fn same(l: &List, m: &VecDeque<Vec<u8>>) {
    assert_eq!(l.len(), m.len());
    assert!(l.iter().eq(m.iter().map(|v| &v[..])));
    assert!(l.iter().rev().eq(m.iter().rev().map(|v| &v[..])));
    assert!(l.chunks.iter().all(|c| c.count() > 0), "no empty chunk");
    assert_eq!(l.chunks.iter().map(|c| c.count()).sum::<usize>(), l.len());
}

#[test]
fn behaves_like_a_deque() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut l = List::new();
    let mut m: VecDeque<Vec<u8>> = VecDeque::new();
    for step in 0..40_000 {
        match rng.below(12) {
            0..=2 => {
                let e = element(&mut rng);
                l.push_back(&e);
                m.push_back(e);
            }
            3..=5 => {
                let e = element(&mut rng);
                l.push_front(&e);
                m.push_front(e);
            }
            6 => assert_eq!(l.pop_front().map(|b| b.to_vec()), m.pop_front()),
            7 => assert_eq!(l.pop_back().map(|b| b.to_vec()), m.pop_back()),
            8 if !m.is_empty() => {
                let i = rng.below(m.len());
                assert_eq!(l.get(i), Some(&m[i][..]));
                let e = element(&mut rng);
                l.set(i, &e);
                m[i] = e;
            }
            9 => {
                let pivot = element(&mut rng);
                let e = element(&mut rng);
                let before = rng.below(2) == 0;
                let want = m.iter().position(|v| *v == pivot).map(|p| {
                    m.insert(if before { p } else { p + 1 }, e.clone());
                    m.len()
                });
                assert_eq!(l.insert_at_pivot(&pivot, &e, before), want);
            }
            10 => {
                let target = element(&mut rng);
                let limit = rng.below(4).max(1);
                let from_back = rng.below(2) == 0;
                let mut removed = 0;
                let mut kept: Vec<Vec<u8>> = Vec::new();
                let order: Vec<Vec<u8>> = if from_back {
                    m.iter().rev().cloned().collect()
                } else {
                    m.iter().cloned().collect()
                };
                for v in order {
                    if removed < limit && v == target {
                        removed += 1;
                    } else {
                        kept.push(v);
                    }
                }
                if from_back {
                    kept.reverse();
                }
                m = kept.into();
                assert_eq!(l.remove_matching(&target, limit, from_back), removed);
            }
            11 if m.len() > 2 && rng.below(10) == 0 => {
                let a = rng.below(m.len());
                let b = a + rng.below(m.len() - a);
                l.retain_range(a..=b);
                m = m.range(a..=b).cloned().collect();
            }
            _ => {}
        }
        if step % 97 == 0 {
            same(&l, &m);
            if !m.is_empty() {
                let a = rng.below(m.len());
                let b = a + rng.below(m.len() - a);
                assert!(l.range(a..=b).eq(m.range(a..=b).map(|v| &v[..])));
                let copies = l.copy_range(a..=b);
                assert!(copies
                    .iter()
                    .map(|b| &b[..])
                    .eq(m.range(a..=b).map(|v| &v[..])));
            }
        }
    }
    same(&l, &m);
}

#[test]
fn a_million_short_elements_take_about_their_bytes() {
    let mut l = List::new();
    for _ in 0..100_000 {
        l.push_back(&[b'v'; 16]);
    }
    let bytes = l.estimate_bytes(|n| n);
    assert!(bytes < 100_000 * 19, "{bytes} bytes for 100k elements");
    l.clear();
    assert!(l.is_empty() && l.get(0).is_none());
}
