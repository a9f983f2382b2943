//! The subscription registry: which clients listen on which channels and patterns.

use crate::client::Client;
use crate::frame::Frame;

/// Channel, pattern and shard-channel subscriptions of every client.
#[derive(Debug, Default)]
pub struct PubSub {}

impl PubSub {
    /// Drops every subscription of a departing client.
    pub fn remove_client(&self, _client: &Client) {}
}

/// Roughly how many bytes a push message occupies in an output buffer, for the
/// `client-output-buffer-limit pubsub` accounting.
pub fn approx_size(f: &Frame) -> usize {
    match f {
        Frame::Bulk(b) | Frame::Simple(b) | Frame::Error(b) | Frame::Verbatim(b) => b.len() + 16,
        Frame::Array(v) | Frame::Push(v) | Frame::Set(v) => {
            16 + v.iter().map(approx_size).sum::<usize>()
        }
        Frame::Map(v) => {
            16 + v
                .iter()
                .map(|(a, b)| approx_size(a) + approx_size(b))
                .sum::<usize>()
        }
        _ => 16,
    }
}
