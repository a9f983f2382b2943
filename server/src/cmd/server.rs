//! Server commands: `INFO`, `CONFIG`, `COMMAND`, `DBSIZE`, `FLUSHALL`, `TIME`, `DEBUG`, `SHUTDOWN`.

use super::CommandSpec;

/// The commands of this family.
pub const COMMANDS: &[CommandSpec] = &[];
