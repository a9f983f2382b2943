//! Tools a test needs from the machine: a test that cannot run fails, it never skips.
//!
//! A suite that passes without running is worse than one that fails: it tells its reader the
//! property holds when nobody checked. So a test that needs `node`, `npm` or `python3` calls
//! [`require_tool`], which fails the test with the command that installs the tool.
//! `scripts/test` (the README's test command) installs all of them on a fresh machine.

use std::process::{Command, Stdio};

/// Whether `tool --version` runs and succeeds on this machine.
pub fn tool_available(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Fails the calling test unless `tool --version` runs; the message names `install`, the
/// command that installs it (e.g. `apt-get install nodejs npm`), and the README's test command
/// that installs every tool the suite needs.
#[track_caller]
pub fn require_tool(tool: &str, install: &str) {
    assert!(
        tool_available(tool),
        "`{tool}` is needed by this test and is not installed: run `{install}`, or \
         `scripts/test`, which installs everything the suite needs"
    );
}
