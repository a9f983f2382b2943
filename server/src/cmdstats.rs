//! Command statistics: `INFO commandstats`, one line per command that was called or refused
//! (`cmdstat_set:calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=0`), as
//! Redis 7.0 keeps them; `CONFIG RESETSTAT` zeroes them.
//!
//! What counts, as in Redis's `call()` and `rejectCommand()`:
//!
//! - `calls`: each time the command's handler ran: at the top level, inside `EXEC`, and
//!   inside a script (a `redis.call` of `SET` counts a `set` call, beside the `evalsha`);
//! - `usec`: the time its handler took (not the time it waited for a key, a pause or the
//!   gate);
//! - `failed_calls`: calls whose reply was an error;
//! - `rejected_calls`: the command was refused before its handler ran (wrong arity, `OOM`,
//!   `BUSY`, `READONLY`, `NOREPLICAS`, not allowed in `MULTI` or in subscribed mode). An
//!   unknown command counts nowhere: it is no command.
//!
//! A container command counts under its subcommand, `cmdstat_config|get`, as Redis does; a
//! subcommand the container refused as unknown counts nowhere.
//!
//! Cost: a command's counters are four relaxed atomic adds on a cache line of its own, found
//! by its index in the command table (see [`crate::command::stat_index`]); a subcommand takes
//! a lock, which only the administrative commands pay.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;

/// Room for every command of the table (asserted when the table is installed).
pub(crate) const MAX_COMMANDS: usize = 512;

/// The most distinct subcommands counted: a bound, though only subcommands that exist are
/// ever counted.
const MAX_SUBCOMMANDS: usize = 512;

/// How one command ended, for its statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The handler ran for `usec` microseconds and replied with an error or not.
    Called {
        /// Microseconds in the handler.
        usec: u64,
        /// Whether the reply was an error.
        failed: bool,
    },
    /// Refused before its handler ran.
    Rejected,
}

/// One command's counters, alone on their cache line so that two commands counted on two
/// threads never contend.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Counters {
    calls: AtomicU64,
    usec: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
}

impl Counters {
    fn add(&self, outcome: Outcome) {
        match outcome {
            Outcome::Called { usec, failed } => {
                self.calls.fetch_add(1, Relaxed);
                self.usec.fetch_add(usec, Relaxed);
                if failed {
                    self.failed.fetch_add(1, Relaxed);
                }
            }
            Outcome::Rejected => {
                self.rejected.fetch_add(1, Relaxed);
            }
        }
    }

    fn get(&self) -> [u64; 4] {
        [
            self.calls.load(Relaxed),
            self.usec.load(Relaxed),
            self.rejected.load(Relaxed),
            self.failed.load(Relaxed),
        ]
    }

    fn reset(&self) {
        for c in [&self.calls, &self.usec, &self.rejected, &self.failed] {
            c.store(0, Relaxed);
        }
    }
}

/// Where a command's statistics go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StatKey {
    /// A command, by its index in the command table.
    Command(usize),
    /// A container's subcommand, as `INFO` names it (`config|get`).
    Subcommand(String),
}

/// A server's command statistics (part of [`crate::state::Stats`]).
#[derive(Debug)]
pub(crate) struct CommandStats {
    commands: Box<[Counters]>,
    subcommands: Mutex<BTreeMap<String, [u64; 4]>>,
}

impl Default for CommandStats {
    fn default() -> Self {
        CommandStats {
            commands: (0..MAX_COMMANDS).map(|_| Counters::default()).collect(),
            subcommands: Mutex::default(),
        }
    }
}

impl CommandStats {
    /// Counts one command's outcome.
    pub(crate) fn record(&self, key: &StatKey, outcome: Outcome) {
        match key {
            StatKey::Command(i) => {
                if let Some(c) = self.commands.get(*i) {
                    c.add(outcome);
                }
            }
            StatKey::Subcommand(name) => {
                let mut map = self.subcommands.lock();
                let len = map.len();
                let slot = match map.get_mut(name.as_str()) {
                    Some(slot) => slot,
                    None if len < MAX_SUBCOMMANDS => map.entry(name.clone()).or_default(),
                    None => return,
                };
                match outcome {
                    Outcome::Called { usec, failed } => {
                        slot[0] += 1;
                        slot[1] += usec;
                        slot[3] += u64::from(failed);
                    }
                    Outcome::Rejected => slot[2] += 1,
                }
            }
        }
    }

    /// Zeroes every counter (`CONFIG RESETSTAT`).
    pub(crate) fn reset(&self) {
        for c in self.commands.iter() {
            c.reset();
        }
        self.subcommands.lock().clear();
    }

    /// The body of `INFO commandstats`: a line for each command with a call or a refusal,
    /// `name_of` naming a command's index, sorted by name.
    pub(crate) fn info_section(&self, name_of: impl Fn(usize) -> Option<&'static str>) -> String {
        let mut rows: BTreeMap<String, [u64; 4]> = self.subcommands.lock().clone();
        for (i, c) in self.commands.iter().enumerate() {
            let counts = c.get();
            if counts[0] == 0 && counts[2] == 0 {
                continue;
            }
            if let Some(name) = name_of(i) {
                rows.insert(name.to_string(), counts);
            }
        }
        let mut out = String::new();
        for (name, [calls, usec, rejected, failed]) in rows {
            if calls == 0 && rejected == 0 {
                continue;
            }
            let per_call = if calls == 0 {
                0.0
            } else {
                usec as f64 / calls as f64
            };
            let _ = write!(
                out,
                "cmdstat_{name}:calls={calls},usec={usec},usec_per_call={per_call:.2},rejected_calls={rejected},failed_calls={failed}\r\n"
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_refusals_and_failures_are_counted_apart() {
        let s = CommandStats::default();
        let set = StatKey::Command(3);
        s.record(
            &set,
            Outcome::Called {
                usec: 3,
                failed: false,
            },
        );
        s.record(
            &set,
            Outcome::Called {
                usec: 4,
                failed: true,
            },
        );
        s.record(&set, Outcome::Rejected);
        let sub = StatKey::Subcommand("config|get".into());
        s.record(
            &sub,
            Outcome::Called {
                usec: 9,
                failed: false,
            },
        );
        let names = |i| (i == 3).then_some("set");
        assert_eq!(
            s.info_section(names),
            "cmdstat_config|get:calls=1,usec=9,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n\
             cmdstat_set:calls=2,usec=7,usec_per_call=3.50,rejected_calls=1,failed_calls=1\r\n"
        );
        s.reset();
        assert_eq!(s.info_section(names), "");
    }

    #[test]
    fn subcommands_are_bounded() {
        let s = CommandStats::default();
        for i in 0..MAX_SUBCOMMANDS + 10 {
            s.record(&StatKey::Subcommand(format!("x|{i}")), Outcome::Rejected);
        }
        assert_eq!(s.subcommands.lock().len(), MAX_SUBCOMMANDS);
    }
}
