//! The append-only file: every change is appended as the write commands that reproduce it
//! (Redis's AOF format), and replayed at start. This is what decides whether a lock survives a
//! crash-restart: with `appendfsync always` an acknowledged lock is on disk before the reply.
//!
//! A torn last command (the machine went down while the file was written out) is cut off at
//! start, as Redis does with `aof-load-truncated yes`, instead of refusing to start; which
//! bytes a power cut leaves is [`crate::durability`]'s business.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
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
}

impl AofSlot {
    /// The file, for appending to it (`None` when `appendonly` is off).
    pub(crate) fn read(&self) -> parking_lot::RwLockReadGuard<'_, Option<Aof>> {
        self.file.read()
    }

    /// Opens (`Some`) or closes (`None`) the server's AOF.
    pub(crate) fn set(&self, aof: Option<Aof>) {
        let mut file = self.file.write();
        self.open.store(aof.is_some(), Ordering::Relaxed);
        *file = aof;
    }

    /// Whether an AOF is open: the answer [`read`](AofSlot::read) would give, without the
    /// lock. A write that raced with the file being opened or closed sees either answer,
    /// as it would with the lock (the lock was let go before the write recorded anyway).
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }
}

/// An open append-only file.
#[derive(Debug)]
pub(crate) struct Aof {
    file: Mutex<File>,
    fsync: Fsync,
    last_db: AtomicI64,
    clock: Clock,
    /// Which of the file's bytes are on disk; shared with the next `Aof` of the same file.
    durability: Arc<Durability>,
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
        Ok(Aof {
            file: Mutex::new(file),
            fsync,
            last_db: AtomicI64::new(-1),
            clock,
            durability,
        })
    }

    /// Appends commands already encoded in RESP (the bytes the replication stream carries),
    /// with a `SELECT` first when the database changes.
    pub(crate) fn append_encoded(&self, db: usize, commands: &[u8]) {
        if commands.is_empty() {
            return;
        }
        let with_select;
        let out = if self.last_db.swap(db as i64, Ordering::AcqRel) != db as i64 {
            let mut buf = BytesMut::new();
            crate::codec::encode(
                &[&b"SELECT"[..], itoa::Buffer::new().format(db).as_bytes()],
                &mut buf,
            );
            buf.extend_from_slice(commands);
            with_select = buf;
            &with_select[..]
        } else {
            commands
        };
        let mut f = self.file.lock();
        if let Err(e) = f.write_all(out) {
            tracing::error!("AOF write failed: {e}");
            return;
        }
        let now = self.clock.now_ms();
        let end = self.durability.wrote(out.len() as u64, now);
        if self.fsync == Fsync::Always {
            match f.sync_data() {
                Ok(()) => self.durability.fsynced(end, now),
                Err(e) => tracing::error!("AOF fsync failed: {e}"),
            }
        }
    }

    /// Whether everything appended is covered by this server's fsyncs (what `WAITAOF` and a
    /// replica's `FACK` count; never under `appendfsync no`, as in Redis).
    pub(crate) fn all_fsynced(&self) -> bool {
        self.catch_up();
        self.durability.all_fsynced()
    }

    /// Runs the `everysec` fsyncs that have come due on the server's clock (and the kernel's
    /// write-back, in the model): called by the flush task, and by whoever reads the line.
    pub(crate) fn catch_up(&self) {
        if self.durability.catch_up(self.fsync, self.clock.now_ms()) {
            if let Err(e) = self.file.lock().sync_data() {
                tracing::error!("AOF fsync failed: {e}");
            }
        }
    }

    /// The policy this file was opened with.
    pub(crate) fn policy(&self) -> Fsync {
        self.fsync
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
