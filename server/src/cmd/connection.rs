//! Connection commands: `PING`, `ECHO`, `HELLO`, `SELECT`, `QUIT`, `RESET` (`CLIENT` is in
//! `client.rs`).

use crate::command::NO_AUTH;
use bytes::Bytes;

use super::util::{is, parse_i64};
use super::{
    spec, CommandSpec, Ctx, ALLOW_BUSY, FAST, LOADING, NOSCRIPT, NO_QUEUE, STALE, SUBSCRIBED_OK,
};
use crate::db::NUM_DBS;
use crate::frame::{Frame, Protocol};

/// The connection commands.
pub(crate) const COMMANDS: &[CommandSpec] = &[
    spec("ping", -1, FAST | SUBSCRIBED_OK, 0, 0, 0, ping),
    spec("echo", 2, FAST | LOADING | STALE, 0, 0, 0, echo),
    spec("select", 2, FAST | LOADING | STALE, 0, 0, 0, select),
    spec(
        "quit",
        -1,
        FAST | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK | NO_QUEUE | ALLOW_BUSY | NO_AUTH,
        0,
        0,
        0,
        quit,
    ),
    spec(
        "hello",
        -1,
        FAST | NOSCRIPT | LOADING | STALE | NO_QUEUE | ALLOW_BUSY | NO_AUTH,
        0,
        0,
        0,
        hello,
    ),
    spec(
        "auth",
        -2,
        FAST | NOSCRIPT | LOADING | STALE | ALLOW_BUSY | NO_AUTH,
        0,
        0,
        0,
        auth,
    ),
    spec(
        "reset",
        1,
        FAST | NOSCRIPT | LOADING | STALE | SUBSCRIBED_OK | NO_QUEUE | ALLOW_BUSY | NO_AUTH,
        0,
        0,
        0,
        reset,
    ),
];

fn ping(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args.len() > 2 {
        return super::arity_error("ping");
    }
    if ctx.client.in_resp2_pubsub() {
        // In RESP2 subscribed mode PING answers with a message-shaped array.
        let payload = args.get(1).cloned().unwrap_or_default();
        return Frame::Array(vec![Frame::bulk("pong"), Frame::Bulk(payload)]);
    }
    match args.get(1) {
        Some(m) => Frame::Bulk(m.clone()),
        None => Frame::simple("PONG"),
    }
}

fn echo(_ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    Frame::Bulk(args[1].clone())
}

fn select(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let Ok(i) = parse_i64(&args[1]) else {
        return super::util::not_integer();
    };
    if !(0..NUM_DBS as i64).contains(&i) {
        return Frame::error("ERR DB index is out of range");
    }
    ctx.client.db = i as usize;
    Frame::ok()
}

fn quit(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    ctx.client.close_after_reply = true;
    Frame::ok()
}

fn hello(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    // As in Redis 7.0, the options act in order (a name set before a bad option or a failed
    // `AUTH` stays set), and the protocol switches only once all of them succeeded.
    let mut protocol = None;
    let mut i = 1;
    if let Some(v) = args.get(1) {
        let Ok(ver) = parse_i64(v) else {
            return Frame::error("ERR Protocol version is not an integer or out of range");
        };
        if !(2..=3).contains(&ver) {
            return Frame::error("NOPROTO unsupported protocol version");
        }
        protocol = Some(if ver == 3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        });
        i = 2;
    }
    while i < args.len() {
        let opt = &args[i];
        if is(opt, "setname") && i + 1 < args.len() {
            let name = &args[i + 1];
            if name.iter().any(|c| *c <= b' ' || *c > b'~') {
                return Frame::error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            ctx.client.handle.info.lock().name = (!name.is_empty()).then(|| name.clone());
            i += 2;
        } else if is(opt, "auth") && i + 2 < args.len() {
            if !authenticate(ctx, &args[0], &args[i + 1], &args[i + 2]) {
                return Frame::error(WRONGPASS);
            }
            i += 3;
        } else {
            return Frame::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(opt)
            ));
        }
    }
    if !ctx.client.authenticated && ctx.shared.acl.auth_required() {
        return Frame::error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        );
    }
    if let Some(p) = protocol {
        ctx.client.protocol = p;
        // Seen at once by whoever sends this client messages (a tracking redirection).
        ctx.client.handle.info.lock().resp = p.number();
    }
    let role = if ctx.shared.is_replica() {
        "replica"
    } else {
        "master"
    };
    Frame::Map(vec![
        (Frame::bulk("server"), Frame::bulk("redis")),
        (
            Frame::bulk("version"),
            Frame::bulk(crate::config::REDIS_VERSION),
        ),
        (
            Frame::bulk("proto"),
            Frame::Integer(ctx.client.protocol.number()),
        ),
        (
            Frame::bulk("id"),
            Frame::Integer(ctx.client.handle.id as i64),
        ),
        (Frame::bulk("mode"), Frame::bulk("standalone")),
        (Frame::bulk("role"), Frame::bulk(role)),
        (Frame::bulk("modules"), Frame::Array(vec![])),
    ])
}

/// Redis's refusal of a user name or password.
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Authenticates the client as `user` with `password` (Redis's `ACLAuthenticateUser`); a
/// failure goes into the ACL log, under the command that tried (`command`, as sent).
fn authenticate(ctx: &mut Ctx<'_>, command: &Bytes, user: &[u8], password: &[u8]) -> bool {
    match ctx.shared.acl.authenticate(user, password) {
        Some(u) => {
            ctx.client.set_user(u);
            true
        }
        None => {
            let context = if ctx.in_exec || ctx.client.multi.is_some() {
                crate::acl::log::Context::Multi
            } else {
                crate::acl::log::Context::Toplevel
            };
            crate::dispatch::acl_log(
                ctx.shared,
                ctx.client,
                crate::acl::log::Reason::Auth,
                context,
                command.clone(),
                Some(Bytes::copy_from_slice(user)),
            );
            false
        }
    }
}

/// `AUTH [username] password`.
fn auth(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let (user, password) = match args.len() {
        2 => {
            if ctx.shared.acl.default_user().nopass() {
                return Frame::error(
                    "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                );
            }
            (&b"default"[..], &args[1])
        }
        3 => (&args[1][..], &args[2]),
        _ => return super::util::syntax_error(),
    };
    if authenticate(ctx, &args[0], user, password) {
        Frame::ok()
    } else {
        Frame::error(WRONGPASS)
    }
}

fn reset(ctx: &mut Ctx<'_>, _args: &[Bytes]) -> Frame {
    let shared = ctx.shared;
    let client = &mut *ctx.client;
    client.multi = None;
    client.unwatch_all(&shared.keyspace);
    shared.pubsub.remove_client(client);
    client.channels.clear();
    client.patterns.clear();
    client.shard_channels.clear();
    client.db = 0;
    client.protocol = Protocol::Resp2;
    // As Redis's `clearClientConnectionState`: tracking goes off.
    shared.tracking.disable(client.handle.id);
    client.tracking = None;
    client.caching = false;
    client.handle.info.lock().name = None;
    // Back to the default user as a new connection gets it: unauthenticated while it has a
    // password (in-process clients, trusted by the embedder, stay authenticated).
    client.user = shared.acl.default_user().clone();
    client.handle.info.lock().user = None;
    if client.handle.addr.is_some() {
        client.authenticated = !shared.acl.auth_required();
    }
    Frame::simple("RESET")
}

/// Whether `name` may name a connection (`CLIENT SETNAME`, `HELLO ... SETNAME`): printable
/// ASCII with no spaces, as Redis requires.
pub(super) fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|c| *c > b' ' && *c <= b'~')
}
