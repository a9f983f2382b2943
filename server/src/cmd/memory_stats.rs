//! `MEMORY STATS`, `MEMORY DOCTOR`, `MEMORY MALLOC-STATS` and `MEMORY PURGE`: what the server
//! knows of its memory, in Redis 7.0.15's shapes.
//!
//! `MEMORY STATS` answers every field Redis 7.0.15 prints, in its order. The figures come from
//! the same places as `INFO memory` ([`crate::evict::info_section`]): `total.allocated` is
//! `used_memory` (the counting allocator's total when the process installed it, else the
//! keyspace estimate), `peak.allocated` its peak, `dataset.bytes` `used_memory_dataset`.
//! Where latchkey measures nothing of the kind the field says so with what is true of it:
//! `startup.allocated` is 0 (latchkey does not record its memory at start), `cluster.links`
//! and `overhead.hashtable.slot-to-keys` are 0 (never a cluster node). `aof.buffer` is what a
//! running `BGREWRITEAOF` holds of the writes made since its snapshot (0 otherwise: the AOF
//! itself is written as commands run, with no buffer between). The allocator's own figures
//! (`allocator.*`) are `used_memory` for what is allocated and active and the process's RSS
//! for what is resident: latchkey does not ask jemalloc for its page counts. See
//! `docs/COMPATIBILITY.md`.
//!
//! `MEMORY DOCTOR` runs Redis's checks on these figures and answers its report.
//! `MEMORY MALLOC-STATS` answers jemalloc's report when the binary's counting allocator runs
//! on jemalloc, and Redis's `Stats not supported for the current allocator` otherwise.
//! `MEMORY PURGE` asks jemalloc to give back its dirty pages (`arena.<all>.purge`), or, on
//! another allocator, does nothing and answers `OK`, as Redis built without jemalloc does.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::Ctx;
use crate::client::ClientRole;
use crate::frame::Frame;
use crate::memory::DbMemory;
use crate::state::Shared;

/// What Redis's `getMemoryOverheadData` gathers, from latchkey's figures.
struct Overhead {
    peak: u64,
    total: u64,
    startup: u64,
    backlog: u64,
    clients_slaves: u64,
    clients_normal: u64,
    /// What a running AOF rewrite holds of the writes made since its snapshot.
    aof_buffer: u64,
    lua_caches: u64,
    functions_caches: u64,
    cached_scripts: u64,
    /// `(db, main table, expires table)` of each database holding keys.
    dbs: Vec<(usize, u64, u64)>,
    overhead_total: u64,
    keys: u64,
    dataset: u64,
    rss: u64,
    normal_clients: u64,
    replicas: u64,
}

/// A number after `name:` among `INFO`-style lines (0 when absent).
fn info_number(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn gather(shared: &Shared) -> Overhead {
    let total = crate::evict::used_memory(shared) as u64;
    let peak = shared.evictor.note_peak(total as usize) as u64;
    let backlog = shared
        .replication
        .backlog
        .lock()
        .as_ref()
        .map_or(0, |b| b.histlen());
    let (mut clients_slaves, mut clients_normal, mut normal_clients, mut replicas) = (0, 0, 0, 0);
    for c in shared.clients.list() {
        let bytes = (c.qbuf.load(Ordering::Relaxed)
            + c.qbuf_free.load(Ordering::Relaxed)
            + c.reply_buf.load(Ordering::Relaxed)
            + c.queued_push_bytes.load(Ordering::Relaxed)) as u64;
        if c.info.lock().role == ClientRole::Replica {
            clients_slaves += bytes;
            replicas += 1;
        } else {
            clients_normal += bytes;
            normal_clients += 1;
        }
    }
    let scripting = shared.scripting().memory_info();
    let lua_caches = info_number(&scripting, "used_memory_scripts_eval");
    let functions_caches = info_number(&scripting, "used_memory_functions");
    let cached_scripts = info_number(&scripting, "number_of_cached_scripts");
    let mut dbs = Vec::new();
    let mut keys = 0;
    for (i, db) in shared.keyspace.iter() {
        let n = db.len() as u64;
        if n == 0 {
            continue;
        }
        keys += n;
        let main = DbMemory::table_bytes(db.map().capacity()) as u64;
        // The keys with a deadline are indexed beside the table: one pointer-sized slot each.
        let expires = (db.memory().volatile_keys() * std::mem::size_of::<usize>()) as u64;
        dbs.push((i, main, expires));
    }
    let startup = 0;
    let aof_buffer = shared
        .aof
        .read()
        .as_ref()
        .map_or(0, |a| a.rewrite_buffered() as u64);
    let overhead_total = startup
        + backlog
        + aof_buffer
        + clients_slaves
        + clients_normal
        + lua_caches
        + functions_caches
        + dbs.iter().map(|d| d.1 + d.2).sum::<u64>();
    Overhead {
        peak,
        total,
        startup,
        backlog,
        clients_slaves,
        clients_normal,
        aof_buffer,
        lua_caches,
        functions_caches,
        cached_scripts,
        dbs,
        overhead_total,
        keys,
        dataset: crate::evict::keyspace_bytes(shared) as u64,
        rss: crate::memory::rss_bytes() as u64,
        normal_clients,
        replicas,
    }
}

/// A ratio as Redis computes it in floats (`(float)a / b`), 0 when `b` is 0.
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        (a as f32 / b as f32) as f64
    }
}

/// `MEMORY STATS`.
pub(crate) fn stats(ctx: &mut Ctx<'_>) -> Frame {
    let o = gather(ctx.shared);
    let int = |n: u64| Frame::Integer(n as i64);
    let mut map = vec![
        ("peak.allocated", int(o.peak)),
        ("total.allocated", int(o.total)),
        ("startup.allocated", int(o.startup)),
        ("replication.backlog", int(o.backlog)),
        ("clients.slaves", int(o.clients_slaves)),
        ("clients.normal", int(o.clients_normal)),
        ("cluster.links", int(0)),
        ("aof.buffer", int(o.aof_buffer)),
        ("lua.caches", int(o.lua_caches)),
        ("functions.caches", int(o.functions_caches)),
    ]
    .into_iter()
    .map(|(k, v)| (Frame::bulk(k), v))
    .collect::<Vec<_>>();
    for (db, main, expires) in &o.dbs {
        map.push((
            Frame::bulk(format!("db.{db}")),
            Frame::Map(vec![
                (Frame::bulk("overhead.hashtable.main"), int(*main)),
                (Frame::bulk("overhead.hashtable.expires"), int(*expires)),
                (Frame::bulk("overhead.hashtable.slot-to-keys"), int(0)),
            ]),
        ));
    }
    let net = o.total.saturating_sub(o.startup);
    let bytes_per_key = net.checked_div(o.keys).unwrap_or(0);
    // latchkey does not ask the allocator for its pages: what is allocated is what is active,
    // and what is resident is the process's RSS.
    let (allocated, active, resident) = (o.total, o.total, o.rss);
    let rest = [
        ("overhead.total", int(o.overhead_total)),
        ("keys.count", int(o.keys)),
        ("keys.bytes-per-key", int(bytes_per_key)),
        ("dataset.bytes", int(o.dataset)),
        (
            "dataset.percentage",
            Frame::Double(ratio(o.dataset * 100, net)),
        ),
        (
            "peak.percentage",
            Frame::Double(ratio(o.total * 100, o.peak)),
        ),
        ("allocator.allocated", int(allocated)),
        ("allocator.active", int(active)),
        ("allocator.resident", int(resident)),
        (
            "allocator-fragmentation.ratio",
            Frame::Double(ratio(active, allocated)),
        ),
        ("allocator-fragmentation.bytes", int(active - allocated)),
        (
            "allocator-rss.ratio",
            Frame::Double(ratio(resident, active)),
        ),
        (
            "allocator-rss.bytes",
            Frame::Integer(resident as i64 - active as i64),
        ),
        ("rss-overhead.ratio", Frame::Double(ratio(o.rss, resident))),
        (
            "rss-overhead.bytes",
            Frame::Integer(o.rss as i64 - resident as i64),
        ),
        ("fragmentation", Frame::Double(ratio(o.rss, o.total))),
        (
            "fragmentation.bytes",
            Frame::Integer(o.rss as i64 - o.total as i64),
        ),
    ];
    map.extend(rest.into_iter().map(|(k, v)| (Frame::bulk(k), v)));
    Frame::Map(map)
}

/// `MEMORY DOCTOR`: Redis's checks of [`stats`]'s figures, and its report.
pub(crate) fn doctor(ctx: &mut Ctx<'_>) -> Frame {
    let o = gather(ctx.shared);
    Frame::Verbatim(Bytes::from(report(&o)))
}

fn report(o: &Overhead) -> String {
    const MB: u64 = 1 << 20;
    if o.total < 5 * MB {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".to_string();
    }
    let big_peak = ratio(o.peak, o.total) > 1.5;
    let high_frag = ratio(o.rss, o.total) > 1.4 && o.rss.saturating_sub(o.total) > 10 * MB;
    // Allocated and active are the same figure here (see `stats`), and what is resident is
    // the RSS: only the allocator's RSS overhead can show.
    let high_alloc_rss = ratio(o.rss, o.total) > 1.1 && o.rss.saturating_sub(o.total) > 10 * MB;
    let big_client_buf = o.normal_clients > 0 && o.clients_normal / o.normal_clients > 200 * 1024;
    let big_slave_buf = o.replicas > 0 && o.clients_slaves > 10 * MB;
    let many_scripts = o.cached_scripts > 1000;
    let found = [
        big_peak,
        high_frag,
        high_alloc_rss,
        big_client_buf,
        big_slave_buf,
        many_scripts,
    ];
    if !found.contains(&true) {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".to_string();
    }
    let mut s =
        String::from("Sam, I detected a few issues in this Redis instance memory implants:\n\n");
    if big_peak {
        s.push_str(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
    }
    if high_frag {
        s.push_str(&format!(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"{}\".\n\n", crate::memory::allocator_name()));
    }
    if high_alloc_rss {
        s.push_str(" * High allocator RSS overhead: This instance has an RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the allocator is much larger than the sum what the allocator actually holds). This problem is usually due to a large peak memory (check if there is a peak memory entry above in the report), you can try the MEMORY PURGE command to reclaim it.\n\n");
    }
    if big_slave_buf {
        s.push_str(" * Big replica buffers: The replica output buffers in this instance are greater than 10MB for each replica (on average). This likely means that there is some replica instance that is struggling receiving data, either because it is too slow or because of networking issues. As a result, data piles on the master output buffers. Please try to identify what replica is not receiving data correctly and why. You can use the INFO output in order to check the replicas delays and the CLIENT LIST command to check the output buffers of each replica.\n\n");
    }
    if big_client_buf {
        s.push_str(" * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n");
    }
    if many_scripts {
        s.push_str(" * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n");
    }
    s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
    s
}

/// `MEMORY MALLOC-STATS`.
pub(crate) fn malloc_stats() -> Frame {
    match crate::memory::allocator_report() {
        Some(text) => Frame::Verbatim(Bytes::from(text)),
        None => Frame::bulk("Stats not supported for the current allocator"),
    }
}

/// `MEMORY PURGE`.
pub(crate) fn purge() -> Frame {
    if crate::memory::purge() {
        Frame::ok()
    } else {
        Frame::error("ERR Error purging dirty pages")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_numbers_are_read_by_name() {
        let text = "used_memory_lua:31744\r\nused_memory_scripts_eval:120\r\n";
        assert_eq!(info_number(text, "used_memory_scripts_eval"), 120);
        assert_eq!(info_number(text, "used_memory_lua"), 31744);
        assert_eq!(info_number(text, "missing"), 0);
    }

    #[test]
    fn ratios_are_floats_and_never_divide_by_zero() {
        assert_eq!(ratio(1, 0), 0.0);
        assert_eq!(ratio(3, 2), 1.5);
    }
}
