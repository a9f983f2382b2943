//! The append-only file: every change is appended as the write commands that reproduce it
//! (Redis's AOF format), and replayed at start. This is what decides whether a lock survives a
//! crash-restart: with `appendfsync always` an acknowledged lock is on disk before the reply.
//!
//! A torn last command (the process died mid-write) is cut off at start, as
//! `redis-check-aof --fix` would, instead of refusing to start.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;

use crate::codec::{Decoder, Parsed};

/// When appended bytes are forced to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fsync {
    /// After every write, before the reply.
    Always,
    /// Once a second, from a background task.
    EverySec,
    /// Never explicitly (the OS decides).
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

/// An open append-only file.
#[derive(Debug)]
pub(crate) struct Aof {
    file: Mutex<File>,
    fsync: Fsync,
    last_db: AtomicI64,
    dirty: AtomicBool,
    /// Bytes appended since the file was opened.
    appended: AtomicU64,
    /// Of those, how many are known to be on disk (what `WAITAOF` waits for).
    synced: AtomicU64,
}

impl Aof {
    /// Opens (creating if needed) the file for appending.
    pub(crate) fn open(path: PathBuf, fsync: Fsync) -> std::io::Result<Aof> {
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(Aof {
            file: Mutex::new(file),
            fsync,
            last_db: AtomicI64::new(-1),
            dirty: AtomicBool::new(false),
            appended: AtomicU64::new(0),
            synced: AtomicU64::new(0),
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
        let appended =
            self.appended.fetch_add(out.len() as u64, Ordering::AcqRel) + out.len() as u64;
        match self.fsync {
            Fsync::Always => match f.sync_data() {
                Ok(()) => self.synced.store(appended, Ordering::Release),
                Err(e) => tracing::error!("AOF fsync failed: {e}"),
            },
            Fsync::EverySec => self.dirty.store(true, Ordering::Release),
            // Nothing ever forces these bytes to disk: count them as written once written.
            Fsync::No => self.synced.store(appended, Ordering::Release),
        }
    }

    /// Bytes appended since the file was opened.
    pub(crate) fn appended(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }

    /// Bytes known to be on disk (`appendfsync no`: bytes written).
    pub(crate) fn synced(&self) -> u64 {
        self.synced.load(Ordering::Acquire)
    }

    /// The once-a-second flush of `appendfsync everysec`.
    pub(crate) fn flush_if_dirty(&self) {
        if self.dirty.swap(false, Ordering::AcqRel) {
            let f = self.file.lock();
            let appended = self.appended();
            if f.sync_data().is_ok() {
                self.synced.fetch_max(appended, Ordering::AcqRel);
            }
        }
    }
}

/// Reads the commands of an AOF. A torn tail is cut off the file (and reported) so that the
/// next start sees a clean file.
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
    let (commands, good) = parse(&data);
    if good < total {
        tracing::warn!(
            "AOF {} has a torn tail: truncating {} bytes (as redis-check-aof --fix would)",
            path.display(),
            total - good
        );
        OpenOptions::new()
            .write(true)
            .open(path)?
            .set_len(good as u64)?;
    }
    Ok(commands)
}

/// Parses the bytes of an AOF: the commands of its intact prefix, and that prefix's length
/// (less than `data.len()` when the tail is torn or not RESP). Memory follows the bytes given:
/// a claimed argument length is never allocated ahead of its bytes.
pub(crate) fn parse(data: &[u8]) -> (Vec<Vec<Bytes>>, usize) {
    let total = data.len();
    let mut buf = BytesMut::from(data);
    let mut decoder = Decoder::default();
    let mut commands = Vec::new();
    let mut good = 0usize;
    loop {
        match decoder.parse(&mut buf, u64::MAX) {
            Ok(Some(Parsed::Command(args))) => {
                commands.push(args);
                good = total - buf.len();
            }
            Ok(Some(Parsed::Empty)) => good = total - buf.len(),
            Ok(None) | Err(_) => break,
        }
    }
    (commands, good)
}
