//! The `wasi:keyvalue/batch` imports, bounded before anything is copied out of the guest.
//!
//! The generated bindings would copy a batch's whole list out of the guest before the host
//! could look at it, and a list may have a million entries that all point at one large guest
//! buffer. These definitions replace them: they refuse a list of more than
//! [`Limits::args_per_call`] entries from its length alone, then add up the entries' sizes one
//! by one (a string's size is read where it lies in guest memory, without a copy) and stop as
//! soon as they pass [`Limits::bytes_per_call`]; only then do they copy.

use wasmtime::component::{Linker, Resource, WasmList, WasmStr};
use wasmtime::{AsContext, AsContextMut, StoreContextMut};

use super::wasi::keyvalue::store::Error;
use super::{draft, Bucket};
use crate::limits::Limits;
use crate::state::TenantState;

/// The instance name of the batch interface, as the vendored WIT has it.
const BATCH: &str = "wasi:keyvalue/batch@0.2.0-draft2";
/// The same for the earlier release (see [`super::draft`]).
const BATCH_DRAFT: &str = "wasi:keyvalue/batch@0.2.0-draft";

/// The refusal for `n` entries, or `None` when within the bound.
fn too_many(n: usize, l: &Limits) -> Option<Error> {
    (n > l.args_per_call).then(|| {
        Error::Other(format!(
            "a batch of {n} keys is over the tenant's limit of {} per call",
            l.args_per_call
        ))
    })
}

/// The refusal for a batch over [`Limits::bytes_per_call`].
fn too_big(l: &Limits) -> Error {
    Error::Other(format!(
        "a batch of over {} bytes is over the tenant's limit per call",
        l.bytes_per_call
    ))
}

/// Copies a list of strings out of the guest, or says why not.
fn copy_keys(
    store: &mut StoreContextMut<'_, TenantState>,
    list: &WasmList<WasmStr>,
) -> wasmtime::Result<Result<Vec<String>, Error>> {
    let l = store.data().limits.clone();
    if let Some(e) = too_many(list.len(), &l) {
        return Ok(Err(e));
    }
    let items = list
        .iter(store.as_context_mut())?
        .collect::<wasmtime::Result<Vec<WasmStr>>>()?;
    let mut total = 0usize;
    for s in &items {
        total = total.saturating_add(s.to_str(store.as_context())?.len());
        if total > l.bytes_per_call {
            return Ok(Err(too_big(&l)));
        }
    }
    let keys = items
        .iter()
        .map(|s| Ok(s.to_str(store.as_context())?.into_owned()))
        .collect::<wasmtime::Result<Vec<String>>>()?;
    Ok(Ok(keys))
}

/// A batch's (key, value) pairs, copied out of the guest.
type Pairs = Vec<(String, Vec<u8>)>;

/// Copies a list of (key, value) pairs out of the guest, or says why not.
fn copy_pairs(
    store: &mut StoreContextMut<'_, TenantState>,
    list: &WasmList<(WasmStr, WasmList<u8>)>,
) -> wasmtime::Result<Result<Pairs, Error>> {
    let l = store.data().limits.clone();
    if let Some(e) = too_many(list.len(), &l) {
        return Ok(Err(e));
    }
    let items = list
        .iter(store.as_context_mut())?
        .collect::<wasmtime::Result<Vec<(WasmStr, WasmList<u8>)>>>()?;
    let mut total = 0usize;
    for (k, v) in &items {
        total = total
            .saturating_add(v.len())
            .saturating_add(k.to_str(store.as_context())?.len());
        if total > l.bytes_per_call {
            return Ok(Err(too_big(&l)));
        }
    }
    let pairs = items
        .iter()
        .map(|(k, v)| {
            Ok((
                k.to_str(store.as_context())?.into_owned(),
                v.as_le_slice(store.as_context()).to_vec(),
            ))
        })
        .collect::<wasmtime::Result<Vec<_>>>()?;
    Ok(Ok(pairs))
}

/// Replaces the generated batch imports by the bounded ones.
pub(crate) fn add_to_linker(linker: &mut Linker<TenantState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut batch = linker.instance(BATCH)?;
    batch.func_wrap_async(
        "get-many",
        |mut store: StoreContextMut<'_, TenantState>,
         (bucket, keys): (Resource<Bucket>, WasmList<WasmStr>)| {
            Box::new(async move {
                store.data_mut().enter().await?;
                let keys = match copy_keys(&mut store, &keys)? {
                    Ok(k) => k,
                    Err(e) => return Ok((Err(e),)),
                };
                Ok((store.data_mut().kv_get_many(bucket, keys).await?,))
            })
        },
    )?;
    batch.func_wrap_async(
        "set-many",
        |mut store: StoreContextMut<'_, TenantState>,
         (bucket, pairs): (Resource<Bucket>, WasmList<(WasmStr, WasmList<u8>)>)| {
            Box::new(async move {
                store.data_mut().enter().await?;
                let pairs = match copy_pairs(&mut store, &pairs)? {
                    Ok(p) => p,
                    Err(e) => return Ok((Err(e),)),
                };
                Ok((store.data_mut().kv_set_many(bucket, pairs).await?,))
            })
        },
    )?;
    batch.func_wrap_async(
        "delete-many",
        |mut store: StoreContextMut<'_, TenantState>,
         (bucket, keys): (Resource<Bucket>, WasmList<WasmStr>)| {
            Box::new(async move {
                store.data_mut().enter().await?;
                let keys = match copy_keys(&mut store, &keys)? {
                    Ok(k) => k,
                    Err(e) => return Ok((Err(e),)),
                };
                Ok((store.data_mut().kv_delete_many(bucket, keys).await?,))
            })
        },
    )?;
    // The earlier release: the same checks, its own types.
    let mut batch = linker.instance(BATCH_DRAFT)?;
    batch.func_wrap_async(
        "get-many",
        |mut store: StoreContextMut<'_, TenantState>,
         (bucket, keys): (Resource<Bucket>, WasmList<WasmStr>)| {
            Box::new(async move {
                store.data_mut().enter().await?;
                let keys = match copy_keys(&mut store, &keys)? {
                    Ok(k) => k,
                    Err(e) => return Ok((Err(draft::error(e)),)),
                };
                Ok((store.data_mut().draft_get_many(bucket, keys).await?,))
            })
        },
    )?;
    batch.func_wrap_async(
        "set-many",
        |mut store: StoreContextMut<'_, TenantState>,
         (bucket, pairs): (Resource<Bucket>, WasmList<(WasmStr, WasmList<u8>)>)| {
            Box::new(async move {
                store.data_mut().enter().await?;
                let pairs = match copy_pairs(&mut store, &pairs)? {
                    Ok(p) => p,
                    Err(e) => return Ok((Err(draft::error(e)),)),
                };
                let r = store.data_mut().kv_set_many(bucket, pairs).await?;
                Ok((r.map_err(draft::error),))
            })
        },
    )?;
    batch.func_wrap_async(
        "delete-many",
        |mut store: StoreContextMut<'_, TenantState>,
         (bucket, keys): (Resource<Bucket>, WasmList<WasmStr>)| {
            Box::new(async move {
                store.data_mut().enter().await?;
                let keys = match copy_keys(&mut store, &keys)? {
                    Ok(k) => k,
                    Err(e) => return Ok((Err(draft::error(e)),)),
                };
                let r = store.data_mut().kv_delete_many(bucket, keys).await?;
                Ok((r.map_err(draft::error),))
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}
