//! Serving one TCP connection: read requests, run them, write the replies.
//!
//! Replies to every command found in one read are gathered in one buffer and written with one
//! system call, which is what makes pipelining fast. Pub/sub messages for the client arrive on
//! a channel and are written between requests.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::client::Client;
use crate::cmd::{self, BLOCKING};
use crate::codec::{Decoder, Parsed};
use crate::frame::Frame;
use crate::server::Shared;

/// Flush the reply buffer early when a pipeline's replies grow past this.
const FLUSH_AT: usize = 64 * 1024;

/// Serves one accepted connection until the client leaves, is killed, or the server stops.
pub async fn serve(
    shared: Arc<Shared>,
    socket: TcpStream,
    peer: SocketAddr,
    _done: mpsc::Sender<()>,
) {
    let laddr = socket.local_addr().ok();
    let (mut client, mut pushes) = shared.clients.register(Some(peer), laddr);
    let handle = client.handle.clone();
    let (mut rd, mut wr) = socket.into_split();
    // Shutdown kills every registered client; one that registered just after sees the flag.
    if *shared.shutdown_signal().borrow() {
        cleanup_client(&shared, &mut client);
        return;
    }
    // One kill future for the whole connection: registering a waiter anew on every loop turn
    // would cost a lock per request.
    let killed = handle.clone();
    let killed = killed.killed();
    tokio::pin!(killed);
    // A node restarting in place reloads its keyspace first (registered before that started,
    // this client was killed with the others).
    if shared.is_loading() {
        tokio::select! {
            _ = shared.wait_loaded() => {}
            _ = &mut killed => {
                cleanup_client(&shared, &mut client);
                return;
            }
        }
    }
    let mut rbuf = BytesMut::with_capacity(16 * 1024);
    let mut wbuf = BytesMut::with_capacity(16 * 1024);
    let mut decoder = Decoder::default();
    // Bytes of push messages sitting in `wbuf`, released from the client's account once written.
    let mut push_bytes = 0usize;

    let maxclients = shared.config.maxclients() as usize;
    if shared.clients.len() > maxclients {
        shared
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        let _ = wr
            .write_all(b"-ERR max number of clients reached\r\n")
            .await;
        cleanup_client(&shared, &mut client);
        return;
    }

    'conn: loop {
        // Run every complete request already buffered.
        let mut ran = 0usize;
        loop {
            let parsed = decoder.parse(&mut rbuf, shared.config.proto_max_bulk_len());
            match parsed {
                // A killed client (CLIENT KILL, shutdown, crash) runs nothing more, even what
                // it had already sent.
                Ok(Some(Parsed::Command(_))) if handle.is_killed() => break 'conn,
                Ok(Some(Parsed::Command(args))) => {
                    ran += 1;
                    let spec = cmd::lookup(&args[0]);
                    let reply = if spec.is_some_and(|s| s.has(BLOCKING)) {
                        tokio::select! {
                            r = cmd::execute_spec(&shared, &mut client, spec, args) => r,
                            _ = wait_closed(&mut rd, &mut rbuf) => break 'conn,
                            _ = &mut killed => break 'conn,
                        }
                    } else {
                        cmd::execute_spec(&shared, &mut client, spec, args).await
                    };
                    if client.close_without_reply {
                        let _ = wr.write_all(&wbuf).await;
                        break 'conn;
                    }
                    // Messages published while the command ran (by this very client, say)
                    // go out before its reply, as Redis writes them.
                    while let Some(f) = pushes.try_recv() {
                        push_bytes += crate::pubsub::approx_size(&f);
                        f.encode(client.protocol, &mut wbuf);
                    }
                    reply.encode(client.protocol, &mut wbuf);
                    if client.close_after_reply {
                        let _ = wr.write_all(&wbuf).await;
                        break 'conn;
                    }
                    if wbuf.len() >= FLUSH_AT {
                        if wr.write_all(&wbuf).await.is_err() {
                            break 'conn;
                        }
                        wbuf.clear();
                    }
                }
                Ok(Some(Parsed::Empty)) => {}
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(client = handle.id, "protocol error: {e}");
                    Frame::error(format!("ERR {e}")).encode(client.protocol, &mut wbuf);
                    let _ = wr.write_all(&wbuf).await;
                    break 'conn;
                }
            }
        }
        while let Some(f) = pushes.try_recv() {
            push_bytes += crate::pubsub::approx_size(&f);
            f.encode(client.protocol, &mut wbuf);
        }
        if !wbuf.is_empty() {
            if ran > 1 {
                // A pipeline: let the other connections with requests waiting run theirs
                // first, so that the replies go out together, as Redis's event loop sends
                // them. Each write wakes the client on the other side; writes spread out
                // between other connections' work wake it once each, writes together
                // mostly find it awake. (At one request per read, the extra turn through
                // the scheduler costs more than it saves.)
                tokio::task::yield_now().await;
            }
            // Usually the socket takes everything at once; only a slow reader makes us wait,
            // and then a kill (output buffer overrun, CLIENT KILL, shutdown) must still get in.
            let sent = match wr.try_write(&wbuf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
                Err(_) => break 'conn,
            };
            if sent < wbuf.len() {
                tokio::select! {
                    r = wr.write_all(&wbuf[sent..]) => if r.is_err() { break 'conn },
                    _ = &mut killed => break 'conn,
                }
            }
            wbuf.clear();
            pushes.written(push_bytes);
            push_bytes = 0;
        }
        if handle.is_killed() {
            break;
        }
        tokio::select! {
            r = rd.read_buf(&mut rbuf) => match r {
                Ok(0) | Err(_) => break 'conn,
                Ok(_) => {}
            },
            Some(f) = pushes.recv() => {
                push_bytes += crate::pubsub::approx_size(&f);
                f.encode(client.protocol, &mut wbuf);
            }
            _ = &mut killed => break 'conn,
        }
    }
    cleanup_client(&shared, &mut client);
}

/// Reads (and keeps) whatever a blocked client sends, resolving only when the peer closes.
async fn wait_closed(rd: &mut OwnedReadHalf, rbuf: &mut BytesMut) {
    loop {
        match rd.read_buf(rbuf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Releases everything a departing client held: subscriptions, watches, its registry entry.
pub fn cleanup_client(shared: &Shared, client: &mut Client) {
    shared.pubsub.remove_client(client);
    shared.replication.remove_replica(client.handle.id);
    client.unwatch_all(&shared.keyspace);
    shared.clients.unregister(client.handle.id);
}
