//! What one entry of the ACLs' command table (`table.rs`) says: a command's categories,
//! flags and key specs (Redis's `redisCommand` as far as the ACLs read it).

/// The category bit of the category at `index` of [`super::commands::CATEGORIES`].
pub(crate) const fn c(index: u32) -> u32 {
    1 << index
}

/// [`Command::parent`] of a top-level command.
pub(crate) const NO_PARENT: usize = usize::MAX;
/// The command runs before authentication (`AUTH`, `HELLO`): no ACL refuses it.
pub(crate) const NO_AUTH: u8 = 1;
/// The command is a container of subcommands.
pub(crate) const CONTAINER: u8 = 2;

/// A key spec reads the key's value.
pub(crate) const R: u8 = 1;
/// A key spec writes the key (insert, update or delete).
pub(crate) const W: u8 = 2;
/// A key spec names something that is not a key.
pub(crate) const NOT_KEY: u8 = 4;
/// A key spec may miss keys: Redis asks the command's own key finder.
pub(crate) const INCOMPLETE: u8 = 8;
/// A key spec's access depends on the arguments: Redis asks the command's own key finder.
pub(crate) const VARIABLE: u8 = 16;

/// One command or subcommand of Redis's table.
#[derive(Debug)]
pub(crate) struct Command {
    /// Lowercase full name (`config|get` for a subcommand).
    pub name: &'static str,
    /// The index of the container of a subcommand, [`NO_PARENT`] for a command.
    pub parent: usize,
    /// Redis's arity (of the subcommand, for a subcommand).
    pub arity: i32,
    /// Bit set of [`CATEGORIES`].
    pub categories: u32,
    /// [`NO_AUTH`], [`CONTAINER`].
    pub flags: u8,
    /// Redis's key specs.
    pub keys: &'static [KeySpec],
}

/// Where one group of a command's keys starts.
#[derive(Debug)]
pub(crate) enum Begin {
    /// At a fixed index.
    Index(i32),
    /// After a keyword, searched from an index (from the end when negative).
    Keyword(&'static str, i32),
    /// Only the command's own code knows.
    Unknown,
}

/// How many keys a group has, from its start.
#[derive(Debug)]
pub(crate) enum Find {
    /// `(lastkey, keystep, limit)`.
    Range(i32, i32, i32),
    /// `(keynumidx, firstkey, keystep)`.
    Keynum(i32, i32, i32),
    /// Only the command's own code knows.
    Unknown,
}

/// One key spec: a group of keys and the access they need.
#[derive(Debug)]
pub(crate) struct KeySpec {
    /// [`R`], [`W`], [`NOT_KEY`], [`INCOMPLETE`], [`VARIABLE`].
    pub access: u8,
    /// Where the group starts.
    pub(crate) begin: Begin,
    /// How many keys it has.
    pub(crate) find: Find,
}
