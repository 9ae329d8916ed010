//! 2-d convolution in bf16 through [`PackedBf16::gemm`]: per image and
//! group, the input patches are written straight into the packed layout
//! (im2col in bf16: one packed column per output pixel), and the weight
//! rows are the `a` of the product, so the output comes out as
//! `[channel, pixel]`, the NCHW layout.

use super::{padded_k, PackedBf16, PANEL};
use crate::cpu::buffers::for_each_row_work;
use crate::cpu::conv::ConvGeom;
use crate::cpu::memory::Storage;

/// Output pixels (columns of the product) a batched product aims for:
/// images are grouped until their pixels reach this, so that a late stage
/// with a handful of pixels per image still fills the kernel's 16-wide
/// panels and gives the threads work, while an early stage with large
/// images keeps one image (and a small patch buffer) per product.
const TARGET_COLUMNS: usize = 1024;

/// The input channels of one group of `images` consecutive images
/// (`x_imgs` starts at the first image's group's first channel, images
/// `img_stride` apart) rounded to bf16 into a zero-padded buffer `[images,
/// c / groups, h + 2 p0, w + 2 p1]`, so that every tap of every output
/// pixel is one read at a fixed offset, with no bounds test.
fn padded_bf16(g: &ConvGeom, x_imgs: &[f32], images: usize, img_stride: usize) -> Storage<u16> {
    let cg = g.c / g.groups;
    let [p0, p1] = g.padding;
    let (hp, wp) = (g.h + 2 * p0, g.w + 2 * p1);
    let mut out = Storage::<u16>::zeroed(images * cg * hp * wp);
    let hw = g.h * g.w;
    if hw == 0 {
        return out;
    }
    let rounder = crate::cpu::bf16_round::Bf16Rounder::new();
    for_each_row_work(&mut out, hp * wp, 2 * hw, |plane, dst| {
        let (img, ci) = (plane / cg, plane % cg);
        let src = &x_imgs[img * img_stride + ci * hw..][..hw];
        if p0 == 0 && p1 == 0 {
            rounder.round(src, dst);
            return;
        }
        for (r, row) in src.chunks_exact(g.w).enumerate() {
            rounder.round(row, &mut dst[(r + p0) * wp + p1..][..g.w]);
        }
    });
    out
}

/// The patches of one group of `images` consecutive images (`x_imgs` starts
/// at the first image's group's first channel, images `img_stride` apart):
/// an `images l x k` matrix packed, `l = oh ow` output pixels per image
/// (column `i l + pixel` is image `i`'s pixel), `k = (c / groups) kh kw`
/// taps in PyTorch's weight order. The packed values are in a pooled buffer.
///
/// The input is rounded once into a padded bf16 buffer ([`padded_bf16`]);
/// then each panel of 16 columns is written in order, pair of taps by
/// pair of taps, each value one read at an offset fixed per column plus
/// one fixed per tap (no index arithmetic, bounds test or rounding per
/// element: the per-element version cost 6x the product it fed in
/// ResNet-18's stem).
fn pack_patches(g: &ConvGeom, x_imgs: &[f32], images: usize, img_stride: usize) -> PackedBf16 {
    let (cg, l) = (g.c / g.groups, g.oh * g.ow);
    let k = cg * g.kh * g.kw;
    let cols = images * l;
    let pairs = padded_k(k) / 2;
    let xb = padded_bf16(g, x_imgs, images, img_stride);
    let [p0, p1] = g.padding;
    let (hp, wp) = (g.h + 2 * p0, g.w + 2 * p1);
    let plane = hp * wp;
    // per tap: its offset in an image's padded channels
    let taps: Vec<usize> = (0..k)
        .map(|p| {
            let (ci, t) = (p / (g.kh * g.kw), p % (g.kh * g.kw));
            let (ki, kj) = (t / g.kw, t % g.kw);
            ci * plane + ki * g.dilation[0] * wp + kj * g.dilation[1]
        })
        .collect();
    // per column: where its window starts (image, row, column)
    let starts: Vec<usize> = (0..cols)
        .map(|col| {
            let (img, pix) = (col / l, col % l);
            let (oy, ox) = (pix / g.ow, pix % g.ow);
            img * cg * plane + oy * g.stride[0] * wp + ox * g.stride[1]
        })
        .collect();
    let panel_len = pairs * PANEL * 2;
    // every element is written below (zeros past the last column and tap)
    let mut data = Storage::<u16>::stale(cols.div_ceil(PANEL) * panel_len);
    // about half a nanosecond per value written
    for_each_row_work(&mut data, panel_len, panel_len, |panel, dst| {
        let c0 = panel * PANEL;
        let live = PANEL.min(cols - c0);
        let st = &starts[c0..c0 + live];
        for (q, out) in dst.chunks_exact_mut(PANEL * 2).enumerate() {
            let t0 = taps[2 * q];
            match taps.get(2 * q + 1) {
                Some(&t1) => {
                    for (o, &s) in out.chunks_exact_mut(2).zip(st) {
                        o[0] = xb[s + t0];
                        o[1] = xb[s + t1];
                    }
                }
                None => {
                    for (o, &s) in out.chunks_exact_mut(2).zip(st) {
                        o[0] = xb[s + t0];
                        o[1] = 0;
                    }
                }
            }
            out[2 * live..].fill(0);
        }
    });
    PackedBf16 { n: cols, k, data }
}

/// `y [n, o, oh, ow]` of the convolution of `x [n, c, h, w]` (f32, rounded
/// to bf16 on the way) with the weight as bf16 rows (`o` rows of
/// [`padded_k`]`((c / groups) kh kw)` elements, from
/// [`rows_to_bf16`](super::rows_to_bf16)), plus `bias [o]` in f32.
///
/// Per group, the images go through the product in batches of about
/// [`TARGET_COLUMNS`] output pixels: the weight rows times the batch's
/// patches give `[og, images x pixels]`, copied into each image's NCHW
/// block. Each output element is the same sum whatever the batch (a
/// column of the product depends only on its own patch), so the result
/// is the per-image product's, bit for bit. Every buffer is pooled.
///
/// # Panics
/// When a buffer's length does not match the geometry.
pub(crate) fn conv2d(
    g: &ConvGeom,
    x: &[f32],
    w_rows: &[u16],
    bias: Option<&[f32]>,
) -> Storage<f32> {
    let (cg, og, l) = (g.c / g.groups, g.o / g.groups, g.oh * g.ow);
    let k = cg * g.kh * g.kw;
    let kp = padded_k(k);
    assert_eq!(x.len(), g.n * g.c * g.h * g.w, "conv2d (bf16): input");
    assert_eq!(w_rows.len(), g.o * kp, "conv2d (bf16): weight");
    if let Some(b) = bias {
        assert_eq!(b.len(), g.o, "conv2d (bf16): bias");
    }
    // written whole: every image's every channel's pixels, below
    let mut y = Storage::<f32>::stale(g.n * g.o * l);
    if l == 0 || g.n == 0 {
        return y;
    }
    let batch = TARGET_COLUMNS.div_ceil(l).clamp(1, g.n);
    let img_stride = g.c * g.h * g.w;
    let mut prod = Storage::<f32>::stale(og * batch * l);
    for b0 in (0..g.n).step_by(batch) {
        let images = batch.min(g.n - b0);
        let cols = images * l;
        for grp in 0..g.groups {
            let x_grp = &x[b0 * img_stride + grp * cg * g.h * g.w..];
            let patches = pack_patches(g, x_grp, images, img_stride);
            patches.gemm(
                og,
                &w_rows[grp * og * kp..(grp + 1) * og * kp],
                None,
                &mut prod[..og * cols],
            );
            for (o, row) in prod[..og * cols].chunks_exact(cols).enumerate() {
                for (img, src) in row.chunks_exact(l).enumerate() {
                    let start = ((b0 + img) * g.o + grp * og + o) * l;
                    y[start..start + l].copy_from_slice(src);
                }
            }
        }
    }
    if let Some(bias) = bias {
        for y_img in y.chunks_exact_mut(g.o * l) {
            for (row, &bv) in y_img.chunks_exact_mut(l).zip(bias) {
                for v in row {
                    *v += bv;
                }
            }
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::bgemm::rows_to_bf16;
    use crate::tensor::Rng;

    /// Batching images into one product gives each image's own result bit
    /// for bit: `n` images at once against each image alone (groups,
    /// stride, padding, dilation and an odd `k`; a large input, whose
    /// batches hold one image, and a small one, all images in one batch).
    #[test]
    fn batched_images_equal_one_image_at_a_time() {
        let mut rng = Rng::new(5);
        for (n, hw, groups) in [(5, 5, 2), (3, 40, 1)] {
            let (c, o, kh, kw) = (4, 6, 3, 2);
            let x: Vec<f32> = (0..n * c * hw * hw).map(|_| rng.normal() as f32).collect();
            let w: Vec<f32> = (0..o * (c / groups) * kh * kw)
                .map(|_| rng.normal() as f32)
                .collect();
            let bias: Vec<f32> = (0..o).map(|_| rng.normal() as f32).collect();
            let geom = |n| {
                ConvGeom::new(
                    [n, c, hw, hw],
                    [o, c / groups, kh, kw],
                    [2, 1],
                    [1, 0],
                    [1, 2],
                    groups,
                )
                .unwrap()
            };
            let g = geom(n);
            let k = (c / groups) * kh * kw;
            let rows = rows_to_bf16(&w, o, k);
            let all = conv2d(&g, &x, &rows, Some(&bias));
            let img = c * hw * hw;
            let out = o * g.oh * g.ow;
            for b in 0..n {
                let one = conv2d(&geom(1), &x[b * img..(b + 1) * img], &rows, Some(&bias));
                assert_eq!(&all[b * out..(b + 1) * out], &one[..], "image {b} of {n}");
            }
        }
    }

    /// The patches of a batch are packed by several threads at once (a
    /// few panels of 16 columns each; a panel may hold pixels of two
    /// images): the same bits at 1, 2 and 3 threads, and each image's own
    /// result. Large enough that the packing is split (1,024 columns x 144
    /// taps, past the pool's threshold), with 9 x 9 = 81 pixels an image,
    /// so panels straddle images.
    #[test]
    fn packing_in_parallel_gives_the_same_bits() {
        let _guard = crate::cpu::threads::lock_thread_count();
        let before = crate::cpu::num_threads();
        let mut rng = Rng::new(9);
        let (n, c, hw, o) = (13, 16, 9, 8);
        let x: Vec<f32> = (0..n * c * hw * hw).map(|_| rng.normal() as f32).collect();
        let w: Vec<f32> = (0..o * c * 9).map(|_| rng.normal() as f32).collect();
        let geom =
            |n| ConvGeom::new([n, c, hw, hw], [o, c, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
        let rows = rows_to_bf16(&w, o, c * 9);
        crate::cpu::set_num_threads(1);
        let one: Vec<u32> = conv2d(&geom(n), &x, &rows, None)
            .iter()
            .map(|v| v.to_bits())
            .collect();
        let img = c * hw * hw;
        let out = o * hw * hw;
        for b in [0, 6, n - 1] {
            let alone = conv2d(&geom(1), &x[b * img..(b + 1) * img], &rows, None);
            let alone: Vec<u32> = alone.iter().map(|v| v.to_bits()).collect();
            assert_eq!(&one[b * out..(b + 1) * out], &alone[..], "image {b} alone");
        }
        for t in [2, 3] {
            crate::cpu::set_num_threads(t);
            let got: Vec<u32> = conv2d(&geom(n), &x, &rows, None)
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(got, one, "{t} threads");
        }
        crate::cpu::set_num_threads(before);
    }
}
