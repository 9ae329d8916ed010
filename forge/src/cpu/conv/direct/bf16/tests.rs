use super::super::tests::{geoms, rand};
use super::*;
use crate::cpu::bgemm::round_bf16;
use crate::tensor::Rng;

/// The convolution of the bf16-rounded `x` and `w` in f64 and, per
/// output, the sum of the products' magnitudes.
fn reference(g: &ConvGeom, x: &[f32], w: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let l = g.l();
    let (mut y, mut mag) = (vec![0.0; g.n * g.o * l], vec![0.0; g.n * g.o * l]);
    for n in 0..g.n {
        for o in 0..g.o {
            for pos in 0..l {
                let (oy, ox) = (pos / g.ow, pos % g.ow);
                let (mut s, mut m) = (0.0, 0.0);
                for c in 0..g.c {
                    for ky in 0..g.kh {
                        for kx in 0..g.kw {
                            let iy = (oy * g.stride[0] + ky * g.dilation[0])
                                .checked_sub(g.padding[0])
                                .filter(|&v| v < g.h);
                            let ix = (ox * g.stride[1] + kx * g.dilation[1])
                                .checked_sub(g.padding[1])
                                .filter(|&v| v < g.w);
                            if let (Some(iy), Some(ix)) = (iy, ix) {
                                let xv = round_bf16(x[((n * g.c + c) * g.h + iy) * g.w + ix]);
                                let wv = round_bf16(w[((o * g.c + c) * g.kh + ky) * g.kw + kx]);
                                let p = f64::from(xv) * f64::from(wv);
                                s += p;
                                m += p.abs();
                            }
                        }
                    }
                }
                y[(n * g.o + o) * l + pos] = s;
                mag[(n * g.o + o) * l + pos] = m;
            }
        }
    }
    (y, mag)
}

/// Every kernel gives the same bits (the `vdpbf16ps` kernel and the
/// portable loops that reproduce it), within the rounding bound of a
/// recursive f32 sum (`n u sum |w x|`, `n` the additions, `u = 2^-24`)
/// of the exact sum of the bf16 products; odd channel counts included.
#[test]
fn kernels_agree_and_match_the_exact_bf16_sum() {
    let mut rng = Rng::new(21);
    for g in geoms() {
        let x = rand(g.n * g.c * g.h * g.w, &mut rng);
        let w = rand(g.o * g.c * g.kh * g.kw, &mut rng);
        let p = PackedConvBf16::from_f32(&PackedConv::new(g.o, g.c, g.kh, g.kw, &w));
        let (want, mag) = reference(&g, &x, &w);
        let terms = (2 * g.c.div_ceil(2) * g.kh * g.kw) as f64;
        let mut first: Option<Vec<u32>> = None;
        for k in Bf16Kernel::available() {
            let y = forward_bf16_by(k, &g, &x, &p, None, None, false);
            for (i, (&v, (&r, &m))) in y.iter().zip(want.iter().zip(&mag)).enumerate() {
                let bound = terms * f64::from(f32::EPSILON) / 2.0 * m + 1e-30;
                assert!(
                    (f64::from(v) - r).abs() <= bound,
                    "{g:?} {k:?} [{i}]: {v} vs {r}"
                );
            }
            let bits: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
            match &first {
                None => first = Some(bits),
                Some(f) => assert!(*f == bits, "{g:?}: {k:?} differs from the portable loops"),
            }
        }
    }
}

/// The sum order of the module docs: channel pairs in order, the odd
/// channel's product of a pair before the even one's, each addition
/// rounded. After the first pair the sum is 2^24 (spacing 2); the second
/// pair adds 3 (odd channel) and -1 (even): 2^24 + 3 ties to 2^24 + 4, and
/// minus 1 ties to 2^24 + 4 again, where the even product first would give
/// 2^24 - 1, then 2^24 + 2.
#[test]
fn the_odd_channel_of_a_pair_is_added_first() {
    let g = ConvGeom::new([1, 4, 1, 1], [1, 4, 1, 1], [1, 1], [0, 0], [1, 1], 1).unwrap();
    let p = PackedConvBf16::from_f32(&PackedConv::new(1, 4, 1, 1, &[1.0; 4]));
    let x = [16_777_216.0f32, 0.0, -1.0, 3.0];
    for k in Bf16Kernel::available() {
        let y = forward_bf16_by(k, &g, &x, &p, None, None, false);
        assert_eq!(y[0], 16_777_220.0, "{k:?}");
    }
}

/// One and two threads give the same bits.
#[test]
fn same_bits_for_one_and_two_threads() {
    let mut rng = Rng::new(22);
    for g in geoms() {
        let x = rand(g.n * g.c * g.h * g.w, &mut rng);
        let w = rand(g.o * g.c * g.kh * g.kw, &mut rng);
        let b = rand(g.o, &mut rng);
        let p = PackedConvBf16::from_f32(&PackedConv::new(g.o, g.c, g.kh, g.kw, &w));
        let run = |t: usize| {
            let _g = crate::cpu::threads::lock_thread_count();
            crate::cpu::set_num_threads(t);
            let y = forward_bf16(&g, &x, &p, Some(&b), None, true).to_vec();
            crate::cpu::set_num_threads(0);
            y
        };
        let (a, b) = (run(1), run(2));
        assert!(
            a.iter()
                .map(|v| v.to_bits())
                .eq(b.iter().map(|v| v.to_bits())),
            "{g:?}"
        );
    }
}

/// The output pass: `relu(sum + bias + residual)` in f32, in that order.
#[test]
fn bias_residual_relu_in_f32() {
    let mut rng = Rng::new(23);
    let g = ConvGeom::new([2, 7, 4, 4], [40, 7, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
    let x = rand(g.n * g.c * g.h * g.w, &mut rng);
    let w = rand(g.o * g.c * 9, &mut rng);
    let b = rand(g.o, &mut rng);
    let r = rand(g.n * g.o * g.l(), &mut rng);
    let p = PackedConvBf16::from_f32(&PackedConv::new(g.o, g.c, 3, 3, &w));
    let plain = forward_bf16(&g, &x, &p, None, None, false);
    let fused = forward_bf16(&g, &x, &p, Some(&b), Some(&r), true);
    let mut zeros = 0;
    for (i, (&f, &v)) in fused.iter().zip(plain.iter()).enumerate() {
        let s = v + b[i / g.l() % g.o] + r[i];
        let want = if s > 0.0 { s } else { 0.0 };
        assert_eq!(f.to_bits(), want.to_bits(), "[{i}]");
        zeros += usize::from(f == 0.0);
    }
    assert!(zeros > 0 && zeros < fused.len());
}
