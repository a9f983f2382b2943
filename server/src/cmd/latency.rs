//! `LATENCY LATEST|HISTORY|RESET|GRAPH|DOCTOR|HISTOGRAM|HELP`: the latency monitor's events
//! and the commands' latency histograms (see [`crate::latency`]), with Redis 7.0's replies and
//! errors.

use bytes::Bytes;

use super::util::{lower, unknown_subcommand};
use super::{arity_error, lookup, spec, CommandSpec, Ctx, ADMIN, LOADING, NOSCRIPT, STALE};
use crate::command::CONTAINER;
use crate::frame::{Frame, Protocol};
use crate::latency::{CommandHistogram, DoctorContext};

/// The `LATENCY` command.
pub(crate) const COMMANDS: &[CommandSpec] = &[spec(
    "latency",
    -2,
    ADMIN | NOSCRIPT | LOADING | STALE | CONTAINER,
    0,
    0,
    0,
    latency,
)];

const HELP: &[&str] = &[
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
];

fn latency(ctx: &mut Ctx<'_>, args: &[Bytes]) -> Frame {
    let sub = lower(&args[1]);
    let n = args.len();
    let monitor = &ctx.shared.stats.latency_events;
    let now_s = (ctx.shared.clock.now_ms() / 1000) as i64;
    match sub.as_str() {
        "history" if n == 3 => Frame::Array(
            monitor
                .history(&args[2])
                .unwrap_or_default()
                .into_iter()
                .map(|(time, ms)| {
                    Frame::Array(vec![Frame::Integer(time), Frame::Integer(i64::from(ms))])
                })
                .collect(),
        ),
        "graph" if n == 3 => match monitor.graph(&args[2], now_s) {
            Some(graph) => text(ctx, graph),
            None => Frame::error(format!(
                "ERR No samples available for event '{}'",
                String::from_utf8_lossy(&args[2])
            )),
        },
        "latest" if n == 2 => Frame::Array(
            monitor
                .latest()
                .into_iter()
                .map(|(event, time, ms, max)| {
                    Frame::Array(vec![
                        Frame::bulk(event),
                        Frame::Integer(time),
                        Frame::Integer(i64::from(ms)),
                        Frame::Integer(i64::from(max)),
                    ])
                })
                .collect(),
        ),
        "doctor" if n == 2 => {
            let report = monitor.doctor(DoctorContext {
                threshold_ms: ctx.shared.config.latency_threshold_ms(),
                slowlog_slower_than: ctx.shared.config.slowlog_slower_than(),
                now_s,
                anon_huge_pages: anon_huge_pages(),
            });
            text(ctx, report)
        }
        "reset" => {
            let resets = if n == 2 {
                monitor.reset(None)
            } else {
                args[2..].iter().map(|e| monitor.reset(Some(e))).sum()
            };
            Frame::Integer(resets as i64)
        }
        "histogram" => histogram(ctx, &args[2..]),
        "help" if n == 2 => Frame::Array(
            std::iter::once(format!(
                "{} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                String::from_utf8_lossy(&args[0]).to_ascii_uppercase()
            ))
            .chain(HELP.iter().map(|l| l.to_string()))
            .map(|l| Frame::Simple(Bytes::from(l)))
            .collect(),
        ),
        "history" | "graph" | "latest" | "doctor" | "help" => {
            arity_error(&format!("latency|{sub}"))
        }
        _ => unknown_subcommand(args, "latency"),
    }
}

/// A report as Redis sends it: verbatim text in RESP3, a bulk string in RESP2.
fn text(ctx: &Ctx<'_>, text: String) -> Frame {
    match ctx.client.protocol {
        Protocol::Resp3 => Frame::Verbatim(Bytes::from(text)),
        Protocol::Resp2 => Frame::Bulk(Bytes::from(text)),
    }
}

/// `LATENCY HISTOGRAM [command ...]`: each command's calls and cumulative distribution, all
/// of them or those named (a container names its subcommands, `client|id` one of them; an
/// unknown name, or one without calls, is left out), as a map.
fn histogram(ctx: &Ctx<'_>, names: &[Bytes]) -> Frame {
    let all = ctx
        .shared
        .stats
        .latency_histograms
        .merged(crate::command::stat_name);
    let mut out = Vec::new();
    let mut add = |name: &str, h: &CommandHistogram| {
        out.push((Frame::bulk(name.to_string()), entry(h)));
    };
    if names.is_empty() {
        for (name, h) in &all {
            add(name, h);
        }
    }
    for name in names {
        let name = lower(name);
        let mut parts = name.split('|');
        let (Some(base), sub, None) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let Some(spec) = lookup(base.as_bytes()) else {
            continue;
        };
        match sub {
            None => {
                if let Some(h) = all.get(spec.name) {
                    add(spec.name, h);
                }
                if spec.has(CONTAINER) {
                    let prefix = format!("{}|", spec.name);
                    for (full, h) in all.range(prefix.clone()..) {
                        if !full.starts_with(&prefix) {
                            break;
                        }
                        add(full, h);
                    }
                }
            }
            Some(sub) if spec.has(CONTAINER) => {
                let full = format!("{}|{sub}", spec.name);
                if let Some(h) = all.get(&full) {
                    add(&full, h);
                }
            }
            Some(_) => {}
        }
    }
    Frame::Map(out)
}

/// One command's part of `LATENCY HISTOGRAM`: `calls` and `histogram_usec`.
fn entry(h: &CommandHistogram) -> Frame {
    let buckets = crate::latency::cumulative_usec(h)
        .into_iter()
        .map(|(usec, calls)| (Frame::Integer(usec as i64), Frame::Integer(calls as i64)))
        .collect();
    Frame::Map(vec![
        (Frame::bulk("calls"), Frame::Integer(h.len() as i64)),
        (Frame::bulk("histogram_usec"), Frame::Map(buckets)),
    ])
}

/// The bytes of this process in transparent huge pages: the `AnonHugePages` lines of
/// `/proc/self/smaps` added up (0 where there is no such file), which `LATENCY DOCTOR` warns
/// about as Redis does.
fn anon_huge_pages() -> u64 {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    smaps
        .lines()
        .filter_map(|l| l.strip_prefix("AnonHugePages:"))
        .filter_map(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .sum::<u64>()
        * 1024
}
