//! `cmsgpack`: the MessagePack library Redis bundles (lua-cmsgpack), with its exact encoding
//! choices, its limits and its error texts.
//!
//! Encoding: a number with an integral value takes the smallest integer form, other numbers
//! are `float 32` when that loses nothing and `float 64` otherwise; strings take `fixstr`,
//! `str 8/16/32`; a table whose keys are exactly `1..n` is an array, any other table a map;
//! anything else is nil. Tables nested deeper than 16 levels encode as nil, which is how a
//! cyclic table is survived. The output is bounded by the interpreter's free memory (a table
//! referring many times to itself grows exponentially with the depth).
//!
//! Decoding keeps its own work stack (no recursion) and counts the Lua stack slots Redis's
//! recursive decoder would use, failing with the same `stack overflow (...)` error at the
//! same depth (the class of CVE-2018-11218).

use mlua::{Lua, Table, Value};

use super::libs::{fail, lift, Args, Failure, Results, LIBRARY_STACK_LIMIT};

/// Tables nested deeper than this encode as nil.
const MAX_NESTING: usize = 16;

/// The most containers the decoder keeps open at once (see `decode_one`).
const MAX_OPEN: usize = 3000;

/// Builds the `cmsgpack` table.
pub(crate) fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lift(lua, pack)?)?;
    t.raw_set(
        "unpack",
        lift(lua, |lua, args| unpack_entry(lua, args, Mode::All))?,
    )?;
    t.raw_set(
        "unpack_one",
        lift(lua, |lua, args| unpack_entry(lua, args, Mode::One))?,
    )?;
    t.raw_set(
        "unpack_limit",
        lift(lua, |lua, args| unpack_entry(lua, args, Mode::Limit))?,
    )?;
    t.raw_set("_NAME", "lua-cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

/// Bytes the encoder may still produce before the interpreter would be out of memory.
pub(super) fn output_budget(lua: &Lua) -> usize {
    let limit = super::current_memory_limit(lua);
    if limit == 0 {
        usize::MAX
    } else {
        limit.saturating_sub(lua.used_memory())
    }
}

fn pack(lua: &Lua, args: Args) -> Result<Table, Failure> {
    if args.is_empty() {
        return Err(fail(
            "bad argument #0 to 'pack' (MessagePack pack needs input.)",
        ));
    }
    let nargs = args.len();
    // lua-cmsgpack asks for as many free slots as there are arguments, and keeps each
    // argument's encoding on the stack until the end.
    if nargs * 2 > LIBRARY_STACK_LIMIT {
        return Err(fail(
            "bad argument #0 to 'pack' (Too many arguments for MessagePack pack.)",
        ));
    }
    let mut out = Vec::new();
    let budget = output_budget(lua);
    for (i, v) in args.iter().enumerate() {
        // Slots in use while argument i (from 1) is encoded: the arguments, the encodings
        // of those before it, and its copy.
        encode(&v, 0, nargs + i + 1, &mut out, budget)?;
    }
    let s = lua.create_string(&out).map_err(Failure::from)?;
    Results::one(lua, Value::String(s))
}

/// The Lua stack check lua-cmsgpack makes (`luaL_checkstack`) with `top` slots in use.
fn check_stack(top: usize, more: usize, function: &str) -> Result<(), Failure> {
    if top + more > LIBRARY_STACK_LIMIT {
        return Err(fail(&format!("stack overflow (in function {function})")));
    }
    Ok(())
}

/// Encodes `v`, which lua-cmsgpack would have at stack slot `top` (counting from 1), so that
/// its stack checks fail where Redis's do.
fn encode(
    v: &Value,
    level: usize,
    top: usize,
    out: &mut Vec<u8>,
    budget: usize,
) -> Result<(), Failure> {
    if out.len() > budget {
        return Err(Failure::memory());
    }
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(*i, out),
        Value::Number(n) => encode_number(*n, out),
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Table(t) if level < MAX_NESTING => encode_table(t, level, top, out, budget)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_number(n: f64, out: &mut Vec<u8>) {
    // lua-cmsgpack's test: not infinite, and equal to itself cast to int64 (a cast that
    // gives i64::MIN on x86 for anything out of range, as Rust's saturating cast does not:
    // compare in floating point instead).
    let integral = n.is_finite()
        && n.trunc() == n
        && (-9223372036854775808.0..9223372036854775808.0).contains(&n);
    if integral {
        encode_int(n as i64, out);
    } else if f64::from(n as f32) == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2147483648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_bytes(s: &[u8], out: &mut Vec<u8>) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn header(len: usize, fix: u8, fix_max: usize, b16: u8, b32: u8, out: &mut Vec<u8>) {
    if len <= fix_max {
        out.push(fix | len as u8);
    } else if len <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

/// lua-cmsgpack's array test: every key a positive number with an `int` value, and as many
/// keys as the largest one.
fn is_array(t: &Table) -> Result<bool, Failure> {
    let mut count = 0f64;
    let mut max = 0f64;
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair.map_err(Failure::from)?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || !n.is_finite() || n.trunc() != n || n > f64::from(i32::MAX) {
            return Ok(false);
        }
        max = max.max(n);
        count += 1.0;
    }
    Ok(max == count)
}

fn encode_table(
    t: &Table,
    level: usize,
    top: usize,
    out: &mut Vec<u8>,
    budget: usize,
) -> Result<(), Failure> {
    check_stack(top, 2, "table_is_an_array")?;
    if is_array(t)? {
        let len = t.raw_len();
        header(len, 0x90, 15, 0xdc, 0xdd, out);
        check_stack(top, 1, "mp_encode_lua_table_as_array")?;
        for j in 1..=len {
            // Elements are read with metamethods, as lua-cmsgpack's `lua_gettable` does.
            let v: Value = t.get(j).map_err(Failure::from)?;
            encode(&v, level + 1, top + 1, out, budget)?;
        }
    } else {
        check_stack(top, 3, "mp_encode_lua_table_as_map")?;
        // Counted first, then walked again: holding every pair would take a handle each.
        let len = t.pairs::<Value, Value>().count();
        header(len, 0x80, 15, 0xde, 0xdf, out);
        for pair in t.pairs::<Value, Value>() {
            let (k, v) = pair.map_err(Failure::from)?;
            // On lua-cmsgpack's stack: the table, the iteration's key and value, and a copy
            // of the key being encoded.
            encode(&k, level + 1, top + 3, out, budget)?;
            encode(&v, level + 1, top + 2, out, budget)?;
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    All,
    One,
    Limit,
}

fn int_arg(v: Option<&Value>, n: usize, name: &str, default: Option<i64>) -> Result<i64, Failure> {
    match v {
        Some(Value::Integer(i)) => Ok(*i),
        Some(Value::Number(f)) => Ok(*f as i64),
        Some(Value::String(s)) => {
            match s.to_str().ok().and_then(|s| s.trim().parse::<f64>().ok()) {
                Some(f) => Ok(f as i64),
                None => Err(fail(&format!(
                    "bad argument #{n} to '{name}' (number expected, got string)"
                ))),
            }
        }
        None | Some(Value::Nil) if default.is_some() => Ok(default.unwrap_or(0)),
        other => Err(fail(&format!(
            "bad argument #{n} to '{name}' (number expected, got {})",
            super::libs::type_name(other)
        ))),
    }
}

fn unpack_entry(lua: &Lua, args: Args, mode: Mode) -> Result<Table, Failure> {
    let name = match mode {
        Mode::All => "unpack",
        Mode::One => "unpack_one",
        Mode::Limit => "unpack_limit",
    };
    let data = match args.get(0).as_ref() {
        Some(Value::String(s)) => s.as_bytes().to_vec(),
        Some(Value::Integer(i)) => i.to_string().into_bytes(),
        Some(Value::Number(n)) => super::printf_g(*n, 14).into_bytes(),
        other => {
            return Err(fail(&format!(
                "bad argument #1 to '{name}' (string expected, got {})",
                super::libs::type_name(other)
            )))
        }
    };
    let (limit, offset) = match mode {
        Mode::All => (0, 0),
        Mode::One => (1, int_arg(args.get(1).as_ref(), 2, name, Some(0))? as i32),
        Mode::Limit => (
            int_arg(args.get(1).as_ref(), 2, name, None)? as i32,
            int_arg(args.get(2).as_ref(), 3, name, Some(0))? as i32,
        ),
    };
    unpack_full(lua, &data, limit, offset)
}

/// A container being filled by the decoder.
struct Open {
    table: Table,
    remaining: u64,
    /// Arrays: the next index. Maps: unused.
    index: i64,
    is_map: bool,
    /// Maps: the key decoded, waiting for its value.
    key: Option<Value>,
}

impl Open {
    /// The Lua slots Redis's decoder holds for this container while decoding its next item.
    fn slots(&self) -> usize {
        if self.is_map && self.key.is_none() {
            1
        } else {
            2
        }
    }
}

fn unpack_full(lua: &Lua, data: &[u8], limit: i32, offset: i32) -> Result<Table, Failure> {
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Err(fail(&format!(
            "Invalid request to unpack with offset of {offset} and limit of {}.",
            data.len() as i32
        )));
    }
    if offset as usize > data.len() {
        return Err(fail(&format!(
            "Start offset {offset} greater than input length {}.",
            data.len() as i32
        )));
    }
    let limit = if decode_all { i32::MAX } else { limit };
    let mut pos = offset as usize;
    let mut results = Results::new(lua)?;
    if !decode_all {
        // The next offset comes first; filled in at the end.
        results.push(Value::Nil)?;
    }
    let mut count = 0;
    while pos < data.len() && count < limit {
        // One argument stays on Redis's stack, under the results so far.
        let base = 1 + count as usize;
        let v = decode_one(lua, data, &mut pos, base)?;
        results.push(v)?;
        count += 1;
    }
    let mut table = results.finish()?;
    if !decode_all {
        let next = if pos == data.len() { -1 } else { pos as i64 };
        table.raw_set(1, next).map_err(Failure::from)?;
    }
    let _ = &mut table;
    Ok(table)
}

fn need(data: &[u8], pos: usize, n: usize) -> Result<(), Failure> {
    if data.len() - pos < n {
        Err(fail("Missing bytes in input."))
    } else {
        Ok(())
    }
}

fn be(data: &[u8], at: usize, n: usize) -> u64 {
    data[at..at + n]
        .iter()
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

/// What the first bytes at `pos` hold.
enum Item {
    Value(Value),
    Array(u64),
    Map(u64),
}

fn read_item(lua: &Lua, data: &[u8], pos: &mut usize) -> Result<Item, Failure> {
    need(data, *pos, 1)?;
    let p = *pos;
    let tag = data[p];
    let num = |n: usize, f: &dyn Fn(u64) -> f64, pos: &mut usize| -> Result<Item, Failure> {
        need(data, p, 1 + n)?;
        *pos = p + 1 + n;
        Ok(Item::Value(Value::Number(f(be(data, p + 1, n)))))
    };
    let string = |n: usize, pos: &mut usize| -> Result<Item, Failure> {
        need(data, p, 1 + n)?;
        let len = be(data, p + 1, n) as usize;
        need(data, p, 1 + n + len)?;
        let s = lua
            .create_string(&data[p + 1 + n..p + 1 + n + len])
            .map_err(Failure::from)?;
        *pos = p + 1 + n + len;
        Ok(Item::Value(Value::String(s)))
    };
    let count = |n: usize, map: bool, pos: &mut usize| -> Result<Item, Failure> {
        need(data, p, 1 + n)?;
        let len = be(data, p + 1, n);
        *pos = p + 1 + n;
        Ok(if map {
            Item::Map(len)
        } else {
            Item::Array(len)
        })
    };
    let one = |v: Value, pos: &mut usize| {
        *pos = p + 1;
        Ok(Item::Value(v))
    };
    match tag {
        0xcc => num(1, &|u| u as f64, pos),
        0xd0 => num(1, &|u| f64::from(u as u8 as i8), pos),
        0xcd => num(2, &|u| u as f64, pos),
        0xd1 => num(2, &|u| f64::from(u as u16 as i16), pos),
        0xce => num(4, &|u| u as f64, pos),
        0xd2 => num(4, &|u| f64::from(u as u32 as i32), pos),
        0xcf => num(8, &|u| u as f64, pos),
        0xd3 => num(8, &|u| u as i64 as f64, pos),
        0xc0 => one(Value::Nil, pos),
        0xc3 => one(Value::Boolean(true), pos),
        0xc2 => one(Value::Boolean(false), pos),
        0xca => num(4, &|u| f64::from(f32::from_bits(u as u32)), pos),
        0xcb => num(8, &f64::from_bits, pos),
        0xd9 => string(1, pos),
        0xda => string(2, pos),
        0xdb => string(4, pos),
        0xdc => count(2, false, pos),
        0xdd => count(4, false, pos),
        0xde => count(2, true, pos),
        0xdf => count(4, true, pos),
        t if t & 0x80 == 0 => one(Value::Number(f64::from(t)), pos),
        t if t & 0xe0 == 0xe0 => one(Value::Number(f64::from(t as i8)), pos),
        t if t & 0xe0 == 0xa0 => {
            let len = usize::from(t & 0x1f);
            need(data, p, 1 + len)?;
            let s = lua
                .create_string(&data[p + 1..p + 1 + len])
                .map_err(Failure::from)?;
            *pos = p + 1 + len;
            Ok(Item::Value(Value::String(s)))
        }
        t if t & 0xf0 == 0x90 => one_container(p, pos, u64::from(t & 0x0f), false),
        t if t & 0xf0 == 0x80 => one_container(p, pos, u64::from(t & 0x0f), true),
        _ => Err(fail("Bad data format in input.")),
    }
}

fn one_container(p: usize, pos: &mut usize, len: u64, map: bool) -> Result<Item, Failure> {
    *pos = p + 1;
    Ok(if map {
        Item::Map(len)
    } else {
        Item::Array(len)
    })
}

fn overflow(what: &str) -> Failure {
    fail(&format!("stack overflow ({what})"))
}

/// Decodes one top-level value. `base` is the Lua slots Redis holds below it.
fn decode_one(lua: &Lua, data: &[u8], pos: &mut usize, base: usize) -> Result<Value, Failure> {
    let mut open: Vec<Open> = Vec::new();
    loop {
        let slots = base + open.iter().map(Open::slots).sum::<usize>();
        // Each open container (and a map's pending key) holds an mlua handle, of which
        // there are fewer than Lua stack slots: nesting this deep fails with Redis's text
        // a little earlier than Redis would.
        if open.len() > MAX_OPEN {
            return Err(overflow(if open.last().is_some_and(|o| o.is_map) {
                "in function mp_decode_to_lua_map"
            } else {
                "in function mp_decode_to_lua_array"
            }));
        }
        if slots + 1 > LIBRARY_STACK_LIMIT {
            return Err(overflow(
                "too many return values at once; use unpack_one or unpack_limit instead.",
            ));
        }
        let mut value = match read_item(lua, data, pos)? {
            Item::Value(v) => Some(v),
            Item::Array(len) => open_container(lua, &mut open, slots, len, false)?,
            Item::Map(len) => open_container(lua, &mut open, slots, len, true)?,
        };
        // Hand finished values up to their containers.
        while let Some(v) = value.take() {
            let Some(top) = open.last_mut() else {
                return Ok(v);
            };
            if top.is_map {
                match top.key.take() {
                    None => {
                        top.key = Some(v);
                        break;
                    }
                    Some(k) => {
                        set(&top.table, k, v)?;
                    }
                }
            } else {
                set(&top.table, Value::Integer(top.index), v)?;
                top.index += 1;
            }
            top.remaining -= 1;
            if top.remaining == 0 {
                let done = open.pop().map(|o| Value::Table(o.table));
                value = done;
            }
        }
    }
}

/// `t[k] = v` as `lua_settable` does it, with Lua's errors for a nil or NaN key (which Lua
/// raises without a position).
fn set(t: &Table, k: Value, v: Value) -> Result<(), Failure> {
    match &k {
        Value::Nil => return Err(Failure::plain("table index is nil")),
        Value::Number(n) if n.is_nan() => return Err(Failure::plain("table index is NaN")),
        _ => {}
    }
    t.raw_set(k, v).map_err(Failure::from)
}

/// Starts a container of `len` items: an empty one is a finished value at once.
fn open_container(
    lua: &Lua,
    open: &mut Vec<Open>,
    slots: usize,
    len: u64,
    is_map: bool,
) -> Result<Option<Value>, Failure> {
    // Redis's decoder pushes the table, then asks for room for the index (arrays) or the
    // key and value (maps).
    let room = if is_map { 2 } else { 1 };
    if slots + 1 + room > LIBRARY_STACK_LIMIT {
        return Err(overflow(if is_map {
            "in function mp_decode_to_lua_map"
        } else {
            "in function mp_decode_to_lua_array"
        }));
    }
    let table = lua.create_table().map_err(Failure::from)?;
    if len == 0 {
        return Ok(Some(Value::Table(table)));
    }
    open.push(Open {
        table,
        remaining: len,
        index: 1,
        is_map,
        key: None,
    });
    Ok(None)
}
