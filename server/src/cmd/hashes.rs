//! Hash commands (`HSET`, `HGET`, ...): the reentrant lock's `{owner: count}` lives in a hash.

use super::CommandSpec;

/// The commands of this family.
pub const COMMANDS: &[CommandSpec] = &[];
