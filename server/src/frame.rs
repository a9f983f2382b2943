//! Reply frames: what a command answers, independent of the protocol version.
//!
//! A command builds a [`Frame`]; the connection encodes it as RESP2 or RESP3 depending on what
//! the client asked for with `HELLO`. RESP3 types that RESP2 lacks are downgraded the way Redis 7
//! downgrades them: maps become flat arrays, sets become arrays, doubles become bulk strings,
//! booleans become integers and pushes become arrays.

use bytes::{BufMut, Bytes, BytesMut};

/// Which RESP version a client speaks (`HELLO 2` or `HELLO 3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Protocol {
    /// RESP2, the default for every new connection.
    #[default]
    Resp2,
    /// RESP3, chosen with `HELLO 3`.
    Resp3,
}

impl Protocol {
    /// The protocol number as `HELLO` reports it.
    pub fn number(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// One reply, as a tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// `+OK`-style status line. Must not contain CR or LF.
    Simple(Bytes),
    /// `-ERR ...` error line, without the leading `-`. Must not contain CR or LF.
    Error(Bytes),
    /// `:123`.
    Integer(i64),
    /// `$3\r\nfoo` binary-safe string.
    Bulk(Bytes),
    /// The absent value of a string reply: `$-1` in RESP2, `_` in RESP3.
    Null,
    /// The absent value of an array reply: `*-1` in RESP2, `_` in RESP3.
    NullArray,
    /// `*N` ordered list of frames.
    Array(Vec<Frame>),
    /// `%N` key/value pairs (a flat array under RESP2).
    Map(Vec<(Frame, Frame)>),
    /// `~N` unordered collection (an array under RESP2).
    Set(Vec<Frame>),
    /// `,1.5` floating point number (a bulk string under RESP2).
    Double(f64),
    /// `#t` / `#f` (the integers 1 / 0 under RESP2).
    Boolean(bool),
    /// `=N txt:...` verbatim string (a bulk string under RESP2).
    Verbatim(Bytes),
    /// `>N` out-of-band push message (an array under RESP2).
    Push(Vec<Frame>),
    /// `(12345678901234567890` a number of any size, as its decimal digits (a bulk string
    /// under RESP2). Redis itself sends it only for `DEBUG PROTOCOL bignum` and a script's
    /// `{big_number = "..."}`.
    BigNumber(Bytes),
    /// `|N` key/value pairs that describe the reply after them, then that reply. RESP3
    /// clients may read or skip the pairs; under RESP2 only the reply is sent. Redis sends
    /// one only for `DEBUG PROTOCOL attrib`.
    Attribute(Vec<(Frame, Frame)>, Box<Frame>),
    /// Several replies to one command, written back to back (`SUBSCRIBE a b` confirms each
    /// channel separately). Not a RESP type of its own.
    Multi(Vec<Frame>),
    /// Bytes already in wire form, written as they are: the replication stream a master sends
    /// a replica. Not a RESP type of its own.
    Raw(Bytes),
}

impl Frame {
    /// `+OK`.
    pub fn ok() -> Frame {
        Frame::Simple(Bytes::from_static(b"OK"))
    }

    /// A status reply from static text.
    pub fn simple(s: &'static str) -> Frame {
        Frame::Simple(Bytes::from_static(s.as_bytes()))
    }

    /// An error reply. The text is the whole line after `-`, e.g. `"ERR syntax error"`.
    /// Any CR or LF in it is replaced by a space, as Redis does, so the reply stays well formed.
    pub fn error(msg: impl Into<String>) -> Frame {
        let mut s: String = msg.into();
        if s.contains(['\r', '\n']) {
            s = s.replace(['\r', '\n'], " ");
        }
        Frame::Error(Bytes::from(s))
    }

    /// A bulk string from anything that converts into [`Bytes`].
    pub fn bulk(b: impl Into<Bytes>) -> Frame {
        Frame::Bulk(b.into())
    }

    /// A bulk string holding the decimal form of an integer.
    pub fn bulk_int(i: i64) -> Frame {
        let mut buf = itoa::Buffer::new();
        Frame::Bulk(Bytes::copy_from_slice(buf.format(i).as_bytes()))
    }

    /// An array of bulk strings.
    pub fn bulks<I, B>(items: I) -> Frame
    where
        I: IntoIterator<Item = B>,
        B: Into<Bytes>,
    {
        Frame::Array(items.into_iter().map(|b| Frame::Bulk(b.into())).collect())
    }

    /// Whether this frame is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Frame::Error(_))
    }

    /// Appends the wire form of this frame for the given protocol to `out`.
    pub fn encode(&self, proto: Protocol, out: &mut BytesMut) {
        let resp3 = proto == Protocol::Resp3;
        match self {
            Frame::Simple(s) => line(out, b'+', s),
            Frame::Error(s) => line(out, b'-', s),
            Frame::Integer(i) => int_line(out, b':', *i),
            Frame::Bulk(b) => bulk(out, b),
            Frame::Null if resp3 => out.put_slice(b"_\r\n"),
            Frame::Null => out.put_slice(b"$-1\r\n"),
            Frame::NullArray if resp3 => out.put_slice(b"_\r\n"),
            Frame::NullArray => out.put_slice(b"*-1\r\n"),
            Frame::Array(items) => {
                int_line(out, b'*', items.len() as i64);
                for f in items {
                    f.encode(proto, out);
                }
            }
            Frame::Map(pairs) => {
                if resp3 {
                    int_line(out, b'%', pairs.len() as i64);
                } else {
                    int_line(out, b'*', 2 * pairs.len() as i64);
                }
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Frame::Set(items) => {
                int_line(out, if resp3 { b'~' } else { b'*' }, items.len() as i64);
                for f in items {
                    f.encode(proto, out);
                }
            }
            Frame::Push(items) => {
                int_line(out, if resp3 { b'>' } else { b'*' }, items.len() as i64);
                for f in items {
                    f.encode(proto, out);
                }
            }
            Frame::Double(d) => {
                let text = format_double(*d);
                if resp3 {
                    line(out, b',', text.as_bytes());
                } else {
                    bulk(out, text.as_bytes());
                }
            }
            Frame::Boolean(b) if resp3 => out.put_slice(if *b { b"#t\r\n" } else { b"#f\r\n" }),
            Frame::Boolean(b) => int_line(out, b':', *b as i64),
            Frame::Verbatim(text) if resp3 => {
                int_line(out, b'=', text.len() as i64 + 4);
                out.put_slice(b"txt:");
                out.put_slice(text);
                out.put_slice(b"\r\n");
            }
            Frame::Verbatim(text) => bulk(out, text),
            Frame::BigNumber(digits) if resp3 => line(out, b'(', digits),
            Frame::BigNumber(digits) => bulk(out, digits),
            Frame::Attribute(pairs, reply) => {
                if resp3 {
                    int_line(out, b'|', pairs.len() as i64);
                    for (k, v) in pairs {
                        k.encode(proto, out);
                        v.encode(proto, out);
                    }
                }
                reply.encode(proto, out);
            }
            Frame::Multi(items) => {
                for f in items {
                    f.encode(proto, out);
                }
            }
            Frame::Raw(bytes) => out.put_slice(bytes),
        }
    }

    /// The wire form of this frame, as a fresh buffer (handy in tests and in-process clients).
    pub fn to_bytes(&self, proto: Protocol) -> Bytes {
        let mut out = BytesMut::new();
        self.encode(proto, &mut out);
        out.freeze()
    }
}

/// Formats a double the way Redis 7.0 replies with one: `inf`, `-inf`, `nan`, integers without a
/// fractional part, everything else with 17 significant digits (`%.17g`).
pub(crate) fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "nan".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "inf".into() } else { "-inf".into() };
    }
    format_g17(d)
}

/// C's `%.17g`, which Redis uses for doubles in replies.
pub(crate) fn format_g17(d: f64) -> String {
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let exp = d.abs().log10().floor() as i32;
    // Format in scientific notation first to learn the real exponent after rounding.
    let sci = format!("{:.16e}", d);
    let (mantissa, e) = sci.split_once('e').unwrap_or((&sci, "0"));
    let e: i32 = e.parse().unwrap_or(exp);
    if !(-4..17).contains(&e) {
        let m = trim_fraction(mantissa);
        let sign = if e < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", e.abs())
    } else {
        let decimals = (16 - e).max(0) as usize;
        trim_fraction(&format!("{:.*}", decimals, d)).to_string()
    }
}

fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn line(out: &mut BytesMut, prefix: u8, s: &[u8]) {
    out.reserve(s.len() + 3);
    out.put_u8(prefix);
    out.put_slice(s);
    out.put_slice(b"\r\n");
}

fn int_line(out: &mut BytesMut, prefix: u8, i: i64) {
    let mut buf = itoa::Buffer::new();
    line(out, prefix, buf.format(i).as_bytes());
}

fn bulk(out: &mut BytesMut, b: &[u8]) {
    let mut buf = itoa::Buffer::new();
    let len = buf.format(b.len());
    out.reserve(b.len() + len.len() + 5);
    out.put_u8(b'$');
    out.put_slice(len.as_bytes());
    out.put_slice(b"\r\n");
    out.put_slice(b);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downgrades_resp3_types_under_resp2() {
        let f = Frame::Map(vec![(Frame::bulk("a"), Frame::Double(1.5))]);
        assert_eq!(
            &f.to_bytes(Protocol::Resp2)[..],
            b"*2\r\n$1\r\na\r\n$3\r\n1.5\r\n"
        );
        assert_eq!(
            &f.to_bytes(Protocol::Resp3)[..],
            b"%1\r\n$1\r\na\r\n,1.5\r\n"
        );
        assert_eq!(&Frame::Null.to_bytes(Protocol::Resp2)[..], b"$-1\r\n");
        assert_eq!(&Frame::NullArray.to_bytes(Protocol::Resp2)[..], b"*-1\r\n");
        assert_eq!(&Frame::NullArray.to_bytes(Protocol::Resp3)[..], b"_\r\n");
    }

    #[test]
    fn doubles_format_like_printf_g17() {
        assert_eq!(format_double(1.0), "1");
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(0.1), "0.10000000000000001");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(-2.5e-7), "-2.4999999999999999e-07");
        assert_eq!(format_double(f64::INFINITY), "inf");
        assert_eq!(format_double(123456789.0), "123456789");
    }

    #[test]
    fn error_text_never_breaks_the_protocol() {
        let f = Frame::error("ERR bad\r\nthing");
        assert_eq!(&f.to_bytes(Protocol::Resp2)[..], b"-ERR bad  thing\r\n");
    }
}
