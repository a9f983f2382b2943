//! Which bytes of the append-only file would survive a power cut.
//!
//! A `write()` puts bytes in the kernel's page cache; only an `fsync` (or the kernel's own
//! write-back) puts them on the disk. A process crash loses neither: the kernel still holds the
//! page cache and writes it out later. A power cut (or a kernel panic) loses the page cache:
//! the file keeps only its durable prefix. This module keeps that line for one AOF file, on the
//! server's [`Clock`](crate::Clock), so that with a virtual clock which writes a power cut
//! loses is decided by `clock().advance(...)` alone, never by when a task happened to run.
//!
//! What moves the line, for each `appendfsync` policy:
//!
//! - **`always`**: the AOF fsyncs each write before the reply ([`Durability::fsynced`]).
//! - **`everysec`**: Redis's rule (`flushAppendOnlyFile` in `aof.c`): after a write, an fsync
//!   runs as soon as at least 1000 ms have passed since the previous one, and it covers every
//!   byte written by then. So a write made within a second of the last fsync waits for the
//!   next one, at `last + 1000 ms`; a write after a quiet second is fsynced at once. The clock
//!   of that rule starts when the file is opened (Redis sets `aof_last_fsync` at start). This
//!   module computes the fsync times from the write times, lazily; the AOF's flush task and
//!   its readers only catch up with it.
//! - **`no`**: the server never fsyncs; the kernel writes back on its own schedule. The model
//!   is Linux's periodic write-back with its defaults: the flusher wakes every
//!   `vm.dirty_writeback_centisecs` (500: 5 s; here at each multiple of 5 s of server time)
//!   and writes out every dirty page of a file whose dirty data has waited
//!   `vm.dirty_expire_centisecs` (3000: 30 s) since the file was last clean (the inode's
//!   `dirtied_when`). So the file goes to disk whole, younger writes too, once its oldest
//!   unwritten byte is 30 to 35 s old; a power cut loses everything written since the last
//!   such pass. Not modelled: the earlier write-back under memory pressure
//!   (`dirty_background_ratio`), so a real machine may lose less, never more, than this says
//!   (kernel tuning aside). Redis says no more than this either: `redis.conf` has `no`
//!   "don't fsync, just let the OS flush the data when it wants", and its persistence docs
//!   add that Linux normally flushes every 30 seconds, "up to the kernel's exact tuning".
//!
//! `WAITAOF` and a replica's `FACK` count only the server's own fsyncs
//! ([`Durability::all_fsynced`]), as Redis's `fsynced_reploff` does: under `no` they never
//! count a write, though the kernel may have written it back.
//!
//! Bounds: the writes not yet durable are kept as at most [`MAX_PENDING`] entries (offset,
//! time); past that the newest entries merge, each merge dating the merged bytes to the later
//! write, so the model may lose a little more than a real machine would, never less.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

/// When appended bytes are forced to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fsync {
    /// After every write, before the reply.
    Always,
    /// At most once a second, on the server's clock (Redis's rule, above).
    EverySec,
    /// Never by the server (the kernel writes back on its own schedule).
    No,
}

impl Fsync {
    /// Parses `appendfsync`'s value.
    pub(crate) fn parse(s: &str) -> Fsync {
        match s.to_ascii_lowercase().as_str() {
            "always" => Fsync::Always,
            "no" => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// Linux's default `vm.dirty_expire_centisecs`, in ms: how long a file's dirty data waits in
/// the page cache before the kernel's periodic write-back takes the file.
pub(crate) const KERNEL_WRITEBACK_MS: u64 = 30_000;

/// Linux's default `vm.dirty_writeback_centisecs`, in ms: how often the flusher wakes.
pub(crate) const KERNEL_FLUSHER_MS: u64 = 5_000;

/// `everysec`: the least time between two fsyncs.
pub(crate) const EVERYSEC_MS: u64 = 1_000;

/// At most this many writes are remembered one by one while not yet durable.
pub(crate) const MAX_PENDING: usize = 1024;

/// The durable line of one AOF file. It outlives the [`crate::aof::Aof`] that writes the file:
/// a restart (a process crash) keeps the page cache, so bytes written before it are no more
/// durable after it than they were.
#[derive(Debug)]
pub(crate) struct Durability {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    path: PathBuf,
    /// The file's length as processes see it (durable or in the page cache).
    written: u64,
    /// The prefix covered by the server's own fsyncs.
    fsynced: u64,
    /// The prefix on disk: fsynced, or written back by the kernel.
    durable: u64,
    /// Writes beyond `durable`, oldest first: (end offset, server time in ms when written).
    pending: VecDeque<(u64, u64)>,
    /// Server time of the last fsync (for `everysec`'s rule, the file's opening counts as one).
    last_fsync_ms: u64,
    /// Server time of the last fsync that wrote something, if any since this model began.
    last_real_fsync_ms: Option<u64>,
}

/// What a power cut left of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut {
    pub written: u64,
    pub durable: u64,
    pub last_fsync_ms: Option<u64>,
}

impl Durability {
    /// A model for the file at `path`, `len` bytes long, opened at `now_ms`: what is in the
    /// file when it is opened counts as on disk (it was there before this server knew of it).
    pub(crate) fn new(path: &Path, len: u64, now_ms: u64) -> Durability {
        Durability {
            state: Mutex::new(State {
                path: path.to_path_buf(),
                written: len,
                fsynced: len,
                durable: len,
                pending: VecDeque::new(),
                last_fsync_ms: now_ms,
                last_real_fsync_ms: None,
            }),
        }
    }

    /// Whether this model is of the file at `path`.
    pub(crate) fn is_of(&self, path: &Path) -> bool {
        self.state.lock().path == path
    }

    /// The file was opened again (a restart) and is `len` bytes long: a load that cut a torn
    /// tail may have shortened it. The `everysec` rule's clock starts again at `now_ms`.
    pub(crate) fn reopened(&self, len: u64, now_ms: u64) {
        let mut s = self.state.lock();
        s.written = len;
        s.fsynced = s.fsynced.min(len);
        s.durable = s.durable.min(len);
        s.pending.retain(|&(end, _)| end <= len);
        if s.pending.back().is_none_or(|&(end, _)| end < len) && s.durable < len {
            // The cut point itself is not a write boundary: date it like the last write.
            let at = s.pending.back().map_or(now_ms, |&(_, at)| at);
            s.pending.push_back((len, at));
        }
        s.last_fsync_ms = now_ms;
    }

    /// The file was replaced by a new one `len` bytes long, fsynced whole before it was
    /// renamed into place (an AOF rewrite): all of it is on disk, and nothing of the old
    /// file's page cache matters any more. The `everysec` rule's clock starts again at `now_ms`.
    pub(crate) fn replaced(&self, len: u64, now_ms: u64) {
        let mut s = self.state.lock();
        s.written = len;
        s.fsynced = len;
        s.durable = len;
        s.pending.clear();
        s.last_fsync_ms = now_ms;
        s.last_real_fsync_ms = Some(now_ms);
    }

    /// `bytes` more were written to the file at `now_ms`.
    pub(crate) fn wrote(&self, bytes: u64, now_ms: u64) -> u64 {
        let mut s = self.state.lock();
        s.written += bytes;
        let end = s.written;
        let full = s.pending.len() >= MAX_PENDING;
        match s.pending.back_mut() {
            // Writes in the same millisecond, or past the bound, share one entry dated to the
            // later write (never earlier than the truth).
            Some(last) if last.1 == now_ms || full => {
                *last = (end, now_ms.max(last.1));
            }
            _ => s.pending.push_back((end, now_ms)),
        }
        end
    }

    /// The server fsynced the file up to `end` at `now_ms` (`appendfsync always`).
    pub(crate) fn fsynced(&self, end: u64, now_ms: u64) {
        let mut s = self.state.lock();
        s.mark_fsynced(end, now_ms);
    }

    /// Runs the `everysec` fsyncs and the kernel's write-back that have come due by `now_ms`;
    /// returns true when an fsync came due (the caller then fsyncs the file for real).
    pub(crate) fn catch_up(&self, policy: Fsync, now_ms: u64) -> bool {
        let mut s = self.state.lock();
        let mut fsync_due = false;
        if policy == Fsync::EverySec {
            // Each fsync runs at the later of the first unsynced write and a second after the
            // previous fsync, and covers every write made by then.
            while let Some(first) = s.pending.iter().find(|&&(end, _)| end > s.fsynced) {
                let due = first.1.max(s.last_fsync_ms + EVERYSEC_MS);
                if due > now_ms {
                    break;
                }
                let covered = s
                    .pending
                    .iter()
                    .take_while(|&&(_, at)| at <= due)
                    .last()
                    .map_or(s.fsynced, |&(end, _)| end);
                s.mark_fsynced(covered, due);
                fsync_due = true;
            }
        }
        // The kernel's periodic write-back, in every policy: at the first flusher wake-up
        // after the oldest unwritten byte has waited 30 s, the whole file goes to disk.
        while let Some(&(_, oldest)) = s.pending.front() {
            let wake =
                (oldest + KERNEL_WRITEBACK_MS).div_ceil(KERNEL_FLUSHER_MS) * KERNEL_FLUSHER_MS;
            if wake > now_ms {
                break;
            }
            let end = s
                .pending
                .iter()
                .take_while(|&&(_, at)| at <= wake)
                .last()
                .map_or(s.durable, |&(end, _)| end);
            s.durable = s.durable.max(end);
            s.prune();
        }
        s.prune();
        fsync_due
    }

    /// Whether every byte written so far is covered by the server's own fsyncs (what
    /// `WAITAOF` and `FACK` count).
    pub(crate) fn all_fsynced(&self) -> bool {
        let s = self.state.lock();
        s.fsynced >= s.written
    }

    /// A power cut at `now_ms`: what was written and what of it was durable. The model then
    /// holds only the durable prefix (the caller truncates the file to it).
    pub(crate) fn cut(&self, policy: Fsync, now_ms: u64) -> Cut {
        self.catch_up(policy, now_ms);
        let mut s = self.state.lock();
        let cut = Cut {
            written: s.written,
            durable: s.durable,
            last_fsync_ms: s.last_real_fsync_ms,
        };
        s.written = s.durable;
        s.fsynced = s.durable;
        s.pending.clear();
        cut
    }

    /// The file's path.
    pub(crate) fn path(&self) -> PathBuf {
        self.state.lock().path.clone()
    }
}

impl State {
    fn mark_fsynced(&mut self, end: u64, now_ms: u64) {
        if end > self.fsynced {
            self.last_real_fsync_ms = Some(now_ms);
        }
        self.fsynced = self.fsynced.max(end);
        self.durable = self.durable.max(self.fsynced);
        self.last_fsync_ms = now_ms;
        self.prune();
    }

    /// Forgets the writes that are on disk and fsynced (under `no` nothing is fsynced: a
    /// write is forgotten once the kernel wrote it back, and `fsynced` no longer matters for
    /// it since the policy never fsyncs).
    fn prune(&mut self) {
        let line = self.durable;
        while self.pending.front().is_some_and(|&(end, _)| end <= line) {
            self.pending.pop_front();
        }
    }
}

/// What a power cut ([`ServerHandle::power_loss`](crate::ServerHandle::power_loss)) did to the node's append-only file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PowerLoss {
    /// The file's length as the process saw it: every byte written, on disk or not (0 without
    /// an AOF).
    pub written: u64,
    /// Of those, the bytes that were on disk: the length the file keeps.
    pub durable: u64,
    /// The server time (Unix ms) of the last fsync that wrote something, if the server has
    /// fsynced the file since it opened it.
    pub last_fsync_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> Durability {
        Durability::new(Path::new("x.aof"), 0, 0)
    }

    #[test]
    fn everysec_fsyncs_a_second_after_the_last_and_covers_what_was_written_by_then() {
        let d = model();
        d.wrote(10, 100);
        d.wrote(10, 900);
        assert!(!d.catch_up(Fsync::EverySec, 999));
        assert!(d.catch_up(Fsync::EverySec, 1000));
        assert!(d.all_fsynced());
        // Within a second of that fsync: waits for the next one, at 2000.
        d.wrote(5, 1500);
        assert!(!d.catch_up(Fsync::EverySec, 1999));
        let cut = d.cut(Fsync::EverySec, 1999);
        assert_eq!((cut.written, cut.durable), (25, 20));
        assert_eq!(cut.last_fsync_ms, Some(1000));
    }

    #[test]
    fn everysec_after_a_quiet_second_fsyncs_at_once() {
        let d = model();
        d.wrote(7, 5000);
        assert!(d.catch_up(Fsync::EverySec, 5000));
        assert_eq!(d.cut(Fsync::EverySec, 5000).durable, 7);
    }

    #[test]
    fn the_fsync_due_at_a_time_does_not_cover_a_write_made_after_it() {
        let d = model();
        d.wrote(10, 400);
        d.wrote(10, 1200);
        // Caught up late, at 1300: the fsync was due at 1000 and covers the first write only;
        // the second waits for 2000.
        assert!(d.catch_up(Fsync::EverySec, 1300));
        assert_eq!(d.cut(Fsync::EverySec, 1300).durable, 10);
    }

    #[test]
    fn no_waits_for_the_kernel_which_writes_the_whole_file_back() {
        let d = model();
        d.wrote(10, 0);
        d.wrote(10, 20_000);
        assert!(!d.catch_up(Fsync::No, 29_999));
        assert!(!d.all_fsynced());
        // At 30 s the oldest byte has waited long enough: the flusher takes the whole file,
        // the write of 20 s too.
        d.catch_up(Fsync::No, 30_000);
        assert!(
            !d.all_fsynced(),
            "the kernel's write-back is no fsync of the server's"
        );
        // A write at 31 s waits for the wake-up after 61 s: 65 s.
        d.wrote(10, 31_000);
        let cut = d.cut(Fsync::No, 64_999);
        assert_eq!(
            (cut.written, cut.durable, cut.last_fsync_ms),
            (30, 20, None)
        );
    }

    #[test]
    fn no_writes_back_at_the_first_flusher_wake_up_after_30_s() {
        let d = model();
        d.wrote(10, 31_000);
        assert_eq!(d.cut(Fsync::No, 65_000).durable, 10);
    }

    #[test]
    fn pending_writes_stay_bounded_and_merge_towards_later() {
        let d = model();
        let n = MAX_PENDING as u64 * 3;
        for i in 0..n {
            d.wrote(1, i * 20);
        }
        assert!(d.state.lock().pending.len() <= MAX_PENDING);
        // At 30 s a real kernel writes back the 1501 bytes written by then; the merged entries
        // date their bytes later, never earlier, so the model keeps at most that many.
        let cut = d.cut(Fsync::No, KERNEL_WRITEBACK_MS);
        assert!(cut.durable <= 1501, "{cut:?}");
        assert!(cut.durable >= MAX_PENDING as u64 - 1, "{cut:?}");
        assert_eq!(cut.written, n);
    }
}
