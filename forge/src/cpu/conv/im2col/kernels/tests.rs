//! Tests of the AVX-512 column-transform loops against the portable ones.
use super::fast;
use crate::cpu::conv::geom::ConvGeom;
use std::mem::MaybeUninit;

/// Values whose sums round differently in another order.
fn frac(n: usize, a: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * a) % 29) as f32 * 0.173 - 2.3 + (i % 7) as f32 * 1e-3)
        .collect()
}

/// `(x [h, w], kernel, stride, padding, dilation)`.
type Case = ([usize; 2], [usize; 2], [usize; 2], [usize; 2], [usize; 2]);

/// The cases: LeNet-5's 5x5 on
/// 14x14 (runs of 10), 3x3 padding 1 on 8x8, rows wider than 16 (two
/// blocks, a tail of 5), padding wider than the kernel reach, a 1x1
/// kernel, a 1-wide plane, stride 2 by rows, dilation, a 17-wide kernel
/// (over [`super::MAX_KW`]: the portable loop), and stride 2 by columns
/// (no run copy).
const CASES: [Case; 10] = [
    ([14, 14], [5, 5], [1, 1], [0, 0], [1, 1]),
    ([8, 8], [3, 3], [1, 1], [1, 1], [1, 1]),
    ([5, 37], [3, 4], [1, 1], [1, 2], [1, 1]),
    ([3, 4], [3, 3], [1, 1], [3, 4], [1, 1]),
    ([6, 21], [1, 1], [1, 1], [0, 0], [1, 1]),
    ([9, 1], [3, 1], [1, 1], [1, 0], [1, 1]),
    ([11, 19], [3, 3], [2, 1], [1, 1], [1, 1]),
    ([10, 23], [3, 3], [1, 1], [2, 3], [2, 3]),
    ([4, 40], [2, 17], [1, 1], [1, 8], [1, 1]),
    ([9, 20], [3, 3], [1, 2], [1, 1], [1, 1]),
];

fn geom(c: Case) -> ConvGeom {
    let (hw, k, s, p, d) = c;
    ConvGeom::new([1, 1, hw[0], hw[1]], [1, 1, k[0], k[1]], s, p, d, 1).unwrap()
}

/// The im2col rows of the general path with the AVX-512 run copy have
/// the bits of the portable copy and write every element (sentinels
/// differ), for every tap of every case.
#[test]
fn copied_runs_equal_the_portable_copy() {
    if !fast::<f32>() {
        eprintln!("no AVX-512 in this CPU class: only the portable loop runs");
    }
    for case in CASES {
        let g = geom(case);
        let plane = frac(g.h * g.w, 37);
        let inside = g.inside_table();
        let l = g.oh * g.ow;
        for t in 0..g.kh * g.kw {
            let mut a = vec![MaybeUninit::new(f32::NAN); l];
            let mut b = vec![MaybeUninit::new(-7.5f32); l];
            g.im2col_row_general(&plane, t, inside[t % g.kw], &mut a, fast::<f32>());
            g.im2col_row_general(&plane, t, inside[t % g.kw], &mut b, false);
            let bits = |v: &[MaybeUninit<f32>]| -> Vec<u32> {
                v.iter()
                    // SAFETY: initialised with sentinels above; the paths
                    // only write `f32`s over them.
                    .map(|x| unsafe { x.assume_init() }.to_bits())
                    .collect()
            };
            assert_eq!(bits(&a), bits(&b), "{g:?} tap {t}");
        }
    }
}

/// col2im over one plane with the AVX-512 loop has the bits of the
/// portable loop (each value's terms added in tap order onto a nonzero
/// start, as the bias fill gives), reading rows `ld` apart at an offset
/// (an image of a batched column matrix), for every case.
#[test]
fn col2im_plane_equals_the_portable_loop() {
    for case in CASES {
        let g = geom(case);
        let (l, taps) = (g.oh * g.ow, g.kh * g.kw);
        let (ld, off) = (3 * l + 1, l + 1);
        let rows = frac(taps * ld, 41);
        let start = frac(g.h * g.w, 13);
        let inside = g.inside_table();
        let (mut a, mut b) = (start.clone(), start.clone());
        g.col2im_channel(&rows, ld, off, &inside, &mut a, fast::<f32>());
        g.col2im_channel(&rows, ld, off, &inside, &mut b, false);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a), bits(&b), "{g:?}");
        assert_ne!(bits(&a), bits(&start), "{g:?}: nothing added");
    }
}
