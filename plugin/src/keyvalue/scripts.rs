//! The host's own Lua scripts for `wasi:keyvalue`: each write to a bucket is one script, so
//! that the value, its version and the bucket's count change together. They are the host's,
//! not a tenant's: they are sent to the backend directly, never through the allow-list.
//!
//! In every script `KEYS[1]` is the bucket's values hash and `KEYS[2]` its versions hash,
//! whose field `\255` is the bucket's counter and `\254` the counter at the last delete (not
//! valid UTF-8: no key can be either). A refusal for the bucket's size is the integer -1.

use latchkey_client::scripts::Script;
use latchkey_client::Reply;

use crate::backend::Backend;

/// Sets `ARGV[1]` to `ARGV[2]` unless that would make the bucket hold more than `ARGV[3]` keys:
/// 1, or -1.
pub(crate) static SET: Script = Script::new(
    "kv_set",
    r#"if redis.call('hexists', KEYS[1], ARGV[1]) == 0 and redis.call('hlen', KEYS[1]) >= tonumber(ARGV[3]) then return -1 end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
redis.call('hset', KEYS[2], ARGV[1], redis.call('hincrby', KEYS[2], '\255', 1))
return 1"#,
);

/// Adds `ARGV[2]` to the integer at `ARGV[1]` (a missing key counts as 0), unless a new key
/// would make the bucket hold more than `ARGV[3]`: the new value, or an error reply.
pub(crate) static INCREMENT: Script = Script::new(
    "kv_increment",
    r#"if redis.call('hexists', KEYS[1], ARGV[1]) == 0 and redis.call('hlen', KEYS[1]) >= tonumber(ARGV[3]) then
  return {err = 'the bucket holds its limit of ' .. ARGV[3] .. ' keys'}
end
local n = redis.call('hincrby', KEYS[1], ARGV[1], ARGV[2])
redis.call('hset', KEYS[2], ARGV[1], redis.call('hincrby', KEYS[2], '\255', 1))
return n"#,
);

/// Deletes the keys `ARGV[1..]`: how many existed. The counter moves if any did.
pub(crate) static DELETE_MANY: Script = Script::new(
    "kv_delete_many",
    r#"local gone = 0
for i = 1, #ARGV do
  gone = gone + redis.call('hdel', KEYS[1], ARGV[i])
  redis.call('hdel', KEYS[2], ARGV[i])
end
if gone > 0 then
  redis.call('hset', KEYS[2], '\254', redis.call('hincrby', KEYS[2], '\255', 1))
end
return gone"#,
);

/// Sets the pairs `ARGV[2..]` (key, value, key, value...) unless the bucket would then hold
/// more than `ARGV[1]` keys: 1, or -1 (and nothing set).
pub(crate) static SET_MANY: Script = Script::new(
    "kv_set_many",
    r#"local new = 0
for i = 2, #ARGV, 2 do
  if redis.call('hexists', KEYS[1], ARGV[i]) == 0 then new = new + 1 end
end
if new > 0 and redis.call('hlen', KEYS[1]) + new > tonumber(ARGV[1]) then return -1 end
for i = 2, #ARGV, 2 do
  redis.call('hset', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('hset', KEYS[2], ARGV[i], redis.call('hincrby', KEYS[2], '\255', 1))
end
return 1"#,
);

/// Reads `ARGV[1]` for a CAS handle: its value, its version, the bucket's counter.
pub(crate) static CAS_READ: Script = Script::new(
    "kv_cas_read",
    r#"return {redis.call('hget', KEYS[1], ARGV[1]), redis.call('hget', KEYS[2], ARGV[1]), redis.call('hget', KEYS[2], '\255')}"#,
);

/// Swaps `ARGV[1]` to `ARGV[2]` if its version is still `ARGV[3]` (empty: it was missing, and
/// nothing was deleted since the counter was `ARGV[4]`), within `ARGV[5]` keys: 1 swapped,
/// 0 changed since, -1 the bucket is full.
pub(crate) static CAS_SWAP: Script = Script::new(
    "kv_cas_swap",
    r#"local ver = redis.call('hget', KEYS[2], ARGV[1])
if ARGV[3] == '' then
  if ver then return 0 end
  local deleted = tonumber(redis.call('hget', KEYS[2], '\254') or '0')
  if deleted > tonumber(ARGV[4]) then return 0 end
  if redis.call('hlen', KEYS[1]) >= tonumber(ARGV[5]) then return -1 end
elseif ver ~= ARGV[3] then
  return 0
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
redis.call('hset', KEYS[2], ARGV[1], redis.call('hincrby', KEYS[2], '\255', 1))
return 1"#,
);

/// Takes the lease `KEYS[1]` for token `ARGV[1]` and `ARGV[2]` ms if it is free, and draws its
/// fencing number from field `ARGV[3]` of the versions hash `KEYS[2]`, unless the bucket (values
/// `KEYS[3]`) already has `ARGV[4]` fencing counters: the number, -1 held, -2 too many.
pub(crate) static LEASE_ACQUIRE: Script = Script::new(
    "kv_lease_acquire",
    r#"if redis.call('exists', KEYS[1]) == 1 then return -1 end
if redis.call('hexists', KEYS[2], ARGV[3]) == 0 and redis.call('hlen', KEYS[2]) - redis.call('hlen', KEYS[3]) >= tonumber(ARGV[4]) + 2 then return -2 end
redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
return redis.call('hincrby', KEYS[2], ARGV[3], 1)"#,
);

/// Renews the lease `KEYS[1]` to `ARGV[2]` ms if it holds token `ARGV[1]`: 1, else 0.
pub(crate) static LEASE_RENEW: Script = Script::new(
    "kv_lease_renew",
    r#"if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0"#,
);

/// Releases the lease `KEYS[1]` if it holds token `ARGV[1]`: 1, else 0.
pub(crate) static LEASE_RELEASE: Script = Script::new(
    "kv_lease_release",
    r#"if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  return 1
end
return 0"#,
);

/// Runs `script` with `EVALSHA` on `keys` and `argv`, falling back to `EVAL` when the server
/// does not know it yet.
pub(crate) async fn eval(
    backend: &dyn Backend,
    script: &Script,
    keys: &[&[u8]],
    argv: Vec<Vec<u8>>,
) -> Result<Reply, String> {
    let build = |verb: &str, first: &[u8], argv: Vec<Vec<u8>>| {
        let mut a = Vec::with_capacity(3 + keys.len() + argv.len());
        a.extend([
            verb.as_bytes().to_vec(),
            first.to_vec(),
            keys.len().to_string().into_bytes(),
        ]);
        a.extend(keys.iter().map(|k| k.to_vec()));
        a.extend(argv);
        a
    };
    let reply = backend
        .command(build("EVALSHA", script.sha().as_bytes(), argv.clone()))
        .await?;
    match &reply {
        Reply::Error(e) if e.starts_with("NOSCRIPT") => {
            backend
                .command(build("EVAL", script.body.as_bytes(), argv))
                .await
        }
        _ => Ok(reply),
    }
}
