use super::*;
use crate::cpu::threads::{lock_thread_count, pool_dispatches, set_num_threads};
use crate::quant::Granularity;

/// `max(x, 0)`, as `Linear`'s fused ReLU computes it.
fn relu(y: &mut [f32]) {
    for v in y.iter_mut() {
        *v = if *v > 0.0 { *v } else { 0.0 };
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A `[out, k]` weight quantized with `g`, a bias, and `m` rows of inputs
/// (NaN-free, spread over both signs).
fn case(m: usize, k: usize, out: usize, g: Granularity) -> (Int8Weight, Vec<f32>, Vec<f32>) {
    let w: Vec<f32> = (0..out * k)
        .map(|i| ((i * 7919) % 1999) as f32 * 0.001 - 1.0)
        .collect();
    let bias: Vec<f32> = (0..out).map(|j| j as f32 * 0.01 - 0.3).collect();
    let x: Vec<f32> = (0..m * k)
        .map(|i| ((i * 613) % 401) as f32 * 0.02 - 3.0)
        .collect();
    (Int8Weight::quantize(&w, out, k, g), bias, x)
}

#[test]
fn row_blocks_give_the_bits_of_one_product() {
    let _threads = lock_thread_count();
    let before = crate::cpu::num_threads();
    // the bench MLP's three layers at batch 128, and odd shapes whose
    // blocks end off the AMX chunk and whose rows are not whole quads
    let shapes = [
        (128, 784, 512, Granularity::PerTensor),
        (128, 512, 256, Granularity::PerTensor),
        (128, 256, 10, Granularity::PerChannel),
        (100, 37, 70, Granularity::PerChannel),
        (67, 200, 33, Granularity::PerTensor),
        (5, 9, 17, Granularity::PerTensor),
    ];
    for (m, k, out, g) in shapes {
        let (q, bias, mut x) = case(m, k, out, g);
        if m == 67 {
            // a NaN (skipped by the range, quantized to 0) and a -0 in the
            // second block, the largest value in the last
            x[40 * k + 3] = f32::NAN;
            x[40 * k + 4] = -0.0;
            x[66 * k] = 9.0;
        }
        for (b, act) in [
            (None, None),
            (Some(&bias[..]), None),
            (Some(&bias[..]), Some(relu as fn(&mut [f32]))),
        ] {
            set_num_threads(1);
            let want = bits(&q.linear_whole(&x, b, act));
            for threads in [1, 2] {
                set_num_threads(threads);
                assert_eq!(
                    bits(&q.linear_whole(&x, b, act)),
                    want,
                    "{m}x{k}x{out} whole"
                );
                assert_eq!(
                    bits(&q.linear_pooled(&x, b, act)),
                    want,
                    "{m}x{k}x{out} pooled"
                );
                for parts in 1..=m.min(4) {
                    assert_eq!(
                        bits(&q.linear_in_parts(&x, b, act, parts)),
                        want,
                        "{m}x{k}x{out} in {parts} blocks on {threads} thread(s)"
                    );
                }
            }
        }
    }
    set_num_threads(before);
}

#[test]
fn two_threads_split_a_layer_of_the_bench_mlp_in_two_hand_offs() {
    let _threads = lock_thread_count();
    let before = crate::cpu::num_threads();
    let (q, bias, x) = case(128, 784, 512, Granularity::PerTensor);
    set_num_threads(2);
    let d0 = pool_dispatches();
    let y = q.linear_pooled(&x, Some(&bias), None);
    assert_eq!(
        pool_dispatches() - d0,
        2,
        "the blocks' ranges, then the blocks: two hand-offs"
    );
    set_num_threads(1);
    assert_eq!(bits(&y), bits(&q.linear_whole(&x, Some(&bias), None)));
    set_num_threads(before);
}

#[test]
fn small_layers_stay_on_the_calling_thread() {
    let _threads = lock_thread_count();
    let before = crate::cpu::num_threads();
    // 64 rows, but a few microseconds of work: below one hand-off's worth
    let (q, bias, x) = case(64, 32, 16, Granularity::PerTensor);
    set_num_threads(2);
    assert!(q.linear_by_rows(&x, Some(&bias), None).is_none());
    let d0 = pool_dispatches();
    q.linear_pooled(&x, Some(&bias), None);
    assert_eq!(pool_dispatches(), d0);
    set_num_threads(before);
}

#[test]
fn blocks_end_on_whole_amx_chunks_and_cover_the_rows() {
    assert_eq!(
        (0..=2).map(|i| row_bound(i, 2, 128)).collect::<Vec<_>>(),
        [0, 64, 128]
    );
    assert_eq!(
        (0..=2).map(|i| row_bound(i, 2, 100)).collect::<Vec<_>>(),
        [0, 64, 100]
    );
    assert_eq!(
        (0..=3).map(|i| row_bound(i, 3, 10)).collect::<Vec<_>>(),
        [0, 3, 6, 10]
    );
    for m in 1..300 {
        for parts in 1..=m.min(5) {
            let b: Vec<usize> = (0..=parts).map(|i| row_bound(i, parts, m)).collect();
            assert_eq!((b[0], b[parts]), (0, m));
            assert!(
                b.windows(2).all(|w| w[0] < w[1]),
                "{m} rows in {parts}: {b:?}"
            );
        }
    }
}
