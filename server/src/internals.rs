//! Not API: what the fuzz targets, the regression tests and the in-process measurements need
//! from inside the server, behind the `internals` cargo feature.
//!
//! Everything an embedding application uses is at the crate root; nothing here is covered by
//! semantic versioning, and a build without the feature does not contain it. It exists so that
//! the checks which reach into the server (the keyspace a fuzz input left behind, the effects a
//! script recorded, the replication links a test cuts) live in the crate, next to the code they
//! check, instead of making that code public.

pub mod bench;
pub mod fuzz;
mod introspect;
mod measure;

pub use introspect::*;
pub use measure::{expire_cost, ExpireCost};
