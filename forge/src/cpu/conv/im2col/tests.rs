//! Tests of the im2col/col2im kernels.
use super::*;
use crate::cpu::conv::{
    conv2d_backward_input, conv2d_backward_input_kept, conv2d_backward_weight,
    conv2d_backward_weight_kept, conv2d_forward, conv2d_forward_keeping,
};
use std::mem::MaybeUninit;

/// Direct window sums, the definition the kernels must agree with.
fn naive(g: &ConvGeom, x: &[f64], wt: &[f64]) -> Vec<f64> {
    let (cg, og) = (g.cg(), g.og());
    let mut y = vec![0.0; g.n * g.o * g.oh * g.ow];
    for b in 0..g.n {
        for o in 0..g.o {
            let grp = o / og;
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    let mut s = 0.0;
                    for ci in 0..cg {
                        for i in 0..g.kh {
                            for j in 0..g.kw {
                                let y0 = ConvGeom::src(
                                    oy,
                                    i,
                                    g.stride[0],
                                    g.padding[0],
                                    g.dilation[0],
                                    g.h,
                                );
                                let x0 = ConvGeom::src(
                                    ox,
                                    j,
                                    g.stride[1],
                                    g.padding[1],
                                    g.dilation[1],
                                    g.w,
                                );
                                if let (Some(yy), Some(xx)) = (y0, x0) {
                                    let c = grp * cg + ci;
                                    s += x[((b * g.c + c) * g.h + yy) * g.w + xx]
                                        * wt[((o * cg + ci) * g.kh + i) * g.kw + j];
                                }
                            }
                        }
                    }
                    y[((b * g.o + o) * g.oh + oy) * g.ow + ox] = s;
                }
            }
        }
    }
    y
}

#[test]
fn forward_matches_window_sums() {
    let g = ConvGeom::new([3, 4, 7, 8], [6, 2, 3, 2], [2, 1], [1, 2], [1, 2], 2).unwrap();
    let x: Vec<f64> = (0..3 * 4 * 7 * 8)
        .map(|i| ((i * 37) % 11) as f64 - 5.0)
        .collect();
    let w: Vec<f64> = (0..6 * 2 * 3 * 2)
        .map(|i| ((i * 13) % 7) as f64 - 3.0)
        .collect();
    assert_eq!(conv2d_forward(&g, &x, &w, None).to_vec(), naive(&g, &x, &w));
}

fn ramp(n: usize, a: usize, m: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * a) % m) as f64 - (m / 2) as f64)
        .collect()
}

/// The batched (groups = 1) paths, with budgets that split the batch
/// into chunks of 2, 2 and 1 images and of one image each (computed in
/// place), against window sums and adjoints; strided, dilated and
/// padded so that every im2col branch runs.
#[test]
fn batched_paths_match_window_sums_and_adjoints() {
    for (stride, pad, dil) in [([1, 1], [1, 1], [1, 1]), ([2, 3], [0, 2], [2, 1])] {
        let g = ConvGeom::new([5, 3, 7, 8], [4, 3, 3, 2], stride, pad, dil, 1).unwrap();
        let x = ramp(5 * 3 * 7 * 8, 37, 11);
        let w = ramp(4 * 3 * 3 * 2, 13, 7);
        let gy = ramp(5 * 4 * g.oh * g.ow, 11, 7);
        let whole = forward_batched(&g, &x, &w, None, usize::MAX);
        assert_eq!(whole.to_vec(), naive(&g, &x, &w));
        for (budget, per) in [(2 * g.k_len() * g.l(), 2), (1, 1)] {
            assert_eq!(g.batch_chunk(budget), per);
            let y = forward_batched(&g, &x, &w, None, budget);
            assert_eq!(y, whole);
            let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
            let gx = backward_input_batched(&g, &gy, &w, None, budget);
            let gw = backward_weight_batched(&g, &x, &gy, budget);
            assert_eq!(dot(&y, &gy), dot(&x, &gx));
            assert_eq!(dot(&y, &gy), dot(&w, &gw));
            let bias = [1.0, 2.0, 3.0, 4.0];
            let with_bias = forward_batched(&g, &x, &w, Some(&bias), budget);
            for (i, (&b, &v)) in with_bias.iter().zip(y.iter()).enumerate() {
                assert_eq!(b, v + bias[(i / g.l()) % 4]);
            }
            let gx_bias = backward_input_batched(&g, &gy, &w, Some(&[0.5, 1.0, 2.0]), budget);
            let plane = g.h * g.w;
            for (i, (&b, &v)) in gx_bias.iter().zip(gx.iter()).enumerate() {
                assert_eq!(b, v + [0.5, 1.0, 2.0][(i / plane) % 3]);
            }
        }
    }
}

#[test]
fn backward_kernels_are_adjoints() {
    // <conv(x, w), gy> = <x, backward_input(gy, w)> = <w, backward_weight(x, gy)>,
    // exact for small integers.
    let g = ConvGeom::new([5, 4, 6, 5], [4, 2, 3, 3], [2, 1], [1, 1], [1, 2], 2).unwrap();
    let x: Vec<f64> = (0..5 * 4 * 6 * 5)
        .map(|i| ((i * 7) % 5) as f64 - 2.0)
        .collect();
    let w: Vec<f64> = (0..4 * 2 * 9).map(|i| ((i * 3) % 5) as f64 - 2.0).collect();
    let gy: Vec<f64> = (0..5 * 4 * g.oh * g.ow)
        .map(|i| ((i * 11) % 7) as f64 - 3.0)
        .collect();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
    let y = conv2d_forward(&g, &x, &w, None);
    let gx = conv2d_backward_input(&g, &gy, &w, None);
    let gw = conv2d_backward_weight(&g, &x, &gy);
    assert_eq!(dot(&y, &gy), dot(&x, &gx));
    assert_eq!(dot(&y, &gy), dot(&w, &gw));
}

/// The `f32` forward against the copying route it replaces: the whole
/// batch's columns, one plain [`gemm`], the product rearranged per image.
fn copied_route(g: &ConvGeom, x: &[f32], w: &[f32]) -> Vec<f32> {
    let (k, l, o, n) = (g.k_len(), g.l(), g.o, g.n);
    let mut cols = Storage::with_capacity(k * n * l);
    refill(&mut cols, k * n * l, |c| g.im2col_batch(x, 0, n, c));
    let mut prod = vec![0.0f32; o * n * l];
    gemm(
        o,
        k,
        n * l,
        Mat::row_major(w, k),
        Mat::row_major(&cols, n * l),
        0.0,
        &mut prod,
    );
    let mut y = vec![0.0f32; n * o * l];
    for (i, v) in y.iter_mut().enumerate() {
        let (b, oc, p) = (i / (o * l), (i / l) % o, i % l);
        *v = prod[oc * n * l + b * l + p];
    }
    y
}

/// The `f32` products with the weight packed once per call and stored
/// straight into the output (AVX-512; elsewhere the plain route runs)
/// have the bits of the copying route, for chunks of 2, 2, 1 images and
/// the whole batch (2, 2 for `l` 16), one and two `k` blocks, edge row
/// tiles, a second row chunk (200 rows) and a partial last panel (`l` 16, 48, 64), with and without bias,
/// on 1 and 2 threads;
/// the tap-class paths (weights packed straight from `[o, c, kh, kw]`)
/// equal the window sums on small integers.
#[test]
fn f32_packed_weight_paths_match_the_copying_route() {
    // Holds the thread count against the other unit tests that set it.
    let _threads = crate::cpu::threads::lock_thread_count();
    use crate::cpu::threads::{num_threads, set_num_threads};
    let prev = num_threads();
    let frac = |n: usize, a: usize| -> Vec<f32> {
        (0..n).map(|i| ((i * a) % 23) as f32 * 0.13 - 1.4).collect()
    };
    for (n, c, hw, o) in [(5, 5, [8, 8], 20), (4, 30, [4, 4], 13), (5, 3, [6, 8], 200)] {
        let g = ConvGeom::new(
            [n, c, hw[0], hw[1]],
            [o, c, 3, 3],
            [1, 1],
            [1, 1],
            [1, 1],
            1,
        )
        .unwrap();
        let (x, w) = (frac(n * c * hw[0] * hw[1], 37), frac(o * c * 9, 13));
        let want = copied_route(&g, &x, &w);
        let bias: Vec<f32> = (0..o).map(|i| i as f32 * 0.37 - 2.0).collect();
        for threads in [1, 2] {
            set_num_threads(threads);
            for budget in [2 * g.k_len() * g.l(), usize::MAX] {
                let y = forward_batched(&g, &x, &w, None, budget);
                assert!(
                    y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{g:?}"
                );
                let yb = forward_batched(&g, &x, &w, Some(&bias), budget);
                for (i, (&v, &u)) in yb.iter().zip(&want).enumerate() {
                    assert_eq!(v.to_bits(), (u + bias[(i / g.l()) % o]).to_bits());
                }
            }
        }
    }
    // Tap classes: 2x2 planes (one class per position) and 1x1 planes.
    for hw in [[2, 2], [1, 1]] {
        let n = 20;
        let g = ConvGeom::new(
            [n, 20, hw[0], hw[1]],
            [30, 20, 3, 3],
            [1, 1],
            [1, 1],
            [1, 1],
            1,
        )
        .unwrap();
        assert!(g.tap_plan().is_some());
        let x = ramp(n * 20 * hw[0] * hw[1], 37, 7);
        let w = ramp(30 * 20 * 9, 13, 5);
        let want = naive(&g, &x, &w);
        let (x32, w32): (Vec<f32>, Vec<f32>) = (
            x.iter().map(|&v| v as f32).collect(),
            w.iter().map(|&v| v as f32).collect(),
        );
        let y = conv2d_forward(&g, &x32, &w32, None);
        assert!(y.iter().zip(&want).all(|(&a, &b)| a as f64 == b), "{hw:?}");
    }
    set_num_threads(prev);
}

/// The shifted-copy im2col row (stride and dilation 1, output as wide as
/// the input) writes every element, with the bits of the row-by-row
/// general path, for every tap: 3x3 padding 1 on 8x8, 4x4, 2x2, 1x1 and
/// 1x5 planes, 5x5 padding 2 (wider than a 2x3 plane), 1x1, a 3x1 kernel,
/// height padding 0 (fewer output rows than input rows) and 3 (output
/// rows wholly on the padding).
#[test]
fn shifted_rows_equal_the_general_rows() {
    let cases = [
        ([8, 8], [3, 3], [1, 1]),
        ([4, 4], [3, 3], [1, 1]),
        ([2, 2], [3, 3], [1, 1]),
        ([1, 1], [3, 3], [1, 1]),
        ([1, 5], [3, 3], [1, 1]),
        ([2, 3], [5, 5], [2, 2]),
        ([6, 7], [5, 5], [2, 2]),
        ([3, 4], [1, 1], [0, 0]),
        ([5, 3], [3, 1], [1, 0]),
        ([6, 5], [3, 3], [0, 1]),
        ([2, 4], [3, 3], [3, 1]),
    ];
    for (hw, k, p) in cases {
        let g = ConvGeom::new(
            [1, 1, hw[0], hw[1]],
            [1, 1, k[0], k[1]],
            [1, 1],
            p,
            [1, 1],
            1,
        )
        .unwrap();
        assert!(g.rows_are_contiguous(), "{g:?}");
        let plane: Vec<f32> = (0..hw[0] * hw[1]).map(|i| i as f32 * 0.37 - 1.1).collect();
        let inside = g.inside_table();
        for t in 0..k[0] * k[1] {
            let l = g.oh * g.ow;
            // Sentinels: an element either path fails to write shows up.
            let mut a = vec![MaybeUninit::new(f32::NAN); l];
            let mut b = vec![MaybeUninit::new(-7.5f32); l];
            g.im2col_row_shifted(&plane, t, inside[t % g.kw], &mut a);
            g.im2col_row_general(&plane, t, inside[t % g.kw], &mut b, kernels::fast::<f32>());
            let bits = |v: &[MaybeUninit<f32>]| -> Vec<u32> {
                v.iter()
                    // SAFETY: both vectors were initialised with sentinels
                    // above, and the paths only write `f32`s over them.
                    .map(|x| unsafe { x.assume_init() }.to_bits())
                    .collect()
            };
            assert_eq!(bits(&a), bits(&b), "{g:?} tap {t}");
        }
    }
    let strided = ConvGeom::new([1, 1, 8, 8], [1, 1, 3, 3], [2, 2], [1, 1], [1, 1], 1).unwrap();
    assert!(!strided.rows_are_contiguous());
}

/// The batched im2col counts each copied run's overhead, not only its
/// elements: ResNet-18's stride-2 3x3 layer on 4x4 planes at batch 4
/// (`[4, 128, 4, 4]` to 256 channels) copies 18,432 values in runs of two,
/// under the inline threshold by element count (about 9 us at half a
/// nanosecond each) but about 46 us of work with its runs, so at 2 threads
/// it goes to the pool; a pass of as many values in runs of 64 (the
/// shifted copy of 8x8 planes, one run per image: `[16, 2, 8, 8]`) stays
/// inline. Values equal the per-image im2col either way.
#[test]
fn im2col_batch_splits_by_runs_as_well_as_elements() {
    // Holds the thread count against the other unit tests that set it.
    let _threads = crate::cpu::threads::lock_thread_count();
    use crate::cpu::threads::{num_threads, pool_dispatches, set_num_threads};
    let prev = num_threads();
    set_num_threads(2);
    let strided =
        ConvGeom::new([4, 128, 4, 4], [256, 128, 3, 3], [2, 2], [1, 1], [1, 1], 1).unwrap();
    let shifted = ConvGeom::new([16, 2, 8, 8], [8, 2, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
    for (g, pooled) in [(strided, true), (shifted, false)] {
        let (k, l, n) = (g.k_len(), g.l(), g.n);
        let x: Vec<f32> = (0..n * g.c * g.h * g.w)
            .map(|i| (i % 97) as f32 - 48.0)
            .collect();
        let before = pool_dispatches();
        let mut cols = Storage::with_capacity(k * n * l);
        refill(&mut cols, k * n * l, |c| g.im2col_batch(&x, 0, n, c));
        assert_eq!(pool_dispatches() > before, pooled, "{g:?}");
        let img = g.c * g.h * g.w;
        let mut one = vec![0.0f32; k * l];
        for b in 0..n {
            g.im2col(&x[b * img..(b + 1) * img], &mut one);
            for r in 0..k {
                assert_eq!(
                    &cols[r * n * l + b * l..][..l],
                    &one[r * l..(r + 1) * l],
                    "{g:?}"
                );
            }
        }
    }
    set_num_threads(prev);
}

/// The dense backward passes take their column buffer and weight
/// gradient from the pool unzeroed (`Storage::stale`): every element the
/// products write is written before it is read. With the pool seeded with
/// NaN blocks of exactly those sizes the results have no NaN and the bits
/// of a run after zero-filled seeds, for image chunks of 2, 2 and 1.
#[test]
fn dense_backward_passes_overwrite_their_stale_buffers() {
    let g = ConvGeom::new([5, 3, 7, 8], [4, 3, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
    assert!(g.tap_plan().is_none(), "the dense path");
    let (k, l) = (g.k_len(), g.l());
    let budget = 2 * k * l;
    assert_eq!(g.batch_chunk(budget), 2);
    let x: Vec<f32> = (0..5 * 3 * 7 * 8).map(|i| (i % 13) as f32 - 6.0).collect();
    let gy: Vec<f32> = (0..5 * 4 * l).map(|i| (i % 7) as f32 - 3.0).collect();
    let w: Vec<f32> = (0..4 * k).map(|i| (i % 5) as f32 - 2.0).collect();
    let run = |seed: f32| {
        for len in [k * 2 * l, 4 * k] {
            let seeds: Vec<Storage<f32>> = (0..4).map(|_| Storage::filled(len, seed)).collect();
            drop(seeds);
        }
        let gx = backward_input_batched(&g, &gy, &w, None, budget);
        for _ in 0..4 {
            drop(Storage::<f32>::filled(4 * k, seed));
        }
        let gw = backward_weight_batched(&g, &x, &gy, budget);
        (gx.to_vec(), gw.to_vec())
    };
    let (gx, gw) = run(f32::NAN);
    assert!(
        gx.iter().chain(&gw).all(|v| !v.is_nan()),
        "a stale NaN was read"
    );
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let (gx0, gw0) = run(0.0);
    assert_eq!((bits(&gx), bits(&gw)), (bits(&gx0), bits(&gw0)));
}

/// The forward that keeps its columns ([`forward_keeping`]) gives the
/// output bits of [`conv2d_forward`] and, from those columns, the weight
/// gradient bits of [`conv2d_backward_weight`] (which unfolds the input
/// again), on 1 and 2 threads, with and without bias: LeNet-5's second
/// convolution at batch 40 (chunks of 17, 17 and 6 images; `l` 100, the
/// copying path), a 3x3 "same" layer with `l` 64 (the direct store path
/// for `f32`, chunks of 7, 7, 2), one over 24x24 planes (chunks of one
/// image), a strided, padded, dilated one, and `f64`. Geometries it does
/// not take keep nothing (too large, several groups, the small-channel
/// kernels), but tap classes, which keep the used taps' weights for the
/// input gradient (the same bits as copying them again).
#[test]
fn kept_columns_give_the_bits_of_unfolding_again() {
    let _threads = crate::cpu::threads::lock_thread_count();
    use crate::cpu::threads::{num_threads, set_num_threads};
    let prev = num_threads();
    let frac = |n: usize, a: usize| -> Vec<f32> {
        (0..n).map(|i| ((i * a) % 23) as f32 * 0.13 - 1.4).collect()
    };
    let geoms = [
        ([40, 6, 14, 14], [16, 6, 5, 5], [1, 1], [0, 0], [1, 1], 3),
        ([16, 64, 8, 8], [20, 64, 3, 3], [1, 1], [1, 1], [1, 1], 3),
        ([3, 64, 24, 24], [8, 64, 3, 3], [1, 1], [1, 1], [1, 1], 3),
        ([9, 5, 11, 19], [7, 5, 3, 4], [2, 1], [1, 2], [1, 2], 1),
    ];
    for (x_shape, w_shape, stride, pad, dil, chunks_want) in geoms {
        let g = ConvGeom::new(x_shape, w_shape, stride, pad, dil, 1).unwrap();
        assert!(keeps_columns(&g), "{g:?}");
        assert_eq!(chunks(g.n, g.batch_chunk(COLS_BUDGET)).count(), chunks_want);
        let x = frac(g.n * g.c * g.h * g.w, 37);
        let w = frac(g.o * g.k_len(), 13);
        let gy = frac(g.n * g.o * g.l(), 11);
        let bias = frac(g.o, 7);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for threads in [1, 2] {
            set_num_threads(threads);
            for b in [None, Some(&bias[..])] {
                let (y, kept) = conv2d_forward_keeping(&g, &x, &w, b);
                let kept = kept.expect("kept");
                assert_eq!(bits(&y), bits(&conv2d_forward(&g, &x, &w, b)), "{g:?}");
                let gw = conv2d_backward_weight_kept(&g, &kept, &gy);
                let want = conv2d_backward_weight(&g, &x, &gy);
                assert_eq!(bits(&gw), bits(&want), "{g:?} on {threads} thread(s)");
            }
        }
    }
    set_num_threads(prev);
    // f64, the generic path
    let g = ConvGeom::new([40, 6, 14, 14], [16, 6, 5, 5], [1, 1], [0, 0], [1, 1], 1).unwrap();
    let x: Vec<f64> = frac(40 * 6 * 196, 37)
        .iter()
        .map(|&v| v as f64 / 3.0)
        .collect();
    let w: Vec<f64> = frac(16 * 150, 13).iter().map(|&v| v as f64 / 7.0).collect();
    let gy: Vec<f64> = frac(40 * 16 * 100, 11)
        .iter()
        .map(|&v| v as f64 / 9.0)
        .collect();
    let (y, kept) = conv2d_forward_keeping(&g, &x, &w, None);
    assert_eq!(y, conv2d_forward(&g, &x, &w, None));
    let gw = conv2d_backward_weight_kept(&g, &kept.expect("kept"), &gy);
    assert_eq!(gw, conv2d_backward_weight(&g, &x, &gy));
    // not kept
    let none = [
        // `c kh kw * n oh ow` = 576 * 40 * 256 > KEEP_COLS_MAX
        ConvGeom::new([40, 64, 16, 16], [64, 64, 3, 3], [1, 1], [1, 1], [1, 1], 1),
        // two groups
        ConvGeom::new([4, 8, 6, 6], [8, 4, 3, 3], [1, 1], [1, 1], [1, 1], 2),
        // the small-channel kernels (LeNet-5's first convolution)
        ConvGeom::new([8, 1, 28, 28], [6, 1, 5, 5], [1, 1], [2, 2], [1, 1], 1),
    ];
    for g in none.map(Option::unwrap) {
        let x = frac(g.n * g.c * g.h * g.w, 37);
        let w = frac(g.o * g.k_len(), 13);
        let (y, kept) = conv2d_forward_keeping(&g, &x, &w, None);
        assert!(kept.is_none(), "{g:?}");
        assert_eq!(bits_of(&y), bits_of(&conv2d_forward(&g, &x, &w, None)));
    }
    // tap classes (2x2 and 1x1 planes) keep the used taps' weights instead,
    // which give the input gradient's bits
    for g in [
        ConvGeom::new([16, 32, 2, 2], [32, 32, 3, 3], [1, 1], [1, 1], [1, 1], 1),
        ConvGeom::new([16, 24, 1, 1], [40, 24, 3, 3], [1, 1], [1, 1], [1, 1], 1),
    ]
    .map(Option::unwrap)
    {
        let x = frac(g.n * g.c * g.h * g.w, 37);
        let w = frac(g.o * g.k_len(), 13);
        let gy = frac(g.n * g.o * g.l(), 11);
        let (y, kept) = conv2d_forward_keeping(&g, &x, &w, None);
        let kept = kept.expect("kept taps");
        assert!(!kept.has_columns(), "{g:?}");
        assert_eq!(bits_of(&y), bits_of(&conv2d_forward(&g, &x, &w, None)));
        assert_eq!(
            bits_of(&conv2d_backward_input_kept(&g, &gy, &w, &kept)),
            bits_of(&conv2d_backward_input(&g, &gy, &w, None)),
            "{g:?}"
        );
    }
}

fn bits_of(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The weight gradient run as its transpose (`cols x gy^T` into `[k, o]`,
/// where [`weight_grad_flipped`] holds) has the bits of the plain product
/// `gy x cols^T` over the same chunks, on 1 and 2 threads, unfolding again
/// and from kept columns: 3x3 "same" layers of 64 -> 64 channels on 8x8
/// planes (chunks of 7, 7, 2) and 32 -> 64 on 24x24 (one image a chunk),
/// a strided, padded, dilated one (`k` 60 > `o` 32); and those kept plain:
/// a 1x1 layer widening 20 -> 40 channels (`k` 20 < `o`), a stem (`k` 27
/// < `o` 32), 5 -> 24 channels (`k` 60, but 24 columns padded to 32 pad
/// more than 24 rows to 24) and 256 -> 256 on 4x4 (a gradient of 590 K
/// elements).
#[test]
fn flipped_weight_gradient_has_the_bits_of_the_plain_product() {
    let _threads = crate::cpu::threads::lock_thread_count();
    use crate::cpu::threads::{num_threads, set_num_threads};
    let prev = num_threads();
    let frac = |n: usize, a: usize| -> Vec<f32> {
        (0..n).map(|i| ((i * a) % 29) as f32 * 0.11 - 1.5).collect()
    };
    let packed = crate::cpu::gemm::packed_f32_applies::<f32>(2, 1, 17);
    let geoms = [
        ([16, 64, 8, 8], [64, 64, 3, 3], [1, 1], [1, 1], [1, 1], true),
        (
            [3, 32, 24, 24],
            [64, 32, 3, 3],
            [1, 1],
            [1, 1],
            [1, 1],
            true,
        ),
        ([9, 5, 11, 19], [32, 5, 3, 4], [2, 1], [1, 2], [1, 2], true),
        ([5, 20, 9, 9], [40, 20, 1, 1], [1, 1], [0, 0], [1, 1], false),
        ([6, 3, 16, 16], [32, 3, 3, 3], [1, 1], [1, 1], [1, 1], false),
        ([9, 5, 11, 19], [24, 5, 3, 4], [2, 1], [1, 2], [1, 2], false),
        (
            [2, 256, 4, 4],
            [256, 256, 3, 3],
            [1, 1],
            [1, 1],
            [1, 1],
            false,
        ),
    ];
    for (x_shape, w_shape, stride, pad, dil, flips) in geoms {
        let g = ConvGeom::new(x_shape, w_shape, stride, pad, dil, 1).unwrap();
        assert_eq!(weight_grad_flipped::<f32>(&g), flips && packed, "{g:?}");
        assert!(!weight_grad_flipped::<f64>(&g));
        let (k, l, o) = (g.k_len(), g.l(), g.o);
        let x = frac(g.n * g.c * g.h * g.w, 37);
        let w = frac(o * k, 13);
        let gy = frac(g.n * o * l, 11);
        // the plain product, chunk by chunk
        let per = g.batch_chunk(COLS_BUDGET);
        let mut cols = Columns::reused(&g, per);
        let mut gyc = Storage::with_capacity(o * per * l);
        let mut want = vec![0f32; o * k];
        for (b0, nb) in chunks(g.n, per) {
            let ld = nb * l;
            let c = cols.unfold(&g, &x, b0, nb);
            let gyb = g.channel_major(&gy, b0, nb, &mut gyc);
            let beta = if b0 == 0 { 0.0 } else { 1.0 };
            let (a, b) = (
                Mat::row_major(&gyb[..o * ld], ld),
                Mat::transposed(&c[..k * ld], ld),
            );
            gemm(o, ld, k, a, b, beta, &mut want);
        }
        for threads in [1, 2] {
            set_num_threads(threads);
            let got = conv2d_backward_weight(&g, &x, &gy);
            assert_eq!(bits_of(&got), bits_of(&want), "{g:?}, {threads} thread(s)");
            if keeps_columns(&g) {
                let (_, kept) = conv2d_forward_keeping(&g, &x, &w, None);
                let gw = conv2d_backward_weight_kept(&g, &kept.expect("kept"), &gy);
                assert_eq!(bits_of(&gw), bits_of(&want), "{g:?} kept, {threads}");
            }
        }
    }
    set_num_threads(prev);
}
