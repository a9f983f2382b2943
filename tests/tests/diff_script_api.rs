//! The script API's edges, side by side with redis-server 7.0: Redis 7.0's own `pcall`
//! (an error reply raised inside comes out as its message string, as `pcall(redis.call, ...)`
//! patterns in lock libraries rely on), `redis.sha1hex`, `redis.error_reply` and
//! `redis.status_reply` with odd arguments, and a `SELECT` inside a script that must not
//! change the caller's database.

use latchkey_tests::Diff;

#[test]
fn the_script_api_matches_redis() {
    let cases: &[&[&str]] = &[
        &["eval", "return redis.sha1hex({})", "0"],
        &["eval", "return redis.sha1hex(nil)", "0"],
        &["eval", "return redis.sha1hex(1.5)", "0"],
        &["eval", "return redis.sha1hex(1, 2)", "0"],
        &["eval", "return {pcall(redis.sha1hex)}", "0"],
        &["eval", "return redis.sha1hex()", "0"],
        &["eval", "return redis.sha1hex('abc')", "0"],
        &["eval", "return {pcall(redis.call, 'nosuch')}", "0"],
        &[
            "eval",
            "local ok, e = pcall(redis.call, 'nosuch') return type(e)",
            "0",
        ],
        &[
            "eval",
            "local ok, e = pcall(redis.call, 'nosuch') return e",
            "0",
        ],
        &[
            "eval",
            "local ok, e = pcall(redis.call, 'incr', 'x', 'y') return {ok, e}",
            "0",
        ],
        &["set", "str", "abc"],
        &[
            "eval",
            "local ok, e = pcall(redis.call, 'incr', 'str') return e",
            "0",
        ],
        &["eval", "return {pcall(error, {err='X'})}", "0"],
        &["eval", "return {pcall(error, {err=5})}", "0"],
        &["eval", "return {pcall(error, {x=5})}", "0"],
        &["eval", "return {pcall(error, 'plain')}", "0"],
        &["eval", "return {pcall()}", "0"],
        &["eval", "return {pcall(1)}", "0"],
        &["eval", "return {pcall(function() return 1, 2, 3 end)}", "0"],
        &["eval", "return {pcall(redis.error_reply, 'x')}", "0"],
        &[
            "eval",
            "return {pcall(function() return redis.error_reply('MY fail') end)}",
            "0",
        ],
        &[
            "eval",
            "local ok, e = pcall(redis.call, 'set') return e",
            "0",
        ],
        &["eval", "return pcall(cjson.decode, '[')", "0"],
        &["eval", "return {pcall(cjson.decode, '[')}", "0"],
        &["eval", "return redis.error_reply('')", "0"],
        &["eval", "return redis.error_reply('-')", "0"],
        &["eval", "return redis.error_reply('-MY fail\\r\\n')", "0"],
        &["eval", "return redis.error_reply('MY fail')", "0"],
        &["eval", "return redis.error_reply(1)", "0"],
        &["eval", "return redis.error_reply()", "0"],
        &["eval", "return redis.status_reply(1)", "0"],
        &["eval", "return redis.status_reply()", "0"],
        &["eval", "return redis.error_reply('x').err", "0"],
        &["eval", "return redis.status_reply('-x').ok", "0"],
        &["eval", "return redis.status_reply('OK')", "0"],
        &["eval", "return redis.error_reply('\\nX  y\\n')", "0"],
        &["select", "10"],
        &["set", "mykey", "orig"],
        &["eval", "return redis.pcall('select','9')", "0"],
        &["get", "mykey"],
        &[
            "eval",
            "redis.call('select','9') return redis.call('set','inner','1')",
            "0",
        ],
        &["get", "inner"],
        &["select", "9"],
        &["get", "inner"],
        &["select", "0"],
    ];
    let mut d = Diff::new();
    for args in cases {
        d.check(args);
    }
}
