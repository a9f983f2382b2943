//! Redis's glob-style pattern matching, used by `KEYS`, `SCAN MATCH`, `PSUBSCRIBE`,
//! `PUBSUB CHANNELS` and `CONFIG GET`.
//!
//! `*` matches any run of bytes, `?` any one byte, `[abc]`, `[^abc]` and `[a-z]` a byte from a
//! class, and `\x` the byte `x` literally.

/// Whether `s` matches `pattern`; `nocase` compares ASCII letters case-insensitively.
pub(crate) fn matches(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    let mut give_up = false;
    match_from(pattern, s, nocase, 0, &mut give_up)
}

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

/// Matches `p` against `s`. `give_up` is set when a `*` found that the rest of the pattern
/// matches no suffix of `s`: an earlier `*` then need not try to swallow more bytes, since that
/// only leaves shorter suffixes for the same rest. Without it, `a*a*a*...b` against a long run
/// of `a`s tries exponentially many splits (Redis 7.0.15 stops the same way).
fn match_from(mut p: &[u8], mut s: &[u8], nocase: bool, depth: usize, give_up: &mut bool) -> bool {
    // Redis bounds recursion the same way, to stop pathological patterns.
    if depth > 1000 {
        return false;
    }
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                for i in 0..s.len() {
                    if match_from(&p[1..], &s[i..], nocase, depth + 1, give_up) {
                        return true;
                    }
                    if *give_up {
                        return false;
                    }
                }
                *give_up = true;
                return false;
            }
            b'?' => {
                s = &s[1..];
                p = &p[1..];
            }
            b'[' => {
                p = &p[1..];
                let not = p.first() == Some(&b'^');
                if not {
                    p = &p[1..];
                }
                let mut matched = false;
                loop {
                    if p.is_empty() {
                        break;
                    }
                    if p[0] == b'\\' && p.len() >= 2 {
                        p = &p[1..];
                        if eq(p[0], s[0], nocase) {
                            matched = true;
                        }
                    } else if p[0] == b']' {
                        break;
                    } else if p.len() >= 3 && p[1] == b'-' {
                        let (mut lo, mut hi) = (p[0], p[2]);
                        if lo > hi {
                            std::mem::swap(&mut lo, &mut hi);
                        }
                        let mut c = s[0];
                        if nocase {
                            lo = lo.to_ascii_lowercase();
                            hi = hi.to_ascii_lowercase();
                            c = c.to_ascii_lowercase();
                        }
                        if c >= lo && c <= hi {
                            matched = true;
                        }
                        p = &p[2..];
                    } else if eq(p[0], s[0], nocase) {
                        matched = true;
                    }
                    p = &p[1..];
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                s = &s[1..];
                // p points at ']' (or is empty for an unterminated class).
                if !p.is_empty() {
                    p = &p[1..];
                }
            }
            b'\\' if p.len() >= 2 => {
                if !eq(p[1], s[0], nocase) {
                    return false;
                }
                p = &p[2..];
                s = &s[1..];
            }
            c => {
                if !eq(c, s[0], nocase) {
                    return false;
                }
                p = &p[1..];
                s = &s[1..];
            }
        }
        if s.is_empty() {
            while p.first() == Some(&b'*') {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn glob_cases() {
        assert!(matches(b"*", b"anything", false));
        assert!(matches(b"h?llo", b"hello", false));
        assert!(matches(b"h[ae]llo", b"hallo", false));
        assert!(!matches(b"h[^e]llo", b"hello", false));
        assert!(matches(b"h[a-b]llo", b"hbllo", false));
        assert!(matches(b"lock:*", b"lock:", false));
        assert!(matches(b"a\\*b", b"a*b", false));
        assert!(!matches(b"a\\*b", b"axb", false));
        assert!(matches(b"MAXCLIENTS", b"maxclients", true));
        assert!(!matches(b"a", b"", false));
        assert!(matches(b"", b"", false));
        assert!(matches(b"*a*b*c", b"xxaxxbxxc", false));
        assert!(!matches(b"*a*b*c", b"xxaxxbxx", false));
        assert!(matches(b"a*b*", b"ab", false));
    }

    /// The pattern of Redis's "Regression for pattern matching long nested loops" test: it
    /// ran for minutes (exponential backtracking) before `*` learned to give up.
    #[test]
    fn nested_stars_give_up_instead_of_backtracking_forever() {
        let key = [b'a'; 40];
        let pattern = b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        assert!(!matches(pattern, &key, false));
        let mut long = key.to_vec();
        long.push(b'b');
        assert!(matches(pattern, &long, false));
    }
}
