//! Tests of the gemm paths: bit-identical partitions and agreement with a naive product.

use super::*;
/// A small deterministic generator (cpu/ does not depend on tensor/).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
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
            let a = if ta {
                Mat::transposed(&a_buf, m)
            } else {
                Mat::row_major(&a_buf, k)
            };
            let b = if tb {
                Mat::transposed(&b_buf, k)
            } else {
                Mat::row_major(&b_buf, n)
            };
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
            let a = if ta {
                Mat::transposed(&a_buf, m)
            } else {
                Mat::row_major(&a_buf, k)
            };
            let b = if tb {
                Mat::transposed(&b_buf, k)
            } else {
                Mat::row_major(&b_buf, n)
            };
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
