//! Why a Redis failover loses locks, and what `WAIT` and fencing tokens do about it — told by
//! running it. Two latchkey servers in this process, a master and its asynchronous replica; the
//! failover controls of the embedding API stand in for the network and the crash.
//!
//! ```sh
//! cargo run -p latchkey-tests --example failover_demo
//! ```

use std::time::{Duration, Instant};

use latchkey_client::locks::{FencedLock, ReplicatedAcquire, ReplicatedLock, SimpleLock};
use latchkey_client::native::LocalTransport;
use latchkey_server::{Server, ServerHandle};

type Error = Box<dyn std::error::Error>;

const TTL: Duration = Duration::from_secs(30);

/// A master and a replica following it.
async fn pair() -> Result<(ServerHandle, ServerHandle), Error> {
    let master = Server::builder().start().await?;
    let replica = Server::builder().start().await?;
    replica.replicate_from(master.addr());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !replica.replication_link_up() {
        if Instant::now() > deadline {
            return Err("the replica never linked to its master".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok((master, replica))
}

/// Act 1: `SET NX PX` alone. The write reaches the master, not yet the replica (asynchronous
/// replication: the master answers before replicas have the write); the master dies; the
/// replica is promoted without it; a second client takes the same lock.
async fn act_one() -> Result<(), Error> {
    println!("== Act 1: a plain lock across a failover");
    let (master, replica) = pair().await?;
    master.pause_replication(true);
    let a = SimpleLock::new(LocalTransport::new(&master), "orders");
    let lease = a.try_acquire(TTL).await?.ok_or("the lock was free")?;
    println!(
        "client A holds 'orders' on the master (token {}…)",
        &lease.token[..8]
    );
    println!("the master crashes before the write reaches its replica");
    master.crash().await;
    replica.promote();
    println!("the replica is promoted; it never saw A's lock");
    let b = SimpleLock::new(LocalTransport::new(&replica), "orders");
    match b.try_acquire(TTL).await? {
        Some(l) => println!(
            "client B takes 'orders' too (token {}…): TWO HOLDERS, both inside the critical section",
            &l.token[..8]
        ),
        None => println!("client B is refused (the write had replicated after all)"),
    }
    Ok(())
}

/// Act 2: the acquisition is confirmed with `WAIT 1`: a lock that did not reach the replica is
/// given back at once, so a client never believes in a lock a failover can drop.
async fn act_two() -> Result<(), Error> {
    println!("\n== Act 2: a lock confirmed by WAIT");
    let (master, replica) = pair().await?;
    let wait = Duration::from_millis(200);
    let a = ReplicatedLock::new(LocalTransport::new(&master), "orders", 1, wait);
    master.pause_replication(true);
    match a.try_acquire(TTL).await? {
        ReplicatedAcquire::NotReplicated { acked } => println!(
            "with the replica cut off, A's lock was acknowledged by {acked} replicas in {wait:?}: A gives it up"
        ),
        other => println!("unexpected: {other:?}"),
    }
    master.pause_replication(false);
    let lease = match a.try_acquire(TTL).await? {
        ReplicatedAcquire::Confirmed(l) => l,
        other => return Err(format!("expected a confirmed lock, got {other:?}").into()),
    };
    println!(
        "with the replica back, A's lock is confirmed by WAIT (token {}…)",
        &lease.token[..8]
    );
    master.crash().await;
    replica.promote();
    println!("the master crashes; the replica is promoted");
    let b = SimpleLock::new(LocalTransport::new(&replica), "orders");
    match b.try_acquire(TTL).await? {
        None => println!("client B is refused: the confirmed lock survived the failover"),
        Some(_) => println!("client B got in: this should not happen"),
    }
    Ok(())
}

/// Act 3: fencing tokens, and their limit. The token counter lives on the same failing master:
/// an `INCR` that had not replicated is handed out again after the failover.
async fn act_three() -> Result<(), Error> {
    println!("\n== Act 3: fencing tokens across a failover");
    let (master, replica) = pair().await?;
    let ttl = Duration::from_millis(500);
    let lock = FencedLock::new(LocalTransport::new(&master), "ledger");
    let first = lock.try_acquire(ttl).await?.ok_or("free")?;
    lock.release(&first).await?;
    // Let the first token reach the replica, then cut the stream.
    let mut m = master.client();
    m.cmd(["WAIT", "1", "1000"]).await;
    master.pause_replication(true);
    let second = lock.try_acquire(ttl).await?.ok_or("free")?;
    println!(
        "tokens on the master: {} then {} (the second never replicates)",
        first.fence, second.fence
    );
    master.crash().await;
    replica.promote();
    let after = FencedLock::new(LocalTransport::new(&replica), "ledger");
    let third = after.try_acquire(ttl).await?.ok_or("free")?;
    println!(
        "after the failover the next token is {}: {}",
        third.fence,
        if third.fence <= second.fence {
            "the counter went back and handed out a token twice, so storage that only compares tokens cannot tell the stale holder from the new one"
        } else {
            "still increasing"
        }
    );
    println!("(a storage-side check of the lease itself, compare-and-set on the lock key, does not have this hole)");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    act_one().await?;
    act_two().await?;
    act_three().await?;
    Ok(())
}
