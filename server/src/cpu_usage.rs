//! The CPU time the process has used, for `INFO cpu`.
//!
//! Redis reports its own `getrusage` figures there; latchkey does the same for its whole
//! process (every thread: it has no single main thread to report apart). Where the platform
//! has no `getrusage`, the section says nothing rather than a made-up zero.

/// `INFO cpu`'s body: system and user CPU seconds of this process and of its finished
/// children (none, usually), in Redis's field names and six-decimal format.
pub(crate) fn info_section() -> String {
    #[cfg(unix)]
    {
        let (sys, user) = rusage(libc::RUSAGE_SELF);
        let (sys_children, user_children) = rusage(libc::RUSAGE_CHILDREN);
        format!(
            "used_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{sys_children:.6}\r\nused_cpu_user_children:{user_children:.6}\r\n"
        )
    }
    #[cfg(not(unix))]
    {
        String::new()
    }
}

/// `(system, user)` CPU seconds that `getrusage(who)` reports (zero if the call fails, which it
/// does only for an invalid `who`).
#[cfg(unix)]
fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: `getrusage` only writes the `rusage` it is given, which is a plain C struct that
    // all-zero bytes initialise validly.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, exclusively borrowed `rusage` for the call's duration.
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return (0.0, 0.0);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_stime), secs(usage.ru_utime))
}
