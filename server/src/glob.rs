//! Redis's glob-style pattern matching, used by `KEYS`, `SCAN MATCH`, `PSUBSCRIBE`,
//! `PUBSUB CHANNELS` and `CONFIG GET`.
//!
//! `*` matches any run of bytes, `?` any one byte, `[abc]`, `[^abc]` and `[a-z]` a byte from a
//! class, and `\x` the byte `x` literally.

/// Whether `s` matches `pattern`; `nocase` compares ASCII letters case-insensitively.
pub fn matches(pattern: &[u8], s: &[u8], nocase: bool) -> bool {
    match_from(pattern, s, nocase, 0)
}

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

fn match_from(mut p: &[u8], mut s: &[u8], nocase: bool, depth: usize) -> bool {
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
                    if match_from(&p[1..], &s[i..], nocase, depth + 1) {
                        return true;
                    }
                }
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
    }
}
