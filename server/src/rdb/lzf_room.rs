//! Whether Redis would have kept an LZF-compressed string: the test that makes latchkey's
//! compressed strings the very bytes Redis writes.
//!
//! Redis compresses a string of `n` bytes into a buffer of `n - 4` bytes (`rdbSaveLzfStringObject`)
//! and stores it plain when liblzf gives up. liblzf gives up *before* it runs out of room: it
//! checks, as it goes, that a back reference still has four bytes of margin, that each literal
//! has one, and that the last literals have three. So a string that compresses to `n - 5`
//! bytes can still be stored plain by Redis. The `lzf` crate runs the same algorithm (a port of
//! liblzf with Redis's 64 Ki-entry hash table) but into a buffer of `n` bytes, so it finishes
//! where Redis's gave up; its output is the same token stream up to the point where Redis's
//! stopped. [`fits`] replays that token stream and recomputes each of liblzf's checks against a
//! smaller room, which answers whether Redis's run would have finished.
//!
//! The token stream: a byte below 32 opens a run of that many plus one literal bytes; any
//! other byte is a back reference, its top three bits the length minus 2 (7: one more byte
//! adds to it) and the next byte the low bits of the offset.

/// liblzf's main loop stops this many bytes before the end of the input; the rest are copied
/// as literals after its final check.
const TAIL: usize = 2;

/// Whether liblzf, compressing `plain_len` bytes into a buffer of `room` bytes, finishes
/// (rather than gives up) when its output is `compressed` (a complete stream it produced with
/// more room).
pub(crate) fn fits(compressed: &[u8], plain_len: usize, room: usize) -> bool {
    let main_end = plain_len.saturating_sub(TAIL);
    // The least room that passes every check met so far.
    let mut need = 0usize;
    // Where the input stands, and whether the main loop's final check was met.
    let (mut input, mut main_done) = (0usize, false);
    let mut pos = 0usize;
    while pos < compressed.len() {
        let ctrl = compressed[pos] as usize;
        if ctrl < 32 {
            // A literal run: its header at `pos`, so the k-th literal is written at
            // `pos + 1 + k`, where the output length is checked before the write.
            for k in 0..=ctrl {
                let out_len = pos + 1 + k;
                if input < main_end {
                    // Main loop: "one more literal byte" needs `out_len < room`.
                    need = need.max(out_len + 1);
                } else if !main_done {
                    // The main loop ended here: "at most 3 bytes can be missing".
                    need = need.max(out_len + 3);
                    main_done = true;
                }
                input += 1;
            }
            pos += 1 + ctrl + 1;
        } else {
            // A back reference, made by the main loop only: checked at its own position with
            // four bytes of margin (`out_len + 3 + 1 >= room` gives up).
            need = need.max(pos + 5);
            let mut len = ctrl >> 5;
            let mut size = 2;
            if len == 7 {
                len += *compressed.get(pos + 1).unwrap_or(&0) as usize;
                size = 3;
            }
            input += len + 2;
            pos += size;
        }
    }
    if !main_done {
        // The main loop ended with no literal after it: its final check saw the byte it had
        // kept for the next run's header.
        need = need.max(pos + 1 + 3);
    }
    need <= room
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_that_saves_just_four_bytes_is_one_redis_keeps_plain() {
        // A small HyperLogLog: 27 bytes that the crate compresses to 23, which Redis (room
        // 23) gives up on, as its `DUMP` shows (the string goes plain).
        let hll =
            b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80`\xf3\x80P\xb1\x84K\xfb\x80BZ";
        let packed = lzf::compress(hll).unwrap();
        assert_eq!(packed.len(), 23);
        assert!(!fits(&packed, hll.len(), hll.len() - 4));
        assert!(fits(&packed, hll.len(), hll.len()));
    }

    #[test]
    fn a_string_that_compresses_well_fits() {
        let data = [b'x'; 30];
        let packed = lzf::compress(&data).unwrap();
        assert!(fits(&packed, 30, 26));
        // Never with less room than the output itself.
        assert!(!fits(&packed, 30, packed.len() - 1));
    }
}
