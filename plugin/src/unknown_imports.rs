//! [`crate::HostConfig::trap_unknown_imports`]: imports of interfaces the host does not serve
//! at all, stubbed so that calling one traps.
//!
//! Some toolchains import interfaces a tenant never calls: a JavaScript component made by
//! `componentize-js` imports `wasi:http/types` (its runtime's `fetch`), which a lock host has
//! no business serving. wasmtime's `Linker::define_unknown_imports_as_traps` would stub those,
//! but it also gives a fresh type to every resource the linker does not name in that very
//! instance, including the ones an interface only `use`s from another (`atomics` uses
//! `store.bucket`), and the component is then refused for "mismatched resource types". So the
//! stubbing is done here, narrowly:
//!
//! - only interfaces of packages the host serves none of ([`SERVED`]): a component that
//!   imports `wasi:keyvalue` at a version or shape the host does not serve is still refused at
//!   load, with wasmtime's reason;
//! - a resource the component imported earlier under another name (a `use`) keeps its type.

use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker, ResourceType};
use wasmtime::Engine;

use crate::state::TenantState;

/// The packages whose interfaces the host serves (WASI 0.2's command imports, the standard
/// key-value store, latchkey's own): an import from any other package is unknown.
pub(crate) const SERVED: &[&str] = &[
    "wasi:cli",
    "wasi:io",
    "wasi:clocks",
    "wasi:random",
    "wasi:filesystem",
    "wasi:sockets",
    "wasi:keyvalue",
    "latchkey:locks",
    "latchkey:lease",
];

/// The type given to the resources of an unknown interface (never constructed: every function
/// that could make one traps).
struct Unknown;

/// Whether `import` (`package/interface@version`) is an interface of a served package.
fn served(import: &str) -> bool {
    let package = import.split('/').next().unwrap_or(import);
    SERVED.contains(&package)
}

/// Defines, in `linker`, every function of `component`'s unknown imports as a trap and each of
/// their own resources as a type nothing can make.
pub(crate) fn trap_unknown(
    linker: &mut Linker<TenantState>,
    engine: &Engine,
    component: &Component,
) -> wasmtime::Result<()> {
    let ty = component.component_type();
    // The resource types imported so far, in import order: a `use` of one names it again.
    let mut seen: Vec<ResourceType> = Vec::new();
    for (name, import) in ty.imports(engine) {
        let ComponentItem::ComponentInstance(instance) = import.ty else {
            continue;
        };
        let known = served(name);
        for (export, item) in instance.exports(engine) {
            match item.ty {
                ComponentItem::Resource(r) if seen.contains(&r) => {}
                ComponentItem::Resource(r) => {
                    seen.push(r);
                    if !known {
                        linker.instance(name)?.resource(
                            export,
                            ResourceType::host::<Unknown>(),
                            |_, _| Ok(()),
                        )?;
                    }
                }
                ComponentItem::ComponentFunc(_) if !known => {
                    let what = format!("{name}#{export}");
                    linker.instance(name)?.func_new(export, move |_, _, _, _| {
                        wasmtime::bail!("`{what}` is not served by this host")
                    })?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::served;

    #[test]
    fn only_whole_packages_the_host_serves_none_of_are_unknown() {
        assert!(served("wasi:keyvalue/atomics@0.2.0-draft2"));
        assert!(served("wasi:io/poll@0.2.12"));
        assert!(served("latchkey:lease/lease@0.1.0"));
        assert!(!served("wasi:http/types@0.2.10"));
        assert!(!served("wasi:keyvalueX/store@0.2.0"));
        assert!(!served("acme:thing/api"));
    }
}
