//! A small TCP fault proxy to put between a replica and its master, so that real
//! `redis-server` pairs suffer the same faults as latchkey's driven ones (in the failover
//! tests, and in `latchkey lesson --against`).
//!
//! The replica is started with `--replicaof <proxy address>`; the proxy connects to the master
//! for each connection it accepts and copies bytes both ways. Faults act on the
//! master → replica direction (the replication stream), on the connections already open as
//! well as on later ones:
//!
//! - **delay** ([`FaultProxy::set_delay`]): every chunk the master sends is delivered `d`
//!   after the proxy read it, in order. The replica applies, and acknowledges, late: this is
//!   replication lag for a real `redis-server`.
//! - **pause** ([`FaultProxy::pause`] / [`FaultProxy::resume`]): nothing more is delivered; the
//!   bytes are held in the proxy (not in a socket buffer that would hand them over anyway) and
//!   go out, in order, on resume. A network partition that heals.
//! - **drop held** ([`FaultProxy::drop_held`]): whatever was read from the master and not yet
//!   delivered (held by a pause or still inside its delay) is thrown away. Together with a
//!   master crash, these are the writes that never reached the replica.
//! - **pause mid-reply** ([`FaultProxy::pause_after`]): `n` more bytes are delivered, then the
//!   proxy pauses, even inside a chunk: a peer stuck halfway through a reply.
//! - **cut** ([`FaultProxy::cut`]): every proxied connection is closed, and no new one is
//!   accepted. The replica sees its link go down and stay down.
//!
//! The replica → master direction (the replica's `REPLCONF ACK`s) is copied as it comes.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A chunk read from the master, and when it may be delivered.
struct Chunk {
    due: Instant,
    bytes: Vec<u8>,
}

/// One proxied connection's undelivered master → replica bytes.
#[derive(Default)]
struct Queue {
    chunks: VecDeque<Chunk>,
    /// The master closed its side: deliver what is left, then close the replica's side.
    closed: bool,
}

/// What every connection of the proxy shares: the faults in force and the queues.
#[derive(Default)]
struct State {
    delay: Duration,
    paused: bool,
    /// Bytes still to deliver before pausing, when a pause mid-reply is armed.
    pause_after: Option<usize>,
    cut: bool,
    queues: Vec<Arc<Mutex<Queue>>>,
    tasks: Vec<JoinHandle<()>>,
}

/// The state behind one lock, and a bell rung whenever it changes.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Notify,
}

/// A proxy forwarding `listen -> target`, whose `target -> client` direction can be delayed,
/// paused, dropped or cut.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy to `target` on a free local port.
    pub async fn start(target: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let shared = Arc::new(Shared::default());
        let accept = tokio::spawn(accept_loop(listener, target, shared.clone()));
        FaultProxy {
            addr,
            shared,
            accept,
        }
    }

    /// The address replicas should connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Delivers every chunk read from now on `delay` after it was read (zero: at once).
    pub fn set_delay(&self, delay: Duration) {
        self.update(|s| s.delay = delay);
    }

    /// Holds everything the target sends from now on.
    pub fn pause(&self) {
        self.update(|s| s.paused = true);
    }

    /// Delivers `bytes` more bytes (over every connection together), then pauses as
    /// [`FaultProxy::pause`] does: with `bytes` smaller than a reply, the peer gets part of it
    /// and waits for the rest.
    pub fn pause_after(&self, bytes: usize) {
        self.update(|s| {
            if bytes == 0 {
                s.paused = true;
            } else {
                s.pause_after = Some(bytes);
            }
        });
    }

    /// Delivers again: what was held goes out at once, in order, ahead of anything newer.
    pub fn resume(&self) {
        self.update(|s| {
            s.paused = false;
            s.pause_after = None;
        });
    }

    /// Loses whatever was read from the target and not yet delivered.
    pub fn drop_held(&self) {
        self.update(|s| {
            for q in &s.queues {
                q.lock().expect("proxy queue").chunks.clear();
            }
        });
    }

    /// Closes every proxied connection and stops accepting new ones.
    pub fn cut(&self) {
        self.accept.abort();
        self.update(|s| {
            s.cut = true;
            for t in s.tasks.drain(..) {
                t.abort();
            }
            s.queues.clear();
        });
    }

    /// Bytes read from the target and not yet delivered, over every connection.
    pub fn held_bytes(&self) -> usize {
        let s = self.shared.state.lock().expect("proxy state");
        s.queues
            .iter()
            .map(|q| {
                let q = q.lock().expect("proxy queue");
                q.chunks.iter().map(|c| c.bytes.len()).sum::<usize>()
            })
            .sum()
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.shared.state.lock().expect("proxy state"));
        self.shared.changed.notify_waiters();
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.cut();
    }
}

/// Accepts replicas, connects each to the target, and starts the three tasks of a connection:
/// replica → target copying, target → queue reading, and queue → replica delivery.
async fn accept_loop(listener: TcpListener, target: SocketAddr, shared: Arc<Shared>) {
    while let Ok((client, _)) = listener.accept().await {
        let Ok(upstream) = TcpStream::connect(target).await else {
            continue; // the target is gone: dropping `client` closes the replica's connection
        };
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        let (mut client_read, client_write) = client.into_split();
        let (target_read, mut target_write) = upstream.into_split();
        let queue = Arc::new(Mutex::new(Queue::default()));
        let tasks = [
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut client_read, &mut target_write).await;
            }),
            tokio::spawn(read_target(target_read, queue.clone(), shared.clone())),
            tokio::spawn(deliver(client_write, queue.clone(), shared.clone())),
        ];
        let mut s = shared.state.lock().expect("proxy state");
        if s.cut {
            tasks.iter().for_each(JoinHandle::abort);
            return;
        }
        s.queues.push(queue);
        s.tasks.extend(tasks);
    }
}

/// Reads what the target sends and queues it, stamped with the time it may be delivered.
async fn read_target(mut from: OwnedReadHalf, queue: Arc<Mutex<Queue>>, shared: Arc<Shared>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = from.read(&mut buf).await.unwrap_or(0);
        {
            let delay = shared.state.lock().expect("proxy state").delay;
            let mut q = queue.lock().expect("proxy queue");
            if n == 0 {
                q.closed = true;
            } else {
                q.chunks.push_back(Chunk {
                    due: Instant::now() + delay,
                    bytes: buf[..n].to_vec(),
                });
            }
        }
        shared.changed.notify_waiters();
        if n == 0 {
            return;
        }
    }
}

/// What the delivery task should do next.
enum Next {
    Write(Vec<u8>),
    SleepUntil(Instant),
    Wait,
    Close,
}

/// Writes queued chunks to the replica, in order, each once it is due and the proxy is not
/// paused. Wakes on every change of the faults, so a resume or a drop acts at once.
async fn deliver(mut to: OwnedWriteHalf, queue: Arc<Mutex<Queue>>, shared: Arc<Shared>) {
    loop {
        // Register for the bell before looking, so a change made in between is not missed.
        let changed = shared.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let next = {
            let mut s = shared.state.lock().expect("proxy state");
            let mut q = queue.lock().expect("proxy queue");
            match q.chunks.front() {
                None if q.closed => Next::Close,
                None => Next::Wait,
                Some(_) if s.paused => Next::Wait,
                Some(c) if c.due > Instant::now() => Next::SleepUntil(c.due),
                Some(_) => {
                    let mut chunk = q.chunks.pop_front().expect("front");
                    if let Some(left) = s.pause_after {
                        // Armed pause mid-reply: deliver what the budget allows, keep the
                        // rest at the front, and pause once the budget is spent.
                        if chunk.bytes.len() >= left {
                            let rest = chunk.bytes.split_off(left);
                            if !rest.is_empty() {
                                q.chunks.push_front(Chunk {
                                    due: chunk.due,
                                    bytes: rest,
                                });
                            }
                            s.pause_after = None;
                            s.paused = true;
                        } else {
                            s.pause_after = Some(left - chunk.bytes.len());
                        }
                    }
                    Next::Write(chunk.bytes)
                }
            }
        };
        match next {
            Next::Write(bytes) => {
                if to.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Next::SleepUntil(due) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(due) => {}
                    _ = changed => {}
                }
            }
            Next::Wait => changed.await,
            Next::Close => return,
        }
    }
}
