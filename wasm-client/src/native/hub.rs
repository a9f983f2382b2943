//! One subscription connection shared by every waiter of a transport: the first waiter on a
//! channel subscribes, the last one to leave unsubscribes, and each message wakes every waiter
//! on its channel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, Notify};

use crate::Error;

/// What the hub asks its connection task to do.
pub(crate) enum HubCommand {
    /// Subscribe, then acknowledge (so no message published afterwards is missed).
    Subscribe(Vec<u8>, oneshot::Sender<Result<(), Error>>),
    /// Unsubscribe (nobody waits for it).
    Unsubscribe(Vec<u8>),
}

#[derive(Debug)]
struct Channel {
    refs: usize,
    notify: Arc<Notify>,
    generation: Arc<AtomicU64>,
}

/// The shared registry of subscribed channels.
#[derive(Debug)]
pub(crate) struct Hub {
    channels: Mutex<HashMap<Vec<u8>, Channel>>,
    commands: mpsc::UnboundedSender<HubCommand>,
}

/// A waiter's handle on a channel; dropping it releases the shared subscription.
#[derive(Debug)]
pub struct NativeSubscription {
    hub: Arc<Hub>,
    channel: Vec<u8>,
    notify: Arc<Notify>,
    generation: Arc<AtomicU64>,
    seen: u64,
}

impl Hub {
    /// A hub and the receiving end its connection task reads commands from.
    pub(crate) fn new() -> (Arc<Hub>, mpsc::UnboundedReceiver<HubCommand>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Arc::new(Hub {
                channels: Mutex::new(HashMap::new()),
                commands: tx,
            }),
            rx,
        )
    }

    /// Called by the connection task for every message received.
    pub(crate) fn deliver(&self, channel: &[u8]) {
        let chans = self.channels.lock().expect("hub lock");
        if let Some(c) = chans.get(channel) {
            c.generation.fetch_add(1, Ordering::AcqRel);
            c.notify.notify_waiters();
        }
    }

    /// The channels subscribed right now: what a new connection must subscribe to again.
    pub(crate) fn channel_names(&self) -> Vec<Vec<u8>> {
        self.channels
            .lock()
            .expect("hub lock")
            .keys()
            .cloned()
            .collect()
    }

    /// Wakes every waiter on every channel, as if a message had arrived: after the connection
    /// was lost and re-established, messages may have been missed, and a waiter that wakes for
    /// nothing only looks again.
    pub(crate) fn wake_all(&self) {
        let chans = self.channels.lock().expect("hub lock");
        for c in chans.values() {
            c.generation.fetch_add(1, Ordering::AcqRel);
            c.notify.notify_waiters();
        }
    }

    /// Number of channels currently subscribed (for tests and metrics).
    pub(crate) fn channel_count(&self) -> usize {
        self.channels.lock().expect("hub lock").len()
    }

    pub(crate) async fn subscribe(
        self: &Arc<Hub>,
        channel: &[u8],
    ) -> Result<NativeSubscription, Error> {
        let (notify, generation, first) = {
            let mut chans = self.channels.lock().expect("hub lock");
            let c = chans.entry(channel.to_vec()).or_insert_with(|| Channel {
                refs: 0,
                notify: Arc::new(Notify::new()),
                generation: Arc::new(AtomicU64::new(0)),
            });
            c.refs += 1;
            (c.notify.clone(), c.generation.clone(), c.refs == 1)
        };
        let sub = NativeSubscription {
            hub: self.clone(),
            channel: channel.to_vec(),
            seen: generation.load(Ordering::Acquire),
            notify,
            generation,
        };
        if first {
            let (ack, done) = oneshot::channel();
            self.commands
                .send(HubCommand::Subscribe(channel.to_vec(), ack))
                .map_err(|_| Error::Transport("subscription connection closed".into()))?;
            done.await
                .map_err(|_| Error::Transport("subscription connection closed".into()))??;
        }
        Ok(sub)
    }

    fn release(&self, channel: &[u8]) {
        let mut chans = self.channels.lock().expect("hub lock");
        let last = match chans.get_mut(channel) {
            Some(c) => {
                c.refs -= 1;
                c.refs == 0
            }
            None => false,
        };
        if last {
            chans.remove(channel);
            let _ = self
                .commands
                .send(HubCommand::Unsubscribe(channel.to_vec()));
        }
    }
}

impl NativeSubscription {
    /// Waits up to `timeout` for a message published since the last wait.
    pub(crate) async fn wait(&mut self, timeout: Duration) -> bool {
        let notified = self.notify.notified();
        let g = self.generation.load(Ordering::Acquire);
        if g != self.seen {
            self.seen = g;
            return true;
        }
        let got = tokio::time::timeout(timeout, notified).await.is_ok();
        self.seen = self.generation.load(Ordering::Acquire);
        got
    }
}

impl Drop for NativeSubscription {
    fn drop(&mut self) {
        self.hub.release(&self.channel);
    }
}
