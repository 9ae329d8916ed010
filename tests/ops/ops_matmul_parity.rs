//! Parity of `matmul` with PyTorch (every fixture `ops/matmul_*`: 2-D,
//! batched, broadcast-batched, matrix-vector, vector-matrix, batched
//! matrix-vector, dot), outputs and both gradients; a finite-difference
//! gradient check of each in f64; and `matmul_t` against `matmul` with an
//! explicit transpose.
//!
//! Tolerances: each fixture's own `rtol`/`atol` (1e-10 / 1e-12 in f64),
//! and `f32_rtol`/`f32_atol` for the same files in f32.

use crate::common;
use common::Fixture;
use forge::{gradcheck, Element, Float, Tensor};

fn check_file<E: Float>(f: &Fixture) {
    let a = f.input::<E>("a").requires_grad();
    let b = f.input::<E>("b").requires_grad();
    let y = a.matmul(&b);
    f.check_as("out", &y);
    let g = y.backward_with(&f.input::<E>("gout"), false);
    f.check_as("grad_a", g.get(&a).unwrap());
    f.check_as("grad_b", g.get(&b).unwrap());
}

#[test]
fn matmul_matches_pytorch() {
    let files = common::fixtures_with_prefix("ops", "matmul_");
    assert!(files.len() >= 7, "expected the 7 matmul fixtures");
    for file in files {
        let f = Fixture::load(&file);
        check_file::<f64>(&f);
        check_file::<f32>(&f);
    }
}

#[test]
fn matmul_passes_gradcheck() {
    for file in common::fixtures_with_prefix("ops", "matmul_") {
        let f = Fixture::load(&file);
        gradcheck(
            |v| v[0].matmul(&v[1]),
            &[f.t("a"), f.t("b")],
            1e-6,
            1e-6,
            1e-6,
        )
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

#[test]
fn matmul_t_agrees_with_matmul_of_transpose() {
    for file in [
        "ops/matmul_2d.safetensors",
        "ops/matmul_batched.safetensors",
    ] {
        let f = Fixture::load(file);
        let (a, b) = (f.t("a"), f.t("b"));
        let bt = b.transpose(-2, -1);
        let gout = f.t("gout");
        let (a1, b1) = (a.requires_grad(), bt.requires_grad());
        let y1 = a1.matmul_t(&b1);
        f.check("out", &y1);
        let g = y1.backward_with(&gout, false);
        f.check("grad_a", g.get(&a1).unwrap());
        f.check("grad_b", &g.get(&b1).unwrap().transpose(-2, -1));
        gradcheck(|v| v[0].matmul_t(&v[1]), &[a, bt], 1e-6, 1e-6, 1e-6)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
    }
}

/// A product's output buffer comes from the pool as it is (no zeroing:
/// beta is 0, so every element is written): the values must not depend on
/// what the buffer held. Before each product, buffers of its output's size
/// filled with NaN are dropped back onto the free lists (the next output
/// of that size takes one); every path must still give the naive product:
/// a row vector times a matrix, `n <= 16`, the general kernel, `k = 0`, a
/// batch, `linear` without a bias. f64 and f32 (tolerance 1e-12 and 1e-4
/// relative to `1 + |value|`: sums of at most 300 products of N(0, 1)).
#[test]
fn products_overwrite_stale_pool_buffers() {
    fn case<E: Float>(sa: &[usize], sb: &[usize], tol: f64) {
        let mut rng = forge::Rng::new(sa.iter().sum::<usize>() as u64);
        let a = Tensor::<E>::normal(sa, 0.0, 1.0, &mut rng);
        let b = Tensor::<E>::normal(sb, 0.0, 1.0, &mut rng);
        let (r, k, n) = (sa[sa.len() - 2], sa[sa.len() - 1], sb[sb.len() - 1]);
        let batch = a.numel() / (r * k).max(1);
        let (av, bv) = (a.to_vec(), b.to_vec());
        let mut want = vec![0.0f64; batch * r * n];
        for z in 0..batch {
            for i in 0..r {
                for j in 0..n {
                    want[(z * r + i) * n + j] = (0..k)
                        .map(|p| {
                            Element::to_f64(av[(z * r + i) * k + p])
                                * Element::to_f64(bv[(z * k + p) * n + j])
                        })
                        .sum();
                }
            }
        }
        let mut out_shape = sa.to_vec();
        *out_shape.last_mut().unwrap() = n;
        for round in 0..3 {
            for _ in 0..4 {
                drop(Tensor::<E>::full(&out_shape, E::nan()));
            }
            let got = if round == 2 && sa.len() == 2 {
                a.linear(&b.transpose(0, 1), None)
            } else {
                a.matmul(&b)
            };
            for (i, (g, w)) in got.to_vec().iter().zip(&want).enumerate() {
                let g = Element::to_f64(*g);
                assert!(
                    (g - w).abs() <= tol * (1.0 + w.abs()),
                    "{sa:?} x {sb:?} round {round} element {i}: {g} vs {w}"
                );
            }
        }
    }
    let cases: [(&[usize], &[usize]); 6] = [
        (&[1, 40], &[40, 300]),
        (&[50, 40], &[40, 10]),
        (&[50, 300], &[300, 70]),
        (&[5, 0], &[0, 7]),
        (&[3, 20, 30], &[3, 30, 40]),
        (&[64, 128], &[128, 384]),
    ];
    for (sa, sb) in cases {
        case::<f64>(sa, sb, 1e-12);
        case::<f32>(sa, sb, 1e-4);
    }
}
