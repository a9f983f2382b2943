//! The `wasi:keyvalue` host functions of a tenant's instance: each checks that the instance
//! was not interrupted and takes a token of the tenant's rate (`enter`), checks sizes, charges
//! the bytes it sends, and runs one command or one script on the primary server.

use latchkey_client::Reply;
use wasmtime::component::Resource;

use super::wasi::keyvalue::atomics::{self, CasError};
use super::wasi::keyvalue::batch;
use super::wasi::keyvalue::store::{self, Error, KeyResponse};
use super::{scripts, valid_bucket, Bucket, Cas};
use crate::state::TenantState;

/// What `increment`, `get`... answer when the server fails or refuses: `other`, with its text.
pub(super) fn other(e: impl Into<String>) -> Error {
    Error::Other(e.into())
}

/// A reply that is an error, as an `other` error.
pub(super) fn no_error(r: Reply) -> Result<Reply, Error> {
    match r {
        Reply::Error(e) => Err(other(e)),
        r => Ok(r),
    }
}

/// Shorthand for a command's arguments.
fn cmd<const N: usize>(parts: [&[u8]; N]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

impl TenantState {
    /// The bucket behind a handle.
    pub(super) fn bucket(&self, b: &Resource<Bucket>) -> wasmtime::Result<Bucket> {
        Ok(self.table.get(b)?.clone())
    }

    /// Checks a key's size.
    pub(super) fn kv_key(&self, key: &str) -> Result<(), Error> {
        let max = self.limits.kv_key_bytes;
        if key.len() > max {
            return Err(other(format!(
                "a key of {} bytes is over the tenant's limit of {max}",
                key.len()
            )));
        }
        Ok(())
    }

    /// Checks a value's size.
    fn kv_value(&self, value: &[u8]) -> Result<(), Error> {
        let max = self.limits.kv_value_bytes;
        if value.len() > max {
            return Err(other(format!(
                "a value of {} bytes is over the tenant's limit of {max}",
                value.len()
            )));
        }
        Ok(())
    }

    /// Charges `n` bytes sent to the tenant's byte rate.
    pub(super) async fn kv_bytes(&mut self, n: usize) {
        self.budget.bytes.acquire_n(n as f64).await;
    }

    /// Runs a command on the primary.
    async fn kv_command(&mut self, args: Vec<Vec<u8>>) -> Result<Reply, Error> {
        no_error(self.backend.command(args).await.map_err(other)?)
    }

    /// Runs one of the host's scripts on `bucket`.
    async fn kv_eval(
        &mut self,
        script: &latchkey_client::scripts::Script,
        bucket: &Bucket,
        argv: Vec<Vec<u8>>,
    ) -> Result<Reply, Error> {
        let keys: [&[u8]; 2] = [&bucket.values, &bucket.versions];
        no_error(
            scripts::eval(&*self.backend, script, &keys, argv)
                .await
                .map_err(other)?,
        )
    }

    /// The refusal for a full bucket.
    fn full(&self) -> Error {
        other(format!(
            "the bucket holds its limit of {} keys",
            self.limits.kv_entries
        ))
    }

    /// Reads a CAS handle's snapshot of `key` in `bucket`.
    async fn cas_read(&mut self, bucket: Bucket, key: String) -> Result<Cas, Error> {
        let r = self
            .kv_eval(&scripts::CAS_READ, &bucket, vec![key.clone().into_bytes()])
            .await?;
        let Reply::Array(parts) = r else {
            return Err(other(format!("unexpected reply: {r:?}")));
        };
        let bulk = |r: Option<&Reply>| match r {
            Some(Reply::Bulk(b)) => Some(b.clone()),
            _ => None,
        };
        Ok(Cas {
            value: bulk(parts.first()),
            version: bulk(parts.get(1)).unwrap_or_default(),
            seq: bulk(parts.get(2)).unwrap_or_else(|| b"0".to_vec()),
            bucket,
            key,
        })
    }

    /// `get-many` once the keys are copied and checked.
    pub(crate) async fn kv_get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> wasmtime::Result<Result<Vec<(String, Option<Vec<u8>>)>, Error>> {
        let b = self.bucket(&bucket)?;
        if let Some(e) = keys.iter().find_map(|k| self.kv_key(k).err()) {
            return Ok(Err(e));
        }
        if keys.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let mut args = vec![b"HMGET".to_vec(), b.values.clone()];
        args.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
        self.kv_bytes(args.iter().map(Vec::len).sum()).await;
        let r = match self.kv_command(args).await {
            Ok(Reply::Array(v)) => v,
            Ok(r) => return Ok(Err(other(format!("unexpected reply: {r:?}")))),
            Err(e) => return Ok(Err(e)),
        };
        Ok(Ok(keys
            .into_iter()
            .zip(r)
            .map(|(k, v)| match v {
                Reply::Bulk(b) => (k, Some(b)),
                _ => (k, None),
            })
            .collect()))
    }

    /// `set-many` once the pairs are copied and checked.
    pub(crate) async fn kv_set_many(
        &mut self,
        bucket: Resource<Bucket>,
        pairs: Vec<(String, Vec<u8>)>,
    ) -> wasmtime::Result<Result<(), Error>> {
        let b = self.bucket(&bucket)?;
        for (k, v) in &pairs {
            if let Err(e) = self.kv_key(k).and_then(|()| self.kv_value(v)) {
                return Ok(Err(e));
            }
        }
        if pairs.is_empty() {
            return Ok(Ok(()));
        }
        let mut argv = vec![self.limits.kv_entries.to_string().into_bytes()];
        for (k, v) in pairs {
            argv.push(k.into_bytes());
            argv.push(v);
        }
        self.kv_bytes(argv.iter().map(Vec::len).sum()).await;
        Ok(match self.kv_eval(&scripts::SET_MANY, &b, argv).await {
            Ok(Reply::Int(1)) => Ok(()),
            Ok(Reply::Int(-1)) => Err(self.full()),
            Ok(r) => Err(other(format!("unexpected reply: {r:?}"))),
            Err(e) => Err(e),
        })
    }

    /// `delete-many` once the keys are copied and checked.
    pub(crate) async fn kv_delete_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> wasmtime::Result<Result<(), Error>> {
        let b = self.bucket(&bucket)?;
        if let Some(e) = keys.iter().find_map(|k| self.kv_key(k).err()) {
            return Ok(Err(e));
        }
        if keys.is_empty() {
            return Ok(Ok(()));
        }
        let argv: Vec<Vec<u8>> = keys.into_iter().map(String::into_bytes).collect();
        self.kv_bytes(argv.iter().map(Vec::len).sum()).await;
        Ok(self
            .kv_eval(&scripts::DELETE_MANY, &b, argv)
            .await
            .map(|_| ()))
    }
}

impl store::Host for TenantState {
    async fn open(
        &mut self,
        identifier: String,
    ) -> wasmtime::Result<Result<Resource<Bucket>, Error>> {
        self.enter().await?;
        if !valid_bucket(&identifier) {
            return Ok(Err(Error::NoSuchStore));
        }
        let tag = format!("{{kv:{identifier}}}");
        let bucket = Bucket {
            values: self.ns.key(tag.as_bytes()),
            versions: self.ns.key(format!("{tag}:ver").as_bytes()),
        };
        // A bucket is counted by its versions hash: the one that stays once it was written.
        let admitted = self
            .budget
            .buckets
            .admit(
                &*self.backend,
                self.ns.tenant(),
                &bucket.versions,
                &self.budget.calls,
            )
            .await;
        if let Err(e) = admitted {
            return Ok(Err(other(e)));
        }
        Ok(Ok(self.table.push(bucket)?))
    }
}

impl store::HostBucket for TenantState {
    async fn get(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        self.enter().await?;
        let b = self.bucket(&bucket)?;
        if let Err(e) = self.kv_key(&key) {
            return Ok(Err(e));
        }
        Ok(
            match self
                .kv_command(cmd([b"HGET", &b.values, key.as_bytes()]))
                .await
            {
                Ok(Reply::Bulk(v)) => Ok(Some(v)),
                Ok(Reply::Nil) => Ok(None),
                Ok(r) => Err(other(format!("unexpected reply: {r:?}"))),
                Err(e) => Err(e),
            },
        )
    }

    async fn set(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), Error>> {
        self.enter().await?;
        let b = self.bucket(&bucket)?;
        if let Err(e) = self.kv_key(&key).and_then(|()| self.kv_value(&value)) {
            return Ok(Err(e));
        }
        self.kv_bytes(key.len() + value.len()).await;
        let argv = vec![
            key.into_bytes(),
            value,
            self.limits.kv_entries.to_string().into_bytes(),
        ];
        Ok(match self.kv_eval(&scripts::SET, &b, argv).await {
            Ok(Reply::Int(1)) => Ok(()),
            Ok(Reply::Int(-1)) => Err(self.full()),
            Ok(r) => Err(other(format!("unexpected reply: {r:?}"))),
            Err(e) => Err(e),
        })
    }

    async fn delete(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<(), Error>> {
        self.enter().await?;
        if let Err(e) = self.kv_key(&key) {
            return Ok(Err(e));
        }
        self.kv_delete_many(bucket, vec![key]).await
    }

    async fn exists(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<bool, Error>> {
        self.enter().await?;
        let b = self.bucket(&bucket)?;
        if let Err(e) = self.kv_key(&key) {
            return Ok(Err(e));
        }
        Ok(
            match self
                .kv_command(cmd([b"HEXISTS", &b.values, key.as_bytes()]))
                .await
            {
                Ok(Reply::Int(n)) => Ok(n == 1),
                Ok(r) => Err(other(format!("unexpected reply: {r:?}"))),
                Err(e) => Err(e),
            },
        )
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<String>,
    ) -> wasmtime::Result<Result<KeyResponse, Error>> {
        self.enter().await?;
        let b = self.bucket(&bucket)?;
        let cursor = cursor.unwrap_or_else(|| "0".into());
        if cursor.parse::<u64>().is_err() {
            return Ok(Err(other(format!("invalid cursor {cursor:?}"))));
        }
        let r = self
            .kv_command(cmd([
                b"HSCAN",
                &b.values,
                cursor.as_bytes(),
                b"COUNT",
                b"100",
            ]))
            .await;
        let parts = match r {
            Ok(Reply::Array(parts)) if parts.len() == 2 => parts,
            Ok(r) => return Ok(Err(other(format!("unexpected reply: {r:?}")))),
            Err(e) => return Ok(Err(e)),
        };
        let mut parts = parts.into_iter();
        let next = match parts.next() {
            Some(Reply::Bulk(c)) => String::from_utf8_lossy(&c).into_owned(),
            r => return Ok(Err(other(format!("unexpected cursor: {r:?}")))),
        };
        let Some(Reply::Array(items)) = parts.next() else {
            return Ok(Err(other("unexpected HSCAN page")));
        };
        // Field, value, field, value...: the fields are the keys (set from WIT strings, so
        // valid UTF-8).
        let keys = items
            .into_iter()
            .step_by(2)
            .filter_map(|f| match f {
                Reply::Bulk(k) => String::from_utf8(k).ok(),
                _ => None,
            })
            .collect();
        Ok(Ok(KeyResponse {
            keys,
            cursor: (next != "0").then_some(next),
        }))
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(bucket)?;
        Ok(())
    }
}

impl atomics::Host for TenantState {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: i64,
    ) -> wasmtime::Result<Result<i64, Error>> {
        self.enter().await?;
        let b = self.bucket(&bucket)?;
        if let Err(e) = self.kv_key(&key) {
            return Ok(Err(e));
        }
        self.kv_bytes(key.len() + 20).await;
        let argv = vec![
            key.into_bytes(),
            delta.to_string().into_bytes(),
            self.limits.kv_entries.to_string().into_bytes(),
        ];
        Ok(match self.kv_eval(&scripts::INCREMENT, &b, argv).await {
            Ok(Reply::Int(n)) => Ok(n),
            Ok(r) => Err(other(format!("unexpected reply: {r:?}"))),
            Err(e) => Err(e),
        })
    }

    async fn swap(
        &mut self,
        cas: Resource<Cas>,
        value: Vec<u8>,
    ) -> wasmtime::Result<Result<(), CasError>> {
        self.enter().await?;
        // The handle is consumed, whatever happens.
        let c = self.table.delete(cas)?;
        if let Err(e) = self.kv_value(&value) {
            return Ok(Err(CasError::StoreError(e)));
        }
        self.kv_bytes(c.key.len() + value.len()).await;
        let argv = vec![
            c.key.clone().into_bytes(),
            value,
            c.version.clone(),
            c.seq.clone(),
            self.limits.kv_entries.to_string().into_bytes(),
        ];
        Ok(
            match self.kv_eval(&scripts::CAS_SWAP, &c.bucket, argv).await {
                Ok(Reply::Int(1)) => Ok(()),
                Ok(Reply::Int(0)) => {
                    // Changed since: a fresh handle, read now, for the retry.
                    match self.cas_read(c.bucket, c.key).await {
                        Ok(fresh) => Err(CasError::CasFailed(self.table.push(fresh)?)),
                        Err(e) => Err(CasError::StoreError(e)),
                    }
                }
                Ok(Reply::Int(-1)) => Err(CasError::StoreError(self.full())),
                Ok(r) => Err(CasError::StoreError(other(format!(
                    "unexpected reply: {r:?}"
                )))),
                Err(e) => Err(CasError::StoreError(e)),
            },
        )
    }
}

impl atomics::HostCas for TenantState {
    async fn new(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
    ) -> wasmtime::Result<Result<Resource<Cas>, Error>> {
        self.enter().await?;
        let b = self.bucket(&bucket)?;
        if let Err(e) = self.kv_key(&key) {
            return Ok(Err(e));
        }
        match self.cas_read(b, key).await {
            Ok(c) => Ok(Ok(self.table.push(c)?)),
            Err(e) => Ok(Err(e)),
        }
    }

    async fn current(
        &mut self,
        cas: Resource<Cas>,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        self.enter().await?;
        Ok(Ok(self.table.get(&cas)?.value.clone()))
    }

    async fn drop(&mut self, cas: Resource<Cas>) -> wasmtime::Result<()> {
        self.table.delete(cas)?;
        Ok(())
    }
}

impl batch::Host for TenantState {
    async fn get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> wasmtime::Result<Result<Vec<(String, Option<Vec<u8>>)>, Error>> {
        self.enter().await?;
        self.kv_get_many(bucket, keys).await
    }

    async fn set_many(
        &mut self,
        bucket: Resource<Bucket>,
        key_values: Vec<(String, Vec<u8>)>,
    ) -> wasmtime::Result<Result<(), Error>> {
        self.enter().await?;
        self.kv_set_many(bucket, key_values).await
    }

    async fn delete_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> wasmtime::Result<Result<(), Error>> {
        self.enter().await?;
        self.kv_delete_many(bucket, keys).await
    }
}
