//! Reading an RDB payload, as redis-server 7.0 writes it, into the keyspace.
//!
//! [`parse`] walks the records and hands each key (with its expiry), each `AUX` field and each
//! function library to a callback; [`load`] uses it to fill a [`Shared`]'s keyspace.
//! latchkey keeps strings, hashes, lists, sets and sorted sets: a stream or module value is
//! refused with an error that names the key, rather than dropped silently.

use bytes::Bytes;
use indexmap::IndexMap;

use super::reader::{err, parse_score, score, Reader};
use super::{kind, opcode, packed, RdbError, CRC64};
use crate::db::{Entry, Str, Value, NUM_DBS};
use crate::list::List;
use crate::set::Set;
use crate::state::Shared;
use crate::zset::ZSet;

/// One thing an RDB file holds.
#[derive(Debug)]
pub(crate) enum Record {
    /// A metadata field (`redis-ver`, `repl-id`, `repl-offset`, ...).
    Aux(Bytes, Bytes),
    /// The code of a function library (what `FUNCTION LOAD` takes).
    Function(Bytes),
    /// A key of database `db`.
    Key {
        /// Database number.
        db: usize,
        /// The key.
        key: Bytes,
        /// Its value and expiry.
        entry: Entry,
    },
}

fn pairs_to_hash(items: Vec<Bytes>) -> Result<Value, RdbError> {
    if !items.len().is_multiple_of(2) {
        return Err(err("hash with an odd number of entries"));
    }
    let mut h = IndexMap::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(f), Some(v)) = (it.next(), it.next()) {
        h.insert(Str::from(f), Str::from(v));
    }
    Ok(Value::Hash(Box::new(h)))
}

fn pairs_to_zset(items: Vec<Bytes>) -> Result<Value, RdbError> {
    if !items.len().is_multiple_of(2) {
        return Err(err("sorted set with an odd number of entries"));
    }
    let mut z = ZSet::new();
    let mut it = items.into_iter();
    while let (Some(m), Some(s)) = (it.next(), it.next()) {
        z.insert(m, parse_score(&s)?);
    }
    Ok(Value::ZSet(Box::new(z)))
}

/// Reads the value of a key of type `t`.
fn value(r: &mut Reader<'_>, t: u8, key: &[u8]) -> Result<Value, RdbError> {
    Ok(match t {
        kind::STRING => Value::Str(Str::from(r.string()?)),
        kind::LIST => {
            let n = r.len()?;
            let mut l = List::new();
            for _ in 0..n {
                l.push_back(&r.string()?);
            }
            Value::List(Box::new(l))
        }
        kind::HASH => {
            let n = r
                .len()?
                .checked_mul(2)
                .ok_or_else(|| err("hash length too large"))?;
            let mut items = Vec::with_capacity(n.min(r.remaining()));
            for _ in 0..n {
                items.push(r.string()?);
            }
            pairs_to_hash(items)?
        }
        kind::ZSET | kind::ZSET_2 => {
            let n = r.len()?;
            let mut z = ZSet::new();
            for _ in 0..n {
                let m = r.string()?;
                let s = score(if t == kind::ZSET {
                    r.text_double()?
                } else {
                    f64::from_bits(r.le(8)?)
                })?;
                z.insert(m, s);
            }
            Value::ZSet(Box::new(z))
        }
        kind::LIST_ZIPLIST => Value::List(Box::new(
            packed::ziplist(&r.string()?)?.into_iter().collect(),
        )),
        kind::HASH_ZIPLIST => pairs_to_hash(packed::ziplist(&r.string()?)?)?,
        kind::ZSET_ZIPLIST => pairs_to_zset(packed::ziplist(&r.string()?)?)?,
        kind::HASH_LISTPACK => pairs_to_hash(packed::listpack(&r.string()?)?)?,
        kind::ZSET_LISTPACK => pairs_to_zset(packed::listpack(&r.string()?)?)?,
        kind::LIST_QUICKLIST | kind::LIST_QUICKLIST_2 => {
            let nodes = r.len()?;
            let mut l = List::new();
            for _ in 0..nodes {
                if t == kind::LIST_QUICKLIST {
                    l.extend(packed::ziplist(&r.string()?)?);
                    continue;
                }
                // Quicklist 2 nodes: 1 = one plain (large) element, 2 = a listpack.
                match r.len()? {
                    1 => l.push_back(&r.string()?),
                    2 => l.extend(packed::listpack(&r.string()?)?),
                    c => return Err(err(format!("unknown quicklist node container {c}"))),
                }
            }
            Value::List(Box::new(l))
        }
        kind::SET => {
            let n = r.len()?;
            let mut members = Vec::with_capacity(n.min(r.remaining()));
            for _ in 0..n {
                members.push(r.string()?);
            }
            // Shaped by the loader's `set-max-intset-entries` afterwards (`Set::fit`).
            Value::Set(Box::new(Set::from_loaded(members)))
        }
        kind::SET_INTSET => Value::Set(Box::new(Set::Ints(packed::intset(&r.string()?)?))),
        kind::SET_LISTPACK => {
            Value::Set(Box::new(Set::from_loaded(packed::listpack(&r.string()?)?)))
        }
        kind::STREAM_LISTPACKS | kind::STREAM_LISTPACKS_2 | kind::STREAM_LISTPACKS_3 => {
            Value::Stream(Box::new(super::stream_read::stream(r, t)?))
        }
        other => {
            return Err(err(format!(
                "key '{}' has value type {other} (module or zipmap), which latchkey cannot hold",
                String::from_utf8_lossy(key)
            )))
        }
    })
}

/// Reads one value as a `DUMP` payload carries it (the body of Redis's `createDumpPayload`):
/// its type byte, then the value, with no key. Bytes after the value (the payload's footer)
/// are left unread, as Redis leaves them. Every length in it is checked against the bytes
/// actually there before it is used, so hostile input costs at most the work of reading it.
pub(crate) fn object(data: &[u8]) -> Result<Value, RdbError> {
    let mut r = Reader { data, pos: 0 };
    let t = r.u8()?;
    value(&mut r, t, b"")
}

/// The library codes of a `FUNCTION DUMP` payload: `FUNCTION2` records (an opcode, then the
/// code as a string) for as long as they start before `end` (where the payload's footer
/// begins; a string may still run into it, as on Redis). The error is Redis's text.
pub(crate) fn function_records(data: &[u8], end: usize) -> Result<Vec<Bytes>, &'static str> {
    let mut r = Reader { data, pos: 0 };
    let mut codes = Vec::new();
    while r.pos < end {
        match r.u8().map_err(|_| "can not read data type")? {
            opcode::FUNCTION2 => {
                codes.push(r.string().map_err(|_| "Failed loading library payload")?)
            }
            // Redis 7.0 reads the release candidates' form (name, engine, ...) and fails on
            // the engine of anything else; latchkey does not read that form at all.
            opcode::FUNCTION_PRE_GA => return Err("Failed loading engine name"),
            _ => return Err("given type is not a function"),
        }
    }
    Ok(codes)
}

/// Skips a module's auxiliary data: a module id, a `when` pair, then typed fields up to an
/// end marker (rdbLoadCheckModuleValue's walk).
fn skip_module_aux(r: &mut Reader<'_>) -> Result<(), RdbError> {
    r.len()?; // module id
    r.len()?; // when-opcode
    r.len()?; // when
    loop {
        match r.len()? {
            0 => return Ok(()),
            1 | 2 => {
                r.len()?;
            }
            3 => {
                r.bytes(4)?;
            }
            4 => {
                r.bytes(8)?;
            }
            5 => {
                r.string()?;
            }
            o => return Err(err(format!("unknown module field opcode {o}"))),
        }
    }
}

/// Walks a whole RDB payload, calling `sink` for each record. Checks the magic, the version
/// and, when it is not zero (Redis writes zero with `rdbchecksum no`), the CRC-64.
pub(crate) fn parse(
    data: &[u8],
    mut sink: impl FnMut(Record) -> Result<(), RdbError>,
) -> Result<(), RdbError> {
    let mut r = Reader { data, pos: 0 };
    let magic = r.bytes(9)?;
    if &magic[..5] != b"REDIS" {
        return Err(err("wrong signature"));
    }
    let version: u32 = std::str::from_utf8(&magic[5..])
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| err("bad version"))?;
    if !(1..=super::VERSION + 2).contains(&version) {
        return Err(err(format!("can't handle RDB format version {version}")));
    }
    let mut db = 0usize;
    let mut expires_at: Option<u64> = None;
    loop {
        let t = r.u8()?;
        match t {
            opcode::EOF => break,
            opcode::SELECTDB => {
                db = r.len()?;
                if db >= NUM_DBS {
                    return Err(err(format!("database {db} out of range")));
                }
            }
            opcode::RESIZEDB => {
                r.len()?;
                r.len()?;
            }
            opcode::EXPIRETIME_MS => expires_at = Some(r.le(8)?),
            opcode::EXPIRETIME => expires_at = Some(r.le(4)? * 1000),
            opcode::IDLE => {
                r.len()?;
            }
            opcode::FREQ => {
                r.u8()?;
            }
            opcode::AUX => {
                let k = r.string()?;
                let v = r.string()?;
                sink(Record::Aux(k, v))?;
            }
            opcode::MODULE_AUX => skip_module_aux(&mut r)?,
            opcode::FUNCTION2 => sink(Record::Function(r.string()?))?,
            opcode::FUNCTION_PRE_GA => return Err(err("pre-release function format")),
            t => {
                let key = r.string()?;
                let value = value(&mut r, t, &key)?;
                let entry = Entry::with_expiry(value, expires_at.take());
                sink(Record::Key { db, key, entry })?;
            }
        }
    }
    if version >= 5 {
        let end = r.pos;
        let expected = r.le(8)?;
        if expected != 0 && CRC64.checksum(&data[..end]) != expected {
            return Err(err("checksum mismatch"));
        }
    }
    Ok(())
}

/// What [`load`] found besides keys.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    /// Keys loaded.
    pub keys: usize,
    /// Function libraries, for the caller to `FUNCTION LOAD`.
    pub functions: Vec<Bytes>,
    /// `AUX` fields.
    pub aux: Vec<(Bytes, Bytes)>,
}

/// Replaces the keyspace with the keys of `data`. The whole payload is parsed (and its
/// checksum checked) before anything is touched, so a snapshot that cannot be loaded leaves
/// the keyspace as it was. Keys already past their expiry are loaded too, as a replica does:
/// the master's `DEL` removes them.
pub(crate) fn load(shared: &Shared, data: &[u8]) -> Result<Loaded, RdbError> {
    let (mut loaded, keys) = read_all(data)?;
    shared.keyspace.clear_all();
    loaded.keys = keys.len();
    insert_keys(shared, keys);
    Ok(loaded)
}

/// A key read from a snapshot: its database, name and entry.
pub(crate) type LoadedKey = (usize, Bytes, Entry);

/// Parses the whole of `data` (checksum included) without touching the server: what it holds
/// besides keys, and its keys.
pub(crate) fn read_all(data: &[u8]) -> Result<(Loaded, Vec<LoadedKey>), RdbError> {
    let mut loaded = Loaded::default();
    let mut keys = Vec::new();
    parse(data, |rec| {
        match rec {
            Record::Aux(k, v) => loaded.aux.push((k, v)),
            Record::Function(code) => loaded.functions.push(code),
            Record::Key { db, key, entry } => keys.push((db, key, entry)),
        }
        Ok(())
    })?;
    Ok((loaded, keys))
}

/// Stores `keys` in the keyspace (replacing any of the same name), each value taking the
/// encoding options configured now, as Redis's loader gives them.
pub(crate) fn insert_keys(shared: &Shared, keys: Vec<LoadedKey>) {
    let max_intset = shared.config.set_max_intset_entries();
    let (fill, depth) = shared.config.encodings.list_options();
    let now_ms = shared.clock.now_ms();
    for (db, key, mut entry) in keys {
        match &mut entry.value {
            Value::Set(s) => s.fit(max_intset),
            // Loaded lists take the options configured now, as Redis's loader sets them.
            Value::List(l) => l.set_options(fill, depth),
            _ => {}
        }
        shared.keyspace.db(db).insert_loaded(key, entry, now_ms);
    }
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};

    use super::*;
    use crate::rdb::write;

    /// A minimal RDB around `body`, with a correct checksum.
    fn file(body: &[u8]) -> Vec<u8> {
        let mut out = BytesMut::from(&b"REDIS0010"[..]);
        out.put_slice(body);
        out.put_u8(opcode::EOF);
        let crc = CRC64.checksum(&out);
        out.put_u64_le(crc);
        out.to_vec()
    }

    fn keys(data: &[u8]) -> Result<Vec<(usize, Bytes, Entry)>, RdbError> {
        let mut out = Vec::new();
        parse(data, |r| {
            if let Record::Key { db, key, entry } = r {
                out.push((db, key, entry));
            }
            Ok(())
        })?;
        Ok(out)
    }

    #[tokio::test]
    async fn what_latchkey_writes_it_reads_back() {
        let server = crate::Server::builder()
            .no_listener()
            .virtual_clock()
            .start()
            .await
            .unwrap();
        let mut c = server.client();
        c.cmd(["SET", "s", "x".repeat(100).as_str()]).await;
        c.cmd(["SET", "n", "-70000", "PX", "5000"]).await;
        c.cmd(["HSET", "h", "f", "v"]).await;
        c.cmd(["RPUSH", "l", "a", "1"]).await;
        c.cmd(["ZADD", "z", "2.5", "m", "-inf", "lo"]).await;
        c.cmd(["SELECT", "7"]).await;
        c.cmd(["SET", "in7", "y"]).await;
        let info = write::ReplInfo {
            replid: "a".repeat(40),
            offset: 42,
            stream_db: -1,
        };
        let data = write::snapshot(server.shared(), &info);
        let mut got = keys(&data).unwrap();
        got.sort_by(|a, b| a.1.cmp(&b.1));
        let names: Vec<_> = got.iter().map(|(db, k, _)| (*db, k.clone())).collect();
        assert_eq!(
            names,
            ["h", "in7", "l", "n", "s", "z"]
                .iter()
                .map(|k| (if *k == "in7" { 7 } else { 0 }, Bytes::from(*k)))
                .collect::<Vec<_>>()
        );
        let now = server.clock().now_ms();
        assert_eq!(got[3].2.expires_at(), Some(now + 5000));
        assert!(matches!(&got[3].2.value, Value::Str(v) if &v[..] == b"-70000"));
        assert!(
            matches!(&got[5].2.value, Value::ZSet(z) if z.score(b"lo") == Some(f64::NEG_INFINITY))
        );
        // A flipped byte breaks the checksum.
        let mut bad = data.to_vec();
        bad[20] ^= 1;
        assert!(keys(&bad).is_err());
        // A zero checksum means "not computed" and is accepted.
        let mut unchecked = data.to_vec();
        let n = unchecked.len();
        unchecked[n - 8..].fill(0);
        assert_eq!(keys(&unchecked).unwrap().len(), 6);
    }

    #[test]
    fn lzf_strings_and_second_expiries() {
        let plain = b"abcabcabcabcabcabcabcabcabcabcabcabc".to_vec();
        let packed = lzf::compress(&plain).unwrap();
        let mut body = BytesMut::new();
        body.put_u8(opcode::EXPIRETIME);
        body.put_u32_le(1_000);
        body.put_u8(kind::STRING);
        crate::rdb::encode::string(&mut body, b"k");
        body.put_u8(0xC3);
        crate::rdb::encode::len(&mut body, packed.len() as u64);
        crate::rdb::encode::len(&mut body, plain.len() as u64);
        body.put_slice(&packed);
        let got = keys(&file(&body)).unwrap();
        assert_eq!(got[0].2.expires_at(), Some(1_000_000));
        assert!(matches!(&got[0].2.value, Value::Str(v) if v[..] == plain[..]));
    }

    #[test]
    fn sets_load_from_each_encoding() {
        let mut body = BytesMut::new();
        body.put_u8(kind::SET);
        crate::rdb::encode::string(&mut body, b"table");
        crate::rdb::encode::len(&mut body, 2);
        crate::rdb::encode::string(&mut body, b"m");
        crate::rdb::encode::string(&mut body, b"7");
        body.put_u8(kind::SET_INTSET);
        crate::rdb::encode::string(&mut body, b"ints");
        crate::rdb::encode::string(&mut body, &write::intset_blob(&[-70000, 3, 1 << 40]));
        body.put_u8(kind::SET);
        crate::rdb::encode::string(&mut body, b"plain-ints");
        crate::rdb::encode::len(&mut body, 2);
        crate::rdb::encode::string(&mut body, b"9");
        crate::rdb::encode::string(&mut body, b"-1");
        let got = keys(&file(&body)).unwrap();
        let set = |i: usize| match &got[i].2.value {
            Value::Set(s) => (s.encoding(), s.members()),
            v => panic!("not a set: {v:?}"),
        };
        assert_eq!(set(0).0, "hashtable");
        assert_eq!(set(0).1.len(), 2);
        assert_eq!(
            set(1),
            (
                "intset",
                vec!["-70000".into(), "3".into(), "1099511627776".into()]
            )
        );
        assert_eq!(set(2), ("intset", vec!["-1".into(), "9".into()]));
    }

    #[test]
    fn an_intset_out_of_order_is_refused() {
        let mut blob = write::intset_blob(&[1, 2]);
        blob.swap(8, 10);
        let mut body = BytesMut::new();
        body.put_u8(kind::SET_INTSET);
        crate::rdb::encode::string(&mut body, b"bad");
        crate::rdb::encode::string(&mut body, &blob);
        let e = keys(&file(&body)).unwrap_err();
        assert!(e.0.contains("out of order"), "{e}");
    }
}
