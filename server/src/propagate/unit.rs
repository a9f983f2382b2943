//! An execution unit (a script, a function, an `EXEC`) reaches the AOF and the replicas as one
//! transaction when it wrote more than once, as in Redis 7.0.
//!
//! Redis 7.0 collects what a command propagates while it runs (`alsoPropagate`) and, once the
//! outermost command has ended (`propagatePendingCommands`), sends it: bare when it is one
//! command, else between `MULTI` and `EXEC`, so that a replica or an AOF replay never applies
//! half of a script or a transaction. `MULTI` goes out in the first command's database (a
//! `SELECT` before it when that changed), a `SELECT` inside when the unit changed database, and
//! `EXEC` in the last command's database.
//!
//! Here the effects are not collected: a script writing one large value under many keys must
//! not hold them all. The unit holds back only its first write. At the second, `MULTI`, the
//! first and the second go out; later ones go out as they happen; `EXEC` goes out when the
//! unit ends, or the held write alone if it stayed the only one. The stream and the AOF then
//! carry exactly Redis's bytes. A crash in the middle leaves an AOF ending in an open
//! `MULTI`, which loading discards, as Redis does. Nothing else writes meanwhile: a unit runs
//! under the exclusive gate.
//!
//! The unit lives in a thread-local: a script or `EXEC` runs synchronously on one thread,
//! from its first write to its end.

use std::cell::RefCell;

use bytes::Bytes;

use crate::aof::Aof;
use crate::codec::{encode, stream_chunk};
use crate::state::Shared;

/// The writes of the execution unit running on this thread.
struct Unit {
    /// How many units are open (a script inside `EXEC` is one unit with the `EXEC`).
    depth: usize,
    /// The first write, held back until a second one comes or the unit ends.
    held: Option<(usize, Bytes)>,
    /// Whether `MULTI` went out (a second write came).
    open: bool,
    /// The database of the last write, for `EXEC`.
    last_db: usize,
}

thread_local! {
    static UNIT: RefCell<Option<Unit>> = const { RefCell::new(None) };
}

/// An open execution unit (see [`Shared::begin_unit`]); ends it when dropped.
pub(crate) struct UnitGuard<'a> {
    shared: &'a Shared,
}

impl Shared {
    /// Opens an execution unit on this thread: until the returned guard is dropped, the writes
    /// recorded here reach the AOF and the replicas as one transaction when there are more
    /// than one. Units nest: only the outermost one ends the transaction.
    pub(crate) fn begin_unit(&self) -> UnitGuard<'_> {
        UNIT.with(|u| {
            let mut u = u.borrow_mut();
            match u.as_mut() {
                Some(unit) => unit.depth += 1,
                None => {
                    *u = Some(Unit {
                        depth: 1,
                        held: None,
                        open: false,
                        last_db: 0,
                    })
                }
            }
        });
        UnitGuard { shared: self }
    }
}

impl Drop for UnitGuard<'_> {
    fn drop(&mut self) {
        let ended = UNIT.with(|u| {
            let mut u = u.borrow_mut();
            let unit = u.as_mut()?;
            unit.depth -= 1;
            if unit.depth > 0 {
                return None;
            }
            u.take()
        });
        let Some(unit) = ended else { return };
        let aof = self.shared.aof.read();
        if unit.open {
            let exec = stream_chunk(|out| encode(&[&b"EXEC"[..]], out));
            emit(self.shared, aof.as_ref(), unit.last_db, exec);
        } else if let Some((db, chunk)) = unit.held {
            emit(self.shared, aof.as_ref(), db, chunk);
        }
    }
}

/// Whether an execution unit is open on this thread (a script, a function or `EXEC` runs).
pub(super) fn is_open() -> bool {
    UNIT.with(|u| u.borrow().is_some())
}

/// Called with each encoded write: when an execution unit is open on this thread, it takes
/// the write (holding it, or sending it inside the unit's transaction) and returns the
/// replication offset after it; else returns `None`, and the caller sends it as it is.
pub(super) fn route(shared: &Shared, aof: Option<&Aof>, db: usize, chunk: &Bytes) -> Option<u64> {
    UNIT.with(|u| {
        let mut u = u.borrow_mut();
        let unit = u.as_mut()?;
        unit.last_db = db;
        if unit.open {
            return Some(emit(shared, aof, db, chunk.clone()));
        }
        let Some((first_db, first)) = unit.held.take() else {
            unit.held = Some((db, chunk.clone()));
            return Some(shared.replication.offset());
        };
        unit.open = true;
        let multi = stream_chunk(|out| encode(&[&b"MULTI"[..]], out));
        emit(shared, aof, first_db, multi);
        emit(shared, aof, first_db, first);
        Some(emit(shared, aof, db, chunk.clone()))
    })
}

/// Appends one encoded piece to the AOF and feeds it to the replicas, in database `db` (each
/// puts a `SELECT` in front when its last database differs). Returns the offset after it.
fn emit(shared: &Shared, aof: Option<&Aof>, db: usize, chunk: Bytes) -> u64 {
    if let Some(aof) = aof {
        aof.append_encoded(db, &chunk);
    }
    shared.replication.feed_encoded(db, chunk)
}
