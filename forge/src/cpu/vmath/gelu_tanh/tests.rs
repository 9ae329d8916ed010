use super::*;
use crate::cpu::vmath::f32_kernels::sigmoid_f32;

/// The kernels these replaced (`x * sigmoid_f32(..)`, no fused steps),
/// the measure of the new ones' accuracy and special values.
fn old_gelu_tanh(x: f32) -> f32 {
    const C: f32 = 0.797_884_6;
    const K: f32 = 0.044_715;
    x * sigmoid_f32(2.0 * C * (x + K * x * x * x))
}

fn old_gelu_tanh_grad(x: f32, g: f32) -> f32 {
    const C: f32 = 0.797_884_6;
    const K: f32 = 0.044_715;
    let x2 = x * x;
    let s = sigmoid_f32(2.0 * C * (x + K * x2 * x));
    let du = 2.0 * C * (1.0 + 3.0 * K * x2);
    g * (s + x * s * (1.0 - s) * du)
}

/// `(gelu_tanh(x), gelu_tanh'(x))` in f64 as `x sigmoid(z)` and `s + x s
/// (1 - s) z'` with `s (1 - s) = e / (1 + e)^2`, `e = e^-|z|`: no
/// cancellation on the negative side (`x/2 (1 + tanh)` loses every digit
/// there once `tanh` rounds to -1, past `x = -5.4` in f64).
fn reference(x: f64) -> (f64, f64) {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    let k = 0.044715;
    let z = 2.0 * c * (x + k * x * x * x);
    let e = (-z.abs()).exp();
    let s = if z >= 0.0 {
        1.0 / (1.0 + e)
    } else {
        e / (1.0 + e)
    };
    let dz = 2.0 * c * (1.0 + 3.0 * k * x * x);
    (x * s, s + x * dz * e / ((1.0 + e) * (1.0 + e)))
}

/// Error of `got` in units of the spacing of f32 values at `want` (the
/// smallest subnormal below the normal range).
fn ulps(got: f32, want: f64) -> f64 {
    let e = ((want as f32).abs().to_bits() >> 23).max(1) as i32;
    (got as f64 - want).abs() / 2f64.powi(e - 150)
}

/// Every 211th bit pattern of the floats of magnitude below 20, both
/// signs (past it both functions are `x` or 0 and 1 or 0 in f32).
fn sweep() -> impl Iterator<Item = f32> {
    (0..20.0f32.to_bits())
        .step_by(211)
        .flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)])
}

/// Worst errors over the sweep of a forward and a derivative kernel, for
/// each: relative to `max(|f|, 1)` (the measure `composites_match_f64`
/// bounds for every composite kernel), then in ulp for `x >= 0`, for
/// `-1 <= x < 0`, for `-3 <= x < -1` and for `x < -3`. Far on the negative
/// side the rounding of `z` (up to about 1 ulp of it, relative) is a
/// relative error of the result of about `|z|` times that: 87 at
/// `x = -9.5`, where GELU is about `-1e-37`, in every f32 evaluation of
/// this formula. The derivative has a root at `x = -0.75`, where its
/// error in ulp is unbounded (cancellation): only the relative measure
/// is stated for `-1 <= x < 0`.
fn worst(f: fn(f32) -> f32, d: fn(f32, f32) -> f32) -> [[f64; 5]; 2] {
    let mut w = [[0.0f64; 5]; 2];
    for x in sweep() {
        let (y, dy) = reference(x as f64);
        let side = match x {
            x if x >= 0.0 => 1,
            x if x >= -1.0 => 2,
            x if x >= -3.0 => 3,
            _ => 4,
        };
        for (k, (got, want)) in [(f(x), y), (d(x, 1.0), dy)].into_iter().enumerate() {
            let rel = (got as f64 - want).abs() / want.abs().max(1.0);
            w[k][0] = w[k][0].max(rel);
            w[k][side] = w[k][side].max(ulps(got, want));
        }
    }
    w
}

/// The kernels' error bounds over every 211th float of magnitude below 20
/// against the f64 reference, as [`worst`] measures them (the replaced
/// kernels' worst in brackets, printed alongside):
///
/// | | relative | ulp `x >= 0` | `-1 <= x < 0` | `-3 <= x < -1` | `x < -3` |
/// |---|---|---|---|---|---|
/// | `gelu_tanh` | 1.4e-7 (1.55e-7) | 2 (2.16) | 3 (2.90) | 12 (14.6) | 180 (208) |
/// | `gelu_tanh'` | 2e-7 (1.97e-6) | 3 (16.5) | - | 13 (15.1) | 230 (253) |
#[test]
fn accuracy() {
    let new = worst(gelu_tanh_f32, gelu_tanh_grad_f32);
    let old = worst(old_gelu_tanh, old_gelu_tanh_grad);
    println!("gelu_tanh [rel, ulp by side of x]: new {new:?}, replaced {old:?}");
    let bounds = [
        [1.4e-7, 2.0, 3.0, 12.0, 180.0],
        [2e-7, 3.0, f64::INFINITY, 13.0, 230.0],
    ];
    for (k, name) in ["gelu_tanh", "gelu_tanh'"].into_iter().enumerate() {
        let within = new[k].iter().zip(&bounds[k]).all(|(w, b)| w <= b);
        assert!(
            within,
            "{name}: worst {:?} against bounds {:?} (replaced: {:?})",
            new[k], bounds[k], old[k]
        );
    }
}

/// Zeros, infinities, NaN and huge inputs give what the replaced kernels
/// gave (zeros compare equal whatever their sign).
#[test]
fn special_values_as_before() {
    let xs = [
        0.0f32,
        -0.0,
        1e-45,
        -1e-45,
        1e-30,
        -1e-30,
        20.0,
        -20.0,
        104.0,
        -104.0,
        1e13,
        -1e13,
        3e13,
        1e19,
        -1e19,
        2e19,
        1e30,
        -1e30,
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
    ];
    let same = |a: f32, b: f32| a == b || (a.is_nan() && b.is_nan());
    for x in xs {
        let (got, want) = (gelu_tanh_f32(x), old_gelu_tanh(x));
        assert!(same(got, want), "gelu_tanh({x:e}) = {got:e}, was {want:e}");
        for g in [1.0f32, -2.5] {
            let (got, want) = (gelu_tanh_grad_f32(x, g), old_gelu_tanh_grad(x, g));
            assert!(
                same(got, want),
                "gelu_tanh'({x:e}) * {g} = {got:e}, was {want:e}"
            );
        }
    }
    assert_eq!(gelu_tanh_f32(f32::INFINITY), f32::INFINITY);
    assert!(gelu_tanh_f32(f32::NEG_INFINITY).is_nan());
    assert_eq!(gelu_tanh_f32(-1e30), 0.0);
    assert_eq!(gelu_tanh_f32(-0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(gelu_tanh_grad_f32(0.0, 1.0), 0.5);
}

/// Every loop (in place, into another slice, forward and derivative) in
/// every CPU class this CPU has gives, lane for lane, the bits of the
/// scalar kernel called on each element alone in the baseline build
/// (`fmaf` for each fused step), for slices of every length around the
/// lane widths and every start, over inputs of every sign and binade.
#[test]
fn paths_give_the_same_bits() {
    use crate::cpu::class::{detected, pin_thread, Class};
    let bits = |v: &[f32]| {
        v.iter()
            .map(|f| if f.is_nan() { u32::MAX } else { f.to_bits() })
            .collect::<Vec<u32>>()
    };
    let mut x: Vec<f32> = (0..=u32::MAX as u64)
        .step_by(65_521)
        .map(|b| f32::from_bits(b as u32))
        .collect();
    x.extend((0..400).map(|i| i as f32 * 0.0371 - 7.5));
    let g: Vec<f32> = x.iter().rev().map(|v| v * 0.5).collect();
    let want_y: Vec<f32> = x.iter().map(|&v| gelu_tanh_f32(v)).collect();
    let want_g: Vec<f32> = x
        .iter()
        .zip(&g)
        .map(|(&v, &gv)| gelu_tanh_grad_f32(v, gv))
        .collect();
    let uninit = |n: usize| vec![MaybeUninit::<f32>::new(f32::NAN); n];
    let init = |v: Vec<MaybeUninit<f32>>| {
        v.into_iter().map(|o| {
            // SAFETY: every element was initialised (with NaN) before the
            // loop under test overwrote it.
            unsafe { o.assume_init() }
        })
    };
    for class in [Class::Portable, Class::Avx2, Class::Avx512] {
        if class > detected() {
            continue;
        }
        let prev = pin_thread(Some(class));
        let mut spans = vec![(0, x.len())];
        for start in 0..17 {
            for len in [1usize, 7, 8, 9, 15, 16, 17, 33, 100] {
                spans.push((start * 5 + 2, len));
            }
        }
        for (lo, n) in spans {
            let r = lo..lo + n;
            let mut y = x[r.clone()].to_vec();
            in_place(&mut y);
            let mut o = uninit(n);
            into(&x[r.clone()], &mut o);
            let y2: Vec<f32> = init(o).collect();
            let mut d = g[r.clone()].to_vec();
            grad_in_place(&x[r.clone()], &mut d);
            let mut o = uninit(n);
            grad_into(&x[r.clone()], &g[r.clone()], &mut o);
            let d2: Vec<f32> = init(o).collect();
            let (wy, wg) = (bits(&want_y[r.clone()]), bits(&want_g[r]));
            assert!(bits(&y) == wy, "{class:?}: in place [{lo}, +{n})");
            assert!(bits(&y2) == wy, "{class:?}: into [{lo}, +{n})");
            assert!(bits(&d) == wg, "{class:?}: grad in place [{lo}, +{n})");
            assert!(bits(&d2) == wg, "{class:?}: grad into [{lo}, +{n})");
        }
        pin_thread(prev);
    }
}

/// The example that documented `gelu_tanh_f32` while it was public (moved
/// here from `f32_kernels.rs` with the kernel).
#[test]
fn gelu_tanh_f32_example() {
    assert_eq!(crate::cpu::vmath::gelu_tanh_f32(0.0), 0.0);
    assert_eq!(crate::cpu::vmath::gelu_tanh_f32(20.0), 20.0);
}
