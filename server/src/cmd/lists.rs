//! List commands, including the blocking `BLPOP`/`BRPOP` that some lock libraries wait with.

use super::CommandSpec;

/// The commands of this family.
pub const COMMANDS: &[CommandSpec] = &[];
