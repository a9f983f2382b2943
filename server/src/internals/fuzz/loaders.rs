//! `rdb_load`, `aof_load`, `replica_stream`: what a server reads from a file or from its
//! master. A hostile file or master must not crash the process, hang it, or make it allocate
//! beyond a small multiple of the bytes it sent plus a constant.

use std::sync::atomic::AtomicBool;

use crate::codec::{Decoder, Parsed};
use crate::{aof, rdb, Frame, ServerHandle};
use arbitrary::{Arbitrary, Unstructured};
use bytes::{Bytes, BytesMut};

/// A parse may allocate this many times the bytes it was given ...
const ALLOC_FACTOR: usize = 256;
/// ... plus this.
const ALLOC_CONST: usize = 2 << 20;

fn assert_bounded(what: &str, input: usize, used: usize) {
    assert!(
        used <= ALLOC_FACTOR * input + ALLOC_CONST,
        "{what}: {input} input bytes made it allocate {used} bytes"
    );
}

/// The server still answers and its expiry index is whole.
async fn assert_healthy(server: &ServerHandle) {
    let mut probe = server.client();
    let pong = tokio::time::timeout(super::rt::COMMAND_TIMEOUT, probe.cmd(["PING"])).await;
    assert_eq!(pong.ok(), Some(Frame::Simple("PONG".into())), "no PONG");
    for (i, db) in server.shared().keyspace.iter() {
        if let Err(e) = db.check_expiry_index() {
            panic!("db {i}: {e}");
        }
    }
}

/// `rdb_load`: the RDB reader on arbitrary bytes. A payload that parses is then loaded into a
/// server, which must stay healthy.
pub fn check_rdb(data: &[u8]) {
    let base = super::alloc_start();
    let mut records = 0usize;
    let parsed = rdb::read::parse(data, |_| {
        records += 1;
        Ok(())
    });
    assert_bounded("RDB parse", data.len(), super::alloc_peak_since(base));
    if parsed.is_err() {
        return;
    }
    super::rt::block_on(async {
        let server = super::rt::server().await;
        let base = super::alloc_start();
        let loaded = rdb::read::load(server.shared(), data).expect("parsed once, loads");
        assert_bounded("RDB load", data.len(), super::alloc_peak_since(base));
        assert!(loaded.keys <= records);
        assert_healthy(&server).await;
        server.shutdown().await;
    });
}

/// Whether any command (or any argument: `MULTI` and scripts hide names there) may not run
/// under fuzzing; see [`super::rt::forbidden`].
fn any_forbidden(commands: &[Vec<Bytes>]) -> bool {
    commands.iter().any(|c| {
        let owned: Vec<Vec<u8>> = c.iter().map(|a| a.to_vec()).collect();
        c.iter().any(|a| super::rt::forbidden(a)) || super::rt::forbidden_config(&owned)
    })
}

/// `aof_load`: the AOF parser on arbitrary bytes, then a replay of what it found into a fresh
/// server (which must finish: nothing blocks while an AOF loads) and a health check.
pub fn check_aof(data: &[u8]) {
    let base = super::alloc_start();
    let (commands, good) = aof::parse(data);
    assert_bounded("AOF parse", data.len(), super::alloc_peak_since(base));
    assert!(good <= data.len());
    // The intact prefix parses to the same commands on its own, with nothing left over.
    let (again, good_again) = aof::parse(&data[..good]);
    assert_eq!(again, commands, "the intact prefix parses differently");
    assert_eq!(good_again, good);
    if any_forbidden(&commands) {
        return;
    }
    super::rt::block_on(async {
        let server = super::rt::server().await;
        let replay = crate::restart::replay(server.shared(), commands);
        // Paused time: this elapses at once if the replay waits on anything at all.
        tokio::time::timeout(super::rt::COMMAND_TIMEOUT * 100, replay)
            .await
            .expect("replaying an AOF blocked");
        assert_healthy(&server).await;
        server.shutdown().await;
    });
}

/// How a fuzzed master opens the link.
#[derive(Arbitrary, Debug)]
pub enum Opening {
    /// `+CONTINUE <id>`: keep the keyspace, go straight to the stream.
    Continue(Vec<u8>),
    /// `+FULLRESYNC <id> <offset>`, then a snapshot.
    FullResync {
        /// The master's replication id.
        id: Vec<u8>,
        /// The stream offset the snapshot stands at.
        offset: u64,
        /// The snapshot.
        snapshot: Snapshot,
    },
    /// Anything at all where the PSYNC reply goes.
    Raw(Vec<u8>),
}

/// The snapshot after `+FULLRESYNC`.
#[derive(Arbitrary, Debug)]
pub enum Snapshot {
    /// An empty but valid RDB, sized.
    Empty,
    /// These bytes, announced as `$<len + extra>`: an `extra` above zero announces more than
    /// is ever sent.
    Sized {
        /// The payload.
        rdb: Vec<u8>,
        /// Added to the announced length (wrapping).
        extra: u64,
    },
    /// These bytes, streamed diskless (`$EOF:<mark>` ... `<mark>`).
    Eof {
        /// The payload.
        rdb: Vec<u8>,
        /// Whether the closing mark is sent.
        closed: bool,
    },
    /// Anything at all where the snapshot header goes.
    Raw(Vec<u8>),
}

/// A fuzzed master: handshake replies, the PSYNC answer, then the command stream.
#[derive(Arbitrary, Debug)]
pub struct Master {
    /// Replies to PING and the two REPLCONFs (`None`: `+OK`).
    pub handshake: [Option<Vec<u8>>; 3],
    /// The PSYNC reply and what follows it.
    pub opening: Opening,
    /// The replication stream: raw bytes, usually RESP commands.
    pub stream: Vec<u8>,
}

/// An RDB with no keys and no checksum (zero, which means "not computed").
fn empty_rdb() -> Vec<u8> {
    let mut v = b"REDIS0011".to_vec();
    v.push(0xFF);
    v.extend([0u8; 8]);
    v
}

impl Master {
    /// The bytes this master sends, in order.
    pub fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, h) in self.handshake.iter().enumerate() {
            match h {
                Some(b) => out.extend(b),
                None if i == 0 => out.extend(b"+PONG\r\n"),
                None => out.extend(b"+OK\r\n"),
            }
        }
        match &self.opening {
            Opening::Continue(id) => {
                out.extend(b"+CONTINUE ");
                out.extend(id);
                out.extend(b"\r\n");
            }
            Opening::FullResync {
                id,
                offset,
                snapshot,
            } => {
                out.extend(b"+FULLRESYNC ");
                out.extend(id);
                out.extend(format!(" {offset}\r\n").as_bytes());
                match snapshot {
                    Snapshot::Empty => {
                        let rdb = empty_rdb();
                        out.extend(format!("${}\r\n", rdb.len()).as_bytes());
                        out.extend(rdb);
                    }
                    Snapshot::Sized { rdb, extra } => {
                        let len = (rdb.len() as u64).wrapping_add(*extra);
                        out.extend(format!("${len}\r\n").as_bytes());
                        out.extend(rdb);
                    }
                    Snapshot::Eof { rdb, closed } => {
                        let mark = "m".repeat(40);
                        out.extend(format!("$EOF:{mark}\r\n").as_bytes());
                        out.extend(rdb);
                        if *closed {
                            out.extend(mark.as_bytes());
                        }
                    }
                    Snapshot::Raw(b) => out.extend(b),
                }
            }
            Opening::Raw(b) => out.extend(b),
        }
        out.extend(&self.stream);
        out
    }
}

/// Commands anywhere in `bytes` (decoded as a replica would), for the forbidden-command check.
fn commands_in(bytes: &[u8]) -> Vec<Vec<Bytes>> {
    let mut out = Vec::new();
    // From every offset a command could start at: the handshake and snapshot come first, and
    // where the stream begins depends on how they parse.
    for start in 0..bytes.len() {
        if start > 0 && bytes[start - 1] != b'\n' {
            continue;
        }
        let mut buf = BytesMut::from(&bytes[start..]);
        let mut d = Decoder::default();
        while let Ok(Some(p)) = d.parse(&mut buf, u64::MAX) {
            if let Parsed::Command(c) = p {
                out.push(c);
            }
        }
    }
    out
}

/// `replica_stream`: a replica following a fuzzed master, over bytes in memory. It must end
/// (the stream ends, so the link does), allocate in proportion to what was sent, and leave a
/// healthy server.
pub fn check_replica(data: &[u8]) {
    let u = Unstructured::new(data);
    let Ok(master) = Master::arbitrary_take_rest(u) else {
        return;
    };
    let bytes = master.bytes();
    // Only without commands: a 30-byte SETRANGE may rightly allocate 512 MiB, on a replica as
    // on a master (maxmemory bounds that, not the link).
    let bounded = commands_in(&master.stream).is_empty();
    check_master_bytes(&bytes, bounded);
}

/// A replica following a master that sends exactly `bytes` and then closes the link. With
/// `bounded`, the whole link (handshake, snapshot, stream) must allocate in proportion to the
/// bytes.
pub fn check_master_bytes(bytes: &[u8], bounded: bool) {
    // The replica runs whatever its master sends, as Redis's does; a fuzzed master may not
    // send what fuzzing may not run (a REPLICAOF to anywhere, SHUTDOWN, ...). Any byte after
    // a newline may start a command, so look there too (in a copy of the bytes).
    if any_forbidden(&commands_in(bytes)) {
        return;
    }
    super::rt::block_on(async {
        let server = super::rt::server().await;
        server.shared().set_replica(true);
        let up = AtomicBool::new(false);
        let base = super::alloc_start();
        let link = crate::replica::follow_link(server.shared(), bytes, tokio::io::sink(), &up);
        // A master may legitimately stall the link (a BLPOP 0 in its stream blocks it in
        // Redis too); only the process must not hang, which libFuzzer's -timeout watches.
        let ended = tokio::time::timeout(super::rt::COMMAND_TIMEOUT * 100, link).await;
        if bounded {
            assert_bounded("replica link", bytes.len(), super::alloc_peak_since(base));
        }
        if let Ok(r) = ended {
            assert!(
                r.is_err(),
                "a link whose master went away ended without error"
            );
        }
        server.shared().set_replica(false);
        assert_healthy(&server).await;
        server.shutdown().await;
    });
}

/// Whether the RDB reader accepts `data` (parsed only, nothing loaded).
pub fn rdb_parses(data: &[u8]) -> bool {
    rdb::read::parse(data, |_| Ok(())).is_ok()
}
