//! `DEBUG DIGEST` and `DEBUG DIGEST-VALUE key ...`: a fingerprint of the whole data set, or of
//! single values, equal to the one redis-server 7.0 computes for the same data (its
//! `computeDatasetDigest` and `xorObjectDigest`). Tests (Redis's own Tcl suite among them) use
//! it to tell whether two servers, or one server before and after a restart, hold the same
//! data: a master and its replica, a data set and the AOF or snapshot it was reloaded from.
//!
//! The digest is built from SHA-1 in two ways:
//!
//! - *xor* (`xor_digest`): the SHA-1 of some bytes is xored into the digest. The order of
//!   xored items does not matter: the keys of the data set, the members of a set, the fields
//!   of a hash, the members of a sorted set are xored in, whatever order a hash table keeps.
//! - *mix* (`mix_digest`): xor, then the digest becomes the SHA-1 of itself. Order matters:
//!   the type, then the value's parts in sequence (a list's elements, a stream's entries),
//!   and within an unordered item its parts (a hash field, then its value).
//!
//! One key's digest starts at zero: mix its name, mix its type (Redis's type number, four bytes
//! in network order), then its value as the type says, then xor `!!expire!!` when it has a TTL
//! (whatever the TTL). The data set's digest starts at zero; for each non-empty database it
//! mixes the database number (four bytes, network order), then xors in each key's digest. An
//! empty data set's digest is forty zeros. `DIGEST-VALUE` answers, for each key, the digest of
//! its value alone (no name mixed in), zeros for a missing key. Both read keys whose TTL has
//! passed but that are not deleted yet, as Redis does.

use bytes::Bytes;
use sha1::{Digest, Sha1};

use super::Ctx;
use crate::db::{Entry, Value, NUM_DBS};
use crate::frame::{format_double, Frame};

/// A digest: twenty bytes, shown as forty lowercase hex digits.
type Sum = [u8; 20];

/// Xors the SHA-1 of `data` into `digest` (Redis's `xorDigest`).
fn xor_digest(digest: &mut Sum, data: &[u8]) {
    let hash = Sha1::digest(data);
    for (d, h) in digest.iter_mut().zip(hash.iter()) {
        *d ^= h;
    }
}

/// Xors the SHA-1 of `data` into `digest`, then replaces `digest` by its own SHA-1 (Redis's
/// `mixDigest`): what follows depends on what came before.
fn mix_digest(digest: &mut Sum, data: &[u8]) {
    xor_digest(digest, data);
    let again = Sha1::digest(&digest[..]);
    digest.copy_from_slice(&again);
}

/// Redis's number for each type (`OBJ_STRING` ... `OBJ_STREAM`), which the digest mixes in.
fn type_number(value: &Value) -> u32 {
    match value {
        Value::Str(_) => 0,
        Value::List(_) => 1,
        Value::Set(_) => 2,
        Value::ZSet(_) => 3,
        Value::Hash(_) => 4,
        Value::Stream(_) => 6,
    }
}

/// Mixes one value (with its TTL mark) into `digest`: Redis's `xorObjectDigest`.
fn value_digest(digest: &mut Sum, entry: &Entry) {
    let value = &entry.value;
    mix_digest(digest, &type_number(value).to_be_bytes());
    match value {
        Value::Str(s) => mix_digest(digest, &s[..]),
        Value::List(l) => {
            for e in l.iter() {
                mix_digest(digest, e);
            }
        }
        Value::Set(s) => {
            for m in s.members() {
                xor_digest(digest, &m);
            }
        }
        Value::ZSet(z) => {
            // Each member's own digest: its name mixed with its score as `%.17g`.
            for (member, score) in z.iter() {
                let mut one = [0u8; 20];
                mix_digest(&mut one, &member[..]);
                mix_digest(&mut one, format_double(score).as_bytes());
                xor_digest(digest, &one);
            }
        }
        Value::Hash(h) => {
            for (field, v) in h.iter() {
                let mut one = [0u8; 20];
                mix_digest(&mut one, &field[..]);
                mix_digest(&mut one, &v[..]);
                xor_digest(digest, &one);
            }
        }
        Value::Stream(s) => {
            // The entries in order: each ID as `ms.seq`, then its fields and values. (Not
            // the consumer groups, which Redis leaves out too.)
            use crate::stream_id::StreamId;
            for (id, fields) in s.range(StreamId::MIN, StreamId::MAX, false, usize::MAX) {
                mix_digest(digest, format!("{}.{}", id.ms, id.seq).as_bytes());
                for part in fields.iter() {
                    mix_digest(digest, &part[..]);
                }
            }
        }
    }
    if entry.expires_at().is_some() {
        xor_digest(digest, b"!!expire!!");
    }
}

fn hex(sum: &Sum) -> Frame {
    Frame::Simple(Bytes::from(hex::encode(sum)))
}

/// `DEBUG DIGEST`: the digest of every database's keys and values.
pub(crate) fn digest(ctx: &mut Ctx<'_>) -> Frame {
    let mut total = [0u8; 20];
    for db in 0..NUM_DBS {
        let map = ctx.shared.keyspace.db(db).map();
        if map.is_empty() {
            continue;
        }
        mix_digest(&mut total, &(db as u32).to_be_bytes());
        for item in map.iter() {
            let mut one = [0u8; 20];
            mix_digest(&mut one, item.key());
            value_digest(&mut one, item.value());
            xor_digest(&mut total, &one);
        }
    }
    hex(&total)
}

/// `DEBUG DIGEST-VALUE key ...`: each value's digest, in the client's database (zeros for a
/// key that does not exist).
pub(crate) fn digest_value(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let map = ctx.db().map();
    let sums = args[2..]
        .iter()
        .map(|key| {
            let mut one = [0u8; 20];
            if let Some(entry) = map.get(&key[..]) {
                value_digest(&mut one, entry.value());
            }
            hex(&one)
        })
        .collect();
    Frame::Array(sums)
}
