//! The `save` parameter: Redis's save points, `seconds changes` pairs (`"3600 1 300 100 60
//! 10000"`), each saying "write a snapshot in the background once at least `changes` writes
//! happened and more than `seconds` passed since the last snapshot". This module reads and
//! prints the value as Redis 7.0 does; the cron that acts on it is
//! [`crate::cmd::save_points`].

/// One save point: more than `seconds` since the last snapshot and at least `changes` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SavePoint {
    /// Seconds since the last snapshot (Redis requires at least 1).
    pub seconds: i64,
    /// Writes since the last snapshot (0 or more; a C `int`, as Redis keeps it).
    pub changes: i32,
}

/// Redis's reason for refusing a value of `save`.
pub(crate) const INVALID: &str = "Invalid save parameters";

/// C's `strtoll(s, &end, 10)` as Redis's check uses it: leading blanks, a sign, digits
/// (saturating past the range), and whether the whole string was read. An empty string reads
/// as 0, whole (`end` at the NUL), as in C.
fn strtoll(s: &[u8]) -> (i64, bool) {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        i += 1;
    }
    let negative = i < s.len() && s[i] == b'-';
    if i < s.len() && (s[i] == b'-' || s[i] == b'+') {
        i += 1;
    }
    let digits = i;
    let mut v: i64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        let d = (s[i] - b'0') as i64;
        v = if negative {
            v.saturating_mul(10).saturating_sub(d)
        } else {
            v.saturating_mul(10).saturating_add(d)
        };
        i += 1;
    }
    if i == digits {
        // No digits: nothing converted, the end is the start of the string.
        return (0, s.is_empty());
    }
    (v, i == s.len())
}

/// Reads a value of `save` as `CONFIG SET` (and the command line) gives it: split on single
/// spaces, as Redis splits its multi-argument parameters, `""` for no save points. `Err` is
/// Redis's reason.
pub(crate) fn parse(value: &str) -> Result<Vec<SavePoint>, &'static str> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    let parts: Vec<&[u8]> = value.as_bytes().split(|b| *b == b' ').collect();
    if parts.len() % 2 == 1 {
        return Err(INVALID);
    }
    let mut points = Vec::with_capacity(parts.len() / 2);
    for pair in parts.chunks(2) {
        let (seconds, whole_s) = strtoll(pair[0]);
        let (changes, whole_c) = strtoll(pair[1]);
        if !whole_s || !whole_c || seconds < 1 || changes < 0 {
            return Err(INVALID);
        }
        points.push(SavePoint {
            seconds,
            // Redis stores the count in an `int`: a larger one wraps as C's conversion does.
            changes: changes as i32,
        });
    }
    Ok(points)
}

/// The value as `CONFIG GET save` prints it: the pairs, single spaces between.
pub(crate) fn render(points: &[SavePoint]) -> String {
    points
        .iter()
        .map(|p| format!("{} {}", p.seconds, p.changes))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_s_values_are_read_and_printed_back() {
        let p = parse("3600 1 300 100 60 10000").unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(render(&p), "3600 1 300 100 60 10000");
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(render(&parse("+5 -0").unwrap()), "5 0");
    }

    #[test]
    fn bad_values_get_redis_s_reason() {
        for bad in [
            "1", "0 1", "1 -1", "1 x", "1  1", " 1 1", "1 1 ", "0x10 1", "- 1",
        ] {
            assert_eq!(parse(bad), Err(INVALID), "{bad:?}");
        }
    }
}
