//! The append-only file: every change is appended as the write commands that reproduce it
//! (Redis's AOF format), and replayed at start. This is what decides whether a lock survives a
//! crash-restart: with `appendfsync always` an acknowledged lock is on disk before the reply.
//!
//! A torn last command (the machine went down while the file was written out) is cut off at
//! start, as Redis does with `aof-load-truncated yes`, instead of refusing to start; which
//! bytes a power cut leaves is [`crate::durability`]'s business.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;

use crate::clock::Clock;
use crate::codec::{Decoder, Parsed};
use crate::durability::Durability;
pub(crate) use crate::durability::Fsync;

/// Where the server keeps its append-only file, when one is open: the file behind a lock,
/// and beside it a flag saying whether there is one. Every write asks "is anything
/// recording?" before it encodes itself for the AOF and the replicas; the flag answers
/// with one relaxed load, where taking the read lock would be two atomic read-modify-writes
/// on a line every worker shares, twice per write.
#[derive(Debug, Default)]
pub(crate) struct AofSlot {
    file: parking_lot::RwLock<Option<Aof>>,
    open: AtomicBool,
    /// The sizes the last file closed by [`take`](AofSlot::take) reported (its current and
    /// base size): an AOF turned on again at run time starts from them, as Redis's
    /// `aof_current_size` and `aof_rewrite_base_size` carry over until its first rewrite.
    closed_sizes: Mutex<(u64, u64)>,
}

impl AofSlot {
    /// The file, for appending to it (`None` when `appendonly` is off).
    pub(crate) fn read(&self) -> parking_lot::RwLockReadGuard<'_, Option<Aof>> {
        self.file.read()
    }

    /// Opens (`Some`) or closes (`None`) the server's AOF, as a process does at start and
    /// loses at a crash: the sizes of a file closed before are forgotten.
    pub(crate) fn set(&self, aof: Option<Aof>) {
        let mut file = self.file.write();
        self.open.store(aof.is_some(), Ordering::Relaxed);
        *file = aof;
        *self.closed_sizes.lock() = (0, 0);
    }

    /// Takes the open AOF out (`CONFIG SET appendonly no`): from now on no write is appended.
    /// The caller fsyncs and closes it. Its sizes are kept for the next
    /// [`closed_sizes`](AofSlot::closed_sizes).
    pub(crate) fn take(&self) -> Option<Aof> {
        let mut file = self.file.write();
        self.open.store(false, Ordering::Relaxed);
        let aof = file.take();
        if let Some(a) = aof.as_ref() {
            *self.closed_sizes.lock() = (a.size(), a.base_size());
        }
        aof
    }

    /// The current and base size of the file [`take`](AofSlot::take) closed last, `(0, 0)`
    /// when none was closed since the start.
    pub(crate) fn closed_sizes(&self) -> (u64, u64) {
        *self.closed_sizes.lock()
    }

    /// Whether an AOF is open: the answer [`read`](AofSlot::read) would give, without the
    /// lock. A write that raced with the file being opened or closed sees either answer,
    /// as it would with the lock (the lock was let go before the write recorded anyway).
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }
}

/// An open append-only file; or, right after `CONFIG SET appendonly yes`, one waiting for its
/// first rewrite (Redis's `AOF_WAIT_REWRITE`), see [`Aof::waiting`].
#[derive(Debug)]
pub(crate) struct Aof {
    /// Where the file is (`dir`/`appendfilename`): a rewrite renames its new file over it.
    path: PathBuf,
    /// The file and what goes with appending to it, behind one lock: whoever appends holds it
    /// from the `SELECT` decision to the write, and a rewrite swaps the file under it.
    inner: Mutex<Inner>,
    fsync: Fsync,
    clock: Clock,
    /// Which of the file's bytes are on disk; shared with the next `Aof` of the same file.
    durability: Arc<Durability>,
    /// The file's length: what it was when opened, plus every byte appended since
    /// (`aof_current_size`).
    size: AtomicU64,
    /// The length after the last rewrite, or when the file was opened (`aof_base_size`): the
    /// base `auto-aof-rewrite-percentage` measures growth from.
    base_size: AtomicU64,
    /// How many bytes the running rewrite holds in memory (`MEMORY STATS`'s `aof.buffer`),
    /// readable without the lock.
    rewrite_buffered: AtomicUsize,
    /// No file yet: the AOF waits for the rewrite that writes its first content (readable
    /// without the lock; `Inner::file` is `None` while it is set).
    waiting: AtomicBool,
}

/// The file and the state of appending to it.
#[derive(Debug)]
struct Inner {
    /// The file, `None` while the AOF waits for its first rewrite: then the writes go only to
    /// the rewrite's log, which becomes the tail of the file.
    file: Option<File>,
    /// The database the file's last `SELECT` chose (-1: none yet, the next write selects).
    last_db: i64,
    /// While a rewrite runs: the writes made since its snapshot, for the new file.
    rewrite: Option<RewriteLog>,
}

/// The writes made while a rewrite runs. The rewrite's new file holds the keyspace as it was
/// when the rewrite began; these are the writes after that moment, in order, with their own
/// `SELECT`s (the new file's database choice is not the old file's). They are appended to the
/// old file as usual too, so a crash during the rewrite loses nothing: the old file stays
/// whole until the new one, snapshot and log together, is renamed over it.
#[derive(Debug)]
struct RewriteLog {
    /// Which rewrite this log belongs to (see [`RewriteStatus::job`]).
    job: u64,
    /// Writes not yet handed to the rewrite's thread.
    bytes: BytesMut,
    /// The database the log's last `SELECT` chose (-1: none yet).
    last_db: i64,
    /// The most bytes the log may hold; past it the rewrite is given up (see
    /// [`Aof::begin_rewrite`]).
    limit: usize,
    /// The log passed its limit: its bytes were dropped and the rewrite fails.
    overflowed: bool,
}

/// Why a rewrite could not take its log: it was given up, or its log grew past its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogLost {
    /// No log of this rewrite: a restart or a shutdown ended it, or another took its place.
    Gone,
    /// The writes made during the rewrite passed the log's bound (the rewrite's thread did not
    /// keep up); the log was dropped, and the old file still holds every write.
    Overflowed,
}

impl Aof {
    /// Opens (creating if needed) the file for appending. `durability` is the model of this
    /// file's durable prefix (kept across restarts).
    pub(crate) fn open(
        path: PathBuf,
        fsync: Fsync,
        clock: Clock,
        durability: Arc<Durability>,
    ) -> std::io::Result<Aof> {
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let len = file.metadata()?.len();
        Ok(Aof {
            path,
            inner: Mutex::new(Inner {
                file: Some(file),
                last_db: -1,
                rewrite: None,
            }),
            fsync,
            clock,
            durability,
            size: AtomicU64::new(len),
            base_size: AtomicU64::new(len),
            rewrite_buffered: AtomicUsize::new(0),
            waiting: AtomicBool::new(false),
        })
    }

    /// An AOF at `path` that has no file yet (`CONFIG SET appendonly yes` at run time): the
    /// keyspace is not in any file, so the first rewrite writes it, with the writes made
    /// meanwhile (its log), and only then becomes the file at `path`, which is left alone
    /// until that moment. Until a rewrite starts, writes are recorded nowhere: its snapshot
    /// will hold them. `sizes` are what `INFO` reports until then (see
    /// [`AofSlot::closed_sizes`]).
    pub(crate) fn waiting(
        path: PathBuf,
        fsync: Fsync,
        clock: Clock,
        durability: Arc<Durability>,
        sizes: (u64, u64),
    ) -> Aof {
        Aof {
            path,
            inner: Mutex::new(Inner {
                file: None,
                last_db: -1,
                rewrite: None,
            }),
            fsync,
            clock,
            durability,
            size: AtomicU64::new(sizes.0),
            base_size: AtomicU64::new(sizes.1),
            rewrite_buffered: AtomicUsize::new(0),
            waiting: AtomicBool::new(true),
        }
    }

    /// Whether this AOF still waits for its first rewrite (see [`Aof::waiting`]).
    pub(crate) fn is_waiting(&self) -> bool {
        self.waiting.load(Ordering::Acquire)
    }

    /// Appends commands already encoded in RESP (the bytes the replication stream carries),
    /// with a `SELECT` first when the database changes; and to the running rewrite's log, if
    /// a rewrite runs.
    pub(crate) fn append_encoded(&self, db: usize, commands: &[u8]) {
        if commands.is_empty() {
            return;
        }
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        if inner.file.is_none() {
            // Waiting for the first rewrite: its log is the only record (Redis counts what
            // it buffers then in `aof_current_size` too).
            if let Some(log) = inner.rewrite.as_mut() {
                let added = log.record(db, commands, &self.rewrite_buffered);
                self.size.fetch_add(added as u64, Ordering::Relaxed);
            }
            return;
        }
        let with_select;
        let out = if inner.last_db != db as i64 {
            let mut buf = BytesMut::with_capacity(commands.len() + 24);
            encode_select(db, &mut buf);
            buf.extend_from_slice(commands);
            with_select = buf;
            &with_select[..]
        } else {
            commands
        };
        if let Some(log) = inner.rewrite.as_mut() {
            log.record(db, commands, &self.rewrite_buffered);
        }
        let Some(file) = inner.file.as_mut() else {
            return;
        };
        if let Err(e) = file.write_all(out) {
            tracing::error!("AOF write failed: {e}");
            // What was written of it is unknown: the next write selects its database again.
            inner.last_db = -1;
            return;
        }
        inner.last_db = db as i64;
        self.size.fetch_add(out.len() as u64, Ordering::Relaxed);
        let now = self.clock.now_ms();
        let end = self.durability.wrote(out.len() as u64, now);
        if self.fsync == Fsync::Always {
            match file.sync_data() {
                Ok(()) => self.durability.fsynced(end, now),
                Err(e) => tracing::error!("AOF fsync failed: {e}"),
            }
        }
    }

    /// Whether everything appended is covered by this server's fsyncs (what `WAITAOF` and a
    /// replica's `FACK` count; never under `appendfsync no`, as in Redis). Never while the
    /// AOF waits for its first rewrite: no write is on disk then.
    pub(crate) fn all_fsynced(&self) -> bool {
        if self.is_waiting() {
            return false;
        }
        self.catch_up();
        self.durability.all_fsynced()
    }

    /// Runs the `everysec` fsyncs that have come due on the server's clock (and the kernel's
    /// write-back, in the model): called by the flush task, and by whoever reads the line.
    pub(crate) fn catch_up(&self) {
        if self.is_waiting() {
            return;
        }
        if self.durability.catch_up(self.fsync, self.clock.now_ms()) {
            if let Some(Err(e)) = self.inner.lock().file.as_ref().map(File::sync_data) {
                tracing::error!("AOF fsync failed: {e}");
            }
        }
    }

    /// Fsyncs the file now, whatever the policy: what a shutdown does before the process
    /// exits, as Redis flushes and fsyncs its AOF in `prepareForShutdown`.
    pub(crate) fn fsync_now(&self) -> std::io::Result<()> {
        let inner = self.inner.lock();
        let Some(file) = inner.file.as_ref() else {
            // Waiting for its first rewrite: nothing was written.
            return Ok(());
        };
        file.sync_data()?;
        let end = self.size.load(Ordering::Relaxed);
        self.durability.fsynced(end, self.clock.now_ms());
        Ok(())
    }

    /// The policy this file was opened with.
    pub(crate) fn policy(&self) -> Fsync {
        self.fsync
    }

    /// The file's length (`aof_current_size`).
    pub(crate) fn size(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }

    /// Its length after the last rewrite, or when it was opened (`aof_base_size`).
    pub(crate) fn base_size(&self) -> u64 {
        self.base_size.load(Ordering::Relaxed)
    }

    /// The bytes the running rewrite holds in memory, 0 when none runs.
    pub(crate) fn rewrite_buffered(&self) -> usize {
        self.rewrite_buffered.load(Ordering::Relaxed)
    }

    /// Starts logging the writes for rewrite `job`, whose snapshot is taken now: the caller
    /// holds the execution gate exclusively and the stream-order lock, so no write falls
    /// between the snapshot and the log. The log holds at most `limit` bytes between two
    /// [`take_rewrite_log`](Aof::take_rewrite_log)s; past that it is dropped and the rewrite
    /// fails, rather than let memory grow without bound while its thread falls behind.
    pub(crate) fn begin_rewrite(&self, job: u64, limit: usize) {
        let mut inner = self.inner.lock();
        inner.rewrite = Some(RewriteLog {
            job,
            bytes: BytesMut::new(),
            last_db: -1,
            limit,
            overflowed: false,
        });
        self.rewrite_buffered.store(0, Ordering::Relaxed);
    }

    /// Takes the writes logged so far for rewrite `job`, for its thread to append to the new
    /// file; the log goes on collecting.
    pub(crate) fn take_rewrite_log(&self, job: u64) -> Result<BytesMut, LogLost> {
        let mut inner = self.inner.lock();
        let log = inner
            .rewrite
            .as_mut()
            .filter(|l| l.job == job)
            .ok_or(LogLost::Gone)?;
        if log.overflowed {
            return Err(LogLost::Overflowed);
        }
        self.rewrite_buffered.store(0, Ordering::Relaxed);
        Ok(std::mem::take(&mut log.bytes))
    }

    /// Stops logging for rewrite `job` (it failed or was given up), freeing the log.
    pub(crate) fn end_rewrite(&self, job: u64) {
        let mut inner = self.inner.lock();
        if inner.rewrite.as_ref().is_some_and(|l| l.job == job) {
            inner.rewrite = None;
            self.rewrite_buffered.store(0, Ordering::Relaxed);
        }
    }

    /// Finishes rewrite `job`: appends the rest of its log to its new file `tmp` (at
    /// `tmp_path`, beside the AOF, holding the snapshot and the log taken so far), fsyncs it,
    /// and renames it over the AOF; from then on writes go to the new file. All of it under
    /// the file's lock, so no write lands between the log's end and the switch. A crash
    /// before the rename leaves the old file, which holds every write; after it, the new one,
    /// which does too. An AOF that [waited](Aof::waiting) for this rewrite has a file from
    /// now on. Returns the new file's length.
    pub(crate) fn complete_rewrite(
        &self,
        job: u64,
        mut tmp: File,
        tmp_path: &Path,
    ) -> std::io::Result<u64> {
        let mut inner = self.inner.lock();
        let log = match inner.rewrite.take() {
            Some(l) if l.job == job => l,
            other => {
                inner.rewrite = other;
                return Err(std::io::Error::other(
                    "the rewrite was given up (a restart or a shutdown)",
                ));
            }
        };
        self.rewrite_buffered.store(0, Ordering::Relaxed);
        if log.overflowed {
            return Err(std::io::Error::other(
                "the writes made during the rewrite passed the bound of its buffer",
            ));
        }
        tmp.write_all(&log.bytes)?;
        tmp.sync_all()?;
        // The handle the server appends with from now on, opened before the rename so that
        // nothing can fail between the switch on disk and the switch here.
        let file = OpenOptions::new().append(true).open(tmp_path)?;
        let len = file.metadata()?.len();
        std::fs::rename(tmp_path, &self.path)?;
        sync_parent(&self.path);
        inner.file = Some(file);
        self.waiting.store(false, Ordering::Release);
        inner.last_db = log.last_db;
        self.size.store(len, Ordering::Relaxed);
        self.base_size.store(len, Ordering::Relaxed);
        self.durability.replaced(len, self.clock.now_ms());
        Ok(len)
    }
}

impl RewriteLog {
    /// Logs one append (`commands`, for database `db`), with its own `SELECT` when the log's
    /// database differs; past the limit, drops the log. Returns how many bytes the log took
    /// (0 once it overflowed).
    fn record(&mut self, db: usize, commands: &[u8], buffered: &AtomicUsize) -> usize {
        if self.overflowed {
            return 0;
        }
        let before = self.bytes.len();
        if self.last_db != db as i64 {
            encode_select(db, &mut self.bytes);
            self.last_db = db as i64;
        }
        self.bytes.extend_from_slice(commands);
        if self.bytes.len() > self.limit {
            tracing::warn!(
                "AOF rewrite: the writes made during the rewrite passed {} bytes; giving the rewrite up (the AOF keeps every write)",
                self.limit
            );
            self.overflowed = true;
            self.bytes = BytesMut::new();
            buffered.store(0, Ordering::Relaxed);
            return 0;
        }
        buffered.store(self.bytes.len(), Ordering::Relaxed);
        self.bytes.len() - before
    }
}

/// Where the append-only file is: `appendfilename` in `dir`.
pub(crate) fn path(config: &crate::config::Config) -> PathBuf {
    let dir = config.get("dir").unwrap_or_else(|| ".".into());
    let name = config
        .get("appendfilename")
        .unwrap_or_else(|| "appendonly.aof".into());
    Path::new(&dir).join(name)
}

/// Appends `SELECT db` to `out`.
pub(crate) fn encode_select(db: usize, out: &mut BytesMut) {
    crate::codec::encode(
        &[&b"SELECT"[..], itoa::Buffer::new().format(db).as_bytes()],
        out,
    );
}

/// Fsyncs the folder holding `path`, so that a rename in it survives a power cut. A failure
/// is logged only: the file's own bytes are on disk either way.
pub(crate) fn sync_parent(path: &Path) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!("fsync of the folder {} failed: {e}", dir.display());
    }
}

/// Where `BGREWRITEAOF` stands: what `INFO persistence` reports of it (Redis's
/// `aof_rewrite_*` fields) and what the commands and the cron consult. The rewrite itself is
/// `cmd::bgrewriteaof`'s.
#[derive(Debug)]
pub(crate) struct RewriteStatus {
    /// A rewrite waits for the running background job (a `BGSAVE`) or for `EXEC` to end
    /// (`aof_rewrite_scheduled`); the cron starts it then.
    pub scheduled: AtomicBool,
    /// The number of the latest rewrite started. Giving a rewrite up (a restart, a shutdown)
    /// bumps it: a rewrite's thread whose number is no longer current stops and leaves the
    /// file alone.
    job: AtomicU64,
    /// Unix seconds when the running rewrite began (for `aof_current_rewrite_time_sec`).
    pub started_s: AtomicU64,
    /// Seconds the last rewrite took (`aof_last_rewrite_time_sec`), -1 before the first.
    pub last_time_s: AtomicI64,
    /// Whether the last rewrite failed (`aof_last_bgrewrite_status:err`).
    pub last_failed: AtomicBool,
    /// Rewrites started (`aof_rewrites`).
    pub rewrites: AtomicU64,
    /// Rewrites failed in a row (`aof_rewrites_consecutive_failures`).
    pub consecutive_failures: AtomicU64,
    /// How long rewrites are held back after failing in a row (see `cmd::bgrewriteaof`).
    pub limit: Mutex<RewriteLimit>,
}

/// The wait Redis's `aofRewriteLimited` imposes after rewrites failed in a row.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RewriteLimit {
    /// Unix seconds before which no automatic or scheduled rewrite starts (0: none).
    pub next_s: u64,
    /// The last wait, in minutes (doubles each time, up to an hour).
    pub minutes: u64,
}

impl Default for RewriteStatus {
    fn default() -> Self {
        RewriteStatus {
            scheduled: AtomicBool::new(false),
            job: AtomicU64::new(0),
            started_s: AtomicU64::new(0),
            last_time_s: AtomicI64::new(-1),
            last_failed: AtomicBool::new(false),
            rewrites: AtomicU64::new(0),
            consecutive_failures: AtomicU64::new(0),
            limit: Mutex::new(RewriteLimit::default()),
        }
    }
}

impl RewriteStatus {
    /// Numbers a new rewrite, started at `now_s`, and counts it.
    pub(crate) fn begin(&self, now_s: u64) -> u64 {
        self.scheduled.store(false, Ordering::Relaxed);
        self.rewrites.fetch_add(1, Ordering::Relaxed);
        self.started_s.store(now_s, Ordering::Relaxed);
        self.job.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Whether rewrite `job` is still the current one (not given up).
    pub(crate) fn is_current(&self, job: u64) -> bool {
        self.job.load(Ordering::Acquire) == job
    }

    /// Gives up the running rewrite, if any: its thread stops at its next step.
    pub(crate) fn give_up(&self) {
        self.job.fetch_add(1, Ordering::AcqRel);
    }

    /// Back to a new process's state (a restart): the running rewrite, if any, is given up,
    /// and the figures start again.
    pub(crate) fn reset(&self) {
        self.give_up();
        self.scheduled.store(false, Ordering::Relaxed);
        self.started_s.store(0, Ordering::Relaxed);
        self.last_time_s.store(-1, Ordering::Relaxed);
        self.last_failed.store(false, Ordering::Relaxed);
        self.rewrites.store(0, Ordering::Relaxed);
        self.consecutive_failures.store(0, Ordering::Relaxed);
        *self.limit.lock() = RewriteLimit::default();
    }

    /// Records how a rewrite begun at `started_s` ended, at `now_s`.
    pub(crate) fn ended(&self, started_s: u64, now_s: u64, ok: bool) {
        self.last_time_s
            .store(now_s.saturating_sub(started_s) as i64, Ordering::Relaxed);
        self.last_failed.store(!ok, Ordering::Relaxed);
        if ok {
            self.consecutive_failures.store(0, Ordering::Relaxed);
        } else {
            self.consecutive_failures.fetch_add(1, Ordering::Relaxed);
        }
        self.started_s.store(0, Ordering::Relaxed);
    }
}

/// Reads the commands of an AOF, as Redis does with `aof-load-truncated yes` (its default): a
/// file that ends in the middle of a command (a torn write: the machine went down while the
/// kernel wrote it out) loads up to its last complete command, the tail is cut off the file,
/// and the log says so; a file that ends inside a `MULTI` block loads up to the `MULTI` (the
/// transaction is reverted, never half applied). Bytes that are not RESP at all, before the
/// end, are corruption rather than a torn tail: the load refuses, as Redis refuses to start
/// ("Bad file format reading the append only file").
pub(crate) fn load(path: &PathBuf) -> std::io::Result<Vec<Vec<Bytes>>> {
    let mut data = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut data)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    }
    let total = data.len();
    let scan = scan(&data);
    if scan.bad_format {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "Bad file format reading the append only file {} at offset {}: make a backup of it, then cut it there",
                path.display(),
                scan.good
            ),
        ));
    }
    if scan.good < total {
        if scan.reverted_multi {
            tracing::warn!(
                "Revert incomplete MULTI/EXEC transaction in AOF file {}",
                path.display()
            );
        }
        tracing::warn!(
            "AOF {} is truncated: loading its {} complete bytes and cutting {} bytes off its tail (aof-load-truncated)",
            path.display(),
            scan.good,
            total - scan.good
        );
        OpenOptions::new()
            .write(true)
            .open(path)?
            .set_len(scan.good as u64)?;
    }
    Ok(scan.commands)
}

/// What [`scan`] found in the bytes of an AOF.
#[derive(Debug)]
pub(crate) struct Scan {
    /// The commands of the intact prefix.
    pub(crate) commands: Vec<Vec<Bytes>>,
    /// That prefix's length.
    pub(crate) good: usize,
    /// The prefix ended before a `MULTI` whose `EXEC` never came: the transaction was dropped.
    pub(crate) reverted_multi: bool,
    /// The bytes after the prefix are not RESP (corruption), as opposed to a command cut short.
    pub(crate) bad_format: bool,
}

/// Parses the bytes of an AOF: the commands of its intact prefix, and that prefix's length
/// (less than `data.len()` when the tail is torn, ends inside a transaction, or is not RESP).
/// Memory follows the bytes given: a claimed argument length is never allocated ahead of its
/// bytes.
#[cfg(feature = "internals")]
pub(crate) fn parse(data: &[u8]) -> (Vec<Vec<Bytes>>, usize) {
    let s = scan(data);
    (s.commands, s.good)
}

/// [`parse`], telling a torn tail from corruption.
pub(crate) fn scan(data: &[u8]) -> Scan {
    let total = data.len();
    let mut buf = BytesMut::from(data);
    let mut decoder = Decoder::default();
    let mut commands = Vec::new();
    let mut good = 0usize;
    // Where the open `MULTI` began: (its offset, the commands before it).
    let mut multi: Option<(usize, usize)> = None;
    let mut bad_format = false;
    loop {
        let before = total - buf.len();
        // Every record of an AOF is a multibulk; anything else is not a torn write.
        if buf.first().is_some_and(|&b| b != b'*') {
            bad_format = true;
            break;
        }
        match decoder.parse(&mut buf, u64::MAX) {
            Ok(Some(Parsed::Command(args))) => {
                let name = args.first().map(|a| a.to_ascii_lowercase());
                match name.as_deref() {
                    Some(b"multi") if multi.is_none() => multi = Some((before, commands.len())),
                    Some(b"exec" | b"discard") => multi = None,
                    _ => {}
                }
                commands.push(args);
                good = total - buf.len();
            }
            Ok(Some(Parsed::Empty)) => good = total - buf.len(),
            Ok(None) => break,
            Err(_) => {
                bad_format = true;
                break;
            }
        }
    }
    let reverted_multi = multi.is_some();
    if let Some((at, count)) = multi {
        good = at;
        commands.truncate(count);
    }
    Scan {
        commands,
        good,
        reverted_multi,
        bad_format,
    }
}
