//! Tests of the gemm paths: bit-identical partitions and agreement with a naive product.

use super::*;
/// A small deterministic generator (cpu/ does not depend on tensor/).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
}

/// The operands of an `m x k` by `k x n` product over `a` and `b`, each
/// row-major or (`ta`, `tb`) transposed.
fn operands<'a, E>(
    a: &'a [E],
    b: &'a [E],
    (m, k, n): (usize, usize, usize),
    (ta, tb): (bool, bool),
) -> (Mat<'a, E>, Mat<'a, E>) {
    let a = if ta {
        Mat::transposed(a, m)
    } else {
        Mat::row_major(a, k)
    };
    let b = if tb {
        Mat::transposed(b, k)
    } else {
        Mat::row_major(b, n)
    };
    (a, b)
}

/// Uniform values in [-1, 1).
fn random(len: usize, rng: &mut Rng) -> Vec<f64> {
    (0..len)
        .map(|_| {
            rng.0 = rng
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (rng.0 >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

/// `a b`, each sum in increasing `k`.
fn naive(m: usize, k: usize, n: usize, a: Mat<f64>, b: Mat<f64>) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k)
                .map(|p| a.data[i * a.rs + p * a.cs] * b.data[p * b.rs + j * b.cs])
                .sum();
        }
    }
    c
}

/// Every path, both layouts of each operand, beta 0 and 1, against the
/// naive product (|error| <= 1e-12 relative to k).
#[test]
fn every_path_matches_the_naive_product() {
    let mut rng = Rng::new(1);
    let shapes = [
        (1, 1, 1),
        (1, 37, 1),
        (1, 100, 130),
        (130, 100, 1),
        (3, 5, 7),
        (70, 33, 10),
        (9, 17, 16),
        (40, 3, 17),
        (33, 70, 45),
        (0, 3, 4),
        (3, 0, 4),
    ];
    for (m, k, n) in shapes {
        let a_buf = random(m * k, &mut rng);
        let b_buf = random(k * n, &mut rng);
        let c0 = random(m * n, &mut rng);
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let (a, b) = operands(&a_buf, &b_buf, (m, k, n), (ta, tb));
            let want = naive(m, k, n, a, b);
            for beta in [0.0, 1.0] {
                let mut c = c0.clone();
                gemm(m, k, n, a, b, beta, &mut c);
                for i in 0..m * n {
                    let w = want[i] + beta * c0[i];
                    assert!(
                        (c[i] - w).abs() <= 1e-12 * (k as f64 + 1.0),
                        "{m}x{k}x{n} ta={ta} tb={tb} beta={beta}: [{i}] {} vs {w}",
                        c[i]
                    );
                }
            }
        }
    }
}

/// The paths never read `c` when beta is 0 (a NaN there is overwritten).
#[test]
fn beta_zero_overwrites_nan() {
    for (m, k, n) in [(1, 4, 40), (40, 4, 1), (20, 4, 10), (20, 4, 20)] {
        let a = vec![1.0f32; m * k];
        let b = vec![1.0f32; k * n];
        let mut c = vec![f32::NAN; m * n];
        gemm(
            m,
            k,
            n,
            Mat::row_major(&a, k),
            Mat::row_major(&b, n),
            0.0,
            &mut c,
        );
        assert!(c.iter().all(|&v| v == k as f32), "{m}x{k}x{n}");
    }
}

/// Cutting a product into any number of parts (what the thread count
/// changes) gives the same bits, on every path and layout.
#[test]
fn partition_does_not_change_bits() {
    let mut rng = Rng::new(2);
    for (m, k, n) in [
        (300, 700, 200),
        (200, 700, 300),
        (1, 2000, 1000),
        (1000, 2000, 1),
        (500, 300, 10),
    ] {
        let a_buf: Vec<f32> = random(m * k, &mut rng)
            .into_iter()
            .map(|v| v as f32)
            .collect();
        let b_buf: Vec<f32> = random(k * n, &mut rng)
            .into_iter()
            .map(|v| v as f32)
            .collect();
        for (ta, tb) in [(false, false), (true, true), (false, true)] {
            let (a, b) = operands(&a_buf, &b_buf, (m, k, n), (ta, tb));
            let mut one = vec![0.0f32; m * n];
            gemm_threads(m, k, n, a, b, 0.0, &mut one, 1);
            for parts in [2, 3, 5] {
                let mut many = vec![0.0f32; m * n];
                gemm_threads(m, k, n, a, b, 0.0, &mut many, parts);
                assert!(
                    one.iter()
                        .zip(&many)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{m}x{k}x{n} ta={ta} tb={tb}: {parts} parts differ from 1"
                );
            }
        }
    }
}

#[test]
fn batched_matches_one_by_one() {
    let mut rng = Rng::new(3);
    let (count, m, k, n) = (12, 20, 9, 30);
    let a: Vec<f64> = random(count * m * k, &mut rng);
    let b: Vec<f64> = random(k * n, &mut rng);
    let mut c = vec![0.0; count * m * n];
    gemm_batched(
        count,
        m,
        k,
        n,
        |i| Mat::row_major(&a[i * m * k..(i + 1) * m * k], k),
        |_| Mat::row_major(&b, n),
        0.0,
        &mut c,
    );
    for i in 0..count {
        let mut one = vec![0.0; m * n];
        let ai = Mat::row_major(&a[i * m * k..(i + 1) * m * k], k);
        gemm(m, k, n, ai, Mat::row_major(&b, n), 0.0, &mut one);
        assert_eq!(&c[i * m * n..(i + 1) * m * n], &one[..]);
    }
}

/// One thin-kernel family run four ways: compiled for the CPU at hand
/// through the run-time dispatch, and the generic loop compiled for the
/// target's baseline with 4 and with 8 rows per register block. All four
/// must give the same bits.
fn assert_paths_agree<E: Float + std::fmt::Debug>(
    what: &str,
    dispatched: &[E],
    four: &[E],
    eight: &[E],
) {
    let bits = |v: &[E]| {
        v.iter()
            .map(|x| x.to_f64().unwrap().to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        bits(dispatched),
        bits(four),
        "{what}: dispatched != generic R=4"
    );
    assert_eq!(
        bits(eight),
        bits(four),
        "{what}: generic R=8 != generic R=4"
    );
}

/// The gemv and narrow kernels are instantiated for AVX-512, AVX2 + FMA or
/// the baseline at run time (and f32 column dots have AVX-512 and AVX2
/// intrinsic versions); the module promises the path never changes a result, because
/// every path sums the same products in the same order with fused
/// multiply-adds. Pin that promise, for f32 and f64, both beta values.
fn simd_paths_agree<E: Float + std::fmt::Debug>() {
    let mut rng = Rng::new(7);
    let cast = |v: Vec<f64>| {
        v.into_iter()
            .map(|x| E::from(x).unwrap())
            .collect::<Vec<E>>()
    };
    for (k, len) in [
        (1, 1),
        (15, 3),
        (16, 4),
        (17, 5),
        (37, 16),
        (100, 33),
        (784, 10),
    ] {
        let x = cast(random(k, &mut rng));
        let w_rows = cast(random(k * len, &mut rng)); // k x len, rows contiguous
        let w_cols = cast(random(len * k, &mut rng)); // len columns of k
        let c0 = cast(random(len, &mut rng));
        for beta in [E::zero(), E::one()] {
            let run = |f: &dyn Fn(&mut [E])| {
                let mut out = c0.clone();
                f(&mut out);
                out
            };
            let xm = Mat::row_major(&x, k);
            let wr = Mat::row_major(&w_rows, len);
            let wc = Mat::transposed(&w_cols, k);
            assert_paths_agree(
                &format!("gemv_rows k={k} len={len}"),
                &run(&|o| gemv_rows_simd(k, len, xm, wr, beta, o)),
                &run(&|o| gemv_rows::<E, 4>(k, len, xm, wr, beta, o)),
                &run(&|o| gemv_rows::<E, 8>(k, len, xm, wr, beta, o)),
            );
            assert_paths_agree(
                &format!("gemv_dots k={k} len={len}"),
                // `gemv` takes the f32 AVX-512 / AVX2 intrinsics when it can
                &run(&|o| gemv(k, len, xm, wc, beta, o)),
                &run(&|o| gemv_dots::<E, 4>(k, len, xm, wc, beta, o)),
                &run(&|o| gemv_dots::<E, 8>(k, len, xm, wc, beta, o)),
            );
            assert_paths_agree(
                &format!("gemv_dots (dispatched) k={k} len={len}"),
                &run(&|o| gemv_dots_simd(k, len, xm, wc, beta, o)),
                &run(&|o| gemv_dots::<E, 4>(k, len, xm, wc, beta, o)),
                &run(&|o| gemv_dots::<E, 8>(k, len, xm, wc, beta, o)),
            );
        }
    }
    // narrow: rows x k times a k x n panel (n <= 16, zero-padded to 16)
    for (rows, k, n) in [(1, 1, 1), (3, 7, 10), (8, 16, 16), (13, 84, 10), (29, 5, 3)] {
        let a = cast(random(rows * k, &mut rng));
        let b = cast(random(k * n, &mut rng));
        let mut panel = vec![E::zero(); k * LANES];
        for p in 0..k {
            panel[p * LANES..p * LANES + n].copy_from_slice(&b[p * n..p * n + n]);
        }
        let c0 = cast(random(rows * n, &mut rng));
        let am = Mat::row_major(&a, k);
        for beta in [E::zero(), E::one()] {
            let run = |f: &dyn Fn(&mut [E])| {
                let mut out = c0.clone();
                f(&mut out);
                out
            };
            assert_paths_agree(
                &format!("narrow rows={rows} k={k} n={n}"),
                &run(&|o| narrow(rows, k, n, am, &panel, beta, o)),
                &run(&|o| narrow_rows::<E, 4>(rows, k, n, am, &panel, beta, o)),
                &run(&|o| narrow_rows::<E, 8>(rows, k, n, am, &panel, beta, o)),
            );
        }
    }
}

#[test]
fn simd_paths_agree_bit_for_bit_f32() {
    simd_paths_agree::<f32>();
}

#[test]
fn simd_paths_agree_bit_for_bit_f64() {
    simd_paths_agree::<f64>();
}

/// The f32 column-dot kernels with intrinsics (AVX-512F and AVX2 + FMA,
/// each where the CPU has it) equal the portable `gemv_dots` loop (run
/// through its dispatch, so compiled with FMA) bit for bit: `k` under, at
/// and over the 16 lanes with remainders, column counts with a remainder
/// of the 4-column blocks, columns further apart than `k`, beta 0 (a NaN
/// overwritten), 1 and 0.5.
#[cfg(target_arch = "x86_64")]
#[test]
fn dots_kernels_equal_the_portable_loop() {
    let mut kernels: Vec<(&str, DotsF32)> = Vec::new();
    if std::arch::is_x86_feature_detected!("avx512f") {
        kernels.push(("avx512", dots_f32_avx512));
    }
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        kernels.push(("avx2", dots_f32_avx2));
    }
    let mut rng = Rng::new(8);
    let cast = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect::<Vec<f32>>();
    for (k, len) in [
        (1, 1),
        (15, 3),
        (16, 4),
        (17, 5),
        (31, 7),
        (33, 9),
        (100, 33),
        (512, 6),
        (784, 10),
    ] {
        for ldw in [k, k + 5] {
            let x = cast(random(k, &mut rng));
            let w = cast(random(len * ldw, &mut rng));
            let c0 = cast(random(len, &mut rng));
            for beta in [0.0f32, 1.0, 0.5] {
                let start = if beta == 0.0 {
                    vec![f32::NAN; len]
                } else {
                    c0.clone()
                };
                let wm = Mat {
                    data: &w[..],
                    rs: 1,
                    cs: ldw,
                };
                let mut want = start.clone();
                gemv_dots_simd(k, len, Mat::row_major(&x, k), wm, beta, &mut want);
                for &(name, dots) in &kernels {
                    let mut got = start.clone();
                    // SAFETY: the CPU has the kernel's features (checked
                    // above); `x` has `k` elements, column `j` of `w` is
                    // `w[j * ldw..j * ldw + k]`, `got` has `len`.
                    unsafe { dots(k, len, &x, &w, ldw, beta, &mut got) };
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "{name} k={k} len={len} ldw={ldw} beta={beta}: {got:?} vs {want:?}"
                    );
                }
            }
        }
    }
}

/// Products too small to pay for a worker's wake-up run on the calling
/// thread (GPT batch-1 inference: four attention heads of 64x32x64, a
/// 64x128x384 projection); a large one is split.
#[test]
fn small_products_do_not_wake_the_pool() {
    use crate::cpu::threads::{lock_thread_count, pool_dispatches};
    let _threads = lock_thread_count();
    crate::cpu::set_num_threads(2);
    let mut rng = Rng::new(4);
    let a: Vec<f32> = random(4 * 64 * 512, &mut rng)
        .into_iter()
        .map(|v| v as f32)
        .collect();
    let b: Vec<f32> = random(512 * 512, &mut rng)
        .into_iter()
        .map(|v| v as f32)
        .collect();
    let mut c = vec![0.0f32; 4 * 64 * 512];
    let before = pool_dispatches();
    gemm_batched(
        4,
        64,
        32,
        64,
        |i| Mat::row_major(&a[i * 64 * 32..(i + 1) * 64 * 32], 32),
        |i| Mat::transposed(&b[i * 64 * 32..(i + 1) * 64 * 32], 32),
        0.0,
        &mut c,
    );
    // (m, k, n) row-major products at a budget of 2 threads
    let product = |m: usize, k: usize, n: usize, c: &mut [f32]| {
        gemm_threads(
            m,
            k,
            n,
            Mat::row_major(&a, k),
            Mat::row_major(&b, n),
            0.0,
            c,
            2,
        )
    };
    // 0.5M multiply-adds: 5-13 us on one core, below the 15 us threshold
    product(64, 64, 128, &mut c);
    assert_eq!(pool_dispatches(), before, "a small product woke the pool");
    product(256, 512, 512, &mut c);
    assert!(
        pool_dispatches() > before,
        "a large product ran on one thread"
    );
}

/// A batch-1 layer's matrix-vector product runs at the rate its matrix
/// comes from cache, far below the packed kernel's: the MLP's 784 x 512
/// one (40 us at `THIN_MACS_PER_NS`) is split across 2 threads in one
/// hand-off with the bits of one thread, either layout of the weight; its
/// 512 x 256 one (13 us) stays on the caller.
#[test]
fn batch_one_products_split_on_their_memory_cost() {
    use crate::cpu::threads::{lock_thread_count, pool_dispatches};
    let _threads = lock_thread_count();
    crate::cpu::set_num_threads(2);
    let mut rng = Rng::new(6);
    let x: Vec<f32> = random(784, &mut rng)
        .into_iter()
        .map(|v| v as f32)
        .collect();
    let w: Vec<f32> = random(784 * 512, &mut rng)
        .into_iter()
        .map(|v| v as f32)
        .collect();
    for transposed in [true, false] {
        // (k, n): a Linear's `x W^T` (W stored [n, k]) or `x W` (W [k, n])
        let wm = |k: usize, n: usize| {
            if transposed {
                Mat::transposed(&w, k)
            } else {
                Mat::row_major(&w, n)
            }
        };
        let (mut one, mut two) = (vec![0.0f32; 512], vec![f32::NAN; 512]);
        gemm_threads(
            1,
            784,
            512,
            Mat::row_major(&x, 784),
            wm(784, 512),
            0.0,
            &mut one,
            1,
        );
        let before = pool_dispatches();
        gemm_threads(
            1,
            784,
            512,
            Mat::row_major(&x, 784),
            wm(784, 512),
            0.0,
            &mut two,
            2,
        );
        assert_eq!(pool_dispatches(), before + 1, "784 x 512 not split");
        assert!(
            one.iter()
                .zip(&two)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "transposed {transposed}: 2 threads differ from 1"
        );
        let before = pool_dispatches();
        gemm_threads(
            1,
            512,
            256,
            Mat::row_major(&x, 512),
            wm(512, 256),
            0.0,
            &mut two,
            2,
        );
        assert_eq!(pool_dispatches(), before, "512 x 256 woke the pool");
    }
    crate::cpu::set_num_threads(1);
}

/// The f32 general path (forge's packed kernel where the CPU has AVX-512F
/// or AVX2 + FMA, else `matrixmultiply`) against a naive f64 product: edge tiles in `m`
/// and `n`, several `k` blocks with a remainder, every layout, beta 0 (a
/// NaN in `c` is overwritten) and beta 0.5.
#[test]
fn general_f32_path_matches_the_naive_product() {
    let mut rng = Rng::new(5);
    for (m, k, n) in [
        (13, 300, 33),
        (100, 513, 70),
        (25, 257, 64),
        (48, 1, 32),
        (37, 40, 95),
    ] {
        let a64 = random(m * k, &mut rng);
        let b64 = random(k * n, &mut rng);
        let c64 = random(m * n, &mut rng);
        let a32: Vec<f32> = a64.iter().map(|&v| v as f32).collect();
        let b32: Vec<f32> = b64.iter().map(|&v| v as f32).collect();
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let (a, b) = operands(&a64, &b64, (m, k, n), (ta, tb));
            let want = naive(m, k, n, a, b);
            let (a, b) = operands(&a32, &b32, (m, k, n), (ta, tb));
            for beta in [0.0f32, 0.5] {
                let mut c: Vec<f32> = if beta == 0.0 {
                    vec![f32::NAN; m * n]
                } else {
                    c64.iter().map(|&v| v as f32).collect()
                };
                gemm_threads(m, k, n, a, b, beta, &mut c, 2);
                for i in 0..m * n {
                    let w = want[i] + if beta == 0.0 { 0.0 } else { 0.5 * c64[i] };
                    assert!(
                        (c[i] as f64 - w).abs() <= 1e-5 * (k as f64).sqrt() + 1e-6,
                        "{m}x{k}x{n} ta={ta} tb={tb} beta={beta}: [{i}] {} vs {w}",
                        c[i]
                    );
                }
            }
        }
    }
}

/// `gemm_bias` (the bias added to each tile by the packed kernel) has
/// the bits of `gemm` with `beta = 1` over an output prefilled with the
/// bias: every layout of both operands, edge tiles in both directions,
/// several `k` blocks, 1 and 2 threads; and it declines the shapes and
/// types the packed kernel does not take.
#[test]
fn gemm_bias_equals_gemm_over_a_prefilled_output() {
    if !packed_f32::available() {
        return;
    }
    let _threads = crate::cpu::threads::lock_thread_count();
    let mut rng = Rng::new(7);
    let f32s = |v: Vec<f64>| v.into_iter().map(|x| x as f32).collect::<Vec<f32>>();
    for (m, k, n) in [(70, 33, 45), (13, 600, 100), (200, 300, 300), (24, 64, 32)] {
        let a_buf = f32s(random(m * k, &mut rng));
        let b_buf = f32s(random(k * n, &mut rng));
        let bias = f32s(random(n, &mut rng));
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let (a, b) = operands(&a_buf, &b_buf, (m, k, n), (ta, tb));
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                let mut want: Vec<f32> = (0..m).flat_map(|_| bias.iter().copied()).collect();
                gemm(m, k, n, a, b, 1.0, &mut want);
                let mut got = vec![f32::NAN; m * n];
                assert!(gemm_bias(m, k, n, a, b, &bias, &mut got));
                let bad = got
                    .iter()
                    .zip(&want)
                    .position(|(x, y)| x.to_bits() != y.to_bits());
                assert_eq!(bad, None, "{m}x{k}x{n} ta={ta} tb={tb} {threads} threads");
            }
        }
    }
    crate::cpu::set_num_threads(1);
    let (a, b) = (vec![1.0f32; 64], vec![1.0f32; 64 * 32]);
    let mut c = vec![0.0f32; 64 * 32];
    // one row, or 16 columns: the thin and narrow paths
    assert!(!gemm_bias(
        1,
        64,
        32,
        Mat::row_major(&a, 64),
        Mat::row_major(&b, 32),
        &[0.0; 32],
        &mut c
    ));
    assert!(!gemm_bias(
        4,
        16,
        16,
        Mat::row_major(&a, 16),
        Mat::row_major(&b, 16),
        &[0.0; 16],
        &mut c
    ));
    let (a, b) = (vec![1.0f64; 64], vec![1.0f64; 64 * 32]);
    let mut c = vec![0.0f64; 64 * 32];
    assert!(!gemm_bias(
        2,
        32,
        32,
        Mat::row_major(&a, 32),
        Mat::row_major(&b, 32),
        &[0.0; 32],
        &mut c
    ));
}

/// `gemm_serial_into` (packing into the caller's scratch, writing rows
/// `ldc` apart) has the bits of `gemm` with `beta = 0` into a row-major
/// buffer, in each CPU class with the packed kernel and against `gemm` at
/// 1 and 2 threads: every layout of both operands, edge tiles in both
/// directions, two `k` blocks, more row tiles than one chunk holds, the
/// attention heads' shapes; signed zeros, infinities, NaN and subnormals
/// among the inputs; NaN garbage in the scratch; the elements between the
/// output's rows untouched. It declines the shapes and types the packed
/// kernel does not take (`serial_scratch` 0).
#[test]
fn serial_into_equals_gemm_into_a_strided_output() {
    use crate::cpu::class::{pin_thread, Class};
    let _threads = crate::cpu::threads::lock_thread_count();
    let mut rng = Rng::new(11);
    let edge = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-40,
        -3e-39,
    ];
    let mut f32s = |len: usize| -> Vec<f32> {
        let mut v: Vec<f32> = random(len, &mut rng)
            .into_iter()
            .map(|x| x as f32)
            .collect();
        for (i, e) in edge.iter().enumerate() {
            let at = (i * 7919) % len;
            v[at] = *e;
        }
        v
    };
    for (m, k, n) in [
        (64, 32, 64),
        (64, 64, 32),
        (13, 300, 33),
        (200, 40, 70),
        (2, 1, 17),
        (37, 257, 95),
    ] {
        let a_buf = f32s(m * k);
        let b_buf = f32s(k * n);
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let (a, b) = operands(&a_buf, &b_buf, (m, k, n), (ta, tb));
            let mut wants = Vec::new();
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                let mut want = vec![f32::NAN; m * n];
                gemm(m, k, n, a, b, 0.0, &mut want);
                wants.push(want);
            }
            crate::cpu::set_num_threads(1);
            for class in [Class::Avx2, Class::Avx512] {
                if class > crate::cpu::class::detected() {
                    continue;
                }
                let prev = pin_thread(Some(class));
                let len = serial_scratch::<f32>(m, k, n);
                assert!(len > 0 && packed_f32::available());
                let mut scratch = vec![f32::NAN; len];
                let ldc = n + 7;
                let mut got = vec![-7.5f32; m * ldc];
                // SAFETY: `got` holds `m` rows of `ldc >= n`, all ours.
                let ran =
                    unsafe { gemm_serial_into(m, k, n, a, b, got.as_mut_ptr(), ldc, &mut scratch) };
                pin_thread(prev);
                assert!(ran);
                for (i, row) in got.chunks_exact(ldc).enumerate() {
                    assert!(
                        row[n..].iter().all(|&x| x == -7.5),
                        "{m}x{k}x{n}: gap written"
                    );
                    for want in &wants {
                        let bad = row[..n]
                            .iter()
                            .zip(&want[i * n..(i + 1) * n])
                            .position(|(x, y)| x.to_bits() != y.to_bits());
                        assert_eq!(bad, None, "{m}x{k}x{n} ta={ta} tb={tb} {class:?} row {i}");
                    }
                }
            }
        }
    }
    // one row, 16 columns, no `k`, f64: not the packed kernel
    let (a, b) = (vec![1.0f32; 64], vec![1.0f32; 64 * 32]);
    let mut c = vec![0.0f32; 64 * 32];
    let mut s = vec![0.0f32; 1 << 16];
    for (m, k, n) in [(1, 64, 32), (4, 16, 16), (4, 0, 32)] {
        assert_eq!(serial_scratch::<f32>(m, k, n), 0);
        let (am, bm) = (Mat::row_major(&a, k), Mat::row_major(&b, n));
        // SAFETY: `c` holds `m x n`.
        assert!(!unsafe { gemm_serial_into(m, k, n, am, bm, c.as_mut_ptr(), n, &mut s) });
    }
    assert_eq!(serial_scratch::<f64>(64, 32, 64), 0);
}
