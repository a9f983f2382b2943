//! The shebang line of an `EVAL` script (`#!lua flags=no-writes,allow-oom`), Redis 7's way
//! for a script to declare what it does, as a function declares it when it registers.
//!
//! A script without a shebang runs in "compatibility mode", as every script did before Redis
//! 7: the server learns what it does only from the commands it calls. A script with one is
//! judged before it runs by its declared flags: one that may write is a write command (so a
//! read-only replica, `min-replicas-to-write`, `CLIENT PAUSE WRITE` and `maxmemory` refuse it
//! up front, never halfway), and one declared `no-writes` runs read-only and may be sent with
//! `EVAL_RO`.

use crate::command::{DENYOOM, MAY_REPLICATE, STALE, WRITE};

/// What a script or function declared about itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ScriptFlags {
    /// No shebang: judged by the commands it calls, not by declarations.
    pub(crate) compat: bool,
    /// `no-writes`: only reads; runs read-only, may be sent with `*_RO`.
    pub(crate) no_writes: bool,
    /// `allow-oom`: may run (and write) while used memory is over `maxmemory`.
    pub(crate) allow_oom: bool,
    /// `allow-stale`: may run on a replica whose link to its master is down.
    pub(crate) allow_stale: bool,
    /// `no-cluster`: refuses to run on a cluster node (latchkey never is one).
    pub(crate) no_cluster: bool,
    /// `allow-cross-slot-keys`: may touch keys of several slots (no cluster here: no effect).
    pub(crate) allow_cross_slot_keys: bool,
}

impl ScriptFlags {
    /// The flags of a script without a shebang.
    pub(crate) const COMPAT: ScriptFlags = ScriptFlags {
        compat: true,
        no_writes: false,
        allow_oom: false,
        allow_stale: false,
        no_cluster: false,
        allow_cross_slot_keys: false,
    };

    /// Sets the flag named `name` (as a shebang or `redis.register_function` spells it);
    /// false when there is no such flag.
    pub(crate) fn set(&mut self, name: &[u8]) -> bool {
        match name {
            b"no-writes" => self.no_writes = true,
            b"allow-oom" => self.allow_oom = true,
            b"allow-stale" => self.allow_stale = true,
            b"no-cluster" => self.no_cluster = true,
            b"allow-cross-slot-keys" => self.allow_cross_slot_keys = true,
            _ => return false,
        }
        true
    }

    /// The flags of the command that runs it (`EVAL`, `FCALL`, ...), given the command's own:
    /// a script that declared its flags is a write command unless `no-writes`, may be
    /// refused for memory unless `allow-oom` or `no-writes`, and runs on a stale replica only
    /// with `allow-stale`; whether it sends anything down the replication stream is then
    /// known (writes), not a "maybe". A script in compatibility mode keeps the command's.
    pub(crate) fn command_flags(self, command: u32) -> u32 {
        if self.compat {
            return command;
        }
        let mut flags = command & !(STALE | DENYOOM | WRITE | MAY_REPLICATE);
        if !self.allow_oom && !self.no_writes {
            flags |= DENYOOM;
        }
        if !self.no_writes {
            flags |= WRITE;
        }
        if self.allow_stale {
            flags |= STALE;
        }
        flags
    }
}

/// Reads the shebang at the start of `body`, if any: the flags it declares and where the
/// Lua source starts (at the newline that ends the shebang, so line numbers stay right).
/// The error is Redis's text, to be sent after `ERR `.
pub(crate) fn parse(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((ScriptFlags::COMPAT, 0));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    // Redis splits the line as it splits an inline command (`sdssplitargs`).
    let Some(parts) = crate::codec::split_args(&body[..end]) else {
        return Err("Invalid engine in script shebang".into());
    };
    let Some((engine, options)) = parts.split_first() else {
        return Err("Invalid engine in script shebang".into());
    };
    if &engine[..] != b"#!lua" {
        return Err(format!(
            "Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(engine)
        ));
    }
    let mut flags = ScriptFlags::default();
    for option in options {
        let Some(list) = option.strip_prefix(b"flags=") else {
            return Err(format!(
                "Unknown lua shebang option: {}",
                String::from_utf8_lossy(option)
            ));
        };
        if list.is_empty() {
            continue;
        }
        for name in list.split(|&b| b == b',') {
            if !flags.set(name) {
                return Err(format!(
                    "Unexpected flag in script shebang: {}",
                    String::from_utf8_lossy(name)
                ));
            }
        }
    }
    Ok((flags, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebangs_parse_as_redis_parses_them() {
        assert_eq!(parse(b"return 1"), Ok((ScriptFlags::COMPAT, 0)));
        assert_eq!(parse(b"#!lua\nreturn 1"), Ok((ScriptFlags::default(), 5)));
        let (f, n) = parse(b"#!lua  flags=no-writes,allow-oom\nreturn 1").unwrap();
        assert!(f.no_writes && f.allow_oom && !f.compat && n == 32);
        let (f, _) = parse(b"#!lua \"flags=no-writes\"\nreturn 1").unwrap();
        assert!(f.no_writes);
        assert_eq!(
            parse(b"#!lua flags=\nreturn 1").unwrap().0,
            ScriptFlags::default()
        );
        let err = |b: &[u8]| parse(b).unwrap_err();
        assert_eq!(err(b"#!lua return 1"), "Invalid script shebang");
        assert_eq!(
            err(b"#!lua \"x\nreturn 1"),
            "Invalid engine in script shebang"
        );
        assert_eq!(
            err(b"#!\nreturn 1"),
            "Unexpected engine in script shebang: #!"
        );
        assert_eq!(
            err(b"#!not-lua\n"),
            "Unexpected engine in script shebang: #!not-lua"
        );
        assert_eq!(
            err(b"#!lua badger=data\n"),
            "Unknown lua shebang option: badger=data"
        );
        assert_eq!(
            err(b"#!lua flags=no-writes,,allow-oom\n"),
            "Unexpected flag in script shebang: "
        );
    }

    #[test]
    fn declared_flags_decide_the_command_flags() {
        let eval = crate::command::MAY_REPLICATE | crate::command::NOSCRIPT;
        assert_eq!(ScriptFlags::COMPAT.command_flags(eval), eval);
        let writes = ScriptFlags::default().command_flags(eval);
        assert!(writes & WRITE != 0 && writes & DENYOOM != 0 && writes & MAY_REPLICATE == 0);
        let reads = ScriptFlags {
            no_writes: true,
            ..ScriptFlags::default()
        }
        .command_flags(eval);
        assert!(reads & (WRITE | DENYOOM | MAY_REPLICATE) == 0);
        assert!(reads & crate::command::NOSCRIPT != 0);
    }
}
