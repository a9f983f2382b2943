//! The latency monitor (`LATENCY LATEST|HISTORY|RESET|GRAPH|DOCTOR`) and latency tracking
//! (`INFO latencystats`, `LATENCY HISTOGRAM`), as Redis 7.0 keeps them (`latency.c`).
//!
//! **The monitor** keeps, per event, the last [`TS_LEN`] samples of the events that took at
//! least `latency-monitor-threshold` milliseconds (0: the monitor is off), at most one a second
//! (a second's later samples keep the highest latency), and the highest latency since the
//! event's last reset. The events latchkey records:
//!
//! - `command`: a command (not flagged `fast`) whose handler took that long, counted as
//!   `INFO commandstats` counts it: at the top level, inside `EXEC`, inside a script;
//!   `DEBUG SLEEP` counts its sleep, as it holds the server in Redis;
//! - `fast-command`: the same for a command flagged `fast`;
//! - `expire-cycle`: the active expiry cycle kept its worker that long without letting
//!   clients run (see [`crate::expire`]): the longest such stretch of a pass. latchkey's cycle
//!   yields between small steps and frees big values on the background freer, so it rarely
//!   gets there; Redis's cycle frees them itself.
//!
//! Redis's other events (`fork`, `aof-*`, `eviction-*`, `expire-del`, `command-unblocking`,
//! ...) are not recorded: latchkey forks nothing and does not time those paths on their own.
//!
//! **Tracking** keeps one HdrHistogram per command (a container's per subcommand,
//! `config|get`) of its handler's time, in nanoseconds from 1 ns to 1 s with two significant
//! figures, as Redis keeps it (a microsecond time, so a 0 µs call counts as 1 ns), while
//! `latency-tracking` is `yes` (the default). `CONFIG RESETSTAT` drops them.
//!
//! Cost: a command's sample goes into a histogram of the thread that ran it, behind a lock
//! only that thread and a reader (`INFO`, `LATENCY HISTOGRAM`) take; a reader adds the
//! threads' histograms up. Nothing is shared between two connections on two threads. Under
//! `redis-benchmark -t set,get -P 16`, perf puts the whole of it (the thread's list, the
//! lock, the histogram's increment) at about 1.8% of the server's samples with a
//! `parking_lot::Mutex`, most of it the uncontended lock's two atomic instructions, which is
//! why the shard has a lighter lock of its own ([`ShardLock`]); with `latency-tracking no` and
//! the monitor off it is two relaxed loads.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hdrhistogram::Histogram;
use parking_lot::{lock_api, Mutex};

use crate::cmdstats::StatKey;

/// Samples kept per event (Redis's `LATENCY_TS_LEN`).
pub(crate) const TS_LEN: usize = 160;

/// The smallest value a histogram records: 1 ns (Redis's `LATENCY_HISTOGRAM_MIN_VALUE`).
const HISTOGRAM_MIN_NS: u64 = 1;
/// The largest: 1 s; longer calls count as 1 s (`LATENCY_HISTOGRAM_MAX_VALUE`).
const HISTOGRAM_MAX_NS: u64 = 1_000_000_000;
/// Significant figures kept (`LATENCY_HISTOGRAM_PRECISION`).
const HISTOGRAM_SIGFIG: u8 = 2;

// ---------------------------------------------------------------------------------------------
// The monitor

/// One sample: the Unix second it was taken in and its latency in milliseconds (0 time: an
/// empty slot).
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    time: i64,
    latency: u32,
}

/// One event's samples, a ring of [`TS_LEN`] (Redis's `latencyTimeSeries`).
#[derive(Debug)]
struct TimeSeries {
    /// Where the next sample goes.
    idx: usize,
    /// The highest latency since the event was created or reset.
    max: u32,
    samples: [Sample; TS_LEN],
}

impl TimeSeries {
    fn new() -> Self {
        TimeSeries {
            idx: 0,
            max: 0,
            samples: [Sample::default(); TS_LEN],
        }
    }

    fn last(&self) -> Sample {
        self.samples[(self.idx + TS_LEN - 1) % TS_LEN]
    }

    /// The samples, oldest first, skipping empty slots.
    fn in_order(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..TS_LEN)
            .map(move |j| self.samples[(self.idx + j) % TS_LEN])
            .filter(|s| s.time != 0)
    }
}

/// What `LATENCY DOCTOR` needs to know of the rest of the server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DoctorContext {
    /// `latency-monitor-threshold`, in milliseconds.
    pub(crate) threshold_ms: u64,
    /// `slowlog-log-slower-than`, in microseconds.
    pub(crate) slowlog_slower_than: i64,
    /// The current Unix second.
    pub(crate) now_s: i64,
    /// Bytes of the process in transparent huge pages (`AnonHugePages` of
    /// `/proc/self/smaps`).
    pub(crate) anon_huge_pages: u64,
}

/// A server's latency events (part of [`crate::state::Stats`]), in the order they first
/// happened.
#[derive(Debug, Default)]
pub(crate) struct LatencyMonitor {
    events: Mutex<Vec<(String, Box<TimeSeries>)>>,
}

impl LatencyMonitor {
    /// Records that `event` took `latency_ms` at Unix second `now_s` (Redis's
    /// `latencyAddSample`: the caller has checked the threshold).
    pub(crate) fn add_sample(&self, event: &str, latency_ms: u64, now_s: i64) {
        let latency = u32::try_from(latency_ms).unwrap_or(u32::MAX);
        let mut events = self.events.lock();
        let ts = match events.iter().position(|(name, _)| name == event) {
            Some(i) => &mut events[i].1,
            None => {
                events.push((event.to_string(), Box::new(TimeSeries::new())));
                &mut events.last_mut().expect("just pushed").1
            }
        };
        ts.max = ts.max.max(latency);
        // A sample in the same second as the previous one only raises it.
        let prev = (ts.idx + TS_LEN - 1) % TS_LEN;
        if ts.samples[prev].time == now_s {
            ts.samples[prev].latency = ts.samples[prev].latency.max(latency);
            return;
        }
        ts.samples[ts.idx] = Sample {
            time: now_s,
            latency,
        };
        ts.idx = (ts.idx + 1) % TS_LEN;
    }

    /// Forgets `event` (ASCII case-insensitively), or every event when `None`: how many were
    /// forgotten (`LATENCY RESET`).
    pub(crate) fn reset(&self, event: Option<&[u8]>) -> usize {
        let mut events = self.events.lock();
        let before = events.len();
        events.retain(|(name, _)| event.is_some_and(|e| !name.as_bytes().eq_ignore_ascii_case(e)));
        before - events.len()
    }

    /// `event`'s samples (case-sensitive, as Redis looks it up), oldest first, as `(Unix
    /// second, milliseconds)`; `None` for an event that never happened.
    pub(crate) fn history(&self, event: &[u8]) -> Option<Vec<(i64, u32)>> {
        let events = self.events.lock();
        let (_, ts) = events.iter().find(|(n, _)| n.as_bytes() == event)?;
        Some(ts.in_order().map(|s| (s.time, s.latency)).collect())
    }

    /// Every event's last sample: `(event, Unix second, milliseconds, highest milliseconds)`
    /// (`LATENCY LATEST`).
    pub(crate) fn latest(&self) -> Vec<(String, i64, u32, u32)> {
        self.events
            .lock()
            .iter()
            .map(|(name, ts)| {
                let last = ts.last();
                (name.clone(), last.time, last.latency, ts.max)
            })
            .collect()
    }

    /// `LATENCY GRAPH event`: the ASCII sparkline of its samples, `None` if it never
    /// happened.
    pub(crate) fn graph(&self, event: &[u8], now_s: i64) -> Option<String> {
        let events = self.events.lock();
        let (name, ts) = events.iter().find(|(n, _)| n.as_bytes() == event)?;
        let samples: Vec<(f64, String)> = ts
            .in_order()
            .map(|s| (f64::from(s.latency), ago(now_s - s.time)))
            .collect();
        let high = ts.in_order().map(|s| s.latency).max().unwrap_or(0);
        let low = ts.in_order().map(|s| s.latency).min().unwrap_or(0);
        let mut out = format!(
            "{name} - high {high} ms, low {low} ms (all time high {} ms)\n",
            ts.max
        );
        out.push_str(&"-".repeat(GRAPH_COLS));
        out.push('\n');
        sparkline(&mut out, &samples, GRAPH_COLS, 4);
        Some(out)
    }

    /// `LATENCY DOCTOR`: Redis's report, its words and advice, for the events latchkey
    /// records.
    pub(crate) fn doctor(&self, ctx: DoctorContext) -> String {
        let events = self.events.lock();
        if events.is_empty() && ctx.threshold_ms == 0 {
            return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".to_string();
        }
        let mut report = String::new();
        let mut advice = Advice::default();
        let mut advices = 0;
        for (n, (name, ts)) in events.iter().enumerate() {
            if n == 0 {
                report.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
            }
            let stats = analyze(ts, ctx.now_s);
            let _ = write!(
                report,
                "{}. {name}: {} latency spikes (average {}ms, mean deviation {}ms, period {:.2} sec). Worst all time event {}ms.",
                n + 1,
                stats.samples,
                stats.avg,
                stats.mad,
                // Redis divides by the count even when it is 0 (never: an event has a
                // sample), which gives nan.
                stats.period as f64 / f64::from(stats.samples),
                ts.max
            );
            let event = name.to_ascii_lowercase();
            if event == "command" {
                if ctx.slowlog_slower_than < 0 {
                    advice.slowlog_enabled = true;
                    advices += 1;
                } else if (ctx.slowlog_slower_than / 1000) as u64 > ctx.threshold_ms {
                    advice.slowlog_tuning = true;
                    advices += 1;
                }
                advice.slowlog_inspect = true;
                advice.large_objects = true;
                advices += 2;
            }
            if event == "fast-command" {
                advice.scheduler = true;
                advices += 1;
            }
            if event == "expire-cycle" {
                advice.hz = true;
                advice.large_objects = true;
                advices += 2;
            }
            report.push('\n');
        }
        if ctx.anon_huge_pages > 0 {
            advice.disable_thp = true;
            advices += 1;
        }
        let eventnum = events.len();
        if eventnum == 0 && advices == 0 {
            report.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
        } else if eventnum > 0 && advices == 0 {
            report.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
        } else {
            advice.write(&mut report, ctx.threshold_ms);
        }
        report
    }
}

/// The advice `LATENCY DOCTOR` gathered (those of Redis's that latchkey's events can call
/// for).
#[derive(Debug, Default)]
struct Advice {
    slowlog_enabled: bool,
    slowlog_tuning: bool,
    slowlog_inspect: bool,
    scheduler: bool,
    hz: bool,
    large_objects: bool,
    disable_thp: bool,
}

impl Advice {
    fn write(&self, report: &mut String, threshold_ms: u64) {
        let us = threshold_ms.wrapping_mul(1000);
        report.push_str("\nI have a few advices for you:\n\n");
        if self.slowlog_enabled {
            let _ = writeln!(report, "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {us}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.");
        }
        if self.slowlog_tuning {
            let _ = writeln!(report, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {us}'.");
        }
        if self.slowlog_inspect {
            report.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
        }
        if self.scheduler {
            report.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
        }
        // latchkey's `hz` is 10, under the 100 Redis suggests.
        if self.hz {
            report.push_str("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n");
        }
        if self.large_objects {
            report.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
        }
        if self.disable_thp {
            report.push_str("- I detected a non zero amount of anonymous huge pages used by your process. This creates very serious latency events in different conditions, especially when Redis is persisting on disk. To disable THP support use the command 'echo never > /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so that the command will be executed again after a reboot. Note that even if you have already disabled THP, you still need to restart the Redis process to get rid of the huge pages already created.\n");
        }
    }
}

/// Redis's `latencyStats` of one event.
struct EventStats {
    avg: u64,
    mad: u64,
    samples: u32,
    period: i64,
}

/// Redis's `analyzeLatencyForEvent`: the mean of the samples, their mean absolute deviation,
/// and the seconds since the oldest (at least 1).
fn analyze(ts: &TimeSeries, now_s: i64) -> EventStats {
    let mut samples = 0u32;
    let mut sum = 0u64;
    let mut oldest = 0i64;
    for s in ts.samples.iter().filter(|s| s.time != 0) {
        samples += 1;
        sum += u64::from(s.latency);
        if oldest == 0 || s.time < oldest {
            oldest = s.time;
        }
    }
    let (mut avg, mut period) = (0, 0);
    if samples > 0 {
        avg = sum / u64::from(samples);
        period = (now_s - oldest).max(0);
        if period == 0 {
            period = 1;
        }
    }
    let deviation: u64 = ts
        .samples
        .iter()
        .filter(|s| s.time != 0)
        .map(|s| avg.abs_diff(u64::from(s.latency)))
        .sum();
    let mad = if samples > 0 {
        deviation / u64::from(samples)
    } else {
        0
    };
    EventStats {
        avg,
        mad,
        samples,
        period,
    }
}

/// How long ago, as `LATENCY GRAPH` labels a sample: seconds, minutes, hours or days.
fn ago(elapsed: i64) -> String {
    match elapsed {
        e if e < 60 => format!("{e}s"),
        e if e < 3600 => format!("{}m", e / 60),
        e if e < 3600 * 24 => format!("{}h", e / 3600),
        e => format!("{}d", e / (3600 * 24)),
    }
}

/// The width of `LATENCY GRAPH`.
const GRAPH_COLS: usize = 80;

/// Redis's `sparklineRender` with `SPARKLINE_FILL`: `samples` (value, label) drawn `rows`
/// rows high, `columns` samples a block, each sample's label written downwards under it.
fn sparkline(out: &mut String, samples: &[(f64, String)], columns: usize, rows: i32) {
    let Some(first) = samples.first() else {
        return;
    };
    // Redis's sequence keeps its bounds this way (an `else if`: a sample that lowers the
    // minimum is not checked against the maximum).
    let (mut min, mut max) = (first.0, first.0);
    for &(v, _) in &samples[1..] {
        if v < min {
            min = v;
        } else if v > max {
            max = v;
        }
    }
    let labels = samples.iter().any(|(_, l)| !l.is_empty());
    for (n, block) in samples.chunks(columns).enumerate() {
        if n != 0 {
            out.push('\n');
        }
        render_range(out, block, (min, max), labels, rows);
    }
}

/// Redis's `sparklineRenderRange` (fill mode, linear scale).
fn render_range(
    out: &mut String,
    block: &[(f64, String)],
    (min, max): (f64, f64),
    labels: bool,
    rows: i32,
) {
    const FILL: &[u8] = b"_o#";
    const LABEL_MARGIN_TOP: i32 = 1;
    let charset_len = FILL.len() as i32;
    let mut relmax = max - min;
    if relmax == 0.0 {
        relmax = 1.0;
    }
    let steps = charset_len * rows;
    let mut row = 0;
    loop {
        let mut more = false;
        let mut chars = vec![b' '; block.len()];
        for (j, (value, label)) in block.iter().enumerate() {
            let relval = value - min;
            // C: `(int) (relval*steps)/relmax`, the cast binding first.
            let step = ((((relval * f64::from(steps)) as i32) as f64) / relmax) as i32;
            let step = step.clamp(0, steps - 1);
            if row < rows {
                let charidx = step - (rows - row - 1) * charset_len;
                more = true;
                if (0..charset_len).contains(&charidx) {
                    chars[j] = FILL[charidx as usize];
                } else if charidx >= charset_len {
                    chars[j] = b'|';
                }
            } else {
                if labels && row - rows < LABEL_MARGIN_TOP {
                    more = true;
                    break;
                }
                let label_char = (row - rows - LABEL_MARGIN_TOP) as usize;
                if let Some(&c) = label.as_bytes().get(label_char) {
                    more = true;
                    chars[j] = c;
                }
            }
        }
        if !more {
            return;
        }
        row += 1;
        out.push_str(&String::from_utf8_lossy(&chars));
        out.push('\n');
    }
}

// ---------------------------------------------------------------------------------------------
// Tracking

/// One thread's histograms for one server.
#[derive(Debug, Default)]
struct Shard {
    /// By command index (see [`crate::command::stat_key`]).
    commands: Vec<Option<Box<Histogram<u64>>>>,
    /// By subcommand, `config|get`.
    subcommands: HashMap<String, Box<Histogram<u64>>>,
}

fn new_histogram() -> Box<Histogram<u64>> {
    Box::new(
        Histogram::new_with_bounds(HISTOGRAM_MIN_NS, HISTOGRAM_MAX_NS, HISTOGRAM_SIGFIG)
            .expect("valid histogram bounds"),
    )
}

impl Shard {
    fn record(&mut self, key: &StatKey, ns: u64) {
        let h = match key {
            StatKey::Command(i) => {
                if self.commands.len() <= *i {
                    self.commands.resize_with(*i + 1, || None);
                }
                self.commands[*i].get_or_insert_with(new_histogram)
            }
            StatKey::Subcommand(name) => match self.subcommands.get_mut(name.as_str()) {
                Some(h) => h,
                None => self
                    .subcommands
                    .entry(name.clone())
                    .or_insert_with(new_histogram),
            },
        };
        h.saturating_record(ns);
    }
}

/// The lock of one thread's shard: taken with one atomic compare-exchange and let go with a
/// plain release store, where a `parking_lot::Mutex` does a compare-exchange both ways (perf
/// showed those two instructions as most of what tracking costs a command). Only the owning
/// thread and a reader (`INFO`, `LATENCY HISTOGRAM`) take it, so it is almost never contended;
/// a waiter spins a little, then yields its thread.
struct ShardLock(AtomicBool);

// SAFETY: `try_lock` succeeds only by turning the flag from `false` to `true` (acquire), and
// `lock` returns only once `try_lock` succeeded, so one holder at a time; `unlock`, called by
// the holder alone (lock_api's contract), turns it back with a release store that publishes
// the holder's writes to the next one.
unsafe impl lock_api::RawMutex for ShardLock {
    const INIT: ShardLock = ShardLock(AtomicBool::new(false));
    type GuardMarker = lock_api::GuardSend;

    fn lock(&self) {
        let mut spins = 0u32;
        while !self.try_lock() {
            if spins < 64 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    fn try_lock(&self) -> bool {
        self.0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    unsafe fn unlock(&self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A thread's shard behind its [`ShardLock`].
type LockedShard = lock_api::Mutex<ShardLock, Shard>;

/// Tells servers apart in the threads' lists of shards.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's shard of each server it ran commands for (a process may run several).
    static SHARDS: RefCell<Vec<(u64, Arc<LockedShard>)>> = const { RefCell::new(Vec::new()) };
}

/// A server's per-command latency histograms (part of [`crate::state::Stats`]): one shard per
/// thread that ran commands, added up when read.
#[derive(Debug)]
pub(crate) struct LatencyHistograms {
    id: u64,
    shards: Mutex<Vec<Arc<LockedShard>>>,
}

impl Default for LatencyHistograms {
    fn default() -> Self {
        LatencyHistograms {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            shards: Mutex::default(),
        }
    }
}

/// One command's histogram, added up over the threads.
pub(crate) type CommandHistogram = Histogram<u64>;

impl LatencyHistograms {
    /// Records that a call of `key` took `usec` microseconds.
    pub(crate) fn record(&self, key: &StatKey, usec: u64) {
        let ns = usec
            .saturating_mul(1000)
            .clamp(HISTOGRAM_MIN_NS, HISTOGRAM_MAX_NS);
        // During the thread's own teardown there is no list any more: the sample is lost.
        let _ = SHARDS.try_with(|shards| {
            let mut shards = shards.borrow_mut();
            let at = match shards.iter().position(|(id, _)| *id == self.id) {
                Some(at) => at,
                None => {
                    // The shards of servers that are gone (only this list holds them).
                    shards.retain(|(_, s)| Arc::strong_count(s) > 1);
                    let shard = Arc::new(LockedShard::new(Shard::default()));
                    self.shards.lock().push(shard.clone());
                    shards.push((self.id, shard));
                    shards.len() - 1
                }
            };
            shards[at].1.lock().record(key, ns);
        });
    }

    /// Drops every histogram (`CONFIG RESETSTAT`).
    pub(crate) fn reset(&self) {
        for shard in self.shards.lock().iter() {
            let mut shard = shard.lock();
            shard.commands.clear();
            shard.subcommands.clear();
        }
    }

    /// Every command's histogram by name (`name_of` naming a command's index), sorted.
    pub(crate) fn merged(
        &self,
        name_of: impl Fn(usize) -> Option<&'static str>,
    ) -> BTreeMap<String, CommandHistogram> {
        let mut out: BTreeMap<String, CommandHistogram> = BTreeMap::new();
        let mut add = |name: &str, h: &Histogram<u64>| match out.get_mut(name) {
            Some(sum) => {
                let _ = sum.add(h);
            }
            None => {
                out.insert(name.to_string(), h.clone());
            }
        };
        for shard in self.shards.lock().iter() {
            let shard = shard.lock();
            for (i, h) in shard.commands.iter().enumerate() {
                if let (Some(h), Some(name)) = (h, name_of(i)) {
                    add(name, h);
                }
            }
            for (name, h) in &shard.subcommands {
                add(name, h);
            }
        }
        out
    }
}

/// The counts of `h` slot by slot, in order: `(lowest value of the slot, count)`, every slot
/// of its range as HdrHistogram's C library walks them (`move_next`), empty ones included.
fn slots(h: &Histogram<u64>) -> impl Iterator<Item = (u64, u64)> + '_ {
    let mut v = 0u64;
    (0..h.distinct_values()).map(move |_| {
        let slot = (h.lowest_equivalent(v), h.count_at(v));
        v = h.next_non_equivalent(v);
        slot
    })
}

/// HdrHistogram C's `hdr_value_at_percentile` (which Redis calls): the count a percentile
/// asks for is rounded to the nearest, and the value is the highest equivalent one of the
/// slot that reaches it (the lowest for the 0th).
pub(crate) fn value_at_percentile(h: &Histogram<u64>, percentile: f64) -> u64 {
    let requested = percentile.min(100.0);
    let wanted = ((requested / 100.0) * h.len() as f64 + 0.5) as i64;
    let wanted = wanted.max(1) as u64;
    let mut seen = 0u64;
    let at = slots(h)
        .find(|(_, count)| {
            seen += count;
            seen >= wanted
        })
        .map_or(0, |(value, _)| value);
    if percentile == 0.0 {
        h.lowest_equivalent(at)
    } else {
        h.highest_equivalent(at)
    }
}

/// Redis's `fillCommandCDF`: the cumulative counts at power-of-two bounds from 1024 ns, as
/// `(microseconds, calls up to there)`, a bound only where the count grew. This is HdrHistogram
/// C's logarithmic iterator step by step (`log_iter_next`), whose bound is the highest value of
/// the slot it stands on: that of the bound itself, and for calls past the last bound the
/// histogram's last slot (1073741 µs).
pub(crate) fn cumulative_usec(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    let slots: Vec<(u64, u64)> = slots(h).collect();
    let total = h.len();
    // The lowest value of a bound's slot; past the histogram's range, the bound itself (which
    // no slot reaches), as the C library computes it.
    let last_slot = slots.last().map_or(0, |s| s.0);
    let lowest = |level: u64| {
        if level <= last_slot {
            h.lowest_equivalent(level)
        } else {
            level
        }
    };
    let mut out = Vec::new();
    let mut level = 1024u64;
    let mut level_lowest = lowest(level);
    // Where the iterator stands: the slot's index (none yet), lowest and highest values.
    let mut next_index = 0usize;
    let (mut value, mut highest) = (0u64, 0u64);
    let (mut cumulative, mut previous) = (0u64, 0u64);
    loop {
        let next_passes = slots.get(next_index).is_some_and(|s| s.0 > level_lowest);
        if cumulative >= total && !next_passes {
            return out;
        }
        loop {
            if value >= level_lowest {
                level = level.saturating_mul(2);
                level_lowest = lowest(level);
                break;
            }
            let Some(&(v, count)) = slots.get(next_index) else {
                // Past the last slot: the iterator reports where it stands one more time.
                next_index += 1;
                break;
            };
            next_index += 1;
            value = v;
            highest = h.highest_equivalent(v);
            cumulative += count;
        }
        if cumulative > previous {
            out.push((highest / 1000, cumulative));
        }
        previous = cumulative;
        if next_index > slots.len() {
            return out;
        }
    }
}

/// `p50=1.003,p99=...`: the line of `INFO latencystats` for one histogram, percentiles
/// printed as Redis prints them (`%f` without trailing zeros) and values in microseconds
/// with three decimals.
pub(crate) fn percentiles_line(name: &str, h: &Histogram<u64>, percentiles: &[f64]) -> String {
    let mut out = format!("latency_percentiles_usec_{name}:");
    for (j, p) in percentiles.iter().enumerate() {
        if j > 0 {
            out.push(',');
        }
        let value = value_at_percentile(h, *p) as f64 / 1000.0;
        let _ = write!(out, "p{}={value:.3}", format_percentile(*p));
    }
    out.push_str("\r\n");
    out
}

/// A percentile as Redis prints it: C's `%f`, then trailing zeros and a bare dot dropped
/// (`trimDoubleString`).
pub(crate) fn format_percentile(p: f64) -> String {
    let mut s = format!("{p:.6}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values_usec: &[u64]) -> Histogram<u64> {
        let mut h = new_histogram();
        for v in values_usec {
            h.saturating_record((v * 1000).clamp(HISTOGRAM_MIN_NS, HISTOGRAM_MAX_NS));
        }
        *h
    }

    #[test]
    fn samples_of_one_second_merge_and_the_ring_keeps_160() {
        let m = LatencyMonitor::default();
        m.add_sample("command", 300, 100);
        m.add_sample("command", 200, 100);
        m.add_sample("command", 500, 100);
        assert_eq!(m.history(b"command"), Some(vec![(100, 500)]));
        for s in 0..200 {
            m.add_sample("command", 10 + s as u64, 200 + s);
        }
        let h = m.history(b"command").unwrap();
        assert_eq!(h.len(), TS_LEN);
        assert_eq!(h[0], (240, 50));
        assert_eq!(m.latest(), vec![("command".to_string(), 399, 209, 500)]);
        assert_eq!(m.history(b"COMMAND"), None);
        assert_eq!(m.reset(Some(b"COMMAND")), 1);
        assert_eq!(m.reset(None), 0);
    }

    #[test]
    fn percentiles_are_printed_as_redis_prints_them() {
        assert_eq!(format_percentile(50.0), "50");
        assert_eq!(format_percentile(99.9), "99.9");
        assert_eq!(format_percentile(0.0), "0");
        assert_eq!(format_percentile(99.99), "99.99");
        // 1 µs is 1000 ns, whose bucket ends at 1003 ns.
        let h = histogram(&[1, 1, 1, 40]);
        assert_eq!(
            percentiles_line("set", &h, &[50.0, 99.0, 99.9]),
            "latency_percentiles_usec_set:p50=1.003,p99=40.191,p99.9=40.191\r\n"
        );
        // A 0 µs call is 1 ns.
        let h = histogram(&[0]);
        assert_eq!(value_at_percentile(&h, 50.0), 1);
        assert_eq!(value_at_percentile(&h, 0.0), 1);
    }

    /// The figures redis-server 7.0.15 printed for the same calls (a call over 1 s counts as
    /// 1 s, and the C iterator reports it at the histogram's last slot).
    #[test]
    fn the_cumulative_distribution_has_redis_s_bounds() {
        let h = histogram(&[0, 1, 1, 2, 3, 40, 40, 2_000_000]);
        assert_eq!(
            cumulative_usec(&h),
            vec![(1, 3), (2, 4), (4, 5), (66, 7), (1_073_741, 8)]
        );
        let h = histogram(&[15, 1_700_000]);
        assert_eq!(cumulative_usec(&h), vec![(16, 1), (1_073_741, 2)]);
        assert_eq!(
            percentiles_line("eval", &h, &[50.0, 99.0, 99.9]),
            "latency_percentiles_usec_eval:p50=15.039,p99=1002438.655,p99.9=1002438.655\r\n"
        );
        assert!(cumulative_usec(&histogram(&[])).is_empty());
    }

    #[test]
    fn each_thread_records_in_its_own_shard_and_a_reader_adds_them_up() {
        let histograms = Arc::new(LatencyHistograms::default());
        let names = |i| (i == 3).then_some("set");
        let writers: Vec<_> = (0..4)
            .map(|_| {
                let h = histograms.clone();
                std::thread::spawn(move || {
                    for usec in 0..1000 {
                        h.record(&StatKey::Command(3), usec);
                        h.record(&StatKey::Subcommand("config|get".into()), 5);
                    }
                })
            })
            .collect();
        // A reader beside the writers sees whole samples only.
        for _ in 0..20 {
            if let Some(set) = histograms.merged(names).get("set") {
                assert!(set.len() <= 4000);
            }
        }
        for w in writers {
            w.join().unwrap();
        }
        let merged = histograms.merged(names);
        assert_eq!(merged["set"].len(), 4000);
        assert_eq!(merged["config|get"].len(), 4000);
        assert_eq!(histograms.shards.lock().len(), 4);
        histograms.reset();
        assert!(histograms.merged(names).is_empty());
    }

    #[test]
    fn the_graph_draws_a_sparkline_with_labels() {
        let m = LatencyMonitor::default();
        m.add_sample("command", 300, 100);
        m.add_sample("command", 500, 101);
        let g = m.graph(b"command", 102).unwrap();
        let lines: Vec<&str> = g.lines().collect();
        assert_eq!(
            lines[0],
            "command - high 500 ms, low 300 ms (all time high 500 ms)"
        );
        assert_eq!(lines[1], "-".repeat(80));
        assert_eq!(&lines[2..], &[" #", " |", " |", "_|", "  ", "21", "ss"]);
    }
}
