//! The geometry behind the geo commands, as Redis 7.0 computes it, so that positions,
//! distances and search results come out with the same digits and in the same order.
//!
//! A position is stored as a sorted-set score: a 52-bit geohash, the longitude and latitude
//! each cut into 2^26 steps and their bits interleaved (latitude in the even bits). The
//! latitude range is Web Mercator's, ±85.05112878°, not ±90°. A score decodes to the centre
//! of its cell, which is why `GEOPOS` gives back a position a little off the one added.
//!
//! A search (`GEOSEARCH`, `GEORADIUS`) picks a cell size from the radius, takes the cell of
//! the centre and its eight neighbours (dropping those outside the search's bounding box), and
//! scans each cell's score range in the sorted set, keeping the members within the shape:
//! [`search_areas`] gives the cells in Redis's order, [`within`] the test.

/// Longitudes run from -180° to 180°.
pub(crate) const LONG_MIN: f64 = -180.0;
/// See [`LONG_MIN`].
pub(crate) const LONG_MAX: f64 = 180.0;
/// Latitudes run from -85.05112878° to 85.05112878° (Web Mercator).
pub(crate) const LAT_MIN: f64 = -85.051_128_78;
/// See [`LAT_MIN`].
pub(crate) const LAT_MAX: f64 = 85.051_128_78;
/// Bits per coordinate in a stored score.
pub(crate) const STEP_MAX: u8 = 26;

/// The Earth's radius Redis measures distances with, in metres.
const EARTH_RADIUS_M: f64 = 6_372_797.560_856;
/// Half the Earth's circumference in Web Mercator metres: where cell sizes start.
const MERCATOR_MAX: f64 = 20_037_726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

fn deg_rad(d: f64) -> f64 {
    d * D_R
}

fn rad_deg(r: f64) -> f64 {
    r / D_R
}

/// A geohash of `step` bits per coordinate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hash {
    /// The interleaved bits (latitude in the even ones).
    pub(crate) bits: u64,
    /// Bits per coordinate.
    pub(crate) step: u8,
}

impl Hash {
    /// The "no cell" value a search uses for a neighbour it dropped.
    const NONE: Hash = Hash { bits: 0, step: 0 };

    fn is_none(self) -> bool {
        self == Hash::NONE
    }

    /// The sorted-set scores of this cell's members: `[min, max)`.
    pub(crate) fn score_range(self) -> (f64, f64) {
        let shift = 52 - 2 * u32::from(self.step);
        (
            (self.bits << shift) as f64,
            ((self.bits + 1) << shift) as f64,
        )
    }
}

/// A cell's corners, in degrees.
#[derive(Debug, Clone, Copy)]
struct Area {
    lat_min: f64,
    lat_max: f64,
    long_min: f64,
    long_max: f64,
}

/// Spreads the 32 bits of `x` to the even bits and those of `y` to the odd ones.
fn interleave(x: u32, y: u32) -> u64 {
    fn spread(v: u32) -> u64 {
        let mut v = u64::from(v);
        v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v << 2)) & 0x3333_3333_3333_3333;
        (v | (v << 1)) & 0x5555_5555_5555_5555
    }
    spread(x) | (spread(y) << 1)
}

/// The inverse of [`interleave`]: `(x, y)`.
fn deinterleave(bits: u64) -> (u32, u32) {
    fn squash(mut v: u64) -> u32 {
        v &= 0x5555_5555_5555_5555;
        v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
        v = (v | (v >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
        ((v | (v >> 16)) & 0x0000_0000_FFFF_FFFF) as u32
    }
    (squash(bits), squash(bits >> 1))
}

/// Whether a longitude and latitude can be stored.
pub(crate) fn valid(long: f64, lat: f64) -> bool {
    (LONG_MIN..=LONG_MAX).contains(&long) && (LAT_MIN..=LAT_MAX).contains(&lat)
}

/// The geohash of a position over the given latitude range (Mercator's for storage, ±90° for
/// `GEOHASH`'s standard strings); `None` outside it.
fn encode_in(long: f64, lat: f64, step: u8, lat_range: (f64, f64)) -> Option<Hash> {
    if !valid(long, lat) || lat < lat_range.0 || lat > lat_range.1 {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (lat - lat_range.0) / (lat_range.1 - lat_range.0) * scale;
    let long_offset = (long - LONG_MIN) / (LONG_MAX - LONG_MIN) * scale;
    Some(Hash {
        bits: interleave(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// The geohash of a position at `step` bits per coordinate, for storage and searches.
pub(crate) fn encode(long: f64, lat: f64, step: u8) -> Option<Hash> {
    encode_in(long, lat, step, (LAT_MIN, LAT_MAX))
}

/// The score a position is stored with.
pub(crate) fn score_of(long: f64, lat: f64) -> Option<u64> {
    encode(long, lat, STEP_MAX).map(|h| h.bits)
}

fn decode(h: Hash) -> Area {
    let (ilat, ilong) = deinterleave(h.bits);
    let cells = (1u64 << h.step) as f64;
    let lat_scale = LAT_MAX - LAT_MIN;
    let long_scale = LONG_MAX - LONG_MIN;
    Area {
        lat_min: LAT_MIN + (f64::from(ilat) / cells) * lat_scale,
        lat_max: LAT_MIN + ((f64::from(ilat) + 1.0) / cells) * lat_scale,
        long_min: LONG_MIN + (f64::from(ilong) / cells) * long_scale,
        long_max: LONG_MIN + ((f64::from(ilong) + 1.0) / cells) * long_scale,
    }
}

/// The position a stored score stands for: the centre of its cell, `(long, lat)`.
pub(crate) fn position(score: f64) -> (f64, f64) {
    let a = decode(Hash {
        bits: score as u64,
        step: STEP_MAX,
    });
    let long = ((a.long_min + a.long_max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.lat_min + a.lat_max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (long, lat)
}

/// The standard 11-character geohash of a stored score (`GEOHASH`): the position re-encoded
/// over ±90°, the last character always `0` (52 bits fill ten characters and two bits).
pub(crate) fn standard_hash(score: f64) -> String {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (long, lat) = position(score);
    let bits = encode_in(long, lat, STEP_MAX, (-90.0, 90.0)).map_or(0, |h| h.bits);
    (0..11)
        .map(|i| {
            let idx = if i == 10 {
                0
            } else {
                (bits >> (52 - (i + 1) * 5)) & 0x1f
            };
            ALPHABET[idx as usize] as char
        })
        .collect()
}

/// Great-circle distance in metres (haversine).
pub(crate) fn distance(long1: f64, lat1: f64, long2: f64, lat2: f64) -> f64 {
    let v = ((deg_rad(long2) - deg_rad(long1)) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// What a search covers, in the unit it was given.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// Within `radius` of the centre.
    Radius(f64),
    /// Within a box of `width` × `height` centred on the centre.
    Box(f64, f64),
}

/// A search: centre, shape and unit (metres per unit).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Search {
    /// Centre longitude.
    pub(crate) long: f64,
    /// Centre latitude.
    pub(crate) lat: f64,
    /// The shape, in units.
    pub(crate) shape: Shape,
    /// Metres per unit.
    pub(crate) to_meters: f64,
}

impl Search {
    /// The bounding box `(long_min, lat_min, long_max, lat_max)` of the shape.
    fn bounds(&self) -> (f64, f64, f64, f64) {
        let (h, w) = match self.shape {
            Shape::Radius(r) => (r, r),
            Shape::Box(w, h) => (h / 2.0, w / 2.0),
        };
        let (height, width) = (h * self.to_meters, w * self.to_meters);
        let lat_delta = rad_deg(height / EARTH_RADIUS_M);
        let long_delta_top = rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat + lat_delta).cos());
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_M / deg_rad(self.lat - lat_delta).cos());
        let delta = if self.lat < 0.0 {
            long_delta_bottom
        } else {
            long_delta_top
        };
        (
            self.long - delta,
            self.lat - lat_delta,
            self.long + delta,
            self.lat + lat_delta,
        )
    }

    /// The distance in metres from the centre to a point, if the point is inside the shape.
    pub(crate) fn within(&self, long: f64, lat: f64) -> Option<f64> {
        match self.shape {
            Shape::Radius(r) => {
                let d = distance(self.long, self.lat, long, lat);
                (d <= r * self.to_meters).then_some(d)
            }
            Shape::Box(w, h) => {
                if lat_distance(lat, self.lat) > h * self.to_meters / 2.0 {
                    return None;
                }
                if distance(long, lat, self.long, lat) > w * self.to_meters / 2.0 {
                    return None;
                }
                Some(distance(self.long, self.lat, long, lat))
            }
        }
    }

    /// The cells to scan, in Redis's order (the centre's, then north, south, east, west,
    /// north-east, north-west, south-east, south-west), dropped ones left out and a cell equal
    /// to the one scanned just before skipped.
    pub(crate) fn cells(&self) -> Vec<Hash> {
        let (long_min, lat_min, long_max, lat_max) = self.bounds();
        let radius_m = match self.shape {
            Shape::Radius(r) => r,
            Shape::Box(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
        } * self.to_meters;
        let mut step = estimate_step(radius_m, self.lat);
        let mut hash = encode(self.long, self.lat, step).unwrap_or(Hash::NONE);
        let mut n = neighbours(hash);
        let (north, south, east, west) = (decode(n[0]), decode(n[1]), decode(n[2]), decode(n[3]));
        if step > 1
            && (north.lat_max < lat_max
                || south.lat_min > lat_min
                || east.long_max < long_max
                || west.long_min > long_min)
        {
            step -= 1;
            hash = encode(self.long, self.lat, step).unwrap_or(Hash::NONE);
            n = neighbours(hash);
        }
        let area = decode(hash);
        // [north, south, east, west, north_east, north_west, south_east, south_west]
        if step >= 2 {
            let mut drop = |which: [usize; 3]| {
                for i in which {
                    n[i] = Hash::NONE;
                }
            };
            if area.lat_min < lat_min {
                drop([1, 7, 6]);
            }
            if area.lat_max > lat_max {
                drop([0, 4, 5]);
            }
            if area.long_min < long_min {
                drop([3, 7, 5]);
            }
            if area.long_max > long_max {
                drop([2, 6, 4]);
            }
        }
        let mut out: Vec<Hash> = Vec::with_capacity(9);
        for h in std::iter::once(hash).chain(n) {
            // Redis skips a cell equal to the last one it scanned, but only once it has
            // scanned one other than the centre (its `last_processed` starts at 0).
            if h.is_none() || (out.len() > 1 && out.last() == Some(&h)) {
                continue;
            }
            out.push(h);
        }
        out
    }
}

/// How many bits per coordinate the cells of a search of `radius_m` metres around latitude
/// `lat` get: the finest whose cells (with their neighbours) still cover the radius.
fn estimate_step(radius_m: f64, lat: f64) -> u8 {
    if radius_m == 0.0 {
        return 26;
    }
    let mut range = radius_m;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// The longitude's bits of a hash: the odd ones.
const LONG_BITS: u64 = 0xaaaa_aaaa_aaaa_aaaa;
/// The latitude's bits of a hash: the even ones.
const LAT_BITS: u64 = 0x5555_5555_5555_5555;

/// Moves a cell one step along one coordinate (`d`: +1 or -1), `own` naming that
/// coordinate's bits: the interleaved number is counted up or down through its own bits only,
/// the others filled with ones so that a carry or a borrow skips them.
fn step_along(h: Hash, d: i8, own: u64) -> Hash {
    let mine = h.bits & own;
    let other = h.bits & !own;
    let shift = 64 - 2 * u32::from(h.step);
    let zz = !own >> shift;
    let moved = if d > 0 {
        mine.wrapping_add(zz + 1)
    } else {
        (mine | zz).wrapping_sub(zz + 1)
    } & (own >> shift);
    Hash {
        bits: moved | other,
        step: h.step,
    }
}

/// Moves a cell east (`+1`) or west (`-1`).
fn move_x(h: Hash, d: i8) -> Hash {
    step_along(h, d, LONG_BITS)
}

/// Moves a cell north (`+1`) or south (`-1`).
fn move_y(h: Hash, d: i8) -> Hash {
    step_along(h, d, LAT_BITS)
}

/// The eight neighbours: north, south, east, west, north-east, north-west, south-east,
/// south-west.
fn neighbours(h: Hash) -> [Hash; 8] {
    [
        move_y(h, 1),
        move_y(h, -1),
        move_x(h, 1),
        move_x(h, -1),
        move_y(move_x(h, 1), 1),
        move_y(move_x(h, -1), 1),
        move_y(move_x(h, 1), -1),
        move_y(move_x(h, -1), -1),
    ]
}

/// A distance as the geo commands print it: four decimals, rounded half to even as Redis's
/// `llrint` does.
pub(crate) fn format_distance(d: f64) -> String {
    if d == 0.0 {
        return "0.0000".into();
    }
    let scaled = (d * 10_000.0).round_ties_even();
    if !scaled.is_finite() || scaled.abs() >= 9.2e18 {
        return format!("{d:.4}");
    }
    let v = scaled as i64;
    let (sign, v) = if v < 0 {
        ("-", v.unsigned_abs())
    } else {
        ("", v as u64)
    };
    format!("{sign}{}.{:04}", v / 10_000, v % 10_000)
}

/// A coordinate as `GEOPOS` and `WITHCOORD` print it: Redis's "human" long double, 17
/// decimals with the trailing zeros cut.
pub(crate) fn format_coordinate(v: f64) -> String {
    let mut s = format!("{v:.17}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palermo_encodes_and_decodes_as_in_redis() {
        // GEOADD Sicily 13.361389 38.115556 Palermo stores 3479099956230698 in Redis.
        let score = score_of(13.361389, 38.115556).unwrap();
        assert_eq!(score, 3_479_099_956_230_698);
        let (long, lat) = position(score as f64);
        assert_eq!(format_coordinate(long), "13.36138933897018433");
        assert_eq!(format_coordinate(lat), "38.11555639549629859");
        assert_eq!(standard_hash(score as f64), "sqc8b49rny0");
        let catania = score_of(15.087269, 37.502669).unwrap() as f64;
        let (l2, la2) = position(catania);
        assert_eq!(format_distance(distance(long, lat, l2, la2)), "166274.1516");
    }

    #[test]
    fn interleaving_round_trips() {
        for (x, y) in [
            (0, 0),
            (1, 0),
            (0, 1),
            (0x3ff_ffff, 0x155_5555),
            (u32::MAX, 7),
        ] {
            assert_eq!(deinterleave(interleave(x, y)), (x, y));
        }
    }

    #[test]
    fn distances_print_with_four_decimals() {
        assert_eq!(format_distance(0.0), "0.0000");
        assert_eq!(format_distance(0.00005), "0.0000");
        assert_eq!(format_distance(0.77501), "0.7750");
        assert_eq!(format_distance(1234.56789), "1234.5679");
        assert_eq!(format_distance(-1.5), "-1.5000");
    }
}
