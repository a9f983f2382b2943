//! The `latchkey:lease` proposal (`plugin/wit/lease`): leases on the keys of a `wasi:keyvalue`
//! bucket, with a fencing number.
//!
//! The lease on key `k` of bucket `b` is the string key `{kv:b}:lease:k` in the tenant's
//! namespace (same hash tag as the bucket), holding the grant's token with a TTL of at most
//! [`crate::Limits::key_ttl_max`]; its fencing counter is a field of the bucket's versions hash
//! whose name starts with the byte `\253` (not valid UTF-8, so no key-value key is one). A
//! bucket holds at most [`crate::Limits::kv_entries`] fencing counters.

use latchkey_client::Reply;
use wasmtime::component::{HasSelf, Linker, Resource};

use super::host::{no_error, other};
use super::scripts;
use super::wasi::keyvalue::store::Error;
use super::Bucket;
use crate::state::TenantState;

mod bindings {
    wasmtime::component::bindgen!({
        world: "latchkey:lease/imports@0.1.0",
        path: ["wit/keyvalue", "wit/lease"],
        imports: { default: async | trappable },
        with: {
            "wasi:keyvalue/store": crate::keyvalue::wasi::keyvalue::store,
        },
    });
}

use bindings::latchkey::lease::lease::{self as iface, Grant};

/// Adds the `lease` interface to a tenant linker.
pub(crate) fn add_to_linker(linker: &mut Linker<TenantState>) -> wasmtime::Result<()> {
    iface::add_to_linker::<_, HasSelf<_>>(linker, |s| s)
}

/// Where the lease on `key` lives, and the field of its fencing counter.
fn lease_keys(b: &Bucket, key: &str) -> (Vec<u8>, Vec<u8>) {
    let mut lease = b.values.clone();
    lease.extend_from_slice(b":lease:");
    lease.extend_from_slice(key.as_bytes());
    let mut field = vec![0xfd];
    field.extend_from_slice(key.as_bytes());
    (lease, field)
}

impl TenantState {
    /// Checks a lease TTL: 1 ms to the tenant's key TTL ceiling.
    fn lease_ttl(&self, ttl_ms: u64) -> Result<(), Error> {
        let max = self.limits.key_ttl_max.as_millis();
        if ttl_ms == 0 || ttl_ms as u128 > max {
            return Err(other(format!(
                "a lease's ttl-ms must be from 1 to {max} for tenants"
            )));
        }
        Ok(())
    }

    /// Runs a lease script on `keys`.
    async fn lease_eval(
        &mut self,
        script: &latchkey_client::scripts::Script,
        keys: &[&[u8]],
        argv: Vec<Vec<u8>>,
    ) -> Result<Reply, Error> {
        self.kv_bytes(argv.iter().map(Vec::len).sum()).await;
        no_error(
            scripts::eval(&*self.backend, script, keys, argv)
                .await
                .map_err(other)?,
        )
    }

    /// `renew` and `release`: the script's 1 or 0 as a bool.
    async fn lease_owned(
        &mut self,
        bucket: Resource<Bucket>,
        grant: Grant,
        script: &latchkey_client::scripts::Script,
        ttl_ms: Option<u64>,
    ) -> wasmtime::Result<Result<bool, Error>> {
        self.enter().await?;
        let b = self.bucket(&bucket)?;
        if let Err(e) = self
            .kv_key(&grant.key)
            .and_then(|()| ttl_ms.map_or(Ok(()), |t| self.lease_ttl(t)))
        {
            return Ok(Err(e));
        }
        let (lease, _) = lease_keys(&b, &grant.key);
        let mut argv = vec![grant.token.into_bytes()];
        argv.extend(ttl_ms.map(|t| t.to_string().into_bytes()));
        Ok(match self.lease_eval(script, &[&lease], argv).await {
            Ok(Reply::Int(n)) => Ok(n == 1),
            Ok(r) => Err(other(format!("unexpected reply: {r:?}"))),
            Err(e) => Err(e),
        })
    }
}

impl iface::Host for TenantState {
    async fn acquire(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        ttl_ms: u64,
    ) -> wasmtime::Result<Result<Option<Grant>, Error>> {
        self.enter().await?;
        let b = self.bucket(&bucket)?;
        if let Err(e) = self.kv_key(&key).and_then(|()| self.lease_ttl(ttl_ms)) {
            return Ok(Err(e));
        }
        let (lease, field) = lease_keys(&b, &key);
        let mut raw = [0u8; 20];
        rand::fill(&mut raw[..]);
        let token = hex::encode(raw);
        let argv = vec![
            token.clone().into_bytes(),
            ttl_ms.to_string().into_bytes(),
            field,
            self.limits.kv_entries.to_string().into_bytes(),
        ];
        let keys: [&[u8]; 3] = [&lease, &b.versions, &b.values];
        Ok(
            match self.lease_eval(&scripts::LEASE_ACQUIRE, &keys, argv).await {
                Ok(Reply::Int(-1)) => Ok(None),
                Ok(Reply::Int(-2)) => Err(other(format!(
                    "the bucket holds its limit of {} fencing counters",
                    self.limits.kv_entries
                ))),
                Ok(Reply::Int(fence)) if fence > 0 => Ok(Some(Grant {
                    key,
                    token,
                    fence: fence as u64,
                })),
                Ok(r) => Err(other(format!("unexpected reply: {r:?}"))),
                Err(e) => Err(e),
            },
        )
    }

    async fn renew(
        &mut self,
        bucket: Resource<Bucket>,
        grant: Grant,
        ttl_ms: u64,
    ) -> wasmtime::Result<Result<bool, Error>> {
        self.lease_owned(bucket, grant, &scripts::LEASE_RENEW, Some(ttl_ms))
            .await
    }

    async fn release(
        &mut self,
        bucket: Resource<Bucket>,
        grant: Grant,
    ) -> wasmtime::Result<Result<bool, Error>> {
        self.lease_owned(bucket, grant, &scripts::LEASE_RELEASE, None)
            .await
    }
}
