//! What a run shows, derived from its events alone: who believed they held the lock at the
//! same time, which token was handed out twice, which stale write the storage accepted or
//! refused, and whether the resource ends where its accepted updates say it should.
//!
//! Each [`Finding`] names the events it rests on (by their number in the timeline), and none
//! is produced without them: the summary can only repeat, in other words, what was measured.

use super::event::{Event, What};

/// The kind of a finding (what the tests assert on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Two clients believed they held the lock at the same moment.
    TwoHolders,
    /// No two clients' holds overlapped (said only when at least two clients acquired).
    OneHolderAtATime,
    /// The same fencing token went to two clients.
    TokenReused,
    /// A write by a client whose lock had since been taken by another was applied.
    StaleWriteAccepted,
    /// Such a write was refused.
    StaleWriteRefused,
    /// A client whose lock another had since acquired was told by its watched lock that the
    /// lease was lost, and wrote nothing after that acquisition.
    LossSignalled,
    /// The resource ends away from what its accepted updates add up to.
    LostUpdate,
    /// The resource ends where its accepted updates add up to.
    Consistent,
}

/// One conclusion of a run, and the events (indices into the timeline) it rests on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What kind.
    pub kind: Kind,
    /// The sentence, citing its events as `#n` (1-based, as the timeline numbers them).
    pub text: String,
    /// The events it rests on (0-based indices).
    pub events: Vec<usize>,
}

/// A client's belief that it holds the lock: from its acquisition until it released the lock,
/// its watched lock told it the lease was lost, or, for a RedLock, its validity ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// The client.
    pub client: char,
    /// The event of the acquisition.
    pub from: usize,
    /// Lesson time of the acquisition.
    pub from_ms: u64,
    /// The release event (or the watched lock's "lost"), if any.
    pub released: Option<usize>,
    /// When its validity ran out (RedLock).
    pub valid_until: Option<u64>,
}

impl Hold {
    /// Whether the client still believed it held the lock at event `i` (at time `at_ms`).
    pub fn believed_at(&self, i: usize, at_ms: u64) -> bool {
        i > self.from
            && self.released.is_none_or(|r| r > i)
            && self.valid_until.is_none_or(|u| at_ms < u)
    }
}

/// Every hold of the run, in order of acquisition.
pub fn holds(events: &[Event]) -> Vec<Hold> {
    let mut out: Vec<Hold> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        match &e.what {
            What::Acquired {
                client,
                valid_until,
                ..
            } => out.push(Hold {
                client: *client,
                from: i,
                from_ms: e.at_ms,
                released: None,
                valid_until: *valid_until,
            }),
            What::Released { client, .. }
            | What::LeaseChecked {
                client,
                held: false,
                ..
            } => {
                if let Some(h) = out
                    .iter_mut()
                    .rev()
                    .find(|h| h.client == *client && h.released.is_none())
                {
                    h.released = Some(i);
                }
            }
            _ => {}
        }
    }
    out
}

fn cite(events: &[usize]) -> String {
    let v: Vec<String> = events.iter().map(|i| format!("#{}", i + 1)).collect();
    v.join(", ")
}

/// Everything the run shows, in a fixed order.
pub fn findings(events: &[Event]) -> Vec<Finding> {
    let mut out = Vec::new();
    let holds = holds(events);
    // Two holders: an acquisition while another client's hold was still believed.
    let mut overlapped = false;
    for later in &holds {
        for earlier in &holds {
            if earlier.client != later.client && earlier.believed_at(later.from, later.from_ms) {
                overlapped = true;
                out.push(Finding {
                    kind: Kind::TwoHolders,
                    text: format!(
                        "TWO HOLDERS: from t={} ms both {} and {} believed they held the lock ({})",
                        later.from_ms,
                        earlier.client,
                        later.client,
                        cite(&[earlier.from, later.from])
                    ),
                    events: vec![earlier.from, later.from],
                });
            }
        }
    }
    let clients: std::collections::BTreeSet<char> = holds.iter().map(|h| h.client).collect();
    if !overlapped && clients.len() > 1 {
        let all: Vec<usize> = holds.iter().map(|h| h.from).collect();
        out.push(Finding {
            kind: Kind::OneHolderAtATime,
            text: format!(
                "one holder at a time: no client acquired the lock while another still believed it held it ({})",
                cite(&all)
            ),
            events: all,
        });
    }
    // Fencing tokens handed out twice.
    for (j, later) in events.iter().enumerate() {
        let What::Acquired {
            client: c2,
            fence: Some(f2),
            ..
        } = &later.what
        else {
            continue;
        };
        for (i, earlier) in events.iter().enumerate().take(j) {
            if let What::Acquired {
                client: c1,
                fence: Some(f1),
                ..
            } = &earlier.what
            {
                if f1 == f2 && c1 != c2 {
                    out.push(Finding {
                        kind: Kind::TokenReused,
                        text: format!(
                            "fencing token {f1} was handed to {c1} and again to {c2}: the counter went back ({})",
                            cite(&[i, j])
                        ),
                        events: vec![i, j],
                    });
                }
            }
        }
    }
    // Stale writes: a write by X after another client acquired the lock since X did.
    for (w, e) in events.iter().enumerate() {
        let What::Wrote {
            client, accepted, ..
        } = &e.what
        else {
            continue;
        };
        let Some(mine) = holds
            .iter()
            .rev()
            .find(|h| h.client == *client && h.from < w)
        else {
            continue;
        };
        let Some(other) = holds
            .iter()
            .find(|h| h.client != *client && h.from > mine.from && h.from < w)
        else {
            continue;
        };
        let (kind, verb) = if *accepted {
            (Kind::StaleWriteAccepted, "ACCEPTED")
        } else {
            (Kind::StaleWriteRefused, "refused")
        };
        out.push(Finding {
            kind,
            text: format!(
                "the storage {verb} {client}'s write although {} had acquired the lock after {client} did ({})",
                other.client,
                cite(&[mine.from, other.from, w])
            ),
            events: vec![mine.from, other.from, w],
        });
    }
    // Losses signalled by the watchdog before the client wrote.
    for (k, e) in events.iter().enumerate() {
        let What::LeaseChecked {
            client,
            held: false,
            ..
        } = &e.what
        else {
            continue;
        };
        let Some(mine) = holds
            .iter()
            .rev()
            .find(|h| h.client == *client && h.from < k)
        else {
            continue;
        };
        let Some(other) = holds
            .iter()
            .find(|h| h.client != *client && h.from > mine.from && h.from < k)
        else {
            continue;
        };
        let wrote = events[other.from..]
            .iter()
            .any(|e| matches!(&e.what, What::Wrote { client: c, .. } if c == client));
        if !wrote {
            out.push(Finding {
                kind: Kind::LossSignalled,
                text: format!(
                    "{client}'s watched lock told it the lease was lost before it wrote, and {client} wrote nothing after {} acquired the lock ({})",
                    other.client,
                    cite(&[mine.from, other.from, k])
                ),
                events: vec![mine.from, other.from, k],
            });
        }
    }
    // The ledger: the starting value plus every accepted update, against the final value.
    let start = events
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, e)| match e.what {
            What::ResourceSet { value, .. } => Some((i, value)),
            _ => None,
        });
    let end = events
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, e)| match e.what {
            What::Final { value, .. } => Some((i, value)),
            _ => None,
        });
    if let (Some((si, start)), Some((fi, end))) = (start, end) {
        let mut cited = vec![si];
        let mut expected = start;
        let mut terms = vec![start.to_string()];
        for (i, e) in events.iter().enumerate() {
            if let What::Wrote {
                delta,
                accepted: true,
                ..
            } = e.what
            {
                expected += delta;
                terms.push(delta.to_string());
                cited.push(i);
            }
        }
        cited.push(fi);
        let sum = terms.join(" + ");
        if end == expected {
            out.push(Finding {
                kind: Kind::Consistent,
                text: format!(
                    "the resource ends at {end} = {sum}, its start plus every accepted update ({})",
                    cite(&cited)
                ),
                events: cited,
            });
        } else {
            out.push(Finding {
                kind: Kind::LostUpdate,
                text: format!(
                    "LOST UPDATE: the resource ends at {end}, but its start plus the accepted updates is {sum} = {expected} ({})",
                    cite(&cited)
                ),
                events: cited,
            });
        }
    }
    out
}
