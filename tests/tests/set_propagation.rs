//! What `SPOP` sends down the replication stream, read from the stream itself on latchkey and
//! on a real redis-server: a test connection says `SYNC`, skips the snapshot and parses the
//! commands that follow. `SPOP` picks at random, so a replica must get what it took, in Redis
//! 7.0's form: `SREM key member` for one member, `MULTI`, one `SREM` per member and `EXEC` for
//! a count, `DEL key` when the count takes the whole set.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use latchkey_server::Server;
use latchkey_tests::{RawConn, RedisProcess};

/// A connection that asked for the replication stream.
struct Stream(BufReader<TcpStream>);

impl Stream {
    /// Says `SYNC` and skips the snapshot (the master may send newlines first, to keep the
    /// link alive while it prepares the file).
    fn open(addr: SocketAddr) -> Stream {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(b"SYNC\r\n").unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        loop {
            line.clear();
            r.read_line(&mut line).expect("the snapshot header");
            if line.starts_with('$') {
                break;
            }
            assert_eq!(line.trim(), "", "unexpected line before the snapshot");
        }
        let len: usize = line[1..].trim().parse().expect("snapshot length");
        let mut rdb = vec![0; len];
        r.read_exact(&mut rdb).expect("the snapshot");
        Stream(r)
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.0.read_line(&mut line).expect("a stream line");
        line.trim_end().to_string()
    }

    /// The next command of the stream, skipping the link's own (`PING`, `REPLCONF`, `SELECT`).
    fn next(&mut self) -> Vec<String> {
        loop {
            let head = self.line();
            let n: usize = head
                .strip_prefix('*')
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("not a command in the stream: {head:?}"));
            let mut args = Vec::with_capacity(n);
            for _ in 0..n {
                let len: usize = self.line()[1..].parse().expect("bulk length");
                let mut b = vec![0; len + 2];
                self.0.read_exact(&mut b).unwrap();
                b.truncate(len);
                args.push(String::from_utf8(b).unwrap());
            }
            let name = args[0].to_ascii_uppercase();
            if !matches!(name.as_str(), "PING" | "REPLCONF" | "SELECT") {
                args[0] = name;
                return args;
            }
        }
    }
}

/// Runs the pops on the server at `addr` and returns what the stream carried for them, with
/// the popped members (the stream's SREMs must name exactly those).
fn pops(addr: SocketAddr) -> Vec<Vec<String>> {
    let mut stream = Stream::open(addr);
    let mut c = RawConn::connect(addr).expect("connect");
    c.cmd(&["SADD", "s", "1", "2", "3", "4", "5", "6", "7", "8"]);
    let one = c.cmd(&["SPOP", "s"]);
    let three = c.cmd(&["SPOP", "s", "3"]);
    let rest = c.cmd(&["SPOP", "s", "100"]);
    assert!(
        rest.starts_with(b"*4\r\n"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
    assert_eq!(stream.next()[0], "SADD");
    let mut got = Vec::new();
    for _ in 0..7 {
        got.push(stream.next());
    }
    // The single pop is the SREM of the member the client got.
    let member = String::from_utf8_lossy(&one)
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    assert_eq!(got[0], ["SREM", "s", member.as_str()]);
    // The three the client got are the three SREMs in the transaction.
    let text = String::from_utf8_lossy(&three).into_owned();
    let mut popped: Vec<&str> = text.lines().skip(2).step_by(2).collect();
    let mut removed: Vec<&str> = got[2..5].iter().map(|c| c[2].as_str()).collect();
    popped.sort_unstable();
    removed.sort_unstable();
    assert_eq!(popped, removed);
    // Members replaced by a placeholder: what is compared across servers is the shape.
    got.iter()
        .map(|c| {
            c.iter()
                .enumerate()
                .map(|(i, a)| {
                    if i == 2 {
                        "<member>".to_string()
                    } else {
                        a.clone()
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn spop_reaches_the_stream_as_redis_sends_it() {
    let redis = RedisProcess::spawn(&[]);
    let latchkey = Server::builder().start_blocking().expect("start latchkey");
    let expected = pops(redis.addr());
    let srem = ["SREM", "s", "<member>"];
    assert_eq!(
        expected,
        [
            &srem[..],
            &["MULTI"],
            &srem,
            &srem,
            &srem,
            &["EXEC"],
            &["DEL", "s"],
        ],
        "redis-server's own stream"
    );
    assert_eq!(pops(latchkey.addr()), expected);
}
