//! The tap-class paths against the dense im2col paths. With small integer
//! inputs every sum is exact in f64 whatever its order, so the two must be
//! exactly equal (the dense paths are checked against window sums in
//! `im2col/tests.rs`).
use super::super::{backward_input_batched, backward_weight_batched, forward_batched};
use super::*;

fn ramp(n: usize, a: usize, m: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * a) % m) as f64 - (m / 2) as f64)
        .collect()
}

fn geom(x: [usize; 4], wt: [usize; 4], s: [usize; 2], p: [usize; 2], d: [usize; 2]) -> ConvGeom {
    ConvGeom::new(x, wt, s, p, d, 1).unwrap()
}

/// The planes of ResNet-18 at 32x32 get the classes the module docs
/// describe; larger planes keep the dense path.
#[test]
fn plan_follows_the_plane_size() {
    let k3 = |hw: usize, s: usize| geom([8, 8, hw, hw], [8, 8, 3, 3], [s, s], [1, 1], [1, 1]);
    // 1x1 plane: the centre tap only, one class.
    let one = k3(1, 1).tap_plan().unwrap();
    assert_eq!(
        one,
        vec![TapClass {
            taps: vec![4],
            pos: vec![0]
        }]
    );
    // 2x2 -> 1x1 with stride 2: the four taps of the lower right.
    let down = k3(2, 2).tap_plan().unwrap();
    assert_eq!(
        down,
        vec![TapClass {
            taps: vec![4, 5, 7, 8],
            pos: vec![0]
        }]
    );
    // 2x2: one class per position, four taps each.
    let two = k3(2, 2 - 1).tap_plan().unwrap();
    let taps: Vec<Vec<usize>> = two.iter().map(|c| c.taps.clone()).collect();
    assert_eq!(
        taps,
        [
            vec![4, 5, 7, 8],
            vec![3, 4, 6, 7],
            vec![1, 2, 4, 5],
            vec![0, 1, 3, 4]
        ]
    );
    assert!(two.iter().enumerate().all(|(p, c)| c.pos == [p]));
    // ... but not for a batch of one image (one column per class).
    let b1 = geom([1, 8, 2, 2], [8, 8, 3, 3], [1, 1], [1, 1], [1, 1]).tap_plan();
    assert_eq!(b1, None);
    // A 1x1 plane of one image: copying the centre tap's weights would cost
    // more than the dense matrix-vector product saves.
    let b1_one = geom([1, 8, 1, 1], [8, 8, 3, 3], [1, 1], [1, 1], [1, 1]).tap_plan();
    assert_eq!(b1_one, None);
    // 4x4 -> 2x2 (25 of 36 products useful) and 4x4, 8x8: dense.
    assert_eq!(k3(4, 2).tap_plan(), None);
    assert_eq!(k3(4, 1).tap_plan(), None);
    assert_eq!(k3(8, 1).tap_plan(), None);
    // The 7x7 stride-2 stem on 32x32.
    assert_eq!(
        geom([1, 3, 32, 32], [4, 3, 7, 7], [2, 2], [3, 3], [1, 1]).tap_plan(),
        None
    );
}

/// The weight gradient takes the classes only for single-class plans (1x1
/// planes, or the stride-2 step from 2x2 to 1x1): a split plan (2x2
/// planes, stride 1) takes the dense path.
#[test]
fn weight_gradient_takes_single_class_plans_only() {
    let k3 = |hw: usize, s: usize| geom([16, 8, hw, hw], [8, 8, 3, 3], [s, s], [1, 1], [1, 1]);
    for (g, single) in [(k3(1, 1), true), (k3(2, 2), true), (k3(2, 1), false)] {
        let plan = g.tap_plan().expect("a tap plan");
        assert_eq!(plan.len() == 1, single, "{g:?}");
        let want = single.then_some(plan);
        assert_eq!(g.weight_grad_plan(), want, "{g:?}");
    }
    assert_eq!(k3(4, 1).weight_grad_plan(), None);
}

/// Forward, input gradient (with and without bias) and weight gradient
/// over forced class splits (grouped, union) and the chosen plan, whole
/// batch and one image per chunk, equal the dense paths exactly.
#[test]
fn class_paths_equal_the_dense_paths() {
    let cases = [
        geom([2, 3, 1, 1], [4, 3, 3, 3], [1, 1], [1, 1], [1, 1]),
        geom([3, 2, 2, 2], [4, 2, 3, 3], [1, 1], [1, 1], [1, 1]),
        geom([2, 3, 2, 2], [5, 3, 3, 3], [2, 2], [1, 1], [1, 1]),
        geom([2, 2, 4, 4], [3, 2, 3, 3], [2, 2], [1, 1], [1, 1]),
        geom([2, 2, 3, 5], [3, 2, 3, 2], [2, 3], [2, 2], [2, 1]),
        geom([2, 2, 1, 2], [3, 2, 1, 1], [1, 1], [1, 1], [1, 1]),
        geom([3, 3, 6, 5], [4, 3, 3, 3], [1, 1], [1, 1], [1, 1]),
    ];
    for g in cases {
        let taps = g.kh * g.kw;
        let x = ramp(g.n * g.c * g.h * g.w, 37, 11);
        let w = ramp(g.o * g.c * taps, 13, 7);
        let gy = ramp(g.n * g.o * g.l(), 11, 7);
        let bias = ramp(g.o, 5, 3);
        let cbias = ramp(g.c, 3, 5);
        let y = forward_batched(&g, &x, &w, Some(&bias), usize::MAX);
        let gx = backward_input_batched(&g, &gy, &w, None, usize::MAX);
        let gxb = backward_input_batched(&g, &gy, &w, Some(&cbias), usize::MAX);
        let gw = backward_weight_batched(&g, &x, &gy, usize::MAX);
        let plans = [
            Some(g.classes_grouped()),
            Some(g.classes_union()),
            g.tap_plan(),
        ];
        for classes in plans.into_iter().flatten() {
            for budget in [usize::MAX, 1] {
                let at = format!("{g:?} {classes:?} budget {budget}");
                let yc = forward_classes(&g, &classes, &x, &w, Some(&bias), budget);
                assert_eq!(yc, y, "forward {at}");
                let (yk, kept) = forward_classes_keeping(&g, &classes, &x, &w, Some(&bias), budget);
                assert_eq!(yk, y, "forward keeping {at}");
                for kept in [None, Some(&kept)] {
                    let gxc = backward_input_classes(&g, &classes, &gy, &w, None, budget, kept);
                    assert_eq!(gxc, gx, "input gradient {at} kept {}", kept.is_some());
                    let gxbc =
                        backward_input_classes(&g, &classes, &gy, &w, Some(&cbias), budget, kept);
                    assert_eq!(gxbc, gxb, "input gradient with bias {at}");
                }
                let gwc = backward_weight_classes(&g, &classes, &x, &gy, budget);
                assert_eq!(gwc, gw, "weight gradient {at}");
            }
        }
    }
}

/// In f32 with values that round, the forward over the used taps' copied
/// weights has the bits of the products over the weight read in place (the
/// path before the copy), at 1 and 2 threads: narrow products (batch 16 on
/// 1x1 and 2x2 planes), packed ones (batch 40), matrix-vector ones (batch
/// 1, one output channel), and a last chunk of one image.
#[test]
fn copied_tap_weights_give_the_bits_of_the_weight_in_place() {
    let _threads = crate::cpu::threads::lock_thread_count();
    let cases = [
        (
            geom([16, 24, 1, 1], [20, 24, 3, 3], [1, 1], [1, 1], [1, 1]),
            usize::MAX,
        ),
        (
            geom([16, 12, 2, 2], [18, 12, 3, 3], [1, 1], [1, 1], [1, 1]),
            usize::MAX,
        ),
        (
            geom([40, 8, 2, 2], [17, 8, 3, 3], [1, 1], [1, 1], [1, 1]),
            usize::MAX,
        ),
        (
            geom([9, 48, 1, 1], [1, 48, 3, 3], [1, 1], [1, 1], [1, 1]),
            usize::MAX,
        ),
        (
            geom([9, 40, 2, 2], [6, 40, 3, 3], [1, 1], [1, 1], [1, 1]),
            40 * 4 * 8,
        ),
        (
            geom([9, 64, 1, 1], [7, 64, 3, 3], [1, 1], [1, 1], [1, 1]),
            64 * 8,
        ),
    ];
    let mut rng = crate::tensor::Rng::new(7);
    for (g, budget) in cases {
        let taps = g.kh * g.kw;
        let mut normal = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.normal() as f32).collect() };
        let x = normal(g.n * g.c * g.h * g.w);
        let w = normal(g.o * g.c * taps);
        let bias = normal(g.o);
        let classes = g.tap_plan().expect("a tap plan");
        for threads in [1, 2] {
            crate::cpu::set_num_threads(threads);
            let old = forward_over(
                &g,
                &classes,
                &x,
                &TapsPrepared::in_place(&g, &classes, &w, budget),
                Some(&bias),
                budget,
            );
            let (new, _) = forward_classes_keeping(&g, &classes, &x, &w, Some(&bias), budget);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&new),
                bits(&old),
                "{g:?} budget {budget} threads {threads}"
            );
        }
    }
}
