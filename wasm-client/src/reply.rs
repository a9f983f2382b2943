//! Replies, as the lock algorithms see them: a small RESP3-shaped tree.

use crate::Error;

/// One reply from the server.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Nil (absent value).
    Nil,
    /// An integer.
    Int(i64),
    /// A binary-safe string.
    Bulk(Vec<u8>),
    /// A status line such as `OK`.
    Status(String),
    /// An error line such as `NOSCRIPT No matching script`.
    Error(String),
    /// An array (or set, or push).
    Array(Vec<Reply>),
    /// A floating point number.
    Double(f64),
    /// A boolean.
    Bool(bool),
    /// Key/value pairs.
    Map(Vec<(Reply, Reply)>),
}

impl Reply {
    /// The error text, if this is an error reply.
    pub fn error(&self) -> Option<&str> {
        match self {
            Reply::Error(e) => Some(e),
            _ => None,
        }
    }

    /// Turns an error reply into [`Error::Server`].
    pub fn into_result(self) -> Result<Reply, Error> {
        match self {
            Reply::Error(e) => Err(Error::Server(e)),
            other => Ok(other),
        }
    }

    /// The reply as an integer (integers, and bulk strings holding one).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(i) => Some(*i),
            Reply::Bulk(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }

    /// Like [`as_int`](Reply::as_int), with an error naming what was expected.
    pub fn int(&self) -> Result<i64, Error> {
        self.as_int()
            .ok_or_else(|| Error::Protocol(format!("expected an integer, got {self:?}")))
    }

    /// Whether the reply is nil.
    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::Nil)
    }

    /// Whether the reply is `+OK`.
    pub fn is_ok(&self) -> bool {
        matches!(self, Reply::Status(s) if s == "OK")
    }
}
