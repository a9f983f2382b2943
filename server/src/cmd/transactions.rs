//! Transactions: `MULTI`, `EXEC`, `DISCARD`, `WATCH`, `UNWATCH`.

use super::CommandSpec;

/// The commands of this family.
pub const COMMANDS: &[CommandSpec] = &[];
