//! What `tdpbf16ps` computes, by experiment (test-only; run by hand with
//! `cargo test -p forge --lib bf16_probe -- --ignored --nocapture`).
//!
//! Findings on the Xeon of family 6 model 207 (2026-12-05), the reason the
//! bf16 products on AMX have their own bits (`crate::cpu::bgemm`: the
//! `avx512` and narrower classes keep `vdpbf16ps` and its portable
//! emulation):
//! - One pair per element (the other pairs of the tile zero): the result
//!   is `ftz(daz(s) + ftz(ftz(a0 b0) + ftz(a1 b1)))`: each product exact
//!   and flushed when subnormal, the pair's sum rounded to f32 (nearest
//!   even) and flushed, the accumulator's subnormal input read as `+0`, one
//!   more rounding for the addition: 0 mismatches in 204,800 elements of
//!   random, wide-exponent, subnormal and cancelling inputs. `vdpbf16ps`
//!   instead adds the odd product, then the even one, with a rounding
//!   after each: the two differ in about 3% of random elements.
//! - Two or more pairs per element: no model tried matches (`probe`:
//!   sequential pair sums in either order, a tree of pair sums, the pair
//!   sums added in f64, the exact sum rounded once: 9-19% of the elements
//!   differ at two pairs; `probe_models`: the terms aligned to the
//!   largest one's exponent and cut to 24..60 bits below it, summed and
//!   rounded once to nearest, toward zero or to odd, with the accumulator
//!   inside the adder or added after, with the products or the rounded
//!   pair sums as the terms: the best, the products in a 36-bit adder
//!   then added to the accumulator, still differs in 2.7% of the elements
//!   at two pairs, 8% at four, 20% at sixteen). The pairs of one
//!   instruction meet in an internal adder whose width and rounding the
//!   experiments have not pinned down, so no portable code gives AMX's
//!   bits.

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

/// How the wide adder of the multi-pair models rounds.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Nearest,
    Zero,
    Odd,
}

/// `v` (an integer count of `2^scale`) rounded to 24 significant bits.
fn round_int(v: i128, scale: i32, mode: Mode) -> f64 {
    let neg = v < 0;
    let mut m = v.unsigned_abs();
    let len = 128 - m.leading_zeros() as i32;
    let mut e = scale;
    if len > 24 {
        let sh = len - 24;
        let dropped = m & ((1u128 << sh) - 1);
        m >>= sh;
        e += sh;
        match mode {
            Mode::Zero => {}
            Mode::Odd => {
                if dropped != 0 {
                    m |= 1;
                }
            }
            Mode::Nearest => {
                let half = 1u128 << (sh - 1);
                if dropped > half || (dropped == half && m & 1 == 1) {
                    m += 1;
                }
            }
        }
    }
    let x = (m as f64) * 2f64.powi(e);
    if neg {
        -x
    } else {
        x
    }
}

/// The terms aligned to the largest one's exponent, each cut (toward
/// zero) to `w` bits below it, summed exactly, rounded once.
fn wide(terms: &[f64], w: i32, mode: Mode) -> f32 {
    if terms.iter().any(|t| !t.is_finite()) {
        return terms.iter().sum::<f64>() as f32;
    }
    let emax = terms
        .iter()
        .filter(|t| **t != 0.0)
        .map(|t| t.abs().log2().floor() as i32)
        .max();
    let Some(emax) = emax else { return 0.0 };
    let scale = emax - w;
    let unit = 2f64.powi(scale);
    let sum: i128 = terms.iter().map(|t| (t / unit).trunc() as i128).sum();
    ftz(round_int(sum, scale, mode) as f32)
}

fn prods(a: &[u16], b: &[u16]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(ftz(from_bf16(x))) * f64::from(ftz(from_bf16(y))))
        .map(|p| if (p as f32).is_subnormal() { 0.0 } else { p })
        .collect()
}

/// Candidate models of one instruction over `a.len() / 2` pairs.
fn models(s: f32, a: &[u16], b: &[u16]) -> Vec<(String, f32)> {
    let s = if s.is_subnormal() { 0.0 } else { s };
    let p = prods(a, b);
    let pairs: Vec<f32> = p.chunks(2).map(|c| ftz((c[0] + c[1]) as f32)).collect();
    let mut out = Vec::new();
    for mode in [Mode::Nearest, Mode::Zero, Mode::Odd] {
        for w in [24, 25, 26, 27, 28, 30, 32, 36, 40, 48, 60] {
            // A: accumulator and every product in one adder
            let mut t = vec![f64::from(s)];
            t.extend(&p);
            out.push((format!("A {mode:?} w{w}"), wide(&t, w, mode)));
            // B: pair sums rounded first, then one adder with s
            let mut t = vec![f64::from(s)];
            t.extend(pairs.iter().map(|&x| f64::from(x)));
            out.push((format!("B {mode:?} w{w}"), wide(&t, w, mode)));
            // C: products in one adder, then + s rounded to nearest
            let ps = wide(&p, w, mode);
            out.push((format!("C {mode:?} w{w}"), ftz(s + ps)));
            // D: pair sums in one adder, then + s
            let t: Vec<f64> = pairs.iter().map(|&x| f64::from(x)).collect();
            out.push((format!("D {mode:?} w{w}"), ftz(s + wide(&t, w, mode))));
        }
    }
    out
}

#[test]
#[ignore = "searches models of tdpbf16ps with several pairs per element; prints the best ones and checks none matches exactly"]
fn probe_models() {
    if !super::bf16() {
        println!("no AMX-BF16 here");
        return;
    }
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let ranges = [120..136, 1..251, 0..70, 126..129];
    for pairs in [2usize, 4, 16] {
        let mut miss: std::collections::BTreeMap<String, usize> = Default::default();
        let mut total = 0;
        for exps in ranges.iter() {
            for _ in 0..30 {
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
                        let got = c[i * 16 + j];
                        if !got.is_finite() {
                            continue;
                        }
                        let ar: Vec<u16> = (0..2 * pairs).map(|k| a[i * 32 + k]).collect();
                        let br: Vec<u16> = (0..2 * pairs)
                            .map(|k| b[(k / 2) * 32 + 2 * j + k % 2])
                            .collect();
                        total += 1;
                        for (name, v) in models(c0[i * 16 + j], &ar, &br) {
                            *miss.entry(name).or_default() +=
                                usize::from(v.to_bits() != got.to_bits());
                        }
                    }
                }
            }
        }
        let mut v: Vec<_> = miss.into_iter().collect();
        v.sort_by_key(|x| x.1);
        println!("{pairs} pairs, {total} finite elements; best models:");
        for (n, m) in v.iter().take(8) {
            println!("  {n}: {m} differ");
        }
        // The module docs' finding: no model gives tdpbf16ps's bits at
        // several pairs (hence AMX's own bits per CPU class). A model that
        // matches every element would let the portable path follow AMX.
        let (best, misses) = &v[0];
        assert!(
            *misses > 0,
            "{best} matches tdpbf16ps on all {total} elements at {pairs} pairs: update the module docs and bgemm"
        );
    }
}
