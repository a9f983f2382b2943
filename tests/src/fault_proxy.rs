//! A small TCP fault proxy to put between a replica and its master, so that real
//! `redis-server` pairs suffer the same faults as latchkey's driven ones: pause the stream
//! (bytes are held in the proxy, not in a socket buffer that would deliver them later), drop
//! what was held, and cut every connection.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

#[derive(Default)]
struct State {
    paused: bool,
    held: Vec<Vec<u8>>,
    tasks: Vec<JoinHandle<()>>,
}

/// A proxy forwarding `listen -> target`; the `target -> client` direction can be paused.
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    accept: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy to `target` on a free local port.
    pub async fn start(target: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(upstream) = TcpStream::connect(target).await else {
                    continue;
                };
                let (mut cr, mut cw) = client.into_split();
                let (mut ur, mut uw) = upstream.into_split();
                let up = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut cr, &mut uw).await;
                });
                let st2 = st.clone();
                let down = tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match ur.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        let chunk = buf[..n].to_vec();
                        let forward = {
                            let mut s = st2.lock().expect("proxy state");
                            if s.paused {
                                s.held.push(chunk);
                                None
                            } else {
                                let mut all: Vec<u8> = s.held.drain(..).flatten().collect();
                                all.extend_from_slice(&chunk);
                                Some(all)
                            }
                        };
                        if let Some(bytes) = forward {
                            if cw.write_all(&bytes).await.is_err() {
                                return;
                            }
                        }
                    }
                });
                let mut s = st.lock().expect("proxy state");
                s.tasks.push(up);
                s.tasks.push(down);
            }
        });
        FaultProxy {
            addr,
            state,
            accept,
        }
    }

    /// The address replicas should connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Holds everything the target sends from now on.
    pub fn pause(&self) {
        self.state.lock().expect("proxy state").paused = true;
    }

    /// Forwards again; held bytes go out ahead of the next chunk the target sends (a Redis
    /// master pings its replicas periodically, so one always comes).
    pub fn resume(&self) {
        self.state.lock().expect("proxy state").paused = false;
    }

    /// Loses whatever is held.
    pub fn drop_held(&self) {
        self.state.lock().expect("proxy state").held.clear();
    }

    /// Closes every proxied connection and stops accepting new ones.
    pub fn cut(&self) {
        let mut s = self.state.lock().expect("proxy state");
        for t in s.tasks.drain(..) {
            t.abort();
        }
        self.accept.abort();
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.cut();
    }
}
