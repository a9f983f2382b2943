//! Scripting commands (`EVAL`, `EVALSHA`, `SCRIPT`, `FUNCTION`, `FCALL`).

use super::CommandSpec;

/// The commands of this family.
pub const COMMANDS: &[CommandSpec] = &[];
