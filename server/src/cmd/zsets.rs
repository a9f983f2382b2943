//! Sorted-set commands: fair locks and semaphores keep their queues and permit deadlines in sorted sets.

use super::CommandSpec;

/// The commands of this family.
pub const COMMANDS: &[CommandSpec] = &[];
