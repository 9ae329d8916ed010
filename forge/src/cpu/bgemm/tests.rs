use super::*;
use crate::tensor::Rng;

/// The module's summation order on plain rows (`a` is `m x k`, `b` is
/// `n x k`, both already bf16 values), without packing.
fn reference(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0f32;
            for q in 0..k.div_ceil(2) {
                let (p0, p1) = (2 * q, 2 * q + 1);
                if p1 < k {
                    s = ftz(s + a[i * k + p1] * b[j * k + p1]);
                } else {
                    s = ftz(s + 0.0);
                }
                s = ftz(s + a[i * k + p0] * b[j * k + p0]);
            }
            c[i * n + j] = s + bias.map_or(0.0, |bs| bs[j]);
        }
    }
    c
}

fn bf16_values(len: usize, scale: f32, rng: &mut Rng) -> Vec<f32> {
    (0..len)
        .map(|_| round_bf16((rng.uniform() as f32 - 0.5) * 2.0 * scale))
        .collect()
}

fn check(m: usize, n: usize, k: usize, scale: f32, seed: u64) {
    let mut rng = Rng::new(seed);
    let a = bf16_values(m * k, scale, &mut rng);
    let b = bf16_values(n * k, scale, &mut rng);
    let bias = bf16_values(n, 1.0, &mut rng);
    let want = reference(m, n, k, &a, &b, Some(&bias));
    let packed = PackedBf16::new(n, k, &b);
    assert_eq!(packed.unpack(), b, "pack/unpack {m}x{n}x{k}");
    let rows = rows_to_bf16(&a, m, k);
    for isa in Isa::all() {
        let mut c = vec![f32::NAN; m * n];
        packed.gemm_with(isa, m, &rows, Some(&bias), &mut c);
        for (idx, (x, y)) in c.iter().zip(&want).enumerate() {
            assert_eq!(
                x.to_bits(),
                y.to_bits(),
                "{isa:?} {m}x{n}x{k} element {idx}: {x} vs reference {y}"
            );
        }
    }
}

#[test]
fn every_path_equals_the_reference() {
    // odd sizes: partial row blocks, partial panels and tiles, odd k, and
    // k past one block of pairs
    for &(m, n, k) in &[
        (1, 1, 1),
        (3, 5, 7),
        (7, 17, 33),
        (13, 65, 257),
        (49, 70, 300),
        (6, 64, 2),
        (50, 130, 515),
    ] {
        check(m, n, k, 1.0, (m * 1000 + n * 10 + k) as u64);
    }
}

#[test]
fn tiny_and_huge_values_take_the_same_bits() {
    // products near the bottom of the f32 range (flushed sums) and near the
    // top (infinities): the paths still agree with the reference
    check(9, 33, 41, 1e-19, 7);
    check(9, 33, 41, 1e19, 8);
    check(9, 33, 41, 1e-30, 9);
}

#[test]
fn the_sum_is_the_same_for_any_thread_count() {
    let (m, n, k) = (97, 150, 700);
    let mut rng = Rng::new(3);
    let a = bf16_values(m * k, 1.0, &mut rng);
    let b = bf16_values(n * k, 1.0, &mut rng);
    let packed = PackedBf16::new(n, k, &b);
    let rows = rows_to_bf16(&a, m, k);
    let _guard = crate::cpu::threads::lock_thread_count();
    let before = crate::cpu::num_threads();
    let mut outs = Vec::new();
    for t in [1, 2, 3] {
        crate::cpu::set_num_threads(t);
        let mut c = vec![0f32; m * n];
        packed.gemm(m, &rows, None, &mut c);
        outs.push(c);
    }
    crate::cpu::set_num_threads(before);
    assert_eq!(outs[0], outs[1]);
    assert_eq!(outs[0], outs[2]);
}

#[test]
fn conversion_rounds_to_nearest_even_and_flushes_subnormals() {
    assert_eq!(to_bf16(1.0), 0x3f80);
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (down)
    assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
    // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: up to even
    assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
    assert_eq!(to_bf16(-f32::MIN_POSITIVE / 2.0), 0x8000);
    assert_eq!(to_bf16(f32::MAX), 0x7f80);
    assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
    assert_eq!(from_bf16(to_bf16(f32::NEG_INFINITY)), f32::NEG_INFINITY);
    for &x in &[0.1f32, -3.7, 1e-20, 6.5e4] {
        assert_eq!(to_bf16(x), half::bf16::from_f32(x).to_bits(), "{x}");
    }
}

#[test]
fn sums_are_close_to_f64() {
    // the f32 accumulation of exact bf16 products stays within k ulps of
    // the exact sum of the same bf16 values
    let (m, n, k) = (5, 20, 1000);
    let mut rng = Rng::new(11);
    let a = bf16_values(m * k, 1.0, &mut rng);
    let b = bf16_values(n * k, 1.0, &mut rng);
    let packed = PackedBf16::new(n, k, &b);
    let mut c = vec![0f32; m * n];
    packed.gemm(m, &rows_to_bf16(&a, m, k), None, &mut c);
    for i in 0..m {
        for j in 0..n {
            let exact: f64 = (0..k)
                .map(|p| f64::from(a[i * k + p]) * f64::from(b[j * k + p]))
                .sum();
            let abs: f64 = (0..k)
                .map(|p| (f64::from(a[i * k + p]) * f64::from(b[j * k + p])).abs())
                .sum();
            let err = (f64::from(c[i * n + j]) - exact).abs();
            assert!(
                err <= abs * k as f64 * f64::from(f32::EPSILON),
                "{err} {abs}"
            );
        }
    }
}
