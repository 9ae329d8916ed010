//! Tests of the pooling kernels: the vectorised max pooling against the
//! definition, element for element.
use super::*;
use crate::cpu::threads::set_num_threads;

/// A small deterministic generator (xorshift), so the tests need nothing
/// beyond the kernels.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Values with many ties (a few distinct integers), some infinities,
    /// and a NaN now and then when `nans`.
    fn values(&mut self, n: usize, nans: bool) -> Vec<f64> {
        (0..n)
            .map(|_| match self.below(40) {
                0 if nans => f64::NAN,
                1 => f64::NEG_INFINITY,
                2 => f64::INFINITY,
                _ => self.below(6) as f64 - 2.0,
            })
            .collect()
    }
}

/// The definition of max pooling with PyTorch's geometry: output `(oy, ox)`
/// of a plane scans input rows `oy s0 - p0 + i d0` and columns
/// `ox s1 - p1 + j d1` (those inside the input) in order, keeping the first
/// maximum, or the first NaN.
#[allow(clippy::too_many_arguments)]
fn naive(
    x: &[f64],
    hw: [usize; 2],
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
    out: [usize; 2],
) -> (Vec<f64>, Vec<usize>) {
    let (mut vals, mut idx) = (vec![], vec![]);
    for plane in x.chunks(hw[0] * hw[1]) {
        for oy in 0..out[0] {
            for ox in 0..out[1] {
                let mut best: Option<(f64, usize)> = None;
                for i in 0..k[0] {
                    for j in 0..k[1] {
                        let r = (oy * s[0] + i * d[0]) as isize - p[0] as isize;
                        let c = (ox * s[1] + j * d[1]) as isize - p[1] as isize;
                        if r < 0 || c < 0 || r >= hw[0] as isize || c >= hw[1] as isize {
                            continue;
                        }
                        let at = r as usize * hw[1] + c as usize;
                        let v = plane[at];
                        best = match best {
                            Some((b, _)) if !(v > b || (v.is_nan() && !b.is_nan())) => best,
                            _ => Some((v, at)),
                        };
                    }
                }
                let (v, at) = best.expect("padding is at most half the kernel");
                vals.push(v);
                idx.push(at);
            }
        }
    }
    (vals, idx)
}

fn same_bits<E: Float>(a: &[E], b: &[E]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_f64().unwrap().to_bits() == y.to_f64().unwrap().to_bits())
}

/// Runs `max_forward` on `x` (as f64 and as f32) and checks it against
/// `max_argmax` + `gather` and, when given, the definition.
fn check(win: &PoolWindows, x: &[f64], expect: Option<(Vec<f64>, Vec<usize>)>, what: &str) {
    let (v, i) = max_forward(win, x);
    assert!(
        same_bits(&max_values(win, x), &v),
        "{what}: values only (f64)"
    );
    let i_ref = max_argmax(win, x);
    let v_ref = gather(x, &i_ref, win.in_plane(), win.out_plane());
    assert_eq!(&i[..], &i_ref[..], "{what}: positions (f64)");
    assert!(same_bits(&v, &v_ref), "{what}: values (f64)");
    if let Some((ve, ie)) = expect {
        assert_eq!(&i[..], &ie[..], "{what}: positions vs the definition");
        assert!(same_bits(&v, &ve), "{what}: values vs the definition");
    }
    let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    let (v32, i32) = max_forward(win, &x32);
    assert!(
        same_bits(&max_values(win, &x32), &v32),
        "{what}: values only (f32)"
    );
    let i32_ref = max_argmax(win, &x32);
    assert_eq!(&i32[..], &i32_ref[..], "{what}: positions (f32)");
    assert!(
        same_bits(
            &v32,
            &gather(&x32, &i32_ref, win.in_plane(), win.out_plane())
        ),
        "{what}: values (f32)"
    );
}

#[test]
fn vectorised_max_equals_the_definition_on_sliding_windows() {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let mut cases = 0;
    for case in 0..600 {
        let k = [1 + g.below(4), 1 + g.below(4)];
        let s = [1 + g.below(4), 1 + g.below(4)];
        let d = if case % 3 == 0 {
            [1 + g.below(3), 1 + g.below(3)]
        } else {
            [1, 1]
        };
        let p = [g.below(k[0] / 2 + 1), g.below(k[1] / 2 + 1)];
        let hw = [1 + g.below(11), 1 + g.below(37)];
        let ceil = g.below(2) == 1;
        let Some(win) = PoolWindows::sliding_with(hw, k, s, p, d, ceil) else {
            continue;
        };
        let planes = 1 + g.below(3);
        let x = g.values(planes * hw[0] * hw[1], case % 2 == 0);
        let expect = naive(&x, hw, k, s, p, d, [win.oh(), win.ow()]);
        check(
            &win,
            &x,
            Some(expect),
            &format!("case {case}: {hw:?} k {k:?} s {s:?} p {p:?} d {d:?} ceil {ceil}"),
        );
        cases += 1;
    }
    assert!(cases > 400, "only {cases} valid geometries");
}

#[test]
fn vectorised_max_equals_the_scan_on_adaptive_bins() {
    let mut g = Gen(7);
    for case in 0..200 {
        let hw = [1 + g.below(9), 1 + g.below(30)];
        let out = [1 + g.below(12), 1 + g.below(40)];
        let win = PoolWindows::adaptive(hw, out);
        let x = g.values(2 * hw[0] * hw[1], case % 2 == 1);
        check(&win, &x, None, &format!("adaptive {hw:?} -> {out:?}"));
    }
}

#[test]
fn vectorised_max_keeps_first_maxima_and_first_nans() {
    // One 2x2 window: ties keep the first, a NaN beats everything, the
    // first of two NaNs wins, an all -inf window keeps its first position.
    let win = PoolWindows::sliding([2, 2], [2, 2], [2, 2], [0, 0]).unwrap();
    let cases: [([f64; 4], usize); 5] = [
        ([1.0, 3.0, 3.0, 2.0], 1),
        ([5.0, 3.0, f64::NAN, 9.0], 2),
        ([f64::NAN, 3.0, f64::NAN, 9.0], 0),
        ([f64::NEG_INFINITY; 4], 0),
        ([-1.0, -1.0, -1.0, 0.0], 3),
    ];
    for (x, at) in cases {
        let (v, i) = max_forward(&win, &x);
        assert_eq!(max_values(&win, &x)[0].to_bits(), x[at].to_bits(), "{x:?}");
        assert_eq!(i[0], at, "{x:?}");
        assert_eq!(v[0].to_bits(), x[at].to_bits(), "{x:?}");
    }
}

#[test]
fn vectorised_max_is_the_same_for_any_thread_count() {
    let _threads = crate::cpu::threads::lock_thread_count();
    let mut g = Gen(11);
    // LeNet's two poolings and ResNet's stem pooling, several chunks each.
    for (planes, hw, k, s, p) in [
        (40, [28, 28], 2, 2, 0),
        (70, [10, 10], 2, 2, 0),
        (12, [56, 56], 3, 2, 1),
        // ResNet-18's stem pooling at batch 1 (two chunks of 32 planes in
        // `max_values`), and a plane count that leaves a partial chunk.
        (64, [16, 16], 3, 2, 1),
        (45, [16, 16], 3, 2, 1),
        // Stride 1 (windows 1 apart), rows of 37: four 8-output blocks
        // and a tail.
        (5, [9, 39], 3, 1, 0),
    ] {
        let win = PoolWindows::sliding(hw, [k, k], [s, s], [p, p]).unwrap();
        let x: Vec<f32> = g
            .values(planes * hw[0] * hw[1], true)
            .iter()
            .map(|&v| v as f32)
            .collect();
        set_num_threads(1);
        let (v1, i1) = max_forward(&win, &x);
        let m1 = max_values(&win, &x);
        // The scalar scan's positions and values (the AVX2 run kernel on
        // CPUs without AVX-512: stride 2, several 8-output blocks per row).
        let i_ref = max_argmax(&win, &x);
        assert_eq!(&i1[..], &i_ref[..], "{hw:?} k {k}: positions");
        let v_ref = gather(&x, &i_ref, win.in_plane(), win.out_plane());
        assert!(same_bits(&v1, &v_ref), "{hw:?} k {k}: values");
        assert!(same_bits(&m1, &v_ref), "{hw:?} k {k}: values only");
        set_num_threads(2);
        let (v2, i2) = max_forward(&win, &x);
        assert!(same_bits(&v1, &v2) && i1 == i2, "{hw:?} k {k}");
        assert!(
            same_bits(&m1, &max_values(&win, &x)),
            "{hw:?} k {k}: values only"
        );
    }
}

/// ResNet-18's pooling after the stem at batch 1 (`[1, 64, 16, 16]`, 3x3
/// stride 2, padding 1). With AVX-512F the stride-2 kernel (`max_s2`)
/// takes it in about 8 µs: one chunk of `MAX_CHUNK_ELEMS` on the calling
/// thread, and a batch of four images in four chunks, shared. On the AVX2
/// class the position-tracking kernel (about 33 µs) is shared with the
/// second thread at batch 1 (its chunks of `RUNS_CHUNK_ELEMS`), a pooling
/// of a few planes is not. Below them (`FORGE_CPU_CLASS=portable`) the
/// separable kernel keeps its own chunks and the check does not apply.
#[test]
fn stem_pooling_at_batch_one_splits_over_threads() {
    let _threads = crate::cpu::threads::lock_thread_count();
    let win = PoolWindows::sliding([16, 16], [3, 3], [2, 2], [1, 1]).unwrap();
    let dispatches = |planes: usize| {
        let x = vec![0.5f32; planes * 256];
        set_num_threads(2);
        let before = crate::cpu::threads::pool_dispatches();
        let _ = max_values(&win, &x);
        let after = crate::cpu::threads::pool_dispatches();
        set_num_threads(0);
        after - before
    };
    if super::max_s2::applies::<f32>(&win) {
        assert_eq!(dispatches(64), 0);
        assert_eq!(dispatches(256), 1);
        return;
    }
    if !max_rows::avx2_runs::<f32>(&win, &max_rows::Run::of(&win)) {
        return;
    }
    assert_eq!(dispatches(64), 1);
    assert_eq!(dispatches(8), 0);
}

#[test]
fn runs_cover_the_unclipped_columns() {
    let win = PoolWindows::sliding([7, 9], [3, 3], [2, 2], [1, 1]).unwrap();
    // Columns: (0, 2), (1, 4), (3, 6), (5, 8), (7, 9): 1..4 are full.
    let run = max_rows::Run::of(&win);
    assert_eq!(
        run,
        max_rows::Run {
            lo: 1,
            hi: 4,
            c0: 1,
            step: 2,
            taps: 3
        }
    );
}

/// The 2x2 stride-2 kernel (`max_2x2`, AVX-512F) against the definition,
/// in every CPU class (the narrower ones run `max_rows`' loops), over
/// planes whose output rows end inside and at the edges of its 16-output
/// blocks and of their 8-position halves, odd input sizes (a last row or
/// column no window reads), and values with ties, signed zeros,
/// infinities and NaNs.
#[test]
fn two_by_two_kernel_equals_the_definition_in_every_class() {
    use crate::cpu::class::{pin_thread, Class};
    let _threads = crate::cpu::threads::lock_thread_count();
    set_num_threads(1);
    let mut g = Gen(0x2222);
    let mut ran_2x2 = false;
    for (case, (h, w)) in [
        (2, 2),
        (3, 3),
        (28, 28),
        (10, 10),
        (5, 17),
        (4, 31),
        (6, 32),
        (3, 33),
        (2, 34),
        (7, 63),
        (4, 66),
        (2, 97),
    ]
    .into_iter()
    .enumerate()
    {
        let win = PoolWindows::sliding([h, w], [2, 2], [2, 2], [0, 0]).unwrap();
        let planes = 1 + case % 3;
        let x: Vec<f64> = g
            .values(planes * h * w, case % 2 == 0)
            .into_iter()
            .map(|v| if v == 0.0 && g.below(2) == 0 { -0.0 } else { v })
            .collect();
        let (ve, ie) = naive(&x, [h, w], [2, 2], [2, 2], [0, 0], [1, 1], [h / 2, w / 2]);
        let ve: Vec<f32> = ve.iter().map(|&v| v as f32).collect();
        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        for class in [Class::Portable, Class::Avx2, Class::Avx512] {
            let old = pin_thread(Some(class));
            ran_2x2 |= max_2x2::applies::<f32>(&win);
            let (v, i) = max_forward(&win, &x32);
            let m = max_values(&win, &x32);
            pin_thread(old);
            let what = format!("{h}x{w} x {planes} in {class:?}");
            assert_eq!(&i[..], &ie[..], "{what}: positions");
            assert!(same_bits(&v, &ve), "{what}: values");
            assert!(same_bits(&m, &ve), "{what}: values only");
        }
    }
    // On a CPU without AVX-512F the narrower loops ran in every class.
    let _ = ran_2x2;
}

/// The stride-2 values kernel (`max_s2`, AVX-512F) on planes wide and tall
/// enough for several registers per padded row and rows that share a
/// register: values equal the definition's, bit for bit (ties of `0` and
/// `-0`, infinities, NaNs with distinct payloads, so the first NaN shows),
/// for kernels 1-5, every padding up to half the kernel, floor and ceil
/// mode, odd and even widths; and the kernel does take ResNet's stem
/// pooling where the CPU has AVX-512F.
#[test]
fn stride_two_values_equal_the_definition() {
    let stem = PoolWindows::sliding([16, 16], [3, 3], [2, 2], [1, 1]).unwrap();
    let avx512 = crate::cpu::class::cpu_has!("avx512f");
    assert_eq!(super::max_s2::applies::<f32>(&stem), avx512);
    assert!(!super::max_s2::applies::<f64>(&stem));
    let mut g = Gen(0x2545_f491_4f6c_dd1d);
    let mut taken = 0;
    for case in 0..300 {
        let k = [1 + g.below(5), 1 + g.below(5)];
        let p = [g.below(k[0] / 2 + 1), g.below(k[1] / 2 + 1)];
        let hw = [1 + g.below(40), 1 + g.below(70)];
        let ceil = case % 2 == 1;
        let Some(win) = PoolWindows::sliding_with(hw, k, [2, 2], p, [1, 1], ceil) else {
            continue;
        };
        taken += usize::from(super::max_s2::applies::<f32>(&win));
        let planes = 1 + g.below(3);
        let n = planes * hw[0] * hw[1];
        let x: Vec<f32> = (0..n)
            .map(|i| match g.below(50) {
                0 => f32::from_bits(0x7fc0_0000 | i as u32),
                1 => -0.0,
                2 => 0.0,
                3 => f32::NEG_INFINITY,
                _ => g.below(7) as f32 - 3.0,
            })
            .collect();
        let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let (want, at) = naive(&x64, hw, k, [2, 2], p, [1, 1], [win.oh(), win.ow()]);
        let got = max_values(&win, &x);
        let ip = hw[0] * hw[1];
        let op = win.out_plane();
        for (o, &v) in got.iter().enumerate() {
            // the definition's position, read from the f32 input (a NaN's
            // payload does not survive the trip through f64 unchanged)
            let src = x[o / op * ip + at[o]];
            assert_eq!(
                v.to_bits(),
                src.to_bits(),
                "case {case}: {hw:?} k {k:?} p {p:?} ceil {ceil}, output {o} (want {})",
                want[o]
            );
        }
    }
    assert!(
        !avx512 || taken > 200,
        "the stride-2 kernel took {taken} cases"
    );
}
