//! The real lock scripts of the libraries people use, run differentially against real Redis:
//! each as `EVAL` and as `EVALSHA` after `SCRIPT LOAD`. The scripts are written here from the
//! libraries' published behaviour; they are test data.

use latchkey_tests::{Diff, RawConn};

const REDISSON_LOCK: &str = r#"
if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
"#;

const REDISSON_UNLOCK: &str = r#"
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 0;
else
    redis.call('del', KEYS[1]);
    redis.call('publish', KEYS[2], ARGV[1]);
    return 1;
end;
return nil;
"#;

const REDISSON_RENEW: &str = r#"
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
"#;

const REDISSON_FAIR_LOCK: &str = r#"
while true do
    local firstThreadId2 = redis.call('lindex', KEYS[2], 0);
    if firstThreadId2 == false then break; end;
    local timeout = tonumber(redis.call('zscore', KEYS[3], firstThreadId2));
    if timeout <= tonumber(ARGV[4]) then
        redis.call('zrem', KEYS[3], firstThreadId2);
        redis.call('lpop', KEYS[2]);
    else break; end;
end;
if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0)
        or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
    redis.call('lpop', KEYS[2]);
    redis.call('zrem', KEYS[3], ARGV[2]);
    local keys = redis.call('zrange', KEYS[3], 0, -1);
    for i = 1, #keys, 1 do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);
    end;
    redis.call('hset', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
local timeout = redis.call('zscore', KEYS[3], ARGV[2]);
if timeout ~= false then
    return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4]);
end;
local lastThreadId = redis.call('lindex', KEYS[2], -1);
local ttl;
if lastThreadId ~= false and lastThreadId ~= ARGV[2] then
    ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);
else
    ttl = redis.call('pttl', KEYS[1]);
end;
local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);
if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2]);
end;
return ttl;
"#;

const REDISSON_FENCED_LOCK: &str = r#"
if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return {-1, redis.call('incr', KEYS[2])};
end;
return {redis.call('pttl', KEYS[1]), -1};
"#;

const REDISSON_READ_LOCK: &str = r#"
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
  redis.call('hset', KEYS[1], 'mode', 'read');
  redis.call('hset', KEYS[1], ARGV[2], 1);
  redis.call('set', KEYS[2] .. ':1', 1);
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1);
  local key = KEYS[2] .. ':' .. ind;
  redis.call('set', key, 1);
  redis.call('pexpire', key, ARGV[1]);
  local remainTime = redis.call('pttl', KEYS[1]);
  redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1]));
  return nil;
end;
return redis.call('pttl', KEYS[1]);
"#;

const REDISSON_WRITE_LOCK: &str = r#"
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
  redis.call('hset', KEYS[1], 'mode', 'write');
  redis.call('hset', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
if (mode == 'write') then
  if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    local currentExpire = redis.call('pttl', KEYS[1]);
    redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]);
    return nil;
  end;
end;
return redis.call('pttl', KEYS[1]);
"#;

const REDIS_PY_RELEASE: &str = r#"
local token = redis.call('get', KEYS[1])
if not token or token ~= ARGV[1] then
    return 0
end
redis.call('del', KEYS[1])
return 1
"#;

const REDIS_PY_EXTEND: &str = r#"
local token = redis.call('get', KEYS[1])
if not token or token ~= ARGV[1] then
    return 0
end
local expiration = redis.call('pttl', KEYS[1])
if not expiration then
    expiration = 0
end
if expiration < 0 then
    return 0
end
local newttl = ARGV[2]
if ARGV[3] == "0" then
    newttl = ARGV[2] + expiration
end
redis.call('pexpire', KEYS[1], newttl)
return 1
"#;

const REDIS_PY_REACQUIRE: &str = r#"
local token = redis.call('get', KEYS[1])
if not token or token ~= ARGV[1] then
    return 0
end
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
"#;

const REDLOCK_ACQUIRE: &str = r#"
for i, key in ipairs(KEYS) do
  if redis.call("exists", key) == 1 then
    return 0
  end
end
for i, key in ipairs(KEYS) do
  redis.call("set", key, ARGV[1], "PX", ARGV[2])
end
return #KEYS
"#;

const REDLOCK_EXTEND: &str = r#"
for i, key in ipairs(KEYS) do
  if redis.call("get", key) ~= ARGV[1] then
    return 0
  end
end
for i, key in ipairs(KEYS) do
  redis.call("set", key, ARGV[1], "PX", ARGV[2])
end
return #KEYS
"#;

const REDLOCK_RELEASE: &str = r#"
local count = 0
for i, key in ipairs(KEYS) do
  if redis.call("get", key) == ARGV[1] then
    redis.call("del", key)
    count = count + 1
  end
end
return count
"#;

const REDSYNC_DELETE: &str = r#"
local val = redis.call("GET", KEYS[1])
if val == ARGV[1] then
    return redis.call("DEL", KEYS[1])
elseif val == false then
    return -1
else
    return 0
end
"#;

const REDSYNC_TOUCH: &str = r#"
if redis.call("GET", KEYS[1]) == ARGV[1] then
    return redis.call("PEXPIRE", KEYS[1], ARGV[2])
else
    return 0
end
"#;

const PYTHON_REDIS_LOCK_UNLOCK: &str = r#"
if redis.call("get", KEYS[1]) ~= ARGV[1] then
    return 1
else
    redis.call("del", KEYS[2])
    redis.call("lpush", KEYS[2], 1)
    redis.call("pexpire", KEYS[2], ARGV[2])
    redis.call("del", KEYS[1])
    return 0
end
"#;

/// Runs `script` with `args` (numkeys first) on both servers, as EVAL or as EVALSHA; the
/// replies must be identical.
fn run(d: &mut Diff, by_sha: bool, script: &str, args: &[&str]) {
    run_ttl(d, by_sha, script, args, None);
}

/// [`run`] for a script whose reply carries a remaining TTL on RESP line `ttl_line` (0: the
/// reply is the TTL; 1: the first element of an array): real time moves between the two
/// servers, so that one field may differ by up to 50 ms; every other byte must be the same.
fn run_ttl(d: &mut Diff, by_sha: bool, script: &str, args: &[&str], ttl_line: Option<usize>) {
    let mut cmd: Vec<String> = Vec::new();
    if by_sha {
        cmd.push("EVALSHA".into());
        let reply = d.check(&["SCRIPT", "LOAD", script]);
        let sha = String::from_utf8_lossy(&reply)
            .lines()
            .nth(1)
            .unwrap()
            .to_string();
        cmd.push(sha);
    } else {
        cmd.push("EVAL".into());
        cmd.push(script.into());
    }
    cmd.extend(args.iter().map(|s| s.to_string()));
    match ttl_line {
        Some(line) => d.check_ttl(&cmd, line, 50),
        None => d.check(&cmd),
    };
}

fn scenario(by_sha: bool) {
    let mut d = Diff::new();
    let mut rs = RawConn::connect(d.redis_proc.addr()).unwrap();
    let mut ls = RawConn::connect(d.latchkey_server.addr()).unwrap();
    rs.cmd(&["SUBSCRIBE", "redisson_lock__channel:{lock}"]);
    ls.cmd(&["SUBSCRIBE", "redisson_lock__channel:{lock}"]);

    // Redisson reentrant lock: acquire twice, contend, renew, unlock twice (publishes).
    let k = "{lock}";
    let ch = "redisson_lock__channel:{lock}";
    run(&mut d, by_sha, REDISSON_LOCK, &["1", k, "30000", "owner-a"]);
    run(&mut d, by_sha, REDISSON_LOCK, &["1", k, "30000", "owner-a"]);
    // Refused: the reply is the holder's remaining TTL.
    run_ttl(
        &mut d,
        by_sha,
        REDISSON_LOCK,
        &["1", k, "30000", "owner-b"],
        Some(0),
    );
    d.check(&["HGETALL", k]);
    run(
        &mut d,
        by_sha,
        REDISSON_RENEW,
        &["1", k, "30000", "owner-a"],
    );
    run(
        &mut d,
        by_sha,
        REDISSON_RENEW,
        &["1", k, "30000", "owner-b"],
    );
    run(
        &mut d,
        by_sha,
        REDISSON_UNLOCK,
        &["2", k, ch, "0", "30000", "owner-b"],
    );
    run(
        &mut d,
        by_sha,
        REDISSON_UNLOCK,
        &["2", k, ch, "0", "30000", "owner-a"],
    );
    run(
        &mut d,
        by_sha,
        REDISSON_UNLOCK,
        &["2", k, ch, "0", "30000", "owner-a"],
    );
    d.check(&["EXISTS", k]);
    assert_eq!(ls.read_reply(), rs.read_reply(), "unlock message");

    // Redisson fair lock: a holder, two queued waiters in order, then the first takes over.
    // (Queue scores derive from the holder's PTTL, which real time moves between the two
    // servers, so the order of the queue is compared, not its scores.)
    let fair = [
        "3",
        "{fair}",
        "redisson_lock_queue:{fair}",
        "redisson_lock_timeout:{fair}",
    ];
    let now = "1700000000000";
    for owner in ["a", "b", "c"] {
        let mut a: Vec<&str> = fair.to_vec();
        a.extend(["30000", owner, "5000", now]);
        // Queued: the reply is the TTL to wait, from the holder's PTTL.
        run_ttl(&mut d, by_sha, REDISSON_FAIR_LOCK, &a, Some(0));
    }
    d.check(&["LRANGE", "redisson_lock_queue:{fair}", "0", "-1"]);
    d.check(&["ZRANGE", "redisson_lock_timeout:{fair}", "0", "-1"]);
    d.check(&["DEL", "{fair}"]);
    let mut a: Vec<&str> = fair.to_vec();
    a.extend(["30000", "b", "5000", now]);
    run(&mut d, by_sha, REDISSON_FAIR_LOCK, &a);
    d.check(&["HGETALL", "{fair}"]);
    d.check(&["ZRANGE", "redisson_lock_timeout:{fair}", "0", "-1"]);

    // Redisson fenced lock: tokens increase.
    for owner in ["a", "a", "b"] {
        // {-1, token} when taken, {holder's PTTL, -1} when refused.
        run_ttl(
            &mut d,
            by_sha,
            REDISSON_FENCED_LOCK,
            &["2", "{fenced}", "{fenced}:token", "30000", owner],
            Some(1),
        );
    }

    // Redisson read-write lock: two readers, then a writer is refused.
    let rw = ["2", "{rw}", "{rw}:rwlock_timeout"];
    for owner in ["r1", "r2"] {
        let mut a: Vec<&str> = rw.to_vec();
        a.extend(["30000", owner, "w"]);
        run(&mut d, by_sha, REDISSON_READ_LOCK, &a);
    }
    // Refused: the reply is the readers' remaining TTL.
    run_ttl(
        &mut d,
        by_sha,
        REDISSON_WRITE_LOCK,
        &["1", "{rw}", "30000", "w1"],
        Some(0),
    );
    d.check(&["HGETALL", "{rw}"]);
    run(
        &mut d,
        by_sha,
        REDISSON_WRITE_LOCK,
        &["1", "{rw2}", "30000", "w1"],
    );
    run(
        &mut d,
        by_sha,
        REDISSON_WRITE_LOCK,
        &["1", "{rw2}", "30000", "w1"],
    );
    d.check(&["HGETALL", "{rw2}"]);

    // redis-py Lock.
    d.check(&["SET", "pylock", "tok", "NX", "PX", "10000"]);
    run(
        &mut d,
        by_sha,
        REDIS_PY_EXTEND,
        &["1", "pylock", "tok", "5000", "0"],
    );
    run(
        &mut d,
        by_sha,
        REDIS_PY_EXTEND,
        &["1", "pylock", "bad", "5000", "0"],
    );
    run(
        &mut d,
        by_sha,
        REDIS_PY_EXTEND,
        &["1", "pylock", "tok", "5000", "1"],
    );
    d.check_ttl(&["PTTL", "pylock"], 0, 50);
    run(
        &mut d,
        by_sha,
        REDIS_PY_REACQUIRE,
        &["1", "pylock", "tok", "20000"],
    );
    run(
        &mut d,
        by_sha,
        REDIS_PY_REACQUIRE,
        &["1", "pylock", "bad", "20000"],
    );
    run(&mut d, by_sha, REDIS_PY_RELEASE, &["1", "pylock", "bad"]);
    run(&mut d, by_sha, REDIS_PY_RELEASE, &["1", "pylock", "tok"]);
    run(&mut d, by_sha, REDIS_PY_RELEASE, &["1", "pylock", "tok"]);
    d.check(&["SET", "nottl", "tok"]);
    run(
        &mut d,
        by_sha,
        REDIS_PY_EXTEND,
        &["1", "nottl", "tok", "5000", "0"],
    );

    // node-redlock (several keys per lock).
    run(
        &mut d,
        by_sha,
        REDLOCK_ACQUIRE,
        &["2", "r:{a}", "r:{b}", "v1", "10000"],
    );
    run(
        &mut d,
        by_sha,
        REDLOCK_ACQUIRE,
        &["2", "r:{a}", "r:{c}", "v2", "10000"],
    );
    run(
        &mut d,
        by_sha,
        REDLOCK_EXTEND,
        &["2", "r:{a}", "r:{b}", "v1", "20000"],
    );
    run(
        &mut d,
        by_sha,
        REDLOCK_EXTEND,
        &["2", "r:{a}", "r:{b}", "v2", "20000"],
    );
    run(
        &mut d,
        by_sha,
        REDLOCK_RELEASE,
        &["2", "r:{a}", "r:{b}", "v2"],
    );
    run(
        &mut d,
        by_sha,
        REDLOCK_RELEASE,
        &["2", "r:{a}", "r:{b}", "v1"],
    );

    // redsync.
    d.check(&["SET", "gomutex", "v", "PX", "8000"]);
    run(
        &mut d,
        by_sha,
        REDSYNC_TOUCH,
        &["1", "gomutex", "v", "9000"],
    );
    run(
        &mut d,
        by_sha,
        REDSYNC_TOUCH,
        &["1", "gomutex", "x", "9000"],
    );
    run(&mut d, by_sha, REDSYNC_DELETE, &["1", "gomutex", "x"]);
    run(&mut d, by_sha, REDSYNC_DELETE, &["1", "gomutex", "v"]);
    run(&mut d, by_sha, REDSYNC_DELETE, &["1", "gomutex", "v"]);

    // python-redis-lock: unlock pushes a signal onto a list that waiters BLPOP.
    d.check(&["SET", "lock:x", "id1"]);
    run(
        &mut d,
        by_sha,
        PYTHON_REDIS_LOCK_UNLOCK,
        &["2", "lock:x", "lock-signal:x", "other", "1000"],
    );
    run(
        &mut d,
        by_sha,
        PYTHON_REDIS_LOCK_UNLOCK,
        &["2", "lock:x", "lock-signal:x", "id1", "1000"],
    );
    d.check(&["LRANGE", "lock-signal:x", "0", "-1"]);
    d.check(&["BLPOP", "lock-signal:x", "1"]);
    d.check(&["EXISTS", "lock:x"]);
}

#[test]
fn lock_library_scripts_as_eval() {
    scenario(false);
}

#[test]
fn lock_library_scripts_as_evalsha() {
    scenario(true);
}
