//! The previous release, `wasi:keyvalue@0.2.0-draft` (`plugin/wit/keyvalue-draft`), served
//! beside 0.2.0-draft2 on the same buckets: it has no CAS, increments by a `u64`, and pages
//! `list-keys` with a numeric cursor. Every function delegates to the draft2 implementation
//! (same bounds, same namespace); only the types are converted. It is here so that a guest
//! can run both on this host and on wasmtime's own in-memory host, which implements only
//! this release.

use wasmtime::component::{HasSelf, Linker, Resource};

use super::wasi::keyvalue::store as draft2;
use super::Bucket;
use crate::state::TenantState;

pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        world: "wasi:keyvalue/imports@0.2.0-draft",
        path: "wit/keyvalue-draft",
        imports: { default: async | trappable },
        with: {
            "wasi:keyvalue/store.bucket": crate::keyvalue::Bucket,
        },
    });
}

use bindings::wasi::keyvalue::{atomics, batch, store};
use store::{Error, KeyResponse};

/// A draft2 error as this release's.
pub(crate) fn error(e: draft2::Error) -> Error {
    match e {
        draft2::Error::NoSuchStore => Error::NoSuchStore,
        draft2::Error::AccessDenied => Error::AccessDenied,
        draft2::Error::Other(t) => Error::Other(t),
    }
}

/// Adds this release to a tenant linker (its batch imports are then replaced by bounded ones,
/// see [`super::bounded`]).
pub(crate) fn add_to_linker(linker: &mut Linker<TenantState>) -> wasmtime::Result<()> {
    bindings::Imports::add_to_linker::<_, HasSelf<_>>(linker, |s| s)
}

impl store::Host for TenantState {
    async fn open(
        &mut self,
        identifier: String,
    ) -> wasmtime::Result<Result<Resource<Bucket>, Error>> {
        Ok(draft2::Host::open(self, identifier).await?.map_err(error))
    }
}

impl store::HostBucket for TenantState {
    async fn get(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        Ok(draft2::HostBucket::get(self, bucket, key)
            .await?
            .map_err(error))
    }

    async fn set(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), Error>> {
        Ok(draft2::HostBucket::set(self, bucket, key, value)
            .await?
            .map_err(error))
    }

    async fn delete(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<(), Error>> {
        Ok(draft2::HostBucket::delete(self, bucket, key)
            .await?
            .map_err(error))
    }

    async fn exists(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<bool, Error>> {
        Ok(draft2::HostBucket::exists(self, bucket, key)
            .await?
            .map_err(error))
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<u64>,
    ) -> wasmtime::Result<Result<KeyResponse, Error>> {
        let cursor = cursor.map(|c| c.to_string());
        Ok(
            match draft2::HostBucket::list_keys(self, bucket, cursor).await? {
                Ok(page) => match page.cursor.map(|c| c.parse::<u64>()).transpose() {
                    Ok(cursor) => Ok(KeyResponse {
                        keys: page.keys,
                        cursor,
                    }),
                    Err(e) => Err(Error::Other(format!("cursor: {e}"))),
                },
                Err(e) => Err(error(e)),
            },
        )
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        draft2::HostBucket::drop(self, bucket).await
    }
}

impl atomics::Host for TenantState {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: u64,
    ) -> wasmtime::Result<Result<u64, Error>> {
        let Ok(delta) = i64::try_from(delta) else {
            return Ok(Err(Error::Other(format!(
                "an increment of {delta} is over the largest this host keeps (2^63 - 1)"
            ))));
        };
        Ok(
            match super::wasi::keyvalue::atomics::Host::increment(self, bucket, key, delta).await? {
                Ok(n) => u64::try_from(n)
                    .map_err(|_| Error::Other(format!("the value {n} is not a u64"))),
                Err(e) => Err(error(e)),
            },
        )
    }
}

impl batch::Host for TenantState {
    async fn get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> wasmtime::Result<Result<Vec<Option<(String, Vec<u8>)>>, Error>> {
        self.enter().await?;
        self.draft_get_many(bucket, keys).await
    }

    async fn set_many(
        &mut self,
        bucket: Resource<Bucket>,
        key_values: Vec<(String, Vec<u8>)>,
    ) -> wasmtime::Result<Result<(), Error>> {
        self.enter().await?;
        Ok(self.kv_set_many(bucket, key_values).await?.map_err(error))
    }

    async fn delete_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> wasmtime::Result<Result<(), Error>> {
        self.enter().await?;
        Ok(self.kv_delete_many(bucket, keys).await?.map_err(error))
    }
}

impl TenantState {
    /// This release's `get-many`: a missing key is `none` (not `(key, none)`).
    pub(crate) async fn draft_get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> wasmtime::Result<Result<Vec<Option<(String, Vec<u8>)>>, Error>> {
        Ok(self
            .kv_get_many(bucket, keys)
            .await?
            .map(|pairs| pairs.into_iter().map(|(k, v)| v.map(|v| (k, v))).collect())
            .map_err(error))
    }
}
