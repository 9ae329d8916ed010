//! Tests of the panels packed from the images: against the packing of the
//! unfolded columns, and the forward through them against the forward
//! through the kept columns.

use super::super::{chunked, forward_batched, forward_keeping, Kept, COLS_BUDGET};
use super::*;
use crate::cpu::buffers::refill;
use crate::cpu::gemm::prepared::{pack_panel, PreparedA};
use crate::cpu::gemm::Mat;
use crate::cpu::memory::Storage;
use crate::cpu::threads::{lock_thread_count, num_threads, set_num_threads};

fn frac(n: usize, a: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * a) % 23) as f32 * 0.13 - 1.4).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Every panel of images `b0..b0 + nb` written by every writer equals the
/// panel `pack_panel` packs from the unfolded columns (where the CPU has
/// the packed kernel) and the element-by-element reading of those columns
/// (zero past the last column), bit for bit. The `k` blocks are the
/// product's (`KC` long) and one starting mid-channel.
fn check_panels(g: &ConvGeom, b0: usize, nb: usize) {
    let x: Vec<f32> = (0..g.n * g.c * g.h * g.w)
        .map(|i| i as f32 * 0.25 + 1.0)
        .collect();
    let (k, n) = (g.k_len(), nb * g.l());
    let mut cols = Storage::with_capacity(k * n);
    refill(&mut cols, k * n, |c| g.im2col_batch(&x, b0, nb, c));
    let kc_max = crate::cpu::gemm::K_BLOCK;
    let mut blocks: Vec<(usize, usize)> = (0..k)
        .step_by(kc_max)
        .map(|k0| (k0, kc_max.min(k - k0)))
        .collect();
    if k > 5 {
        blocks.push((k / 3 + 1, k - k / 3 - 1));
    }
    let packed = crate::cpu::gemm::packed_f32_available();
    for (k0, kc) in blocks {
        for j0 in (0..n).step_by(NR) {
            let want: Vec<f32> = (0..kc * NR)
                .map(|i| {
                    let (p, j) = (i / NR, j0 + i % NR);
                    if j < n {
                        cols[(k0 + p) * n + j]
                    } else {
                        0.0
                    }
                })
                .collect();
            if packed {
                let mut dst = vec![f32::NAN; kc * NR];
                pack_panel(Mat::row_major(&cols, n), k0, kc, j0, n, &mut dst);
                assert_eq!(bits(&dst), bits(&want), "pack_panel {g:?}");
            }
            for writer in Writer::all() {
                let panels = ImagePanels::with_writer(g, &x, b0, nb, writer);
                let mut dst = vec![f32::NAN; kc * NR + 5];
                panels.pack(k0, kc, j0, &mut dst);
                assert!(
                    bits(&dst[..kc * NR]) == bits(&want),
                    "{writer:?} {g:?} images {b0}+{nb} rows {k0}+{kc} panel {j0}"
                );
                assert!(dst[kc * NR..].iter().all(|v| v.is_nan()), "past the panel");
            }
        }
    }
}

/// The panels equal the packed columns for kernels 1x1, 3x3 and 5x5,
/// stride 1 and 2, padding 0, 1 and 2, dilation 1 and 2 (each on its
/// own axis too), planes of 32, 16, 8, 4, 7 and 13 (and 5 x 9), with
/// `c kh kw` just over `KC` (two `k` blocks), chunks of images starting
/// past the first with panels across image boundaries, for every writer
/// the CPU class in force has (run under `FORGE_CPU_CLASS=portable`,
/// `avx2`, `avx512` for each).
#[test]
fn panels_equal_the_packed_columns() {
    assert!(Writer::all().contains(&Writer::Portable));
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        Writer::all().contains(&Writer::Avx512),
        crate::cpu::class::cpu_has!("avx512f")
    );
    let mut count = 0;
    for hw in [[32, 32], [16, 16], [8, 8], [4, 4], [7, 7], [13, 13], [5, 9]] {
        for kk in [1, 3, 5] {
            for s in [1, 2] {
                for p in [0, 1, 2] {
                    for d in [1, 2] {
                        let c = KC_OVER / (kk * kk) + 1;
                        let Some(g) = ConvGeom::new(
                            [4, c, hw[0], hw[1]],
                            [2, c, kk, kk],
                            [s, s],
                            [p, p],
                            [d, d],
                            1,
                        ) else {
                            continue;
                        };
                        check_panels(&g, 1, 2);
                        count += 1;
                    }
                }
            }
        }
    }
    assert!(count > 200, "{count} geometries");
    // mixed axes: stride, padding and dilation differing between rows and
    // columns; the whole batch; one image
    for (x, wt, s, p, d) in [
        ([3, 5, 11, 19], [2, 5, 3, 4], [2, 1], [1, 2], [1, 2]),
        ([3, 5, 11, 19], [2, 5, 3, 4], [1, 2], [2, 0], [2, 1]),
        ([2, 3, 9, 9], [2, 3, 3, 3], [1, 1], [3, 3], [1, 1]),
    ] {
        let g = ConvGeom::new(x, wt, s, p, d, 1).unwrap();
        check_panels(&g, 0, g.n);
        check_panels(&g, g.n - 1, 1);
    }
}

/// `c kh kw` is made just over this: two `k` blocks.
const KC_OVER: usize = crate::cpu::gemm::K_BLOCK;

/// The forward through the panels packed from the images (columns not
/// kept: `forward_batched`) has the bits of the forward through the
/// unfolded columns (`forward_keeping`, which keeps them), with and without
/// bias, on 1 and 2 threads, for the chunk-serial loop and the chunks in
/// parallel: 3x3 padding 1 on 32, 16, 8 and 4-wide planes (VGG's), stride
/// 2, dilation 2, 5x5 and 1x1 kernels, `k` over one block.
#[test]
fn forward_through_image_panels_equals_the_kept_columns() {
    let _threads = lock_thread_count();
    let prev = num_threads();
    // (x, weight, stride, padding, dilation)
    let cases = [
        ([4, 3, 32, 32], [16, 3, 3, 3], [1, 1], [1, 1], [1, 1]),
        ([6, 64, 16, 16], [24, 64, 3, 3], [1, 1], [1, 1], [1, 1]),
        ([10, 32, 8, 8], [40, 32, 3, 3], [1, 1], [1, 1], [1, 1]),
        ([24, 40, 4, 4], [30, 40, 3, 3], [1, 1], [1, 1], [1, 1]),
        ([5, 12, 16, 16], [20, 12, 3, 3], [2, 2], [1, 1], [1, 1]),
        ([5, 12, 8, 8], [20, 12, 3, 3], [1, 1], [2, 2], [2, 2]),
        ([5, 12, 12, 12], [20, 12, 5, 5], [1, 1], [0, 0], [1, 1]),
        ([8, 300, 8, 8], [20, 300, 1, 1], [1, 1], [0, 0], [1, 1]),
    ];
    for (xs, ws, s, p, d) in cases {
        let g = ConvGeom::new(xs, ws, s, p, d, 1).unwrap();
        assert!(g.tap_plan().is_none() && g.l().is_multiple_of(16), "{g:?}");
        let per = g.batch_chunk(COLS_BUDGET);
        assert!(per * g.l() > 16, "{g:?}: the packed product");
        let x = frac(g.n * g.c * g.h * g.w, 37);
        let w = frac(g.o * g.k_len(), 13);
        let bias = frac(g.o, 7);
        for b in [None, Some(&bias[..])] {
            set_num_threads(1);
            let (want, kept) = forward_keeping(&g, &x, &w, b);
            assert!(matches!(kept, Some(Kept::Columns(_))), "{g:?}");
            for threads in [1, 2] {
                set_num_threads(threads);
                let got = forward_batched(&g, &x, &w, b, COLS_BUDGET);
                assert!(bits(&got) == bits(&want), "{g:?} {threads} threads");
                let (kept_y, _) = forward_keeping(&g, &x, &w, b);
                assert!(bits(&kept_y) == bits(&want), "{g:?} kept {threads} threads");
            }
            // the chunks in parallel (two threads, at least four chunks)
            let per = (g.n / 4).max(1);
            set_num_threads(2);
            assert!(chunked::in_parallel(g.n.div_ceil(per)), "{g:?}");
            let pw = PreparedA::new(g.o, g.k_len(), Mat::row_major(&w, g.k_len()), per * g.l());
            let got = chunked::forward(&g, &x, &pw, b, per, None, None).expect("in parallel");
            set_num_threads(1);
            let serial = forward_batched(&g, &x, &w, b, per * g.k_len() * g.l());
            assert!(bits(&got) == bits(&serial), "{g:?} chunks of {per}");
            // (other chunks, the same sums on the packed kernel; the plain
            // gemm of other CPU classes may sum otherwise for other widths)
            if crate::cpu::gemm::packed_f32_available() {
                assert!(bits(&got) == bits(&want), "{g:?} chunks of {per}");
            }
        }
    }
    set_num_threads(prev);
}
