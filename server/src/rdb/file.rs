//! The snapshot file, `dir`/`dbfilename` (`dump.rdb` by default): what `SAVE` and `BGSAVE`
//! write, in Redis's RDB format (so `redis-server` can load it, and latchkey can load one
//! `redis-server` wrote), and what the `latchkey-server` binary loads at start when the AOF
//! is off, as `redis-server` does.
//!
//! A file is written whole or not at all: into a temporary file in the same folder, flushed
//! to the disk, then renamed over the old one, as Redis does; a crash mid-write leaves the
//! previous snapshot in place.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::write::{snapshot_keys, ReplInfo};
use crate::state::Shared;

/// Where the snapshot file is: `dbfilename` in `dir`.
pub(crate) fn path(shared: &Shared) -> PathBuf {
    let dir = shared.config.get("dir").unwrap_or_else(|| ".".into());
    let name = shared
        .config
        .get("dbfilename")
        .unwrap_or_else(|| "dump.rdb".into());
    PathBuf::from(dir).join(name)
}

/// A snapshot taken: the file's bytes, the `dirty` count it corresponds to, and (when
/// `rdb-key-save-delay` asks to pace the writing) the offset after each key's record.
#[derive(Debug)]
pub(crate) struct Taken {
    /// The RDB file.
    pub data: Bytes,
    /// `dirty` when it was taken.
    pub dirty: u64,
    /// Where each key's record ends in `data` (empty unless the writing is paced).
    pub key_ends: Vec<usize>,
}

/// Serialises the keyspace as it is now. Taken while no command runs (the caller holds the
/// execution gate exclusively), so the file is one moment's keyspace, as Redis's fork gives it.
pub(crate) fn take(shared: &Shared) -> Taken {
    let repl = &shared.replication;
    let info = ReplInfo {
        replid: repl.replid(),
        offset: repl.offset(),
        stream_db: -1,
    };
    let dirty = shared.stats.dirty.load(Ordering::Relaxed);
    let mut key_ends = Vec::new();
    let paced = key_save_delay(shared) != 0;
    let data = snapshot_keys(shared, &info, paced.then_some(&mut key_ends));
    Taken {
        data,
        dirty,
        key_ends,
    }
}

/// `rdb-key-save-delay`: microseconds a background save or AOF rewrite pauses after each key
/// (a negative `-n`: one microsecond after one key in `n`, by chance), Redis's testing knob
/// for holding a background job open. 0, its default, writes at full speed.
pub(crate) fn key_save_delay(shared: &Shared) -> i64 {
    shared
        .config
        .get("rdb-key-save-delay")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The longest sleep of a paced job between two looks at whether it was given up.
const PAUSE_SLICE_US: u64 = 10_000;

/// Writes `data` to `out`, pausing after each offset of `key_ends` as `delay` says (see
/// [`key_save_delay`]; Redis's `debugDelay`), and stopping with an error as soon as `go_on`
/// says the job was given up. With no delay, one write.
pub(crate) fn write_paced(
    out: &mut impl Write,
    data: &[u8],
    key_ends: &[usize],
    delay: i64,
    go_on: impl Fn() -> bool,
) -> std::io::Result<()> {
    if delay == 0 {
        return out.write_all(data);
    }
    let mut from = 0;
    for &end in key_ends {
        out.write_all(&data[from..end])?;
        from = end;
        let pause = match delay {
            d if d > 0 => d as u64,
            d => u64::from(rand::random_range(0..d.unsigned_abs()) == 0),
        };
        // In slices, so that a job given up during a long pause (Redis's tests pause seconds
        // per key) stops within one slice, as Redis's killed child stops at once.
        let mut left = pause;
        loop {
            if !go_on() {
                return Err(std::io::Error::other("the background job was given up"));
            }
            if left == 0 {
                break;
            }
            let slice = left.min(PAUSE_SLICE_US);
            std::thread::sleep(std::time::Duration::from_micros(slice));
            left -= slice;
        }
    }
    out.write_all(&data[from..])
}

/// Writes `data` to `path` whole or not at all (a temporary file, flushed, then renamed).
pub(crate) fn write(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    let tmp = format!("temp-{}.rdb", std::process::id());
    write_with(path, &tmp, |f| f.write_all(data), || Ok(()))
}

/// [`write`] in steps: `fill` writes the bytes into the temporary file `tmp_name` (beside
/// `path`), which is flushed to the disk; then `commit` decides whether it may replace `path`
/// (an error leaves `path` alone) and what it returns is held while the rename runs (a lock,
/// so that a background save cannot rename an older snapshot over the one a shutdown just
/// wrote). The temporary file is deleted on any error.
pub(crate) fn write_with<G>(
    path: &std::path::Path,
    tmp_name: &str,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
    commit: impl FnOnce() -> std::io::Result<G>,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        fill(&mut f)?;
        f.sync_all()?;
        let _held = commit()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Records a snapshot written at `dirty`: `LASTSAVE` and `rdb_changes_since_last_save`.
pub(crate) fn saved(shared: &Shared, dirty: u64) {
    shared.stats.dirty_at_save.store(dirty, Ordering::Relaxed);
    shared
        .stats
        .last_save_s
        .store(shared.clock.now_ms() / 1000, Ordering::Relaxed);
}

/// Reads the snapshot file into the keyspace if there is one: the number of keys loaded and
/// the function libraries it held (for the caller to load), or `None` without a file. A file
/// that cannot be parsed leaves the keyspace untouched and is an error.
pub(crate) fn load(shared: &Shared) -> std::io::Result<Option<(usize, Vec<Bytes>)>> {
    let path = path(shared);
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let loaded = super::read::load(shared, &data).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {e:?}", path.display()),
        )
    })?;
    Ok(Some((loaded.keys, loaded.functions)))
}
