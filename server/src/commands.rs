//! The command table, read-only: which commands the server answers, how many arguments each
//! takes, and which of those arguments are keys.
//!
//! This is for code that sits in front of a server and must understand a command without
//! running it: a proxy that routes by key, a host that confines each tenant to its own key
//! prefix (latchkey's plugin host rewrites every key argument this way), a fuzzer that picks
//! real command names. The table is Redis's own (`COMMAND INFO` shows the same numbers).
//!
//! ```
//! let set = latchkey_server::commands::lookup(b"set").unwrap();
//! assert_eq!(set.name(), "set");
//! assert_eq!(set.key_positions(5), vec![1]); // SET key value PX 100
//! let mset = latchkey_server::commands::lookup(b"MSET").unwrap();
//! assert_eq!(mset.key_positions(5), vec![1, 3]); // MSET k1 v1 k2 v2
//! ```

use crate::command::{self, CommandSpec};

/// One command of the table: its name, arity and where its keys are.
#[derive(Clone, Copy)]
pub struct CommandInfo {
    spec: &'static CommandSpec,
}

impl CommandInfo {
    /// The command's name, lowercase (`"set"`).
    pub fn name(&self) -> &'static str {
        self.spec.name
    }

    /// Redis's arity: `N` means exactly `N` arguments counting the name, `-N` at least `N`.
    pub fn arity(&self) -> i32 {
        self.spec.arity
    }

    /// Whether `argc` arguments (counting the name) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        self.spec.arity_ok(argc)
    }

    /// Whether the command may change data (`write` in `COMMAND INFO`).
    pub fn is_write(&self) -> bool {
        self.spec.has(command::WRITE)
    }

    /// The flags `COMMAND INFO` lists for it (`"write"`, `"readonly"`, `"fast"`, ...).
    pub fn flags(&self) -> Vec<&'static str> {
        self.spec.flag_names()
    }

    /// Index of the first key argument; 0 when the table names no key (a command whose keys
    /// depend on its arguments, such as `EVAL`, says 0 here too).
    pub fn first_key(&self) -> i32 {
        self.spec.first_key
    }

    /// Index of the last key argument; negative counts from the end (-1 is the last).
    pub fn last_key(&self) -> i32 {
        self.spec.last_key
    }

    /// The distance between two key arguments (2 for `MSET k v k v`).
    pub fn step(&self) -> i32 {
        self.spec.step
    }

    /// Which of `argc` arguments (counting the name at 0) are keys, by the table alone.
    pub fn key_positions(&self, argc: usize) -> Vec<usize> {
        self.spec.key_positions(argc)
    }
}

impl std::fmt::Debug for CommandInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandInfo")
            .field("name", &self.name())
            .field("arity", &self.arity())
            .field("first_key", &self.first_key())
            .field("last_key", &self.last_key())
            .field("step", &self.step())
            .finish()
    }
}

/// Looks a command up by name, case-insensitively (`SET`, `set`); `None` for a name the
/// server does not answer. Subcommands (`CLIENT LIST`) are found by their container's name.
pub fn lookup(name: &[u8]) -> Option<CommandInfo> {
    crate::cmd::install();
    command::lookup(name).map(|spec| CommandInfo { spec })
}

/// Every command the server answers, in no particular order.
pub fn all() -> Vec<CommandInfo> {
    crate::cmd::install();
    crate::cmd::all_commands()
        .into_iter()
        .map(|spec| CommandInfo { spec })
        .collect()
}
