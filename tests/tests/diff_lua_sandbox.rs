//! Differential tests of hostile scripts against a real redis-server 7.0: the sandbox (no
//! bytecode, no new globals, read-only libraries and metatables), the libraries Redis ships
//! (`struct`, `cmsgpack`, `cjson`, `bit`, `coroutine`) with hostile arguments, and deep or
//! cyclic data in replies. Each row is one Redis CVE class or one of its neighbours; every
//! reply must be identical byte for byte, and latchkey must stay up to answer the next.

use latchkey_tests::raw::show;
use latchkey_tests::Diff;

/// Scripts run as `EVAL <script> 0`.
const HOSTILE: &[&str] = &[
    // CVE-2015-4335: bytecode never loads; a binary chunk is parsed as text and fails.
    "return loadstring(string.dump(function() return 1 end))",
    "return {tostring(select(2, loadstring('\\27Lua')))}",
    "return {tostring(select(2, loadstring(string.dump(function() return 1 end))))}",
    "local s = string.dump(function() return 1 end) local done = false return {tostring(select(2, load(function() if done then return nil end done = true return s end)))}",
    "return {tostring(select(2, loadstring('return 1+')))}",
    "return loadstring('return 1')()",
    "return loadstring('return type(redis)')()",
    // A chunk compiled by loadstring sees the script's globals, not the interpreter's.
    "return loadstring('return debug')()",
    "return loadstring('return type(_G.redis.call)')()",
    // No new globals, no way around the guard.
    "x = 1",
    "return _G.nope",
    "rawset(_G, 'x', 1) return x",
    "return {pcall(setmetatable, _G, {})}",
    "return {pcall(rawset, string, 'x', 1)}",
    "return {pcall(rawset, cjson, 'x', 1)}",
    "return {pcall(rawset, cmsgpack, 'x', 1)}",
    "return {pcall(rawset, struct, 'x', 1)}",
    "return {pcall(rawset, coroutine, 'x', 1)}",
    "return {pcall(rawset, redis, 'x', 1)}",
    "return {pcall(setmetatable, string, {})}",
    "return {pcall(rawset, KEYS, 'x', 1)}",
    "return rawget(_G, 'redis') ~= nil",
    "return type(newproxy)",
    "return type(setfenv)",
    "return type(getfenv)",
    "return type(debug)",
    "return type(print)",
    "return type(load)",
    "return type(collectgarbage)",
    "local t = {} for k in pairs(string) do t[#t + 1] = k end table.sort(t) return t",
    "local t = {} for k in pairs(coroutine) do t[#t + 1] = k end table.sort(t) return t",
    // CVE-2025-46818: the metatable strings share is read-only.
    "getmetatable('').__index = {} return 1",
    "getmetatable('').__add = 1 return 1",
    "return tostring(getmetatable('').__index == string)",
    "return {pcall(rawset, getmetatable(''), 'x', 1)}",
    // CVE-2025-46817 and CVE-2021-32626: unpack ranges and the Lua stack.
    "return unpack({}, 1, 1e8)",
    "return unpack({}, -2147483648, 2147483647)",
    "return unpack({}, 0, 2147483647)",
    "return {unpack({1, 2, 3}, 2)}",
    "return {unpack({1, 2, 3}, 2^32 + 1, 2^32 + 2)}",
    "return {pcall(unpack)}",
    // Deep and cyclic replies: Redis's 'reached lua stack limit' at the same depth.
    "local t = {} t[1] = t return t",
    "local t = {} t[1] = {} t[2] = t t[3] = 5 return t",
    "local t = {} t[1] = 'a' t[2] = t return t",
    "return 0/0",
    "return {1/0, -1/0, 2^63, -2^64}",
    // CVE-2022-24834: cjson on cyclic and deep tables.
    "local t = {} t.a = t return cjson.encode(t)",
    "return cjson.encode({1, 2, 3})",
    "return cjson.encode({[true] = 1})",
    "return cjson.encode(function() end)",
    "return {pcall(cjson.encode, {[{}] = 1})}",
    // cjson.encode nests up to 1000 tables (a nested map once ran mlua out of handles).
    "local function d(n) local r = {} local x = r for i = 2, n do x.k = {} x.j = 1 x = x.k end return r end return #cjson.encode(d(1000))",
    "local function d(n) local r = {} local x = r for i = 2, n do x.k = {} x = x.k end return r end return cjson.encode(d(1001))",
    "local function d(n) local r = {} local x = r for i = 2, n do x[1] = {} x = x[1] end return r end return #cjson.encode(d(1000))",
    "local function d(n) local r = {} local x = r for i = 2, n do x[1] = {} x = x[1] end return r end return {pcall(cjson.encode, d(1001))}",
    "return cjson.encode({x = {true, false, 1.5, -3, 'a'}})",
    "return cjson.encode({[-3] = 'a'})",
    "return cjson.encode({[1.5] = 1})",
    // CVE-2018-11218: cmsgpack on cyclic tables, hostile and truncated input.
    "local t = {} t[1] = t return cmsgpack.pack(t)",
    "local t = {} t.x = t return cmsgpack.pack(t)",
    "return cmsgpack.pack(1, -1, 127, 128, 255, 256, 65535, 65536, 2^32, -32, -33, -128, -129, -32768, -32769, -2^31, -2^31 - 1, 0.5, 0.1, 1/0, -1/0, 2^63, -2^63, 2^64)",
    "return cmsgpack.pack(string.rep('x', 31), string.rep('y', 32), string.rep('z', 256), {}, {1, 2}, {a = 1}, {[1] = 1, [3] = 3}, true, false)",
    "return {cmsgpack.unpack(cmsgpack.pack({1, 2, {a = 'b'}}, 'x', 3.5))}",
    "return {pcall(cmsgpack.unpack, '\\145')}",
    "return {pcall(cmsgpack.unpack, '\\193')}",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3))}",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 1)}",
    "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}",
    "return {pcall(cmsgpack.unpack_one, 'abc', -1)}",
    "return {pcall(cmsgpack.unpack_one, 'abc', 10)}",
    "return {pcall(cmsgpack.unpack, string.rep('\\145', 10000) .. '\\1')}",
    "return #{cmsgpack.unpack(string.rep('\\1', 7990))}",
    "return {pcall(cmsgpack.unpack, string.rep('\\1', 8000))}",
    "return {pcall(cmsgpack.unpack, '\\221\\255\\255\\255\\255')}",
    "return {pcall(cmsgpack.unpack, '\\219\\255\\255\\255\\255')}",
    "return cmsgpack.unpack('\\129\\192\\1')",
    // CVE-2018-11219 and CVE-2020-14147: struct with huge counts and short data.
    "return struct.pack('i999999999', 1)",
    "return struct.pack('i99999999999', 1)",
    "return {pcall(struct.pack, 'c999999999999', 'x')}",
    "return struct.unpack('c999999999', 'x')",
    "return {struct.unpack('>i4', struct.pack('>i4', -5))}",
    "return {struct.unpack('<I2 b B h H l L', struct.pack('<I2 b B h H l L', 65535, -1, 255, -300, 300, -5, 5))}",
    "return struct.pack('>!4 b i4 c3 s d f x', 1, 2, 'abc', 'zz', 1.5, 2.5)",
    "return {struct.unpack('>!4 b i4 c3 s d f x', struct.pack('>!4 b i4 c3 s d f x', 1, 2, 'abc', 'zz', 1.5, 2.5))}",
    "return {pcall(struct.pack, '!3', 1)}",
    "return {pcall(struct.pack, 'i33', 1)}",
    "return {pcall(struct.unpack, 'c0', 'abc')}",
    "return {struct.unpack('b c0', '\\3abcdef')}",
    "return {pcall(struct.unpack, 's', 'abc')}",
    "return {struct.size('i4 d b')}",
    "return {struct.pack('!0 b i4', 1, 2)}",
    "return {struct.unpack('i9', string.rep('\\255', 9))}",
    "return {struct.unpack('I16', string.rep('\\255', 16))}",
    "return struct.pack('i16 I16', -1, 2^64)",
    "return struct.pack('I8', 2^64)",
    "return {pcall(struct.unpack, string.rep('b', 9000), string.rep('a', 9000))}",
    // Thousands of arguments to library functions (each once took an mlua handle: past
    // about 8000 the process aborted).
    "local t = {} for i = 1, 3999 do t[i] = {} end return #cmsgpack.pack(unpack(t))",
    "local t = {} for i = 1, 4000 do t[i] = {} end return #cmsgpack.pack(unpack(t))",
    "local t = {} for i = 1, 7990 do t[i] = {} end return {pcall(cmsgpack.pack, unpack(t))}",
    "local t = {} for i = 1, 3000 do t[i] = {a = {1, 2}} end return #cmsgpack.pack(unpack(t))",
    "local t = {} for i = 1, 7990 do t[i] = 'x' .. i end return #struct.pack(string.rep('s', 7990), unpack(t))",
    "local t = {} for i = 1, 7990 do t[i] = tostring(i) end return bit.bor(unpack(t))",
    "local t = {} for i = 1, 7990 do t[i] = 'x' .. i end redis.log(redis.LOG_DEBUG, unpack(t)) return 1",
    "local t = {} for i = 1, 7990 do t[i] = {} end redis.debug(unpack(t)) return 1",
    "local t = {} for i = 1, 7990 do t[i] = {} end return {pcall(cjson.encode, unpack(t))}",
    // Error names and positions as Lua 5.1 gives them for a C function.
    "return cjson.encode(1, 2)",
    "local f = cjson.encode return f(1, 2)",
    "local f = cjson.encode local x = f(1, 2) return x",
    "return {pcall(function() local x = cjson.decode(1, 2) return x end)}",
    "return struct.pack('i99', 1)",
    "local x = struct.pack('i99', 1) return x",
    "return {pcall(struct.pack, 'i99', 1)}",
    "local s = struct return {pcall(function() return s:pack(1) end)}",
    // cjson.decode nests up to 1000 levels.
    "local ok, v = pcall(cjson.decode, string.rep('[', 1000) .. string.rep(']', 1000)) return tostring(ok)",
    "return {pcall(cjson.decode, string.rep('[', 1001) .. string.rep(']', 1001))}",
    "return {pcall(cjson.decode, string.rep('{\"a\":', 1001) .. '1' .. string.rep('}', 1001))}",
    "return {pcall(cjson.decode, '[1,' .. string.rep('[', 1001))}",
    "return cjson.decode(string.rep('[', 1001))",
    "return {pcall(cjson.decode, '[\"[[[[\", ' .. string.rep('[', 999) .. string.rep(']', 1000))}",
    // CVE-2024-31449: bit with odd arguments.
    "return bit.tohex(-1)",
    "return {bit.tohex(255, -4), bit.tohex(255, 2), bit.band(2^53, -1), bit.lshift(1, 40)}",
    // Other libraries and base functions with hostile arguments.
    "return {pcall(string.rep, 'x', -1)}",
    "return {coroutine.resume(coroutine.create(function() return 5 end))}",
    "return next({})",
];

#[test]
fn hostile_scripts_get_redis_replies() {
    let mut d = Diff::new();
    let mut differ = Vec::new();
    for script in HOSTILE {
        let (redis, latchkey) = d.both(&["EVAL", script, "0"]);
        if redis != latchkey {
            differ.push(format!(
                "{script}\n  redis:    {}\n  latchkey: {}",
                show(&redis[..redis.len().min(400)]),
                show(&latchkey[..latchkey.len().min(400)])
            ));
        }
        // Whatever the script did, both servers still answer and lost nothing.
        d.check(&["PING"]);
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// The same scripts under RESP3, where nil, maps and doubles have their own types.
#[test]
fn hostile_scripts_get_redis_replies_resp3() {
    let mut d = Diff::new();
    d.both(&["HELLO", "3"]);
    for script in [
        "local t = {} t[1] = t return t",
        "local t = {} t[1] = false t[2] = t return t",
        "local m = {} m.map = {a = m} return m",
        "redis.setresp(3) local t = {} t[1] = t return t",
    ] {
        d.check(&["EVAL", script, "0"]);
    }
}

/// CVE-2015-4335 through `EVAL` itself: a body that starts like precompiled bytecode is
/// parsed as text, as Redis's Lua (with bytecode loading removed) does.
#[test]
fn bytecode_bodies_fail_to_compile_like_redis() {
    let mut d = Diff::new();
    d.check(&[
        b"EVAL".as_slice(),
        b"\x1bLuaQ\x00\x01\x04\x08\x04\x08\x00",
        b"0",
    ]);
    d.check(&[b"SCRIPT".as_slice(), b"LOAD", b"\x1bLua"]);
    d.check(&["PING"]);
}
