//! The replication backlog: the last bytes of the replication stream, kept so that a replica
//! that lost its link for a moment can get just what it missed (`+CONTINUE`) instead of a
//! whole new snapshot.
//!
//! Bytes are numbered as Redis numbers them: the stream's first byte has offset 1, and
//! `master_repl_offset` is the offset of the last byte sent. A replica that has applied up to
//! offset `n` asks for `n + 1`.

use std::collections::VecDeque;

use bytes::Bytes;

/// A bounded window onto the end of the replication stream.
#[derive(Debug)]
pub(crate) struct Backlog {
    /// The window, as the chunks the stream was fed in (cheap to append and to drop whole).
    chunks: VecDeque<Bytes>,
    /// Bytes held (`repl_backlog_histlen`).
    histlen: u64,
    /// Most bytes to hold (`repl-backlog-size`).
    size: u64,
    /// Offset of the first byte held (`repl_backlog_first_byte_offset`).
    first_byte_offset: u64,
}

impl Backlog {
    /// An empty backlog of `size` bytes whose first byte will be the one after `offset`.
    pub(crate) fn new(size: u64, offset: u64) -> Backlog {
        Backlog {
            chunks: VecDeque::new(),
            histlen: 0,
            size: size.max(1),
            first_byte_offset: offset + 1,
        }
    }

    /// `repl_backlog_size`.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// `repl_backlog_histlen`.
    pub(crate) fn histlen(&self) -> u64 {
        self.histlen
    }

    /// `repl_backlog_first_byte_offset`.
    pub(crate) fn first_byte_offset(&self) -> u64 {
        self.first_byte_offset
    }

    /// Changes the size (`CONFIG SET repl-backlog-size`), dropping the oldest bytes if needed.
    pub(crate) fn resize(&mut self, size: u64) {
        self.size = size.max(1);
        self.trim();
    }

    /// Appends the next bytes of the stream.
    pub(crate) fn push(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        self.histlen += chunk.len() as u64;
        self.chunks.push_back(chunk);
        self.trim();
    }

    fn trim(&mut self) {
        while self.histlen > self.size {
            let excess = self.histlen - self.size;
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let drop = excess.min(front.len() as u64);
            if drop == front.len() as u64 {
                self.chunks.pop_front();
            } else {
                *front = front.slice(drop as usize..);
            }
            self.histlen -= drop;
            self.first_byte_offset += drop;
        }
    }

    /// Every byte from `offset` to the end of the stream, or `None` when `offset` is no longer
    /// (or not yet) in the window. `offset` one past the end gives an empty list: nothing was
    /// missed.
    pub(crate) fn since(&self, offset: u64) -> Option<Vec<Bytes>> {
        let end = self.first_byte_offset + self.histlen;
        if offset < self.first_byte_offset || offset > end {
            return None;
        }
        let mut skip = offset - self.first_byte_offset;
        let mut out = Vec::new();
        for c in &self.chunks {
            let len = c.len() as u64;
            if skip >= len {
                skip -= len;
                continue;
            }
            out.push(c.slice(skip as usize..));
            skip = 0;
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(parts: Vec<Bytes>) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn keeps_the_last_size_bytes_and_numbers_them_from_one() {
        let mut b = Backlog::new(8, 0);
        b.push(Bytes::from("abcde"));
        assert_eq!(b.first_byte_offset(), 1);
        assert_eq!(joined(b.since(3).unwrap()), b"cde");
        assert_eq!(joined(b.since(6).unwrap()), b"");
        assert!(b.since(7).is_none(), "offset beyond the stream");
        b.push(Bytes::from("fghij"));
        assert_eq!(b.histlen(), 8);
        assert_eq!(b.first_byte_offset(), 3);
        assert_eq!(joined(b.since(3).unwrap()), b"cdefghij");
        assert!(b.since(2).is_none(), "byte 2 fell out of the window");
        b.resize(2);
        assert_eq!(joined(b.since(9).unwrap()), b"ij");
    }

    #[test]
    fn starts_after_the_offset_it_was_created_at() {
        let mut b = Backlog::new(100, 41);
        b.push(Bytes::from("xy"));
        assert_eq!(joined(b.since(42).unwrap()), b"xy");
        assert!(b.since(41).is_none());
    }
}
