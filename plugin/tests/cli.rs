//! The `latchkey` binary, run for real.

mod common;

use std::process::Command;

#[test]
fn the_cli_hosts_tenants_that_take_and_release_locks() {
    let component = latchkey_plugin::component_path().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .args([
            "--tenants",
            "3",
            "--workers",
            "2",
            "--cycles",
            "4",
            // A TTL no hold comes near even on a starved CI machine: this checks the CLI's
            // reporting, not lock expiry.
            "--ttl-ms",
            "60000",
            "--component",
        ])
        .arg(&component)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for t in 0..3 {
        for w in 0..2 {
            assert!(
                text.contains(&format!("tenant{t} worker{w}: acquired 4/4, released 4")),
                "{text}"
            );
        }
    }
    assert!(text.contains("24 acquisitions"), "{text}");
}

#[test]
fn the_cli_runs_against_real_redis() {
    let redis = common::RedisProcess::spawn();
    let out = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .args(["--tenants", "2", "--cycles", "2", "--redis", &redis.url()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("against redis://"), "{text}");
    assert!(
        text.contains("tenant1 worker0: acquired 2/2, released 2"),
        "{text}"
    );
}

#[test]
fn the_cli_reports_a_server_it_cannot_reach() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(env!("CARGO_BIN_EXE_latchkey"))
        .args(["--redis", &format!("redis://127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
}

#[test]
fn the_cli_takes_redlocks_over_several_servers() {
    let nodes: Vec<_> = (0..3).map(|_| common::RedisProcess::spawn()).collect();
    let mut cli = Command::new(env!("CARGO_BIN_EXE_latchkey"));
    cli.args([
        "--redlock",
        "--tenants",
        "2",
        "--workers",
        "2",
        "--cycles",
        "3",
    ]);
    for n in &nodes {
        cli.args(["--redis", &n.url()]);
    }
    let out = cli.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for t in 0..2 {
        for w in 0..2 {
            assert!(
                text.contains(&format!("tenant{t} worker{w}: acquired 3/3, released 3")),
                "{text}"
            );
        }
    }
    assert!(
        text.contains("12 RedLock acquisitions over 3 node(s)"),
        "{text}"
    );
}
