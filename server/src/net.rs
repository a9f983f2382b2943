//! Serving one TCP connection: read requests, run them, write the replies.
//!
//! Replies to every command found in one read are gathered in one buffer and written with one
//! system call, which is what makes pipelining fast. Pub/sub messages for the client arrive on
//! a channel and are written between requests.
//!
//! Two of the client limits live here. `client-query-buffer-limit` (1 GiB by default, as in
//! Redis) bounds what a client may have sent that is not yet a complete command: the unparsed
//! bytes, the arguments of the request being read, and, as newer Redis versions count them,
//! the commands queued in `MULTI`. Past it the connection is closed without a reply, as Redis
//! does. `client-output-buffer-limit` (see [`crate::outbuf`]) bounds the replies and messages
//! waiting for a client that does not read.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::client::Client;
use crate::codec::{Decoder, Parsed};
use crate::command::BLOCKING;
use crate::config::ClientClass;
use crate::frame::Frame;
use crate::querybuf::{Checked, QueryBuffer};
pub(crate) use crate::state::cleanup_client;
use crate::state::Shared;
use crate::{command, dispatch};

/// Flush the reply buffer early when a pipeline's replies grow past this.
const FLUSH_AT: usize = 64 * 1024;

/// Serves one accepted connection until the client leaves, is killed, or the server stops.
pub(crate) async fn serve(
    shared: Arc<Shared>,
    socket: TcpStream,
    peer: SocketAddr,
    _done: mpsc::Sender<()>,
) {
    let laddr = socket.local_addr().ok();
    let (mut client, mut pushes) = shared.clients.register(Some(peer), laddr);
    // A connection made while the default user has a password must authenticate first.
    client.authenticated = !shared.acl.auth_required();
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
    let mut qbuf = QueryBuffer::default();
    let mut wbuf = BytesMut::with_capacity(16 * 1024);
    let mut decoder = Decoder::default();
    // Bytes of push messages sitting in `wbuf`, released from the client's account once written.
    let mut push_bytes = 0usize;
    // Bytes of the request being read that the decoder already took off `rbuf` (its complete
    // arguments), and bytes of the commands queued in `MULTI`: with `rbuf`, what counts
    // against `client-query-buffer-limit`.
    let mut partial = 0usize;
    let mut queued = 0usize;

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
            let unparsed = qbuf.buf.len();
            let parsed = decoder.parse(&mut qbuf.buf, shared.config.proto_max_bulk_len());
            match parsed {
                // A killed client (CLIENT KILL, shutdown, crash) runs nothing more, even what
                // it had already sent.
                Ok(Some(Parsed::Command(_))) if handle.is_killed() => break 'conn,
                Ok(Some(Parsed::Command(args))) => {
                    ran += 1;
                    partial = 0;
                    qbuf.saw_argument(args.iter().map(|a| a.len()).max().unwrap_or(0));
                    let spec = command::lookup(&args[0]);
                    let size: usize = args.iter().map(|a| a.len()).sum();
                    // A blocking command, or any command while a `CLIENT PAUSE` may hold it,
                    // waits: a client that leaves or is killed meanwhile stops waiting.
                    let may_wait =
                        spec.is_some_and(|s| s.has(BLOCKING)) || shared.pause.current().is_some();
                    let reply = if may_wait {
                        // A waiting client is not idle (the cron leaves it be), and the wait's
                        // end counts as an interaction, as Redis counts the reply it writes.
                        handle.waiting.store(true, Ordering::Relaxed);
                        let reply = tokio::select! {
                            r = dispatch::execute_spec(&shared, &mut client, spec, args) => r,
                            _ = wait_closed(&mut rd, &mut qbuf.buf) => break 'conn,
                            _ = &mut killed => break 'conn,
                        };
                        handle.waiting.store(false, Ordering::Relaxed);
                        handle
                            .last_interaction_ms
                            .store(shared.clock.now_ms(), Ordering::Relaxed);
                        reply
                    } else {
                        dispatch::execute_spec(&shared, &mut client, spec, args).await
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
                    match &client.multi {
                        Some(_) if matches!(&reply, Frame::Simple(s) if s == "QUEUED") => {
                            queued += size
                        }
                        Some(_) => {}
                        None => queued = 0,
                    }
                    // `CLIENT REPLY OFF|SKIP` silences replies, not what pub/sub pushes: a
                    // (un)subscribe confirmation goes out all the same, as in Redis, while
                    // the skip is still spent on this command.
                    let wanted = client.reply_mode.take_reply();
                    if wanted || is_pushed(&reply) {
                        reply.encode(client.protocol, &mut wbuf);
                    }
                    // Invalidations of keys this command changed go out after its reply.
                    for f in client.after_reply.drain(..) {
                        f.encode(client.protocol, &mut wbuf);
                    }
                    if over_output_hard_limit(&shared, &client, wbuf.len()) {
                        break 'conn;
                    }
                    if client.close_after_reply {
                        let _ = wr.write_all(&wbuf).await;
                        break 'conn;
                    }
                    if wbuf.len() >= FLUSH_AT {
                        // A client that stops reading holds this task here: it reads no more
                        // requests meanwhile, so its replies cannot pile up in the server.
                        tokio::select! {
                            r = wr.write_all(&wbuf) => if r.is_err() { break 'conn },
                            _ = &mut killed => break 'conn,
                            _ = stuck_over_limit(&shared, &client, wbuf.len()) => break 'conn,
                        }
                        wbuf.clear();
                    }
                }
                Ok(Some(Parsed::Empty)) => partial = 0,
                Ok(None) => {
                    partial += unparsed - qbuf.buf.len();
                    break;
                }
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
            if ran > 1 || client.is_replica {
                // A pipeline: let the other connections with requests waiting run theirs
                // first, so that the replies go out together, as Redis's event loop sends
                // them. Each write wakes the client on the other side; writes spread out
                // between other connections' work wake it once each, writes together
                // mostly find it awake. (At one request per read, the extra turn through
                // the scheduler costs more than it saves.)
                //
                // A replica's stream likewise: every write of another client queues a
                // chunk here and wakes this task at once, so without this turn each chunk
                // went out on its own, a write here and a read and an apply on the replica
                // per command. After it, what the clients that ran meanwhile wrote goes out
                // in one write, as Redis writes to its replicas once per event-loop turn
                // (and a `WAIT`'s `GETACK` goes with the writes before it).
                tokio::task::yield_now().await;
                if client.is_replica {
                    while let Some(f) = pushes.try_recv() {
                        push_bytes += crate::pubsub::approx_size(&f);
                        f.encode(client.protocol, &mut wbuf);
                    }
                }
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
                    _ = stuck_over_limit(&shared, &client, wbuf.len() - sent) => break 'conn,
                }
            }
            wbuf.clear();
            pushes.written(push_bytes);
            push_bytes = 0;
        }
        if handle.is_killed() {
            break;
        }
        let pending_input = partial + qbuf.buf.len() + queued;
        if pending_input as u64 > shared.config.query_buffer_limit() && !client.is_replication_link
        {
            tracing::warn!(
                client = handle.id,
                pending_input,
                "closing client that reached max query buffer length"
            );
            break 'conn;
        }
        publish_sizes(&handle, &qbuf, &wbuf);
        tokio::select! {
            r = read_some(&mut rd, &mut qbuf) => match r {
                Ok(0) | Err(_) => break 'conn,
                Ok(_) => qbuf.after_read(),
            },
            Some(f) = pushes.recv() => {
                // The clients' cron asks for a look at the buffers and the idle `timeout`.
                if crate::client::is_poke(&f) {
                    let idle = crate::clients_cron::idle_for(&shared, &handle);
                    if crate::clients_cron::timed_out(&shared, &handle, idle) {
                        tracing::debug!(client = handle.id, "closing a client idle past `timeout`");
                        break 'conn;
                    }
                    if qbuf.check(idle, partial) == Checked::Freed && wbuf.is_empty() {
                        // Given back with the query buffer: the reply buffer, until replies
                        // come.
                        wbuf = BytesMut::new();
                    }
                }
                push_bytes += crate::pubsub::approx_size(&f);
                f.encode(client.protocol, &mut wbuf);
            }
            _ = &mut killed => break 'conn,
        }
    }
    cleanup_client(&shared, &mut client);
}

/// The `client-output-buffer-limit` class of a client: replica, pub/sub or normal.
fn output_class(shared: &Shared, client: &Client) -> ClientClass {
    if shared.replication.is_replica_client(client.handle.id) {
        ClientClass::Replica
    } else if client.subscription_count() > 0 {
        ClientClass::PubSub
    } else {
        ClientClass::Normal
    }
}

/// Whether the replies waiting in the write buffer (`pending` bytes) put the client over its
/// class's hard output-buffer limit: then it is disconnected without being sent them, as
/// Redis frees a client whose reply outgrows the limit.
fn over_output_hard_limit(shared: &Shared, client: &Client, pending: usize) -> bool {
    // Cheap test first: most replies are far below any sensible limit.
    if pending < 16 * 1024 {
        return false;
    }
    let limit = shared
        .config
        .limits
        .output_limit(output_class(shared, client));
    let over = limit.hard > 0 && pending as u64 > limit.hard;
    if over {
        tracing::warn!(
            client = client.handle.id,
            pending,
            "client over its hard output-buffer limit: disconnecting"
        );
    }
    over
}

/// Resolves when a client whose socket stopped taking bytes stays over its output-buffer
/// limits: over the hard limit, or over the soft one for its `soft_seconds`. `unsent` is what
/// is left of the write buffer; queued push messages count too. Checked every 100 ms while
/// the write waits.
async fn stuck_over_limit(shared: &Shared, client: &Client, unsent: usize) {
    let limit = shared
        .config
        .limits
        .output_limit(output_class(shared, client));
    let mut over_soft_since: Option<std::time::Instant> = None;
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let queued = client.handle.queued_push_bytes.load(Ordering::Acquire);
        let pending = (unsent + queued) as u64;
        if limit.hard > 0 && pending > limit.hard {
            tracing::warn!(
                client = client.handle.id,
                pending,
                "output buffer over its hard limit"
            );
            return;
        }
        if limit.soft > 0 && pending > limit.soft {
            let since = *over_soft_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed().as_secs() >= limit.soft_seconds {
                tracing::warn!(
                    client = client.handle.id,
                    pending,
                    "output buffer over its soft limit"
                );
                return;
            }
        } else {
            over_soft_since = None;
        }
    }
}

/// Reads what the client sent. A connection whose buffer was given back waits for bytes
/// before it takes one, so that it holds none while idle; otherwise this is `read_buf`, which
/// knows a short read drained the socket and so spares a system call that would find nothing.
async fn read_some(rd: &mut OwnedReadHalf, qbuf: &mut QueryBuffer) -> std::io::Result<usize> {
    if qbuf.is_given_back() {
        std::future::poll_fn(|cx| rd.as_ref().poll_read_ready(cx)).await?;
    }
    qbuf.make_room();
    rd.read_buf(&mut qbuf.buf).await
}

/// Shows the buffers' sizes to `CLIENT LIST`.
fn publish_sizes(handle: &crate::client::ClientHandle, qbuf: &QueryBuffer, wbuf: &BytesMut) {
    let (len, free) = qbuf.sizes();
    handle.qbuf.store(len, Ordering::Relaxed);
    handle.qbuf_free.store(free, Ordering::Relaxed);
    handle.reply_buf.store(wbuf.capacity(), Ordering::Relaxed);
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

/// Whether a reply is made of pub/sub confirmations (pushes in RESP3, arrays in RESP2), which
/// `CLIENT REPLY OFF|SKIP` does not silence.
fn is_pushed(reply: &Frame) -> bool {
    match reply {
        Frame::Push(_) => true,
        Frame::Multi(frames) => {
            !frames.is_empty() && frames.iter().all(|f| matches!(f, Frame::Push(_)))
        }
        _ => false,
    }
}
