//! The two protected resources of the fencing scenarios: one that trusts a client-side token,
//! one that checks the lease itself on the storage side.
//!
//! A lock alone cannot stop a holder that lost its lock without knowing it (a failover
//! forgot the lock, or the holder paused past its TTL). The resource it writes to has to
//! refuse the stale write. Two ways are common, and they do not fail the same way:
//!
//! - [`TokenCheckedStore`]: the lock hands out a number from `INCR` with each acquisition
//!   (Kleppmann's fencing token) and the resource accepts a write only with a token greater
//!   than any it has seen. It works while the counter only ever grows; a failover that loses
//!   the counter's last `INCR` hands the same number out twice.
//! - [`LEASE_CHECKED_WRITE`]: the resource lives next to the lock, and a write passes only if
//!   the lock, on the current primary, still holds the writer's token, checked and applied in
//!   one atomic script (compare-and-set against the lease).

/// A storage that accepts a write only with a fencing token larger than any it has seen.
#[derive(Debug, Default)]
pub struct TokenCheckedStore {
    highest: Option<i64>,
    /// Who wrote, in order, for the tests to look at.
    pub writes: Vec<String>,
}

impl TokenCheckedStore {
    /// Writes on behalf of `who` if `token` is newer than every token seen so far; says
    /// whether the write was accepted.
    pub fn write(&mut self, who: &str, token: i64) -> bool {
        if self.highest.is_some_and(|h| token <= h) {
            return false;
        }
        self.highest = Some(token);
        self.writes.push(who.to_string());
        true
    }
}

/// `EVAL LEASE_CHECKED_WRITE 2 <lock> <resource> <owner token> <value>`: sets `resource` to
/// `value` only if `lock` still holds `owner token`. Returns 1 when written, 0 when refused.
pub const LEASE_CHECKED_WRITE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('set', KEYS[2], ARGV[2]) return 1 end return 0";
