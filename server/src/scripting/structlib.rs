//! `struct`: Roberto Ierusalimschy's binary packing library that Redis bundles
//! (`struct.pack`, `struct.unpack`, `struct.size`), with Redis's fixes for hostile formats.
//!
//! A format is read up to its first NUL byte, one option at a time: `>`/`<` set the byte
//! order, `!n` the maximum alignment, `b B h H l L T iN IN` are integers, `f d` floats,
//! `cN` a string of N bytes (`c0`: the whole string when packing, the previous number's
//! length when unpacking), `s` a zero-terminated string, `x` a padding byte.
//!
//! Every count an attacker writes is checked the way Redis checks it: a size written with
//! more digits than an `int` holds fails with `integral size overflow` (CVE-2018-11219), an
//! integer wider than 32 bytes with `integral size N is larger than limit of 32`, and a read
//! past the data with `data string too short`, computed so that it cannot wrap around
//! (CVE-2020-14147). Positions and alignments use the same wrapping `size_t` arithmetic as
//! the C original, so that odd formats give Redis's answers.

use mlua::{Lua, Table, Value};

use super::libs::{fail, lift, type_name, Args, Failure, Results, LIBRARY_STACK_LIMIT};

/// The widest integer option, in bytes.
const MAX_INT_SIZE: i64 = 32;
/// The default maximum alignment (of a `double` in a struct on this platform).
const MAX_ALIGN: i64 = 8;

/// Builds the `struct` table.
pub(crate) fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lift(lua, pack)?)?;
    t.raw_set("unpack", lift(lua, unpack)?)?;
    t.raw_set("size", lift(lua, size)?)?;
    Ok(t)
}

#[derive(Clone, Copy, PartialEq)]
enum Endian {
    Little,
    Big,
}

struct Header {
    endian: Endian,
    align: i64,
}

impl Header {
    fn new() -> Header {
        Header {
            endian: Endian::Little,
            align: 1,
        }
    }
}

/// A format being read.
struct Format<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// The function name for argument errors.
    func: &'static str,
}

impl Format<'_> {
    fn next(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        if b == 0 {
            return None;
        }
        self.pos += 1;
        Some(b)
    }

    /// A decimal count at the cursor, or `default`.
    fn number(&mut self, default: i64) -> Result<i64, Failure> {
        let Some(d) = self.bytes.get(self.pos).filter(|b| b.is_ascii_digit()) else {
            return Ok(default);
        };
        let _ = d;
        let mut a: i64 = 0;
        while let Some(d) = self.bytes.get(self.pos).filter(|b| b.is_ascii_digit()) {
            let digit = i64::from(d - b'0');
            if a > i64::from(i32::MAX) / 10 || a * 10 > i64::from(i32::MAX) - digit {
                return Err(fail("integral size overflow"));
            }
            a = a * 10 + digit;
            self.pos += 1;
        }
        Ok(a)
    }

    /// The size of option `opt` (reading its count if it takes one).
    fn size(&mut self, opt: u8) -> Result<u64, Failure> {
        Ok(match opt {
            b'B' | b'b' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'x' => 1,
            b'c' => self.number(1)? as u64,
            b'i' | b'I' => {
                let size = self.number(4)?;
                if size > MAX_INT_SIZE {
                    return Err(fail(&format!(
                        "integral size {size} is larger than limit of {MAX_INT_SIZE}"
                    )));
                }
                size as u64
            }
            _ => 0,
        })
    }

    /// The options that only change the header.
    fn control(&mut self, opt: u8, h: &mut Header) -> Result<(), Failure> {
        match opt {
            b' ' => {}
            b'>' => h.endian = Endian::Big,
            b'<' => h.endian = Endian::Little,
            b'!' => {
                let a = self.number(MAX_ALIGN)?;
                if a == 0 || a & (a - 1) != 0 {
                    return Err(fail(&format!("alignment {a} is not a power of 2")));
                }
                h.align = a;
            }
            _ => {
                return Err(fail(&format!(
                    "bad argument #1 to '{}' (invalid format option '{}')",
                    self.func,
                    char::from(opt)
                )))
            }
        }
        Ok(())
    }
}

/// Padding before an item of `size` bytes at offset `len`, as the C original computes it
/// (in `size_t`, then truncated to `int`).
fn to_align(len: u64, h: &Header, opt: u8, size: u64) -> i32 {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align as u64);
    (size.wrapping_sub(len & size.wrapping_sub(1)) & size.wrapping_sub(1)) as i32
}

fn add_signed(pos: u64, delta: i32) -> u64 {
    pos.wrapping_add(i64::from(delta) as u64)
}

fn number_arg(args: &Args, n: usize, func: &str) -> Result<f64, Failure> {
    match args.get(n - 1).as_ref() {
        Some(Value::Integer(i)) => Ok(*i as f64),
        Some(Value::Number(f)) => Ok(*f),
        Some(Value::String(s)) => s
            .to_str()
            .ok()
            .and_then(|s| super::libs::lua_str_to_number(&s))
            .ok_or_else(|| {
                fail(&format!(
                    "bad argument #{n} to '{func}' (number expected, got string)"
                ))
            }),
        other => Err(fail(&format!(
            "bad argument #{n} to '{func}' (number expected, got {})",
            type_name(other)
        ))),
    }
}

fn string_arg(args: &Args, n: usize, func: &str) -> Result<Vec<u8>, Failure> {
    match args.get(n - 1).as_ref() {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(i)) => Ok(i.to_string().into_bytes()),
        Some(Value::Number(f)) => Ok(super::printf_g(*f, 14).into_bytes()),
        other => Err(fail(&format!(
            "bad argument #{n} to '{func}' (string expected, got {})",
            type_name(other)
        ))),
    }
}

/// The integer `struct.pack` writes for `n`, as the C casts give it on x86-64.
fn to_bits(n: f64) -> u64 {
    if n < 0.0 {
        n as i64 as u64
    } else if n >= 18446744073709551616.0 || n.is_nan() {
        0
    } else {
        n as u64
    }
}

fn pack(lua: &Lua, args: Args) -> Result<Table, Failure> {
    let fmt = string_arg(&args, 1, "pack")?;
    let mut f = Format {
        bytes: &fmt,
        pos: 0,
        func: "pack",
    };
    let mut h = Header::new();
    let mut arg = 2;
    let mut total: u64 = 0;
    let mut out: Vec<u8> = Vec::new();
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        let pad = to_align(total, &h, opt, size);
        total = add_signed(total, pad);
        out.resize(out.len() + pad.max(0) as usize, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let mut value = to_bits(number_arg(&args, arg, "pack")?);
                arg += 1;
                let mut bytes = vec![0u8; size as usize];
                for i in 0..size as usize {
                    let at = if h.endian == Endian::Little {
                        i
                    } else {
                        size as usize - 1 - i
                    };
                    bytes[at] = (value & 0xff) as u8;
                    value >>= 8;
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let v = number_arg(&args, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Little => v.to_le_bytes(),
                    Endian::Big => v.to_be_bytes(),
                });
            }
            b'd' => {
                let v = number_arg(&args, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&match h.endian {
                    Endian::Little => v.to_le_bytes(),
                    Endian::Big => v.to_be_bytes(),
                });
            }
            b'c' | b's' => {
                let s = string_arg(&args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len() as u64;
                }
                if (s.len() as u64) < size {
                    return Err(fail(&format!(
                        "bad argument #{arg} to 'pack' (string too short)"
                    )));
                }
                out.extend_from_slice(&s[..size as usize]);
                if opt == b's' {
                    out.push(0);
                    size += 1;
                }
            }
            _ => f.control(opt, &mut h)?,
        }
        total = total.wrapping_add(size);
    }
    let s = lua.create_string(&out).map_err(Failure::from)?;
    Results::one(lua, Value::String(s))
}

fn read_integer(bytes: &[u8], endian: Endian, signed: bool, size: u64) -> f64 {
    let mut l: u64 = 0;
    let order: Box<dyn Iterator<Item = &u8>> = match endian {
        Endian::Big => Box::new(bytes.iter()),
        Endian::Little => Box::new(bytes.iter().rev()),
    };
    for b in order {
        l = (l << 8) | u64::from(*b);
    }
    if !signed {
        return l as f64;
    }
    // `~0 << (size * 8 - 1)`: x86 masks the shift count to six bits.
    let shift = (size.wrapping_mul(8).wrapping_sub(1)) & 63;
    let mask = u64::MAX << shift;
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: Args) -> Result<Table, Failure> {
    let fmt = string_arg(&args, 1, "unpack")?;
    let data = string_arg(&args, 2, "unpack")?;
    let start = match args.get(2).as_ref() {
        None | Some(Value::Nil) => 1.0,
        Some(_) => number_arg(&args, 3, "unpack")?,
    };
    let ld = data.len() as u64;
    // Redis's check: the offset, read as a `size_t`, must not be 0 (a negative one wraps
    // around and fails as too short below).
    if start as i64 == 0 {
        return Err(fail(
            "bad argument #3 to 'unpack' (offset must be 1 or greater)",
        ));
    }
    let mut pos = (start as i64).wrapping_sub(1) as u64;
    let mut f = Format {
        bytes: &fmt,
        pos: 0,
        func: "unpack",
    };
    let mut h = Header::new();
    let mut results = Results::new(lua)?;
    let too_short = || fail("bad argument #2 to 'unpack' (data string too short)");
    while let Some(opt) = f.next() {
        let mut size = f.size(opt)?;
        pos = add_signed(pos, to_align(pos, &h, opt, size));
        if !(size <= ld && pos <= ld - size) {
            return Err(too_short());
        }
        // Room for the item and the next position, beside the arguments.
        if args.len() + results.len() + 2 > LIBRARY_STACK_LIMIT {
            return Err(fail("stack overflow (too many results)"));
        }
        let at = pos as usize;
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = opt.is_ascii_lowercase();
                let v = read_integer(&data[at..at + size as usize], h.endian, signed, size);
                results.push(Value::Number(v))?;
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[at..at + 4].try_into().unwrap_or([0; 4]);
                let v = match h.endian {
                    Endian::Little => f32::from_le_bytes(b),
                    Endian::Big => f32::from_be_bytes(b),
                };
                results.push(Value::Number(f64::from(v)))?;
            }
            b'd' => {
                let b: [u8; 8] = data[at..at + 8].try_into().unwrap_or([0; 8]);
                let v = match h.endian {
                    Endian::Little => f64::from_le_bytes(b),
                    Endian::Big => f64::from_be_bytes(b),
                };
                results.push(Value::Number(v))?;
            }
            b'c' => {
                if size == 0 {
                    let previous = match results.last() {
                        Some(Value::Number(n)) => Some(n),
                        Some(Value::Integer(i)) => Some(i as f64),
                        Some(Value::String(s)) => s
                            .to_str()
                            .ok()
                            .and_then(|s| super::libs::lua_str_to_number(&s)),
                        _ => None,
                    };
                    let Some(n) = previous else {
                        return Err(fail("format 'c0' needs a previous size"));
                    };
                    size = if n < 0.0 { n as i64 as u64 } else { to_bits(n) };
                    results.pop()?;
                    if !(size <= ld && pos <= ld - size) {
                        return Err(too_short());
                    }
                }
                let s = lua
                    .create_string(&data[at..at + size as usize])
                    .map_err(Failure::from)?;
                results.push(Value::String(s))?;
            }
            b's' => {
                let Some(end) = data[at..].iter().position(|b| *b == 0) else {
                    return Err(fail("unfinished string in data"));
                };
                let s = lua
                    .create_string(&data[at..at + end])
                    .map_err(Failure::from)?;
                results.push(Value::String(s))?;
                size = end as u64 + 1;
            }
            _ => f.control(opt, &mut h)?,
        }
        pos = pos.wrapping_add(size);
    }
    results.push(Value::Number(pos.wrapping_add(1) as i64 as f64))?;
    results.finish()
}

fn size(lua: &Lua, args: Args) -> Result<Table, Failure> {
    let fmt = string_arg(&args, 1, "size")?;
    let mut f = Format {
        bytes: &fmt,
        pos: 0,
        func: "size",
    };
    let mut h = Header::new();
    let mut pos: u64 = 0;
    while let Some(opt) = f.next() {
        let size = f.size(opt)?;
        pos = add_signed(pos, to_align(pos, &h, opt, size));
        if opt == b's' {
            return Err(fail(
                "bad argument #1 to 'size' (option 's' has no fixed size)",
            ));
        } else if opt == b'c' && size == 0 {
            return Err(fail(
                "bad argument #1 to 'size' (option 'c0' has no fixed size)",
            ));
        }
        if !opt.is_ascii_alphanumeric() {
            f.control(opt, &mut h)?;
        }
        pos = pos.wrapping_add(size);
    }
    Results::one(lua, Value::Number(pos as i64 as f64))
}
