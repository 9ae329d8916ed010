//! 2-d convolution in bf16 through [`PackedBf16::gemm`]: per image and
//! group, the input patches are written straight into the packed layout
//! (im2col in bf16: one packed column per output pixel), and the weight
//! rows are the `a` of the product, so the output comes out as
//! `[channel, pixel]`, the NCHW layout.

use super::{padded_k, to_bf16, PackedBf16, PANEL};
use crate::cpu::conv::ConvGeom;

/// The patches of one group of one image (`x_img` starts at the group's
/// first channel): an `l x k` matrix packed, `l = oh ow` output pixels,
/// `k = (c / groups) kh kw` taps in PyTorch's weight order.
fn pack_patches(g: &ConvGeom, x_img: &[f32]) -> PackedBf16 {
    let (cg, l) = (g.c / g.groups, g.oh * g.ow);
    let k = cg * g.kh * g.kw;
    let pairs = padded_k(k) / 2;
    let mut data = vec![0u16; l.div_ceil(PANEL) * pairs * PANEL * 2];
    let (h, w) = (g.h as isize, g.w as isize);
    for ci in 0..cg {
        let plane = &x_img[ci * g.h * g.w..][..g.h * g.w];
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                let p = (ci * g.kh + ki) * g.kw + kj;
                let base = (p / 2) * PANEL * 2 + p % 2;
                for oy in 0..g.oh {
                    let iy =
                        (oy * g.stride[0] + ki * g.dilation[0]) as isize - g.padding[0] as isize;
                    let row_ok = (0..h).contains(&iy);
                    for ox in 0..g.ow {
                        let ix = (ox * g.stride[1] + kj * g.dilation[1]) as isize
                            - g.padding[1] as isize;
                        if row_ok && (0..w).contains(&ix) {
                            let pix = oy * g.ow + ox;
                            let v = plane[(iy * w + ix) as usize];
                            data[(pix / PANEL) * pairs * PANEL * 2 + base + (pix % PANEL) * 2] =
                                to_bf16(v);
                        }
                    }
                }
            }
        }
    }
    PackedBf16 { n: l, k, data }
}

/// `y [n, o, oh, ow]` of the convolution of `x [n, c, h, w]` (f32, rounded
/// to bf16 on the way) with the weight as bf16 rows (`o` rows of
/// [`padded_k`]`((c / groups) kh kw)` elements, from
/// [`rows_to_bf16`](super::rows_to_bf16)), plus `bias [o]` in f32.
///
/// # Panics
/// When a buffer's length does not match the geometry.
pub(crate) fn conv2d(g: &ConvGeom, x: &[f32], w_rows: &[u16], bias: Option<&[f32]>) -> Vec<f32> {
    let (cg, og, l) = (g.c / g.groups, g.o / g.groups, g.oh * g.ow);
    let k = cg * g.kh * g.kw;
    let kp = padded_k(k);
    assert_eq!(x.len(), g.n * g.c * g.h * g.w, "conv2d (bf16): input");
    assert_eq!(w_rows.len(), g.o * kp, "conv2d (bf16): weight");
    if let Some(b) = bias {
        assert_eq!(b.len(), g.o, "conv2d (bf16): bias");
    }
    let mut y = vec![0f32; g.n * g.o * l];
    if l == 0 {
        return y;
    }
    for (b, y_img) in y.chunks_exact_mut(g.o * l).enumerate() {
        for grp in 0..g.groups {
            let x_grp = &x[(b * g.c + grp * cg) * g.h * g.w..][..cg * g.h * g.w];
            let patches = pack_patches(g, x_grp);
            patches.gemm(
                og,
                &w_rows[grp * og * kp..(grp + 1) * og * kp],
                None,
                &mut y_img[grp * og * l..(grp + 1) * og * l],
            );
        }
        if let Some(bias) = bias {
            for (row, &bv) in y_img.chunks_exact_mut(l).zip(bias) {
                for v in row {
                    *v += bv;
                }
            }
        }
    }
    y
}
