//! One chunk of a [`List`](super::List): a run of consecutive elements packed into a single
//! byte buffer, the way a node of Redis's quicklist packs them into a listpack.
//!
//! Each element is stored as an *entry*: its length, its bytes, then its length again with
//! the length's bytes in reverse order, so that the chunk can be walked from either end
//! (`RPOP` reads the last entry without walking the others). A length is a little-endian
//! base-128 number: seven bits per byte, the high bit set on every byte but the last. A
//! 16-byte element takes 18 bytes.
//!
//! The buffer may keep unused room *before* its first entry (`start`), so that pushing at
//! the front is amortized O(1) like pushing at the back; [`Chunk::seal`] gives that room and
//! the spare capacity back once the chunk is no longer at an end of the list.

use std::ops::Range;

use bytes::Bytes;

/// Bytes a length takes in its base-128 form.
fn len_width(n: usize) -> usize {
    let bits = usize::BITS - (n | 1).leading_zeros();
    bits.div_ceil(7) as usize
}

/// Bytes an element of `n` bytes takes as an entry (length, bytes, length again).
pub(super) fn entry_size(n: usize) -> usize {
    2 * len_width(n) + n
}

/// Writes the entry of `data` into `out`, which is exactly [`entry_size`] bytes long.
fn write_entry(out: &mut [u8], data: &[u8]) {
    let w = len_width(data.len());
    let mut n = data.len();
    for i in 0..w {
        let byte = (n & 0x7F) as u8 | if i + 1 < w { 0x80 } else { 0 };
        out[i] = byte;
        // The trailing copy runs backwards: its last byte is the length's first.
        out[out.len() - 1 - i] = byte;
        n >>= 7;
    }
    out[w..w + data.len()].copy_from_slice(data);
}

/// The entry as bytes to append (see [`write_entry`]).
fn entry_bytes(data: &[u8]) -> Vec<u8> {
    let mut v = vec![0; entry_size(data.len())];
    write_entry(&mut v, data);
    v
}

/// The element of the entry that starts at `pos` in `buf`, and where the next entry starts.
fn read_forward(buf: &[u8], pos: usize) -> (Range<usize>, usize) {
    let (mut n, mut shift, mut p) = (0usize, 0, pos);
    loop {
        let b = buf[p];
        n |= ((b & 0x7F) as usize) << shift;
        p += 1;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
    }
    let w = p - pos;
    (p..p + n, p + n + w)
}

/// The element of the entry that ends at `end` in `buf`, and where that entry starts.
fn read_backward(buf: &[u8], end: usize) -> (Range<usize>, usize) {
    let (mut n, mut shift, mut p) = (0usize, 0, end);
    loop {
        p -= 1;
        let b = buf[p];
        n |= ((b & 0x7F) as usize) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            break;
        }
    }
    let w = end - p;
    (p - n..p, p - n - w)
}

/// A run of elements packed in one buffer (see the module's documentation).
#[derive(Clone, Debug, Default)]
pub(super) struct Chunk {
    /// Unused room (`..start`), then the entries (`start..`).
    buf: Vec<u8>,
    /// Where the first entry starts in `buf`.
    start: u32,
    /// How many elements the chunk holds.
    count: u32,
}

impl Chunk {
    /// How many elements the chunk holds.
    pub(super) fn count(&self) -> usize {
        self.count as usize
    }

    /// The bytes of its entries.
    pub(super) fn used(&self) -> usize {
        self.buf.len() - self.start as usize
    }

    /// The bytes its buffer holds from the allocator (for the memory estimate).
    pub(super) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    fn entries(&self) -> &[u8] {
        &self.buf[self.start as usize..]
    }

    /// Appends an element.
    pub(super) fn push_back(&mut self, data: &[u8]) {
        let at = self.buf.len();
        self.buf.resize(at + entry_size(data.len()), 0);
        write_entry(&mut self.buf[at..], data);
        self.count += 1;
    }

    /// Prepends an element, making room before the first entry when there is none left
    /// (doubling it, so that a run of pushes costs O(1) each on average).
    pub(super) fn push_front(&mut self, data: &[u8]) {
        let size = entry_size(data.len());
        if (self.start as usize) < size {
            let used = self.used();
            let room = size.max(used).max(16);
            let mut grown = vec![0; room + used];
            grown[room..].copy_from_slice(self.entries());
            self.buf = grown;
            self.start = room as u32;
        }
        let at = self.start as usize - size;
        write_entry(&mut self.buf[at..at + size], data);
        self.start = at as u32;
        self.count += 1;
    }

    /// Removes and returns the first element.
    pub(super) fn pop_front(&mut self) -> Option<Bytes> {
        if self.count == 0 {
            return None;
        }
        let (el, next) = read_forward(&self.buf, self.start as usize);
        let out = Bytes::copy_from_slice(&self.buf[el]);
        self.start = next as u32;
        self.count -= 1;
        Some(out)
    }

    /// Removes and returns the last element.
    pub(super) fn pop_back(&mut self) -> Option<Bytes> {
        if self.count == 0 {
            return None;
        }
        let (el, entry) = read_backward(&self.buf, self.buf.len());
        let out = Bytes::copy_from_slice(&self.buf[el]);
        self.buf.truncate(entry);
        self.count -= 1;
        Some(out)
    }

    /// Drops the first `n` elements (at most all of them).
    pub(super) fn drop_front(&mut self, n: usize) {
        let mut pos = self.start as usize;
        for _ in 0..n.min(self.count()) {
            pos = read_forward(&self.buf, pos).1;
            self.count -= 1;
        }
        self.start = pos as u32;
    }

    /// Drops the last `n` elements (at most all of them).
    pub(super) fn drop_back(&mut self, n: usize) {
        let mut end = self.buf.len();
        for _ in 0..n.min(self.count()) {
            end = read_backward(&self.buf, end).1;
            self.count -= 1;
        }
        self.buf.truncate(end);
    }

    /// Gives back the room before the first entry and the spare capacity: the chunk is now
    /// inside the list, where nothing is pushed onto it.
    pub(super) fn seal(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start as usize);
            self.start = 0;
        }
        self.buf.shrink_to_fit();
    }

    /// The byte range (in the buffer) of the whole entry of element `i`, walking from the
    /// nearer end of the chunk.
    fn entry_range(&self, i: usize) -> Range<usize> {
        if i < self.count() / 2 {
            let mut pos = self.start as usize;
            for _ in 0..i {
                pos = read_forward(&self.buf, pos).1;
            }
            pos..read_forward(&self.buf, pos).1
        } else {
            let mut end = self.buf.len();
            for _ in i + 1..self.count() {
                end = read_backward(&self.buf, end).1;
            }
            read_backward(&self.buf, end).1..end
        }
    }

    /// Element `i` of the chunk.
    pub(super) fn get(&self, i: usize) -> &[u8] {
        let entry = self.entry_range(i);
        &self.buf[read_forward(&self.buf, entry.start).0]
    }

    /// Replaces element `i` with `data`.
    pub(super) fn set(&mut self, i: usize, data: &[u8]) {
        let entry = self.entry_range(i);
        self.buf.splice(entry, entry_bytes(data));
    }

    /// Inserts `data` so that it becomes element `i` (`i == count` appends).
    pub(super) fn insert(&mut self, i: usize, data: &[u8]) {
        let at = if i == self.count() {
            self.buf.len()
        } else {
            self.entry_range(i).start
        };
        self.buf.splice(at..at, entry_bytes(data));
        self.count += 1;
    }

    /// The index of the first element equal to `target`, if any.
    pub(super) fn position(&self, target: &[u8]) -> Option<usize> {
        self.iter().position(|e| e == target)
    }

    /// Removes up to `limit` elements equal to `target`, the first ones (or the last ones
    /// when `from_back`); returns how many went.
    pub(super) fn remove_matching(
        &mut self,
        target: &[u8],
        limit: usize,
        from_back: bool,
    ) -> usize {
        let mut entries = Vec::with_capacity(self.count());
        let mut pos = self.start as usize;
        while pos < self.buf.len() {
            let (el, next) = read_forward(&self.buf, pos);
            entries.push((pos..next, &self.buf[el] == target));
            pos = next;
        }
        let mut removed = 0;
        let mut doomed = vec![false; entries.len()];
        let order: Box<dyn Iterator<Item = usize>> = if from_back {
            Box::new((0..entries.len()).rev())
        } else {
            Box::new(0..entries.len())
        };
        for i in order {
            if removed == limit {
                break;
            }
            if entries[i].1 {
                doomed[i] = true;
                removed += 1;
            }
        }
        if removed == 0 {
            return 0;
        }
        let mut kept = Vec::with_capacity(self.used());
        for ((range, _), gone) in entries.into_iter().zip(doomed) {
            if !gone {
                kept.extend_from_slice(&self.buf[range]);
            }
        }
        self.buf = kept;
        self.start = 0;
        self.count -= removed as u32;
        removed
    }

    /// Splits off the elements from `i` on into a new chunk.
    pub(super) fn split_off(&mut self, i: usize) -> Chunk {
        self.seal();
        let at = if i == self.count() {
            self.buf.len()
        } else {
            self.entry_range(i).start
        };
        let tail = self.buf.split_off(at);
        let moved = (self.count() - i) as u32;
        self.count -= moved;
        self.buf.shrink_to_fit();
        Chunk {
            buf: tail,
            start: 0,
            count: moved,
        }
    }

    /// Appends every element of `other` after this chunk's.
    pub(super) fn append(&mut self, other: &Chunk) {
        self.buf.extend_from_slice(other.entries());
        self.count += other.count;
    }

    /// The elements, first to last (double-ended).
    pub(super) fn iter(&self) -> Iter<'_> {
        Iter {
            buf: &self.buf,
            front: self.start as usize,
            back: self.buf.len(),
        }
    }
}

/// The elements of a [`Chunk`], from either end.
#[derive(Clone, Debug)]
pub(super) struct Iter<'a> {
    buf: &'a [u8],
    front: usize,
    back: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.front >= self.back {
            return None;
        }
        let (el, next) = read_forward(self.buf, self.front);
        self.front = next;
        Some(&self.buf[el])
    }
}

impl<'a> DoubleEndedIterator for Iter<'a> {
    fn next_back(&mut self) -> Option<&'a [u8]> {
        if self.front >= self.back {
            return None;
        }
        let (el, start) = read_backward(self.buf, self.back);
        self.back = start;
        Some(&self.buf[el])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_take_seven_bits_a_byte() {
        assert_eq!(entry_size(0), 2);
        assert_eq!(entry_size(127), 129);
        assert_eq!(entry_size(128), 132);
        assert_eq!(entry_size(16_384), 16_390);
    }

    #[test]
    fn entries_read_from_both_ends() {
        let mut c = Chunk::default();
        let big = vec![7u8; 300];
        c.push_back(b"b");
        c.push_back(&big);
        c.push_front(b"a");
        c.push_front(b"");
        let fwd: Vec<&[u8]> = c.iter().collect();
        assert_eq!(fwd, vec![&b""[..], b"a", b"b", &big[..]]);
        let back: Vec<&[u8]> = c.iter().rev().collect();
        assert_eq!(back, vec![&big[..], b"b", b"a", b""]);
        assert_eq!(c.get(2), b"b");
        assert_eq!(c.get(3), &big[..]);
        assert_eq!(c.pop_back().unwrap(), big);
        assert_eq!(c.pop_front().unwrap(), &b""[..]);
        assert_eq!(c.count(), 2);
    }

    #[test]
    fn set_insert_remove_split() {
        let mut c = Chunk::default();
        for e in [&b"x"[..], b"y", b"x", b"z", b"x"] {
            c.push_back(e);
        }
        c.set(1, b"yyyy");
        c.insert(0, b"first");
        c.insert(6, b"last");
        assert_eq!(c.remove_matching(b"x", 2, true), 2);
        let all: Vec<&[u8]> = c.iter().collect();
        assert_eq!(all, vec![&b"first"[..], b"x", b"yyyy", b"z", b"last"]);
        let tail = c.split_off(3);
        assert_eq!(c.count(), 3);
        assert_eq!(tail.iter().collect::<Vec<_>>(), vec![&b"z"[..], b"last"]);
        c.append(&tail);
        c.drop_front(1);
        c.drop_back(1);
        assert_eq!(c.iter().collect::<Vec<_>>(), vec![&b"x"[..], b"yyyy", b"z"]);
    }
}
