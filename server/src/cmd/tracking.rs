//! The client-side caching subcommands of `CLIENT`: `TRACKING`, `CACHING`, `GETREDIR` and
//! `TRACKINGINFO`, with Redis 7.0's checks and errors in its order. What tracking does is
//! [`crate::tracking`].

use bytes::Bytes;

use super::util::{is, parse_i64, syntax_error};
use super::Ctx;
use crate::client::TrackingMode;
use crate::frame::Frame;
use crate::tracking::{overlap, Request};

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]`.
pub(crate) fn tracking(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let mut req = Request::default();
    let mut redirect_given = false;
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let a = &args[j];
        if is(a, "redirect") && more {
            j += 1;
            if redirect_given {
                return Frame::error("ERR A client can only redirect to a single other client");
            }
            let id = match parse_i64(&args[j]) {
                Ok(id) => id,
                Err(e) => return e,
            };
            // The target must exist now; it may leave later (then the redirection is broken).
            if id <= 0 || ctx.shared.clients.get(id as u64).is_none() {
                return Frame::error("ERR The client ID you want redirect to does not exist");
            }
            req.redirect = id as u64;
            redirect_given = true;
        } else if is(a, "bcast") {
            req.mode.bcast = true;
        } else if is(a, "optin") {
            req.mode.optin = true;
        } else if is(a, "optout") {
            req.mode.optout = true;
        } else if is(a, "noloop") {
            req.mode.noloop = true;
        } else if is(a, "prefix") && more {
            j += 1;
            req.prefixes.push(args[j].clone());
        } else {
            return syntax_error();
        }
        j += 1;
    }
    let me = ctx.client.handle.clone();
    if is(&args[2], "off") {
        ctx.shared.tracking.disable(me.id);
        ctx.client.tracking = None;
        ctx.client.caching = false;
        return Frame::ok();
    }
    if !is(&args[2], "on") {
        return syntax_error();
    }
    let mode = req.mode;
    let current = ctx.client.tracking;
    if !mode.bcast && !req.prefixes.is_empty() {
        return Frame::error("ERR PREFIX option requires BCAST mode to be enabled");
    }
    if current.is_some_and(|c| c.bcast != mode.bcast) {
        return Frame::error(
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
        );
    }
    if mode.bcast && (mode.optin || mode.optout) {
        return Frame::error("ERR OPTIN and OPTOUT are not compatible with BCAST");
    }
    if mode.optin && mode.optout {
        return Frame::error("ERR You can't specify both OPTIN mode and OPTOUT mode");
    }
    if current.is_some_and(|c| (mode.optin && c.optout) || (mode.optout && c.optin)) {
        return Frame::error(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
        );
    }
    if mode.bcast {
        if let Some(e) = prefix_collision(ctx, me.id, &req.prefixes) {
            return e;
        }
    }
    ctx.client.tracking = Some(ctx.shared.tracking.enable(&me, req));
    Frame::ok()
}

/// Redis's check that no two prefixes of one client overlap (one starting with the other):
/// first each new prefix against the client's, then against the new ones after it.
fn prefix_collision(ctx: &Ctx<'_>, id: u64, prefixes: &[Bytes]) -> Option<Frame> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, p) in prefixes.iter().enumerate() {
        if let Some(old) = ctx.shared.tracking.overlapping_prefix(id, p) {
            return Some(Frame::error(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(&old)
            )));
        }
        if let Some(q) = prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
            return Some(Frame::error(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                text(p),
                text(q)
            )));
        }
    }
    None
}

/// `CLIENT CACHING YES|NO`: whether the next command's reads are remembered, in `OPTIN`
/// (`YES`) or `OPTOUT` (`NO`) mode.
pub(crate) fn caching(ctx: &mut Ctx<'_>, arg: &Bytes) -> Frame {
    let Some(mode) = ctx.client.tracking else {
        return Frame::error(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        );
    };
    if is(arg, "yes") {
        if !mode.optin {
            return Frame::error(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if is(arg, "no") {
        if !mode.optout {
            return Frame::error(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return syntax_error();
    }
    ctx.client.caching = true;
    Frame::ok()
}

/// `CLIENT GETREDIR`: the redirection's client id, 0 for none, -1 when tracking is off.
pub(crate) fn getredir(ctx: &Ctx<'_>) -> Frame {
    match ctx.shared.tracking.redirect_of(ctx.client.handle.id) {
        Some((redirect, _)) => Frame::Integer(redirect as i64),
        None => Frame::Integer(-1),
    }
}

/// `CLIENT TRACKINGINFO`: the flags, the redirection and the prefixes, as Redis lists them.
pub(crate) fn trackinginfo(ctx: &Ctx<'_>) -> Frame {
    let id = ctx.client.handle.id;
    let redirect = ctx.shared.tracking.redirect_of(id);
    let mode: Option<TrackingMode> = ctx.client.tracking;
    let mut flags = vec![Frame::bulk(if mode.is_some() { "on" } else { "off" })];
    if let Some(m) = mode {
        let caching = ctx.client.caching;
        if m.bcast {
            flags.push(Frame::bulk("bcast"));
        }
        if m.optin {
            flags.push(Frame::bulk("optin"));
            if caching {
                flags.push(Frame::bulk("caching-yes"));
            }
        }
        if m.optout {
            flags.push(Frame::bulk("optout"));
            if caching {
                flags.push(Frame::bulk("caching-no"));
            }
        }
        if m.noloop {
            flags.push(Frame::bulk("noloop"));
        }
        if redirect.is_some_and(|(_, broken)| broken) {
            flags.push(Frame::bulk("broken_redirect"));
        }
    }
    let prefixes = ctx
        .shared
        .tracking
        .prefixes_of(id)
        .into_iter()
        .map(Frame::Bulk)
        .collect();
    Frame::Map(vec![
        (Frame::bulk("flags"), Frame::Set(flags)),
        (
            Frame::bulk("redirect"),
            Frame::Integer(redirect.map_or(-1, |(r, _)| r as i64)),
        ),
        (Frame::bulk("prefixes"), Frame::Array(prefixes)),
    ])
}

/// The tracking letters of a `CLIENT LIST` line's `flags=` (`t`, `R` for a broken
/// redirection, `B` for broadcast) and its `redir=` value.
pub(crate) fn list_fields(ctx: &Ctx<'_>, id: u64) -> (String, i64) {
    match ctx.shared.tracking.list_info(id) {
        Some((redirect, broken, bcast)) => {
            let mut f = String::from("t");
            if broken {
                f.push('R');
            }
            if bcast {
                f.push('B');
            }
            (f, redirect as i64)
        }
        None => (String::new(), -1),
    }
}
