//! The failures a test drives on purpose, where the real ones would happen: a replica that
//! applies its master's stream late, a stream paused on the master (held there, so that a
//! crash loses exactly what no replica received), every replica disconnected at once.

use std::time::Duration;

use super::Replication;
use crate::frame::Frame;

impl Replication {
    /// Replica side: delays applying (and acknowledging) the stream by `lag`, to show a lagging
    /// replica; zero applies at once.
    pub(crate) fn set_lag(&self, lag: Duration) {
        self.upstream.lock().lag = lag;
    }

    pub(crate) fn lag(&self) -> Duration {
        self.upstream.lock().lag
    }

    /// Closes the connection of every replica, as `CLIENT KILL TYPE replica` does: they
    /// reconnect and resynchronise (partially, if the backlog still covers them).
    pub(crate) fn disconnect_replicas(&self) {
        for r in self.downstream.lock().links.iter() {
            r.sender.handle.kill();
        }
    }

    /// Pauses or resumes the stream to every replica (held on this master meanwhile).
    pub(crate) fn set_paused(&self, paused: bool) {
        for r in self.downstream.lock().links.iter_mut() {
            r.paused = paused;
            if !paused {
                for chunk in r.held.drain(..) {
                    r.sender.send(Frame::Raw(chunk.clone()), chunk.len());
                }
            }
        }
    }

    /// Drops every byte held for paused replicas: what a crash loses.
    pub(crate) fn discard_held(&self) {
        for r in self.downstream.lock().links.iter_mut() {
            r.held.clear();
        }
    }
}
