//! The latchkey server in the same process: commands run through in-process clients, with no
//! socket and no serialisation.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use latchkey_server::{Connector, Frame, LocalClient, ServerHandle};

use super::hub::{Hub, HubCommand, NativeSubscription};
use super::Runtime;
use crate::{Error, Reply, Transport};

/// A transport to an embedded latchkey server.
#[derive(Clone)]
pub struct LocalTransport {
    connector: Connector,
    pool: Arc<Mutex<Vec<LocalClient>>>,
    hub: Arc<Hub>,
    rt: Runtime,
}

impl std::fmt::Debug for LocalTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalTransport").finish_non_exhaustive()
    }
}

impl LocalTransport {
    /// A transport to `server` (which must stay alive while the transport is used).
    pub fn new(server: &ServerHandle) -> LocalTransport {
        let connector = server.connector();
        let (hub, mut commands) = Hub::new();
        let mut sub_client = connector.client();
        let mut pushes = sub_client.take_pushes();
        let deliver_to = Arc::downgrade(&hub);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    cmd = commands.recv() => match cmd {
                        Some(HubCommand::Subscribe(ch, ack)) => {
                            sub_client.cmd([b"SUBSCRIBE".to_vec(), ch]).await;
                            let _ = ack.send(Ok(()));
                        }
                        Some(HubCommand::Unsubscribe(ch)) => {
                            sub_client.cmd([b"UNSUBSCRIBE".to_vec(), ch]).await;
                        }
                        None => return,
                    },
                    push = pushes.recv() => match push {
                        Some(Frame::Push(items)) => {
                            if let (Some(Frame::Bulk(kind)), Some(Frame::Bulk(ch))) = (items.first(), items.get(1)) {
                                if kind.as_ref() == b"message" {
                                    let Some(hub) = deliver_to.upgrade() else { return };
                                    hub.deliver(ch);
                                }
                            }
                        }
                        Some(_) => {}
                        None => return,
                    },
                }
            }
        });
        LocalTransport {
            connector,
            pool: Arc::new(Mutex::new(Vec::new())),
            hub,
            rt: Runtime::new(),
        }
    }
}

/// Converts a server frame into a [`Reply`].
pub(crate) fn frame_to_reply(f: Frame) -> Reply {
    match f {
        Frame::Simple(s) => Reply::Status(String::from_utf8_lossy(&s).into_owned()),
        Frame::Error(e) => Reply::Error(String::from_utf8_lossy(&e).into_owned()),
        Frame::Integer(i) => Reply::Int(i),
        Frame::Bulk(b) | Frame::Verbatim(b) | Frame::Raw(b) | Frame::BigNumber(b) => {
            Reply::Bulk(b.to_vec())
        }
        // The lock client reads no attributes: the reply they describe is what it gets.
        Frame::Attribute(_, reply) => frame_to_reply(*reply),
        Frame::Null | Frame::NullArray => Reply::Nil,
        Frame::Array(v) | Frame::Set(v) | Frame::Push(v) | Frame::Multi(v) => {
            Reply::Array(v.into_iter().map(frame_to_reply).collect())
        }
        Frame::Map(m) => Reply::Map(
            m.into_iter()
                .map(|(k, v)| (frame_to_reply(k), frame_to_reply(v)))
                .collect(),
        ),
        Frame::Double(d) => Reply::Double(d),
        Frame::Boolean(b) => Reply::Bool(b),
    }
}

impl Transport for LocalTransport {
    type Subscription = NativeSubscription;

    async fn command(&self, args: Vec<Vec<u8>>) -> Result<Reply, Error> {
        let client = self.pool.lock().expect("pool lock").pop();
        let mut client = client.unwrap_or_else(|| self.connector.client());
        let reply = client.cmd(args.into_iter().map(Bytes::from)).await;
        self.pool.lock().expect("pool lock").push(client);
        Ok(frame_to_reply(reply))
    }

    native_transport_common!();
}
