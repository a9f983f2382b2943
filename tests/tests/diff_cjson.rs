//! Differential tests of `cjson`, the JSON library scripts see, against a real redis-server
//! 7.0: byte-exact encodings (`%.14g` numbers, `\/`, bytes that are not UTF-8, key order,
//! sparse arrays), every decode error's wording and position, what `strtod` accepts, the
//! nesting limits (including where the Lua stack runs out when a script raises them), and
//! the configuration functions and `cjson.new()`.

use latchkey_tests::raw::show;
use latchkey_tests::Diff;

/// Scripts run as `EVAL <script> 0`. None changes the global `cjson`'s settings (the ones
/// that configure do it on a `cjson.new()` instance), so their order does not matter.
const CASES: &[&str] = &[
    r#"return cjson.encode({1,2,nil,4})"#,
    r#"return cjson.encode({[1]=1,[20]=2})"#,
    r#"return cjson.encode({a="x/y", b=0.1, c=1e300, d=2^53, e=-0.0})"#,
    r#"return cjson.decode("[1,2")"#,
    r#"return cjson.decode("{\"a\":1,}")"#,
    r#"return cjson.encode(cjson.decode("0x10"))"#,
    r#"return cjson.encode(1/0)"#,
    r#"return cjson.encode(string.char(0,1,31,127,128,255,34,92,47))"#,
    r#"return cjson.encode({[1.5]=1, [2]=2})"#,
    r#"return cjson.encode({[-1]="a"})"#,
    r#"return cjson.encode({})"#,
    r#"return cjson.encode({{},{{}}})"#,
    r#"return cjson.encode({x={1,2,{y=3}}, z="w"})"#,
    r#"return cjson.encode(3.14159265358979)"#,
    r#"return cjson.encode(1e15)"#,
    r#"return cjson.encode(123456789012345678)"#,
    r#"return cjson.encode(-1e-7)"#,
    r#"return cjson.encode(cjson.null)"#,
    r#"return cjson.decode("[1e5, -0, 1.5, \"\\u00e9\\ud83d\\ude00\"]")[4]"#,
    r#"return cjson.encode(cjson.decode("[1e5, -0, 1.5, 0.1]"))"#,
    r#"return cjson.decode("\"\\ud800\"")"#,
    r#"return cjson.decode("\"\\udc00\"")"#,
    r#"return cjson.decode("\"abc")"#,
    r#"return cjson.decode("\"a\\qb\"")"#,
    r#"return cjson.decode("[1,2]x")"#,
    r#"return cjson.decode("[1,2] ")"#,
    r#"return cjson.decode("tru")"#,
    r#"return cjson.decode("trueX")"#,
    r#"return cjson.decode("nul")"#,
    r#"return cjson.decode("{1:2}")"#,
    r#"return cjson.decode("{\"a\" 2}")"#,
    r#"return cjson.decode("[1 2]")"#,
    r#"return cjson.decode("")"#,
    r#"return cjson.decode("   ")"#,
    r#"return cjson.decode("-")"#,
    r#"return cjson.decode("+5")"#,
    r#"return cjson.encode(cjson.decode("[+5, -inf, 0x1p3, 1.]"))"#,
    r#"return tostring(cjson.decode("nan"))"#,
    r#"return tostring(cjson.decode("-Infinity"))"#,
    r#"return cjson.decode("'a'")"#,
    r#"return cjson.decode(".5")"#,
    r#"return cjson.decode("[1,]")"#,
    r#"return cjson.decode("[,1]")"#,
    r#"return cjson.decode("{}x")"#,
    r#"return cjson.decode("[\"a\\u12\"]")"#,
    r#"return cjson.decode("1e")"#,
    r#"return cjson.decode(12)"#,
    r#"return cjson.decode(1.5)"#,
    r#"return cjson.decode({})"#,
    r#"return cjson.decode()"#,
    r#"return cjson.encode()"#,
    r#"return cjson.encode_max_depth()"#,
    r#"return cjson.encode_max_depth(0)"#,
    r#"return cjson.encode_max_depth("x")"#,
    r#"return cjson.encode_max_depth(1, 2)"#,
    r#"return {cjson.encode_sparse_array()}"#,
    r#"return {cjson.encode_sparse_array(1)}"#,
    r#"return cjson.encode_number_precision(15)"#,
    r#"return cjson.encode_invalid_numbers("bad")"#,
    r#"return cjson.encode_keep_buffer()"#,
    r#"return cjson.decode_invalid_numbers()"#,
    r#"return {cjson.decode_max_depth()}"#,
    r#"return cjson.new().encode({1})"#,
    r#"return cjson.new().encode_number_precision(3)"#,
    r#"local c = cjson.new() c.encode_number_precision(3) return c.encode(3.14159)"#,
    r#"local c = cjson.new() c.encode_invalid_numbers(true) return c.encode({1/0, -1/0, 0/0})"#,
    r#"local c = cjson.new() c.encode_invalid_numbers("null") return c.encode({1/0, 0/0})"#,
    r#"local c = cjson.new() c.decode_invalid_numbers(false) return c.decode("0x10")"#,
    r#"local c = cjson.new() c.decode_invalid_numbers(false) return c.decode("inf")"#,
    r#"local c = cjson.new() c.encode_sparse_array(true) return c.encode({[1]=1,[20]=2})"#,
    r#"local c = cjson.new() c.encode_max_depth(2) return c.encode({{{1}}})"#,
    r#"local c = cjson.new() c.decode_max_depth(2) return c.decode("[[[1]]]")"#,
    r#"local c = cjson.new() c.encode_sparse_array(false, 0) return c.encode({[1]=1,[200]=2})"#,
    r#"return cjson.encode({[true]=1})"#,
    r#"return cjson.encode({a=function() end})"#,
    r#"return cjson.encode({[1/0]=1})"#,
    r#"return cjson.encode(string.rep("\226\130\172", 2))"#,
    r#"return cjson.encode({a=1,b=2,c=3,d=4,e=5,f=6,g=7,h=8,i=9,j=10,k=11})"#,
    r#"return cjson.encode({["1"]=1, [1]=2})"#,
    r#"return cjson.encode({1, 2, a=3})"#,
    r#"return type(cjson.decode("{\"a\":null}").a)"#,
    r#"return cjson.decode("{\"a\":1,\"a\":2}").a"#,
    r#"return cjson.decode("[1]\0junk")[1]"#,
    r#"return cjson.decode("\0[1]")"#,
    r#"return cjson.decode("\"\\/\\b\\f\\n\\r\\t\"")"#,
    r#"return cjson.encode(cjson.decode("\"\\u0000\\u001f\"" ))"#,
    r#"return {cjson._NAME, cjson._VERSION}"#,
    r#"return #cjson.encode(string.rep("a", 1000))"#,
    r#"return cjson.encode(2^31)"#,
    r#"return cjson.encode({[2^31]=1})"#,
    r#"return cjson.encode({[0]=1})"#,
    r#"return cjson.encode(0.1+0.2)"#,
    r#"return cjson.encode(100)"#,
    r#"return cjson.encode(-123456789012345)"#,
    r#"return cjson.encode(1e14)"#,
    r#"return cjson.encode(12345678901234.5)"#,
    r#"local function d(n) local r = {} local x = r for i = 2, n do x.k = {} x = x.k end return r end return #cjson.encode(d(1000))"#,
    r#"local function d(n) local r = {} local x = r for i = 2, n do x.k = {} x = x.k end return r end return {pcall(cjson.encode, d(1001))}"#,
    r#"local function d(n) local r = {} local x = r for i = 2, n do x[1] = {} x = x[1] end return r end return {pcall(cjson.encode, d(1001))}"#,
    r#"local cjson = cjson.new() cjson.encode_max_depth(5000) local function d(n) local r = {} local x = r for i = 2, n do x.k = {} x = x.k end return r end local ok, e = pcall(cjson.encode, d(4500)) cjson.encode_max_depth(1000) return {tostring(ok), e}"#,
    r#"local cjson = cjson.new() cjson.encode_max_depth(9000) local function d(n) local r = {} local x = r for i = 2, n do x[1] = {} x = x[1] end return r end local ok, e = pcall(cjson.encode, d(8500)) cjson.encode_max_depth(1000) return {tostring(ok), e}"#,
    r#"local cjson = cjson.new() cjson.decode_max_depth(9000) local ok, e = pcall(cjson.decode, string.rep('[', 8500)) cjson.decode_max_depth(1000) return {tostring(ok), e}"#,
    r#"local cjson = cjson.new() cjson.decode_max_depth(9000) local ok, e = pcall(cjson.decode, string.rep('{"a":', 3000)) cjson.decode_max_depth(1000) return {tostring(ok), e}"#,
    r#"return {pcall(cjson.decode, string.rep('[', 1001) .. string.rep(']', 1001))}"#,
    r#"return {pcall(cjson.decode, '[1,' .. string.rep('[', 1001))}"#,
    r#"local t = {} local x = {1,2} for i=1,10 do x = {x, x} end return #cjson.encode(x)"#,
    r#"local t = {} t.a = t return {pcall(cjson.encode, t)}"#,
    r#"return cjson.encode({[1]=1,[2]=2,[3]=3,[11]=4})"#,
    r#"return cjson.encode({[1]=1,[2]=2,[3]=3,[12]=4,[7]=1})"#,
    r#"return cjson.encode({[3]=1})"#,
    r#"return cjson.encode({[2^40]=1})"#,
];

#[test]
fn cjson_matches_redis_byte_for_byte() {
    let mut d = Diff::new();
    let mut differ = Vec::new();
    for script in CASES {
        let (redis, latchkey) = d.both(&["EVAL", script, "0"]);
        if redis != latchkey {
            differ.push(format!(
                "{script}\n  redis:    {}\n  latchkey: {}",
                show(&redis[..redis.len().min(300)]),
                show(&latchkey[..latchkey.len().min(300)])
            ));
        }
    }
    d.check(&["PING"]);
    assert!(
        differ.is_empty(),
        "{} of {} differ:\n{}",
        differ.len(),
        CASES.len(),
        differ.join("\n")
    );
}

/// The global `cjson`'s settings last from one script to the next, and `SCRIPT FLUSH` (which
/// gives Redis a fresh interpreter) puts them back to their defaults.
#[test]
fn cjson_settings_last_until_script_flush() {
    let mut d = Diff::new();
    for script in [
        "return cjson.encode_max_depth()",
        "return cjson.encode_max_depth(3)",
        "return cjson.encode_max_depth()",
        "return {pcall(cjson.encode, {{{{1}}}})}",
        "return {cjson.encode_sparse_array(true, 3, 4)}",
        "return cjson.encode({[1] = 1, [20] = 2})",
        "return cjson.encode_invalid_numbers('null')",
        "return cjson.encode({1/0, 0/0})",
    ] {
        d.check(&["EVAL", script, "0"]);
    }
    d.check(&["SCRIPT", "FLUSH"]);
    for script in [
        "return cjson.encode_max_depth()",
        "return {cjson.encode_sparse_array()}",
        "return {pcall(cjson.encode, {[1] = 1, [20] = 2})}",
        "return cjson.encode_invalid_numbers()",
    ] {
        d.check(&["EVAL", script, "0"]);
    }
}
