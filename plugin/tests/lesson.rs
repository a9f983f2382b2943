//! `latchkey lesson`: every lesson played for real (the lock-client component in the host,
//! latchkey servers in process), its recorded events and findings asserted; the same seed
//! gives the same output; the HTML page is well formed, self-contained and says what the
//! terminal says; the narration is made of the events and findings and nothing else.

mod common;

use std::process::Command;

use latchkey_plugin::lesson::event::{Event, Holder, What};
use latchkey_plugin::lesson::verdict::{findings, holds};
use latchkey_plugin::lesson::{run, Env, Kind, Run, LESSONS};

fn env() -> Env {
    let component = latchkey_plugin::component_path().unwrap();
    let cache = component.parent().map(|p| p.join("latchkey-compiled"));
    Env {
        component,
        cache,
        against: Vec::new(),
    }
}

async fn play(name: &str, seed: u64) -> Run {
    run(name, seed, &env()).await.unwrap()
}

fn kinds(run: &Run, act: usize) -> Vec<Kind> {
    run.acts[act].findings.iter().map(|f| f.kind).collect()
}

fn events(run: &Run, act: usize) -> &[Event] {
    &run.acts[act].act.events
}

/// The fencing tokens each client was handed, in order.
fn fences(events: &[Event]) -> Vec<(char, i64)> {
    events
        .iter()
        .filter_map(|e| match e.what {
            What::Acquired {
                client,
                fence: Some(f),
                ..
            } => Some((client, f)),
            _ => None,
        })
        .collect()
}

fn acquired_by(events: &[Event], who: char) -> Vec<&What> {
    events
        .iter()
        .map(|e| &e.what)
        .filter(|w| matches!(w, What::Acquired { client, .. } if *client == who))
        .collect()
}

/// Asserts that in act `act` of `run` the node came back from its AOF holding the lock key
/// with A's token, so that B was refused and the resource adds up.
fn a_kept_the_lock_through_the_restart(run: &Run, act: usize) {
    let ev = events(run, act);
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::Restarted {
            aof: true,
            keys: 1,
            ..
        }
    )));
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::LockSeen {
            holder: Holder::Client('A'),
            ..
        }
    )));
    assert!(acquired_by(ev, 'B').is_empty());
    assert!(!kinds(run, act).contains(&Kind::TwoHolders));
    assert!(kinds(run, act).contains(&Kind::Consistent));
}

fn writes(events: &[Event]) -> Vec<(char, bool)> {
    events
        .iter()
        .filter_map(|e| match e.what {
            What::Wrote {
                client, accepted, ..
            } => Some((client, accepted)),
            _ => None,
        })
        .collect()
}

/// The resource's start, the sum of accepted updates and its end, read from the events.
fn ledger(events: &[Event]) -> (i64, i64, i64) {
    let mut start = None;
    let (mut accepted, mut end) = (0, None);
    for e in events {
        match e.what {
            What::ResourceSet { value, .. } => start = Some(value),
            What::Wrote {
                delta,
                accepted: true,
                ..
            } => accepted += delta,
            What::Final { value, .. } => end = Some(value),
            _ => {}
        }
    }
    (start.unwrap(), accepted, end.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unprotected_two_holders_and_a_lost_update() {
    let r = play("unprotected", 1).await;
    let ev = events(&r, 0);
    // The replica did not have A's lock when the master crashed.
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::LockSeen {
            node: 1,
            holder: Holder::Nobody,
            ..
        }
    )));
    // A took the lock on n1, B on the promoted n2.
    assert!(matches!(acquired_by(ev, 'A')[..], [What::Acquired { nodes, .. }] if nodes == &[0]));
    assert!(matches!(acquired_by(ev, 'B')[..], [What::Acquired { nodes, .. }] if nodes == &[1]));
    // Both writes were applied, B's first: A's update overwrote B's.
    assert_eq!(writes(ev), vec![('B', true), ('A', true)]);
    let (start, accepted, end) = ledger(ev);
    assert_ne!(start + accepted, end);
    let k = kinds(&r, 0);
    for want in [Kind::TwoHolders, Kind::StaleWriteAccepted, Kind::LostUpdate] {
        assert!(k.contains(&want), "{want:?} missing: {}", r.text());
    }
    assert!(r.text().contains("TWO HOLDERS"), "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_keeps_the_lock_across_its_failover_but_not_when_another_replica_is_promoted_or_the_master_restarts_empty(
) {
    let r = play("wait", 1).await;
    // Act 1: WAIT-confirmed; the promoted replica has A's lock; B is refused.
    let ev = events(&r, 0);
    assert!(matches!(
        acquired_by(ev, 'A')[..],
        [What::Acquired { acked: Some(1), .. }]
    ));
    assert!(acquired_by(ev, 'B').is_empty());
    assert!(ev
        .iter()
        .any(|e| matches!(e.what, What::NotAcquired { client: 'B', .. })));
    let k = kinds(&r, 0);
    assert!(!k.contains(&Kind::TwoHolders), "{}", r.text());
    assert!(k.contains(&Kind::Consistent), "{}", r.text());
    // Act 2: n2 acknowledged, n3 (lagging) did not and is promoted: B gets the lock too.
    let ev = events(&r, 1);
    assert!(matches!(
        acquired_by(ev, 'A')[..],
        [What::Acquired { acked: Some(1), .. }]
    ));
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::LockSeen {
            node: 2,
            holder: Holder::Nobody,
            ..
        }
    )));
    assert!(matches!(acquired_by(ev, 'B')[..], [What::Acquired { nodes, .. }] if nodes == &[2]));
    let k = kinds(&r, 1);
    assert!(k.contains(&Kind::TwoHolders), "{}", r.text());
    assert!(k.contains(&Kind::LostUpdate), "{}", r.text());
    // Act 3: n2 acknowledged A's lock and held it; n1 restarts empty, n2 resynchronises from
    // it and loses the lock; B takes it on n1.
    let ev = events(&r, 2);
    assert!(matches!(
        acquired_by(ev, 'A')[..],
        [What::Acquired { acked: Some(1), .. }]
    ));
    let restart = ev
        .iter()
        .position(|e| {
            matches!(
                e.what,
                What::Restarted {
                    node: 0,
                    aof: false,
                    keys: 0
                }
            )
        })
        .expect("n1 restarts empty");
    let seen_by_n2: Vec<(usize, &Holder)> = ev
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.what {
            What::LockSeen {
                node: 1, holder, ..
            } => Some((i, holder)),
            _ => None,
        })
        .collect();
    assert!(
        matches!(seen_by_n2[..], [(a, Holder::Client('A')), (b, Holder::Nobody)] if a < restart && b > restart),
        "{}",
        r.text()
    );
    assert!(ev[restart..]
        .iter()
        .any(|e| matches!(e.what, What::Resynced { replica: 1, .. })));
    assert!(matches!(acquired_by(ev, 'B')[..], [What::Acquired { nodes, .. }] if nodes == &[0]));
    let k = kinds(&r, 2);
    assert!(k.contains(&Kind::TwoHolders), "{}", r.text());
    assert!(k.contains(&Kind::LostUpdate), "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_refuses_a_stalled_holder_but_its_counter_rolls_back_in_a_failover() {
    let r = play("fencing-token", 1).await;
    // Act 1: one node; B's token is above A's; A's late write is refused.
    let ev = events(&r, 0);
    let f = fences(ev);
    assert_eq!(f.len(), 2);
    assert!(f[1].1 > f[0].1, "{f:?}");
    assert_eq!(writes(ev), vec![('B', true), ('A', false)]);
    let k = kinds(&r, 0);
    assert!(k.contains(&Kind::StaleWriteRefused) && k.contains(&Kind::Consistent));
    assert!(!k.contains(&Kind::StaleWriteAccepted));
    // Act 2: A's second token never reached the replica; B is handed the same number.
    let ev = events(&r, 1);
    let f = fences(ev);
    assert_eq!(f.len(), 3, "{f:?}");
    assert_eq!((f[1].0, f[2].0), ('A', 'B'));
    assert_eq!(f[1].1, f[2].1, "the token handed out twice");
    assert_eq!(writes(ev), vec![('B', true), ('A', true)]);
    let k = kinds(&r, 1);
    for want in [
        Kind::TokenReused,
        Kind::StaleWriteAccepted,
        Kind::LostUpdate,
    ] {
        assert!(k.contains(&want), "{want:?} missing: {}", r.text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_check_refuses_the_stale_write() {
    let r = play("lease-check", 1).await;
    let ev = events(&r, 0);
    // Both believed they held it (the failover still lost the lock)...
    let k = kinds(&r, 0);
    assert!(k.contains(&Kind::TwoHolders), "{}", r.text());
    // ...but zero stale writes were applied, and the resource adds up.
    assert_eq!(writes(ev), vec![('B', true), ('A', false)]);
    assert!(!k.contains(&Kind::StaleWriteAccepted));
    assert!(k.contains(&Kind::StaleWriteRefused) && k.contains(&Kind::Consistent));
    let (start, accepted, end) = ledger(ev);
    assert_eq!(start + accepted, end);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_aof_forgets_the_lock_and_one_with_it_does_not() {
    let r = play("aof-restart", 1).await;
    let ev = events(&r, 0);
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::Restarted {
            aof: false,
            keys: 0,
            ..
        }
    )));
    assert_eq!(acquired_by(ev, 'B').len(), 1);
    assert!(kinds(&r, 0).contains(&Kind::TwoHolders));
    assert!(kinds(&r, 0).contains(&Kind::LostUpdate));
    a_kept_the_lock_through_the_restart(&r, 1);
    // With appendfsync everysec, a process crash loses nothing written to the file: the lock
    // is replayed.
    let ev = events(&r, 2);
    assert!(ev.iter().any(|e| matches!(
        &e.what,
        What::NodeStarted { aof: Some(f), .. } if f == "everysec"
    )));
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::Restarted {
            aof: true,
            keys: 1,
            ..
        }
    )));
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::LockSeen {
            holder: Holder::Client('A'),
            ..
        }
    )));
    assert!(acquired_by(ev, 'B').is_empty());
    assert!(kinds(&r, 2).contains(&Kind::Consistent));
}

/// The lesson time of `who`'s acquisitions.
fn acquired_at(events: &[Event], who: char) -> Vec<u64> {
    events
        .iter()
        .filter(|e| matches!(e.what, What::Acquired { client, .. } if client == who))
        .map(|e| e.at_ms)
        .collect()
}

/// The power cut of an act: its time and what it reported.
fn power_lost(events: &[Event]) -> (u64, u64, u64, Option<u64>) {
    let cuts: Vec<_> = events
        .iter()
        .filter_map(|e| match e.what {
            What::PowerLost {
                written,
                durable,
                last_fsync_ms,
                ..
            } => Some((e.at_ms, written, durable, last_fsync_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(cuts.len(), 1, "{events:?}");
    cuts[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_power_loss_under_everysec_forgets_a_lock_taken_less_than_a_second_before() {
    let r = play("aof-restart", 1).await;
    // Act 4: the machine loses power less than a second after A's acquisition, before the
    // everysec fsync that would have covered it: the AOF keeps none of the lock's bytes.
    let ev = events(&r, 3);
    assert!(ev.iter().any(|e| matches!(
        &e.what,
        What::NodeStarted { aof: Some(f), .. } if f == "everysec"
    )));
    let (cut_at, written, durable, last_fsync) = power_lost(ev);
    let [a_at] = acquired_at(ev, 'A')[..] else {
        panic!("{}", r.text())
    };
    assert!(cut_at - a_at < 1000, "{}", r.text());
    assert!(written > 0);
    assert_eq!((durable, last_fsync), (0, None), "{}", r.text());
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::Restarted {
            aof: true,
            keys: 0,
            ..
        }
    )));
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::LockSeen {
            holder: Holder::Nobody,
            ..
        }
    )));
    // So B takes the lock A still believes it holds, and both write: the resource is wrong.
    assert_eq!(acquired_by(ev, 'B').len(), 1);
    assert_eq!(writes(ev), vec![('B', true), ('A', true)]);
    let (start, accepted, end) = ledger(ev);
    assert_ne!(start + accepted, end);
    for want in [Kind::TwoHolders, Kind::StaleWriteAccepted, Kind::LostUpdate] {
        assert!(
            kinds(&r, 3).contains(&want),
            "{want:?} missing: {}",
            r.text()
        );
    }
    assert!(r.text().contains("loses power"), "{}", r.text());

    // Act 5: a second and more pass first; the fsync due a second after the file opened
    // covered the lock, the cut loses nothing, and B is refused.
    let ev = events(&r, 4);
    assert!(ev
        .iter()
        .any(|e| matches!(e.what, What::Waited { ms: 1000 })));
    let (cut_at, written, durable, last_fsync) = power_lost(ev);
    let [a_at] = acquired_at(ev, 'A')[..] else {
        panic!("{}", r.text())
    };
    assert!(cut_at - a_at > 1000);
    assert_eq!(durable, written);
    assert!(
        last_fsync.is_some_and(|t| t > a_at && t < cut_at),
        "{}",
        r.text()
    );
    a_kept_the_lock_through_the_restart(&r, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_corrupts_the_resource_unless_the_storage_checks() {
    let r = play("pause", 1).await;
    // The lock expired on the node during A's pause in every act.
    for act in 0..3 {
        assert!(events(&r, act).iter().any(|e| matches!(
            e.what,
            What::LockSeen {
                node: 0,
                holder: Holder::Nobody,
                ..
            }
        )));
        assert!(kinds(&r, act).contains(&Kind::TwoHolders));
    }
    assert_eq!(writes(events(&r, 0)), vec![('B', true), ('A', true)]);
    assert!(kinds(&r, 0).contains(&Kind::LostUpdate));
    for act in [1, 2] {
        assert_eq!(writes(events(&r, act)), vec![('B', true), ('A', false)]);
        assert!(kinds(&r, act).contains(&Kind::Consistent));
    }
    watchdog_stops_the_stopped_holder(&r);
}

/// `pause`, act 4: A's watched lock; its process (renewals included) stops longer than the
/// TTL; B takes the lock and writes; when A runs again, its watched lock says the lease was
/// lost, taken by another, and A writes nothing. Act 5: the same, A writing before it asks.
fn watchdog_stops_the_stopped_holder(r: &Run) {
    let ev = events(r, 3);
    assert!(
        matches!(
            acquired_by(ev, 'A')[..],
            [What::Acquired {
                renewed_every: Some(333),
                ..
            }]
        ),
        "{}",
        r.text()
    );
    let stopped = ev
        .iter()
        .position(|e| matches!(e.what, What::Stopped { client: 'A' }))
        .expect("A stops");
    let resumed = ev
        .iter()
        .position(|e| matches!(e.what, What::Resumed { client: 'A', ms } if ms > 1_000))
        .expect("A runs again after more than its TTL");
    let b = ev
        .iter()
        .position(|e| matches!(e.what, What::Acquired { client: 'B', .. }))
        .expect("B acquires");
    assert!(stopped < b && b < resumed, "{}", r.text());
    // The lock expired while nothing renewed it.
    assert!(ev[stopped..b].iter().any(|e| matches!(
        e.what,
        What::LockSeen {
            holder: Holder::Nobody,
            ..
        }
    )));
    let lost = ev
        .iter()
        .position(|e| {
            matches!(
                &e.what,
                What::LeaseChecked { client: 'A', held: false, cause: Some(c) }
                    if c == "another holder took the lock"
            )
        })
        .expect("the host found A's lease taken");
    assert!(lost > resumed);
    // And the host has interrupted A: its next call into the host traps with the reason.
    let stopped = ev
        .iter()
        .position(|e| {
            matches!(
                &e.what,
                What::HostCall { client: 'A', stopped: Some(why) }
                    if why.contains("another holder took the lock") && why.ends_with("tenant interrupted")
            )
        })
        .expect("the host stops A");
    assert!(stopped > lost, "{}", r.text());
    assert_eq!(writes(ev), vec![('B', true)], "{}", r.text());
    let k = kinds(r, 3);
    for want in [Kind::TwoHolders, Kind::LossSignalled, Kind::Consistent] {
        assert!(k.contains(&want), "{want:?} missing: {}", r.text());
    }
    assert!(!k.contains(&Kind::StaleWriteAccepted));
    // Act 5: A writes the moment it runs again, before asking: the lease check refuses the
    // write, and the watched lock says "lost" only after it.
    let ev = events(r, 4);
    assert_eq!(writes(ev), vec![('B', true), ('A', false)], "{}", r.text());
    let a_wrote = ev
        .iter()
        .position(|e| matches!(e.what, What::Wrote { client: 'A', .. }))
        .unwrap();
    let asked = ev
        .iter()
        .position(|e| {
            matches!(
                e.what,
                What::LeaseChecked {
                    client: 'A',
                    held: false,
                    ..
                }
            )
        })
        .expect("the watched lock says lost");
    assert!(a_wrote < asked, "{}", r.text());
    let k = kinds(r, 4);
    for want in [Kind::TwoHolders, Kind::StaleWriteRefused, Kind::Consistent] {
        assert!(k.contains(&want), "{want:?} missing: {}", r.text());
    }
    assert!(!k.contains(&Kind::LossSignalled) && !k.contains(&Kind::StaleWriteAccepted));
}

/// `min-replicas`: act 1, a held-back stream leaves the replica counted good, so A's lock is
/// accepted and then lost in the failover; act 2, a cut link leaves no good replica, and
/// A's acquisition is refused with NOREPLICAS.
fn min_replicas_facts(r: &Run) {
    let ev = events(r, 0);
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::MinReplicas {
            node: 0,
            to_write: 1,
            ..
        }
    )));
    assert!(
        ev.iter().any(|e| matches!(
            e.what,
            What::GoodReplicas {
                node: 0,
                connected: 1,
                good: 1
            }
        )),
        "{}",
        r.text()
    );
    assert!(matches!(acquired_by(ev, 'A')[..], [What::Acquired { nodes, .. }] if nodes == &[0]));
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::LockSeen {
            node: 1,
            holder: Holder::Nobody,
            ..
        }
    )));
    assert!(matches!(acquired_by(ev, 'B')[..], [What::Acquired { nodes, .. }] if nodes == &[1]));
    let k = kinds(r, 0);
    for want in [Kind::TwoHolders, Kind::StaleWriteAccepted, Kind::LostUpdate] {
        assert!(k.contains(&want), "{want:?} missing: {}", r.text());
    }
    let ev = events(r, 1);
    assert!(
        ev.iter().any(|e| matches!(
            e.what,
            What::GoodReplicas {
                node: 0,
                connected: 0,
                good: 0
            }
        )),
        "{}",
        r.text()
    );
    assert!(acquired_by(ev, 'A').is_empty(), "{}", r.text());
    assert!(
        ev.iter().any(|e| matches!(
            &e.what,
            What::AcquireError { client: 'A', error } if error.contains("NOREPLICAS Not enough good replicas to write.")
        )),
        "{}",
        r.text()
    );
    assert!(matches!(acquired_by(ev, 'B')[..], [What::Acquired { nodes, .. }] if nodes == &[1]));
    let k = kinds(r, 1);
    assert!(!k.contains(&Kind::TwoHolders), "{}", r.text());
    assert!(k.contains(&Kind::Consistent), "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_replicas_refuses_a_cut_off_master_but_not_a_held_back_stream() {
    let r = play("min-replicas", 1).await;
    min_replicas_facts(&r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_with_an_early_restart_has_two_holders_and_with_a_delayed_one_none() {
    let r = play("redlock", 1).await;
    let ev = events(&r, 0);
    assert!(
        matches!(acquired_by(ev, 'A')[..], [What::Acquired { nodes, .. }] if nodes == &[0, 1, 2])
    );
    assert!(
        matches!(acquired_by(ev, 'B')[..], [What::Acquired { nodes, .. }] if nodes == &[2, 3, 4])
    );
    assert!(kinds(&r, 0).contains(&Kind::TwoHolders));
    assert!(kinds(&r, 0).contains(&Kind::LostUpdate));
    let ev = events(&r, 1);
    assert!(matches!(acquired_by(ev, 'B')[..], [What::Acquired { nodes, .. }] if nodes.len() == 5));
    assert!(ev
        .iter()
        .any(|e| matches!(e.what, What::HeldBack { client: 'A' })));
    let k = kinds(&r, 1);
    assert!(!k.contains(&Kind::TwoHolders), "{}", r.text());
    assert!(k.contains(&Kind::OneHolderAtATime) && k.contains(&Kind::Consistent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_drops_the_lock_key_and_noeviction_refuses_writes_instead() {
    let r = play("eviction", 1).await;
    let ev = events(&r, 0);
    assert!(ev
        .iter()
        .any(|e| matches!(e.what, What::Filled { evicted, .. } if evicted > 0)));
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::LockSeen {
            holder: Holder::Nobody,
            ..
        }
    )));
    assert!(kinds(&r, 0).contains(&Kind::TwoHolders));
    let ev = events(&r, 1);
    assert!(ev
        .iter()
        .any(|e| matches!(e.what, What::Filled { refused, evicted: 0, .. } if refused > 0)));
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::LockSeen {
            holder: Holder::Client('A'),
            ..
        }
    )));
    assert!(acquired_by(ev, 'B').is_empty());
    assert!(!kinds(&r, 1).contains(&Kind::TwoHolders));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_seed_gives_the_same_output_and_another_seed_other_numbers() {
    let a = play("unprotected", 7).await;
    let b = play("unprotected", 7).await;
    assert_eq!(a.text(), b.text());
    assert_eq!(a.html(), b.html());
    let c = play("unprotected", 8).await;
    assert_ne!(a.text(), c.text());
    // Also the lessons that wait on replicas, a restart or a host's lease keeper.
    for name in ["redlock", "pause", "wait", "min-replicas", "aof-restart"] {
        let d = play(name, 7).await;
        let e = play(name, 7).await;
        assert_eq!(d.text(), e.text(), "{name}");
        assert_eq!(d.html(), e.html(), "{name}");
    }
}

/// Checks that every line of the terminal output is the header, an act title, a timeline
/// line rendering exactly one recorded event, a legend, or a finding: nothing else is said.
fn narration_is_events_and_findings(r: &Run) {
    let text = r.text();
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), r.command());
    for (n, act) in r.acts.iter().enumerate() {
        assert_eq!(lines.next().unwrap(), "");
        assert_eq!(
            lines.next().unwrap(),
            format!("act {}: {}", n + 1, act.act.title)
        );
        assert!(lines.next().unwrap().contains("what happened"));
        for (i, e) in act.act.events.iter().enumerate() {
            let line = lines.next().unwrap();
            assert!(
                line.starts_with(&format!("{:>3} {:>7}", i + 1, e.at_ms)),
                "{line}"
            );
            assert!(line.ends_with(&e.sentence()), "{line}");
        }
        assert!(lines.next().unwrap().contains("believes it holds"));
        assert_eq!(lines.next().unwrap(), format!("what act {} shows:", n + 1));
        // The findings are recomputed from the events alone, and every one is printed.
        assert_eq!(findings(&act.act.events), act.findings);
        for f in &act.findings {
            assert_eq!(lines.next().unwrap(), format!("  - {}", f.text));
            check_finding(&act.act.events, f);
        }
    }
    assert!(lines.next().is_none());
}

/// A finding is backed by the events it cites.
fn check_finding(ev: &[Event], f: &latchkey_plugin::lesson::Finding) {
    let cited: Vec<&What> = f.events.iter().map(|&i| &ev[i].what).collect();
    for i in &f.events {
        assert!(f.text.contains(&format!("#{}", i + 1)), "{}", f.text);
    }
    match f.kind {
        Kind::TwoHolders => {
            let [What::Acquired { client: a, .. }, What::Acquired { client: b, .. }] = cited[..]
            else {
                panic!("{f:?}")
            };
            assert_ne!(a, b);
            // The earlier holder had not released before the later acquisition.
            let hs = holds(ev);
            let earlier = hs.iter().find(|h| h.from == f.events[0]).unwrap();
            assert!(earlier.released.is_none_or(|r| r > f.events[1]));
        }
        Kind::TokenReused => {
            let [What::Acquired { fence: Some(x), .. }, What::Acquired { fence: Some(y), .. }] =
                cited[..]
            else {
                panic!("{f:?}")
            };
            assert_eq!(x, y);
        }
        Kind::LossSignalled => {
            let What::LeaseChecked { held, .. } = cited[2] else {
                panic!("{f:?}")
            };
            assert!(!held);
        }
        Kind::StaleWriteAccepted | Kind::StaleWriteRefused => {
            let What::Wrote { accepted, .. } = cited[2] else {
                panic!("{f:?}")
            };
            assert_eq!(*accepted, f.kind == Kind::StaleWriteAccepted);
        }
        Kind::LostUpdate | Kind::Consistent => {
            let (start, accepted, end) = ledger(ev);
            assert_eq!(start + accepted == end, f.kind == Kind::Consistent);
        }
        Kind::OneHolderAtATime => {
            let hs = holds(ev);
            for (j, later) in hs.iter().enumerate() {
                for earlier in &hs[..j] {
                    if earlier.client != later.client {
                        assert!(!earlier.believed_at(later.from, later.from_ms));
                    }
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_narration_only_says_what_the_events_recorded() {
    for l in LESSONS {
        let r = play(l.name, 3).await;
        narration_is_events_and_findings(&r);
    }
    // Without events there is nothing to say; with only a start and an end, only the ledger.
    assert!(findings(&[]).is_empty());
}

/// A minimal well-formedness check of the generated markup: every tag closes in order
/// (void elements excepted), and attribute quotes balance.
fn well_formed(html: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        let close = rest[open..].find('>').expect("unclosed tag") + open;
        let tag = &rest[open + 1..close];
        rest = &rest[close + 1..];
        assert_eq!(tag.matches('"').count() % 2, 0, "<{tag}>");
        if tag.starts_with('!') {
            continue;
        }
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if let Some(stripped) = tag.strip_prefix('/') {
            let top = stack.pop().unwrap_or_default();
            assert_eq!(top, stripped.trim(), "closing </{stripped}> inside <{top}>");
        } else if !tag.ends_with('/') && name != "meta" {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_page_is_self_contained_well_formed_and_says_the_same_facts() {
    let r = play("unprotected", 1).await;
    let html = r.html();
    well_formed(&html);
    for banned in [
        "http:", "https:", "src=", "<script", "<link", "url(http", "@import",
    ] {
        assert!(!html.contains(banned), "{banned} in the page");
    }
    assert!(html.contains("<svg"));
    let esc = latchkey_plugin::lesson::html::escape;
    for act in &r.acts {
        for e in &act.act.events {
            assert!(html.contains(&esc(&e.sentence())), "{}", e.sentence());
        }
        for f in &act.findings {
            assert!(html.contains(&esc(&f.text)), "{}", f.text);
        }
    }
    // The stale write is drawn in red.
    assert!(html.contains("STALE WRITE"));
}

#[test]
fn the_cli_lists_the_lessons_and_writes_the_html_file() {
    let exe = env!("CARGO_BIN_EXE_latchkey");
    let out = Command::new(exe).arg("lesson").output().unwrap();
    assert!(out.status.success());
    let list = String::from_utf8_lossy(&out.stdout);
    for l in LESSONS {
        assert!(list.contains(l.name) && list.contains(l.summary), "{list}");
    }
    let dir = std::env::temp_dir().join(format!("latchkey-lesson-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("lesson.html");
    let out = Command::new(exe)
        .args(["lesson", "unprotected", "--seed", "5", "--html"])
        .arg(&page)
        .arg("--component")
        .arg(latchkey_plugin::component_path().unwrap())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("latchkey lesson unprotected --seed 5"));
    assert!(
        text.contains("TWO HOLDERS") && text.contains("LOST UPDATE"),
        "{text}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("TWO HOLDERS") && html.contains("<svg"));
    let bad = Command::new(exe)
        .args(["lesson", "no-such-lesson"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no lesson named 'no-such-lesson'"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_and_the_committed_picture_are_this_commands_own_output() {
    let r = play("unprotected", 1).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let svg = std::fs::read_to_string(root.join("docs/lesson-unprotected-1.svg")).unwrap();
    assert_eq!(
        svg,
        latchkey_plugin::lesson::html::standalone_svg(&r.acts[0]),
        "regenerate with: latchkey lesson unprotected --svg docs/lesson-unprotected"
    );
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("```text\n{}```", r.text())),
        "paste the output of `latchkey lesson unprotected` into README.md"
    );
}

/// The lessons that drive no restart, played on real `redis-server`s (the replicas' streams
/// through fault proxies, in real time): the same facts as on latchkey.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_real_redis_the_lessons_show_the_same_facts() {
    let servers: Vec<common::RedisProcess> =
        (0..3).map(|_| common::RedisProcess::spawn()).collect();
    let env = Env {
        against: servers.iter().map(|s| s.url()).collect(),
        ..env()
    };
    let play = |name: &'static str| {
        let env = env.clone();
        async move { run(name, 1, &env).await.unwrap() }
    };

    let r = play("unprotected").await;
    assert!(r.command().contains("--against redis://"));
    let k = kinds(&r, 0);
    for want in [Kind::TwoHolders, Kind::StaleWriteAccepted, Kind::LostUpdate] {
        assert!(k.contains(&want), "{want:?} missing: {}", r.text());
    }
    narration_is_events_and_findings(&r);

    // WAIT really waits for a replica: the one that acknowledged holds the token, the
    // lagging one does not (the host once sent WAIT on a connection that had written
    // nothing, and real Redis then counted every replica at once).
    let r = play("wait").await;
    let ev = events(&r, 0);
    assert!(
        matches!(
            acquired_by(ev, 'A')[..],
            [What::Acquired { acked: Some(1), .. }]
        ),
        "{}",
        r.text()
    );
    assert!(acquired_by(ev, 'B').is_empty(), "{}", r.text());
    let ev = events(&r, 1);
    assert!(
        matches!(
            acquired_by(ev, 'A')[..],
            [What::Acquired { acked: Some(1), .. }]
        ),
        "{}",
        r.text()
    );
    assert!(ev.iter().any(|e| matches!(
        e.what,
        What::LockSeen {
            node: 1,
            holder: Holder::Client('A'),
            ..
        }
    )));
    assert!(kinds(&r, 1).contains(&Kind::TwoHolders), "{}", r.text());

    let r = play("fencing-token").await;
    assert!(
        kinds(&r, 0).contains(&Kind::StaleWriteRefused),
        "{}",
        r.text()
    );
    let f = fences(events(&r, 1));
    assert_eq!(f[1].1, f[2].1, "{}", r.text());
    assert!(kinds(&r, 1).contains(&Kind::LostUpdate), "{}", r.text());

    let r = play("lease-check").await;
    assert_eq!(
        writes(events(&r, 0)),
        vec![('B', true), ('A', false)],
        "{}",
        r.text()
    );
    assert!(kinds(&r, 0).contains(&Kind::Consistent));

    let r = play("eviction").await;
    assert!(kinds(&r, 0).contains(&Kind::TwoHolders), "{}", r.text());
    assert!(!kinds(&r, 1).contains(&Kind::TwoHolders), "{}", r.text());

    // The watchdog in real time: A's renewals stop with its process while the real
    // servers' clock runs on.
    let r = play("pause").await;
    watchdog_stops_the_stopped_holder(&r);
    narration_is_events_and_findings(&r);

    let r = play("min-replicas").await;
    min_replicas_facts(&r);
    narration_is_events_and_findings(&r);

    // The servers stand alone again, with their settings back.
    for s in &servers {
        let url = s.url();
        let c = redis::Client::open(url.as_str()).unwrap();
        let mut conn = c.get_connection().unwrap();
        let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut conn).unwrap();
        assert_eq!(role[0], redis::Value::BulkString(b"master".to_vec()));
        let mm: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory")
            .query(&mut conn)
            .unwrap();
        assert_eq!(mm[1], "0");
    }
    // Lessons that restart a node refuse to touch the user's servers.
    let e = run("redlock", 1, &env).await.unwrap_err();
    assert!(e.contains("restarts a node"), "{e}");
}
