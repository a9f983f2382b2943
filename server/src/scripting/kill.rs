//! `SCRIPT KILL` / `FUNCTION KILL`: the kill switch of the running script.
//!
//! In Redis a kill is acted on only in the Lua instruction hook (every 100,000 instructions),
//! which is also the only place Redis reads other clients while a script runs. Here other
//! clients are served meanwhile, and the kill takes effect both in the hook and at the next
//! `redis.call`/`redis.pcall`: a script that spends its time in a loop of slow calls runs few
//! instructions, and would otherwise go on for as long as its calls last.
//!
//! A kill is refused once the script has written (Redis's `-UNKILLABLE`): a half-applied
//! script would break its atomicity. The script's first write and a kill race from two
//! threads, so both go through one atomic state: whichever comes first wins, and a script
//! that was told it is killed never writes.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::frame::Frame;

/// No script is running.
const IDLE: u8 = 0;
/// A script runs and has not written.
const CLEAN: u8 = 1;
/// A script runs and has written: it can no longer be killed.
const WROTE: u8 = 2;
/// A script runs and has been killed: it stops at its next chance.
const KILLED: u8 = 3;

/// Redis's error text for a killed script (raised inside the script).
pub(crate) const KILLED_MESSAGE: &str = "Script killed by user with SCRIPT KILL...";

/// The state of the running script with respect to `SCRIPT KILL`.
#[derive(Debug, Default)]
pub(crate) struct KillSwitch {
    state: AtomicU8,
}

impl KillSwitch {
    /// A script starts: not written, not killed.
    pub(crate) fn start(&self) {
        self.state.store(CLEAN, Ordering::Release);
    }

    /// The script has ended.
    pub(crate) fn end(&self) {
        self.state.store(IDLE, Ordering::Release);
    }

    /// Whether the running script has been killed (it stays killed until it ends, so that
    /// catching the error with `pcall` does not save it).
    pub(crate) fn is_killed(&self) -> bool {
        self.state.load(Ordering::Acquire) == KILLED
    }

    /// Called before the script's write: returns false when the script was killed first (it
    /// must stop instead of writing).
    pub(crate) fn note_write(&self) -> bool {
        match self
            .state
            .compare_exchange(CLEAN, WROTE, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(now) => now != KILLED,
        }
    }

    /// `SCRIPT KILL`: kills the running script unless there is none or it has written, with
    /// Redis's error replies for those.
    ///
    /// `wrong_kind` is the refusal when the running script is not the kind this command
    /// kills (`SCRIPT KILL` of a function, `FUNCTION KILL` of an `EVAL`): Redis answers it
    /// after finding the script still killable, and kills nothing.
    pub(crate) fn request(&self, wrong_kind: Option<Frame>) -> Result<(), Frame> {
        if let Some(refusal) = wrong_kind {
            return match self.state.load(Ordering::Acquire) {
                IDLE => Err(Frame::error("NOTBUSY No scripts in execution right now.")),
                CLEAN | KILLED => Err(refusal),
                _ => Err(Frame::error(UNKILLABLE)),
            };
        }
        match self
            .state
            .compare_exchange(CLEAN, KILLED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) | Err(KILLED) => Ok(()),
            Err(IDLE) => Err(Frame::error("NOTBUSY No scripts in execution right now.")),
            Err(_) => Err(Frame::error(UNKILLABLE)),
        }
    }
}

/// Redis's refusal to kill a script that has written.
const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kill_and_a_first_write_exclude_each_other() {
        let k = KillSwitch::default();
        assert!(k.request(None).is_err(), "nothing runs");
        k.start();
        assert!(k.request(None).is_ok());
        assert!(k.is_killed());
        assert!(!k.note_write(), "a killed script must not write");
        k.end();
        k.start();
        assert!(k.note_write());
        assert!(k.note_write(), "later writes go on");
        let refused = k.request(None).unwrap_err();
        assert!(matches!(refused, Frame::Error(ref e) if e.starts_with(b"UNKILLABLE")));
        assert!(!k.is_killed());
    }
}
