//! The lesson as one self-contained HTML page: per act, an SVG swim-lane diagram (a lane per
//! client, per node and for the storage; one column per event), the numbered timeline and
//! what the act shows. No script, no external URL: it opens in a browser with no network.
//!
//! In the picture: a client's belief that it holds the lock is a blue bar (red where two
//! clients believed it at once); an acquisition is an arrow from the node(s) that granted it;
//! replication catching up is a grey arrow from the master; a crash is a red cross, a
//! promotion a green triangle, a restart an orange circle, a stopped process two grey bars
//! and its resumption a grey play mark; a write is an arrow to the
//! resource, green when applied, red when applied although stale, grey and crossed when
//! refused. Every mark carries its event's sentence as a tooltip.

use std::fmt::Write as _;

use super::event::{Event, Holder, Lane, What};
use super::text::{clients, holding};
use super::verdict::{holds, Finding, Kind};
use super::{PlayedAct, Run};

const LEFT: usize = 96;
const COL: usize = 60;
const LANE: usize = 58;
const TOP: usize = 30;

/// Escapes text for HTML and SVG.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// The lanes of an act: clients, then nodes, then the storage.
fn lanes(events: &[Event]) -> Vec<Lane> {
    let mut v: Vec<Lane> = clients(events).into_iter().map(Lane::Client).collect();
    let mut nodes = std::collections::BTreeSet::new();
    let mut storage = false;
    for e in events {
        match e.lane() {
            Lane::Node(n) => {
                nodes.insert(n);
            }
            Lane::Storage => storage |= !matches!(e.what, What::Waited { .. }),
            Lane::Client(_) => {}
        }
        if let What::Acquired { nodes: on, .. } | What::NotAcquired { nodes: on, .. } = &e.what {
            nodes.extend(on.iter().copied());
        }
    }
    v.extend(nodes.into_iter().map(Lane::Node));
    if storage {
        v.push(Lane::Storage);
    }
    v
}

struct Picture<'a> {
    lanes: Vec<Lane>,
    events: &'a [Event],
    findings: &'a [Finding],
    svg: String,
    /// Labels of this event go below its dot (alternating on node lanes, so that labels of
    /// neighbouring events on one lane do not run into each other).
    below: bool,
}

impl Picture<'_> {
    fn x(&self, i: usize) -> usize {
        LEFT + i * COL + COL / 2
    }

    fn y(&self, lane: Lane) -> usize {
        let i = self.lanes.iter().position(|l| *l == lane).unwrap_or(0);
        TOP + i * LANE + LANE / 2
    }

    fn tip(i: usize, e: &Event) -> String {
        format!(
            "<title>#{} t={} ms: {}</title>",
            i + 1,
            e.at_ms,
            escape(&e.sentence())
        )
    }

    fn arrow(&mut self, i: usize, from: Lane, to: Lane, color: &str, dashed: bool) {
        let (x, y1, y2) = (self.x(i), self.y(from), self.y(to));
        let dash = if dashed {
            " stroke-dasharray=\"4 3\""
        } else {
            ""
        };
        let _ = write!(
            self.svg,
            "<line x1=\"{x}\" y1=\"{y1}\" x2=\"{x}\" y2=\"{y2}\" stroke=\"{color}\" stroke-width=\"2\"{dash} marker-end=\"url(#head-{})\"/>",
            color.trim_start_matches('#')
        );
    }

    fn label(&mut self, x: usize, y: usize, color: &str, text: &str) {
        let at = if self.below {
            y + 21
        } else {
            y.saturating_sub(12)
        };
        let _ = write!(
            self.svg,
            "<text x=\"{x}\" y=\"{at}\" font-size=\"10\" text-anchor=\"middle\" fill=\"{color}\">{}</text>",
            escape(text)
        );
    }

    fn draw(mut self) -> String {
        let n = self.events.len();
        let width = LEFT + n * COL + 20;
        let height = TOP + self.lanes.len() * LANE + 40;
        let _ = write!(
            self.svg,
            "<svg width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\">"
        );
        self.svg.push_str("<defs>");
        for c in ["2563eb", "16a34a", "dc2626", "9ca3af", "6b7280"] {
            let _ = write!(
                self.svg,
                "<marker id=\"head-{c}\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#{c}\"/></marker>"
            );
        }
        self.svg.push_str("</defs>");
        // Lanes.
        for (k, lane) in self.lanes.clone().into_iter().enumerate() {
            let y = TOP + k * LANE;
            let fill = if k % 2 == 0 { "#f8fafc" } else { "#eef2f7" };
            let _ = write!(
                self.svg,
                "<rect x=\"0\" y=\"{y}\" width=\"{width}\" height=\"{LANE}\" fill=\"{fill}\"/><text x=\"8\" y=\"{}\" font-size=\"13\" font-weight=\"bold\" fill=\"#111827\">{}</text>",
                y + LANE / 2 + 4,
                escape(&match lane {
                    Lane::Client(c) => format!("client {c}"),
                    other => other.to_string(),
                })
            );
        }
        // Holds: one bar segment per column where the client believed it held the lock; red
        // where two clients did.
        let hs = holds(self.events);
        let cs = clients(self.events);
        for (i, e) in self.events.iter().enumerate() {
            let holding_now: Vec<char> = cs
                .iter()
                .copied()
                .filter(|&c| holding(&hs, c, i, e.at_ms))
                .collect();
            for &c in &holding_now {
                let color = if holding_now.len() > 1 {
                    "#dc2626"
                } else {
                    "#2563eb"
                };
                let (x, y) = (LEFT + i * COL, self.y(Lane::Client(c)));
                let _ = write!(
                    self.svg,
                    "<rect x=\"{x}\" y=\"{}\" width=\"{COL}\" height=\"12\" fill=\"{color}\" opacity=\"0.35\"/>",
                    y + 8
                );
            }
        }
        // Events.
        let stale: Vec<usize> = self
            .findings
            .iter()
            .filter(|f| f.kind == Kind::StaleWriteAccepted)
            .filter_map(|f| f.events.last().copied())
            .collect();
        let resource = self
            .events
            .iter()
            .find_map(|e| match e.what {
                What::ResourceSet { lane, .. } => Some(lane),
                _ => None,
            })
            .unwrap_or(Lane::Storage);
        for (i, e) in self.events.iter().enumerate() {
            let (x, lane) = (self.x(i), e.lane());
            let y = self.y(lane);
            let tip = Self::tip(i, e);
            self.below = i % 2 == 1 && !matches!(lane, Lane::Client(_));
            let _ = write!(self.svg, "<g>{tip}");
            match &e.what {
                What::Acquired { client, nodes, .. } => {
                    for &nd in nodes {
                        self.arrow(i, Lane::Node(nd), Lane::Client(*client), "#2563eb", false);
                        // Each node that granted it: a blue square on its lane.
                        let yy = self.y(Lane::Node(nd));
                        let _ = write!(
                            self.svg,
                            "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"#2563eb\"/>",
                            x - 5,
                            yy - 5
                        );
                    }
                    self.label(x, y, "#2563eb", "acquires");
                }
                What::NotAcquired { client, nodes, .. } => {
                    if let Some(&nd) = nodes.first() {
                        self.arrow(i, Lane::Node(nd), Lane::Client(*client), "#9ca3af", true);
                    }
                    self.label(x, y, "#6b7280", "refused");
                }
                What::AcquireError { error, .. } => {
                    // The error's code (`NOREPLICAS`, `OOM`...), the sentence has the rest.
                    let code = error
                        .strip_prefix("server error: ")
                        .unwrap_or(error)
                        .split_whitespace()
                        .next()
                        .unwrap_or("error");
                    self.label(x, y, "#b91c1c", &format!("refused: {code}"))
                }
                What::CaughtUp { replica, .. } => {
                    self.arrow(i, Lane::Node(0), Lane::Node(*replica), "#6b7280", false);
                    self.label(x, y, "#6b7280", "caught up");
                }
                What::Resynced { replica, .. } => {
                    self.arrow(i, Lane::Node(0), Lane::Node(*replica), "#dc2626", false);
                    self.label(x, y, "#dc2626", "full resync");
                }
                What::ReplicationPaused { .. } => self.label(x, y, "#b45309", "stream held"),
                What::ReplicaLag { ms, .. } => self.label(x, y, "#b45309", &format!("lag {ms}ms")),
                What::Crashed { .. } | What::CutOff { .. } => {
                    let _ = write!(
                        self.svg,
                        "<path d=\"M{} {} l14 14 M{} {} l-14 14\" stroke=\"#dc2626\" stroke-width=\"4\"/>",
                        x - 7,
                        y - 7,
                        x + 7,
                        y - 7
                    );
                    self.label(x, y - 4, "#dc2626", "crash");
                }
                What::Promoted { .. } => {
                    let _ = write!(
                        self.svg,
                        "<path d=\"M{x} {} l9 16 l-18 0 z\" fill=\"#16a34a\"/>",
                        y - 8
                    );
                    self.label(x, y - 4, "#16a34a", "promoted");
                }
                What::PowerLost { .. } => {
                    // A lightning bolt: the machine, not only the process, goes down.
                    let _ = write!(
                        self.svg,
                        "<path d=\"M{} {} l-9 12 l6 0 l-4 10 l11 -13 l-6 0 l4 -9 z\" fill=\"#dc2626\" stroke=\"#7f1d1d\" stroke-width=\"1\"/>",
                        x + 3,
                        y - 11
                    );
                    self.label(x, y - 4, "#dc2626", "power cut");
                }
                What::Restarted { aof, .. } => {
                    let _ = write!(
                        self.svg,
                        "<circle cx=\"{x}\" cy=\"{y}\" r=\"8\" fill=\"none\" stroke=\"#ea580c\" stroke-width=\"3\"/>"
                    );
                    self.label(
                        x,
                        y - 4,
                        "#ea580c",
                        if *aof { "restart+AOF" } else { "restart" },
                    );
                }
                What::Network { nodes, cut } => {
                    for &nd in nodes {
                        let yy = self.y(Lane::Node(nd));
                        let _ = write!(
                            self.svg,
                            "<text x=\"{x}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#b45309\">{}</text>",
                            yy - 10,
                            if *cut { "cut" } else { "back" }
                        );
                    }
                }
                What::Read { client, .. } => {
                    self.arrow(i, resource, Lane::Client(*client), "#9ca3af", false);
                    self.label(x, y, "#6b7280", "reads");
                }
                What::Wrote {
                    client, accepted, ..
                } => {
                    let (color, dashed, word) = match (*accepted, stale.contains(&i)) {
                        (true, true) => ("#dc2626", false, "STALE WRITE"),
                        (true, false) => ("#16a34a", false, "writes"),
                        (false, _) => ("#9ca3af", true, "refused"),
                    };
                    let target = self.y(resource);
                    self.arrow(i, Lane::Client(*client), resource, color, dashed);
                    if !accepted {
                        let _ = write!(
                            self.svg,
                            "<path d=\"M{} {} l10 10 M{} {} l-10 10\" stroke=\"#6b7280\" stroke-width=\"3\"/>",
                            x - 5,
                            target - 20,
                            x + 5,
                            target - 20
                        );
                    }
                    self.label(x, y, color, word);
                }
                What::Paused { ms, .. } => {
                    let _ = write!(
                        self.svg,
                        "<rect x=\"{}\" y=\"{}\" width=\"6\" height=\"16\" fill=\"#6b7280\"/><rect x=\"{}\" y=\"{}\" width=\"6\" height=\"16\" fill=\"#6b7280\"/>",
                        x - 8,
                        y - 8,
                        x + 2,
                        y - 8
                    );
                    self.label(x, y - 4, "#6b7280", &format!("stops {ms}ms"));
                }
                What::Waited { ms } => {
                    let _ = write!(
                        self.svg,
                        "<text x=\"{x}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#6b7280\">+{ms}ms</text>",
                        TOP + 12
                    );
                }
                What::Filled { evicted, .. } => {
                    self.label(x, y, "#b45309", &format!("filled, {evicted} evicted"))
                }
                What::Final { value, .. } => self.label(x, y, "#111827", &format!("= {value}")),
                What::NodeStarted { replica_of, .. } => self.label(
                    x,
                    y,
                    "#374151",
                    if replica_of.is_some() {
                        "replica"
                    } else {
                        "master"
                    },
                ),
                What::LockSeen { holder, .. } => {
                    let (color, word) = match holder {
                        Holder::Nobody => ("#b91c1c", "no lock key".to_string()),
                        Holder::Client(c) => ("#2563eb", format!("key: {c}'s token")),
                        Holder::Other => ("#6b7280", "key: other token".to_string()),
                    };
                    self.label(x, y, color, &word);
                }
                What::Offsets { offsets } => {
                    for &(nd, off) in offsets {
                        let yy = self.y(Lane::Node(nd));
                        let _ = write!(
                            self.svg,
                            "<text x=\"{x}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#374151\">offset {off}</text>",
                            yy + 16
                        );
                    }
                }
                What::Released { .. } => self.label(x, y, "#2563eb", "releases"),
                What::HeldBack { .. } => self.label(x, y, "#16a34a", "validity over: no write"),
                What::LeaseChecked { held, .. } => {
                    if *held {
                        self.label(x, y, "#2563eb", "still held")
                    } else {
                        self.label(x, y, "#16a34a", "lost")
                    }
                }
                What::HostCall { stopped, .. } => {
                    if stopped.is_some() {
                        self.label(x, y, "#16a34a", "host stops it")
                    } else {
                        self.label(x, y, "#6b7280", "host call")
                    }
                }
                What::Stopped { .. } => {
                    let _ = write!(
                        self.svg,
                        "<rect x=\"{}\" y=\"{}\" width=\"6\" height=\"16\" fill=\"#6b7280\"/><rect x=\"{}\" y=\"{}\" width=\"6\" height=\"16\" fill=\"#6b7280\"/>",
                        x - 8,
                        y - 8,
                        x + 2,
                        y - 8
                    );
                    self.label(x, y - 4, "#6b7280", "process stops");
                }
                What::Resumed { .. } => {
                    let _ = write!(
                        self.svg,
                        "<path d=\"M{} {} l14 8 l-14 8 z\" fill=\"#6b7280\"/>",
                        x - 6,
                        y - 8
                    );
                    self.label(x, y - 4, "#6b7280", "resumes");
                }
                What::MinReplicas { to_write, .. } => {
                    self.label(x, y, "#b45309", &format!("min-replicas {to_write}"))
                }
                What::GoodReplicas { good, .. } => {
                    self.label(x, y, "#374151", &format!("{good} good replica(s)"))
                }
                What::LinkCut { .. } => {
                    let _ = write!(
                        self.svg,
                        "<path d=\"M{} {} l14 14 M{} {} l-14 14\" stroke=\"#b45309\" stroke-width=\"3\"/>",
                        x - 7,
                        y - 7,
                        x + 7,
                        y - 7
                    );
                    self.label(x, y - 4, "#b45309", "link cut");
                }
                What::Freed { .. } => self.label(x, y, "#b45309", "cache deleted"),
                What::MemoryLimit { .. } => self.label(x, y, "#b45309", "maxmemory set"),
                What::ResourceSet { value, .. } => {
                    self.label(x, y, "#111827", &format!("= {value}"))
                }
            }
            // Every event has a dot on its lane, which carries the tooltip; one without a lane
            // of its own (time passing, in an act whose resource is not on the storage) has
            // its mark at the top only.
            if self.lanes.contains(&lane) {
                let _ = write!(
                    self.svg,
                    "<circle cx=\"{x}\" cy=\"{y}\" r=\"3.5\" fill=\"#111827\"/>"
                );
            }
            self.svg.push_str("</g>");
            let _ = write!(
                self.svg,
                "<text x=\"{x}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\" fill=\"#374151\">#{}</text><text x=\"{x}\" y=\"{}\" font-size=\"9\" text-anchor=\"middle\" fill=\"#6b7280\">{}</text>",
                height - 24,
                i + 1,
                height - 12,
                e.at_ms
            );
        }
        let _ = write!(
            self.svg,
            "<text x=\"8\" y=\"{}\" font-size=\"9\" fill=\"#6b7280\">event / t ms</text></svg>",
            height - 18
        );
        self.svg
    }
}

/// The SVG diagram of one act, as a file of its own (with its XML namespace).
pub fn standalone_svg(act: &PlayedAct) -> String {
    svg(act).replacen("<svg ", "<svg xmlns=\"http://www.w3.org/2000/svg\" ", 1)
}

/// The SVG diagram of one act, for inlining in HTML.
pub fn svg(act: &PlayedAct) -> String {
    Picture {
        lanes: lanes(&act.act.events),
        events: &act.act.events,
        findings: &act.findings,
        svg: String::new(),
        below: false,
    }
    .draw()
}

/// The whole page.
pub fn render(run: &Run) -> String {
    let mut s = String::new();
    let title = run.command();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>\
body{{font-family:sans-serif;margin:24px;color:#111827;max-width:1400px}}\
.scroll{{overflow-x:auto;border:1px solid #d1d5db;margin:8px 0}}\
ol{{font-size:13px;line-height:1.5}} li.bad{{color:#b91c1c;font-weight:bold}}\
.t{{color:#6b7280;font-variant-numeric:tabular-nums}}\
</style></head><body><h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    for (n, act) in run.acts.iter().enumerate() {
        let _ = write!(
            s,
            "<section><h2>Act {}: {}</h2><div class=\"scroll\">{}</div><h3>What act {} shows</h3><ul>",
            n + 1,
            escape(&act.act.title),
            svg(act),
            n + 1
        );
        for f in &act.findings {
            let bad = matches!(
                f.kind,
                Kind::TwoHolders | Kind::StaleWriteAccepted | Kind::LostUpdate | Kind::TokenReused
            );
            let _ = write!(
                s,
                "<li{}>{}</li>",
                if bad { " class=\"bad\"" } else { "" },
                escape(&f.text)
            );
        }
        s.push_str("</ul><h3>Timeline</h3><ol>");
        for e in &act.act.events {
            let _ = write!(
                s,
                "<li><span class=\"t\">t={} ms</span> [{}] {}</li>",
                e.at_ms,
                escape(&e.lane().to_string()),
                escape(&e.sentence())
            );
        }
        s.push_str("</ol></section>\n");
    }
    s.push_str("</body></html>\n");
    s
}
