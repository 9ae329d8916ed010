//! Tests of the direct small-channel convolution against the definition.
use super::*;
use crate::base::Element;
use crate::cpu::threads::set_num_threads;

/// Deterministic values in [-1, 1) (xorshift).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// The input element tap `(i, j)` of output `(oy, ox)` meets, if inside.
fn at(g: &ConvGeom, b: usize, c: usize, oy: usize, ox: usize, i: usize, j: usize) -> Option<usize> {
    let y = (oy + i).checked_sub(g.padding[0]).filter(|&y| y < g.h)?;
    let x = (ox + j).checked_sub(g.padding[1]).filter(|&x| x < g.w)?;
    Some(((b * g.c + c) * g.h + y) * g.w + x)
}

/// The definition: `(y, sum of |terms| per output)` and
/// `(gw, sum of |terms| per weight)`.
#[allow(clippy::type_complexity)]
fn naive(
    g: &ConvGeom,
    x: &[f64],
    w: &[f64],
    gy: &[f64],
) -> ((Vec<f64>, Vec<f64>), (Vec<f64>, Vec<f64>)) {
    let (l, taps) = (g.oh * g.ow, g.c * g.kh * g.kw);
    let (mut y, mut ya) = (vec![0.0; g.n * g.o * l], vec![0.0; g.n * g.o * l]);
    let (mut gw, mut gwa) = (vec![0.0; g.o * taps], vec![0.0; g.o * taps]);
    for b in 0..g.n {
        for o in 0..g.o {
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    let k = (b * g.o + o) * l + oy * g.ow + ox;
                    for c in 0..g.c {
                        for i in 0..g.kh {
                            for j in 0..g.kw {
                                if let Some(p) = at(g, b, c, oy, ox, i, j) {
                                    let t = (c * g.kh + i) * g.kw + j;
                                    y[k] += w[o * taps + t] * x[p];
                                    ya[k] += (w[o * taps + t] * x[p]).abs();
                                    gw[o * taps + t] += gy[k] * x[p];
                                    gwa[o * taps + t] += (gy[k] * x[p]).abs();
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    ((y, ya), (gw, gwa))
}

/// LeNet's first convolution and shapes that reach every branch: several
/// output-channel blocks, a scalar tail (`oh * ow` not a multiple of 16),
/// several input channels, padding on one axis, 1x1 and 7x1 kernels.
fn geometries() -> Vec<ConvGeom> {
    let geo = |x, w, p| ConvGeom::new(x, w, [1, 1], p, [1, 1], 1).unwrap();
    vec![
        geo([5, 1, 28, 28], [6, 1, 5, 5], [2, 2]),
        geo([3, 3, 9, 13], [16, 3, 3, 3], [1, 1]),
        geo([6, 2, 10, 8], [9, 2, 7, 1], [3, 0]),
        geo([2, 1, 8, 9], [1, 1, 1, 1], [0, 0]),
        geo([9, 2, 12, 12], [3, 2, 4, 2], [0, 1]),
        // Padding wider than the kernel's reach: whole zero rows and columns.
        geo([2, 1, 3, 9], [2, 1, 2, 2], [4, 6]),
    ]
}

fn close(got: f64, want: f64, scale: f64, tol: f64) -> bool {
    (got - want).abs() <= tol * scale.max(f64::MIN_POSITIVE)
}

#[test]
fn direct_convolution_matches_the_definition() {
    for g in geometries() {
        assert!(applies(&g), "{g:?}");
        let (l, taps) = (g.oh * g.ow, g.c * g.kh * g.kw);
        let x = values(g.n * g.c * g.h * g.w, 1);
        let w = values(g.o * taps, 2);
        let bias = values(g.o, 3);
        let gy = values(g.n * g.o * l, 4);
        let ((y, ya), (gw, gwa)) = naive(&g, &x, &w, &gy);
        // f64: a few roundings per term, relative to the sum of |terms|.
        let y64 = forward(&g, &x, &w, Some(&bias));
        for (k, &v) in y64.iter().enumerate() {
            let o = k / l % g.o;
            assert!(
                close(v, y[k] + bias[o], ya[k] + bias[o].abs(), 1e-14),
                "{g:?} y[{k}]"
            );
        }
        let gw64 = backward_weight(&g, &x, &gy);
        for (k, &v) in gw64.iter().enumerate() {
            assert!(
                close(v, gw[k], gwa[k], 1e-13),
                "{g:?} gw[{k}]: {v} vs {}",
                gw[k]
            );
        }
        // f32: the same within n terms' worth of f32 roundings.
        let f = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<f32>>();
        let y32 = forward(&g, &f(&x), &f(&w), Some(&f(&bias)));
        for (k, &v) in y32.iter().enumerate() {
            let o = k / l % g.o;
            let tol = (taps + 2) as f64 * 1.2e-7;
            assert!(
                close(v as f64, y[k] + bias[o], ya[k] + bias[o].abs(), tol),
                "{g:?} f32 y[{k}]"
            );
        }
        let gw32 = backward_weight(&g, &f(&x), &f(&gy));
        for (k, &v) in gw32.iter().enumerate() {
            let tol = (g.n * l + 2) as f64 * 1.2e-7;
            assert!(close(v as f64, gw[k], gwa[k], tol), "{g:?} f32 gw[{k}]");
        }
    }
}

#[test]
fn direct_convolution_is_the_same_for_any_thread_count() {
    let _threads = crate::cpu::threads::lock_thread_count();
    let g = ConvGeom::new([13, 1, 28, 28], [6, 1, 5, 5], [1, 1], [2, 2], [1, 1], 1).unwrap();
    let x: Vec<f32> = values(g.n * 784, 5).iter().map(|&v| v as f32).collect();
    let w: Vec<f32> = values(150, 6).iter().map(|&v| v as f32).collect();
    let gy: Vec<f32> = values(g.n * 6 * 784, 7).iter().map(|&v| v as f32).collect();
    let bits = |v: &[f32]| v.iter().map(|a| a.to_bits()).collect::<Vec<_>>();
    set_num_threads(1);
    let (y1, gw1) = (forward(&g, &x, &w, None), backward_weight(&g, &x, &gy));
    set_num_threads(2);
    let (y2, gw2) = (forward(&g, &x, &w, None), backward_weight(&g, &x, &gy));
    let (y3, gw3) = (forward(&g, &x, &w, None), backward_weight(&g, &x, &gy));
    assert_eq!(bits(&y1), bits(&y2));
    assert_eq!(bits(&y2), bits(&y3));
    assert_eq!(bits(&gw1), bits(&gw2));
    assert_eq!(bits(&gw2), bits(&gw3));
}

#[test]
fn applies_only_to_small_unit_stride_convolutions() {
    let geo = |x, w, s, d, grp| ConvGeom::new(x, w, s, [1, 1], d, grp).unwrap();
    assert!(applies(&geo(
        [1, 3, 8, 8],
        [16, 3, 3, 3],
        [1, 1],
        [1, 1],
        1
    )));
    assert!(!applies(&geo(
        [1, 4, 8, 8],
        [16, 4, 3, 3],
        [1, 1],
        [1, 1],
        1
    )));
    assert!(!applies(&geo(
        [1, 3, 8, 8],
        [17, 3, 3, 3],
        [1, 1],
        [1, 1],
        1
    )));
    assert!(!applies(&geo(
        [1, 3, 16, 16],
        [16, 3, 3, 3],
        [2, 2],
        [1, 1],
        1
    )));
    assert!(!applies(&geo(
        [1, 3, 16, 16],
        [16, 3, 3, 3],
        [1, 1],
        [2, 2],
        1
    )));
    assert!(!applies(&geo(
        [1, 2, 8, 8],
        [4, 1, 3, 3],
        [1, 1],
        [1, 1],
        2
    )));
    assert!(!applies(&geo(
        [1, 1, 6, 6],
        [4, 1, 3, 3],
        [1, 1],
        [1, 1],
        1
    )));
}

/// Every kernel this CPU has, the portable one first.
fn kernels() -> Vec<Kernel> {
    Kernel::all()
        .into_iter()
        .filter(|k| k.available())
        .collect()
}

#[test]
fn the_best_kernel_is_the_widest_available() {
    let best = Kernel::best();
    assert!(best.available());
    assert_eq!(Some(&best), kernels().last());
    #[cfg(target_arch = "x86_64")]
    if crate::cpu::class::cpu_has!("avx2") && crate::cpu::class::cpu_has!("fma") {
        assert!(matches!(best, Kernel::Avx2 | Kernel::Avx512), "{best:?}");
    }
}

#[test]
fn intrinsic_loops_give_the_portable_bits() {
    let f = |n, seed| {
        values(n, seed)
            .iter()
            .map(|&v| v as f32)
            .collect::<Vec<f32>>()
    };
    let (s, wp) = (f(600, 8), f(40 * OB, 9));
    let starts: Vec<usize> = (0..40).map(|t| t * 13 % 500).collect();
    let rows: Vec<Vec<f32>> = (0..OB).map(|q| f(101, 10 + q as u64)).collect();
    let gy: [&[f32]; OB] = std::array::from_fn(|q| &rows[q][..]);
    let mut want = [[0.0f32; LANES]; OB];
    forward_block_portable(&s, &starts, &wp, OB, 48, &mut want);
    let (mut want_acc, mut want_tail) = ([[0.25f32; LANES]; OB], [0.5f32; OB]);
    wgrad_tap_portable(101, &s, &gy, &mut want_acc, &mut want_tail);
    for k in kernels() {
        for nq in 1..=OB {
            let mut got = [[0.0f32; LANES]; OB];
            forward_block(k, &s, &starts, &wp, OB, 48, nq, &mut got);
            assert_eq!(got[..nq], want[..nq], "{k:?} nq {nq}");
            let (mut acc, mut tail) = ([[0.25f32; LANES]; OB], [0.5f32; OB]);
            wgrad_tap(k, 101, &s, &gy, nq, &mut acc, &mut tail);
            assert_eq!(acc[..nq], want_acc[..nq], "{k:?} nq {nq}");
            assert_eq!(tail[..nq], want_tail[..nq], "{k:?} nq {nq}");
        }
    }
    // Two taps in one pass: each tap's sums as alone (tap b's stream
    // starts 37 values on, so the two differ everywhere).
    let (mut want_b, mut want_tail_b) = ([[0.75f32; LANES]; OB], [-0.5f32; OB]);
    wgrad_tap_portable(101, &s[37..], &gy, &mut want_b, &mut want_tail_b);
    let mut paired = 0;
    for k in kernels() {
        for nq in 1..=OB {
            let mut acc = [[[0.25f32; LANES]; OB], [[0.75f32; LANES]; OB]];
            let mut tail = [[0.5f32; OB], [-0.5f32; OB]];
            if !wgrad_pair(k, 101, [&s[..], &s[37..]], &gy, nq, &mut acc, &mut tail) {
                continue;
            }
            paired += 1;
            assert_eq!(acc[0][..nq], want_acc[..nq], "{k:?} nq {nq}: tap a");
            assert_eq!(tail[0][..nq], want_tail[..nq], "{k:?} nq {nq}: tap a");
            assert_eq!(acc[1][..nq], want_b[..nq], "{k:?} nq {nq}: tap b");
            assert_eq!(tail[1][..nq], want_tail_b[..nq], "{k:?} nq {nq}: tap b");
        }
    }
    // Two forward blocks in one pass: each as alone.
    let mut want_next = [[0.0f32; LANES]; OB];
    forward_block_portable(&s, &starts, &wp, OB, 48 + LANES, &mut want_next);
    for k in kernels() {
        for nq in 1..=OB {
            let mut got = [[[0.0f32; LANES]; OB]; 2];
            if !forward_pair(k, &s, &starts, &wp, OB, 48, nq, &mut got) {
                continue;
            }
            paired += 1;
            assert_eq!(got[0][..nq], want[..nq], "{k:?} nq {nq}: first block");
            assert_eq!(got[1][..nq], want_next[..nq], "{k:?} nq {nq}: second block");
        }
    }
    // With AVX-512F the pair loops ran for every block width, 1..=8
    // channels (each its own instantiation).
    if kernels().contains(&Kernel::Avx512) {
        assert_eq!(paired, 2 * OB);
    }
}

/// Shapes for the kernels' bit identity: output channel counts 1 to 16
/// (not only multiples of 8: every pass width of the AVX2 kernel), and
/// `oh * ow` with tails past the last 16 and the last 8 lanes.
fn kernel_geometries() -> Vec<ConvGeom> {
    let geo = |x, w, p| ConvGeom::new(x, w, [1, 1], p, [1, 1], 1).unwrap();
    vec![
        // LeNet's first convolution: 6 channels, l = 784 (no tail).
        geo([5, 1, 28, 28], [6, 1, 5, 5], [2, 2]),
        // l = 81: one lane past the last block (and the last 8).
        geo([3, 1, 9, 9], [5, 1, 3, 3], [1, 1]),
        // l = 77: 13 past the last 16, 5 past the last 8.
        geo([2, 2, 12, 9], [7, 2, 2, 3], [0, 0]),
        // l = 100: 4 past the last 16.
        geo([5, 3, 10, 10], [11, 3, 3, 3], [1, 1]),
        // l = 72: 8 past the last 16, none past the last 8.
        geo([2, 1, 8, 9], [3, 1, 1, 1], [0, 0]),
        geo([2, 1, 10, 10], [4, 1, 3, 3], [0, 1]),
        geo([1, 1, 8, 8], [1, 1, 1, 1], [0, 0]),
        geo([2, 2, 11, 11], [2, 2, 3, 3], [0, 0]),
        geo([3, 3, 9, 13], [16, 3, 3, 3], [1, 1]),
        geo([6, 1, 10, 9], [8, 1, 5, 1], [2, 0]),
        geo([4, 2, 9, 9], [9, 2, 2, 2], [0, 0]),
        geo([2, 3, 9, 8], [14, 3, 3, 7], [1, 3]),
        geo([9, 1, 12, 12], [13, 1, 4, 2], [0, 1]),
    ]
}

/// Every kernel of this CPU gives the portable loops' bits for the whole
/// forward and weight gradient, `f32` and `f64`, at 1 and 2 threads.
#[test]
fn every_kernel_gives_the_portable_bits() {
    fn check<E: Float>(g: &ConvGeom, seed: u64) {
        let (l, taps) = (g.oh * g.ow, g.c * g.kh * g.kw);
        let v = |n, s| {
            values(n, s)
                .into_iter()
                .map(<E as Element>::from_f64)
                .collect::<Vec<E>>()
        };
        let x = v(g.n * g.c * g.h * g.w, seed);
        let w = v(g.o * taps, seed + 1);
        let bias = v(g.o, seed + 2);
        let gy = v(g.n * g.o * l, seed + 3);
        let bits = |v: &[E]| {
            v.iter()
                .map(|&a| Element::to_f64(a).to_bits())
                .collect::<Vec<_>>()
        };
        // The first element whose bits differ, if any.
        let differ = |a: &[u64], b: &[u64]| {
            (a.len() != b.len())
                .then_some(a.len())
                .or_else(|| (0..a.len()).find(|&i| a[i] != b[i]))
        };
        let y0 = bits(&forward_by(Kernel::Portable, g, &x, &w, Some(&bias)));
        let gw0 = bits(&backward_weight_by(Kernel::Portable, g, &x, &gy));
        for threads in [1, 2] {
            set_num_threads(threads);
            for k in kernels() {
                let y = bits(&forward_by(k, g, &x, &w, Some(&bias)));
                let at = differ(&y, &y0);
                assert_eq!(at, None, "{k:?} {threads} threads y {g:?}");
                let gw = bits(&backward_weight_by(k, g, &x, &gy));
                let at = differ(&gw, &gw0);
                assert_eq!(at, None, "{k:?} {threads} threads gw {g:?}");
            }
            let at = differ(&bits(&forward(g, &x, &w, Some(&bias))), &y0);
            assert_eq!(at, None, "best kernel y {g:?}");
            let at = differ(&bits(&backward_weight(g, &x, &gy)), &gw0);
            assert_eq!(at, None, "best kernel gw {g:?}");
        }
    }
    let _threads = crate::cpu::threads::lock_thread_count();
    let mut seen = [false; 2 * OB + 1];
    for (i, g) in kernel_geometries().iter().enumerate() {
        assert!(applies(g), "{g:?}");
        seen[g.o] = true;
        check::<f32>(g, 20 + 4 * i as u64);
        check::<f64>(g, 80 + 4 * i as u64);
    }
    assert!(
        seen[1..=9].iter().all(|&s| s),
        "output channel counts 1..=9"
    );
}
