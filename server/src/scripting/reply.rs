//! What a script returns, turned into a reply by Redis 7.0's rules, without recursion.
//!
//! A script can return a table that contains itself (`local t = {} t[1] = t return t`) or is
//! nested thousands deep. Redis converts recursively on its Lua stack and, at each value,
//! first asks for four free slots (`lua_checkstack(L, 4)`); Lua 5.1 grants at most 8000 slots,
//! so the value at which the stack runs out becomes the error `reached lua stack limit` and
//! its siblings are still converted. A cyclic table thus gives 7995 nested one-element arrays
//! around that error, byte for byte what redis-server 7.0 sends.
//!
//! This converter walks the tables on the Lua stack as Redis does (a handle per table would
//! exhaust mlua's reference slots), keeps its own work list on the heap instead of
//! recursing (8000 Rust frames would overflow the thread's stack), and counts the slots
//! Redis would be using at each value, so that the error appears at exactly the same place.
//! Every [`RAW_EVERY`] levels a finished table is written out as wire bytes, so that the
//! reply tree itself stays shallow (encoding and dropping a [`Frame`] recurse too).

use std::os::raw::c_int;

use bytes::Bytes;
use mlua::{ffi, Lua, Value};

use crate::frame::{Frame, Protocol};

/// Lua 5.1's `LUAI_MAXCSTACK`: the most slots `lua_checkstack` grants.
const MAX_SLOTS: usize = 8000;
/// The slots Redis has in use when it starts converting the value a script returned.
const TOP_SLOTS: usize = 2;
/// The slots Redis asks for at each value.
const NEEDED: usize = 4;
/// Every this many levels, a finished table becomes [`Frame::Raw`].
const RAW_EVERY: usize = 32;

thread_local! {
    /// The error replies [`lua_to_frame`] made from error tables that no call counted (see
    /// [`crate::errorstats`]), for the script's run to count: [`take_uncounted_errors`].
    static UNCOUNTED: std::cell::RefCell<Vec<Bytes>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Takes the texts of the errors converted since the last call that no call counted.
pub(crate) fn take_uncounted_errors() -> Vec<Bytes> {
    UNCOUNTED.with(|u| std::mem::take(&mut *u.borrow_mut()))
}

/// Converts what a script returned into a reply for a client speaking `proto`. `lua_resp3`
/// is the script's own protocol (`redis.setresp(3)`): under it a Lua boolean is a boolean
/// reply, under RESP2 `true` is 1 and `false` a null, as in Redis.
pub(crate) fn lua_to_frame(lua: &Lua, v: &Value, proto: Protocol, lua_resp3: bool) -> Frame {
    match v {
        Value::Table(_) => {}
        Value::Boolean(b) if lua_resp3 => return Frame::Boolean(*b),
        // Plain values need no walk.
        other => return plain(other),
    }
    let mut out = None;
    // SAFETY: the closure runs in mlua's protected call with the value as its only stack
    // slot. It only reads tables with raw accesses and pushes keys that are interned and
    // anchored (no allocation); growing the stack may raise a memory error, which the
    // protected call catches (leaking the partial reply, never touching freed memory).
    let result = unsafe {
        lua.exec_raw::<()>(v.clone(), |state| {
            out = Some(convert(state, proto, lua_resp3));
        })
    };
    match (result, out) {
        (Ok(()), Some(f)) => f,
        _ => Frame::error("ERR reached lua stack limit"),
    }
}

fn plain(v: &Value) -> Frame {
    match v {
        Value::Boolean(true) => Frame::Integer(1),
        Value::Integer(i) => Frame::Integer(*i),
        Value::Number(n) => Frame::Integer(number(*n)),
        Value::String(s) => Frame::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        _ => Frame::Null,
    }
}

/// A Lua number as Redis turns it into an integer reply: C's `(long long)` cast, which on
/// x86-64 gives `i64::MIN` for NaN and anything out of range (Rust's `as` would saturate).
fn number(n: f64) -> i64 {
    if (-9223372036854775808.0..9223372036854775808.0).contains(&n) {
        n as i64
    } else {
        i64::MIN
    }
}

/// A table being converted. Its stack holds, from `base`: the table, then (maps and sets)
/// the inner table and the iteration key.
enum Node {
    Array {
        base: c_int,
        next: ffi::lua_Integer,
        items: Vec<Frame>,
        slots: usize,
    },
    /// `{map = {...}}`: keys convert four slots above the table, values three.
    Map {
        inner: c_int,
        awaiting_value: bool,
        key: Option<Frame>,
        out: Vec<(Frame, Frame)>,
        slots: usize,
    },
    /// `{set = {...}}`: members convert three slots above the table.
    Set {
        inner: c_int,
        out: Vec<Frame>,
        slots: usize,
    },
}

/// Converts the value on top of the stack, leaving the stack as it was.
///
/// # Safety
/// `state` must be a live state with the value on top.
unsafe fn convert(state: *mut ffi::lua_State, proto: Protocol, lua_resp3: bool) -> Frame {
    let mut stack: Vec<Node> = Vec::new();
    let mut pending = Some(TOP_SLOTS);
    loop {
        let mut finished = match pending.take() {
            Some(slots) => start(state, slots, &mut stack, proto, lua_resp3),
            None => None,
        };
        loop {
            let Some(top) = stack.last_mut() else {
                return finished.unwrap_or(Frame::Null);
            };
            if let Some(f) = finished.take() {
                top.accept(f);
            }
            match top.next_child(state) {
                Some(slots) => {
                    pending = Some(slots);
                    break;
                }
                None => {
                    let depth = stack.len();
                    finished = stack.pop().map(|node| {
                        let f = node.finish(state);
                        if depth.is_multiple_of(RAW_EVERY) {
                            Frame::Raw(f.to_bytes(proto))
                        } else {
                            f
                        }
                    });
                }
            }
        }
    }
}

/// Starts converting the value on top of the stack, with `slots` in use. A plain value is
/// popped and returned; a table is left on the stack and pushed onto `stack` as a node.
unsafe fn start(
    state: *mut ffi::lua_State,
    slots: usize,
    stack: &mut Vec<Node>,
    proto: Protocol,
    lua_resp3: bool,
) -> Option<Frame> {
    let done = |f: Frame| {
        ffi::lua_pop(state, 1);
        Some(f)
    };
    if slots + NEEDED > MAX_SLOTS || ffi::lua_checkstack(state, NEEDED as c_int) == 0 {
        return done(Frame::error("ERR reached lua stack limit"));
    }
    match ffi::lua_type(state, -1) {
        ffi::LUA_TBOOLEAN if lua_resp3 => done(Frame::Boolean(ffi::lua_toboolean(state, -1) != 0)),
        ffi::LUA_TBOOLEAN if ffi::lua_toboolean(state, -1) != 0 => done(Frame::Integer(1)),
        ffi::LUA_TNUMBER => done(Frame::Integer(number(ffi::lua_tonumber(state, -1)))),
        ffi::LUA_TSTRING => done(Frame::Bulk(Bytes::copy_from_slice(bytes_at(state, -1)))),
        ffi::LUA_TTABLE => table(state, slots, stack, proto),
        _ => done(Frame::Null),
    }
}

/// The bytes of the string at `idx` (valid while it stays on the stack).
unsafe fn bytes_at<'a>(state: *mut ffi::lua_State, idx: c_int) -> &'a [u8] {
    let mut len = 0usize;
    let ptr = ffi::lua_tolstring(state, idx, &mut len);
    std::slice::from_raw_parts(ptr.cast::<u8>(), len)
}

/// Pushes `t[name]` (raw) for the table on top.
unsafe fn field(state: *mut ffi::lua_State, name: &std::ffi::CStr) -> c_int {
    ffi::lua_pushstring(state, name.as_ptr());
    ffi::lua_rawget(state, -2);
    ffi::lua_type(state, -1)
}

unsafe fn table(
    state: *mut ffi::lua_State,
    slots: usize,
    stack: &mut Vec<Node>,
    proto: Protocol,
) -> Option<Frame> {
    let base = ffi::lua_gettop(state);
    if field(state, c"err") == ffi::LUA_TSTRING {
        let f = Frame::error(String::from_utf8_lossy(bytes_at(state, -1)).into_owned());
        ffi::lua_pop(state, 1);
        let counted = field(state, c"ignore_error_stats_update") == ffi::LUA_TBOOLEAN
            && ffi::lua_toboolean(state, -1) != 0;
        ffi::lua_settop(state, base - 1);
        if let (false, Frame::Error(text)) = (counted, &f) {
            UNCOUNTED.with(|u| u.borrow_mut().push(text.clone()));
        }
        return Some(f);
    }
    ffi::lua_pop(state, 1);
    if field(state, c"ok") == ffi::LUA_TSTRING {
        let text = String::from_utf8_lossy(bytes_at(state, -1)).replace(['\r', '\n'], " ");
        ffi::lua_settop(state, base - 1);
        return Some(Frame::Simple(Bytes::from(text)));
    }
    ffi::lua_pop(state, 1);
    if field(state, c"double") == ffi::LUA_TNUMBER {
        let d = ffi::lua_tonumber(state, -1);
        ffi::lua_settop(state, base - 1);
        return Some(Frame::Double(d));
    }
    ffi::lua_pop(state, 1);
    if field(state, c"big_number") == ffi::LUA_TSTRING {
        // Kept as text (a number of any size), with line breaks made spaces as Redis does.
        let digits: Vec<u8> = bytes_at(state, -1)
            .iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect();
        ffi::lua_settop(state, base - 1);
        return Some(Frame::BigNumber(Bytes::from(digits)));
    }
    ffi::lua_pop(state, 1);
    if field(state, c"verbatim_string") == ffi::LUA_TTABLE {
        if let Some(f) = verbatim(state, proto) {
            ffi::lua_settop(state, base - 1);
            return Some(f);
        }
    }
    ffi::lua_settop(state, base);
    if field(state, c"map") == ffi::LUA_TTABLE {
        ffi::lua_pushnil(state);
        stack.push(Node::Map {
            inner: base + 1,
            awaiting_value: false,
            key: None,
            out: Vec::new(),
            slots,
        });
        return None;
    }
    ffi::lua_pop(state, 1);
    if field(state, c"set") == ffi::LUA_TTABLE {
        ffi::lua_pushnil(state);
        stack.push(Node::Set {
            inner: base + 1,
            out: Vec::new(),
            slots,
        });
        return None;
    }
    ffi::lua_pop(state, 1);
    stack.push(Node::Array {
        base,
        next: 1,
        items: Vec::new(),
        slots,
    });
    None
}

/// `{verbatim_string = {format = "txt", string = "..."}}` (the table on top) as a verbatim
/// reply, when both fields are strings. Redis writes the format's first three bytes, whatever
/// they are; under RESP2 the reply is the string alone.
unsafe fn verbatim(state: *mut ffi::lua_State, proto: Protocol) -> Option<Frame> {
    if field(state, c"format") != ffi::LUA_TSTRING {
        return None;
    }
    let format = bytes_at(state, -1).to_vec();
    ffi::lua_pop(state, 1);
    if field(state, c"string") != ffi::LUA_TSTRING {
        return None;
    }
    let text = Bytes::copy_from_slice(bytes_at(state, -1));
    if proto != Protocol::Resp3 || format == b"txt" {
        return Some(Frame::Verbatim(text));
    }
    let mut head = [0u8; 3];
    for (slot, b) in head.iter_mut().zip(&format) {
        *slot = *b;
    }
    let mut wire = format!("={}\r\n", text.len() + 4).into_bytes();
    wire.extend_from_slice(&head);
    wire.push(b':');
    wire.extend_from_slice(&text);
    wire.extend_from_slice(b"\r\n");
    Some(Frame::Raw(Bytes::from(wire)))
}

impl Node {
    /// Pushes the next value to convert and returns the slots in use for it, or `None`
    /// when the table is done.
    unsafe fn next_child(&mut self, state: *mut ffi::lua_State) -> Option<usize> {
        match self {
            Node::Array {
                base, next, slots, ..
            } => {
                ffi::lua_rawgeti(state, *base, *next);
                if ffi::lua_type(state, -1) == ffi::LUA_TNIL {
                    ffi::lua_pop(state, 1);
                    return None;
                }
                *next += 1;
                Some(*slots + 1)
            }
            Node::Map {
                inner,
                awaiting_value,
                slots,
                ..
            } => {
                if *awaiting_value {
                    // The value sits on top, above its key.
                    *awaiting_value = false;
                    return Some(*slots + 3);
                }
                if ffi::lua_next(state, *inner) == 0 {
                    return None;
                }
                ffi::lua_pushvalue(state, -2);
                *awaiting_value = true;
                Some(*slots + 4)
            }
            Node::Set { inner, slots, .. } => {
                if ffi::lua_next(state, *inner) == 0 {
                    return None;
                }
                ffi::lua_pop(state, 1);
                ffi::lua_pushvalue(state, -1);
                Some(*slots + 3)
            }
        }
    }

    /// Takes the reply for the value [`next_child`](Node::next_child) pushed.
    fn accept(&mut self, f: Frame) {
        match self {
            Node::Array { items, .. } => items.push(f),
            Node::Map { key, out, .. } => match key.take() {
                None => *key = Some(f),
                Some(k) => out.push((k, f)),
            },
            Node::Set { out, .. } => out.push(f),
        }
    }

    /// The reply for the whole table, popping it (and its helpers) off the stack.
    unsafe fn finish(self, state: *mut ffi::lua_State) -> Frame {
        match self {
            Node::Array { base, items, .. } => {
                ffi::lua_settop(state, base - 1);
                Frame::Array(items)
            }
            Node::Map { inner, out, .. } => {
                ffi::lua_settop(state, inner - 2);
                Frame::Map(out)
            }
            Node::Set { inner, out, .. } => {
                ffi::lua_settop(state, inner - 2);
                Frame::Set(out)
            }
        }
    }
}
