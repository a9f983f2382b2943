//! A connection's query buffer (what the client sent that is not yet a complete command):
//! how much room it is given, and when it is given back, as Redis 7.0 sizes its `querybuf`.
//!
//! - A read gets 16 KiB of room (Redis's `PROTO_IOBUF_LEN`), or, just after an argument of
//!   32 KiB or more, room for one as big again (Redis sizes its buffer for the next big
//!   argument the same way).
//! - Every so often the buffer is looked at (Redis's `clientsCronResizeQueryBuffer`): one that
//!   wastes more than 4 KiB is given back entirely when the client has been idle more than
//!   two seconds, and otherwise cut down to the most it held since the last look when it is
//!   over 32 KiB and more than twice that peak.
//!
//! So a thousand idle connections cost no buffers, and one big request does not keep its
//! buffer for the life of the connection. `CLIENT LIST` shows the result (`qbuf`, `qbuf-free`).

use std::time::Duration;

use bytes::BytesMut;

/// The room a read gets (Redis's `PROTO_IOBUF_LEN`).
pub(crate) const IOBUF_LEN: usize = 16 * 1024;
/// The size above which a buffer may be cut down, and from which an argument counts as big
/// (Redis's `PROTO_RESIZE_THRESHOLD` and `PROTO_MBULK_BIG_ARG`).
pub(crate) const RESIZE_THRESHOLD: usize = 32 * 1024;
/// How long a client must have sent nothing before its buffer is given back.
pub(crate) const IDLE: Duration = Duration::from_secs(2);
/// How often a buffer over [`RESIZE_THRESHOLD`] is looked at while the client is busy.
pub(crate) const BUSY_CHECK: Duration = Duration::from_millis(250);
/// Room below which a read first makes more.
const MIN_ROOM: usize = 1024;
/// Free room worth giving back (Redis's 4 KiB).
const WASTE: usize = 4 * 1024;

/// The query buffer and what its sizing remembers.
#[derive(Debug)]
pub(crate) struct QueryBuffer {
    /// The bytes read and not yet parsed.
    pub(crate) buf: BytesMut,
    /// The most the buffer held since the last look.
    peak: usize,
    /// The room the next read that needs room gets.
    next_room: usize,
}

/// What [`QueryBuffer::check`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checked {
    /// The buffer was given back: nothing to look at until the client sends again.
    Freed,
    /// The buffer is kept (perhaps cut down).
    Kept,
}

impl Default for QueryBuffer {
    fn default() -> Self {
        QueryBuffer {
            buf: BytesMut::with_capacity(IOBUF_LEN),
            peak: 0,
            next_room: IOBUF_LEN,
        }
    }
}

impl QueryBuffer {
    /// Makes room for a read, when little is left.
    pub(crate) fn make_room(&mut self) {
        if self.buf.capacity() - self.buf.len() < MIN_ROOM {
            self.buf.reserve(self.next_room);
        }
    }

    /// Once every request read has been parsed: an empty buffer takes back the room its
    /// parsed bytes used (in place when nothing else holds them), as Redis moves what is left
    /// of its buffer to the front, so that the room shown and the next read's are the whole
    /// buffer. A buffer given back stays empty.
    pub(crate) fn settle(&mut self) {
        let cap = self.buf.capacity();
        if self.buf.is_empty() && cap > 0 && cap < self.next_room {
            self.buf.reserve(self.next_room);
        }
    }

    /// Notes how full the buffer got after a read.
    pub(crate) fn after_read(&mut self) {
        self.peak = self.peak.max(self.buf.len());
    }

    /// Notes the largest argument of a command just parsed: after a big one, the next read
    /// that needs room gets as much again.
    pub(crate) fn saw_argument(&mut self, len: usize) {
        if len >= RESIZE_THRESHOLD {
            self.next_room = self.next_room.max(len + 2);
            self.peak = self.peak.max(len + 2);
        }
    }

    /// The bytes held and the free room, as `CLIENT LIST` shows them (`qbuf`, `qbuf-free`).
    pub(crate) fn sizes(&self) -> (usize, usize) {
        (self.buf.len(), self.buf.capacity() - self.buf.len())
    }

    /// Whether the buffer is big enough that a busy client's should be looked at soon.
    pub(crate) fn is_big(&self) -> bool {
        self.buf.capacity() > RESIZE_THRESHOLD
    }

    /// The periodic look (Redis's `clientsCronResizeQueryBuffer`), `idle` being how long the
    /// client has sent nothing. `pending` is how much of a request being read the buffer
    /// must still be able to hold (a big argument under way).
    pub(crate) fn check(&mut self, idle: Duration, pending: usize) -> Checked {
        let (len, free) = self.sizes();
        let mut checked = Checked::Kept;
        if free > WASTE {
            if idle > IDLE {
                self.buf = shrunk(&self.buf, len);
                self.next_room = IOBUF_LEN;
                if self.buf.capacity() == 0 {
                    checked = Checked::Freed;
                }
            } else if self.buf.capacity() > RESIZE_THRESHOLD && self.buf.capacity() / 2 > self.peak
            {
                let keep = len.max(self.peak).max(pending);
                self.buf = shrunk(&self.buf, keep);
                self.next_room = IOBUF_LEN;
            }
        }
        self.peak = self.buf.len().max(pending);
        checked
    }
}

/// A copy of `buf`'s bytes in a buffer of `capacity` (at least their length); an empty
/// buffer with no allocation when both are zero.
fn shrunk(buf: &BytesMut, capacity: usize) -> BytesMut {
    if capacity == 0 && buf.is_empty() {
        return BytesMut::new();
    }
    let mut out = BytesMut::with_capacity(capacity.max(buf.len()));
    out.extend_from_slice(buf);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_buffer_is_given_back_and_a_busy_one_kept() {
        let mut q = QueryBuffer::default();
        q.make_room();
        assert_eq!(q.sizes(), (0, IOBUF_LEN));
        assert_eq!(q.check(Duration::from_millis(500), 0), Checked::Kept);
        assert_eq!(q.sizes(), (0, IOBUF_LEN));
        assert_eq!(q.check(Duration::from_secs(3), 0), Checked::Freed);
        assert_eq!(q.sizes(), (0, 0));
        // Bytes of a request under way are never dropped.
        q.buf.extend_from_slice(b"*1\r\n$4\r\nPI");
        q.make_room();
        assert_eq!(q.check(Duration::from_secs(3), 0), Checked::Kept);
        assert_eq!(&q.buf[..], b"*1\r\n$4\r\nPI");
    }

    #[test]
    fn a_big_argument_leaves_room_for_another_until_the_peak_drops() {
        let mut q = QueryBuffer::default();
        q.saw_argument(400_000);
        q.buf.clear();
        q.buf = BytesMut::new();
        q.make_room();
        let (_, room) = q.sizes();
        assert!(room >= 400_002, "{room}");
        // While the big request is the recent peak the buffer stays.
        q.check(Duration::ZERO, 0);
        assert!(q.sizes().1 >= 400_002);
        // A look later, with only small requests since, cuts it to what they needed.
        q.buf.extend_from_slice(&[b'x'; 100]);
        q.after_read();
        let _ = q.buf.split_to(100);
        q.check(Duration::ZERO, 0);
        let (len, room) = q.sizes();
        assert!(len + room < RESIZE_THRESHOLD, "{len} + {room}");
        assert!(len + room >= 100);
    }
}
