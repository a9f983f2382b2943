//! Pub/sub commands: waiting locks sleep until the holder's unlock `PUBLISH` wakes them.

use super::CommandSpec;

/// The commands of this family.
pub const COMMANDS: &[CommandSpec] = &[];
