//! The Lua scripts of every lock, as named constants. Each is sent with `EVALSHA` and re-sent
//! with `EVAL` when the server answers `NOSCRIPT` (see [`crate::transport::eval`]).

use std::sync::OnceLock;

use sha1::{Digest, Sha1};

/// A script body and its lazily computed SHA1.
#[derive(Debug)]
pub struct Script {
    /// A name for logs and metrics.
    pub name: &'static str,
    /// The Lua source.
    pub body: &'static str,
    sha: OnceLock<String>,
}

impl Script {
    /// Declares a script.
    pub const fn new(name: &'static str, body: &'static str) -> Script {
        Script {
            name,
            body,
            sha: OnceLock::new(),
        }
    }

    /// The SHA1 of the body, lowercase hex, as `SCRIPT LOAD` returns it.
    pub fn sha(&self) -> &str {
        self.sha
            .get_or_init(|| hex::encode(Sha1::digest(self.body.as_bytes())))
    }
}

/// Every script, for hosts that allow-list scripts by SHA1.
pub fn all() -> [&'static Script; 10] {
    [
        &RELEASE,
        &EXTEND,
        &RELEASE_AND_PUBLISH,
        &FENCED_ACQUIRE,
        &REENTRANT_ACQUIRE,
        &REENTRANT_RELEASE,
        &REENTRANT_RENEW,
        &SEMAPHORE_ACQUIRE,
        &SEMAPHORE_RELEASE,
        &RENEW_BATCH,
    ]
}

/// Deletes the lock if it still holds our token: 1 released, 0 held by someone else,
/// -1 already gone.
pub static RELEASE: Script = Script::new(
    "release",
    r#"local v = redis.call('get', KEYS[1])
if v == ARGV[1] then return redis.call('del', KEYS[1]) end
if v == false then return -1 end
return 0"#,
);

/// Deletes the lock if it holds our token and tells waiters on the unlock channel.
pub static RELEASE_AND_PUBLISH: Script = Script::new(
    "release_and_publish",
    r#"local v = redis.call('get', KEYS[1])
if v == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], 'unlocked')
  return 1
end
if v == false then return -1 end
return 0"#,
);

/// Sets a new TTL if the lock still holds our token: 1 extended, 0 not owner, -1 gone.
pub static EXTEND: Script = Script::new(
    "extend",
    r#"local v = redis.call('get', KEYS[1])
if v == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
if v == false then return -1 end
return 0"#,
);

/// Renews many locks in one call: ARGV[1] is the TTL, then (key index, token) pairs follow as
/// KEYS[i] / ARGV[i+1]. Returns, per key, 1 renewed or 0 lost.
pub static RENEW_BATCH: Script = Script::new(
    "renew_batch",
    r#"local out = {}
for i, key in ipairs(KEYS) do
  local v = redis.call('get', key)
  if v == ARGV[i + 1] then
    redis.call('pexpire', key, ARGV[1])
    out[i] = 1
  else
    local h = redis.call('type', key)
    if h.ok == 'hash' and redis.call('hexists', key, ARGV[i + 1]) == 1 then
      redis.call('pexpire', key, ARGV[1])
      out[i] = 1
    else
      out[i] = 0
    end
  end
end
return out"#,
);

/// Takes the lock and issues a fencing token from a counter, atomically: returns the token,
/// or -1 when the lock is held.
pub static FENCED_ACQUIRE: Script = Script::new(
    "fenced_acquire",
    r#"if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('incr', KEYS[2])
end
return -1"#,
);

/// Redisson's reentrant shape: a hash `{owner: count}`. Returns nil when acquired (or
/// re-entered), else the holder's remaining TTL in ms.
pub static REENTRANT_ACQUIRE: Script = Script::new(
    "reentrant_acquire",
    r#"if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])"#,
);

/// Leaves one level of a reentrant lock: -1 not the owner, 0 still held (count > 0), 1 fully
/// released (and the unlock channel told).
pub static REENTRANT_RELEASE: Script = Script::new(
    "reentrant_release",
    r#"if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return -1 end
local n = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if n > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], 'unlocked')
return 1"#,
);

/// Renews a reentrant lock we hold: 1 renewed, 0 not held by us.
pub static REENTRANT_RENEW: Script = Script::new(
    "reentrant_renew",
    r#"if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return 1
end
return 0"#,
);

/// A permit of a semaphore: a sorted set of holders scored by lease deadline (server time).
/// Expired permits are dropped first; returns 1 when a permit was granted, 0 when all are taken.
pub static SEMAPHORE_ACQUIRE: Script = Script::new(
    "semaphore_acquire",
    r#"local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if redis.call('zcard', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('zadd', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('pexpire', KEYS[1], ARGV[3])
  end
  return 1
end
return 0"#,
);

/// Gives a semaphore permit back and tells waiters: 1 released, 0 it had already expired.
pub static SEMAPHORE_RELEASE: Script = Script::new(
    "semaphore_release",
    r#"local n = redis.call('zrem', KEYS[1], ARGV[1])
if n == 1 then redis.call('publish', KEYS[2], 'released') end
return n"#,
);
