//! The list value: a deque of [`Chunk`]s, each a run of elements packed into one byte buffer,
//! as Redis 7.0 keeps a list in a quicklist of listpacks.
//!
//! A list of a million 16-byte elements takes about 18 bytes an element this way, where a
//! `VecDeque<Bytes>` took 74 (a 32-byte slot, the capacity rounded up to a power of two, a
//! heap buffer and a shared header per element). Pushes and pops at either end stay O(1)
//! (amortized); reaching element `i` walks the chunks from the nearer end and then the
//! entries of one chunk, O(N) like Redis's `LINDEX`, in steps of a few thousand bytes.
//!
//! Elements are handed in as `&[u8]` and copied in; reads give `&[u8]` views, pops a new
//! `Bytes`.

mod chunk;

use std::collections::VecDeque;
use std::ops::RangeInclusive;

use bytes::Bytes;

use chunk::{entry_size, Chunk};

/// The most bytes of entries a chunk takes before pushes start a new one: Redis's default
/// quicklist node size (`list-max-listpack-size -2`, 8 KiB). An element larger than that has
/// a chunk to itself.
const CHUNK_BYTES: usize = 8 * 1024;

/// A list of byte strings (see the module's documentation).
#[derive(Clone, Debug)]
pub(crate) struct List {
    /// The chunks, first to last; none is empty.
    chunks: VecDeque<Chunk>,
    /// How many elements in all.
    len: usize,
    /// The `list-max-listpack-size` the list was created under, clamped as Redis clamps it
    /// (see [`List::set_options`]): Redis's quicklist keeps its own, and `CONFIG SET`
    /// changes only the lists made afterwards. `DEBUG OBJECT` reports it.
    fill: i16,
    /// The `list-compress-depth` the list was created under (clamped likewise).
    compress_depth: u16,
}

/// What a quicklist starts with before its options are set (Redis's `quicklistCreate`): a
/// list made this way, by `SORT ... STORE`, keeps them.
impl Default for List {
    fn default() -> Self {
        List {
            chunks: VecDeque::new(),
            len: 0,
            fill: -2,
            compress_depth: 0,
        }
    }
}

impl List {
    /// An empty list.
    pub(crate) fn new() -> List {
        List::default()
    }

    /// Sets the node options a new list takes from the configuration
    /// (`list-max-listpack-size`, `list-compress-depth`), clamped as Redis's
    /// `quicklistSetOptions` clamps them: the fill to `-5..=32767`, the depth to `0..=65535`.
    pub(crate) fn set_options(&mut self, fill: i64, compress_depth: i64) {
        self.fill = fill.clamp(-5, i64::from(i16::MAX)) as i16;
        self.compress_depth = compress_depth.clamp(0, i64::from(u16::MAX)) as u16;
    }

    /// The list's `list-max-listpack-size` (see [`List::set_options`]).
    pub(crate) fn fill(&self) -> i64 {
        i64::from(self.fill)
    }

    /// The list's `list-compress-depth` (see [`List::set_options`]).
    pub(crate) fn compress_depth(&self) -> i64 {
        i64::from(self.compress_depth)
    }

    /// How many elements it holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `data` still fits in `chunk` (an empty chunk takes anything).
    fn fits(chunk: &Chunk, data: &[u8]) -> bool {
        chunk.count() == 0 || chunk.used() + entry_size(data.len()) <= CHUNK_BYTES
    }

    /// Appends an element.
    pub(crate) fn push_back(&mut self, data: &[u8]) {
        match self.chunks.back_mut() {
            Some(last) if Self::fits(last, data) => last.push_back(data),
            last => {
                if let Some(last) = last {
                    last.seal();
                }
                let mut c = Chunk::default();
                c.push_back(data);
                self.chunks.push_back(c);
            }
        }
        self.len += 1;
    }

    /// Prepends an element.
    pub(crate) fn push_front(&mut self, data: &[u8]) {
        match self.chunks.front_mut() {
            Some(first) if Self::fits(first, data) => first.push_front(data),
            first => {
                if let Some(first) = first {
                    first.seal();
                }
                let mut c = Chunk::default();
                c.push_back(data);
                self.chunks.push_front(c);
            }
        }
        self.len += 1;
    }

    /// Removes and returns the first element.
    pub(crate) fn pop_front(&mut self) -> Option<Bytes> {
        let first = self.chunks.front_mut()?;
        let out = first.pop_front();
        if first.count() == 0 {
            self.chunks.pop_front();
        }
        self.len -= 1;
        out
    }

    /// Removes and returns the last element.
    pub(crate) fn pop_back(&mut self) -> Option<Bytes> {
        let last = self.chunks.back_mut()?;
        let out = last.pop_back();
        if last.count() == 0 {
            self.chunks.pop_back();
        }
        self.len -= 1;
        out
    }

    /// The chunk holding element `i` (`i < len`) and the element's index in it, walking the
    /// chunks from the nearer end of the list.
    fn locate(&self, i: usize) -> (usize, usize) {
        if i < self.len / 2 {
            let mut rest = i;
            for (k, c) in self.chunks.iter().enumerate() {
                if rest < c.count() {
                    return (k, rest);
                }
                rest -= c.count();
            }
        } else {
            let mut after = self.len - i;
            for (k, c) in self.chunks.iter().enumerate().rev() {
                if after <= c.count() {
                    return (k, c.count() - after);
                }
                after -= c.count();
            }
        }
        unreachable!("index {i} is within the list's {} elements", self.len)
    }

    /// Element `i`, if the list has that many.
    pub(crate) fn get(&self, i: usize) -> Option<&[u8]> {
        if i >= self.len {
            return None;
        }
        let (k, j) = self.locate(i);
        Some(self.chunks[k].get(j))
    }

    /// Replaces element `i` (`i < len`) with `data`.
    pub(crate) fn set(&mut self, i: usize, data: &[u8]) {
        let (k, j) = self.locate(i);
        self.chunks[k].set(j, data);
        self.split_if_large(k);
        self.merge_around(k);
    }

    /// Inserts `data` before (or after) the first element equal to `pivot`; the new length,
    /// or `None` when no element is equal to `pivot`.
    pub(crate) fn insert_at_pivot(
        &mut self,
        pivot: &[u8],
        data: &[u8],
        before: bool,
    ) -> Option<usize> {
        let (k, j) = self
            .chunks
            .iter()
            .enumerate()
            .find_map(|(k, c)| c.position(pivot).map(|j| (k, j)))?;
        self.chunks[k].insert(if before { j } else { j + 1 }, data);
        self.len += 1;
        self.split_if_large(k);
        Some(self.len)
    }

    /// Splits chunk `k` in two when it has grown past [`CHUNK_BYTES`] and holds more than one
    /// element.
    fn split_if_large(&mut self, k: usize) {
        let c = &mut self.chunks[k];
        if c.used() > CHUNK_BYTES && c.count() > 1 {
            let tail = c.split_off(c.count() / 2);
            self.chunks.insert(k + 1, tail);
        }
    }

    /// Merges chunk `k` with a neighbour when the two fit in one chunk, so that removals do
    /// not leave a trail of small chunks; drops it when it is empty.
    fn merge_around(&mut self, k: usize) {
        if self.chunks[k].count() == 0 {
            self.chunks.remove(k);
            return;
        }
        let size = self.chunks[k].used();
        if k + 1 < self.chunks.len() && size + self.chunks[k + 1].used() <= CHUNK_BYTES {
            let next = self.chunks.remove(k + 1).expect("in range");
            self.chunks[k].append(&next);
        }
        if k > 0 && self.chunks[k - 1].used() + self.chunks[k].used() <= CHUNK_BYTES {
            let this = self.chunks.remove(k).expect("in range");
            self.chunks[k - 1].append(&this);
        }
    }

    /// Removes up to `limit` elements equal to `target`, the first ones or, when `from_back`,
    /// the last ones; returns how many went. Walks only as far as it needs to.
    pub(crate) fn remove_matching(
        &mut self,
        target: &[u8],
        limit: usize,
        from_back: bool,
    ) -> usize {
        let mut removed = 0;
        let mut k = if from_back { self.chunks.len() } else { 0 };
        loop {
            if removed == limit {
                break;
            }
            if from_back {
                if k == 0 {
                    break;
                }
                k -= 1;
            } else if k >= self.chunks.len() {
                break;
            }
            let n = self.chunks[k].remove_matching(target, limit - removed, from_back);
            removed += n;
            let before = self.chunks.len();
            if n > 0 {
                self.merge_around(k);
            }
            if !from_back {
                // Merging may have moved chunk k into k - 1 or removed it: step past what
                // was examined.
                k = k + 1 + self.chunks.len() - before;
            }
        }
        self.len -= removed;
        removed
    }

    /// Keeps only the elements in `keep` (indices of the current list), dropping the rest.
    pub(crate) fn retain_range(&mut self, keep: RangeInclusive<usize>) {
        let (start, end) = (*keep.start(), *keep.end());
        self.drop_back(self.len - 1 - end);
        self.drop_front(start);
    }

    /// Drops the first `n` elements.
    fn drop_front(&mut self, mut n: usize) {
        self.len -= n;
        while n > 0 {
            let first = self.chunks.front_mut().expect("n within len");
            if first.count() <= n {
                n -= first.count();
                self.chunks.pop_front();
            } else {
                first.drop_front(n);
                n = 0;
            }
        }
    }

    /// Drops the last `n` elements.
    fn drop_back(&mut self, mut n: usize) {
        self.len -= n;
        while n > 0 {
            let last = self.chunks.back_mut().expect("n within len");
            if last.count() <= n {
                n -= last.count();
                self.chunks.pop_back();
            } else {
                last.drop_back(n);
                n = 0;
            }
        }
    }

    /// Removes every element.
    pub(crate) fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
    }

    /// The elements, first to last (double-ended: `.rev()` walks from the last).
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = &[u8]> + '_ {
        self.chunks.iter().flat_map(Chunk::iter)
    }

    /// The elements at the indices in `range` (within the list), first to last; skipping to
    /// the first of them walks chunks, not elements.
    pub(crate) fn range(&self, range: RangeInclusive<usize>) -> impl Iterator<Item = &[u8]> + '_ {
        let (k, j) = self.locate(*range.start());
        let n = range.end() + 1 - range.start();
        self.chunks.range(k..).flat_map(Chunk::iter).skip(j).take(n)
    }

    /// Copies of the elements at the indices in `range`, for a reply: all copied into one
    /// buffer that each element's `Bytes` is a view of, so that a long range costs one
    /// allocation rather than one per element.
    pub(crate) fn copy_range(&self, range: RangeInclusive<usize>) -> Vec<Bytes> {
        let size: usize = self.range(range.clone()).map(<[u8]>::len).sum();
        let mut buf = Vec::with_capacity(size);
        let mut ends = Vec::with_capacity(range.end() + 1 - range.start());
        for e in self.range(range) {
            buf.extend_from_slice(e);
            ends.push(buf.len());
        }
        let all = Bytes::from(buf);
        let mut start = 0;
        ends.into_iter()
            .map(|end| {
                let e = all.slice(start..end);
                start = end;
                e
            })
            .collect()
    }

    /// Bytes held from the allocator beyond the list's own header, estimated from a few
    /// chunks (see `memory::value_size`): the chunk slots and the chunks' buffers.
    pub(crate) fn estimate_bytes(&self, alloc_size: impl Fn(usize) -> usize) -> usize {
        let n = self.chunks.len();
        let slots = self.chunks.capacity() * std::mem::size_of::<Chunk>();
        // Every push measures the list twice: with fewer than five chunks each is its own
        // sample, else the divisions are by a constant (multiplications once compiled), as
        // in `memory::extrapolate`; the same figure as dividing by `n.min(5)`.
        const SAMPLES: usize = 5;
        let buffer = |k: usize| alloc_size(self.chunks[k].capacity());
        if n < SAMPLES {
            return slots + (0..n).map(buffer).sum::<usize>();
        }
        let sum: usize = (0..SAMPLES).map(|s| buffer(s * n / SAMPLES)).sum();
        slots + sum * n / SAMPLES
    }

    /// Gives back the chunk slots the list keeps from its peak once it is mostly empty.
    pub(crate) fn shrink_if_sparse(&mut self) -> bool {
        use crate::shrink::Shrink;
        self.chunks.shrink_if_sparse()
    }
}

impl<B: AsRef<[u8]>> FromIterator<B> for List {
    fn from_iter<I: IntoIterator<Item = B>>(items: I) -> List {
        let mut l = List::new();
        l.extend(items);
        l
    }
}

impl<B: AsRef<[u8]>> Extend<B> for List {
    fn extend<I: IntoIterator<Item = B>>(&mut self, items: I) {
        for e in items {
            self.push_back(e.as_ref());
        }
    }
}

#[cfg(test)]
mod tests;
