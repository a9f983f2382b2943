//! Where tenants' commands go: one trait, two kinds of server behind it.
//!
//! - the latchkey server in the same process (`<dyn Backend>::local`): commands run through
//!   in-process clients, with no socket;
//! - real Redis through redis-rs (`<dyn Backend>::redis`, `<dyn Backend>::sentinel`,
//!   `<dyn Backend>::cluster`): a multiplexed connection (or a slot-routing cluster connection)
//!   for commands and one shared pub/sub connection.
//!
//! Both are the lock client's own native transports ([`latchkey_client::native`]), so the host
//! does not carry a second Redis client. The [`Transport`] trait they implement is not
//! object-safe (it has an associated subscription type), so [`Backend`] wraps any transport
//! behind boxed futures; tenants share one `Arc<dyn Backend>`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use latchkey_client::native::{LocalTransport, RedisTransport};
use latchkey_client::{Reply, Transport};
use latchkey_server::ServerHandle;

/// A boxed, sendable future: what the object-safe backend methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A server the host sends (already namespaced) tenant commands to.
pub trait Backend: Send + Sync + 'static {
    /// Runs one command. Error replies are `Ok(Reply::Error)`; `Err` is a connection failure.
    fn command(&self, args: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Reply, String>>;

    /// Subscribes to `channel`; messages published after this returns are not missed.
    fn subscribe(&self, channel: Vec<u8>) -> BoxFuture<'_, Result<Box<dyn Subscription>, String>>;
}

/// A live subscription; dropping it unsubscribes.
pub trait Subscription: Send {
    /// Waits up to `timeout` for a message; true if one arrived.
    fn wait(&mut self, timeout: Duration) -> BoxFuture<'_, bool>;
}

impl dyn Backend {
    /// The latchkey server `server`, in-process (it must outlive the backend's use).
    pub fn local(server: &ServerHandle) -> Arc<dyn Backend> {
        Arc::new(Wrap(LocalTransport::new(server)))
    }

    /// A single Redis node at `redis://host:port`.
    pub async fn redis(url: &str) -> Result<Arc<dyn Backend>, String> {
        let t = RedisTransport::connect(url)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(Wrap(t)))
    }

    /// The master that the Sentinels at `sentinels` report for `service`.
    pub async fn sentinel(sentinels: &[String], service: &str) -> Result<Arc<dyn Backend>, String> {
        let t = RedisTransport::connect_sentinel(sentinels, service)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(Wrap(t)))
    }

    /// A Redis Cluster reached through any of `nodes`; commands are routed by slot (a
    /// tenant's lock keys keep one hash tag, so a lock's scripts stay in one slot).
    pub async fn cluster(nodes: &[String]) -> Result<Arc<dyn Backend>, String> {
        let t = RedisTransport::connect_cluster(nodes)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(Wrap(t)))
    }
}

/// Any lock-client transport, as a [`Backend`].
struct Wrap<T>(T);

/// A transport's subscription, with the transport it waits through.
struct WrapSub<T: Transport> {
    t: T,
    sub: T::Subscription,
}

impl<T: Transport + Clone> Backend for Wrap<T> {
    fn command(&self, args: Vec<Vec<u8>>) -> BoxFuture<'_, Result<Reply, String>> {
        Box::pin(async move { self.0.command(args).await.map_err(|e| e.to_string()) })
    }

    fn subscribe(&self, channel: Vec<u8>) -> BoxFuture<'_, Result<Box<dyn Subscription>, String>> {
        Box::pin(async move {
            let sub = self
                .0
                .subscribe(&channel)
                .await
                .map_err(|e| e.to_string())?;
            Ok(Box::new(WrapSub {
                t: self.0.clone(),
                sub,
            }) as Box<dyn Subscription>)
        })
    }
}

impl<T: Transport + Clone> Subscription for WrapSub<T> {
    fn wait(&mut self, timeout: Duration) -> BoxFuture<'_, bool> {
        Box::pin(self.t.wait_message(&mut self.sub, timeout))
    }
}
