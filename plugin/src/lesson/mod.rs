//! `latchkey lesson NAME`: how a failover (or a restart, a pause, an eviction) loses a lock,
//! and what each defence changes, played for real and told from what was measured.
//!
//! A lesson starts latchkey servers in this process on one virtual clock, runs two clients —
//! instances of the real lock-client component in the real wasmtime host — that contend for
//! one lock and each do a read-modify-write of a shared resource under it, drives the
//! failure, and records every step as an [`event::Event`]. The timeline ([`text`]), the
//! picture ([`html`]) and the summary ([`verdict`]) are all rendered from those events: the
//! lesson cannot say what it did not measure.
//!
//! - [`lessons`]: the lessons' scripts;
//! - [`world`]: the servers, the clients and the recording;
//! - [`event`]: what is recorded, and the sentence for each;
//! - [`verdict`]: what a run shows, derived from its events;
//! - [`text`], [`html`]: the terminal timeline and the self-contained HTML page.

#[cfg(feature = "cli")]
pub mod cli;
pub mod event;
pub mod html;
pub mod lessons;
pub mod text;
pub mod verdict;
pub(crate) mod world;

use std::path::PathBuf;

pub use lessons::{Act, Lesson, LESSONS};
pub use verdict::{Finding, Kind};

/// What a lesson needs from outside: the component and where compiled code is cached.
#[derive(Debug, Clone)]
pub struct Env {
    /// The lock-client component.
    pub component: PathBuf,
    /// The compiled-component cache (`None`: compile every time).
    pub cache: Option<PathBuf>,
    /// `redis://host:port` of servers the user started, to play on instead of in-process
    /// latchkey servers (empty: in process). The lesson reconfigures them: it makes them
    /// masters, deletes its own keys, makes the later ones replicas of the first through
    /// fault proxies, promotes, and leaves them standalone masters.
    pub against: Vec<String>,
}

/// Lessons that restart a node, which `--against` does not do to the user's servers.
pub const RESTARTS_A_NODE: &[&str] = &["aof-restart", "redlock"];

/// One act of a played lesson, with what it shows.
#[derive(Debug, Clone)]
pub struct PlayedAct {
    /// The act: its title and events.
    pub act: Act,
    /// What its events show.
    pub findings: Vec<Finding>,
}

/// A played lesson.
#[derive(Debug, Clone)]
pub struct Run {
    /// The lesson's name.
    pub lesson: String,
    /// The seed it was played with.
    pub seed: u64,
    /// The servers it was played against (empty: in process).
    pub against: Vec<String>,
    /// Its acts.
    pub acts: Vec<PlayedAct>,
}

impl Run {
    /// The command line that plays this run again.
    pub fn command(&self) -> String {
        let mut c = format!("latchkey lesson {} --seed {}", self.lesson, self.seed);
        for url in &self.against {
            c.push_str(&format!(" --against {url}"));
        }
        c
    }

    /// The terminal timeline.
    pub fn text(&self) -> String {
        text::render(self)
    }

    /// The self-contained HTML page.
    pub fn html(&self) -> String {
        html::render(self)
    }

    /// Every finding of every act.
    pub fn findings(&self) -> impl Iterator<Item = &Finding> {
        self.acts.iter().flat_map(|a| a.findings.iter())
    }
}

/// The lesson named `name`, if there is one.
pub fn find(name: &str) -> Option<&'static Lesson> {
    LESSONS.iter().find(|l| l.name == name)
}

/// Plays lesson `name` with `seed`.
pub async fn run(name: &str, seed: u64, env: &Env) -> Result<Run, String> {
    let lesson = find(name).ok_or_else(|| {
        let names: Vec<&str> = LESSONS.iter().map(|l| l.name).collect();
        format!("no lesson named '{name}' (lessons: {})", names.join(", "))
    })?;
    if !env.against.is_empty() && RESTARTS_A_NODE.contains(&lesson.name) {
        return Err(format!(
            "lesson '{name}' restarts a node, which --against does not do to your servers"
        ));
    }
    let acts = lessons::play(lesson.name, seed, env).await?;
    Ok(Run {
        lesson: lesson.name.to_string(),
        seed,
        against: env.against.clone(),
        acts: acts
            .into_iter()
            .map(|act| PlayedAct {
                findings: verdict::findings(&act.events),
                act,
            })
            .collect(),
    })
}

/// The list `latchkey lesson` prints without a name.
pub fn list() -> String {
    let mut s =
        String::from("lessons (run one with `latchkey lesson NAME [--seed N] [--html FILE] [--against redis://HOST:PORT ...]`):\n");
    for l in LESSONS {
        s.push_str(&format!("  {:<14} {}\n", l.name, l.summary));
    }
    s
}
