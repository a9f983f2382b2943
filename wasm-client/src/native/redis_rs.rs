//! Real Redis (or any server speaking the protocol, latchkey over TCP included) through the
//! redis-rs crate: one multiplexed connection for commands, one pub/sub connection shared by
//! every waiter.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::Value;

use super::hub::{Hub, HubCommand, NativeSubscription};
use super::Runtime;
use crate::{Error, Reply, Transport};

/// A transport over redis-rs.
#[derive(Clone)]
pub struct RedisTransport {
    conn: MultiplexedConnection,
    hub: Arc<Hub>,
    rt: Runtime,
}

impl std::fmt::Debug for RedisTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTransport").finish_non_exhaustive()
    }
}

fn transport_err(e: redis::RedisError) -> Error {
    Error::Transport(e.to_string())
}

impl RedisTransport {
    /// Connects to `redis://host:port` (commands and the shared subscription connection).
    pub async fn connect(url: &str) -> Result<RedisTransport, Error> {
        let client = redis::Client::open(url).map_err(transport_err)?;
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(transport_err)?;
        let pubsub = client.get_async_pubsub().await.map_err(transport_err)?;
        let (hub, mut commands) = Hub::new();
        let (mut sink, mut stream) = pubsub.split();
        let deliver_to = Arc::downgrade(&hub);
        tokio::spawn(async move {
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
                        None => return,
                    },
                }
            }
        });
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
        let mut conn = self.conn.clone();
        match cmd.query_async::<Value>(&mut conn).await {
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

    async fn subscribe(&self, channel: &[u8]) -> Result<NativeSubscription, Error> {
        self.hub.subscribe(channel).await
    }

    async fn wait_message<'a>(
        &'a self,
        sub: &'a mut NativeSubscription,
        timeout: Duration,
    ) -> bool {
        sub.wait(timeout).await
    }

    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await
    }

    fn now(&self) -> Duration {
        self.rt.now()
    }

    fn random_bytes(&self, buf: &mut [u8]) {
        Runtime::random_bytes(buf)
    }
}
