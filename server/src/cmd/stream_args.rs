//! What the stream commands share: parsing IDs as Redis does, finding the stream at a key, and
//! writing entries into replies.
//!
//! An ID argument is `ms-seq`, or `ms` alone (the sequence then defaults to the lowest or the
//! highest, depending on which end of a range it stands for), or `-`/`+` for the smallest and
//! the greatest ID where a range takes them. Both parts are unsigned 64-bit decimals; anything
//! else, or anything longer than Redis's 127-byte buffer, is refused with Redis's error.

use bytes::Bytes;

use super::util::wrongtype;
use super::Ctx;
use crate::db::Value;
use crate::frame::Frame;
use crate::memory::EntryMut;
use crate::stream::{Fields, Stream, StreamId};

/// `-ERR Invalid stream ID specified as stream command argument`.
pub(crate) fn invalid_id() -> Frame {
    Frame::error("ERR Invalid stream ID specified as stream command argument")
}

/// An unsigned decimal as Redis's `string2ull` takes it for stream IDs: digits only, no sign,
/// no overflow.
fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// A parsed ID argument. `seq` is `None` for the `ms-*` form (`XADD` only).
pub(crate) struct ParsedId {
    /// The milliseconds part.
    pub ms: u64,
    /// The sequence part, `None` for `ms-*`.
    pub seq: Option<u64>,
}

/// Parses an ID: `missing_seq` fills in for `ms` alone; `strict` refuses `-` and `+`;
/// `star_seq` accepts `ms-*` (for `XADD`).
pub(crate) fn parse_id_with(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    star_seq: bool,
) -> Result<ParsedId, Frame> {
    if arg.len() > 127 {
        return Err(invalid_id());
    }
    match arg {
        b"-" if !strict => {
            return Ok(ParsedId {
                ms: 0,
                seq: Some(0),
            })
        }
        b"+" if !strict => {
            return Ok(ParsedId {
                ms: u64::MAX,
                seq: Some(u64::MAX),
            })
        }
        _ => {}
    }
    let (ms, seq) = match arg.iter().position(|&b| b == b'-') {
        Some(dash) => (&arg[..dash], Some(&arg[dash + 1..])),
        None => (arg, None),
    };
    let ms = parse_u64(ms).ok_or_else(invalid_id)?;
    let seq = match seq {
        None => Some(missing_seq),
        Some(b"*") if star_seq => None,
        Some(s) => Some(parse_u64(s).ok_or_else(invalid_id)?),
    };
    Ok(ParsedId { ms, seq })
}

/// Parses a complete ID (`-`/`+` allowed), `ms` alone taking `missing_seq`.
pub(crate) fn parse_id(arg: &[u8], missing_seq: u64) -> Result<StreamId, Frame> {
    let p = parse_id_with(arg, missing_seq, false, false)?;
    Ok(StreamId::new(p.ms, p.seq.unwrap_or(missing_seq)))
}

/// Parses a complete ID where `-` and `+` make no sense (`XDEL`, `MINID`, `XSETID`).
pub(crate) fn parse_strict_id(arg: &[u8]) -> Result<StreamId, Frame> {
    let p = parse_id_with(arg, 0, true, false)?;
    Ok(StreamId::new(p.ms, p.seq.unwrap_or(0)))
}

/// Runs `f` on the stream at `key`: `Ok(None)` when absent, WRONGTYPE for another type.
pub(crate) fn read_stream<R>(
    ctx: &Ctx<'_>,
    key: &[u8],
    f: impl FnOnce(&Stream) -> R,
) -> Result<Option<R>, Frame> {
    match ctx.db().get(key, ctx.now_ms, ctx.lazy_delete()) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Stream(s) => Ok(Some(f(s))),
            _ => Err(wrongtype()),
        },
    }
}

/// The entry at `key` for change when it holds a stream, `Ok(None)` when absent, WRONGTYPE
/// for another type.
pub(crate) fn write_stream<'a>(ctx: &Ctx<'a>, key: &Bytes) -> Result<Option<EntryMut<'a>>, Frame> {
    match ctx.db().get_mut(key, ctx.now_ms, ctx.lazy_delete()) {
        None => Ok(None),
        Some(e) if matches!(e.value, Value::Stream(_)) => Ok(Some(e)),
        Some(_) => Err(wrongtype()),
    }
}

/// The stream inside an entry [`write_stream`] returned.
pub(crate) fn stream_of<'e>(e: &'e mut EntryMut<'_>) -> &'e mut Stream {
    match &mut e.value {
        Value::Stream(s) => s,
        _ => unreachable!("write_stream returns stream entries only"),
    }
}

/// One entry as replies carry it: `[id, [field, value, ...]]`.
pub(crate) fn entry_frame(id: StreamId, fields: &Fields) -> Frame {
    Frame::Array(vec![
        Frame::Bulk(id.to_bytes()),
        Frame::Array(fields.iter().map(|f| Frame::Bulk(f.clone())).collect()),
    ])
}

/// Entries as an array of [`entry_frame`]s.
pub(crate) fn entries_frame(entries: &[(StreamId, &Fields)]) -> Frame {
    Frame::Array(entries.iter().map(|(id, f)| entry_frame(*id, f)).collect())
}
