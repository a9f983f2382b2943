//! The ACL log (`ACL LOG`): refused authentications and commands, newest first, similar
//! ones within a minute counted in one entry, as Redis's `addACLLogEntry` keeps them.

use std::collections::VecDeque;

use bytes::Bytes;

/// How long apart two similar events may be and still share one entry, in milliseconds.
const GROUPING_MS: u64 = 60_000;

/// Why an entry was logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// A command the user may not run.
    Command,
    /// A key the user may not touch.
    Key,
    /// A channel the user may not use.
    Channel,
    /// A failed `AUTH` or `HELLO ... AUTH`.
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the refused command ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    /// Sent by the client.
    Toplevel,
    /// Queued inside `MULTI` (or an `AUTH` inside it).
    Multi,
    /// Called by a script.
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One event of the log.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// How many similar events it counts.
    pub count: u64,
    /// Why.
    pub reason: Reason,
    /// Where.
    pub context: Context,
    /// The command, key, channel, or for `auth` the command that authenticated.
    pub object: Bytes,
    /// The user refused (for `auth`, the name tried).
    pub username: Bytes,
    /// When the last of the events happened, in Unix milliseconds.
    pub ctime_ms: u64,
    /// `CLIENT INFO` of the last client refused.
    pub client_info: String,
}

impl Entry {
    /// The reason, as `ACL LOG` prints it.
    pub(crate) fn reason_name(&self) -> &'static str {
        self.reason.name()
    }

    /// The context, as `ACL LOG` prints it.
    pub(crate) fn context_name(&self) -> &'static str {
        self.context.name()
    }

    fn similar(&self, other: &Entry) -> bool {
        self.reason == other.reason
            && self.context == other.context
            && self.ctime_ms.abs_diff(other.ctime_ms) <= GROUPING_MS
            && self.object == other.object
            && self.username == other.username
    }
}

/// The entries, newest first.
#[derive(Debug, Default)]
pub(crate) struct Log {
    entries: VecDeque<Entry>,
}

impl Log {
    /// Records an event: a similar entry among the ten newest counts it and moves to the
    /// front; otherwise it is a new entry, and the oldest go beyond `max_len`.
    pub(crate) fn add(&mut self, entry: Entry, max_len: usize) {
        let found = self.entries.iter().take(10).position(|e| e.similar(&entry));
        if let Some(i) = found {
            let mut e = self.entries.remove(i).expect("found");
            e.count += 1;
            e.ctime_ms = entry.ctime_ms;
            e.client_info = entry.client_info;
            self.entries.push_front(e);
        } else {
            self.entries.push_front(entry);
            self.entries.truncate(max_len);
        }
    }

    /// The newest `count` entries.
    pub(crate) fn newest(&self, count: usize) -> Vec<Entry> {
        self.entries.iter().take(count).cloned().collect()
    }

    /// `ACL LOG RESET`.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }
}
