//! The keyspace written as the commands that rebuild it: the body of the file `BGREWRITEAOF`
//! writes (see `cmd::bgrewriteaof` for the rewrite itself).
//!
//! An append-only file grows with every write, including the writes later undone: a lock
//! taken and released a million times is two million commands in the file, for a key that no
//! longer exists. A rewrite replaces that history with the shortest story that ends in the
//! same state, as Redis's `rewriteAppendOnlyFileRio` does: the function libraries
//! (`FUNCTION LOAD`), then for each database that holds keys a `SELECT`, and for each key the
//! commands that create its value, then `PEXPIREAT` for its deadline:
//!
//! | value | commands |
//! | --- | --- |
//! | string | `SET key value` |
//! | list | `RPUSH key e1 ... e64`, as many as needed |
//! | set | `SADD key m1 ... m64`, as many as needed |
//! | sorted set | `ZADD key s1 m1 ... s64 m64` (scores written as `%.17g`, which reads back exactly) |
//! | hash | `HMSET key f1 v1 ... f64 v64` |
//! | stream | `XADD key id f v ...` for each entry (an empty stream: `XADD key MAXLEN 0 0-1 x y`), `XSETID key last ENTRIESADDED n MAXDELETEDID id`; for each group `XGROUP CREATE key group id ENTRIESREAD n`, then for each consumer `XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n JUSTID FORCE` per pending entry, or `XGROUP CREATECONSUMER` for a consumer with none |
//!
//! At most 64 elements go in one command (Redis's `AOF_REWRITE_ITEMS_PER_CMD`), so no command
//! of the file is larger than the largest value's 64 elements, whatever the collection's size.
//!
//! Redis 7.0 writes an RDB preamble in place of these commands when `aof-use-rdb-preamble` is
//! `yes` (its default). latchkey's AOF loader reads commands only, so its rewrite always
//! writes commands, and `aof-use-rdb-preamble` is fixed at `no` (see docs/COMPATIBILITY.md).
//! The file is one Redis 7.0 with `aof-use-rdb-preamble no` loads too.
//!
//! Keys already expired when the rewrite begins are left out: they are absent to every
//! reader, and their `DEL` may already be in the writes logged after the snapshot.

use bytes::{Bytes, BytesMut};

use crate::codec::encode;
use crate::db::Value;
use crate::frame::format_double;
use crate::state::Shared;
use crate::stream::Stream;
use crate::stream_id::StreamId;

/// The most elements (list items, members, field-value pairs) one command carries.
pub(crate) const ITEMS_PER_CMD: usize = 64;

/// The rewritten keyspace: the commands, and where each key's commands end (kept only when
/// asked, for `rdb-key-save-delay`, which paces the writing key by key).
#[derive(Debug)]
pub(crate) struct Dataset {
    /// The commands, in RESP, ready to be written to the file.
    pub bytes: Bytes,
    /// The offset in `bytes` after each key's commands, when asked for.
    pub key_ends: Vec<usize>,
}

/// Writes the whole keyspace as commands. The caller holds the execution gate exclusively,
/// so the result is one moment's keyspace. With `key_ends`, also records where each key's
/// commands end.
pub(crate) fn dataset(shared: &Shared, key_ends: bool) -> Dataset {
    let mut out = BytesMut::with_capacity(4096);
    let mut ends = Vec::new();
    for code in crate::rdb::write::function_libraries(shared) {
        encode(&[&b"FUNCTION"[..], b"LOAD", &code], &mut out);
    }
    let now = shared.clock.now_ms();
    for (i, db) in shared.keyspace.iter() {
        let mut selected = false;
        for item in db.map().iter() {
            let (key, entry) = (&item.key()[..], item.value());
            if entry.is_expired(now) {
                continue;
            }
            if !selected {
                crate::aof::encode_select(i, &mut out);
                selected = true;
            }
            value(&mut out, key, &entry.value);
            if let Some(t) = entry.expires_at() {
                let mut n = itoa::Buffer::new();
                encode(&[&b"PEXPIREAT"[..], key, n.format(t).as_bytes()], &mut out);
            }
            if key_ends {
                ends.push(out.len());
            }
        }
    }
    Dataset {
        bytes: out.freeze(),
        key_ends: ends,
    }
}

/// Appends the commands that create `key` holding `v`.
fn value(out: &mut BytesMut, key: &[u8], v: &Value) {
    match v {
        Value::Str(s) => encode(&[&b"SET"[..], key, s], out),
        Value::List(l) => batched(out, b"RPUSH", key, l.iter().map(|e| [e])),
        Value::Set(s) => {
            let members = s.members();
            batched(out, b"SADD", key, members.iter().map(|m| [&m[..]]));
        }
        Value::ZSet(z) => {
            let items: Vec<(String, &[u8])> =
                z.iter().map(|(m, s)| (format_double(s), &m[..])).collect();
            batched(
                out,
                b"ZADD",
                key,
                items.iter().map(|(s, m)| [s.as_bytes(), *m]),
            );
        }
        Value::Hash(h) => batched(out, b"HMSET", key, h.iter().map(|(f, v)| [&f[..], &v[..]])),
        Value::Stream(s) => stream(out, key, s),
    }
}

/// Appends `name key items...` commands of at most [`ITEMS_PER_CMD`] items each (an item is
/// one argument, or a pair such as a score and its member).
fn batched<'a, const N: usize>(
    out: &mut BytesMut,
    name: &[u8],
    key: &[u8],
    items: impl Iterator<Item = [&'a [u8]; N]>,
) {
    let mut args: Vec<&[u8]> = Vec::with_capacity(2 + ITEMS_PER_CMD * N);
    let mut count = 0;
    for item in items {
        if count == 0 {
            args.clear();
            args.push(name);
            args.push(key);
        }
        args.extend_from_slice(&item);
        count += 1;
        if count == ITEMS_PER_CMD {
            encode(&args, out);
            count = 0;
        }
    }
    if count > 0 {
        encode(&args, out);
    }
}

/// Appends the commands that rebuild a stream: its entries, its counters, its groups with
/// their consumers and pending entries.
fn stream(out: &mut BytesMut, key: &[u8], s: &Stream) {
    let id_text = |id: StreamId| id.to_string();
    if s.len() > 0 {
        for (id, fields) in s.range(StreamId::MIN, StreamId::MAX, false, usize::MAX) {
            let id = id_text(id);
            let mut args: Vec<&[u8]> = Vec::with_capacity(3 + fields.len());
            args.extend_from_slice(&[b"XADD", key, id.as_bytes()]);
            args.extend(fields.iter().map(|f| &f[..]));
            encode(&args, out);
        }
    } else {
        // An empty stream still exists (its groups, its last ID): an entry added and trimmed
        // away at once creates it, as Redis writes it.
        encode(
            &[&b"XADD"[..], key, b"MAXLEN", b"0", b"0-1", b"x", b"y"],
            out,
        );
    }
    let mut n = itoa::Buffer::new();
    encode(
        &[
            &b"XSETID"[..],
            key,
            id_text(s.last_id()).as_bytes(),
            b"ENTRIESADDED",
            n.format(s.entries_added()).as_bytes(),
            b"MAXDELETEDID",
            id_text(s.max_deleted()).as_bytes(),
        ],
        out,
    );
    for (name, group) in s.groups() {
        encode(
            &[
                &b"XGROUP"[..],
                b"CREATE",
                key,
                name,
                id_text(group.last_id).as_bytes(),
                b"ENTRIESREAD",
                n.format(group.entries_read).as_bytes(),
            ],
            out,
        );
        for (consumer, c) in &group.consumers {
            if c.pel.is_empty() {
                encode(
                    &[&b"XGROUP"[..], b"CREATECONSUMER", key, name, consumer],
                    out,
                );
                continue;
            }
            for id in &c.pel {
                let Some(nack) = group.pel.get(id) else {
                    continue;
                };
                let mut t = itoa::Buffer::new();
                let mut count = itoa::Buffer::new();
                encode(
                    &[
                        &b"XCLAIM"[..],
                        key,
                        name,
                        consumer,
                        b"0",
                        id_text(*id).as_bytes(),
                        b"TIME",
                        t.format(nack.delivery_time).as_bytes(),
                        b"RETRYCOUNT",
                        count.format(nack.delivery_count).as_bytes(),
                        b"JUSTID",
                        b"FORCE",
                    ],
                    out,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commands(bytes: &[u8]) -> Vec<Vec<String>> {
        crate::aof::scan(bytes)
            .commands
            .into_iter()
            .map(|c| {
                c.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn batches_hold_at_most_64_items() {
        let mut out = BytesMut::new();
        let items: Vec<Vec<u8>> = (0..130).map(|i| i.to_string().into_bytes()).collect();
        batched(&mut out, b"RPUSH", b"k", items.iter().map(|i| [&i[..]]));
        let cmds = commands(&out);
        assert_eq!(
            cmds.iter().map(|c| c.len() - 2).collect::<Vec<_>>(),
            vec![64, 64, 2]
        );
        assert_eq!(cmds[2], vec!["RPUSH", "k", "128", "129"]);
    }

    #[test]
    fn pairs_count_as_one_item() {
        let mut out = BytesMut::new();
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..65)
            .map(|i| (format!("f{i}").into_bytes(), format!("v{i}").into_bytes()))
            .collect();
        batched(
            &mut out,
            b"HMSET",
            b"h",
            pairs.iter().map(|(f, v)| [&f[..], &v[..]]),
        );
        let cmds = commands(&out);
        assert_eq!(cmds.len(), 2);
        assert_eq!(cmds[0].len(), 2 + 128);
        assert_eq!(cmds[1], vec!["HMSET", "h", "f64", "v64"]);
    }

    #[test]
    fn nothing_is_written_for_no_items() {
        let mut out = BytesMut::new();
        batched(&mut out, b"SADD", b"s", std::iter::empty::<[&[u8]; 1]>());
        assert!(out.is_empty());
    }
}
