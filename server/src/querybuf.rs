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
/// How often the clients' cron looks at every client (see [`crate::clients_cron`]).
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
    /// Whether the buffer was given back (until the next read).
    given_back: bool,
    /// The size of the buffer's allocation as far as it is known (Redis's `sdsalloc`): the
    /// room a read made, or the most a request grew it to. The buffer's own capacity counts
    /// only from its first unparsed byte.
    alloc: usize,
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
            given_back: false,
            alloc: IOBUF_LEN,
        }
    }
}

impl QueryBuffer {
    /// Makes room for a read, when little is left.
    pub(crate) fn make_room(&mut self) {
        self.given_back = false;
        if self.buf.capacity() - self.buf.len() < MIN_ROOM {
            self.buf.reserve(self.next_room);
            self.alloc = self.buf.capacity();
        }
    }

    /// Whether the buffer was given back and no read has needed it since.
    pub(crate) fn is_given_back(&self) -> bool {
        self.given_back
    }

    /// Notes how full the buffer got after a read.
    pub(crate) fn after_read(&mut self) {
        self.peak = self.peak.max(self.buf.len());
        self.alloc = self.alloc.max(self.buf.capacity());
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
        let len = self.buf.len();
        (len, self.alloc.max(self.buf.capacity()).saturating_sub(len))
    }

    /// The periodic look (Redis's `clientsCronResizeQueryBuffer`), `idle` being how long the
    /// client has sent nothing. `pending` is how much of a request being read the buffer
    /// must still be able to hold (a big argument under way).
    pub(crate) fn check(&mut self, idle: Duration, pending: usize) -> Checked {
        let (len, free) = self.sizes();
        let size = len + free;
        let mut checked = Checked::Kept;
        if free > WASTE {
            if idle > IDLE {
                self.keep(len);
                if self.alloc == 0 {
                    self.given_back = true;
                    checked = Checked::Freed;
                }
            } else if size > RESIZE_THRESHOLD && size / 2 > self.peak {
                self.keep(len.max(self.peak).max(pending));
            }
        }
        self.peak = self.buf.len().max(pending);
        checked
    }

    /// Replaces the buffer by one of `capacity` holding the same bytes.
    fn keep(&mut self, capacity: usize) {
        self.buf = shrunk(&self.buf, capacity);
        self.alloc = self.buf.capacity();
        self.next_room = IOBUF_LEN;
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
