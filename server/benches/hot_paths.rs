//! Micro-benchmarks of the server's hot paths, each on its own so that a change to one shows
//! up without the noise of a network or a load generator:
//!
//! - `resp/parse_pipeline`: taking 1,000 pipelined `SET` requests off a connection's buffer;
//! - `resp/encode_*`: writing a bulk reply and a 100-element array reply (RESP2);
//! - `dispatch/*`: a command through an in-process client, from arguments to reply: lookup,
//!   checks, the execution gate, the keyspace (`GET` of a present key, `SET`, `INCR`);
//! - `lock/acquire_release`: a lock's two commands, `SET key token NX PX 30000` and the
//!   compare-and-delete script by `EVALSHA`.
//!
//! `cargo bench -p latchkey-server --features internals --bench hot_paths`. These time latchkey
//! against itself (before and after a change); `scripts/bench` measures it against
//! redis-server.

use bytes::BytesMut;
use criterion::{Criterion, Throughput};
use latchkey_server::{Frame, LocalClient, Protocol, Server};

/// A current-thread runtime and an in-process server on it, with one client.
fn in_process() -> (tokio::runtime::Runtime, LocalClient) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = rt.block_on(async {
        let server = Server::builder()
            .no_listener()
            .start()
            .await
            .expect("start");
        let client = server.client();
        // The server lives as long as the runtime; its handle is not needed after this.
        std::mem::forget(server);
        client
    });
    (rt, client)
}

fn resp(c: &mut Criterion) {
    let mut group = c.benchmark_group("resp");
    let mut pipeline = BytesMut::new();
    for i in 0..1000 {
        let key = format!("key:{i}");
        let frame = Frame::Array(vec![
            Frame::bulk("SET"),
            Frame::Bulk(bytes::Bytes::from(key)),
            Frame::bulk("0123456789abcdef"),
        ]);
        frame.encode(Protocol::Resp2, &mut pipeline);
    }
    group.throughput(Throughput::Elements(1000));
    group.bench_function("parse_pipeline", |b| {
        b.iter(|| {
            let mut buf = pipeline.clone();
            assert_eq!(
                latchkey_server::internals::bench::parse_requests(&mut buf),
                1000
            );
        })
    });
    group.throughput(Throughput::Elements(1));
    let bulk = Frame::bulk("0123456789abcdef");
    group.bench_function("encode_bulk", |b| {
        let mut out = BytesMut::with_capacity(64);
        b.iter(|| {
            out.clear();
            bulk.encode(Protocol::Resp2, &mut out);
        })
    });
    let array = Frame::Array((0..100).map(|i| Frame::Integer(i * 1000)).collect());
    group.bench_function("encode_array_100", |b| {
        let mut out = BytesMut::with_capacity(2048);
        b.iter(|| {
            out.clear();
            array.encode(Protocol::Resp2, &mut out);
        })
    });
    group.finish();
}

fn dispatch(c: &mut Criterion) {
    let (rt, mut client) = in_process();
    rt.block_on(client.cmd(["SET", "present", "0123456789abcdef"]));
    rt.block_on(client.cmd(["SET", "counter", "0"]));
    let mut group = c.benchmark_group("dispatch");
    group.throughput(Throughput::Elements(1));
    group.bench_function("get", |b| {
        b.iter(|| rt.block_on(client.cmd(["GET", "present"])))
    });
    group.bench_function("set", |b| {
        b.iter(|| rt.block_on(client.cmd(["SET", "written", "0123456789abcdef"])))
    });
    group.bench_function("incr", |b| {
        b.iter(|| rt.block_on(client.cmd(["INCR", "counter"])))
    });
    group.finish();
}

fn lock(c: &mut Criterion) {
    let (rt, mut client) = in_process();
    let release = "if redis.call('GET', KEYS[1]) == ARGV[1] then \
                   return redis.call('DEL', KEYS[1]) else return 0 end";
    let Frame::Bulk(sha) = rt.block_on(client.cmd(["SCRIPT", "LOAD", release])) else {
        panic!("SCRIPT LOAD")
    };
    let sha = String::from_utf8(sha.to_vec()).expect("hex");
    let mut group = c.benchmark_group("lock");
    group.throughput(Throughput::Elements(1));
    group.bench_function("acquire_release", |b| {
        b.iter(|| {
            rt.block_on(async {
                let taken = client
                    .cmd(["SET", "lock:job", "token-1", "NX", "PX", "30000"])
                    .await;
                assert_eq!(taken, Frame::ok());
                let released = client
                    .cmd(["EVALSHA", sha.as_str(), "1", "lock:job", "token-1"])
                    .await;
                assert_eq!(released, Frame::Integer(1));
            })
        })
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    resp(&mut c);
    dispatch(&mut c);
    lock(&mut c);
    c.final_summary();
}
