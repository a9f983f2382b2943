//! The host's `wasi:keyvalue` (0.2.0-draft2: `store`, `atomics`, `batch`), so that a component
//! written for other runtimes against the standard interface runs here unchanged; and the
//! `latchkey:lease` proposal in the same style ([`lease`]). The previous release,
//! 0.2.0-draft, is served too, on the same buckets ([`draft`]).
//!
//! **Where a bucket lives.** A bucket is two hashes inside the tenant's namespace, under one
//! hash tag (one Cluster slot), so that every operation on a bucket is one command or one
//! script on one server:
//!
//! - `{kv:<bucket>}`: the values, one field per key;
//! - `{kv:<bucket>}:ver`: each key's version (a number from the bucket's own counter, drawn at
//!   every write), the counter itself, and the counter's value at the last delete. Its fields
//!   for the counter are not valid UTF-8, so no `wasi:keyvalue` key (a WIT `string`) can be
//!   one of them.
//!
//! With the namespace, bucket `b` of tenant `t` is `{t:kv:b}` on the server. A bucket name is up
//! to 64 ASCII letters, digits, `-`, `_` or `.` (the empty name is the default bucket;
//! [`valid_bucket`]); any other is `no-such-store`. (A lock of the same tenant named `kv:<bucket>` would share the hash tag;
//! its key `{kv:<bucket>}` would be the bucket's hash: don't name locks so.)
//!
//! **Semantics** (see `docs/keyvalue.md` for what they give over a replicated Redis):
//!
//! - every operation goes to the host's primary server, and each is one command or one Lua
//!   script there, so each is atomic on that server and a tenant reads its own writes;
//! - `increment` on a missing key creates it with the delta (the standard's words); on a value
//!   that is not a decimal integer, or past `s64`, it is an `other` error and nothing changes;
//! - `cas::new` reads the value and its version in one script; `swap` writes only if the key's
//!   version is still the one read (so a change and a change back, A→B→A, still fails it),
//!   or, for a key that was missing, if it is still missing and nothing in the bucket was
//!   deleted since (a conservative test: it may fail a swap that could have succeeded, never
//!   the reverse). A failed swap returns a new handle read afresh, as the standard requires;
//! - `get-many` is one `HMGET`, `set-many` and `delete-many` one script each: all or nothing
//!   on the server, which is more than the standard promises (it allows partial batches);
//! - `list-keys` pages with `HSCAN`: a key present the whole time is listed at least once; one
//!   may be listed twice, and one written meanwhile may or may not be.
//!
//! **Bounds.** Every import is one call of the tenant's rate limit, its bytes go through the
//! byte rate, keys and values have a size limit ([`crate::Limits::kv_key_bytes`],
//! [`crate::Limits::kv_value_bytes`]), a batch at most [`crate::Limits::args_per_call`] keys and
//! [`crate::Limits::bytes_per_call`] bytes (checked on the list's shape before it is copied
//! out of the guest: [`bounded`]), a bucket at most [`crate::Limits::kv_entries`] keys, a
//! tenant at most [`crate::Limits::kv_buckets`] buckets (counted on the server), and the
//! handles (buckets, CAS handles) live in the instance's WASI resource table, bounded by
//! [`crate::Limits::wasi_resources`].

pub(crate) mod bounded;
mod draft;
mod host;
mod lease;
mod scripts;

use wasmtime::component::{HasSelf, Linker};

use crate::state::TenantState;

wasmtime::component::bindgen!({
    world: "wasi:keyvalue/imports@0.2.0-draft2",
    path: "wit/keyvalue",
    imports: { default: async | trappable },
    with: {
        "wasi:keyvalue/store.bucket": crate::keyvalue::Bucket,
        "wasi:keyvalue/atomics.cas": crate::keyvalue::Cas,
    },
});

/// An open bucket: where its two hashes are on the server (namespaced).
#[derive(Debug, Clone)]
pub struct Bucket {
    /// The values hash.
    values: Vec<u8>,
    /// The versions hash.
    versions: Vec<u8>,
}

/// A CAS handle: what `cas::new` read, and where.
#[derive(Debug, Clone)]
pub struct Cas {
    bucket: Bucket,
    key: String,
    /// The value read, `None` when the key was missing.
    value: Option<Vec<u8>>,
    /// The key's version when read (empty when the key was missing).
    version: Vec<u8>,
    /// The bucket's counter when read.
    seq: Vec<u8>,
}

/// Whether `name` may name a bucket: up to 64 ASCII letters, digits, `-`, `_` or `.` (no `{`,
/// `}` or `:`, so a bucket's hash tag is unambiguous). The empty name is the default bucket, as
/// in wasmtime's own in-memory host.
pub fn valid_bucket(name: &str) -> bool {
    name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Adds `wasi:keyvalue` and `latchkey:lease` to a tenant linker, then replaces the batch imports by their bounded
/// versions.
pub(crate) fn add_to_linker(linker: &mut Linker<TenantState>) -> wasmtime::Result<()> {
    Imports::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    lease::add_to_linker(linker)?;
    draft::add_to_linker(linker)?;
    bounded::add_to_linker(linker)
}
