//! ACL users, as Redis 7.0 has them: who may connect ([`Acl::authenticate`]), what each
//! user may run, on which keys and channels ([`User::check`]), the rules of `ACL SETUSER`
//! ([`Acl::set_user`]), their description for `ACL LIST` and `ACL GETUSER`, and the ACL
//! log ([`log`]).
//!
//! Every connection starts as the `default` user (`nopass`, `+@all ~* &*`, or the
//! `requirepass` password). A user's rules are replaced whole when `ACL SETUSER` changes
//! them (rules apply left to right to a copy; an error leaves the user unchanged), so a
//! command reads one consistent set. The common case costs one atomic load per command: a
//! user allowed every command, key and channel is flagged [`User::unrestricted`], and the
//! dispatcher checks nothing else.
//!
//! The rules work on Redis's own command table (`acl/table.rs`, generated from
//! redis-server 7.0.15): `+cluster|info` is a valid rule here though latchkey runs no
//! `CLUSTER`, and `ACL LIST` describes a user by counting commands per category over that
//! whole table, as Redis does, so the description is Redis's to the byte.

pub(crate) mod commands;
pub(crate) mod log;
mod spec;
mod table;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use sha2::{Digest, Sha256};

use commands::{all, Command, CONTAINER, NO_AUTH, NO_PARENT, PATTERN, R, W};

/// The user every connection starts as.
pub(crate) const DEFAULT_USER: &[u8] = b"default";

// User flags, in the order `ACL LIST` prints them.
const ENABLED: u8 = 1;
const DISABLED: u8 = 2;
const NOPASS: u8 = 4;
const SKIP_SANITIZE: u8 = 8;
const SANITIZE: u8 = 16;
const USER_FLAGS: &[(u8, &str)] = &[
    (ENABLED, "on"),
    (DISABLED, "off"),
    (NOPASS, "nopass"),
    (SKIP_SANITIZE, "skip-sanitize-payload"),
    (SANITIZE, "sanitize-payload"),
];

/// Why a command was refused: Redis's `ACL_DENIED_*`, ordered as Redis ranks them when
/// several selectors refuse for different reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Denied {
    /// The command (or subcommand) is not allowed.
    Command,
    /// The key at this argument position is not allowed.
    Key(usize),
    /// The channel at this argument position is not allowed.
    Channel(usize),
}

impl Denied {
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(i) => (2, i),
            Denied::Channel(i) => (4, i),
        }
    }

    /// Redis's `getAclErrorMessage`: what a script's caller reads after "The user executing
    /// the script ".
    pub(crate) fn message(self) -> &'static str {
        match self {
            Denied::Command => "can't run this command or subcommand",
            Denied::Key(_) => {
                "can't access at least one of the keys mentioned in the command arguments"
            }
            Denied::Channel(_) => "can't publish to the channel mentioned in the command",
        }
    }

    /// Why `EXEC` refuses a queued command the user may no longer run.
    pub(crate) fn exec_reason(self) -> &'static str {
        match self {
            Denied::Command => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        }
    }

    /// The `-NOPERM` error the dispatcher answers for command `name` (a full name,
    /// `config|get`).
    pub(crate) fn noperm(self, name: &str) -> String {
        match self {
            Denied::Command => {
                format!("NOPERM this user has no permissions to run the '{name}' command")
            }
            Denied::Key(_) => {
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .to_string()
            }
            Denied::Channel(_) => {
                "NOPERM this user has no permissions to access one of the channels used as arguments"
                    .to_string()
            }
        }
    }
}

/// One key pattern: `~p` (read and write), `%R~p`, `%W~p`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyPattern {
    access: u8,
    pattern: Bytes,
}

/// What one selector allows: the root one (the rules outside parentheses) or a `(...)`.
#[derive(Debug, Clone)]
struct Selector {
    root: bool,
    all_keys: bool,
    all_channels: bool,
    all_commands: bool,
    /// One bit per command id, plus the last bit: "future commands" (`+@all`).
    bits: Vec<u64>,
    /// Redis's `allowed_firstargs`: `+select|0` allows `SELECT 0` of a denied `SELECT`.
    first_args: Vec<(usize, Vec<String>)>,
    keys: Vec<KeyPattern>,
    channels: Vec<Bytes>,
}

/// Why a rule was refused: Redis's `errno` of `ACLSetUser`, whose text is
/// [`RuleError::text`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RuleError {
    NoEntry,
    Syntax,
    KeysAfterAll,
    ChannelsAfterAll,
    NoSuchPassword,
    BadHash,
    SubcommandFirstArg,
}

impl RuleError {
    fn text(self) -> &'static str {
        match self {
            RuleError::NoEntry => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeysAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelsAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::SubcommandFirstArg => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

fn future_bit() -> usize {
    commands::count()
}

fn words() -> usize {
    (commands::count() + 1).div_ceil(64)
}

impl Selector {
    fn new(root: bool) -> Selector {
        Selector {
            root,
            all_keys: false,
            all_channels: false,
            all_commands: false,
            bits: vec![0; words()],
            first_args: Vec::new(),
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.bits[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.bits[id / 64] |= 1 << (id % 64);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
            self.all_commands = false;
        }
    }

    /// Redis's `ACLChangeSelectorPerm`: a command, and a container's subcommands with it.
    fn change(&mut self, id: usize, on: bool) {
        self.set_bit(id, on);
        self.first_args.retain(|(i, _)| *i != id);
        for sub in commands::subcommands(id) {
            self.set_bit(sub, on);
        }
    }

    fn set_category(&mut self, flag: u32, on: bool) {
        for (id, cmd) in all().iter().enumerate() {
            if cmd.categories & flag != 0 {
                self.change(id, on);
            }
        }
    }

    fn all(&mut self, on: bool) {
        let fill = if on { u64::MAX } else { 0 };
        self.bits.iter_mut().for_each(|w| *w = fill);
        self.all_commands = on;
        self.first_args.clear();
    }

    /// Redis's `ACLSetSelector`: one rule about commands, keys or channels.
    fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("allkeys") || is("~*") {
            self.all_keys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.keys.clear();
        } else if is("allchannels") || is("&*") {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.all(true);
        } else if is("nocommands") || is("-@all") {
            self.all(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.all_keys {
                return Err(RuleError::KeysAfterAll);
            }
            let mut access = 0;
            let mut offset = 1;
            if op[0] == b'%' {
                loop {
                    match op.get(offset).map(u8::to_ascii_uppercase) {
                        Some(b'R') if access & R == 0 => access |= R,
                        Some(b'W') if access & W == 0 => access |= W,
                        Some(b'~') => {
                            offset += 1;
                            break;
                        }
                        None => break,
                        _ => return Err(RuleError::Syntax),
                    }
                    offset += 1;
                }
                // `%~k` and `%` name no access (the Debian build of 7.0.15 compared against
                // carries the fix of CVE-2024-51741, which refuses them).
                if access == 0 {
                    return Err(RuleError::Syntax);
                }
            } else {
                access = R | W;
            }
            let pattern = &op[offset..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.keys.iter_mut().find(|k| k.pattern == pattern) {
                Some(k) => k.access |= access,
                None => self.keys.push(KeyPattern {
                    access,
                    pattern: Bytes::copy_from_slice(pattern),
                }),
            }
            self.all_keys = false;
        } else if op[0] == b'&' {
            if self.all_channels {
                return Err(RuleError::ChannelsAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(Bytes::copy_from_slice(pattern));
            }
            self.all_channels = false;
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            self.allow(&op[1..])?;
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let id = commands::lookup(&op[1..]).ok_or(RuleError::NoEntry)?;
            self.change(id, false);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let flag = category(&op[2..]).ok_or(RuleError::NoEntry)?;
            self.set_category(flag, op[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// `+command`, `+container|sub`, `+command|first-arg`.
    fn allow(&mut self, name: &[u8]) -> Result<(), RuleError> {
        let Some(bar) = name.iter().rposition(|c| *c == b'|') else {
            let id = commands::lookup(name).ok_or(RuleError::NoEntry)?;
            self.change(id, true);
            return Ok(());
        };
        let (base, sub) = (&name[..bar], &name[bar + 1..]);
        let id = commands::lookup(base).ok_or(RuleError::NoEntry)?;
        let cmd = &all()[id];
        if cmd.parent != NO_PARENT {
            return Err(RuleError::SubcommandFirstArg);
        }
        if sub.is_empty() {
            return Err(RuleError::Syntax);
        }
        if cmd.flags & CONTAINER != 0 {
            let id = commands::lookup(name).ok_or(RuleError::NoEntry)?;
            self.change(id, true);
        } else {
            let sub = String::from_utf8_lossy(sub).into_owned();
            match self.first_args.iter_mut().find(|(i, _)| *i == id) {
                Some((_, subs)) => {
                    if !subs.iter().any(|s| s.eq_ignore_ascii_case(&sub)) {
                        subs.push(sub);
                    }
                }
                None => self.first_args.push((id, vec![sub])),
            }
        }
        Ok(())
    }

    fn first_args_of(&self, id: usize) -> Option<&[String]> {
        self.first_args
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, s)| s.as_slice())
    }

    /// Redis's `ACLSelectorCheckCmd`.
    fn check(
        &self,
        id: usize,
        args: &[Bytes],
        keys: &mut Option<Vec<commands::KeyRef>>,
    ) -> Result<(), Denied> {
        let cmd = &all()[id];
        if !self.all_commands && cmd.flags & NO_AUTH == 0 && !self.bit(id) {
            let at = if cmd.parent != NO_PARENT { 2 } else { 1 };
            let allowed = args.len() >= 2
                && self.first_args_of(id).is_some_and(|subs| {
                    args.get(at)
                        .is_some_and(|a| subs.iter().any(|s| a.eq_ignore_ascii_case(s.as_bytes())))
                });
            if !allowed {
                return Err(Denied::Command);
            }
        }
        if !self.all_keys && commands::has_keys(id) {
            let keys = keys.get_or_insert_with(|| commands::keys(id, args));
            for &(pos, access) in keys.iter() {
                if !self.key_allowed(&args[pos], access) {
                    return Err(Denied::Key(pos));
                }
            }
        }
        if !self.all_channels {
            for (pos, flags) in commands::channels(id, args) {
                if !channel_allowed(&self.channels, &args[pos], flags & PATTERN != 0) {
                    return Err(Denied::Channel(pos));
                }
            }
        }
        Ok(())
    }

    fn key_allowed(&self, key: &[u8], access: u8) -> bool {
        self.all_keys
            || self.keys.iter().any(|p| {
                p.access & access == access && crate::glob::matches(&p.pattern, key, false)
            })
    }

    /// Redis's `ACLDescribeSelector`: keys, channels, then the command rules.
    fn describe(&self) -> String {
        let mut out = String::new();
        if self.all_keys {
            out.push_str("~* ");
        } else {
            for k in &self.keys {
                out.push_str(&pattern_text(k));
                out.push(' ');
            }
        }
        if self.all_channels {
            out.push_str("&* ");
        } else {
            out.push_str("resetchannels ");
            for c in &self.channels {
                out.push('&');
                out.push_str(&String::from_utf8_lossy(c));
                out.push(' ');
            }
        }
        out.push_str(&self.describe_commands());
        out
    }

    /// Redis's `ACLDescribeSelectorCommandRules`: `+@all` or `-@all`, the categories that fit
    /// best (greedily, in category order), then the single commands that still differ.
    fn describe_commands(&self) -> String {
        let mut rules = String::new();
        let mut fake = Selector::new(false);
        let additive = !self.bit(future_bit());
        if additive {
            rules.push_str("-@all ");
            fake.all(false);
        } else {
            rules.push_str("+@all ");
            fake.all(true);
        }
        let mut temp = Selector::new(false);
        temp.bits = self.bits.clone();
        let mut applied = [false; commands::CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut min_diff, mut max_same) = (usize::MAX, 0);
            for (j, _) in commands::CATEGORIES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (mut on, mut off) = (0, 0);
                for (id, cmd) in all().iter().enumerate() {
                    if cmd.categories & commands::c(j as u32) != 0 {
                        if temp.bit(id) {
                            on += 1;
                        } else {
                            off += 1;
                        }
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                    best = Some(j);
                    min_diff = diff;
                    max_same = same;
                }
            }
            let Some(j) = best else { break };
            let flag = commands::c(j as u32);
            fake.set_category(flag, additive);
            temp.set_category(flag, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(commands::CATEGORIES[j]);
            rules.push(' ');
            applied[j] = true;
        }
        for (id, cmd) in all().iter().enumerate() {
            let mine = self.bit(id);
            if mine != fake.bit(id) {
                rules.push(if mine { '+' } else { '-' });
                rules.push_str(cmd.name);
                rules.push(' ');
                fake.change(id, mine);
            }
            // A container's first arguments come after its subcommands in Redis's walk; a
            // container has none (`+config|x` names a subcommand), so the order is the same.
            if !mine {
                for arg in self.first_args_of(id).unwrap_or_default() {
                    rules.push_str(&format!("+{}|{arg} ", cmd.name));
                }
            }
        }
        rules.pop();
        rules
    }
}

fn pattern_text(k: &KeyPattern) -> String {
    let prefix = match k.access {
        a if a == R | W => "~",
        R => "%R~",
        _ => "%W~",
    };
    format!("{prefix}{}", String::from_utf8_lossy(&k.pattern))
}

/// Redis's `ACLCheckChannelAgainstList`: a channel matches the user's patterns as a glob; a
/// `PSUBSCRIBE` pattern only as the same text.
fn channel_allowed(list: &[Bytes], channel: &[u8], is_pattern: bool) -> bool {
    list.iter().any(|p| {
        if is_pattern {
            p == channel
        } else {
            crate::glob::matches(p, channel, false)
        }
    })
}

/// Whether `s` has a space or a NUL (refused in user names and patterns).
pub(crate) fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|c| *c == 0 || matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'))
}

/// The bit of a category name (case-insensitive), `None` when there is no such category.
pub(crate) fn category(name: &[u8]) -> Option<u32> {
    commands::CATEGORIES
        .iter()
        .position(|c| name.eq_ignore_ascii_case(c.as_bytes()))
        .map(|i| commands::c(i as u32))
}

/// The SHA-256 of a password, in lowercase hex: how users keep passwords.
fn hash_password(password: &[u8]) -> String {
    hex::encode(Sha256::digest(password))
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// One user's rules: flags, password hashes, selectors (the root one first).
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    flags: u8,
    passwords: Vec<String>,
    selectors: Vec<Selector>,
}

impl Rules {
    /// A new user's rules: `off`, no password, nothing allowed (but every channel when
    /// `acl-pubsub-default` is `allchannels`).
    fn new(pubsub_all: bool) -> Rules {
        let mut root = Selector::new(true);
        root.all_channels = pubsub_all;
        Rules {
            flags: DISABLED,
            passwords: Vec::new(),
            selectors: vec![root],
        }
    }

    fn root(&mut self) -> &mut Selector {
        &mut self.selectors[0]
    }

    /// Redis's `ACLSetUser`: one rule. `pubsub_all`: `acl-pubsub-default` is `allchannels`
    /// (what a new selector and `reset` start with).
    fn apply(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("on") {
            self.flags = (self.flags | ENABLED) & !DISABLED;
        } else if is("off") {
            self.flags = (self.flags | DISABLED) & !ENABLED;
        } else if is("skip-sanitize-payload") {
            self.flags = (self.flags | SKIP_SANITIZE) & !SANITIZE;
        } else if is("sanitize-payload") {
            self.flags = (self.flags | SANITIZE) & !SKIP_SANITIZE;
        } else if is("nopass") {
            self.flags |= NOPASS;
            self.passwords.clear();
        } else if is("resetpass") {
            self.flags &= !NOPASS;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.flags &= !NOPASS;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                hash_password(&op[1..])
            } else if valid_hash(&op[1..]) {
                String::from_utf8_lossy(&op[1..]).into_owned()
            } else {
                return Err(RuleError::BadHash);
            };
            let at = self
                .passwords
                .iter()
                .position(|p| *p == hash)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut selector = Selector::new(false);
            selector.all_channels = pubsub_all;
            // A selector's rules are split as Redis splits them (`sdssplitargs`); an
            // unbalanced quote splits into nothing there, which leaves the selector empty.
            let rules = crate::codec::split_args(&op[1..op.len() - 1]).unwrap_or_default();
            for rule in rules {
                selector.apply(&rule)?;
            }
            self.selectors.push(selector);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            for rule in [
                "resetpass",
                "resetkeys",
                "resetchannels",
                "off",
                "sanitize-payload",
            ] {
                self.apply(rule.as_bytes(), pubsub_all)?;
            }
            self.root().all_channels = pubsub_all;
            self.selectors.truncate(1);
            self.root().all(false);
        } else {
            self.root().apply(op)?;
        }
        Ok(())
    }

    /// Whether one selector allows everything: then no command needs a check.
    fn unrestricted(&self) -> bool {
        self.selectors
            .iter()
            .any(|s| s.all_commands && s.all_keys && s.all_channels)
    }

    /// Whether every channel is allowed by some selector.
    fn all_channels(&self) -> bool {
        self.selectors.iter().any(|s| s.all_channels)
    }

    /// Redis's `ACLDescribeUser`: the rules as `ACL LIST` prints them after the name.
    fn describe(&self) -> String {
        let mut out = String::new();
        for (flag, name) in USER_FLAGS {
            if self.flags & flag != 0 {
                out.push_str(name);
                out.push(' ');
            }
        }
        for p in &self.passwords {
            out.push('#');
            out.push_str(p);
            out.push(' ');
        }
        for s in &self.selectors {
            if s.root {
                out.push_str(&s.describe());
            } else {
                out.push_str(&format!(" ({})", s.describe()));
            }
        }
        out
    }

    /// Redis's `ACLCheckAllUserCommandPerm`: allowed when one selector allows; otherwise the
    /// most relevant refusal.
    fn check(&self, id: usize, args: &[Bytes]) -> Result<(), Denied> {
        let mut keys = None;
        let mut relevant = Denied::Command;
        for s in &self.selectors {
            match s.check(id, args, &mut keys) {
                Ok(()) => return Ok(()),
                Err(d) if d.rank() > relevant.rank() => relevant = d,
                Err(_) => {}
            }
        }
        Err(relevant)
    }
}

/// Redis's `ACLMergeSelectorArguments`: a selector spread over several arguments
/// (`(~a` `+get)`) becomes one; `Err(index)` when a parenthesis is left open.
fn merge_selectors(args: &[Bytes]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in args.iter().enumerate() {
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().expect("open").1);
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.to_vec()));
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((j, _)) => Err(j),
        None => Ok(out),
    }
}

/// One ACL user: a name and the rules it has now.
#[derive(Debug)]
pub(crate) struct User {
    /// The user's name.
    pub name: Bytes,
    rules: RwLock<Arc<Rules>>,
    /// Whether the rules allow every command, key and channel (one load per command).
    unrestricted: AtomicBool,
}

impl User {
    fn new(name: Bytes, rules: Rules) -> User {
        let unrestricted = AtomicBool::new(rules.unrestricted());
        User {
            name,
            rules: RwLock::new(Arc::new(rules)),
            unrestricted,
        }
    }

    /// Whether the user may run anything: the dispatcher's fast path.
    #[inline]
    pub(crate) fn unrestricted(&self) -> bool {
        self.unrestricted.load(Ordering::Relaxed)
    }

    fn rules(&self) -> Arc<Rules> {
        self.rules.read().clone()
    }

    fn replace(&self, rules: Rules) {
        self.unrestricted
            .store(rules.unrestricted(), Ordering::Relaxed);
        *self.rules.write() = Arc::new(rules);
    }

    /// Whether the user may run `args` (a command Redis's table has: [`commands::of_args`]
    /// gives its id); the refusal otherwise.
    pub(crate) fn check(&self, id: usize, args: &[Bytes]) -> Result<(), Denied> {
        if self.unrestricted() {
            return Ok(());
        }
        self.rules().check(id, args)
    }

    /// Whether some selector allows command `id` with these arguments and reading every key
    /// (`allkeys`, `~*` or `%R~*`): Redis's `ACLUserCheckCmdWithUnrestrictedKeyAccess`, which
    /// `SORT ... BY|GET` asks, since the keys its patterns read are not in the command.
    pub(crate) fn all_keys_readable(&self, id: usize, args: &[Bytes]) -> bool {
        if self.unrestricted() {
            return true;
        }
        let rules = self.rules();
        let mut keys = None;
        rules.selectors.iter().any(|s| {
            s.check(id, args, &mut keys).is_ok()
                && (s.all_keys
                    || s.keys
                        .iter()
                        .any(|k| k.access & R == R && &k.pattern[..] == b"*"))
        })
    }

    /// Whether the user needs no password (`nopass`).
    pub(crate) fn nopass(&self) -> bool {
        self.rules().flags & NOPASS != 0
    }

    /// Whether some selector allows every command (`+@all`, `allcommands`): then commands
    /// Redis's table does not have (latchkey's own) run too.
    pub(crate) fn allows_every_command(&self) -> bool {
        self.rules().selectors.iter().any(|s| s.all_commands)
    }
}

/// What `ACL SETUSER` did to an existing user's channels: the clients of that user
/// subscribed to channels it lost must be disconnected (Redis's
/// `ACLKillPubsubClientsIfNeeded`).
#[derive(Debug)]
pub(crate) struct ChannelsRevoked {
    /// The user whose channels shrank.
    pub user: Arc<User>,
}

impl ChannelsRevoked {
    /// Whether a client of the user subscribed to these may stay.
    pub(crate) fn keeps(
        &self,
        channels: impl IntoIterator<Item = Bytes>,
        patterns: impl IntoIterator<Item = Bytes>,
    ) -> bool {
        let rules = self.user.rules();
        let upcoming: Vec<Bytes> = rules
            .selectors
            .iter()
            .flat_map(|s| s.channels.iter().cloned())
            .collect();
        patterns
            .into_iter()
            .all(|p| channel_allowed(&upcoming, &p, true))
            && channels
                .into_iter()
                .all(|c| channel_allowed(&upcoming, &c, false))
    }
}

/// The server's users and ACL log.
#[derive(Debug)]
pub(crate) struct Acl {
    users: RwLock<BTreeMap<Bytes, Arc<User>>>,
    default: Arc<User>,
    /// What Redis's clients with no user run as (`c->user == NULL`): the link to our master
    /// and the AOF's loader, which obey whatever they carry. In no list; `CLIENT LIST`
    /// names it `(superuser)`, as Redis does.
    superuser: Arc<User>,
    /// Whether a new connection must authenticate: the default user has a password or is
    /// off (Redis's `authRequired`).
    auth_required: AtomicBool,
    /// `acl-pubsub-default` is `allchannels`.
    pubsub_all: AtomicBool,
    /// The ACL log.
    pub log: Mutex<log::Log>,
}

impl Default for Acl {
    fn default() -> Self {
        let rules = default_rules(false);
        let superuser = Arc::new(User::new(Bytes::from_static(b"(superuser)"), rules.clone()));
        let default = Arc::new(User::new(Bytes::from_static(DEFAULT_USER), rules));
        let mut users = BTreeMap::new();
        users.insert(default.name.clone(), default.clone());
        Acl {
            users: RwLock::new(users),
            default,
            superuser,
            auth_required: AtomicBool::new(false),
            pubsub_all: AtomicBool::new(false),
            log: Mutex::new(log::Log::default()),
        }
    }
}

impl Acl {
    /// The `default` user.
    pub(crate) fn default_user(&self) -> &Arc<User> {
        &self.default
    }

    /// The user of the server's own clients (see [`Acl`]'s `superuser`).
    pub(crate) fn superuser(&self) -> &Arc<User> {
        &self.superuser
    }

    /// A user by name.
    pub(crate) fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    fn pubsub_all(&self) -> bool {
        self.pubsub_all.load(Ordering::Relaxed)
    }

    /// `acl-pubsub-default`: whether new users and selectors (and `reset`) start with every
    /// channel (`allchannels`) or none (`resetchannels`, 7.0's default).
    pub(crate) fn set_pubsub_default(&self, all_channels: bool) {
        self.pubsub_all.store(all_channels, Ordering::Relaxed);
    }

    /// Whether a connection must authenticate before it runs commands.
    #[inline]
    pub(crate) fn auth_required(&self) -> bool {
        self.auth_required.load(Ordering::Acquire)
    }

    fn refresh_auth_required(&self) {
        let rules = self.default.rules();
        let open = rules.flags & NOPASS != 0 && rules.flags & DISABLED == 0;
        self.auth_required.store(!open, Ordering::Release);
    }

    /// `requirepass`: the default user's password (none: `nopass`), as Redis's
    /// `ACLUpdateDefaultUserPassword`.
    pub(crate) fn set_default_password(&self, password: &[u8]) {
        let mut rules = (*self.default.rules()).clone();
        let _ = rules.apply(b"resetpass", false);
        if password.is_empty() {
            let _ = rules.apply(b"nopass", false);
        } else {
            let mut op = b">".to_vec();
            op.extend_from_slice(password);
            let _ = rules.apply(&op, false);
        }
        self.default.replace(rules);
        self.refresh_auth_required();
    }

    /// Redis's `ACLCheckUserCredentials`: the user, when the name and password open it.
    pub(crate) fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        let user = self.user(name)?;
        let rules = user.rules();
        if rules.flags & DISABLED != 0 {
            return None;
        }
        if rules.flags & NOPASS != 0 {
            return Some(user.clone());
        }
        let hash = hash_password(password);
        let mut ok = false;
        for p in &rules.passwords {
            ok |= constant_time_eq(p.as_bytes(), hash.as_bytes());
        }
        ok.then(|| user.clone())
    }

    /// `ACL SETUSER name rules...`: all the rules or none. `Ok` carries the user's channel
    /// loss when an existing user's clients may have to go.
    pub(crate) fn set_user(
        &self,
        name: &[u8],
        args: &[Bytes],
    ) -> Result<Option<ChannelsRevoked>, String> {
        let ops = merge_selectors(args).map_err(|j| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&args[j])
            )
        })?;
        let existing = self.user(name);
        let mut rules = match &existing {
            Some(u) => (*u.rules()).clone(),
            None => Rules::new(self.pubsub_all()),
        };
        for op in &ops {
            if let Err(e) = rules.apply(op, self.pubsub_all()) {
                return Err(format!(
                    "Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(op),
                    e.text()
                ));
            }
        }
        let revoked = match existing {
            Some(user) => {
                let before = user.rules();
                let lost = !rules.all_channels() && !superset(&rules, &before);
                user.replace(rules);
                lost.then_some(ChannelsRevoked { user })
            }
            None => {
                let name = Bytes::copy_from_slice(name);
                self.users
                    .write()
                    .insert(name.clone(), Arc::new(User::new(name, rules)));
                None
            }
        };
        self.refresh_auth_required();
        Ok(revoked)
    }

    /// Redis's `ACLLoadFromFile` (`ACL LOAD`, and `aclfile` at start): the users of the file
    /// replace every user, all of them or none. `Ok` gives the users replaced (their clients
    /// must go; the default user stays the same user, with the file's rules or its
    /// defaults), `Err` the errors, as Redis words them.
    pub(crate) fn load_file(&self, path: &str) -> Result<Vec<Arc<User>>, String> {
        let text = std::fs::read(path).map_err(|e| {
            format!(
                "Error loading ACLs, opening file '{path}': {}",
                strerror(&e)
            )
        })?;
        let pubsub_all = self.pubsub_all();
        let mut errors = String::new();
        let mut loaded: BTreeMap<Bytes, Rules> = BTreeMap::new();
        for (i, line) in text.split(|c| *c == b'\n').enumerate() {
            let n = i + 1;
            let line = trim(line, b" \t\r\n");
            if line.is_empty() {
                continue;
            }
            let argv: Vec<Bytes> = line
                .split(|c| *c == b' ')
                .map(Bytes::copy_from_slice)
                .collect();
            if &argv[0][..] != b"user" || argv.len() < 2 {
                errors.push_str(&format!(
                    "{path}:{n} should start with user keyword followed by the username. "
                ));
                continue;
            }
            let name = &argv[1];
            if has_spaces(name) {
                errors.push_str(&format!(
                    "'{path}:{n}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            if loaded.contains_key(name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {n}. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            let mut rules = Rules::new(pubsub_all);
            match merge_selectors(&argv[2..]) {
                Err(_) => errors.push_str(&format!(
                    "{path}:{n}: Unmatched parenthesis in selector definition."
                )),
                Ok(ops) => {
                    let mut reported = false;
                    for op in ops {
                        let op = trim(&op, b"\t\r\n");
                        match rules.apply(op, pubsub_all) {
                            Ok(()) => {}
                            Err(RuleError::NoEntry) => errors.push_str(&format!(
                                "{path}:{n}: Error in applying operation '{}': {}. ",
                                String::from_utf8_lossy(op),
                                RuleError::NoEntry.text()
                            )),
                            Err(e) if !reported => {
                                errors.push_str(&format!("{path}:{n}: {}. ", e.text()));
                                reported = true;
                            }
                            Err(_) => {}
                        }
                    }
                }
            }
            loaded.insert(name.clone(), rules);
        }
        if !errors.is_empty() {
            errors.push_str(
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
            );
            return Err(errors);
        }
        let default_rules = loaded
            .remove(DEFAULT_USER)
            .unwrap_or_else(|| default_rules(pubsub_all));
        self.default.replace(default_rules);
        let mut users: BTreeMap<Bytes, Arc<User>> = loaded
            .into_iter()
            .map(|(name, rules)| (name.clone(), Arc::new(User::new(name, rules))))
            .collect();
        users.insert(self.default.name.clone(), self.default.clone());
        let old = std::mem::replace(&mut *self.users.write(), users);
        self.refresh_auth_required();
        Ok(old
            .into_values()
            .filter(|u| !Arc::ptr_eq(u, &self.default))
            .collect())
    }

    /// Redis's `ACLSaveToFile` (`ACL SAVE`): every user as `ACL LIST` shows it, one a line,
    /// written to a temporary file renamed over `path`.
    pub(crate) fn save_file(&self, path: &str) -> std::io::Result<()> {
        let mut text = String::new();
        for u in self.users() {
            text.push_str(&Acl::list_line(&u));
            text.push('\n');
        }
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let tmp = format!("{path}.tmp-{}-{millis}", std::process::id());
        let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// `ACL DELUSER`: removes the users, returning those that existed.
    pub(crate) fn delete(&self, names: &[Bytes]) -> Vec<Arc<User>> {
        let mut users = self.users.write();
        names.iter().filter_map(|n| users.remove(&n[..])).collect()
    }

    /// Every user, by name (Redis's order: the bytes of the names).
    pub(crate) fn users(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// `ACL LIST`'s line for a user.
    pub(crate) fn list_line(user: &User) -> String {
        format!(
            "user {} {}",
            String::from_utf8_lossy(&user.name),
            user.rules().describe()
        )
    }

    /// `ACL GETUSER`'s fields for a user.
    pub(crate) fn describe(user: &User) -> UserView {
        let rules = user.rules();
        let selector = |s: &Selector| SelectorView {
            commands: s.describe_commands(),
            keys: if s.all_keys {
                "~*".to_string()
            } else {
                s.keys
                    .iter()
                    .map(pattern_text)
                    .collect::<Vec<_>>()
                    .join(" ")
            },
            channels: if s.all_channels {
                "&*".to_string()
            } else {
                s.channels
                    .iter()
                    .map(|c| format!("&{}", String::from_utf8_lossy(c)))
                    .collect::<Vec<_>>()
                    .join(" ")
            },
        };
        UserView {
            flags: USER_FLAGS
                .iter()
                .filter(|(f, _)| rules.flags & f != 0)
                .map(|(_, n)| *n)
                .collect(),
            passwords: rules.passwords.clone(),
            root: selector(&rules.selectors[0]),
            selectors: rules.selectors[1..].iter().map(selector).collect(),
        }
    }
}

/// `s` without the bytes of `set` at either end (Redis's `sdstrim`).
fn trim<'a>(s: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = s.iter().position(|c| !set.contains(c)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|c| !set.contains(c))
        .map_or(start, |e| e + 1);
    &s[start..end.max(start)]
}

/// The C library's text for an I/O error (`strerror`), as Redis prints it.
fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Redis's `ACLCreateDefaultUser`: `on nopass ~* &* +@all`.
fn default_rules(pubsub_all: bool) -> Rules {
    let mut rules = Rules::new(pubsub_all);
    for r in ["+@all", "~*", "&*", "on", "nopass"] {
        rules
            .apply(r.as_bytes(), pubsub_all)
            .expect("the default user's rules");
    }
    rules
}

/// Whether `new`'s channels cover every channel `old` allowed (then no subscriber loses).
fn superset(new: &Rules, old: &Rules) -> bool {
    let upcoming: Vec<&Bytes> = new.selectors.iter().flat_map(|s| &s.channels).collect();
    old.selectors
        .iter()
        .all(|s| !s.all_channels && s.channels.iter().all(|c| upcoming.contains(&c)))
}

/// `ACL GETUSER`'s view of a user.
#[derive(Debug)]
pub(crate) struct UserView {
    /// The flags, in Redis's order.
    pub flags: Vec<&'static str>,
    /// The password hashes.
    pub passwords: Vec<String>,
    /// The root selector.
    pub root: SelectorView,
    /// The other selectors.
    pub selectors: Vec<SelectorView>,
}

/// One selector as `ACL GETUSER` shows it.
#[derive(Debug)]
pub(crate) struct SelectorView {
    /// The command rules.
    pub commands: String,
    /// The key patterns.
    pub keys: String,
    /// The channel patterns.
    pub channels: String,
}

/// Compares two byte strings in time that depends only on their lengths, as Redis's
/// `time_independent_strcmp` does.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The names of the commands of a category, with their subcommands (`ACL CAT name`).
pub(crate) fn category_commands(flag: u32) -> impl Iterator<Item = &'static str> {
    all()
        .iter()
        .filter(move |c: &&Command| c.categories & flag != 0)
        .map(|c| c.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn describe(rules: &[&str]) -> String {
        let mut r = Rules::new(false);
        for op in rules {
            r.apply(op.as_bytes(), false).unwrap();
        }
        r.describe()
    }

    #[test]
    fn rules_are_described_as_redis_describes_them() {
        assert_eq!(describe(&[]), "off resetchannels -@all");
        assert_eq!(
            describe(&["on", "nopass", "+@all", "~*", "&*"]),
            "on nopass ~* &* +@all"
        );
        assert_eq!(
            describe(&["on", "~a*", "%R~b", "&ch", "+@read", "-get"]),
            "on ~a* %R~b resetchannels &ch -@all +@read -get"
        );
        assert_eq!(
            describe(&["+@all", "-@dangerous"]),
            "off resetchannels +@all -@dangerous"
        );
        assert_eq!(
            describe(&["-@all", "+select|0"]),
            "off resetchannels -@all +select|0"
        );
    }

    #[test]
    fn errors_leave_the_rules_unchanged_and_name_the_rule() {
        let acl = Acl::default();
        acl.set_user(b"u", &[Bytes::from_static(b"on")]).unwrap();
        let err = acl
            .set_user(
                b"u",
                &[Bytes::from_static(b"off"), Bytes::from_static(b"+nosuch")],
            )
            .unwrap_err();
        assert_eq!(
            err,
            "Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL"
        );
        assert!(Acl::list_line(&acl.user(b"u").unwrap()).starts_with("user u on "));
    }

    #[test]
    fn a_selector_s_rules_are_split_as_redis_splits_them() {
        assert_eq!(
            describe(&["on", "(~a* \"+get\" '+set')"]),
            "on resetchannels -@all (~a* resetchannels -@all +get +set)"
        );
        // An unbalanced quote: Redis 7.0.15 adds an empty selector.
        assert_eq!(
            describe(&["(\"+get)"]),
            "off resetchannels -@all (resetchannels -@all)"
        );
    }
}
