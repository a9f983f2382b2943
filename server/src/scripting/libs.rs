//! The libraries a script sees besides Lua's own: the `redis` table, `bit` and `cjson`.

use mlua::{Lua, MultiValue, Table, Value};

/// Fills the `redis` table with everything except `call`/`pcall` (added by the prelude).
pub(crate) fn install_redis_table(lua: &Lua, redis: &Table) -> mlua::Result<()> {
    redis.raw_set(
        "sha1hex",
        lua.create_function(|lua, s: mlua::String| {
            lua.create_string(super::sha1_hex(&s.as_bytes()))
        })?,
    )?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, s: mlua::String| {
            let t = lua.create_table()?;
            t.raw_set("err", s)?;
            Ok(t)
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, s: mlua::String| {
            let t = lua.create_table()?;
            t.raw_set("ok", s)?;
            Ok(t)
        })?,
    )?;
    for (name, level) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
    ] {
        redis.raw_set(name, level)?;
    }
    redis.raw_set(
        "log",
        lua.create_function(|_, args: MultiValue| {
            let mut it = args.into_iter();
            let level = match it.next() {
                Some(Value::Integer(i)) => i,
                Some(Value::Number(n)) => n as i64,
                _ => {
                    return Err(mlua::Error::RuntimeError(
                        "First argument must be a number (log level).".into(),
                    ))
                }
            };
            let text: Vec<String> = it
                .map(|v| match v {
                    Value::String(s) => s.to_string_lossy().to_string(),
                    Value::Integer(i) => i.to_string(),
                    Value::Number(n) => n.to_string(),
                    _ => String::new(),
                })
                .collect();
            let text = text.join(" ");
            match level {
                0 => tracing::debug!(target: "lua", "{text}"),
                1 | 2 => tracing::info!(target: "lua", "{text}"),
                _ => tracing::warn!(target: "lua", "{text}"),
            }
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "setresp",
        lua.create_function(|_, v: Value| {
            let n = match v {
                Value::Integer(i) => i,
                Value::Number(n) => n as i64,
                _ => 0,
            };
            if n != 2 && n != 3 {
                return Err(mlua::Error::RuntimeError(
                    "RESP version must be 2 or 3.".into(),
                ));
            }
            super::set_resp(n == 3);
            Ok(())
        })?,
    )?;
    // Redis 7 always replicates effects: this is a no-op kept for old scripts.
    redis.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    for (name, v) in [
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.raw_set(name, v)?;
    }
    redis.raw_set("set_repl", lua.create_function(|_, _v: Value| Ok(()))?)?;
    redis.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.raw_set("debug", lua.create_function(|_, _v: MultiValue| Ok(()))?)?;
    Ok(())
}

fn to_bit(v: f64) -> i32 {
    // LuaBitOp normalises any number to a 32-bit integer modulo 2^32.
    let m = v.rem_euclid(4294967296.0);
    (m as u64 as u32) as i32
}

fn num(v: &Value) -> mlua::Result<f64> {
    match v {
        Value::Integer(i) => Ok(*i as f64),
        Value::Number(n) => Ok(*n),
        Value::String(s) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .ok_or_else(|| mlua::Error::RuntimeError("bad argument (number expected)".into())),
        _ => Err(mlua::Error::RuntimeError(
            "bad argument (number expected)".into(),
        )),
    }
}

/// The `bit` library (LuaBitOp) that Redis bundles: 32-bit operations on numbers.
pub(crate) fn bit_library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let fold = |lua: &Lua, f: fn(i32, i32) -> i32| {
        lua.create_function(move |_, args: MultiValue| {
            let mut acc: Option<i32> = None;
            for a in args.iter() {
                let b = to_bit(num(a)?);
                acc = Some(match acc {
                    None => b,
                    Some(x) => f(x, b),
                });
            }
            Ok(acc.unwrap_or(0) as f64)
        })
    };
    t.raw_set("band", fold(lua, |a, b| a & b)?)?;
    t.raw_set("bor", fold(lua, |a, b| a | b)?)?;
    t.raw_set("bxor", fold(lua, |a, b| a ^ b)?)?;
    t.raw_set(
        "tobit",
        lua.create_function(|_, v: Value| Ok(to_bit(num(&v)?) as f64))?,
    )?;
    t.raw_set(
        "bnot",
        lua.create_function(|_, v: Value| Ok(!to_bit(num(&v)?) as f64))?,
    )?;
    let shift = |lua: &Lua, f: fn(i32, u32) -> i32| {
        lua.create_function(move |_, (v, n): (Value, Value)| {
            Ok(f(to_bit(num(&v)?), (to_bit(num(&n)?) & 31) as u32) as f64)
        })
    };
    t.raw_set("lshift", shift(lua, |a, n| ((a as u32) << n) as i32)?)?;
    t.raw_set("rshift", shift(lua, |a, n| ((a as u32) >> n) as i32)?)?;
    t.raw_set("arshift", shift(lua, |a, n| a >> n)?)?;
    t.raw_set("rol", shift(lua, |a, n| (a as u32).rotate_left(n) as i32)?)?;
    t.raw_set("ror", shift(lua, |a, n| (a as u32).rotate_right(n) as i32)?)?;
    t.raw_set(
        "bswap",
        lua.create_function(
            |_, v: Value| Ok((to_bit(num(&v)?) as u32).swap_bytes() as i32 as f64),
        )?,
    )?;
    t.raw_set(
        "tohex",
        lua.create_function(|_, (v, n): (Value, Option<Value>)| {
            let x = to_bit(num(&v)?) as u32;
            let n = match n {
                Some(n) => to_bit(num(&n)?),
                None => 8,
            };
            let width = n.unsigned_abs().min(8) as usize;
            let s = format!("{:08x}", x);
            let s = s[8 - width..].to_string();
            Ok(if n < 0 { s.to_uppercase() } else { s })
        })?,
    )?;
    Ok(t)
}

/// The `cjson` library: `cjson.encode` and `cjson.decode`, through serde_json.
pub(crate) fn cjson_library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set(
        "encode",
        lua.create_function(|_, v: Value| {
            let json = to_json(&v, 0)?;
            serde_json::to_string(&json).map_err(mlua::Error::external)
        })?,
    )?;
    t.raw_set(
        "decode",
        lua.create_function(|lua, s: mlua::String| {
            let json: serde_json::Value =
                serde_json::from_slice(&s.as_bytes()).map_err(mlua::Error::external)?;
            from_json(lua, &json)
        })?,
    )?;
    t.raw_set(
        "null",
        Value::LightUserData(mlua::LightUserData(std::ptr::null_mut())),
    )?;
    Ok(t)
}

fn to_json(v: &Value, depth: usize) -> mlua::Result<serde_json::Value> {
    use serde_json::Value as J;
    if depth > 1000 {
        return Err(mlua::Error::RuntimeError(
            "Cannot serialise, excessive nesting (1001)".into(),
        ));
    }
    Ok(match v {
        Value::Nil => J::Null,
        Value::LightUserData(_) => J::Null,
        Value::Boolean(b) => J::Bool(*b),
        Value::Integer(i) => J::from(*i),
        Value::Number(n) => {
            if n.fract() == 0.0 && n.abs() < 1e15 {
                J::from(*n as i64)
            } else {
                serde_json::Number::from_f64(*n).map_or(J::Null, J::Number)
            }
        }
        Value::String(s) => J::String(s.to_string_lossy().to_string()),
        Value::Table(t) => {
            let len = t.raw_len();
            let count = t.pairs::<Value, Value>().count();
            if len > 0 && count == len {
                let mut arr = Vec::with_capacity(len);
                for i in 1..=len {
                    arr.push(to_json(&t.raw_get::<Value>(i)?, depth + 1)?);
                }
                J::Array(arr)
            } else if count == 0 {
                J::Object(Default::default())
            } else {
                let mut map = serde_json::Map::new();
                for (k, v) in t.pairs::<Value, Value>().flatten() {
                    let key = match &k {
                        Value::String(s) => s.to_string_lossy().to_string(),
                        Value::Integer(i) => i.to_string(),
                        Value::Number(n) => n.to_string(),
                        _ => {
                            return Err(mlua::Error::RuntimeError(
                                "Cannot serialise table: table key must be a number or string"
                                    .into(),
                            ))
                        }
                    };
                    map.insert(key, to_json(&v, depth + 1)?);
                }
                J::Object(map)
            }
        }
        _ => {
            return Err(mlua::Error::RuntimeError(
                "Cannot serialise: type not supported".into(),
            ))
        }
    })
}

fn from_json(lua: &Lua, j: &serde_json::Value) -> mlua::Result<Value> {
    use serde_json::Value as J;
    Ok(match j {
        J::Null => Value::LightUserData(mlua::LightUserData(std::ptr::null_mut())),
        J::Bool(b) => Value::Boolean(*b),
        J::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        J::String(s) => Value::String(lua.create_string(s)?),
        J::Array(a) => {
            let t = lua.create_table_with_capacity(a.len(), 0)?;
            for (i, v) in a.iter().enumerate() {
                t.raw_set(i + 1, from_json(lua, v)?)?;
            }
            Value::Table(t)
        }
        J::Object(o) => {
            let t = lua.create_table_with_capacity(0, o.len())?;
            for (k, v) in o {
                t.raw_set(k.as_str(), from_json(lua, v)?)?;
            }
            Value::Table(t)
        }
    })
}
