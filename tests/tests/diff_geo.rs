//! The geo commands against a real redis-server, byte for byte, in RESP2 and RESP3: positions
//! (the digits of the decoded cell centre), distances, standard geohashes, every search form
//! and option with its order of results (the cells Redis scans, in its order, when nothing
//! sorts them), `STORE`/`STOREDIST`, and every error text. A generated city grid and random
//! searches then compare whole replies, unsorted, sorted and with `COUNT ... ANY`.

use latchkey_tests::Diff;
use rand::{Rng, SeedableRng};

const TABLE: &[&str] = &[
    "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
    "GEOADD Sicily 13.361389 38.115556 Palermo",
    "GEOADD Sicily CH 13.361390 38.115556 Palermo",
    "GEOADD Sicily NX 13.5 38.1 Palermo 12.1 37.9 Marsala",
    "GEOADD Sicily XX 12.2 37.9 Marsala 14 37 Nowhere",
    "GEOADD Sicily NX XX 13 38 x",
    "GEOADD Sicily 13 38",
    "GEOADD Sicily 181 38 bad",
    "GEOADD Sicily 13 86 bad",
    "GEOADD Sicily abc 38 bad",
    "GEOADD Sicily 13 nan bad",
    "GEOADD Sicily -180 -85.05112878 corner 180 85.05112878 other",
    "ZRANGE Sicily 0 -1 WITHSCORES",
    "GEOPOS Sicily Palermo Catania nope Marsala corner other",
    "GEOPOS nokey a b",
    "GEOPOS Sicily",
    "GEODIST Sicily Palermo Catania",
    "GEODIST Sicily Palermo Catania km",
    "GEODIST Sicily Palermo Catania MI",
    "GEODIST Sicily Palermo Catania ft",
    "GEODIST Sicily Palermo Catania furlong",
    "GEODIST Sicily Palermo Catania km extra",
    "GEODIST Sicily Palermo nope",
    "GEODIST nokey a b",
    "GEODIST Sicily Palermo Palermo",
    "GEOHASH Sicily Palermo Catania nope corner other",
    "GEOHASH nokey a",
    "GEORADIUS Sicily 15 37 200 km",
    "GEORADIUS Sicily 15 37 200 km WITHDIST",
    "GEORADIUS Sicily 15 37 200 km WITHCOORD",
    "GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH",
    "GEORADIUS Sicily 15 37 200 km WITHDIST ASC",
    "GEORADIUS Sicily 15 37 200 km WITHDIST DESC",
    "GEORADIUS Sicily 15 37 200 km COUNT 1",
    "GEORADIUS Sicily 15 37 200 km COUNT 1 DESC",
    "GEORADIUS Sicily 15 37 200 km COUNT 1 ANY",
    "GEORADIUS Sicily 15 37 200 km ANY",
    "GEORADIUS Sicily 15 37 200 km COUNT 0",
    "GEORADIUS Sicily 15 37 200 km COUNT -1",
    "GEORADIUS Sicily 15 37 200 km COUNT x",
    "GEORADIUS Sicily 15 37 200 km COUNT",
    "GEORADIUS Sicily 15 37 -1 km",
    "GEORADIUS Sicily 15 37 abc km",
    "GEORADIUS Sicily 15 37 200 miles",
    "GEORADIUS Sicily 15 37 200 km BOGUS",
    "GEORADIUS Sicily 200 37 200 km",
    "GEORADIUS Sicily 15 37 0 km",
    "GEORADIUS Sicily 15 37 5000 km",
    "GEORADIUS Sicily 15 37 20000 km",
    "GEORADIUS nokey 15 37 200 km",
    "GEORADIUS Sicily 15 37 200 km STORE dst",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEORADIUS Sicily 15 37 200 km STOREDIST dst2",
    "ZRANGE dst2 0 -1 WITHSCORES",
    "GEORADIUS Sicily 15 37 200 km STORE dst WITHDIST",
    "GEORADIUS Sicily 0 0 1 km STORE dst",
    "EXISTS dst",
    "SET dst x",
    "GEORADIUS nokey 0 0 1 km STORE dst",
    "EXISTS dst",
    "GEORADIUS_RO Sicily 15 37 200 km STORE dst",
    "GEORADIUS_RO Sicily 15 37 200 km WITHDIST",
    "GEORADIUSBYMEMBER Sicily Palermo 200 km",
    "GEORADIUSBYMEMBER Sicily Palermo 200 km WITHDIST COUNT 2",
    "GEORADIUSBYMEMBER Sicily nope 200 km",
    "GEORADIUSBYMEMBER nokey nope 200 km",
    "GEORADIUSBYMEMBER nokey nope 200 km STORE dst",
    "GEORADIUSBYMEMBER Sicily Palermo 200 km STOREDIST dst3",
    "ZRANGE dst3 0 -1 WITHSCORES",
    "GEORADIUSBYMEMBER_RO Sicily Palermo 200 km ASC",
    "GEORADIUSBYMEMBER_RO Sicily Palermo 200 km STORE x",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC WITHDIST WITHCOORD",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 200 km DESC",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHDIST",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 100 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 100 400 km",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 10 10 m",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYBOX -1 10 m",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYBOX x 10 m",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 10 x m",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 10 10 yd",
    "GEOSEARCH Sicily FROMMEMBER Palermo FROMLONLAT 15 37 BYRADIUS 10 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 FROMMEMBER Palermo BYRADIUS 10 km",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 10 km BYBOX 1 1 km",
    "GEOSEARCH Sicily FROMMEMBER Palermo",
    "GEOSEARCH Sicily BYRADIUS 10 km",
    "GEOSEARCH Sicily FROMMEMBER nope BYRADIUS 10 km",
    "GEOSEARCH nokey FROMMEMBER nope BYRADIUS 10 km",
    "GEOSEARCH nokey FROMMEMBER nope BYRADIUS 10 km STORE x",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km STORE x",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ANY",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km COUNT 2 ANY WITHHASH",
    "GEOSEARCHSTORE out Sicily FROMLONLAT 15 37 BYRADIUS 200 km",
    "ZRANGE out 0 -1 WITHSCORES",
    "GEOSEARCHSTORE out Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST COUNT 1",
    "ZRANGE out 0 -1 WITHSCORES",
    "GEOSEARCHSTORE out Sicily FROMLONLAT 15 37 BYRADIUS 200 km WITHDIST",
    "GEOSEARCHSTORE out Sicily FROMLONLAT 15 37 BYRADIUS 200 km STORE x",
    "GEOSEARCHSTORE out nokey FROMLONLAT 15 37 BYRADIUS 200 km",
    "EXISTS out",
    "SET str x",
    "GEOADD str 1 1 a",
    "GEOPOS str a",
    "GEODIST str a b",
    "GEOHASH str a",
    "GEORADIUS str 0 0 1 km",
    "GEOSEARCH str FROMLONLAT 0 0 BYRADIUS 1 km",
    "GEORADIUS Sicily 15 37 200 km STORE str",
    "TYPE str",
    "GEOADD",
    "GEOADD k 1",
    "GEOSEARCH k FROMLONLAT 0 0",
    "GEOSEARCHSTORE k k FROMLONLAT 0 0",
];

fn run(resp3: bool) {
    let mut d = Diff::new();
    if resp3 {
        d.both(&["HELLO", "3"]);
    }
    d.table(TABLE);
}

#[test]
fn geo_resp2() {
    run(false);
}

#[test]
fn geo_resp3() {
    run(true);
}

/// Near the poles, the antimeridian and the equator, where the cells and the bounding box
/// behave differently, with every search shape.
#[test]
fn geo_edges() {
    let mut d = Diff::new();
    d.table(&[
        "GEOADD e 179.9 0 a -179.9 0 b 0 85 c 0 -85 d 0 0 e 0.0001 0.0001 f -0.0001 -0.0001 g",
        "GEOADD e 179.99 84.9 h -179.99 -84.9 i 90 70 j -90 -70 k",
        "GEORADIUS e 180 0 50 km WITHDIST",
        "GEORADIUS e -180 0 50 km WITHDIST",
        "GEORADIUS e 0 85 300 km WITHDIST",
        "GEORADIUS e 0 -85 300 km WITHDIST",
        "GEORADIUS e 0 0 100 m WITHDIST WITHHASH",
        "GEORADIUS e 0 0 100000 km",
        "GEOSEARCH e FROMLONLAT 0 0 BYBOX 40000 40000 km",
        "GEOSEARCH e FROMLONLAT 90 70 BYRADIUS 3000 km WITHCOORD",
        "GEOSEARCH e FROMLONLAT -90 -70 BYBOX 3000 3000 km WITHCOORD",
        "GEOSEARCH e FROMLONLAT 179.99 84.9 BYRADIUS 1000 km",
        "GEOSEARCH e FROMMEMBER e BYRADIUS 0 m WITHDIST",
        "GEOPOS e a b c d e f g h i j k",
        "GEOHASH e a b c d e f g h i j k",
    ]);
}

/// Random points around a random centre, and random searches over them: whole replies
/// compared, so the scan order of the cells, the distances and the coordinates all count.
#[test]
fn random_searches_match() {
    let mut d = Diff::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for round in 0..6 {
        let key = format!("pts{round}");
        let clong: f64 = rng.random_range(-170.0..170.0);
        let clat: f64 = rng.random_range(-75.0..75.0);
        let spread: f64 = [0.01, 0.5, 5.0][round % 3];
        let mut add = vec!["GEOADD".to_string(), key.clone()];
        for i in 0..300 {
            let long = (clong + rng.random_range(-spread..spread)).clamp(-180.0, 180.0);
            let lat = (clat + rng.random_range(-spread..spread)).clamp(-85.0, 85.0);
            add.extend([format!("{long:.6}"), format!("{lat:.6}"), format!("m{i}")]);
        }
        d.check(&add);
        for _ in 0..20 {
            let radius_km = spread * 111.0 * rng.random_range(0.05..1.5);
            let (lo, la) = (
                format!("{:.6}", clong + rng.random_range(-spread..spread) / 2.0),
                format!("{:.6}", clat + rng.random_range(-spread..spread) / 2.0),
            );
            let r = format!("{radius_km:.3}");
            let w = format!("{:.3}", radius_km * rng.random_range(0.5..2.0));
            d.check(&["GEORADIUS", &key, &lo, &la, &r, "km"]);
            d.check(&["GEORADIUS", &key, &lo, &la, &r, "km", "WITHDIST", "ASC"]);
            d.check(&[
                "GEOSEARCH",
                &key,
                "FROMLONLAT",
                &lo,
                &la,
                "BYBOX",
                &w,
                &r,
                "km",
            ]);
            d.check(&[
                "GEOSEARCH",
                &key,
                "FROMLONLAT",
                &lo,
                &la,
                "BYRADIUS",
                &r,
                "km",
                "COUNT",
                "5",
                "ANY",
            ]);
            d.check(&[
                "GEOSEARCH",
                &key,
                "FROMMEMBER",
                "m0",
                "BYRADIUS",
                &r,
                "km",
                "COUNT",
                "7",
                "WITHCOORD",
            ]);
        }
    }
}
