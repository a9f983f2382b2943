//! The request side of RESP: turning bytes read from a socket into commands.
//!
//! Clients send either a RESP array of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`, what every
//! client library sends) or an inline command (`GET k\r\n`, what a person types into telnet).
//! [`Decoder::parse`] takes one complete command off the front of the read buffer, or says that
//! more bytes are needed. Bulk payloads are split off the buffer without copying.
//!
//! The limits are Redis's: a bulk longer than `proto-max-bulk-len` or an array count over
//! `i32::MAX` is a protocol error, which the connection reports and then closes. Nothing is
//! allocated for a claimed length before its bytes arrive.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// An inline command or a multibulk count line may not exceed this many bytes (Redis's
/// `PROTO_INLINE_MAX_SIZE`).
pub(crate) const INLINE_MAX: usize = 64 * 1024;

/// What went wrong while parsing a request. The text is Redis's, to be sent as `-ERR <text>`
/// before the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProtocolError(pub String);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn err<T>(msg: &str) -> Result<T, ProtocolError> {
    Err(ProtocolError(format!("Protocol error: {msg}")))
}

/// The outcome of one parse attempt.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// A complete command: its arguments, the name first.
    Command(Vec<Bytes>),
    /// A complete but empty request (a blank inline line or `*0`); nothing to run.
    Empty,
}

/// Incremental parser state: remembers how far a partially received multibulk request got so
/// that a large request arriving in many reads is not re-scanned from the start each time.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    /// Arguments of the multibulk request being read, when one is in progress.
    pending: Option<Pending>,
}

#[derive(Debug)]
struct Pending {
    remaining: usize,
    args: Vec<Bytes>,
}

impl Decoder {
    /// Takes one command off the front of `buf`. Returns `Ok(None)` when more bytes are needed.
    pub(crate) fn parse(
        &mut self,
        buf: &mut BytesMut,
        max_bulk_len: u64,
    ) -> Result<Option<Parsed>, ProtocolError> {
        if self.pending.is_none() {
            if buf.is_empty() {
                return Ok(None);
            }
            if buf[0] != b'*' {
                return parse_inline(buf);
            }
            if let Some(args) = parse_whole(buf, max_bulk_len) {
                return Ok(Some(Parsed::Command(args)));
            }
            // The count line is read in place: splitting it off the buffer would cost a
            // reference count taken and dropped for every request.
            let Some(nl) = find_crlf(buf, INLINE_MAX) else {
                if buf.len() > INLINE_MAX {
                    return err("too big mbulk count string");
                }
                return Ok(None);
            };
            let count = parse_int(&buf[1..nl]).filter(|n| *n <= i32::MAX as i64);
            buf.advance(nl + 2);
            let Some(count) = count else {
                return err("invalid multibulk length");
            };
            if count <= 0 {
                return Ok(Some(Parsed::Empty));
            }
            self.pending = Some(Pending {
                remaining: count as usize,
                // Never trust the claimed count for the allocation.
                args: Vec::with_capacity((count as usize).min(1024)),
            });
        }
        let pending = self.pending.as_mut().expect("set above");
        while pending.remaining > 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            if buf[0] != b'$' {
                let got = buf[0] as char;
                self.pending = None;
                return Err(ProtocolError(format!(
                    "Protocol error: expected '$', got '{got}'"
                )));
            }
            let Some(nl) = find_crlf(buf, INLINE_MAX) else {
                if buf.len() > INLINE_MAX {
                    self.pending = None;
                    return err("too big bulk count string");
                }
                return Ok(None);
            };
            let len = parse_int(&buf[1..nl]).filter(|n| *n >= 0 && (*n as u64) <= max_bulk_len);
            let Some(len) = len else {
                self.pending = None;
                return err("invalid bulk length");
            };
            let len = len as usize;
            if buf.len() < nl + 2 + len + 2 {
                // Reserve room for the rest of this argument, but only as much as is sensible:
                // a huge claimed length grows the buffer as bytes actually arrive.
                let want = (nl + 2 + len + 2 - buf.len()).min(1 << 20);
                buf.reserve(want);
                return Ok(None);
            }
            buf.advance(nl + 2);
            let arg = buf.split_to(len).freeze();
            buf.advance(2);
            pending.args.push(arg);
            pending.remaining -= 1;
        }
        let args = self.pending.take().expect("set above").args;
        Ok(Some(Parsed::Command(args)))
    }
}

/// Commands of at most this many arguments take [`parse_whole`]'s fast path.
const WHOLE_MAX_ARGS: usize = 32;

/// The fast path of [`Decoder::parse`], for the usual case: a multibulk command (of at most
/// [`WHOLE_MAX_ARGS`] arguments) that is in `buf` whole and well formed. Its bounds are
/// found first, reading `buf` without changing it; then the command is split off in one
/// piece and each argument is a slice of that piece. The step-by-step path split every line
/// and argument off the buffer on its own, five cuts of the buffer for an `INCR`.
///
/// Returns `None`, with `buf` untouched, for anything else (a command not all there yet,
/// too many arguments, any malformed count or length): the step-by-step path then parses
/// it, and says what is wrong with it, as before. The checks are that path's, in its order,
/// so that a command this path takes is one it would have taken too, with the same
/// arguments.
fn parse_whole(buf: &mut BytesMut, max_bulk_len: u64) -> Option<Vec<Bytes>> {
    let b = &buf[..];
    let nl = find_crlf(b, INLINE_MAX)?;
    let count = parse_int(&b[1..nl])?;
    if count <= 0 || count as usize > WHOLE_MAX_ARGS {
        return None;
    }
    let count = count as usize;
    let mut spans = [(0usize, 0usize); WHOLE_MAX_ARGS];
    let mut pos = nl + 2;
    for span in spans.iter_mut().take(count) {
        let rest = b.get(pos..)?;
        if rest.first() != Some(&b'$') {
            return None;
        }
        let nl = find_crlf(rest, INLINE_MAX)?;
        let len = parse_int(&rest[1..nl]).filter(|n| *n >= 0 && (*n as u64) <= max_bulk_len)?;
        let start = pos + nl + 2;
        let end = start.checked_add(len as usize)?;
        // The two bytes after the payload are skipped unread, as the step-by-step path does.
        if b.len() < end.checked_add(2)? {
            return None;
        }
        *span = (start, end);
        pos = end + 2;
    }
    let whole = buf.split_to(pos).freeze();
    Some(
        spans[..count]
            .iter()
            .map(|&(start, end)| whole.slice(start..end))
            .collect(),
    )
}

/// Finds `\r\n` within the first `limit` bytes (plus the terminator itself).
fn find_crlf(buf: &[u8], limit: usize) -> Option<usize> {
    let hay = &buf[..buf.len().min(limit + 2)];
    let mut from = 0;
    // Looking for the `\r` alone is a tighter loop than comparing every pair of bytes.
    while let Some(i) = hay[from..].iter().position(|&b| b == b'\r') {
        let at = from + i;
        if hay.get(at + 1) == Some(&b'\n') {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The first position of either byte.
fn memchr_either(a: u8, b: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|c| *c == a || *c == b)
}

/// Parses a signed decimal integer the way Redis's `string2ll` does (no spaces, no `+`).
pub(crate) fn parse_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || (digits[0] == b'0' && digits.len() > 1) {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = (c - b'0') as i64;
        v = if neg {
            v.checked_mul(10)?.checked_sub(d)?
        } else {
            v.checked_mul(10)?.checked_add(d)?
        };
    }
    if neg && v == 0 {
        return None;
    }
    Some(v)
}

/// Parses an inline command: space-separated words with Redis's quoting rules.
///
/// Redis looks for the newline with C's `strchr`, which stops at a NUL byte: a NUL before the
/// newline hides the newline, so the request never completes and the connection waits until
/// the buffer passes [`INLINE_MAX`], then gets `too big inline request`. Same here, byte for
/// byte.
fn parse_inline(buf: &mut BytesMut) -> Result<Option<Parsed>, ProtocolError> {
    let window = &buf[..buf.len().min(INLINE_MAX + 1)];
    let newline = memchr_either(b'\n', 0, window).filter(|i| window[*i] == b'\n');
    let Some(nl) = newline else {
        if buf.len() > INLINE_MAX {
            return err("too big inline request");
        }
        return Ok(None);
    };
    let mut line = buf.split_to(nl + 1);
    line.truncate(nl);
    if line.last() == Some(&b'\r') {
        line.truncate(nl - 1);
    }
    match split_args(&line) {
        Some(args) if args.is_empty() => Ok(Some(Parsed::Empty)),
        Some(args) => Ok(Some(Parsed::Command(args))),
        None => err("unbalanced quotes in request"),
    }
}

/// C's `isspace` in the "C" locale, which `sdssplitargs` uses: unlike
/// [`u8::is_ascii_whitespace`] it includes the vertical tab.
fn c_isspace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// Splits a line into arguments like Redis's `sdssplitargs`: whitespace separates words,
/// `"..."` supports `\n \r \t \b \a \\ \" \xHH` escapes, `'...'` supports only `\'`.
/// Returns `None` on unbalanced quotes (or a closing quote not followed by a space).
///
/// Redis splits a C string, so a NUL byte ends the line: what follows it is ignored. (The
/// request decoder never passes a NUL here, as Redis never completes such a line; but here a
/// NUL once ended a word without being skipped as a separator, and the loop then added empty
/// words forever: three bytes, `"\0\r\n"`, made the server allocate until it was killed.)
pub(crate) fn split_args(line: &[u8]) -> Option<Vec<Bytes>> {
    let line = match line.iter().position(|c| *c == 0) {
        Some(nul) => &line[..nul],
        None => line,
    };
    let mut args = Vec::new();
    let mut i = 0;
    let n = line.len();
    loop {
        while i < n && c_isspace(line[i]) {
            i += 1;
        }
        if i >= n {
            return Some(args);
        }
        let mut cur = Vec::new();
        let mut in_dq = false;
        let mut in_sq = false;
        loop {
            if in_dq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < n
                    && line[i + 1] == b'x'
                    && line[i + 2].is_ascii_hexdigit()
                    && line[i + 3].is_ascii_hexdigit()
                {
                    let hex = std::str::from_utf8(&line[i + 2..i + 4]).ok()?;
                    cur.push(u8::from_str_radix(hex, 16).ok()?);
                    i += 3;
                } else if c == b'\\' && i + 1 < n {
                    i += 1;
                    cur.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < n && !c_isspace(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if in_sq {
                if i >= n {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < n && line[i + 1] == b'\'' {
                    i += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < n && !c_isspace(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if i >= n {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    c => cur.push(c),
                }
            }
            i += 1;
        }
        args.push(Bytes::from(cur));
    }
}

/// How much room [`stream_chunk`]'s buffer takes at a time.
const STREAM_BUFFER: usize = 64 * 1024;

thread_local! {
    /// Where this thread encodes pieces of the stream (see [`stream_chunk`]).
    static STREAM_BUF: std::cell::RefCell<BytesMut> = std::cell::RefCell::new(BytesMut::new());
}

/// Encodes a piece of the stream with `write` and returns it. The pieces are carved one after
/// the other out of a large per-thread buffer, so encoding a command allocates nothing: a
/// new buffer is taken once the last one is used up, and an old one is freed when the last
/// piece cut from it (in the backlog, on its way to a replica) is dropped.
pub(crate) fn stream_chunk(write: impl FnOnce(&mut BytesMut)) -> Bytes {
    STREAM_BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        if buf.capacity() - buf.len() < 1024 {
            buf.reserve(STREAM_BUFFER);
        }
        write(&mut buf);
        buf.split().freeze()
    })
}

/// Appends one command to `out` in RESP, as a client would send it (an array of bulk strings).
/// Written straight into the buffer: no intermediate reply value is built.
pub(crate) fn encode<A: AsRef<[u8]>>(args: &[A], out: &mut BytesMut) {
    let mut n = itoa::Buffer::new();
    out.put_u8(b'*');
    out.put_slice(n.format(args.len()).as_bytes());
    out.put_slice(b"\r\n");
    for a in args {
        let a = a.as_ref();
        out.put_u8(b'$');
        out.put_slice(n.format(a.len()).as_bytes());
        out.put_slice(b"\r\n");
        out.put_slice(a);
        out.put_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Parsed>, ProtocolError> {
        let mut buf = BytesMut::from(input);
        let mut d = Decoder::default();
        let mut out = Vec::new();
        while let Some(p) = d.parse(&mut buf, 512 * 1024 * 1024)? {
            out.push(p);
        }
        Ok(out)
    }

    fn cmd(args: &[&str]) -> Parsed {
        Parsed::Command(args.iter().map(|a| Bytes::from(a.to_string())).collect())
    }

    #[test]
    fn pipelined_multibulk_and_inline() {
        let got = parse_all(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\nset a \"b c\"\n").unwrap();
        assert_eq!(
            got,
            vec![
                cmd(&["GET", "k"]),
                cmd(&["PING"]),
                cmd(&["set", "a", "b c"])
            ]
        );
    }

    /// Parses `input` handed over one byte at a time: no command is ever whole in the buffer
    /// before its last byte, so this takes the step-by-step path (and the fast path only
    /// for a command whose last byte completes it).
    fn parse_bytewise(input: &[u8]) -> Result<Vec<Parsed>, ProtocolError> {
        let mut buf = BytesMut::new();
        let mut d = Decoder::default();
        let mut out = Vec::new();
        for &b in input {
            buf.extend_from_slice(&[b]);
            while let Some(p) = d.parse(&mut buf, 1000)? {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// The whole-command fast path (`parse_whole`) gives the commands, and the errors, that
    /// the step-by-step path gives, with the same bytes left over.
    #[test]
    fn whole_commands_parse_as_step_by_step() {
        let many: Vec<String> = (0..40).map(|i| format!("a{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let mut pipeline = Vec::new();
        for args in [
            &["INCR", "counter:000000012345"][..],
            &["EVALSHA", "0123456789abcdef", "1", "lock:1", "token"],
            &["SET", "", "binary\r\n\0 value"],
            &many[..WHOLE_MAX_ARGS],
            &many[..WHOLE_MAX_ARGS + 1],
        ] {
            pipeline.extend(format!("*{}\r\n", args.len()).into_bytes());
            for a in args {
                pipeline.extend(format!("${}\r\n{a}\r\n", a.len()).into_bytes());
            }
        }
        let whole = parse_all(&pipeline).unwrap();
        assert_eq!(whole.len(), 5);
        assert_eq!(whole, parse_bytewise(&pipeline).unwrap());
        assert_eq!(whole[0], cmd(&["INCR", "counter:000000012345"]));
        // Malformed input: the same error either way (the fast path leaves it to the other).
        for bad in [
            &b"*2\r\n$3\r\nGET\r\n+k\r\n"[..],
            b"*2\r\n$3\r\nGET\r\n$-1\r\n",
            b"*2\r\n$3\r\nGET\r\n$1001\r\n",
            b"*2\r\n$3\r\nGET\r\n$x\r\nk\r\n",
            b"*-5\r\n*1\r\n$1\r\nk\r\n",
        ] {
            let mut buf = BytesMut::from(bad);
            let fast = Decoder::default().parse(&mut buf, 1000);
            let slow = parse_bytewise(bad);
            match (fast, slow) {
                (Err(a), Err(b)) => assert_eq!(a, b, "{bad:?}"),
                (Ok(Some(a)), Ok(b)) => assert_eq!(std::slice::from_ref(&a), &b[..1], "{bad:?}"),
                (a, b) => panic!("{bad:?}: {a:?} against {b:?}"),
            }
        }
        // A command not all there is left in the buffer, untouched, until it is.
        let mut d = Decoder::default();
        let mut buf = BytesMut::from(&b"*2\r\n$4\r\nINCR\r\n$3\r\nab"[..]);
        assert_eq!(d.parse(&mut buf, 1000).unwrap(), None);
        buf.extend_from_slice(b"c\r\n*1\r\n$4\r\nPING\r\n");
        assert_eq!(
            d.parse(&mut buf, 1000).unwrap(),
            Some(cmd(&["INCR", "abc"]))
        );
        assert_eq!(d.parse(&mut buf, 1000).unwrap(), Some(cmd(&["PING"])));
        assert!(buf.is_empty());
    }

    #[test]
    fn partial_input_waits_for_more() {
        let mut d = Decoder::default();
        let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$5\r\nhel"[..]);
        assert_eq!(d.parse(&mut buf, 100).unwrap(), None);
        buf.extend_from_slice(b"lo\r\n");
        assert_eq!(
            d.parse(&mut buf, 100).unwrap(),
            Some(cmd(&["GET", "hello"]))
        );
    }

    #[test]
    fn huge_claims_are_protocol_errors() {
        assert_eq!(
            parse_all(b"*3000000000\r\n").unwrap_err().0,
            "Protocol error: invalid multibulk length"
        );
        let mut d = Decoder::default();
        let mut buf = BytesMut::from(&b"*1\r\n$600000000\r\n"[..]);
        assert_eq!(
            d.parse(&mut buf, 512 * 1024 * 1024).unwrap_err().0,
            "Protocol error: invalid bulk length"
        );
        assert_eq!(
            parse_all(b"*1\r\n+foo\r\n").unwrap_err().0,
            "Protocol error: expected '$', got '+'"
        );
        assert_eq!(
            parse_all(b"set a \"b\n").unwrap_err().0,
            "Protocol error: unbalanced quotes in request"
        );
    }

    #[test]
    fn a_nul_hides_the_newline_of_an_inline_line_as_in_redis() {
        // Once an endless loop: three bytes. Now, as in Redis, the line never completes ...
        assert_eq!(parse_all(b"\0\r\n").unwrap(), vec![]);
        assert_eq!(parse_all(b"set k v\0ignored\r\nPING\r\n").unwrap(), vec![]);
        // ... until the buffer passes the inline limit.
        let mut long = b"\0\r\nPING\r\n".to_vec();
        long.resize(INLINE_MAX + 1, b'x');
        assert_eq!(
            parse_all(&long).unwrap_err().0,
            "Protocol error: too big inline request"
        );
        // A NUL after the newline is the next line's business.
        assert_eq!(parse_all(b"PING\r\n\0").unwrap(), vec![cmd(&["PING"])]);
    }

    #[test]
    fn split_args_reads_a_c_string() {
        // Whatever follows a NUL is ignored, an unbalanced quote included.
        assert_eq!(split_args(b"\0").unwrap(), Vec::<Bytes>::new(),);
        assert_eq!(
            split_args(b"set k v\0ignored \"").unwrap(),
            vec![Bytes::from("set"), Bytes::from("k"), Bytes::from("v")]
        );
        // A NUL inside quotes ends the line inside them: unbalanced.
        assert_eq!(split_args(b"set k \"v\0\""), None);
        // C's isspace: a vertical tab may follow a closing quote and separates words; inside
        // an unquoted word only space, tab, CR and LF end it, as in sdssplitargs.
        assert_eq!(
            split_args(b"\"a\"\x0bb\x0cc").unwrap(),
            vec![Bytes::from("a"), Bytes::from("b\x0cc")]
        );
    }

    #[test]
    fn inline_escapes() {
        let got = split_args(br#"a "x\x41\n" 'it\'s'"#).unwrap();
        assert_eq!(
            got,
            vec![Bytes::from("a"), Bytes::from("xA\n"), Bytes::from("it's")]
        );
    }
}
