//! The `latchkey lesson` subcommand: its options, and printing (or writing) a played lesson.

use std::path::PathBuf;

use super::{list, run, Env};

/// `latchkey lesson [NAME] [--seed N] [--html FILE]`.
#[derive(clap::Args, Debug)]
pub struct LessonArgs {
    /// The lesson to play; none lists them.
    pub name: Option<String>,
    /// Picks the numbers (the resource's start, each client's update, thinking times): the
    /// same seed plays the same timeline.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also writes the lesson as one self-contained HTML page (an SVG diagram per act).
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Writes each act's diagram as a standalone SVG file: FILE-1.svg, FILE-2.svg, ...
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Plays on these servers (`redis://host:port`, started by you, e.g. `redis-server --port
    /// 7001`) instead of in-process latchkey servers, in real time. The first is the master,
    /// the next ones its replicas through fault proxies (a failover lesson needs 2, `wait`
    /// 3). The lesson reconfigures them: it makes them masters, deletes its own keys (the
    /// tenant `shop`'s lock and resource, `cache:0..199`), makes replicas, promotes one, and
    /// leaves every one a standalone master. Not for `aof-restart` and `redlock`, which
    /// restart a node; `wait` leaves out its third act (the master restarting) for the same
    /// reason.
    #[arg(long)]
    pub against: Vec<String>,
    /// The component (default: the lock client built from this workspace).
    #[arg(long)]
    pub component: Option<PathBuf>,
}

/// Runs the subcommand: prints the list, or plays the lesson and prints its timeline.
pub async fn main(args: LessonArgs) -> Result<(), String> {
    let Some(name) = args.name else {
        print!("{}", list());
        return Ok(());
    };
    if super::find(&name).is_none() {
        return Err(format!("no lesson named '{name}'\n{}", list()));
    }
    let component = match args.component {
        Some(p) => p,
        None => {
            eprintln!(
                "latchkey: looking for the lock-client component (if it is missing or stale, it is built now for wasm32-wasip2: a minute or more)..."
            );
            crate::component_path().map_err(|e| e.to_string())?
        }
    };
    // Compiled code is cached beside the component, so later runs start at once.
    let cache = component.parent().map(|p| p.join("latchkey-compiled"));
    let env = Env {
        component,
        cache,
        against: args.against,
    };
    let played = run(&name, args.seed, &env).await?;
    print!("{}", played.text());
    if let Some(path) = args.html {
        std::fs::write(&path, played.html()).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("latchkey: wrote {}", path.display());
    }
    if let Some(base) = args.svg {
        for (i, act) in played.acts.iter().enumerate() {
            let path = PathBuf::from(format!("{}-{}.svg", base.display(), i + 1));
            std::fs::write(&path, super::html::standalone_svg(act))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!("latchkey: wrote {}", path.display());
        }
    }
    Ok(())
}
