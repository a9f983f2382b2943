//! What can go wrong talking to a server (the normal outcomes of a lock — held by someone
//! else, expired, not the owner — are typed results, not errors).

/// A failure of the transport or an unexpected reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The connection failed (refused, closed, timed out).
    Transport(String),
    /// The server answered with an error reply the lock did not expect.
    Server(String),
    /// The server answered with a reply of an unexpected shape.
    Protocol(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Transport(e) => write!(f, "transport error: {e}"),
            Error::Server(e) => write!(f, "server error: {e}"),
            Error::Protocol(e) => write!(f, "unexpected reply: {e}"),
        }
    }
}

impl std::error::Error for Error {}
