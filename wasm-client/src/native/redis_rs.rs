//! Real Redis (or any server speaking the protocol, latchkey over TCP included) through the
//! redis-rs crate: one multiplexed connection for commands (or a cluster connection routing by
//! slot), one pub/sub connection shared by every waiter. A single node, a Sentinel-managed
//! master, or a Cluster.
//!
//! Both connections come back after the server drops them (a restart, a network blip, a
//! `CLIENT KILL`): the command that met the dropped connection fails, and the next ones go
//! over a new connection. Commands have no reply deadline of the transport's own: a `WAIT` of
//! two seconds gets its answer after two seconds, and the lock algorithms bound their own
//! waits (the watchdog gives up on a renewal round after one renewal period).

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Value;

use super::hub::{Hub, HubCommand, NativeSubscription};
use super::Runtime;
use crate::{Error, Reply, Transport};

/// How commands reach the server(s).
#[derive(Clone)]
enum Commands {
    Single(ConnectionManager),
    Cluster(redis::cluster_async::ClusterConnection),
}

/// A transport over redis-rs.
#[derive(Clone)]
pub struct RedisTransport {
    conn: Commands,
    hub: Arc<Hub>,
    rt: Runtime,
}

impl std::fmt::Debug for RedisTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTransport").finish_non_exhaustive()
    }
}

/// How the command connection is made and made again: a connection attempt gives up after a
/// second, and after a drop it is retried three times within about a second before the
/// commands waiting for it fail; replies have no deadline (see the module's note).
fn connection_config() -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(None)
        .set_number_of_retries(3)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(500))
}

fn transport_err(e: redis::RedisError) -> Error {
    Error::Transport(e.to_string())
}

impl RedisTransport {
    /// Connects to `redis://host:port` (commands and the shared subscription connection).
    pub async fn connect(url: &str) -> Result<RedisTransport, Error> {
        let client = redis::Client::open(url).map_err(transport_err)?;
        Self::from_client(client).await
    }

    /// Connects to the master that the Sentinels at `sentinels` (`redis://host:port` each)
    /// report for `service`.
    pub async fn connect_sentinel(
        sentinels: &[String],
        service: &str,
    ) -> Result<RedisTransport, Error> {
        let mut sc = redis::sentinel::SentinelClient::build(
            sentinels.to_vec(),
            service.to_string(),
            None,
            redis::sentinel::SentinelServerType::Master,
        )
        .map_err(transport_err)?;
        let client = sc.async_get_client().await.map_err(transport_err)?;
        Self::from_client(client).await
    }

    /// Connects to a Cluster through any of its nodes. Commands are routed by slot (a lock's
    /// keys share one through their hash tag); subscriptions use one node, since a Cluster
    /// broadcasts `PUBLISH` to every node.
    pub async fn connect_cluster(nodes: &[String]) -> Result<RedisTransport, Error> {
        let cluster = redis::cluster::ClusterClient::new(nodes.to_vec())
            .map_err(transport_err)?
            .get_async_connection()
            .await
            .map_err(transport_err)?;
        let first = nodes
            .first()
            .ok_or_else(|| Error::Transport("no cluster node given".into()))?;
        let client = redis::Client::open(first.as_str()).map_err(transport_err)?;
        let mut t = Self::from_client(client).await?;
        t.conn = Commands::Cluster(cluster);
        Ok(t)
    }

    async fn from_client(client: redis::Client) -> Result<RedisTransport, Error> {
        let conn = Commands::Single(
            client
                .get_connection_manager_with_config(connection_config())
                .await
                .map_err(transport_err)?,
        );
        let pubsub = client.get_async_pubsub().await.map_err(transport_err)?;
        let (hub, commands) = Hub::new();
        tokio::spawn(pubsub_task(client, pubsub, Arc::downgrade(&hub), commands));
        Ok(RedisTransport {
            conn,
            hub,
            rt: Runtime::new(),
        })
    }

    /// Channels the shared subscription connection is subscribed to right now.
    pub fn subscribed_channels(&self) -> usize {
        self.hub.channel_count()
    }
}

/// The shared subscription connection's task: runs the hub's subscribe and unsubscribe
/// commands and delivers messages. When the connection is lost (the server killed it, say for
/// its output buffer, or it restarted), it connects again, with a backoff, subscribes again
/// to every channel the hub holds, and wakes every waiter (messages may have been missed
/// meanwhile). It ends when the transport is dropped.
async fn pubsub_task(
    client: redis::Client,
    first: redis::aio::PubSub,
    deliver_to: std::sync::Weak<Hub>,
    mut commands: tokio::sync::mpsc::UnboundedReceiver<HubCommand>,
) {
    let mut pubsub = first;
    loop {
        let (mut sink, mut stream) = pubsub.split();
        loop {
            tokio::select! {
                cmd = commands.recv() => match cmd {
                    Some(HubCommand::Subscribe(ch, ack)) => {
                        let r = sink.subscribe(&ch).await.map_err(transport_err);
                        let _ = ack.send(r);
                    }
                    Some(HubCommand::Unsubscribe(ch)) => {
                        let _ = sink.unsubscribe(&ch).await;
                    }
                    None => return,
                },
                msg = stream.next() => match msg {
                    Some(m) => {
                        let Some(hub) = deliver_to.upgrade() else { return };
                        hub.deliver(m.get_channel_name().as_bytes());
                    }
                    None => break,
                },
            }
        }
        // The connection is gone: make another, restoring every subscription.
        let mut pause = Duration::from_millis(10);
        pubsub = loop {
            let Some(hub) = deliver_to.upgrade() else {
                return;
            };
            if let Ok(mut p) = client.get_async_pubsub().await {
                let mut restored = true;
                for ch in hub.channel_names() {
                    restored &= p.subscribe(&ch).await.is_ok();
                }
                if restored {
                    hub.wake_all();
                    break p;
                }
            }
            drop(hub);
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        };
    }
}

/// Converts a redis-rs value into a [`Reply`].
fn to_reply(v: Value) -> Reply {
    match v {
        Value::Nil => Reply::Nil,
        Value::Int(i) => Reply::Int(i),
        Value::BulkString(b) => Reply::Bulk(b),
        Value::Array(a) | Value::Set(a) => Reply::Array(a.into_iter().map(to_reply).collect()),
        Value::SimpleString(s) => Reply::Status(s),
        Value::Okay => Reply::Status("OK".into()),
        Value::Map(m) => Reply::Map(
            m.into_iter()
                .map(|(k, v)| (to_reply(k), to_reply(v)))
                .collect(),
        ),
        Value::Double(d) => Reply::Double(d),
        Value::Boolean(b) => Reply::Bool(b),
        Value::VerbatimString { text, .. } => Reply::Bulk(text.into_bytes()),
        Value::Push { data, .. } => Reply::Array(data.into_iter().map(to_reply).collect()),
        Value::ServerError(e) => {
            Reply::Error(format!("{} {}", e.code(), e.details().unwrap_or_default()))
        }
        other => Reply::Bulk(format!("{other:?}").into_bytes()),
    }
}

impl Transport for RedisTransport {
    type Subscription = NativeSubscription;

    async fn command(&self, args: Vec<Vec<u8>>) -> Result<Reply, Error> {
        let mut cmd = redis::Cmd::new();
        for a in &args {
            cmd.arg(a.as_slice());
        }
        let result = match self.conn.clone() {
            Commands::Single(mut c) => cmd.query_async::<Value>(&mut c).await,
            Commands::Cluster(mut c) => cmd.query_async::<Value>(&mut c).await,
        };
        match result {
            Ok(v) => Ok(to_reply(v)),
            Err(e) => match e.code() {
                // An error reply from the server: a value, not a transport failure.
                Some(code) => Ok(Reply::Error(format!(
                    "{code} {}",
                    e.detail().unwrap_or_default()
                ))),
                None => Err(transport_err(e)),
            },
        }
    }

    native_transport_common!();
}
