//! The lessons: each a script of acts played on a fresh [`World`]. A script only acts and
//! measures; what is said about it comes from the recorded events
//! ([`super::verdict::findings`]).
//!
//! The seed picks the numbers (the resource's start, each client's update, how long a client
//! thinks between steps), so one seed always plays the same timeline.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::event::Event;
use super::world::{CheckKind, Place, Setup, Topology, World, CACHE_KEYS};
use super::Env;

/// A lesson: its name (the command's argument), a one-line summary, and how to play it.
pub struct Lesson {
    /// The name given to `latchkey lesson`.
    pub name: &'static str,
    /// What it plays, in one line.
    pub summary: &'static str,
}

/// Every lesson, in teaching order.
pub const LESSONS: &[Lesson] = &[
    Lesson {
        name: "unprotected",
        summary: "a plain lock, asynchronous replication, the master crashes: who holds the lock, what happens to the resource",
    },
    Lesson {
        name: "wait",
        summary: "the acquisition confirmed by WAIT, across the same failover; then a failover to the replica that did not acknowledge; then the master restarting empty",
    },
    Lesson {
        name: "fencing-token",
        summary: "an INCR fencing token checked by the storage: a holder that stalls, then a failover that loses the counter's last INCR",
    },
    Lesson {
        name: "lease-check",
        summary: "the storage checks the lock key itself (compare-and-set on the holder's token) across the failover",
    },
    Lesson {
        name: "aof-restart",
        summary: "the lock's only node crashes and restarts without persistence, then replaying its AOF (appendfsync always, then everysec); then its machine loses power under everysec, less than a second after the lock was taken, then more than a second after",
    },
    Lesson {
        name: "pause",
        summary: "a holder stops longer than its TTL (GC, VM stop) and then writes: no defence, fencing token, lease check, watchdog, watchdog with a write before the check",
    },
    Lesson {
        name: "redlock",
        summary: "RedLock on five nodes, one restarted without persistence at once, then kept away for a TTL",
    },
    Lesson {
        name: "eviction",
        summary: "another application fills the lock's node past maxmemory, with volatile-lru, then with noeviction",
    },
    Lesson {
        name: "min-replicas",
        summary: "min-replicas-to-write on the master: a held-back stream within the lag allowance, then a replica cut off",
    },
];

/// One act of a lesson: its title (what the script does, never what it found) and the events
/// it recorded.
#[derive(Debug, Clone)]
pub struct Act {
    /// What the act does.
    pub title: String,
    /// What it recorded.
    pub events: Vec<Event>,
}

/// The numbers a seed picks.
struct Numbers {
    start: i64,
    delta_a: i64,
    delta_b: i64,
    rng: StdRng,
}

impl Numbers {
    fn new(seed: u64) -> Numbers {
        let mut rng = StdRng::seed_from_u64(seed);
        Numbers {
            start: rng.random_range(50..150),
            delta_a: rng.random_range(1..10),
            delta_b: rng.random_range(10..20),
            rng,
        }
    }

    /// A client's thinking time between two steps, ms.
    fn think(&mut self) -> u64 {
        self.rng.random_range(5..40)
    }
}

fn need(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("the lesson could not set itself up: {what}"))
    }
}

/// Plays lesson `name`.
pub(crate) async fn play(name: &str, seed: u64, env: &Env) -> Result<Vec<Act>, String> {
    let mut n = Numbers::new(seed);
    match name {
        "unprotected" => Ok(vec![failover(&mut n, env, Defence::None).await?]),
        "wait" => {
            let mut acts = vec![
                wait_confirmed(&mut n, env).await?,
                wait_other_replica(&mut n, env).await?,
            ];
            // `--against` restarts nobody's server.
            if env.against.is_empty() {
                acts.push(wait_master_restarts(&mut n, env).await?);
            }
            Ok(acts)
        }
        "fencing-token" => Ok(vec![
            stall(&mut n, env, Defence::Fence).await?,
            fenced_failover(&mut n, env).await?,
        ]),
        "lease-check" => Ok(vec![failover(&mut n, env, Defence::Lease).await?]),
        "aof-restart" => Ok(vec![
            restart(&mut n, env, "always", false).await?,
            restart(&mut n, env, "always", true).await?,
            restart(&mut n, env, "everysec", true).await?,
            power_loss(&mut n, env, None).await?,
            power_loss(&mut n, env, Some(EVERYSEC_MS)).await?,
        ]),
        "pause" => Ok(vec![
            stall(&mut n, env, Defence::None).await?,
            stall(&mut n, env, Defence::Fence).await?,
            stall(&mut n, env, Defence::Lease).await?,
            stall_watched(&mut n, env).await?,
            stall_watched_writes_first(&mut n, env).await?,
        ]),
        "redlock" => Ok(vec![
            redlock(&mut n, env, false).await?,
            redlock(&mut n, env, true).await?,
        ]),
        "eviction" => Ok(vec![
            eviction(&mut n, env, "volatile-lru").await?,
            eviction(&mut n, env, "noeviction").await?,
        ]),
        "min-replicas" => Ok(vec![
            min_replicas_window(&mut n, env).await?,
            min_replicas_cut(&mut n, env).await?,
        ]),
        other => Err(format!("no lesson named '{other}'")),
    }
}

/// The defence a write goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defence {
    None,
    Fence,
    Lease,
}

impl Defence {
    fn check(self) -> CheckKind {
        match self {
            Defence::None => CheckKind::None,
            Defence::Fence => CheckKind::Fence,
            Defence::Lease => CheckKind::Lease,
        }
    }

    fn place(self) -> Place {
        match self {
            Defence::Lease => Place::BesideLock,
            _ => Place::Storage,
        }
    }
}

const TTL: u64 = 10_000;

/// `client` reads the resource, thinks, and writes it back changed by `delta`: the
/// read-modify-write each holder does under the lock.
async fn read_modify_write(
    w: &mut World,
    client: char,
    delta: i64,
    check: CheckKind,
    n: &mut Numbers,
) -> Result<(), String> {
    w.read(client).await?;
    w.advance(n.think()).await;
    w.write(client, delta, check).await?;
    Ok(())
}

async fn world(
    env: &Env,
    topology: Topology,
    aof: Option<&'static str>,
    place: Place,
) -> Result<World, String> {
    World::start(
        Setup {
            topology,
            aof,
            place,
            proxied: false,
        },
        &['A', 'B'],
        env,
    )
    .await
}

/// A and B each take the lock and do their read-modify-write; A acquires on the master while
/// its stream to the replica is held back, the master crashes, the replica is promoted, B
/// takes the lock there and writes, and then A writes.
async fn failover(n: &mut Numbers, env: &Env, d: Defence) -> Result<Act, String> {
    let mut w = world(env, Topology::Replicated(1), None, d.place()).await?;
    w.set_resource(n.start).await?;
    w.caught_up(1).await?;
    w.pause_replication();
    w.advance(n.think()).await;
    need(w.try_lock('A', TTL).await?, "A takes the free lock")?;
    w.advance(n.think()).await;
    w.read('A').await?;
    w.offsets().await?;
    w.look(1).await?;
    w.advance(n.think()).await;
    w.crash().await?;
    w.promote(1).await?;
    w.advance(n.think()).await;
    w.try_lock('B', TTL).await?;
    w.advance(n.think()).await;
    w.read('B').await?;
    w.advance(n.think()).await;
    w.write('B', n.delta_b, d.check()).await?;
    w.advance(n.think()).await;
    w.write('A', n.delta_a, d.check()).await?;
    w.finish().await?;
    let title = match d {
        Defence::None => {
            "a plain lock; the master holds back its replication stream, crashes, and its replica is promoted"
        }
        Defence::Fence => "a fenced lock across the failover",
        Defence::Lease => {
            "the resource beside the lock, each write a compare-and-set on the lock key; the master holds back its stream, crashes, and its replica is promoted"
        }
    };
    Ok(Act {
        title: title.into(),
        events: w.end().await,
    })
}

/// `wait`, act 1: the acquisition waits for the replica's acknowledgement; then the same
/// crash and promotion.
async fn wait_confirmed(n: &mut Numbers, env: &Env) -> Result<Act, String> {
    let mut w = world(env, Topology::Replicated(1), None, Place::Storage).await?;
    w.set_resource(n.start).await?;
    w.caught_up(1).await?;
    w.advance(n.think()).await;
    need(
        w.try_replicated('A', TTL, 1, 1_000).await?,
        "A takes the free lock and its replica acknowledges",
    )?;
    w.advance(n.think()).await;
    w.read('A').await?;
    // The replica acknowledged before it had counted WAIT's own GETACK: let it finish, so
    // that the offsets read next do not depend on when they are read.
    w.caught_up(1).await?;
    w.offsets().await?;
    w.look(1).await?;
    w.advance(n.think()).await;
    w.crash().await?;
    w.promote(1).await?;
    w.advance(n.think()).await;
    w.try_lock('B', TTL).await?;
    w.look(1).await?;
    w.advance(n.think()).await;
    w.write('A', n.delta_a, CheckKind::None).await?;
    w.finish().await?;
    Ok(Act {
        title: "the lock confirmed by WAIT 1 (one replica); the master crashes, its replica is promoted".into(),
        events: w.end().await,
    })
}

/// `wait`, act 2: two replicas, one lagging; `WAIT 1` is satisfied by the other, and the
/// lagging one is promoted.
async fn wait_other_replica(n: &mut Numbers, env: &Env) -> Result<Act, String> {
    let mut w = world(env, Topology::Replicated(2), None, Place::Storage).await?;
    w.set_resource(n.start).await?;
    w.caught_up(1).await?;
    w.caught_up(2).await?;
    w.lag(2, 5_000);
    w.advance(n.think()).await;
    need(
        w.try_replicated('A', TTL, 1, 1_000).await?,
        "A takes the free lock and a replica acknowledges",
    )?;
    w.advance(n.think()).await;
    w.read('A').await?;
    w.caught_up(1).await?;
    w.offsets().await?;
    w.look(1).await?;
    w.look(2).await?;
    w.advance(n.think()).await;
    w.crash().await?;
    w.promote(2).await?;
    w.advance(n.think()).await;
    w.try_lock('B', TTL).await?;
    w.advance(n.think()).await;
    read_modify_write(&mut w, 'B', n.delta_b, CheckKind::None, n).await?;
    w.advance(n.think()).await;
    w.write('A', n.delta_a, CheckKind::None).await?;
    w.finish().await?;
    Ok(Act {
        title: "the lock confirmed by WAIT 1 with two replicas, n3 applying late; the master crashes and n3 is promoted".into(),
        events: w.end().await,
    })
}

/// A holder stops longer than its TTL on a single node; B takes the lock meanwhile and
/// writes; A wakes and writes.
async fn stall(n: &mut Numbers, env: &Env, d: Defence) -> Result<Act, String> {
    let ttl = 1_000;
    let mut w = world(env, Topology::Replicated(0), None, d.place()).await?;
    w.set_resource(n.start).await?;
    w.advance(n.think()).await;
    let took = match d {
        Defence::Fence => w.try_fenced('A', ttl).await?,
        _ => w.try_lock('A', ttl).await?,
    };
    need(took, "A takes the free lock")?;
    w.advance(n.think()).await;
    w.read('A').await?;
    w.pause('A', ttl + 500).await;
    w.look(0).await?;
    match d {
        Defence::Fence => w.try_fenced('B', ttl).await?,
        _ => w.try_lock('B', ttl).await?,
    };
    w.advance(n.think()).await;
    w.read('B').await?;
    w.advance(n.think()).await;
    w.write('B', n.delta_b, d.check()).await?;
    w.advance(n.think()).await;
    w.write('A', n.delta_a, d.check()).await?;
    w.finish().await?;
    let title = match d {
        Defence::None => "a plain lock with a 1000 ms TTL on one node; A stops for 1500 ms",
        Defence::Fence => "a fenced lock with a 1000 ms TTL on one node, the storage checking tokens; A stops for 1500 ms",
        Defence::Lease => "a plain lock with a 1000 ms TTL, each write a compare-and-set on the lock key; A stops for 1500 ms",
    };
    Ok(Act {
        title: title.into(),
        events: w.end().await,
    })
}

/// `fencing-token`, act 2: a round whose token replicates, then A's token that does not,
/// the crash, and B's token on the promoted replica.
async fn fenced_failover(n: &mut Numbers, env: &Env) -> Result<Act, String> {
    let mut w = world(env, Topology::Replicated(1), None, Place::Storage).await?;
    w.set_resource(n.start).await?;
    w.advance(n.think()).await;
    need(w.try_fenced('A', TTL).await?, "A takes the free lock")?;
    w.release('A').await?;
    w.caught_up(1).await?;
    w.pause_replication();
    w.advance(n.think()).await;
    need(w.try_fenced('A', TTL).await?, "A takes the free lock again")?;
    w.advance(n.think()).await;
    w.read('A').await?;
    w.offsets().await?;
    w.advance(n.think()).await;
    w.crash().await?;
    w.promote(1).await?;
    w.advance(n.think()).await;
    w.try_fenced('B', TTL).await?;
    w.advance(n.think()).await;
    read_modify_write(&mut w, 'B', n.delta_b, CheckKind::Fence, n).await?;
    w.advance(n.think()).await;
    w.write('A', n.delta_a, CheckKind::Fence).await?;
    w.finish().await?;
    Ok(Act {
        title: "a fenced lock (token counter on the lock's master) across a failover, the storage checking tokens".into(),
        events: w.end().await,
    })
}

/// `aof-restart`: A holds the lock on a node that restarts, with or without replaying its
/// AOF; then B tries.
async fn restart(
    n: &mut Numbers,
    env: &Env,
    fsync: &'static str,
    aof: bool,
) -> Result<Act, String> {
    let mut w = world(env, Topology::Replicated(0), Some(fsync), Place::Storage).await?;
    w.set_resource(n.start).await?;
    w.advance(n.think()).await;
    need(w.try_lock('A', TTL).await?, "A takes the free lock")?;
    w.advance(n.think()).await;
    w.read('A').await?;
    w.advance(n.think()).await;
    w.restart(0, aof).await?;
    w.look(0).await?;
    w.advance(n.think()).await;
    if w.try_lock('B', TTL).await? {
        w.advance(n.think()).await;
        read_modify_write(&mut w, 'B', n.delta_b, CheckKind::None, n).await?;
    }
    w.advance(n.think()).await;
    w.write('A', n.delta_a, CheckKind::None).await?;
    w.finish().await?;
    let title = if aof {
        format!("a plain lock on one node logging to its AOF with appendfsync {fsync}; the node's process crashes and it restarts, replaying its AOF")
    } else {
        format!("a plain lock on one node logging to its AOF with appendfsync {fsync}; the node's process crashes and it restarts without its AOF")
    };
    Ok(Act {
        title,
        events: w.end().await,
    })
}

/// How often `appendfsync everysec` fsyncs, at most: once a second.
const EVERYSEC_MS: u64 = 1_000;

/// `aof-restart`, acts 4 and 5: A holds the lock on a node logging to its AOF with
/// `appendfsync everysec`; the node's machine loses power (the page cache goes too) at once,
/// or after `wait` ms, and boots from what its AOF kept on disk; then B tries.
async fn power_loss(n: &mut Numbers, env: &Env, wait: Option<u64>) -> Result<Act, String> {
    let mut w = world(
        env,
        Topology::Replicated(0),
        Some("everysec"),
        Place::Storage,
    )
    .await?;
    w.set_resource(n.start).await?;
    w.advance(n.think()).await;
    need(w.try_lock('A', TTL).await?, "A takes the free lock")?;
    w.advance(n.think()).await;
    w.read('A').await?;
    if let Some(ms) = wait {
        w.wait(ms).await;
    }
    w.advance(n.think()).await;
    w.power_loss(0).await?;
    w.look(0).await?;
    w.advance(n.think()).await;
    if w.try_lock('B', TTL).await? {
        w.advance(n.think()).await;
        read_modify_write(&mut w, 'B', n.delta_b, CheckKind::None, n).await?;
    }
    w.advance(n.think()).await;
    w.write('A', n.delta_a, CheckKind::None).await?;
    w.finish().await?;
    let title = match wait {
        None => "a plain lock on one node logging to its AOF with appendfsync everysec; the node's machine loses power less than a second after A's acquisition, and the node boots from its AOF".to_string(),
        Some(ms) => format!("a plain lock on one node logging to its AOF with appendfsync everysec; the node's machine loses power more than {ms} ms after A's acquisition, and the node boots from its AOF"),
    };
    Ok(Act {
        title,
        events: w.end().await,
    })
}

/// `redlock`: A's RedLock reaches n1..n3 only (n4, n5 unreachable for it); n3 restarts
/// without persistence, at once or kept away for a TTL; B tries its RedLock.
async fn redlock(n: &mut Numbers, env: &Env, delayed: bool) -> Result<Act, String> {
    let mut w = world(env, Topology::Independent(5), None, Place::Storage).await?;
    w.set_resource(n.start).await?;
    w.network(&[3, 4], true);
    w.advance(n.think()).await;
    need(
        w.try_redlock('A', TTL).await?,
        "A takes the RedLock on a majority",
    )?;
    w.network(&[3, 4], false);
    w.advance(n.think()).await;
    w.read('A').await?;
    if delayed {
        w.network(&[2], true);
    }
    w.restart(2, false).await?;
    if delayed {
        w.wait(TTL).await;
        w.network(&[2], false);
    }
    w.look(2).await?;
    w.advance(n.think()).await;
    if w.try_redlock('B', TTL).await? {
        w.advance(n.think()).await;
        read_modify_write(&mut w, 'B', n.delta_b, CheckKind::None, n).await?;
    }
    w.advance(n.think()).await;
    if w.red_validity_over('A') {
        w.hold_back('A');
    } else {
        w.write('A', n.delta_a, CheckKind::None).await?;
    }
    w.finish().await?;
    let title = if delayed {
        "RedLock on five nodes, A granted by three; n3 restarts without persistence and stays away for a TTL"
    } else {
        "RedLock on five nodes, A granted by three; n3 restarts without persistence at once"
    };
    Ok(Act {
        title: title.into(),
        events: w.end().await,
    })
}

/// `eviction`: A holds the lock; another application fills the node past `maxmemory`.
async fn eviction(n: &mut Numbers, env: &Env, policy: &str) -> Result<Act, String> {
    let mut w = world(env, Topology::Replicated(0), None, Place::Storage).await?;
    w.set_resource(n.start).await?;
    w.advance(n.think()).await;
    need(w.try_lock('A', TTL).await?, "A takes the free lock")?;
    w.advance(n.think()).await;
    w.read('A').await?;
    w.limit_memory(0, 256 * 1024, policy).await?;
    w.fill(0, CACHE_KEYS, 4096).await?;
    w.look(0).await?;
    w.free(0, CACHE_KEYS).await?;
    w.advance(n.think()).await;
    if w.try_lock('B', TTL).await? {
        w.advance(n.think()).await;
        read_modify_write(&mut w, 'B', n.delta_b, CheckKind::None, n).await?;
    }
    w.advance(n.think()).await;
    w.write('A', n.delta_a, CheckKind::None).await?;
    w.finish().await?;
    Ok(Act {
        title: format!("a plain lock (TTL {TTL} ms) on a node given a memory limit with policy {policy}, then filled by another application"),
        events: w.end().await,
    })
}

/// `wait`, act 3: the acquisition confirmed by `WAIT 1`; then the master restarts without
/// persistence before anyone fails over, and its replica resynchronises from it.
async fn wait_master_restarts(n: &mut Numbers, env: &Env) -> Result<Act, String> {
    let mut w = world(env, Topology::Replicated(1), None, Place::Storage).await?;
    w.set_resource(n.start).await?;
    w.caught_up(1).await?;
    w.advance(n.think()).await;
    need(
        w.try_replicated('A', TTL, 1, 1_000).await?,
        "A takes the free lock and its replica acknowledges",
    )?;
    w.advance(n.think()).await;
    w.read('A').await?;
    w.look(1).await?;
    w.advance(n.think()).await;
    w.restart(0, false).await?;
    w.resynced(1).await?;
    w.look(1).await?;
    w.advance(n.think()).await;
    w.try_lock('B', TTL).await?;
    w.advance(n.think()).await;
    read_modify_write(&mut w, 'B', n.delta_b, CheckKind::None, n).await?;
    w.advance(n.think()).await;
    w.write('A', n.delta_a, CheckKind::None).await?;
    w.finish().await?;
    Ok(Act {
        title: "the lock confirmed by WAIT 1 (one replica); the master restarts without persistence before any failover, and its replica resynchronises from it".into(),
        events: w.end().await,
    })
}

/// `pause`, act 4: A's lock is a watched one (its host renews it); A's whole process stops
/// (the renewals with it) longer than the TTL; B takes the lock and writes; A's process runs
/// again, and A asks its watched lock before writing.
async fn stall_watched(n: &mut Numbers, env: &Env) -> Result<Act, String> {
    let ttl = 1_000;
    let mut w = world(env, Topology::Replicated(0), None, Place::Storage).await?;
    w.set_resource(n.start).await?;
    w.advance(n.think()).await;
    need(w.try_watched('A', ttl).await?, "A takes the free lock")?;
    w.advance(n.think()).await;
    w.read('A').await?;
    w.stop('A');
    w.wait(ttl + 500).await;
    w.look(0).await?;
    w.try_lock('B', ttl).await?;
    w.advance(n.think()).await;
    read_modify_write(&mut w, 'B', n.delta_b, CheckKind::None, n).await?;
    w.advance(n.think()).await;
    w.resume('A');
    if w.check_watched('A').await? {
        w.write('A', n.delta_a, CheckKind::None).await?;
    } else {
        w.next_host_call('A').await?;
    }
    w.finish().await?;
    Ok(Act {
        title: format!("a watched lock (its host renews it every ttl/3) with a {ttl} ms TTL on one node; A's whole process stops, its renewals with it, for longer than the TTL"),
        events: w.end().await,
    })
}

/// The stage of `min-replicas`: a master and one replica that follows it through a fault
/// proxy (so that its link can be cut both ways), the resource on the storage.
async fn proxied_pair(env: &Env) -> Result<World, String> {
    World::start(
        Setup {
            topology: Topology::Replicated(1),
            aof: None,
            place: Place::Storage,
            proxied: true,
        },
        &['A', 'B'],
        env,
    )
    .await
}

/// `min-replicas`, act 1: the master requires one good replica; its stream is held back,
/// but the replica still acknowledges (what it has), so A's lock is accepted; the master
/// crashes and the replica is promoted.
async fn min_replicas_window(n: &mut Numbers, env: &Env) -> Result<Act, String> {
    let mut w = proxied_pair(env).await?;
    w.set_resource(n.start).await?;
    w.caught_up(1).await?;
    w.min_replicas(1, 10).await?;
    w.pause_replication();
    w.advance(n.think()).await;
    w.good_replicas().await?;
    need(w.try_lock('A', TTL).await?, "A takes the free lock")?;
    w.advance(n.think()).await;
    w.read('A').await?;
    w.offsets().await?;
    w.look(1).await?;
    w.advance(n.think()).await;
    w.crash().await?;
    w.promote(1).await?;
    w.advance(n.think()).await;
    w.try_lock('B', TTL).await?;
    w.advance(n.think()).await;
    read_modify_write(&mut w, 'B', n.delta_b, CheckKind::None, n).await?;
    w.advance(n.think()).await;
    w.write('A', n.delta_a, CheckKind::None).await?;
    w.finish().await?;
    Ok(Act {
        title: "a plain lock on a master with min-replicas-to-write 1; its stream is held back, it crashes, and its replica is promoted".into(),
        events: w.end().await,
    })
}

/// `min-replicas`, act 2: the replica's link is cut both ways; the master, counting no good
/// replica, refuses A's lock; then the same crash and promotion.
async fn min_replicas_cut(n: &mut Numbers, env: &Env) -> Result<Act, String> {
    let mut w = proxied_pair(env).await?;
    w.set_resource(n.start).await?;
    w.caught_up(1).await?;
    w.min_replicas(1, 10).await?;
    w.cut_link(1).await?;
    w.advance(n.think()).await;
    w.good_replicas().await?;
    w.try_lock('A', TTL).await?;
    w.advance(n.think()).await;
    w.crash().await?;
    w.promote(1).await?;
    w.advance(n.think()).await;
    w.try_lock('B', TTL).await?;
    w.advance(n.think()).await;
    read_modify_write(&mut w, 'B', n.delta_b, CheckKind::None, n).await?;
    w.finish().await?;
    Ok(Act {
        title: "the same master and rule; the replica's link is cut both ways, then the master crashes and the replica is promoted".into(),
        events: w.end().await,
    })
}

/// `pause`, act 5: as act 4, but the resource is beside the lock and each write a
/// compare-and-set on the lock key; A writes the moment its process runs again, before it
/// asks its watched lock.
async fn stall_watched_writes_first(n: &mut Numbers, env: &Env) -> Result<Act, String> {
    let ttl = 1_000;
    let mut w = world(env, Topology::Replicated(0), None, Place::BesideLock).await?;
    w.set_resource(n.start).await?;
    w.advance(n.think()).await;
    need(w.try_watched('A', ttl).await?, "A takes the free lock")?;
    w.advance(n.think()).await;
    w.read('A').await?;
    w.stop('A');
    w.wait(ttl + 500).await;
    w.look(0).await?;
    w.try_lock('B', ttl).await?;
    w.advance(n.think()).await;
    read_modify_write(&mut w, 'B', n.delta_b, CheckKind::Lease, n).await?;
    w.advance(n.think()).await;
    w.resume('A');
    w.write('A', n.delta_a, CheckKind::Lease).await?;
    w.check_watched('A').await?;
    w.finish().await?;
    Ok(Act {
        title: "the same watched lock and stop, each write a compare-and-set on the lock key; A writes as soon as its process runs again, then asks its watched lock".into(),
        events: w.end().await,
    })
}
