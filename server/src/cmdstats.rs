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
//! Cost: counting a command writes no shared cache line and takes no atomic read-modify-write
//! (each a few dozen cycles that an instruction count does not show; perf put the four adds a
//! command used to take at 1% of its CPU). Each thread that runs commands counts in a shard of
//! its own, found through a thread-local, which only it writes (a load and a store per
//! counter); `INFO` adds the shards up. A thread that ends leaves its shard, counts and all,
//! for the next new thread to take over, so a server has no more shards than it ever had
//! threads running commands at once. `CONFIG RESETSTAT` cannot zero another thread's
//! counters without racing its writes, so it moves a generation on instead: a shard of an
//! older generation reads as zero, and its owner zeroes it before it next counts. A
//! subcommand takes a lock, which only the administrative commands pay.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

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

/// One command's counters in one thread's shard. Atomics only so that `INFO` may read them
/// from another thread; only the shard's owner writes them (see [`bump`]).
#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    usec: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
}

/// Adds `n` to a counter that only the calling thread writes: a plain load and store, where
/// a `fetch_add` would lock the bus for an addition no other thread makes.
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

impl Counters {
    /// Counts one outcome. Only the owner of the shard calls this.
    fn add(&self, outcome: Outcome) {
        match outcome {
            Outcome::Called { usec, failed } => {
                bump(&self.calls, 1);
                bump(&self.usec, usec);
                if failed {
                    bump(&self.failed, 1);
                }
            }
            Outcome::Rejected => bump(&self.rejected, 1),
        }
    }

    fn get(&self) -> [u64; 4] {
        [
            self.calls.load(Ordering::Relaxed),
            self.usec.load(Ordering::Relaxed),
            self.rejected.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        ]
    }

    fn zero(&self) {
        for c in [&self.calls, &self.usec, &self.rejected, &self.failed] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// One thread's counters for one server: every command's, by its index in the table.
#[derive(Debug)]
struct Shard {
    /// Whether a live thread owns the shard; only the owner writes its counters. Cleared when
    /// the owner ends, so that a new thread takes the shard over instead of adding one.
    owned: AtomicBool,
    /// The [`CommandStats`] generation these counts belong to: the counts of an older one
    /// were reset, and read as zero until the owner zeroes them.
    generation: AtomicU64,
    commands: Box<[Counters]>,
}

impl Shard {
    fn new(generation: u64) -> Self {
        Shard {
            owned: AtomicBool::new(true),
            generation: AtomicU64::new(generation),
            commands: (0..MAX_COMMANDS).map(|_| Counters::default()).collect(),
        }
    }
}

/// This thread's shard of each server it counted commands for (by [`CommandStats::id`]); a
/// process may run several servers. Dropped when the thread ends, which hands the shards back.
struct Owned(RefCell<Vec<(u64, Arc<Shard>)>>);

impl Drop for Owned {
    fn drop(&mut self) {
        for (_, shard) in self.0.get_mut().drain(..) {
            // Release: the next owner, which takes it with an acquire, sees every count.
            shard.owned.store(false, Ordering::Release);
        }
    }
}

thread_local! {
    static OWNED: Owned = const { Owned(RefCell::new(Vec::new())) };
}

/// Tells servers apart in the threads' lists of shards.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

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
    /// This server among the threads' lists of shards ([`OWNED`]).
    id: u64,
    /// Moved on by every reset: shards of an older generation count as zero.
    generation: AtomicU64,
    /// Every shard a thread counted in, whether its thread still runs or not.
    shards: Mutex<Vec<Arc<Shard>>>,
    subcommands: Mutex<BTreeMap<String, [u64; 4]>>,
}

impl Default for CommandStats {
    fn default() -> Self {
        CommandStats {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            generation: AtomicU64::new(0),
            shards: Mutex::default(),
            subcommands: Mutex::default(),
        }
    }
}

impl CommandStats {
    /// Counts one command's outcome.
    pub(crate) fn record(&self, key: &StatKey, outcome: Outcome) {
        match key {
            StatKey::Command(i) if *i < MAX_COMMANDS => {
                // During the thread's own teardown there is no list any more: the count is
                // lost.
                let _ = OWNED.try_with(|owned| {
                    let mut owned = owned.0.borrow_mut();
                    let at = match owned.iter().position(|(id, _)| *id == self.id) {
                        Some(at) => at,
                        None => {
                            // Shards of servers that are gone (only this list holds them).
                            owned.retain(|(_, s)| Arc::strong_count(s) > 1);
                            owned.push((self.id, self.claim_shard()));
                            owned.len() - 1
                        }
                    };
                    let shard = &owned[at].1;
                    let generation = self.generation.load(Ordering::Acquire);
                    if shard.generation.load(Ordering::Relaxed) != generation {
                        // Reset since this thread last counted: start from zero.
                        for c in shard.commands.iter() {
                            c.zero();
                        }
                        shard.generation.store(generation, Ordering::Release);
                    }
                    shard.commands[*i].add(outcome);
                });
            }
            StatKey::Command(_) => {}
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

    /// A shard for the calling thread: one a thread that ended left behind, or a new one.
    fn claim_shard(&self) -> Arc<Shard> {
        let mut shards = self.shards.lock();
        for shard in shards.iter() {
            // Acquire: sees every count of the thread that left it.
            if shard
                .owned
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return shard.clone();
            }
        }
        let shard = Arc::new(Shard::new(self.generation.load(Ordering::Acquire)));
        shards.push(shard.clone());
        shard
    }

    /// Zeroes every counter (`CONFIG RESETSTAT`): moves the generation on, which each
    /// shard's owner sees before it counts again (see the module's doc).
    pub(crate) fn reset(&self) {
        // Under the shards' lock, so that `counts` sees one generation or the other whole.
        let _shards = self.shards.lock();
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.subcommands.lock().clear();
    }

    /// Every command's counters, added up over the shards of the current generation.
    fn counts(&self) -> Vec<[u64; 4]> {
        let mut sum = vec![[0u64; 4]; MAX_COMMANDS];
        let shards = self.shards.lock();
        let generation = self.generation.load(Ordering::Acquire);
        for shard in shards.iter() {
            if shard.generation.load(Ordering::Acquire) != generation {
                continue;
            }
            for (total, c) in sum.iter_mut().zip(shard.commands.iter()) {
                for (t, v) in total.iter_mut().zip(c.get()) {
                    *t = t.wrapping_add(v);
                }
            }
        }
        sum
    }

    /// The body of `INFO commandstats`: a line for each command with a call or a refusal,
    /// `name_of` naming a command's index, sorted by name.
    pub(crate) fn info_section(&self, name_of: impl Fn(usize) -> Option<&'static str>) -> String {
        let mut rows: BTreeMap<String, [u64; 4]> = self.subcommands.lock().clone();
        for (i, counts) in self.counts().into_iter().enumerate() {
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
    fn counts_outlive_their_thread_and_reset_reaches_every_shard() {
        let s = Arc::new(CommandStats::default());
        let get = StatKey::Command(7);
        let call = Outcome::Called {
            usec: 2,
            failed: false,
        };
        let names = |i| (i == 7).then_some("get");
        // Two threads, one after the other: the second takes over the shard the first left
        // (a thread's shards are handed back before `join` returns).
        let on_a_thread = |outcome| {
            let s = s.clone();
            std::thread::spawn(move || s.record(&StatKey::Command(7), outcome))
                .join()
                .unwrap();
        };
        on_a_thread(call);
        on_a_thread(call);
        assert_eq!(s.shards.lock().len(), 1);
        // This thread takes it over in turn, and keeps it: the next thread needs another.
        s.record(&get, call);
        assert_eq!(s.shards.lock().len(), 1);
        on_a_thread(call);
        assert_eq!(s.shards.lock().len(), 2);
        assert_eq!(
            s.info_section(names),
            "cmdstat_get:calls=4,usec=8,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n"
        );
        s.reset();
        assert_eq!(s.info_section(names), "");
        // The left-behind shard is zeroed by its next owner before it counts.
        on_a_thread(Outcome::Rejected);
        assert_eq!(s.shards.lock().len(), 2);
        assert_eq!(
            s.info_section(names),
            "cmdstat_get:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0\r\n"
        );
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
