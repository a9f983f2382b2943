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

use super::write::{snapshot, ReplInfo};
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

/// Serialises the keyspace as it is now, with the `dirty` count it corresponds to. Taken
/// while no command runs (the caller holds the execution gate exclusively), so the file is one
/// moment's keyspace, as Redis's fork gives it.
pub(crate) fn take(shared: &Shared) -> (Bytes, u64) {
    let repl = &shared.replication;
    let info = ReplInfo {
        replid: repl.replid(),
        offset: repl.offset(),
        stream_db: -1,
    };
    let dirty = shared.stats.dirty.load(Ordering::Relaxed);
    (snapshot(shared, &info), dirty)
}

/// Writes `data` to `path` whole or not at all (a temporary file, flushed, then renamed).
pub(crate) fn write(path: &std::path::Path, data: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = dir.join(format!("temp-{}.rdb", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
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
