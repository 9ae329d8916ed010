//! What `tdpbf16ps` computes, by experiment (test-only; run by hand with
//! `cargo test -p forge --lib bf16_probe -- --ignored --nocapture`).
//!
//! Findings on the Xeon of family 6 model 207 (2026-12-05), the reason the
//! bf16 products do not use AMX (`crate::cpu::bgemm` keeps `vdpbf16ps` and
//! its portable emulation):
//! - One pair per element (the other pairs of the tile zero): the result
//!   is `ftz(daz(s) + ftz(ftz(a0 b0) + ftz(a1 b1)))`: each product exact
//!   and flushed when subnormal, the pair's sum rounded to f32 (nearest
//!   even) and flushed, the accumulator's subnormal input read as `+0`, one
//!   more rounding for the addition: 0 mismatches in 204,800 elements of
//!   random, wide-exponent, subnormal and cancelling inputs. `vdpbf16ps`
//!   instead adds the odd product, then the even one, with a rounding
//!   after each: the two differ in about 3% of random elements.
//! - Two or more pairs per element: no model tried matches (sequential
//!   pair sums in either order, a tree of pair sums, the pair sums added
//!   in f64, the exact sum rounded once): 9-19% of the elements differ at
//!   two pairs. The pairs of one instruction meet in an internal adder
//!   whose width and rounding the experiment has not pinned down, so no
//!   portable code gives AMX's bits yet, and every path must give the
//!   same bits.

use super::tiles::{Config, Tiles};

fn from_bf16(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// A subnormal to a zero of its sign.
fn ftz(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// The one-pair model (see the module docs).
fn one_pair(s: f32, a: [u16; 2], b: [u16; 2]) -> f32 {
    let p0 = ftz(ftz(from_bf16(a[0])) * ftz(from_bf16(b[0])));
    let p1 = ftz(ftz(from_bf16(a[1])) * ftz(from_bf16(b[1])));
    let s = if s.is_subnormal() { 0.0 } else { s };
    ftz(s + ftz(p0 + p1))
}

/// `vdpbf16ps`'s documented order: odd product first.
fn odd_first(s: f32, a: [u16; 2], b: [u16; 2]) -> f32 {
    let p = |t: usize| ftz(from_bf16(a[t])) * ftz(from_bf16(b[t]));
    ftz(ftz(s + p(1)) + p(0))
}

/// `c` (16 x 16 f32) += `a` (16 rows of 16 bf16 pairs) x `b` (16 rows of
/// 16 columns of pairs) on the tiles.
fn tile(c: &mut [f32; 256], a: &[u16; 512], b: &[u16; 512]) {
    let mut cfg = Config::new();
    cfg.set(0, 16, 64).set(1, 16, 64).set(2, 16, 64);
    // SAFETY: the caller checked `super::bf16()`; the three buffers are
    // 16 rows of 64 bytes at stride 64, the configured shapes, and the
    // shapes agree for tdpbf16ps.
    unsafe {
        let t = Tiles::new(&cfg);
        t.load::<0>(c.as_ptr().cast(), 64);
        t.load::<1>(a.as_ptr().cast(), 64);
        t.load::<2>(b.as_ptr().cast(), 64);
        t.dpbf16ps::<0, 1, 2>();
        t.store::<0>(c.as_mut_ptr().cast(), 64);
    }
}

/// xorshift64.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A bf16 with a random sign and mantissa and an exponent in `exps`.
    fn bf16(&mut self, exps: std::ops::Range<u16>) -> u16 {
        let r = self.next();
        let e = exps.start + (r % u64::from(exps.end - exps.start)) as u16;
        ((r >> 8) as u16 & 0x8000) | (e << 7) | ((r >> 20) as u16 & 0x7f)
    }
}

#[test]
#[ignore = "characterizes this CPU's tdpbf16ps: prints mismatch counts per model and checks the one-pair model exact"]
fn probe() {
    if !super::bf16() {
        println!("no AMX-BF16 here");
        return;
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // random, wide exponent gaps, subnormal products and inputs, cancellation
    let ranges = [120..136, 1..251, 0..70, 126..129];
    for pairs in [1usize, 2, 16] {
        for exps in ranges.iter() {
            let (mut one, mut odd, mut total) = (0, 0, 0);
            for _ in 0..100 {
                let mut a = [0u16; 512];
                let mut b = [0u16; 512];
                let mut c = [0f32; 256];
                for i in 0..16 {
                    for k in 0..2 * pairs {
                        a[i * 32 + k] = rng.bf16(exps.clone());
                        b[(k / 2) * 32 + 2 * i + k % 2] = rng.bf16(exps.clone());
                    }
                }
                for x in c.iter_mut() {
                    *x = from_bf16(rng.bf16(exps.clone()));
                }
                let c0 = c;
                tile(&mut c, &a, &b);
                for i in 0..16 {
                    for j in 0..16 {
                        let (mut m1, mut m2) = (c0[i * 16 + j], c0[i * 16 + j]);
                        for q in 0..pairs {
                            let ap = [a[i * 32 + 2 * q], a[i * 32 + 2 * q + 1]];
                            let bp = [b[q * 32 + 2 * j], b[q * 32 + 2 * j + 1]];
                            m1 = one_pair(m1, ap, bp);
                            m2 = odd_first(m2, ap, bp);
                        }
                        let got = c[i * 16 + j];
                        let same =
                            |m: f32| m.to_bits() == got.to_bits() || (m.is_nan() && got.is_nan());
                        one += usize::from(!same(m1));
                        odd += usize::from(!same(m2));
                        total += 1;
                    }
                }
            }
            println!(
                "{pairs:2} pair(s), exponents {exps:?}: {total} elements, {one} differ from the pair-sum model, {odd} from vdpbf16ps's order"
            );
            // what the module docs state: with one pair per instruction the
            // pair-sum model is exact on every range
            if pairs == 1 {
                assert_eq!(
                    one, 0,
                    "one pair, exponents {exps:?}: the pair-sum model no longer holds"
                );
            }
        }
    }
}
