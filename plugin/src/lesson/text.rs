//! The terminal timeline: one numbered line per event (lesson time, who believed they held
//! the lock at that moment, the lane, the sentence), then what the act shows.

use std::fmt::Write as _;

use super::event::Event;
use super::verdict::{holds, Hold};
use super::Run;

/// The clients of an act, in order of first appearance.
pub(crate) fn clients(events: &[Event]) -> Vec<char> {
    let mut out = Vec::new();
    for e in events {
        if let super::event::Lane::Client(c) = e.lane() {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    out.sort_unstable();
    out
}

/// Whether `client` believed it held the lock at event `i`, counting the acquisition itself.
pub(crate) fn holding(holds: &[Hold], client: char, i: usize, at_ms: u64) -> bool {
    holds
        .iter()
        .any(|h| h.client == client && (h.from == i || h.believed_at(i, at_ms)))
}

/// Renders the whole run.
pub fn render(run: &Run) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", run.command());
    for (n, played) in run.acts.iter().enumerate() {
        let events = &played.act.events;
        let _ = writeln!(s, "\nact {}: {}", n + 1, played.act.title);
        let cs = clients(events);
        let hs = holds(events);
        let head: String = cs.iter().map(|c| format!("{c} ")).collect();
        let _ = writeln!(s, "  #    t ms  {head} lane     what happened");
        for (i, e) in events.iter().enumerate() {
            let marks: String = cs
                .iter()
                .map(|&c| {
                    if holding(&hs, c, i, e.at_ms) {
                        "█ "
                    } else {
                        "· "
                    }
                })
                .collect();
            let _ = writeln!(
                s,
                "{:>3} {:>7}  {marks} {:<8} {}",
                i + 1,
                e.at_ms,
                e.lane().to_string(),
                e.sentence()
            );
        }
        let _ = writeln!(
            s,
            "  (█: the client believes it holds the lock at that moment)"
        );
        let _ = writeln!(s, "what act {} shows:", n + 1);
        for f in &played.findings {
            let _ = writeln!(s, "  - {}", f.text);
        }
    }
    s
}
