//! `CLIENT` and its subcommands: a connection's name and id, `CLIENT LIST`/`INFO`, `KILL`,
//! `UNBLOCK`, `PAUSE`/`UNPAUSE`, `REPLY`, `NO-EVICT`, and the tracking subcommands (whose
//! work is in `tracking.rs`).

use bytes::Bytes;

use super::connection::valid_name;
use super::util::{is, parse_i64, unknown_subcommand};
use super::{spec, CommandSpec, Ctx, ADMIN, LOADING, NOSCRIPT, STALE};
use crate::client::{ClientRole, ReplyMode};
use crate::command::CONTAINER;
use crate::frame::Frame;
use crate::pause::PauseMode;

/// `CLIENT`.
pub(crate) const COMMANDS: &[CommandSpec] = &[spec(
    "client",
    -2,
    ADMIN | NOSCRIPT | LOADING | STALE | CONTAINER,
    0,
    0,
    0,
    client,
)];

fn client(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = super::util::lower(&args[1]);
    let n = args.len();
    let arity = |ok: bool| {
        if ok {
            None
        } else {
            Some(super::arity_error(&format!("client|{sub}")))
        }
    };
    let check = match sub.as_str() {
        "id" | "getname" | "info" | "help" | "getredir" | "trackinginfo" => arity(n == 2),
        "setname" | "caching" => arity(n == 3),
        "kill" | "no-evict" | "reply" | "pause" | "tracking" | "unblock" => arity(n >= 3),
        "unpause" => arity(n == 2),
        _ => None,
    };
    if let Some(e) = check {
        return e;
    }
    let me = ctx.client.handle.clone();
    match sub.as_str() {
        "id" => Frame::Integer(me.id as i64),
        "getname" => me.info.lock().name.clone().map_or(Frame::Null, Frame::Bulk),
        "setname" => {
            if !valid_name(&args[2]) {
                return Frame::error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
            me.info.lock().name = (!args[2].is_empty()).then(|| args[2].clone());
            Frame::ok()
        }
        "info" => Frame::Verbatim(Bytes::from(client_line(ctx, &me) + "\n")),
        "list" => {
            let mut ids: Option<Vec<u64>> = None;
            let mut kind: Option<ClientType> = None;
            if n == 3 {
                // A filter with no value: Redis's syntax error.
                return super::util::syntax_error();
            }
            if n >= 4 {
                if is(&args[2], "id") {
                    let mut v = Vec::new();
                    for a in &args[3..] {
                        match parse_i64(a) {
                            Ok(i) if i > 0 => v.push(i as u64),
                            _ => return Frame::error("ERR Invalid client ID"),
                        }
                    }
                    ids = Some(v);
                } else if is(&args[2], "type") && n == 4 {
                    match ClientType::parse(&args[3]) {
                        Some(t) => kind = Some(t),
                        None => {
                            return Frame::error(format!(
                                "ERR Unknown client type '{}'",
                                String::from_utf8_lossy(&args[3])
                            ))
                        }
                    }
                } else {
                    return super::util::syntax_error();
                }
            }
            let mut out = String::new();
            for h in ctx.shared.clients.list() {
                if ids.as_ref().is_some_and(|v| !v.contains(&h.id))
                    || kind.is_some_and(|k| k != ClientType::of(&h))
                {
                    continue;
                }
                out.push_str(&client_line(ctx, &h));
                out.push('\n');
            }
            Frame::Verbatim(Bytes::from(out))
        }
        "kill" => client_kill(ctx, args),
        "unblock" => client_unblock(ctx, args),
        // Protects the connection from client eviction (`maxmemory-clients`), which this
        // server never does: no client is evicted, with or without it.
        "no-evict" if n == 3 => {
            if is(&args[2], "on") || is(&args[2], "off") {
                Frame::ok()
            } else {
                super::util::syntax_error()
            }
        }
        "reply" if n == 3 => client_reply(ctx, &args[2]),
        "tracking" => super::tracking::tracking(ctx, args),
        "caching" => super::tracking::caching(ctx, &args[2]),
        "getredir" => super::tracking::getredir(ctx),
        "trackinginfo" => super::tracking::trackinginfo(ctx),
        "pause" if n <= 4 => client_pause(ctx, args),
        "unpause" => {
            ctx.shared.pause.unpause();
            Frame::ok()
        }
        "help" => super::util::help(
            "CLIENT",
            &[
                "CACHING (YES|NO)",
                "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
                "GETREDIR",
                "    Return the client ID we are redirecting to when tracking is enabled.",
                "GETNAME",
                "    Return the name of the current connection.",
                "ID",
                "    Return the ID of the current connection.",
                "INFO",
                "    Return information about the current client connection.",
                "KILL <ip:port>",
                "    Kill connection made from <ip:port>.",
                "KILL <option> <value> [<option> <value> [...]]",
                "    Kill connections. Options are:",
                "    * ADDR (<ip:port>|<unixsocket>:0)",
                "      Kill connections made from the specified address",
                "    * LADDR (<ip:port>|<unixsocket>:0)",
                "      Kill connections made to specified local address",
                "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
                "      Kill connections by type.",
                "    * USER <username>",
                "      Kill connections authenticated by <username>.",
                "    * SKIPME (YES|NO)",
                "      Skip killing current connection (default: yes).",
                "LIST [options ...]",
                "    Return information about client connections. Options:",
                "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
                "      Return clients of specified type.",
                "UNPAUSE",
                "    Stop the current client pause, resuming traffic.",
                "PAUSE <timeout> [WRITE|ALL]",
                "    Suspend all, or just write, clients for <timeout> milliseconds.",
                "REPLY (ON|OFF|SKIP)",
                "    Control the replies sent to the current connection.",
                "SETNAME <name>",
                "    Assign the name <name> to the current connection.",
                "UNBLOCK <clientid> [TIMEOUT|ERROR]",
                "    Unblock the specified blocked client.",
                "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
                "         [OPTIN] [OPTOUT] [NOLOOP]",
                "    Control server assisted client side caching.",
                "TRACKINGINFO",
                "    Report tracking status for the current connection.",
                "NO-EVICT (ON|OFF)",
                "    Protect current client connection from eviction.",
            ],
        ),
        "pause" => Frame::error(
            "ERR unknown subcommand or wrong number of arguments for 'PAUSE'. Try CLIENT HELP.",
        ),
        _ => unknown_subcommand(args, "client"),
    }
}

/// `CLIENT REPLY ON|OFF|SKIP`: the connection stops sending replies (`OFF`), skips the next
/// one (`SKIP`), or sends them again (`ON`, the only one answered). Messages pushed to a
/// subscriber still go out. The connection applies the mode (see `net::serve`); a client in
/// the same process gets every reply from its call, so it may not switch them off.
fn client_reply(ctx: &mut Ctx<'_>, mode: &Bytes) -> Frame {
    let mode = if is(mode, "on") {
        ReplyMode::On
    } else if is(mode, "off") {
        ReplyMode::Off
    } else if is(mode, "skip") {
        ReplyMode::SkipNext
    } else {
        return super::util::syntax_error();
    };
    if ctx.client.handle.addr.is_none() && mode != ReplyMode::On {
        return Frame::error(
            "ERR CLIENT REPLY OFF|SKIP needs a network connection: an in-process call always returns its reply",
        );
    }
    ctx.client.reply_mode = mode;
    Frame::ok()
}

/// `CLIENT PAUSE timeout [WRITE|ALL]`: holds every client's commands (`ALL`, the default) or
/// those that may write (`WRITE`) for `timeout` milliseconds (see [`crate::pause`]).
fn client_pause(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let ms = match parse_i64(&args[2]) {
        Ok(ms) if ms < 0 => return Frame::error("ERR timeout is negative"),
        Ok(ms) => ms as u64,
        Err(_) => return Frame::error("ERR timeout is not an integer or out of range"),
    };
    let mode = match args.get(3) {
        None => PauseMode::All,
        Some(m) if is(m, "all") => PauseMode::All,
        Some(m) if is(m, "write") => PauseMode::Write,
        Some(_) => return Frame::error("ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    ctx.shared
        .pause
        .pause(mode, std::time::Duration::from_millis(ms));
    Frame::ok()
}

/// One `CLIENT LIST` line, in Redis 7's field order.
fn client_line(ctx: &Ctx<'_>, h: &crate::client::ClientHandle) -> String {
    let info = h.info.lock().clone();
    let now_ms = ctx.shared.clock.now_ms();
    let last = h
        .last_interaction_ms
        .load(std::sync::atomic::Ordering::Relaxed);
    let idle = if last == 0 {
        0
    } else {
        now_ms.saturating_sub(last) / 1000
    };
    let addr = h
        .addr
        .map_or_else(|| "local".to_string(), |a| a.to_string());
    let laddr = h
        .laddr
        .map_or_else(|| "local".to_string(), |a| a.to_string());
    let mut flags = String::new();
    if info.role == ClientRole::Master {
        flags.push('M');
    } else if info.role == ClientRole::Replica {
        flags.push('S');
    } else if info.sub + info.psub + info.ssub > 0 {
        flags.push('P');
    } else if info.multi >= 0 {
        flags.push('x');
    }
    // Client-side caching: `t`, then `R` (broken redirection) and `B` (broadcast).
    let (tracking_flags, redir) = super::tracking::list_fields(ctx, h.id);
    flags.push_str(&tracking_flags);
    if flags.is_empty() {
        flags.push('N');
    }
    let text = |b: &Option<Bytes>| {
        b.as_ref()
            .map_or(String::new(), |v| String::from_utf8_lossy(v).into_owned())
    };
    format!(
        "id={} addr={} laddr={} fd=-1 name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs={} rbp=0 obl=0 oll=0 omem={} tot-mem=0 events=r cmd={} user={} redir={} resp={}",
        h.id,
        addr,
        laddr,
        text(&info.name),
        h.created.elapsed().as_secs(),
        idle,
        flags,
        info.db,
        info.sub,
        info.psub,
        info.ssub,
        info.multi,
        h.qbuf.load(std::sync::atomic::Ordering::Relaxed),
        h.qbuf_free.load(std::sync::atomic::Ordering::Relaxed),
        h.reply_buf.load(std::sync::atomic::Ordering::Relaxed),
        h.queued_push_bytes.load(std::sync::atomic::Ordering::Relaxed),
        if info.last_cmd.is_empty() { "NULL" } else { &info.last_cmd },
        info.user
            .as_ref()
            .map_or(std::borrow::Cow::Borrowed("default"), |u| String::from_utf8_lossy(&u.name)),
        redir,
        info.resp,
    )
}

/// The kinds `CLIENT KILL TYPE` (and `CLIENT LIST TYPE`) filter on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    Master,
    Replica,
    PubSub,
}

impl ClientType {
    /// Redis's `getClientTypeByName`: `slave` and `replica` are the same type.
    fn parse(name: &[u8]) -> Option<ClientType> {
        match super::util::lower(name).as_str() {
            "normal" => Some(ClientType::Normal),
            "master" => Some(ClientType::Master),
            "slave" | "replica" => Some(ClientType::Replica),
            "pubsub" => Some(ClientType::PubSub),
            _ => None,
        }
    }

    /// Redis's `getClientType`: a replica or our master first, then a client with
    /// subscriptions, then every other client.
    fn of(h: &crate::client::ClientHandle) -> ClientType {
        let info = h.info.lock();
        match info.role {
            ClientRole::Master => ClientType::Master,
            ClientRole::Replica => ClientType::Replica,
            ClientRole::Normal if info.sub + info.psub + info.ssub > 0 => ClientType::PubSub,
            ClientRole::Normal => ClientType::Normal,
        }
    }
}

/// Which clients a `CLIENT KILL` closes; every filter given must match.
#[derive(Debug)]
struct KillFilter {
    addr: Option<String>,
    laddr: Option<String>,
    kind: Option<ClientType>,
    id: Option<u64>,
    user: Option<std::sync::Arc<crate::acl::User>>,
    skipme: bool,
}

impl KillFilter {
    /// Parses the filter pairs of the Redis 7.0 form, option by option and in order, so the
    /// first bad option decides the error (as in Redis's `clientKillCommand`).
    fn parse(args: &[Bytes], acl: &crate::acl::Acl) -> Result<KillFilter, Frame> {
        let mut f = KillFilter {
            addr: None,
            laddr: None,
            kind: None,
            id: None,
            user: None,
            skipme: true,
        };
        let mut i = 0;
        while i < args.len() {
            let (opt, value) = match args.get(i + 1) {
                Some(v) => (&args[i], v),
                None => return Err(super::util::syntax_error()),
            };
            let text = || String::from_utf8_lossy(value).into_owned();
            if is(opt, "id") {
                match parse_i64(value) {
                    Ok(n) if n >= 1 => f.id = Some(n as u64),
                    _ => return Err(Frame::error("ERR client-id should be greater than 0")),
                }
            } else if is(opt, "type") {
                match ClientType::parse(value) {
                    Some(t) => f.kind = Some(t),
                    None => {
                        return Err(Frame::error(format!(
                            "ERR Unknown client type '{}'",
                            text()
                        )))
                    }
                }
            } else if is(opt, "addr") {
                f.addr = Some(text());
            } else if is(opt, "laddr") {
                f.laddr = Some(text());
            } else if is(opt, "user") {
                match acl.user(value) {
                    Some(u) => f.user = Some(u),
                    None => return Err(Frame::error(format!("ERR No such user '{}'", text()))),
                }
            } else if is(opt, "skipme") {
                f.skipme = match super::util::lower(value).as_str() {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(super::util::syntax_error()),
                };
            } else {
                return Err(super::util::syntax_error());
            }
            i += 2;
        }
        Ok(f)
    }

    fn matches(&self, h: &crate::client::ClientHandle) -> bool {
        let shown = |a: Option<std::net::SocketAddr>| {
            a.map_or_else(|| "local".to_string(), |a| a.to_string())
        };
        self.addr.as_ref().is_none_or(|a| *a == shown(h.addr))
            && self.laddr.as_ref().is_none_or(|a| *a == shown(h.laddr))
            && self.kind.is_none_or(|k| k == ClientType::of(h))
            && self.id.is_none_or(|i| i == h.id)
            && self.user.as_ref().is_none_or(|u| {
                let theirs = h.info.lock().user.clone();
                match theirs {
                    Some(t) => std::sync::Arc::ptr_eq(&t, u),
                    None => &u.name[..] == crate::acl::DEFAULT_USER,
                }
            })
    }
}

/// `CLIENT KILL ip:port` (the old form: `+OK`, or an error when no client has that address;
/// it may kill the caller itself) and `CLIENT KILL <filter> <value> ...` (the new form:
/// `TYPE`, `ID`, `ADDR`, `LADDR`, `USER`, `SKIPME`; replies with how many it closed).
/// `CLIENT UNBLOCK id [TIMEOUT|ERROR]`: ends the wait of a client blocked in a list or
/// sorted-set command or in `WAIT`, as if it timed out or with an `-UNBLOCKED` error. `:1`
/// when it did, `:0` when that client is in no such wait (a client held by `CLIENT PAUSE` is
/// not blocked).
fn client_unblock(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    if args.len() > 4 {
        return super::util::subcommand_syntax_error(args, "client");
    }
    let error = match args.get(3) {
        None => false,
        Some(r) if is(r, "timeout") => false,
        Some(r) if is(r, "error") => true,
        Some(_) => return Frame::error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    let Ok(id) = parse_i64(&args[2]) else {
        return super::util::not_integer();
    };
    let unblocked = u64::try_from(id)
        .ok()
        .and_then(|id| ctx.shared.clients.get(id))
        .is_some_and(|c| c.unblock(error));
    Frame::Integer(i64::from(unblocked))
}

fn client_kill(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let old_form = args.len() == 3;
    let filter = if old_form {
        KillFilter {
            addr: Some(String::from_utf8_lossy(&args[2]).into_owned()),
            laddr: None,
            kind: None,
            id: None,
            user: None,
            skipme: false,
        }
    } else {
        match KillFilter::parse(&args[2..], &ctx.shared.acl) {
            Ok(f) => f,
            Err(e) => return e,
        }
    };
    let me = ctx.client.handle.id;
    let mut killed = 0;
    for h in ctx.shared.clients.list() {
        if !filter.matches(&h) || (h.id == me && filter.skipme) {
            continue;
        }
        if h.id == me {
            // Our own connection closes once this reply is written.
            ctx.client.close_after_reply = true;
        } else {
            h.kill();
        }
        killed += 1;
    }
    match (old_form, killed) {
        (true, 0) => Frame::error("ERR No such client"),
        (true, _) => Frame::ok(),
        (false, n) => Frame::Integer(n),
    }
}
