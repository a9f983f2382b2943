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
pub fn all() -> [&'static Script; 18] {
    [
        &MULTI_ACQUIRE,
        &MULTI_RELEASE,
        &READ_ACQUIRE,
        &WRITE_ACQUIRE,
        &RW_RELEASE,
        &FAIR_ACQUIRE,
        &RELEASE,
        &EXTEND,
        &RELEASE_AND_PUBLISH,
        &SIMPLE_WAIT,
        &SIMPLE_LEAVE,
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

/// The Lua that wakes the longest waiter of a simple lock still alive, shared by
/// [`RELEASE_AND_PUBLISH`] and [`SIMPLE_LEAVE`]. KEYS[2] is the unlock channel, KEYS[3] the
/// queue (token → arrival number), KEYS[4] each waiter's lease (token → server time in ms
/// until which it counts as alive). Waiters at the head whose lease lapsed (a waiter that
/// died, or gave up without a word) are dropped first, at most 100 per call so that a script
/// stays short; the first live one gets `unlocked` on its own channel, `KEYS[2]:<token>`.
macro_rules! wake_head {
    () => {
        r#"local now = nil
for _ = 1, 100 do
  local head = redis.call('zrange', KEYS[3], 0, 0)[1]
  if not head then break end
  if not now then
    local t = redis.call('time')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local alive = tonumber(redis.call('zscore', KEYS[4], head))
  if alive and alive > now then
    redis.call('publish', KEYS[2] .. ':' .. head, 'unlocked')
    break
  end
  redis.call('zrem', KEYS[3], head)
  redis.call('zrem', KEYS[4], head)
end
"#
    };
}

/// Deletes the lock if it holds our token, and wakes waiters: every subscriber of the unlock
/// channel KEYS[2] (the fair and fenced locks' waiters), and of the simple lock's queued
/// waiters (KEYS[3], KEYS[4]: see [`SIMPLE_WAIT`]) only the longest one still alive, so that
/// one unlock sets off one acquisition, not a stampede of them. 1 released, 0 held by
/// someone else, -1 already gone.
pub static RELEASE_AND_PUBLISH: Script = Script::new(
    "release_and_publish",
    concat!(
        r#"local v = redis.call('get', KEYS[1])
if v == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], 'unlocked')
"#,
        wake_head!(),
        r#"  return 1
end
if v == false then return -1 end
return 0"#
    ),
);

/// A waiting simple lock's attempt: takes the lock (`SET NX PX`) for the waiter's token
/// ARGV[1] with TTL ARGV[2], or else queues the waiter. The queue KEYS[2] orders waiters by
/// arrival (a waiter already queued keeps its place); KEYS[3] holds each one's lease, now +
/// ARGV[3] ms, renewed by every attempt, past which a release counts it as dead. Both keys
/// live as long as the longest lease. Returns -2 when the lock was taken (and the waiter
/// left the queue), else the holder's PTTL (-1: a holder without TTL).
pub static SIMPLE_WAIT: Script = Script::new(
    "simple_wait",
    r#"if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('zrem', KEYS[2], ARGV[1])
  redis.call('zrem', KEYS[3], ARGV[1])
  return -2
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
if not redis.call('zscore', KEYS[2], ARGV[1]) then
  local last = redis.call('zrange', KEYS[2], -1, -1, 'WITHSCORES')
  local seq = 1
  if last[2] then seq = tonumber(last[2]) + 1 end
  redis.call('zadd', KEYS[2], seq, ARGV[1])
end
redis.call('zadd', KEYS[3], now + lease, ARGV[1])
for _, k in ipairs({KEYS[2], KEYS[3]}) do
  if redis.call('pttl', k) < lease then redis.call('pexpire', k, lease) end
end
return redis.call('pttl', KEYS[1])"#,
);

/// A waiter of a simple lock gives up (its deadline passed): it leaves the queue, and if the
/// lock is free (its wake-up may have been the last one) the next live waiter is woken in its
/// place. Same keys as [`RELEASE_AND_PUBLISH`]; ARGV[1] is the waiter's token. Returns 0.
pub static SIMPLE_LEAVE: Script = Script::new(
    "simple_leave",
    concat!(
        r#"redis.call('zrem', KEYS[3], ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
if redis.call('exists', KEYS[1]) == 0 then
"#,
        wake_head!(),
        r#"end
return 0"#
    ),
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
/// KEYS[i] / ARGV[i+1]. Returns, per key, 1 renewed, 0 lost to another token (the key holds
/// someone else's), or -1 lost because the key is gone (it expired, or was deleted).
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
    elseif h.ok == 'none' then
      out[i] = -1
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

/// Takes every key or none: 1 when all were free (and are now ours), 0 otherwise.
pub static MULTI_ACQUIRE: Script = Script::new(
    "multi_acquire",
    r#"for i, key in ipairs(KEYS) do
  if redis.call('exists', key) == 1 then return 0 end
end
for i, key in ipairs(KEYS) do
  redis.call('set', key, ARGV[1], 'PX', ARGV[2])
end
return 1"#,
);

/// Releases every key that still holds our token; returns how many.
pub static MULTI_RELEASE: Script = Script::new(
    "multi_release",
    r#"local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[1] then
    redis.call('del', key)
    n = n + 1
  end
end
return n"#,
);

/// A reader enters unless a writer holds the lock: 1 entered, 0 refused. The hash holds
/// `mode` and one count per holder token; its TTL is the longest lease among readers.
pub static READ_ACQUIRE: Script = Script::new(
    "read_acquire",
    r#"local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false or mode == 'read' then
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hincrby', KEYS[1], ARGV[1], 1)
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('pexpire', KEYS[1], ARGV[2])
  end
  return 1
end
return 0"#,
);

/// A writer enters only when nobody holds the lock: 1 entered, 0 refused.
pub static WRITE_ACQUIRE: Script = Script::new(
    "write_acquire",
    r#"if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hset', KEYS[1], 'mode', 'write', ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0"#,
);

/// A reader or writer leaves: 1 left (the last one out deletes the lock and publishes),
/// 0 it did not hold the lock.
pub static RW_RELEASE: Script = Script::new(
    "rw_release",
    r#"if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) <= 0 then
  redis.call('hdel', KEYS[1], ARGV[1])
end
if redis.call('hlen', KEYS[1]) <= 1 then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[2], 'unlocked')
end
return 1"#,
);

/// The fair lock: FIFO queue (list) plus per-waiter deadlines (sorted set, server time).
/// Waiters whose deadline passed are dropped from the head, so a dead waiter stalls the queue
/// only until its deadline. Returns -1 when acquired, else the holder's remaining TTL (and the
/// caller is queued, its deadline refreshed to now + ARGV[3]).
pub static FAIR_ACQUIRE: Script = Script::new(
    "fair_acquire",
    r#"local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
while true do
  local first = redis.call('lindex', KEYS[2], 0)
  if not first then break end
  local dl = redis.call('zscore', KEYS[3], first)
  if dl and tonumber(dl) > now then break end
  redis.call('lpop', KEYS[2])
  redis.call('zrem', KEYS[3], first)
end
local first = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and ((not first) or first == ARGV[1]) then
  if first == ARGV[1] then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[1])
  end
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return -1
end
if redis.call('zscore', KEYS[3], ARGV[1]) == false then
  redis.call('rpush', KEYS[2], ARGV[1])
end
redis.call('zadd', KEYS[3], now + tonumber(ARGV[3]), ARGV[1])
local ttl = redis.call('pttl', KEYS[1])
if ttl < 0 then ttl = 0 end
return ttl"#,
);
