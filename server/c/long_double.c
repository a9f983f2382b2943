/*
 * INCRBYFLOAT and HINCRBYFLOAT in the platform's `long double`, as Redis computes them: the
 * x87 80-bit format on x86-64, whose 64-bit mantissa and 17 printed decimals are what make
 * `INCRBYFLOAT k 0.1` then `0.2` answer 0.3 (not 0.30000000000000004).
 * Rust has no such type, so this one step is C; the command logic stays in Rust.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest text accepted or produced, as Redis's MAX_LONG_DOUBLE_CHARS. */
#define LATCHKEY_LD_MAX 5120

/*
 * Parses `len` bytes as a long double with Redis's rules (strtold over the whole text; no
 * leading space; no NaN; an overflow or underflow is refused). strtold stops at a NUL byte, so
 * the parse must end at `len` itself: "1\0002" is not the float 1 (Redis 7.0.15 checks the
 * same). Returns 1 on success.
 */
static int parse(const char *s, size_t len, long double *out) {
    char buf[LATCHKEY_LD_MAX];
    char *end;
    long double v;
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    v = strtold(buf, &end);
    if (isspace((unsigned char)buf[0]) || end != buf + len ||
        (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || fpclassify(v) == FP_ZERO)) ||
        errno == EINVAL || isnan(v))
        return 0;
    *out = v;
    return 1;
}

/*
 * Checks an increment as HINCRBYFLOAT does before it looks at the key: 0 when it is a finite
 * float, -2 when it is not a float, -3 when it is NaN or infinite.
 */
int latchkey_ld_check_increment(const char *by, size_t by_len) {
    long double incr;
    if (!parse(by, by_len, &incr)) return -2;
    if (isnan(incr) || isinf(incr)) return -3;
    return 0;
}

/*
 * Adds `by` to `current` (NULL: zero) and writes the sum as Redis stores it: "%.17Lf"
 * without trailing zeros, "-0" as "0". Returns the length written, or:
 *   -1  `current` is not a float      -2  `by` is not a float
 *   -4  the sum is NaN or infinite     -5  the sum does not fit in `out`
 * `by` is checked before `current`, as both commands do.
 */
long latchkey_ld_incr(const char *current, size_t current_len, const char *by, size_t by_len,
                      char *out, size_t out_len) {
    long double incr, value = 0;
    int n;
    if (!parse(by, by_len, &incr)) return -2;
    if (current != NULL && !parse(current, current_len, &value)) return -1;
    value += incr;
    if (isnan(value) || isinf(value)) return -4;
    n = snprintf(out, out_len, "%.17Lf", value);
    if (n < 0 || (size_t)n + 1 > out_len) return -5;
    if (strchr(out, '.') != NULL) {
        while (out[n - 1] == '0') n--;
        if (out[n - 1] == '.') n--;
    }
    if (n == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        n = 1;
    }
    out[n] = '\0';
    return n;
}
