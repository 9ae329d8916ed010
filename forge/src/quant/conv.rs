//! The int8 2-d convolution: the weight `[out, in, kh, kw]` quantized per
//! output channel (or per tensor) as a `[out, in kh kw]` matrix, the input
//! quantized per call over its whole range (as the dynamic `Linear`'s
//! activations), unfolded (im2col) into rows of bytes whose padding
//! positions hold the zero point (so they stand for exact zeros), one
//! int8 product with `i32` accumulation, and the same `f32` epilogue.
//! PyTorch has no dynamic int8 convolution; the fixtures' reference is
//! written with integer arithmetic in `tests/fixtures/gen/gen_quant.py`.

use super::int8::{quantize_activations, range_params, Int8Weight};
use crate::cpu::memory::Storage;
use crate::cpu::qgemm::padded_k;

/// The geometry of one int8 convolution.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvGeometry {
    /// Stride (rows, columns).
    pub(crate) stride: [usize; 2],
    /// Zero padding on each side (rows, columns).
    pub(crate) padding: [usize; 2],
    /// Kernel dilation (rows, columns).
    pub(crate) dilation: [usize; 2],
    /// Kernel size (rows, columns).
    pub(crate) kernel: [usize; 2],
}

impl ConvGeometry {
    /// The output size of an `h x w` input, or `None` when the dilated
    /// kernel does not fit.
    pub(crate) fn output(&self, h: usize, w: usize) -> Option<[usize; 2]> {
        let dim = |i: usize, size: usize| {
            let span = self.dilation[i] * (self.kernel[i] - 1) + 1;
            (size + 2 * self.padding[i])
                .checked_sub(span)
                .map(|r| r / self.stride[i] + 1)
        };
        Some([dim(0, h)?, dim(1, w)?])
    }
}

/// The int8 convolution of `x` (`[n, c, h, w]`, row-major) with `q`
/// (`out x (c kh kw)`): the `[n, out, oh, ow]` output, row-major, and
/// `[oh, ow]`.
///
/// # Panics
/// When the sizes do not fit (the layer checks the input first).
pub(crate) fn conv2d_int8(
    q: &Int8Weight,
    x: &[f32],
    [n, c, h, w]: [usize; 4],
    bias: Option<&[f32]>,
    g: &ConvGeometry,
) -> (Storage<f32>, [usize; 2]) {
    let [kh, kw] = g.kernel;
    let k = c * kh * kw;
    assert_eq!(
        q.in_features(),
        k,
        "conv2d_int8: weight is not [out, {c} x {kh} x {kw}]"
    );
    assert_eq!(
        x.len(),
        n * c * h * w,
        "conv2d_int8: input is not [{n}, {c}, {h}, {w}]"
    );
    let [oh, ow] = g
        .output(h, w)
        .unwrap_or_else(|| panic!("conv2d_int8: input {h}x{w} smaller than the kernel"));
    let out = q.out_features();
    let mut y = Storage::<f32>::stale(n * out * oh * ow);
    if y.is_empty() {
        return (y, [oh, ow]);
    }
    let (scale, zp) = range_params(x);
    let mut xq = Storage::<u8>::stale(x.len());
    quantize_activations(x, scale, zp, &mut xq);
    let kp = padded_k(k);
    let rows = oh * ow;
    // scratch for every image, pooled (reused from call to call)
    let mut a = Storage::<u8>::zeroed(rows * kp);
    let mut acc = Storage::<i32>::stale(rows * out);
    let mut prod = Storage::<f32>::stale(rows * out);
    let zero = zp as u8;
    for (image, y_img) in xq
        .chunks_exact(c * h * w)
        .zip(y.chunks_exact_mut(out * rows))
    {
        for (r, row) in a.chunks_exact_mut(kp).enumerate() {
            let (oy, ox) = (r / ow, r % ow);
            for ci in 0..c {
                for ky in 0..kh {
                    let iy =
                        (oy * g.stride[0] + ky * g.dilation[0]) as isize - g.padding[0] as isize;
                    for kx in 0..kw {
                        let ix = (ox * g.stride[1] + kx * g.dilation[1]) as isize
                            - g.padding[1] as isize;
                        let inside = (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix);
                        row[(ci * kh + ky) * kw + kx] = if inside {
                            image[(ci * h + iy as usize) * w + ix as usize]
                        } else {
                            zero
                        };
                    }
                }
            }
        }
        // [rows, out] from the product, stored channel-major
        q.product_into(rows, &a, scale, zp, bias, None, &mut acc, &mut prod);
        for (r, pr) in prod.chunks_exact(out).enumerate() {
            for (o, &v) in pr.iter().enumerate() {
                y_img[o * rows + r] = v;
            }
        }
    }
    (y, [oh, ow])
}
