//! Server commands: `INFO`, `CONFIG`, `DBSIZE`, `FLUSHDB`, `FLUSHALL`, `TIME`,
//! `DEBUG`, `SHUTDOWN`, `LASTSAVE`.
//!
//! Client libraries call several of these when they connect (ioredis's ready check is `INFO`,
//! redis-benchmark reads `CONFIG GET`), so their replies follow Redis's shapes closely.

use crate::command::CONTAINER;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;

use super::util::{is, lower, unknown_subcommand};
use super::{
    arity_error, spec, CommandSpec, Ctx, ADMIN, ALLOW_BUSY, EXCLUSIVE, FAST, LOADING, NOSCRIPT,
    NO_MULTI, READONLY, STALE, WRITE,
};
use crate::command::WALKS_KEYSPACE;
use crate::config::{ConfigError, Runtime, ShutdownFlags};
use crate::frame::{Frame, Protocol};

/// The server commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("info", -1, LOADING | STALE, 0, 0, 0, info),
    spec(
        "config",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE | CONTAINER,
        0,
        0,
        0,
        config,
    )
    .with_flags_of(config_flags),
    spec("dbsize", 1, READONLY | FAST, 0, 0, 0, dbsize),
    spec(
        "flushdb",
        -1,
        WRITE | EXCLUSIVE | WALKS_KEYSPACE,
        0,
        0,
        0,
        flushdb,
    ),
    spec(
        "flushall",
        -1,
        WRITE | EXCLUSIVE | WALKS_KEYSPACE,
        0,
        0,
        0,
        flushall,
    ),
    spec("time", 1, LOADING | STALE | FAST, 0, 0, 0, time),
    spec(
        "debug",
        -2,
        ADMIN | NOSCRIPT | LOADING | STALE,
        0,
        0,
        0,
        debug,
    )
    .with_flags_of(debug_flags),
    spec(
        "shutdown",
        -1,
        ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | ALLOW_BUSY,
        0,
        0,
        0,
        shutdown,
    ),
];

// ---------------------------------------------------------------------------------------------
// CONFIG

/// The flags `CONFIG` runs with: a `CONFIG SET` of `appendonly` needs the keyspace to itself
/// (turning the AOF on takes a snapshot of it, see [`super::appendonly`]); the rest share it.
fn config_flags(_shared: &crate::state::Shared, args: &[Bytes], command: u32) -> Option<u32> {
    let set = args.get(1).is_some_and(|a| is(a, "set"));
    let names = args.get(2..).unwrap_or_default().iter().step_by(2);
    (set && names.clone().any(|n| is(n, "appendonly"))).then_some(command | EXCLUSIVE)
}

fn config(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    match sub.as_str() {
        "get" => {
            if args.len() < 3 {
                return arity_error("config|get");
            }
            let mut pairs = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for pattern in &args[2..] {
                for (k, v) in ctx.shared.config.matching(pattern) {
                    if seen.insert(k.clone()) {
                        pairs.push((Frame::bulk(k), Frame::bulk(v)));
                    }
                }
            }
            Frame::Map(pairs)
        }
        "set" => {
            if args.len() < 4 || args.len() % 2 == 1 {
                return arity_error("config|set");
            }
            // Validate everything first so that a bad pair changes nothing.
            for pair in args[2..].chunks(2) {
                let name = String::from_utf8_lossy(&pair[0]).into_owned();
                let Some(current) = ctx.shared.config.get(&name) else {
                    return Frame::error(format!(
                        "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                    ));
                };
                let refused = match crate::config::runtime_rule(&name.to_ascii_lowercase()) {
                    Runtime::Applied => None,
                    Runtime::Immutable => Some("can't set immutable config"),
                    Runtime::Protected => Some("can't set protected config"),
                    Runtime::Fixed(why) => (*pair[1] != *current.as_bytes()).then_some(why),
                };
                if let Some(why) = refused {
                    return Frame::error(format!(
                        "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
                    ));
                }
            }
            // What `appendonly` was, and every value before this command (put back if the AOF
            // cannot be turned on, as Redis puts back the whole `CONFIG SET`).
            let aof_was = ctx.shared.config.get("appendonly");
            let before: Vec<(String, String)> = args[2..]
                .chunks(2)
                .filter_map(|pair| {
                    let name = String::from_utf8_lossy(&pair[0]).into_owned();
                    ctx.shared.config.get(&name).map(|v| (name, v))
                })
                .collect();
            for pair in args[2..].chunks(2) {
                let name = String::from_utf8_lossy(&pair[0]).into_owned();
                let value = String::from_utf8_lossy(&pair[1]).into_owned();
                match ctx.shared.set_config(&name, &value) {
                    Ok(()) => {}
                    Err(ConfigError::Unknown) => {
                        return Frame::error(format!(
                            "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                        ))
                    }
                    Err(ConfigError::Invalid(why)) => {
                        return Frame::error(format!(
                            "ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"
                        ))
                    }
                }
            }
            let aof_is = ctx.shared.config.get("appendonly");
            if aof_is != aof_was {
                if aof_is.as_deref() == Some("yes") {
                    if let Err(why) = super::appendonly::turn_on(ctx.shared, ctx.in_exec) {
                        for (name, value) in before.iter().rev() {
                            let _ = ctx.shared.set_config(name, value);
                        }
                        return Frame::error(format!(
                            "ERR CONFIG SET failed (possibly related to argument 'appendonly') - {why}"
                        ));
                    }
                } else {
                    super::appendonly::turn_off(ctx.shared);
                }
            }
            // A lower bound on the tracking table takes effect now, as Redis's next command
            // would enforce it.
            ctx.shared.tracking.fit(ctx.client.handle.id);
            Frame::ok()
        }
        "resetstat" if args.len() == 2 => {
            let s = &ctx.shared.stats;
            s.commands_processed.store(0, Ordering::Relaxed);
            s.connections_received.store(0, Ordering::Relaxed);
            s.rejected_connections.store(0, Ordering::Relaxed);
            s.expired_keys.store(0, Ordering::Relaxed);
            s.errors.reset();
            s.commands.reset();
            s.latency_histograms.reset();
            ctx.shared.evictor.evicted_keys.store(0, Ordering::Relaxed);
            ctx.shared.replication.reset_stats();
            Frame::ok()
        }
        "rewrite" if args.len() == 2 => {
            Frame::error("ERR The server is running without a config file")
        }
        "help" if args.len() == 2 => Frame::Array(
            [
                "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "REWRITE",
                "    Rewrite the configuration file.",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|l| Frame::simple(l))
            .collect(),
        ),
        "resetstat" | "rewrite" | "help" => arity_error(&format!("config|{sub}")),
        _ => unknown_subcommand(args, "config"),
    }
}

// ---------------------------------------------------------------------------------------------
// Keyspace-wide commands

fn dbsize(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    Frame::Integer(ctx.db().len() as i64)
}

/// The mode of `FLUSHDB`/`FLUSHALL`: `Some(true)` for `ASYNC`, `Some(false)` for `SYNC` or
/// none, `None` for a syntax error.
fn flush_mode(args: &[Bytes]) -> Option<bool> {
    match args.len() {
        1 => Some(false),
        2 if is(&args[1], "async") => Some(true),
        2 if is(&args[1], "sync") => Some(false),
        _ => None,
    }
}

fn flushdb(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Some(asynchronous) = flush_mode(args) else {
        return super::util::syntax_error();
    };
    // ASYNC frees the values on the background freer: the keys are gone when OK is sent.
    if asynchronous {
        ctx.db().clear_async();
    } else {
        ctx.db().clear();
    }
    ctx.changed();
    Frame::ok()
}

fn flushall(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Some(asynchronous) = flush_mode(args) else {
        return super::util::syntax_error();
    };
    if asynchronous {
        ctx.shared.keyspace.clear_all_async();
    } else {
        ctx.shared.keyspace.clear_all();
    }
    ctx.changed();
    Frame::ok()
}

fn time(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    // The clock itself, inside a script too: Redis 7.0's `TIME` calls `gettimeofday` even
    // there (only key expiry is judged at the script's start time).
    let us = ctx.shared.clock.now_us();
    Frame::Array(vec![
        Frame::Bulk(Bytes::from((us / 1_000_000).to_string())),
        Frame::Bulk(Bytes::from((us % 1_000_000).to_string())),
    ])
}

/// The flags `DEBUG` runs with: `DIGEST`, `DIGEST-VALUE` and `RELOAD` need a still keyspace (the gate
/// held exclusively, as Redis computes them between two commands) and walk it, so a large one
/// first hands the worker's other tasks off (see [`crate::walk`]); the rest as declared.
fn debug_flags(_shared: &crate::state::Shared, args: &[Bytes], command: u32) -> Option<u32> {
    let digest = args
        .get(1)
        .is_some_and(|a| is(a, "digest") || is(a, "digest-value") || is(a, "reload"));
    digest.then_some(command | EXCLUSIVE | WALKS_KEYSPACE)
}

fn debug(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    match sub.as_str() {
        "sleep" if args.len() == 3 => {
            let Some(secs) = super::util::parse_double(&args[2]) else {
                return super::util::not_float();
            };
            // Redis freezes the whole server during DEBUG SLEEP; latchkey only makes the
            // calling client wait, which is what tests use it for (a slow server).
            // `inf` or 1e300 seconds is "forever" (Duration's own conversion would panic).
            let dur = Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::MAX);
            if ctx.may_block() {
                ctx.block(async move {
                    tokio::time::sleep(dur).await;
                    Frame::ok()
                });
            } else if (ctx.in_exec || ctx.in_script) && !ctx.client.is_replication_link {
                // Inside a transaction or a script nothing may wait on its own: the sleep
                // then holds up the server, as Redis's always does (a script's clock stands
                // still meanwhile, so keys it reads do not expire under it). Not for the AOF
                // loader or a master's stream, which never carry a `DEBUG` of their own: a
                // hostile file's `DEBUG SLEEP inf` must not hang the load.
                std::thread::sleep(dur);
            }
            Frame::ok()
        }
        "digest" if args.len() == 2 => super::debug_digest::digest(ctx),
        "digest-value" => super::debug_digest::digest_value(ctx, args),
        "object" if args.len() == 3 => super::debug_object::debug_object(ctx, args),
        "populate" if (3..=5).contains(&args.len()) => super::populate::populate(ctx, args),
        "set-active-expire" if args.len() == 3 => {
            let on = atoi_nonzero(&args[2]);
            ctx.shared
                .active_expire
                .store(on, std::sync::atomic::Ordering::Release);
            Frame::ok()
        }
        "set-disable-deny-scripts" if args.len() == 3 => {
            let on = atoi_nonzero(&args[2]);
            ctx.shared
                .script_deny_disabled
                .store(on, std::sync::atomic::Ordering::Release);
            Frame::ok()
        }
        "protocol" if args.len() == 3 => debug_protocol(ctx, &args[2]),
        "reload" => super::debug_reload::reload(ctx, args),
        // Redis's entries for the subcommands latchkey runs, in Redis's order and words
        // (its `SLEEP` stops only the calling client here: see `docs/COMPATIBILITY.md`).
        "help" if args.len() == 2 => super::util::help(
            "DEBUG",
            &[
                "DIGEST",
                "    Output a hex signature representing the current DB content.",
                "DIGEST-VALUE <key> [<key> ...]",
                "    Output a hex signature of the values of all the specified keys.",
                "OBJECT <key>",
                "    Show low level info about `key` and associated value.",
                "POPULATE <count> [<prefix>] [<size>]",
                "    Create <count> string keys named key:<num>. If <prefix> is specified then",
                "    it is used instead of the 'key' prefix. These are not propagated to",
                "    replicas. Cluster slots are not respected so keys not belonging to the",
                "    current node can be created in cluster mode.",
                "PROTOCOL <type>",
                "    Reply with a test value of the specified type. <type> can be: string,",
                "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
                "    true, false.",
                "RELOAD [option ...]",
                "    Save the RDB on disk and reload it back to memory. Valid <option> values:",
                "    * MERGE: conflicting keys will be loaded from RDB.",
                "    * NOFLUSH: the existing database will not be removed before load, but",
                "      conflicting keys will generate an exception and kill the server.",
                "    * NOSAVE: the database will be loaded from an existing RDB file.",
                "    Examples:",
                "    * DEBUG RELOAD: verify that the server is able to persist, flush and reload",
                "      the database.",
                "    * DEBUG RELOAD NOSAVE: replace the current database with the contents of an",
                "      existing RDB file.",
                "    * DEBUG RELOAD NOSAVE NOFLUSH MERGE: add the contents of an existing RDB",
                "      file to the database.",
                "SET-ACTIVE-EXPIRE <0|1>",
                "    Setting it to 0 disables expiring keys in background when they are not",
                "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
                "    default.",
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
            ],
        ),
        // Redis 7.0 words both an unknown subcommand and a wrong count this way for DEBUG.
        _ => super::util::subcommand_syntax_error(args, "debug"),
    }
}

/// A `DEBUG` flag as Redis reads it, with C's `atoi`: leading spaces, a sign, then digits;
/// any non-zero number is on, anything else off.
fn atoi_nonzero(arg: &[u8]) -> bool {
    let text = String::from_utf8_lossy(arg);
    let text = text.trim_start();
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    unsigned
        .chars()
        .take_while(char::is_ascii_digit)
        .any(|c| c != '0')
}

/// `DEBUG PROTOCOL type`: one reply of each RESP3 type, with Redis's values, so a client (or
/// a script's `redis.call`) can be tested on each; under RESP2 each is sent as Redis
/// downgrades it.
fn debug_protocol(ctx: &mut Ctx<'_>, name: &[u8]) -> Frame {
    let ints = || (0..3).map(Frame::Integer).collect::<Vec<_>>();
    match lower(name).as_str() {
        "string" => Frame::bulk("Hello World"),
        "integer" => Frame::Integer(12345),
        // Redis's test value, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        "double" => Frame::Double(3.141),
        "bignum" => Frame::BigNumber(Bytes::from_static(b"1234567999999999999999999999999999999")),
        "null" => Frame::Null,
        "array" => Frame::Array(ints()),
        "set" => Frame::Set(ints()),
        "map" => Frame::Map(
            (0..3)
                .map(|j| (Frame::Integer(j), Frame::Boolean(j == 1)))
                .collect(),
        ),
        "attrib" => Frame::Attribute(
            vec![(
                Frame::bulk("key-popularity"),
                Frame::Array(vec![Frame::bulk("key:123"), Frame::Integer(90)]),
            )],
            Box::new(Frame::bulk("Some real reply following the attribute")),
        ),
        "push" if ctx.client.protocol != Protocol::Resp3 => {
            Frame::error("ERR RESP2 is not supported by this command")
        }
        // A push is not the command's reply: a real reply follows it, so a client that skips
        // pushes still reads one.
        "push" => Frame::Multi(vec![
            Frame::Push(vec![Frame::bulk("server-cpu-usage"), Frame::Integer(42)]),
            Frame::bulk("Some real reply following the push reply"),
        ]),
        "true" => Frame::Boolean(true),
        "false" => Frame::Boolean(false),
        "verbatim" => Frame::Verbatim(Bytes::from_static(b"This is a verbatim\nstring")),
        _ => Frame::error(
            "ERR Wrong protocol type name. Please use one of the following: \
             string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ),
    }
}

fn shutdown(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let mut flags = ShutdownFlags::default();
    let mut abort = false;
    for a in &args[1..] {
        if is(a, "abort") {
            abort = true;
        } else if is(a, "save") {
            flags.save = true;
        } else if is(a, "nosave") {
            flags.nosave = true;
        } else if is(a, "force") {
            flags.force = true;
        } else if is(a, "now") {
            // `NOW` skips waiting for lagging replicas, which latchkey never waits for.
            flags.now = true;
        } else {
            return super::util::syntax_error();
        }
    }
    // As in Redis: `ABORT` goes alone, and `SAVE` contradicts `NOSAVE`.
    if (abort && flags != ShutdownFlags::default()) || (flags.save && flags.nosave) {
        return super::util::syntax_error();
    }
    if abort {
        return Frame::error("ERR No shutdown in progress.");
    }
    if prepare_shutdown(ctx.shared, flags).is_err() {
        return Frame::error("ERR Errors trying to SHUTDOWN. Check logs.");
    }
    tracing::info!("SHUTDOWN requested by client {}", ctx.client.handle.id);
    ctx.shared.request_shutdown();
    // Redis exits without answering: the connection just closes. An in-process caller, which
    // has no connection to lose, gets +OK.
    ctx.client.close_without_reply = true;
    Frame::ok()
}

/// What Redis's `prepareForShutdown` does before the process exits, for `SHUTDOWN` and for a
/// signal (`ServerHandle::stop_on_signal`): a running AOF rewrite is given up (its temporary
/// file deleted), the AOF is fsynced, and the snapshot file is written when `SAVE` says so or,
/// without `NOSAVE`, while save points are set. A snapshot that could not be written stops
/// the shutdown (`Err`), and so does the first rewrite of an AOF turned on at run time while
/// it runs (the keyspace is in no file yet), unless `FORCE` says to go on; the caller then
/// keeps serving, as Redis does. The caller stops the server afterwards ([`Shared::request_shutdown`]).
///
/// [`Shared::request_shutdown`]: crate::state::Shared::request_shutdown
pub(crate) fn prepare_shutdown(
    shared: &crate::state::Shared,
    flags: ShutdownFlags,
) -> Result<(), ()> {
    // An AOF turned on at run time is not in any file until its first rewrite is done: a
    // shutdown now would lose the keyspace for a start that loads the AOF (Redis's words).
    let writing_initial = shared.background.running() == Some(crate::state::Job::AofRewrite)
        && shared.aof.read().as_ref().is_some_and(|a| a.is_waiting());
    if writing_initial {
        if !flags.force {
            tracing::warn!("Writing initial AOF, can't exit.");
            return Err(());
        }
        tracing::warn!("Writing initial AOF. Exit anyway.");
    }
    super::bgrewriteaof::give_up(shared);
    if shared.background.running() == Some(crate::state::Job::Save) {
        tracing::warn!("There is a child saving an .rdb. Killing it!");
    }
    shared.background.close();
    if let Some(aof) = shared.aof.read().as_ref() {
        tracing::info!("Calling fsync() on the AOF file.");
        if let Err(e) = aof.fsync_now() {
            tracing::warn!("fsync of the AOF before exiting failed: {e}");
        }
    }
    if flags.save || (!flags.nosave && !super::save_points::points(shared).is_empty()) {
        tracing::info!("Saving the final RDB snapshot before exiting.");
        let taken = crate::rdb::file::take(shared);
        let path = crate::rdb::file::path(shared);
        let _no_older_rename = shared.background.rename_lock.lock();
        match crate::rdb::file::write(&path, &taken.data) {
            Ok(()) => {
                crate::rdb::file::saved(shared, taken.dirty);
                tracing::info!("DB saved on disk");
            }
            Err(e) => {
                tracing::warn!("Error trying to save the DB to {}: {e}", path.display());
                if !flags.force {
                    shared.background.reopen();
                    return Err(());
                }
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// INFO

fn info(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let wanted: Vec<String> = args[1..].iter().map(|a| lower(a)).collect();
    let text = info_text(ctx, &wanted);
    match ctx.client.protocol {
        Protocol::Resp3 => Frame::Verbatim(Bytes::from(text)),
        Protocol::Resp2 => Frame::Bulk(Bytes::from(text)),
    }
}

/// The body of `INFO persistence`: Redis 7.0's fields for what latchkey does (snapshots, the
/// AOF and its rewrites), in Redis's order. The fork's copy-on-write figures and the module
/// fork are left out: latchkey forks nothing.
fn persistence_info(shared: &crate::state::Shared) -> String {
    use crate::state::Job;
    let stats = &shared.stats;
    let rewrite = &shared.aof_rewrite;
    let running = shared.background.running();
    let now_s = shared.clock.now_ms() / 1000;
    let status = |failed: bool| if failed { "err" } else { "ok" };
    let mut out = String::new();
    let _ = write!(
        out,
        "loading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\n",
        stats
            .dirty
            .load(Ordering::Relaxed)
            .saturating_sub(stats.dirty_at_save.load(Ordering::Relaxed)),
        u8::from(running == Some(Job::Save)),
        crate::cmd::save::last_save_s(shared),
        status(stats.last_bgsave_failed.load(Ordering::Acquire)),
    );
    let current_rewrite_s = match running {
        Some(Job::AofRewrite) => {
            now_s.saturating_sub(rewrite.started_s.load(Ordering::Relaxed)) as i64
        }
        _ => -1,
    };
    let aof = shared.aof.read();
    let _ = write!(
        out,
        "aof_enabled:{}\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\naof_last_rewrite_time_sec:{}\r\naof_current_rewrite_time_sec:{}\r\naof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_rewrites_consecutive_failures:{}\r\naof_last_write_status:ok\r\n",
        u8::from(aof.is_some()),
        u8::from(running == Some(Job::AofRewrite)),
        u8::from(rewrite.scheduled.load(Ordering::Relaxed)),
        rewrite.last_time_s.load(Ordering::Relaxed),
        current_rewrite_s,
        status(rewrite.last_failed.load(Ordering::Relaxed)),
        rewrite.rewrites.load(Ordering::Relaxed),
        rewrite.consecutive_failures.load(Ordering::Relaxed),
    );
    if let Some(aof) = aof.as_ref() {
        // latchkey writes each command to the file as it runs: there is no buffer of writes
        // waiting for the file, nor fsyncs waiting for a background thread.
        let _ = write!(
            out,
            "aof_current_size:{}\r\naof_base_size:{}\r\naof_pending_rewrite:{}\r\naof_buffer_length:0\r\n",
            aof.size(),
            aof.base_size(),
            u8::from(rewrite.scheduled.load(Ordering::Relaxed)),
        );
    }
    out
}

/// Builds the `INFO` text for the requested sections (none means the default set).
pub(crate) fn info_text(ctx: &Ctx<'_>, wanted: &[String]) -> String {
    let all = wanted.iter().any(|w| w == "all" || w == "everything");
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let want = |name: &str| all || default || wanted.iter().any(|w| w == name);
    let shared = ctx.shared;
    let mut out = String::new();
    let mut section = |title: &str, body: String| {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let _ = write!(out, "# {title}\r\n{body}");
    };
    if want("server") {
        let uptime = shared.started.elapsed().as_secs();
        let port = shared.addr.lock().map_or(0, |a| a.port());
        section(
            "Server",
            format!(
                "redis_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:standalone\r\nos:{}\r\narch_bits:64\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{}\r\nuptime_in_days:{}\r\nhz:10\r\nexecutable:latchkey-server\r\nlatchkey_version:{}\r\n",
                crate::config::REDIS_VERSION,
                std::env::consts::OS,
                std::process::id(),
                shared.run_id,
                port,
                shared.clock.now_us(),
                uptime,
                uptime / 86400,
                env!("CARGO_PKG_VERSION"),
            ),
        );
    }
    // A field latchkey does not measure (`keyspace_hits`, `client_recent_max_input_buffer`,
    // `clients_in_timeout_table`, ...) is left out rather than shown as a made-up 0; see
    // docs/COMPATIBILITY.md.
    if want("clients") {
        let list = shared.clients.list();
        let pubsub = list
            .iter()
            .filter(|c| {
                let i = c.info.lock();
                i.sub + i.psub + i.ssub > 0
            })
            .count();
        section(
            "Clients",
            format!(
                "connected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nblocked_clients:{}\r\ntracking_clients:{}\r\npubsub_clients:{}\r\n",
                list.len(),
                shared.config.maxclients(),
                shared.stats.blocked_clients.load(Ordering::Relaxed),
                shared.tracking.counts().0,
                pubsub,
            ),
        );
    }
    if want("memory") {
        section(
            "Memory",
            crate::evict::info_section(shared, &shared.scripting().memory_info()),
        );
    }
    if want("persistence") {
        section("Persistence", persistence_info(shared));
    }
    if want("stats") {
        // `migrate_cached_sockets`: the connections `MIGRATE` keeps open to its targets.
        let s = &shared.stats;
        let (_, tracking_keys, tracking_items, tracking_prefixes) = shared.tracking.counts();
        section(
            "Stats",
            format!(
                "total_connections_received:{}\r\ntotal_commands_processed:{}\r\nrejected_connections:{}\r\nexpired_keys:{}\r\nevicted_keys:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\nmigrate_cached_sockets:{}\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\ntotal_error_replies:{}\r\n",
                s.connections_received.load(Ordering::Relaxed),
                s.commands_processed.load(Ordering::Relaxed),
                s.rejected_connections.load(Ordering::Relaxed),
                s.expired_keys.load(Ordering::Relaxed),
                shared.evictor.evicted_keys.load(Ordering::Relaxed),
                shared.pubsub.channel_count(),
                shared.pubsub.pattern_count(),
                super::migrate::cached_sockets(shared),
                tracking_keys,
                tracking_items,
                tracking_prefixes,
                s.errors.total(),
            ) + &shared.replication.stats_info(),
        );
    }
    if want("replication") {
        section("Replication", shared.replication_info());
    }
    if want("cpu") {
        section("CPU", crate::cpu_usage::info_section());
    }
    if want("modules") {
        // latchkey loads no modules: the section is there, empty, as on a Redis without any.
        section("Modules", String::new());
    }
    // Not in the default set, as in Redis: only asked for by name, `all` or `everything`.
    if all || wanted.iter().any(|w| w == "commandstats") {
        section(
            "Commandstats",
            shared
                .stats
                .commands
                .info_section(crate::command::stat_name),
        );
    }
    if want("errorstats") {
        section("Errorstats", shared.stats.errors.info_section());
    }
    // Not in the default set either: the percentiles of each command's latency histogram.
    if all || wanted.iter().any(|w| w == "latencystats") {
        let mut body = String::new();
        if shared.config.latency_tracking() {
            let percentiles = shared.config.latency_percentiles();
            let histograms = shared
                .stats
                .latency_histograms
                .merged(crate::command::stat_name);
            for (name, h) in &histograms {
                body.push_str(&crate::latency::percentiles_line(name, h, &percentiles));
            }
        }
        section("Latencystats", body);
    }
    if want("cluster") {
        section("Cluster", "cluster_enabled:0\r\n".to_string());
    }
    if want("keyspace") {
        let mut body = String::new();
        for (i, keys, expires) in shared.keyspace.stats() {
            let _ = write!(body, "db{i}:keys={keys},expires={expires},avg_ttl=0\r\n");
        }
        section("Keyspace", body);
    }
    out
}
