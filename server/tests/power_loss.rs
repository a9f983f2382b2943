//! A power cut (`ServerHandle::power_loss`) on real AOF files in a temporary directory: what
//! each `appendfsync` policy keeps, on a virtual clock that alone decides it; and the start
//! after a cut always loads a valid AOF, even when the file ends in the middle of a command or
//! of a transaction (Redis's `aof-load-truncated yes`), saying so in the log.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use latchkey_server::{Clock, Frame, PowerLoss, Server, ServerHandle};
use tracing_subscriber::util::SubscriberInitExt;

/// A multiple of 5 s, so the kernel's flusher wake-ups (every 5 s of server time) fall on
/// round offsets from it.
const T0: u64 = 1_700_000_000_000;

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("latchkey-power-loss-")
        .tempdir()
        .unwrap()
}

async fn start(dir: &Path, fsync: &str, clock: &Clock) -> ServerHandle {
    Server::builder()
        .no_listener()
        .clock(clock.clone())
        .config("dir", dir.to_str().unwrap())
        .config("appendonly", "yes")
        .config("appendfsync", fsync)
        .start()
        .await
        .unwrap()
}

fn aof(dir: &Path) -> PathBuf {
    dir.join("appendonly.aof")
}

fn len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

async fn get(s: &ServerHandle, key: &str) -> Frame {
    s.client().cmd(["GET", key]).await
}

async fn set(s: &ServerHandle, key: &str) {
    assert_eq!(s.client().cmd(["SET", key, "v"]).await, Frame::ok());
}

fn ms(d: u64) -> Duration {
    Duration::from_millis(d)
}

#[tokio::test]
async fn under_always_a_power_cut_loses_nothing_acknowledged() {
    let tmp = temp_dir();
    let clock = Clock::virtual_at_ms(T0);
    let s = start(tmp.path(), "always", &clock).await;
    let mut c = s.client();
    assert_eq!(
        c.cmd(["SET", "lock", "tok", "NX", "PX", "30000"]).await,
        Frame::ok()
    );
    assert_eq!(c.cmd(["INCR", "n"]).await, Frame::Integer(1));
    // Every acknowledged write was fsynced before its reply: WAITAOF counts it at once.
    assert_eq!(
        c.cmd(["WAITAOF", "1", "0", "0"]).await,
        Frame::Array(vec![Frame::Integer(1), Frame::Integer(0)])
    );
    let written = len(&aof(tmp.path()));
    let cut = s.power_loss().await.unwrap();
    assert_eq!(
        cut,
        PowerLoss {
            written,
            durable: written,
            last_fsync_ms: Some(T0)
        }
    );
    assert_eq!(len(&aof(tmp.path())), written);
    assert_eq!(get(&s, "lock").await, Frame::bulk("tok"));
    assert_eq!(get(&s, "n").await, Frame::bulk("1"));
}

#[tokio::test]
async fn under_everysec_a_write_after_the_last_fsync_is_lost_and_one_before_it_survives() {
    let tmp = temp_dir();
    let clock = Clock::virtual_at_ms(T0);
    let s = start(tmp.path(), "everysec", &clock).await;
    let mut c = s.client();
    clock.advance(ms(10));
    set(&s, "before").await;
    // Within a second of the file's opening, the write waits for the fsync due at T0 + 1 s.
    assert_eq!(
        c.cmd(["WAITAOF", "1", "0", "20"]).await,
        Frame::Array(vec![Frame::Integer(0), Frame::Integer(0)])
    );
    clock.advance(ms(990));
    assert_eq!(
        c.cmd(["WAITAOF", "1", "0", "0"]).await,
        Frame::Array(vec![Frame::Integer(1), Frame::Integer(0)])
    );
    let fsynced = len(&aof(tmp.path()));
    // 300 ms after that fsync: this write waits for the next one, at T0 + 2 s.
    clock.advance(ms(300));
    set(&s, "after").await;
    clock.advance(ms(699));
    let written = len(&aof(tmp.path()));
    assert!(written > fsynced);
    let cut = s.power_loss().await.unwrap();
    assert_eq!(
        cut,
        PowerLoss {
            written,
            durable: fsynced,
            last_fsync_ms: Some(T0 + 1000)
        }
    );
    assert_eq!(len(&aof(tmp.path())), fsynced);
    assert_eq!(get(&s, "before").await, Frame::bulk("v"));
    assert_eq!(get(&s, "after").await, Frame::Null);

    // The booted node: its everysec clock starts again at the boot. A write a full second
    // later (the fsync due then covers it) survives the next cut.
    set(&s, "second").await;
    clock.advance(ms(1000));
    let cut = s.power_loss().await.unwrap();
    assert_eq!(cut.durable, cut.written);
    assert_eq!(get(&s, "second").await, Frame::bulk("v"));
    // After a quiet second, Redis's rule fsyncs a write at once: a cut at the same instant
    // keeps it.
    clock.advance(ms(5000));
    set(&s, "quiet").await;
    let cut = s.power_loss().await.unwrap();
    assert_eq!(cut.durable, cut.written);
    assert_eq!(cut.last_fsync_ms, Some(clock.now_ms()));
    assert_eq!(get(&s, "quiet").await, Frame::bulk("v"));
}

#[tokio::test]
async fn under_everysec_a_process_crash_loses_nothing_but_a_later_power_cut_still_can() {
    let tmp = temp_dir();
    let clock = Clock::virtual_at_ms(T0);
    let s = start(tmp.path(), "everysec", &clock).await;
    clock.advance(ms(10));
    set(&s, "lock").await;
    // The process dies: the page cache keeps the write, and the replay has it.
    s.restart(true).await.unwrap();
    assert_eq!(get(&s, "lock").await, Frame::bulk("v"));
    // It is no more on disk for that: a power cut now still loses it.
    let cut = s.power_loss().await.unwrap();
    assert_eq!(cut.durable, 0);
    assert_eq!(get(&s, "lock").await, Frame::Null);
}

#[tokio::test]
async fn under_no_only_what_the_kernel_wrote_back_survives() {
    // The model: the kernel's flusher wakes every 5 s and writes the whole file back once its
    // oldest unwritten byte is 30 s old; the server itself never fsyncs.
    for (cut_at, kept) in [(34_999, false), (35_000, true)] {
        let tmp = temp_dir();
        let clock = Clock::virtual_at_ms(T0);
        let s = start(tmp.path(), "no", &clock).await;
        let mut c = s.client();
        clock.advance(ms(10));
        set(&s, "old").await;
        clock.advance(ms(20_000));
        set(&s, "young").await;
        // WAITAOF never counts a write under `no` (as Redis: "WAITAOF local copy before
        // fsync" answers 0).
        assert_eq!(
            c.cmd(["WAITAOF", "1", "0", "20"]).await,
            Frame::Array(vec![Frame::Integer(0), Frame::Integer(0)])
        );
        clock.set_ms(T0 + cut_at);
        let written = len(&aof(tmp.path()));
        let cut = s.power_loss().await.unwrap();
        assert_eq!(cut.written, written);
        assert_eq!(cut.last_fsync_ms, None);
        // Dirty since T0 + 10 ms: the first wake-up 30 s after that is at T0 + 35 s, and it
        // takes the whole file, the write of 20 s later too.
        let expect = if kept { Frame::bulk("v") } else { Frame::Null };
        assert_eq!(
            cut.durable,
            if kept { written } else { 0 },
            "cut at {cut_at}"
        );
        assert_eq!(get(&s, "old").await, expect, "cut at {cut_at}");
        assert_eq!(get(&s, "young").await, expect, "cut at {cut_at}");
    }
}

/// Log lines, captured for the current thread (a current-thread runtime runs the whole test,
/// the server's tasks included, on it).
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Write for Log {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    fn capture(&self) -> impl Sized {
        let log = self.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || log.clone())
            .finish()
            .set_default()
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn append(path: &Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[tokio::test]
async fn after_a_cut_mid_record_the_restart_loads_up_to_the_last_complete_command_and_says_so() {
    let log = Log::default();
    let _guard = log.capture();
    let tmp = temp_dir();
    let path = aof(tmp.path());
    let clock = Clock::virtual_at_ms(T0);
    let s = start(tmp.path(), "always", &clock).await;
    set(&s, "kept").await;
    s.power_loss().await.unwrap();
    let clean = len(&path);
    // The machine went down while a write was on its way to the disk: half a command.
    append(&path, b"*3\r\n$3\r\nSET\r\n$4\r\nlost\r\n$5\r\nva");
    s.restart(true).await.unwrap();
    assert_eq!(get(&s, "kept").await, Frame::bulk("v"));
    assert_eq!(get(&s, "lost").await, Frame::Null);
    assert_eq!(len(&path), clean, "the torn tail stays in the file");
    assert!(log.text().contains("is truncated"), "{}", log.text());

    // A transaction cut before its EXEC is reverted whole, and the file is cut before its
    // MULTI: commands appended later are not swallowed into it at the next start.
    append(
        &path,
        b"*1\r\n$5\r\nMULTI\r\n*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$1\r\n1\r\n",
    );
    s.restart(true).await.unwrap();
    assert_eq!(get(&s, "half").await, Frame::Null);
    assert_eq!(len(&path), clean);
    assert!(
        log.text()
            .contains("Revert incomplete MULTI/EXEC transaction"),
        "{}",
        log.text()
    );
    set(&s, "later").await;
    s.restart(true).await.unwrap();
    assert_eq!(get(&s, "later").await, Frame::bulk("v"));
    assert_eq!(get(&s, "half").await, Frame::Null);

    // Bytes that are not an AOF record at all are corruption, not a torn write: the start
    // refuses, as redis-server does ("Bad file format"), and loads nothing.
    append(&path, b"not a command\r\n");
    let e = s.restart(true).await.unwrap_err();
    assert!(e.to_string().contains("Bad file format"), "{e}");
}

/// The record boundaries of an AOF written by the server (plain multibulks).
fn records(data: &[u8]) -> Vec<(usize, Vec<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut at = 0;
    let line = |at: &mut usize| {
        let nl = data[*at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let l = std::str::from_utf8(&data[*at + 1..*at + nl])
            .unwrap()
            .parse::<usize>()
            .unwrap();
        *at += nl + 2;
        l
    };
    while at < data.len() {
        let n = line(&mut at);
        let mut args = Vec::new();
        for _ in 0..n {
            let l = line(&mut at);
            args.push(data[at..at + l].to_vec());
            at += l + 2;
        }
        out.push((at, args));
    }
    out
}

#[tokio::test]
async fn every_cut_point_of_an_aof_starts_and_loads_its_complete_prefix() {
    let tmp = temp_dir();
    let clock = Clock::virtual_at_ms(T0);
    let s = start(tmp.path(), "always", &clock).await;
    let mut c = s.client();
    c.cmd(["SET", "a", "1"]).await;
    c.cmd(["MULTI"]).await;
    c.cmd(["SET", "b", "2"]).await;
    c.cmd(["SET", "c", "3"]).await;
    c.cmd(["EXEC"]).await;
    c.cmd(["SET", "d", "4"]).await;
    s.shutdown().await;
    let data = std::fs::read(aof(tmp.path())).unwrap();
    let recs = records(&data);
    assert!(recs.iter().any(|(_, a)| a[0] == b"MULTI"), "{recs:?}");
    for cut in 0..=data.len() {
        let dir = temp_dir();
        std::fs::write(aof(dir.path()), &data[..cut]).unwrap();
        // What Redis would load: the complete records, less an unterminated transaction.
        let mut keys = Vec::new();
        let mut kept = 0;
        let mut open: Option<(usize, usize)> = None;
        let mut start_of = 0;
        for (end, args) in recs.iter().filter(|(end, _)| *end <= cut) {
            match args[0].as_slice() {
                b"MULTI" => open = Some((start_of, keys.len())),
                b"EXEC" => open = None,
                b"SET" => keys.push(String::from_utf8(args[1].clone()).unwrap()),
                _ => {}
            }
            kept = *end;
            start_of = *end;
        }
        if let Some((at, n)) = open {
            kept = at;
            keys.truncate(n);
        }
        let s = start(dir.path(), "always", &clock).await;
        assert_eq!(
            s.client().cmd(["DBSIZE"]).await,
            Frame::Integer(keys.len() as i64),
            "cut at {cut}"
        );
        for k in &keys {
            assert_ne!(get(&s, k).await, Frame::Null, "cut at {cut}: {k}");
        }
        assert_eq!(len(&aof(dir.path())), kept as u64, "cut at {cut}");
        s.shutdown().await;
    }
}
