//! The hot paths the micro-benchmarks (`server/benches/hot_paths.rs`) time, reached from
//! outside the crate without making the parser public.

use bytes::BytesMut;

use crate::codec::{Decoder, Parsed};

/// Parses every complete request in `buf` as a connection would (taking them off its front),
/// with Redis's default `proto-max-bulk-len`; returns how many commands it found.
pub fn parse_requests(buf: &mut BytesMut) -> usize {
    let mut decoder = Decoder::default();
    let mut commands = 0;
    while let Ok(Some(parsed)) = decoder.parse(buf, 512 * 1024 * 1024) {
        if let Parsed::Command(_) = parsed {
            commands += 1;
        }
    }
    commands
}
