//! Function libraries, side by side with redis-server 7.0: while a library loads, its code
//! sees the library API alone (a `redis` table with `register_function`, `log`, the log
//! levels and the version; no `math`, no `redis.call`), read-only, with Redis's error for
//! anything else; `redis.register_function` checks its arguments in Redis's order and words;
//! once loaded, the functions see the scripts' globals and never `register_function`.

use latchkey_tests::Diff;

#[test]
fn libraries_load_as_on_redis() {
    let cases: &[&[&str]] = &[
        // The library's metadata line, split as Redis splits it (sdssplitargs).
        &["function", "load", "replace", "#! name=test\nredis.register_function('f1', function() return 1 end)"],
        &["function", "load", "replace", "#!lua name=foo name=bar\nredis.register_function('f1', function() return 1 end)"],
        &["function", "load", "replace", "#!lua name=\"qq\"\nredis.register_function('fq', function() return 1 end)"],
        &["function", "load", "replace", "#!lua NAME=up\nredis.register_function('fu', function() return 1 end)"],
        &["function", "load", "replace", "#!lua name=\"unterminated\nredis.register_function('f1', function() return 1 end)"],
        &["function", "load", "replace", "#!lua name=x\"y\"z\nredis.register_function('f1', function() return 1 end)"],
        &["function", "load", "replace", "#!lua name=no-newline"],
        &["function", "load", "replace", "#!nosuch name=bad-name\nreturn 1"],
        &["function", "load", "replace", "#!nosuch name=ok\nreturn 1"],
        &["function", "load", "replace", "#!lua foo=bar name=x\nreturn 1"],
        &["function", "load", "replace", "#!lua\nreturn 1"],
        &["function", "load", "replace", "#!\nreturn 1"],
        &["function", "load", "replace", "#!   \nreturn 1"],
        &["fcall", "fq", "0"],
        &["fcall", "fu", "0"],
        // Redis lists libraries in its hash table's order, seeded at random: keep one.
        &["function", "delete", "qq"],
        &["function", "delete", "up"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function('f2', 'not a function')\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function('f1')\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function('f1', function() return 1 end, 'x')\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function(1, function() return 1 end)\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function('', function() return 1 end)\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function('a-b', function() return 1 end)\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function{function_name='f1'}\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function{callback=function() end}\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function{function_name='f1', callback=function() end, flags={'bad'}}\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function{function_name='f1', callback=function() end, flags='no-writes'}\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function{function_name='f1', callback=function() end, description=5}\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function{function_name='f1', callback=function() end, extra=1}\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function{function_name=1, callback=function() end}\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function{function_name='f1', callback='x'}\n"],
        &["function", "load", "replace", "#!lua name=lx\nreturn math.random()\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.call('ping')\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.setresp(3)\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.set_repl(0)\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.math.random()\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.redis.call('ping')\n"],
        &["function", "load", "replace", "#!lua name=lx\nlocal x = string.len('a')\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.log(redis.LOG_NOTICE, 'hi') redis.register_function('okf', function() return redis.REDIS_VERSION end)\n"],
        &["function", "load", "replace", "#!lua name=lx\nx = 1\n"],
        &["function", "load", "replace", "#!lua name=lx\nlocal t = {} t.a = 1 redis.register_function('okg', function() return 1 end)\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function('dup', function() end) redis.register_function('dup', function() end)\n"],
        &["function", "load", "replace", "#!lua name=lx\nreturn redis.REDIS_VERSION_NUM\n"],
        &["function", "load", "replace", "#!lua name=lx\nlocal x = nil + 1\n"],
        &["function", "load", "replace", "#!lua name=lx\nerror('boom')\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function{function_name='f1', callback=function() end, flags={'no-writes', 5}}\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function{[1]='x'}\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.register_function{function_name='f1', callback=function() end, flags={'no-writes','no-writes','allow-oom'}}\n"],
        &["function", "load", "replace", "#!lua name=lx\nredis.log(1)\n"],
        &["function", "load", "replace", "#!lua name=lx\nreturn 1 +\n"],
        &["function", "load", "replace", "#!lua name=lx\nreturn _G\n"],
        &["function", "list"],
        &["function", "flush"],
        &["function", "load", "#!lua name=lx\nlocal lib = redis\nlib.register_function('f1', function ()\n    lib.redis = redis\n    lib.math = math\n    return {ok='OK'}\nend)\nlib.register_function('f2', function ()\n    lib.register_function('f1', function () return 1 end)\nend)\nredis.register_function('f3', function() return {redis.REDIS_VERSION, math.floor(1.5), type(redis.call), type(redis.register_function)} end)\nredis.register_function('f4', function() return redis.register_function('x', function() end) end)\nredis.register_function('f5', function() x = 1 end)\n"],
        &["fcall", "f1", "0"],
        &["fcall", "f2", "0"],
        &["fcall", "f3", "0"],
        &["fcall", "f4", "0"],
        &["fcall", "f5", "0"],
        &["function", "flush"],
        &["eval", "return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}", "0"],
        &["eval", "redis.log(1)", "0"],
        &["eval", "redis.log('x', 'y')", "0"],
        &["eval", "return redis.log(redis.LOG_WARNING, 'a', 1)", "0"],
    ];
    let mut d = Diff::new();
    // A library whose top-level code never ends fails after Redis's 500 ms load timeout,
    // and the server goes on.
    d.check(&[
        "function",
        "load",
        "#!lua name=forever\nlocal a = 1\nwhile 1 do a = a + 1 end\n",
    ]);
    d.check(&["ping"]);
    for args in cases {
        d.check(args);
    }
}
