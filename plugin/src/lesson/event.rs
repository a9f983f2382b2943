//! What a lesson records: one [`Event`] per thing the program did or measured, stamped with
//! the lesson's virtual clock. The narration is rendered from these events and nothing else
//! ([`Event::sentence`]), so the lesson can only say what it measured in that run.

use std::fmt::Write as _;

/// A lane of the timeline: a client (a wasm instance of the tenant), a server node, or the
/// storage that holds the shared resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lane {
    /// Client `A`, `B`, ...: one instance of the lock-client component.
    Client(char),
    /// Server node `n1`, `n2`, ... (index from 0).
    Node(usize),
    /// The storage node holding the resource.
    Storage,
}

impl std::fmt::Display for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lane::Client(c) => write!(f, "{c}"),
            Lane::Node(n) => write!(f, "n{}", n + 1),
            Lane::Storage => f.write_str("storage"),
        }
    }
}

/// Who a lock key names as its holder, as read from a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// The key does not exist: the lock is free there.
    Nobody,
    /// The key holds the token this client was given.
    Client(char),
    /// The key holds a token no client of this lesson was given.
    Other,
}

/// How the storage decides whether to apply a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// It applies every write.
    None,
    /// It applies a write whose fencing token is at least the highest it has seen.
    Fence(i64),
    /// It applies a write only while the lock key (beside the resource) holds the writer's
    /// token: one script, compare-and-set.
    Lease,
}

/// One recorded step of a lesson. Every field was read from a server, from the component's
/// reply, or is a parameter the lesson chose and acted on (a pause's length, a write's value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// A node answered after starting; `replica_of` when it follows a master, `aof` when it
    /// logs writes to an append-only file.
    NodeStarted {
        /// The node.
        node: usize,
        /// Its master, if a replica.
        replica_of: Option<usize>,
        /// Its AOF's `appendfsync` policy, if it keeps one.
        aof: Option<String>,
    },
    /// A node was given a memory limit (`CONFIG SET maxmemory`) a little above what it used.
    MemoryLimit {
        /// The node.
        node: usize,
        /// `used_memory` when the limit was set.
        used: u64,
        /// The limit, in bytes.
        bytes: u64,
        /// `maxmemory-policy`.
        policy: String,
    },
    /// A client's acquisition failed with an error (the server refused the command).
    AcquireError {
        /// The client.
        client: char,
        /// The error, as the component returned it.
        error: String,
    },
    /// The replica reported the same replication offset as its master.
    CaughtUp {
        /// The replica.
        replica: usize,
        /// The offset both reported.
        offset: u64,
    },
    /// The replica synchronised in full with its master's new replication history (the
    /// master restarted): it now mirrors the master.
    Resynced {
        /// The replica.
        replica: usize,
        /// The offset both reported.
        offset: u64,
    },
    /// The master holds back its replication stream from now on.
    ReplicationPaused {
        /// The master.
        master: usize,
    },
    /// The replica applies (and acknowledges) what it receives this late, in real time.
    ReplicaLag {
        /// The replica.
        replica: usize,
        /// The lag, in milliseconds.
        ms: u64,
    },
    /// The resource was set to its starting value.
    ResourceSet {
        /// Where it lives.
        lane: Lane,
        /// The value.
        value: i64,
    },
    /// A client's acquisition returned a lease.
    Acquired {
        /// The client.
        client: char,
        /// The node(s) it talked to.
        nodes: Vec<usize>,
        /// The fencing token, for a fenced lock.
        fence: Option<i64>,
        /// For a replicated lock (confirmed by `WAIT`): how many other nodes held the lock key
        /// with this client's token when asked right after.
        acked: Option<i64>,
        /// RedLock: the lease's validity ends at this time of the lesson clock.
        valid_until: Option<u64>,
        /// A watched lock: the client's host renews it this often (ms of the client's clock).
        renewed_every: Option<u64>,
    },
    /// A client's acquisition returned no lease.
    NotAcquired {
        /// The client.
        client: char,
        /// The node(s) it talked to.
        nodes: Vec<usize>,
        /// For a replicated lock that was taken then given back: how many replicas
        /// acknowledged it.
        acked: Option<i64>,
    },
    /// A client gave its lease back (token-checked release).
    Released {
        /// The client.
        client: char,
        /// What the release found (`released`, `not-owner`, ...).
        outcome: String,
    },
    /// A node was asked who holds the lock key.
    LockSeen {
        /// The node.
        node: usize,
        /// What its key holds.
        holder: Holder,
        /// Its remaining TTL in ms, when held.
        pttl: Option<i64>,
    },
    /// Each node's replication offset, read at this moment.
    Offsets {
        /// `(node, offset)` for every live node.
        offsets: Vec<(usize, u64)>,
    },
    /// The master crashed (what it held back from its replicas goes with it).
    Crashed {
        /// The node.
        node: usize,
        /// Its replication offset at the crash.
        offset: u64,
    },
    /// `--against`: the master was cut off from its replicas (what the fault proxies held was
    /// dropped) and from the clients; the user's server itself is left running.
    CutOff {
        /// The node.
        node: usize,
        /// Its replication offset when cut off.
        offset: u64,
    },
    /// A replica became master.
    Promoted {
        /// The node.
        node: usize,
        /// Its replication offset when promoted.
        offset: u64,
    },
    /// The power to a node's machine was cut: its process died and its AOF kept only the bytes
    /// that were on disk (fsynced, or written back by the kernel); the rest, in the page
    /// cache, is lost. Read from the server's power-loss fault.
    PowerLost {
        /// The node.
        node: usize,
        /// Bytes its AOF held as the process saw them.
        written: u64,
        /// Of those, the bytes on disk: what the file keeps.
        durable: u64,
        /// Lesson time of its last fsync that wrote something, if it had fsynced at all.
        last_fsync_ms: Option<u64>,
    },
    /// A node restarted in place.
    Restarted {
        /// The node.
        node: usize,
        /// Whether it replayed its AOF.
        aof: bool,
        /// Keys it held once serving again (`DBSIZE`).
        keys: i64,
    },
    /// Clients can (or can no longer) reach these nodes.
    Network {
        /// The nodes.
        nodes: Vec<usize>,
        /// True when cut off, false when reachable again.
        cut: bool,
    },
    /// The lesson clock moved forward while this client did nothing (a GC pause, a VM stop).
    Paused {
        /// The client.
        client: char,
        /// How long, in ms.
        ms: u64,
    },
    /// Time passed for everyone.
    Waited {
        /// How long, in ms.
        ms: u64,
    },
    /// A client read the resource.
    Read {
        /// The client.
        client: char,
        /// The value it read.
        value: i64,
    },
    /// A client wrote the resource (its read plus `delta`), and what the storage said.
    Wrote {
        /// The client.
        client: char,
        /// The value written.
        value: i64,
        /// What it added to the value it read.
        delta: i64,
        /// The check the storage applied.
        check: Check,
        /// Whether the storage applied it.
        accepted: bool,
    },
    /// A client asked its watched lock whether it still held it.
    LeaseChecked {
        /// The client.
        client: char,
        /// What `held` answered.
        held: bool,
        /// What `lost` answered: why the host found the lease lost.
        cause: Option<String>,
    },
    /// A client made a call into its host (a read of the lock's holder), and the host let it
    /// through or stopped the instance.
    HostCall {
        /// The client.
        client: char,
        /// The host's reason, when it stopped the instance.
        stopped: Option<String>,
    },
    /// A client's whole process stopped (a VM stop): neither the client nor its host's lease
    /// keeper runs.
    Stopped {
        /// The client.
        client: char,
    },
    /// A stopped client's process runs again.
    Resumed {
        /// The client.
        client: char,
        /// How long it was stopped, ms.
        ms: u64,
    },
    /// The master was given `min-replicas-to-write` and `min-replicas-max-lag`.
    MinReplicas {
        /// The node.
        node: usize,
        /// `min-replicas-to-write`.
        to_write: u64,
        /// `min-replicas-max-lag`, seconds.
        max_lag_s: u64,
    },
    /// The master's count of its replicas (`INFO replication`): connected, and "good" (acknowledged
    /// within `min-replicas-max-lag`).
    GoodReplicas {
        /// The node.
        node: usize,
        /// `connected_slaves`.
        connected: u64,
        /// `min_slaves_good_slaves`.
        good: u64,
    },
    /// A replica's link to its master was cut both ways, and its master no longer counts it.
    LinkCut {
        /// The replica.
        replica: usize,
    },
    /// A client did not write, because its own view said its lease was over.
    HeldBack {
        /// The client.
        client: char,
    },
    /// Keys were written to a node until it was full.
    Filled {
        /// The node.
        node: usize,
        /// Keys written.
        keys: u64,
        /// Writes refused (`OOM`).
        refused: u64,
        /// Keys the node evicted meanwhile (`evicted_keys`).
        evicted: u64,
    },
    /// The cache keys written by [`What::Filled`] were deleted again.
    Freed {
        /// The node.
        node: usize,
        /// Keys deleted (`DEL`'s reply).
        keys: i64,
    },
    /// The resource's value at the end.
    Final {
        /// Where it was read.
        lane: Lane,
        /// The value.
        value: i64,
    },
}

/// A [`What`] at a time of the lesson clock (milliseconds since the lesson started).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Lesson time, ms.
    pub at_ms: u64,
    /// What happened.
    pub what: What,
}

fn nodes(list: &[usize]) -> String {
    let names: Vec<String> = list.iter().map(|n| Lane::Node(*n).to_string()).collect();
    names.join(",")
}

impl Event {
    /// The lane this event is drawn on.
    pub fn lane(&self) -> Lane {
        match &self.what {
            What::NodeStarted { node, .. }
            | What::Crashed { node, .. }
            | What::CutOff { node, .. }
            | What::Promoted { node, .. }
            | What::Restarted { node, .. }
            | What::PowerLost { node, .. }
            | What::LockSeen { node, .. }
            | What::MemoryLimit { node, .. }
            | What::Filled { node, .. }
            | What::MinReplicas { node, .. }
            | What::GoodReplicas { node, .. }
            | What::Freed { node, .. } => Lane::Node(*node),
            What::LinkCut { replica } => Lane::Node(*replica),
            What::CaughtUp { replica, .. }
            | What::Resynced { replica, .. }
            | What::ReplicaLag { replica, .. } => Lane::Node(*replica),
            What::ReplicationPaused { master } => Lane::Node(*master),
            What::Offsets { offsets } => Lane::Node(offsets.first().map_or(0, |o| o.0)),
            What::Network { nodes, .. } => Lane::Node(nodes.first().copied().unwrap_or(0)),
            What::ResourceSet { lane, .. } | What::Final { lane, .. } => *lane,
            What::Acquired { client, .. }
            | What::NotAcquired { client, .. }
            | What::AcquireError { client, .. }
            | What::Released { client, .. }
            | What::Paused { client, .. }
            | What::Read { client, .. }
            | What::Wrote { client, .. }
            | What::LeaseChecked { client, .. }
            | What::HostCall { client, .. }
            | What::Stopped { client }
            | What::Resumed { client, .. }
            | What::HeldBack { client } => Lane::Client(*client),
            What::Waited { .. } => Lane::Storage,
        }
    }

    /// The sentence for this event: rendered from its fields only.
    pub fn sentence(&self) -> String {
        let mut s = String::new();
        match &self.what {
            What::NodeStarted {
                node,
                replica_of,
                aof,
            } => {
                let _ = write!(s, "{} is up", Lane::Node(*node));
                match replica_of {
                    Some(m) => {
                        let _ = write!(s, ", a replica of {}", Lane::Node(*m));
                    }
                    None => s.push_str(", a master"),
                }
                if let Some(fsync) = aof {
                    let _ = write!(s, ", logging every write to its AOF (appendfsync {fsync})");
                }
            }
            What::MemoryLimit {
                node,
                used,
                bytes,
                policy,
            } => {
                let _ = write!(
                    s,
                    "{} uses {used} bytes; its limit is set to maxmemory {bytes}, policy {policy}",
                    Lane::Node(*node)
                );
            }
            What::AcquireError { client, error } => {
                let _ = write!(s, "{client}'s acquisition fails: {error}");
            }
            What::CaughtUp { replica, offset } => {
                let _ = write!(
                    s,
                    "{} has applied its master's stream up to offset {offset}, as far as the master has written",
                    Lane::Node(*replica)
                );
            }
            What::Resynced { replica, offset } => {
                let _ = write!(
                    s,
                    "{} has resynchronised with its restarted master's new history: same replication ID, both at offset {offset}",
                    Lane::Node(*replica)
                );
            }
            What::ReplicationPaused { master } => {
                let _ = write!(
                    s,
                    "{} stops sending its replication stream (a network partition): writes from now on stay on it",
                    Lane::Node(*master)
                );
            }
            What::ReplicaLag { replica, ms } => {
                let _ = write!(
                    s,
                    "{} now applies and acknowledges what it receives {ms} ms late",
                    Lane::Node(*replica)
                );
            }
            What::ResourceSet { lane, value } => {
                let _ = write!(s, "the resource on {lane} is set to {value}");
            }
            What::Acquired {
                client,
                nodes: on,
                fence,
                acked,
                valid_until,
                renewed_every,
            } => {
                let _ = write!(s, "{client} acquires the lock on {}", nodes(on));
                if let Some(every) = renewed_every {
                    let _ = write!(
                        s,
                        ", a watched lock: its host renews it every {every} ms from now on"
                    );
                }
                if let Some(f) = fence {
                    let _ = write!(s, " with fencing token {f}");
                }
                if let Some(a) = acked {
                    let _ = write!(
                        s,
                        ", confirmed by WAIT; right after, {a} replica(s) hold its token"
                    );
                }
                if let Some(u) = valid_until {
                    let _ = write!(
                        s,
                        ", a RedLock valid until t={u} ms (its TTL less the drift allowance, on the lesson clock)"
                    );
                }
            }
            What::NotAcquired {
                client,
                nodes: on,
                acked,
            } => match acked {
                Some(a) => {
                    let _ = write!(
                        s,
                        "{client} takes the lock on {} but WAIT saw {a} replica(s) acknowledge it, too few: {client} gives it back and holds nothing",
                        nodes(on)
                    );
                }
                None => {
                    let _ = write!(s, "{client} is refused the lock on {}", nodes(on));
                }
            },
            What::Released { client, outcome } => {
                let _ = write!(s, "{client} releases its lease: {outcome}");
            }
            What::LockSeen { node, holder, pttl } => {
                let n = Lane::Node(*node);
                match holder {
                    Holder::Nobody => {
                        let _ = write!(
                            s,
                            "{n} says the lock key does not exist: the lock is free there"
                        );
                    }
                    Holder::Client(c) => {
                        let _ = write!(s, "{n} says the lock key holds {c}'s token");
                    }
                    Holder::Other => {
                        let _ =
                            write!(s, "{n} says the lock key holds a token no client was given");
                    }
                }
                if let Some(p) = pttl {
                    let _ = write!(s, " ({p} ms to live)");
                }
            }
            What::Offsets { offsets } => {
                s.push_str("replication offsets: ");
                let parts: Vec<String> = offsets
                    .iter()
                    .map(|(n, o)| format!("{} {o}", Lane::Node(*n)))
                    .collect();
                s.push_str(&parts.join(", "));
            }
            What::Crashed { node, offset } => {
                let _ = write!(
                    s,
                    "{} crashes; its replication offset was {offset}",
                    Lane::Node(*node)
                );
            }
            What::CutOff { node, offset } => {
                let _ = write!(
                    s,
                    "{} is cut off from its replicas and its clients (what was held for the replicas is dropped); its replication offset was {offset}",
                    Lane::Node(*node)
                );
            }
            What::Promoted { node, offset } => {
                let _ = write!(
                    s,
                    "{} is promoted to master at offset {offset}; clients now talk to it",
                    Lane::Node(*node)
                );
            }
            What::PowerLost {
                node,
                written,
                durable,
                last_fsync_ms,
            } => {
                let _ = write!(
                    s,
                    "{} loses power: of the {written} bytes its AOF had written, {durable} were on disk (",
                    Lane::Node(*node)
                );
                match last_fsync_ms {
                    Some(t) => {
                        let _ = write!(s, "its last fsync was at t={t} ms");
                    }
                    None => s.push_str("it had not fsynced since it opened the file"),
                }
                match written - durable {
                    0 => s.push_str("); nothing was only in the page cache"),
                    lost => {
                        let _ = write!(s, "); the {lost} byte(s) only in the page cache are lost");
                    }
                }
            }
            What::Restarted { node, aof, keys } => {
                let _ = write!(
                    s,
                    "{} restarts {}; it serves again holding {keys} key(s)",
                    Lane::Node(*node),
                    if *aof {
                        "and replays its AOF"
                    } else {
                        "without persistence"
                    }
                );
            }
            What::Network { nodes: on, cut } => {
                let _ = write!(
                    s,
                    "{} {}",
                    nodes(on),
                    if *cut {
                        "become unreachable for the clients"
                    } else {
                        "are reachable again"
                    }
                );
            }
            What::Paused { client, ms } => {
                let _ = write!(
                    s,
                    "{client} stops for {ms} ms (a GC pause, a VM stop) and then carries on from where it was"
                );
            }
            What::Waited { ms } => {
                let _ = write!(s, "{ms} ms pass");
            }
            What::Read { client, value } => {
                let _ = write!(s, "{client} reads the resource: {value}");
            }
            What::Wrote {
                client,
                value,
                delta,
                check,
                accepted,
            } => {
                let how = match check {
                    Check::None => String::new(),
                    Check::Fence(f) => format!(" with fencing token {f}"),
                    Check::Lease => " if its lease is still the lock's".to_string(),
                };
                let _ = write!(
                    s,
                    "{client} writes {value} (its read + {delta}){how}: the storage {}",
                    if *accepted {
                        "ACCEPTS it"
                    } else {
                        "REFUSES it"
                    }
                );
            }
            What::LeaseChecked {
                client,
                held,
                cause,
            } => {
                if *held {
                    let _ = write!(s, "{client} asks its watched lock: still held");
                } else {
                    let _ = write!(
                        s,
                        "{client} asks its watched lock: LOST, its host says ({})",
                        cause.as_deref().unwrap_or("no cause given")
                    );
                }
            }
            What::HostCall { client, stopped } => match stopped {
                Some(why) => {
                    let _ = write!(
                        s,
                        "{client}'s next call into its host is refused: the host has stopped {client} ({why})"
                    );
                }
                None => {
                    let _ = write!(s, "{client}'s next call into its host goes through");
                }
            },
            What::Stopped { client } => {
                let _ = write!(
                    s,
                    "{client}'s process stops (a VM stop): neither {client} nor its host's lease renewals run"
                );
            }
            What::Resumed { client, ms } => {
                let _ = write!(
                    s,
                    "{client}'s process runs again after {ms} ms, carrying on from where it was"
                );
            }
            What::MinReplicas {
                node,
                to_write,
                max_lag_s,
            } => {
                let _ = write!(
                    s,
                    "{} is set to min-replicas-to-write {to_write}, min-replicas-max-lag {max_lag_s}",
                    Lane::Node(*node)
                );
            }
            What::GoodReplicas {
                node,
                connected,
                good,
            } => {
                let _ = write!(
                    s,
                    "{} counts {connected} connected replica(s), {good} of them good (acknowledged in time)",
                    Lane::Node(*node)
                );
            }
            What::LinkCut { replica } => {
                let _ = write!(
                    s,
                    "{}'s link to its master is cut both ways (a network partition); its master no longer counts it connected",
                    Lane::Node(*replica)
                );
            }
            What::HeldBack { client } => {
                let _ = write!(
                    s,
                    "{client} finds its lease's validity over and does not write"
                );
            }
            What::Filled {
                node,
                keys,
                refused,
                evicted,
            } => {
                let _ = write!(
                    s,
                    "another application writes {keys} cache keys to {}: {refused} refused (OOM), {evicted} key(s) evicted",
                    Lane::Node(*node)
                );
            }
            What::Freed { node, keys } => {
                let _ = write!(
                    s,
                    "the other application deletes its cache keys from {}: {keys} deleted",
                    Lane::Node(*node)
                );
            }
            What::Final { lane, value } => {
                let _ = write!(s, "the resource on {lane} ends at {value}");
            }
        }
        s
    }
}
