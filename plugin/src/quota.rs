//! What a tenant's command may carry, beyond the allow-list of [`crate::namespace`]: checks
//! made on every command before it leaves the host, each answering one way a tenant could
//! otherwise hand the server (or the host) more than its share.
//!
//! - `WAIT` blocks the server's side of its connection: it must carry a timeout between 1 ms
//!   and [`Limits::max_block`], and it runs on a connection of its own ([`Route::Alone`]), so
//!   it never stalls another tenant's command or a lease renewal queued behind it;
//! - `PUBLISH`: the channel name and the message are bounded;
//! - `SET` must carry an expiry (`PX` or `EX`) of at most [`Limits::key_ttl_max`], and
//!   `PEXPIRE` may not set a longer one: every key a tenant writes this way goes away by
//!   itself, so its storage is bounded by its write rate times that TTL.
//!
//! The count and size of the arguments are checked earlier, before they are even copied out of
//! the guest (see [`crate::host`]).

use crate::limits::Limits;

/// Where a command may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// On the connection tenants share: it answers without blocking.
    Shared,
    /// On a connection of its own: it may block the server's side of it (`WAIT`).
    Alone,
}

/// The checks of this module on `args` (already allowed by the namespace, not yet rewritten);
/// the error is what the tenant is told.
pub(crate) fn check(args: &[Vec<u8>], l: &Limits) -> Result<Route, String> {
    let Some(name) = args.first() else {
        return Err("empty command".into());
    };
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    if is("wait") {
        let max = l.max_block.as_millis();
        let timeout = args.get(2).and_then(|t| int(t));
        return match timeout {
            Some(ms) if ms >= 1 && (ms as u128) <= max => Ok(Route::Alone),
            _ => Err(format!(
                "WAIT needs a timeout between 1 and {max} ms for tenants (0 would block forever)"
            )),
        };
    }
    if is("publish") {
        if let Some(ch) = args.get(1) {
            if ch.len() > l.channel_bytes {
                return Err(format!(
                    "channel name of {} bytes is over the tenant's limit of {}",
                    ch.len(),
                    l.channel_bytes
                ));
            }
        }
        if let Some(msg) = args.get(2) {
            if msg.len() > l.publish_bytes {
                return Err(format!(
                    "message of {} bytes is over the tenant's limit of {}",
                    msg.len(),
                    l.publish_bytes
                ));
            }
        }
        return Ok(Route::Shared);
    }
    let max_ms = l.key_ttl_max.as_millis();
    if is("set") {
        let mut expiry = None;
        let mut i = 3;
        while i < args.len() {
            let opt = &args[i];
            let opt_is = |n: &str| opt.eq_ignore_ascii_case(n.as_bytes());
            if opt_is("px") || opt_is("ex") {
                let unit = if opt_is("ex") { 1_000 } else { 1 };
                // A value the server cannot parse is left to it: it refuses the command.
                expiry = Some(
                    args.get(i + 1)
                        .and_then(|v| int(v))
                        .map(|v| (v as i128) * unit),
                );
                i += 2;
                continue;
            }
            if opt_is("keepttl") || opt_is("pxat") || opt_is("exat") {
                return Err(format!(
                    "SET needs PX or EX (at most {max_ms} ms) for tenants, not {}",
                    String::from_utf8_lossy(opt).to_ascii_uppercase()
                ));
            }
            i += 1;
        }
        return match expiry {
            None => Err(format!(
                "SET needs PX or EX (at most {max_ms} ms) for tenants: their keys expire"
            )),
            Some(Some(ms)) if ms > max_ms as i128 => Err(format!(
                "SET expiry of {ms} ms is over the tenant's limit of {max_ms} ms"
            )),
            Some(_) => Ok(Route::Shared),
        };
    }
    if is("pexpire") {
        if let Some(ms) = args.get(2).and_then(|v| int(v)) {
            if ms as i128 > max_ms as i128 {
                return Err(format!(
                    "PEXPIRE of {ms} ms is over the tenant's limit of {max_ms} ms"
                ));
            }
        }
    }
    Ok(Route::Shared)
}

/// The argument as a decimal integer, if it is one.
fn int(v: &[u8]) -> Option<i64> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cmd(args: &[&str]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    fn limits() -> Limits {
        Limits {
            max_block: Duration::from_millis(500),
            key_ttl_max: Duration::from_secs(10),
            publish_bytes: 4,
            channel_bytes: 3,
            ..Limits::default()
        }
    }

    #[test]
    fn wait_runs_alone_with_a_bounded_timeout_and_never_forever() {
        let l = limits();
        assert_eq!(check(&cmd(&["WAIT", "1", "100"]), &l), Ok(Route::Alone));
        for bad in ["0", "501", "-1", "x"] {
            let e = check(&cmd(&["wait", "1", bad]), &l).unwrap_err();
            assert!(e.contains("between 1 and 500 ms"), "{bad}: {e}");
        }
        assert!(check(&cmd(&["WAIT", "1"]), &l).is_err());
    }

    #[test]
    fn set_must_expire_within_the_ceiling() {
        let l = limits();
        assert_eq!(
            check(&cmd(&["SET", "k", "v", "NX", "PX", "10000"]), &l),
            Ok(Route::Shared)
        );
        assert_eq!(
            check(&cmd(&["SET", "k", "v", "EX", "10"]), &l),
            Ok(Route::Shared)
        );
        assert!(check(&cmd(&["SET", "k", "v"]), &l)
            .unwrap_err()
            .contains("needs PX or EX"));
        assert!(check(&cmd(&["SET", "k", "v", "EX", "11"]), &l)
            .unwrap_err()
            .contains("over the tenant's limit"));
        assert!(check(&cmd(&["SET", "k", "v", "KEEPTTL"]), &l).is_err());
        assert!(check(&cmd(&["SET", "k", "v", "PXAT", "1"]), &l).is_err());
        assert!(check(&cmd(&["PEXPIRE", "k", "10001"]), &l).is_err());
        assert_eq!(
            check(&cmd(&["PEXPIRE", "k", "10000"]), &l),
            Ok(Route::Shared)
        );
    }

    #[test]
    fn publish_is_bounded_in_channel_and_message() {
        let l = limits();
        assert_eq!(
            check(&cmd(&["PUBLISH", "abc", "1234"]), &l),
            Ok(Route::Shared)
        );
        assert!(check(&cmd(&["PUBLISH", "abcd", "1"]), &l).is_err());
        assert!(check(&cmd(&["PUBLISH", "a", "12345"]), &l).is_err());
    }
}
