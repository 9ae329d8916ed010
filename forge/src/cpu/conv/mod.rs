//! 2-d convolution kernels: the entry points ([`conv2d_forward`],
//! [`conv2d_backward_input`], [`conv2d_backward_weight`], [`channel_sums`])
//! check the buffers against the geometry ([`ConvGeom`], in `geom.rs`) and
//! pick a kernel from the shapes alone: the direct kernels of
//! `conv_small.rs` for few input channels, im2col and gemm (`im2col.rs`)
//! for everything else. Outside autograd, `f32` convolutions of one group
//! at small batches take the direct kernel of `direct.rs` instead (weights
//! packed once per write version, chosen in `ops/conv_infer.rs`).
//!
//! In training, [`conv2d_forward_keeping`] hands the im2col path's column
//! matrix to the caller when it is small enough, and
//! [`conv2d_backward_weight_kept`] takes the weight gradient from it
//! instead of unfolding the input again (the same bits).
//!
//! An 8-bit float weight (`nn/conv2d_fp8.rs`) is decoded in the packing
//! step of the direct kernel ([`direct_forward_fp8`]) and of im2col and
//! gemm ([`conv2d_forward_fp8`]): no f32 copy of the weight besides the
//! packed one.
//!
//! The imports point one way: this file uses `conv_small`, `direct` and
//! `im2col`, all use `geom`, and none uses another.

mod conv_small;
mod direct;
mod geom;
mod im2col;

use crate::base::Float;
use crate::cpu::buffers::{build, for_each_chunk_mut};
use crate::cpu::gemm::prepared::PackedA;
use crate::cpu::gemm::{Fp8Panels, Mat};
use crate::cpu::memory::Storage;
pub(crate) use direct::{
    forward as direct_forward, forward_bf16 as direct_forward_bf16,
    forward_fp8 as direct_forward_fp8, packed_folded, packed_plain, packed_plain_bf16,
    preferred as direct_preferred, preferred_f32 as direct_preferred_f32,
};
pub(crate) use geom::ConvGeom;

/// The forward convolution: `y [n, o, oh, ow]` from `x [n, c, h, w]`,
/// `weight [o, c / groups, kh, kw]` and an optional `bias [o]`, in a pooled
/// buffer.
///
/// # Panics
/// When a buffer's length does not match the geometry.
pub(crate) fn conv2d_forward<E: Float>(
    g: &ConvGeom,
    x: &[E],
    weight: &[E],
    bias: Option<&[E]>,
) -> Storage<E> {
    assert_eq!(x.len(), g.n * g.c * g.h * g.w, "conv2d_forward: input");
    assert_eq!(weight.len(), g.o * g.k_len(), "conv2d_forward: weight");
    if conv_small::applies(g) {
        conv_small::forward(g, x, weight, bias)
    } else {
        im2col::forward(g, x, weight, bias)
    }
}

/// `act(conv2d_forward(g, x, weight, bias))` for `f32`: on the im2col
/// path with the product stored straight into the output, `act` runs in
/// the product's epilogue after the bias, on each block of outputs while it
/// is in cache; elsewhere over the finished output. `act` computes each
/// element on its own, so the values are those of the convolution followed
/// by `act`, bit for bit. Where im2col multiplies the weight packed, the
/// packing is kept on the weight's storage ([`Storage::derived`], until
/// its next write) and read by the next calls instead of packing again (the
/// same packing: the same bits).
///
/// # Panics
/// As [`conv2d_forward`].
pub(crate) fn conv2d_forward_act(
    g: &ConvGeom,
    x: &[f32],
    weight: &Storage<f32>,
    bias: Option<&[f32]>,
    act: fn(&mut [f32]),
) -> Storage<f32> {
    assert_eq!(x.len(), g.n * g.c * g.h * g.w, "conv2d_forward: input");
    assert_eq!(weight.len(), g.o * g.k_len(), "conv2d_forward: weight");
    if conv_small::applies(g) {
        let mut y = conv_small::forward(g, x, weight, bias);
        act(&mut y);
        return y;
    }
    let (o, k) = (g.o, g.k_len());
    let kept = im2col::packs_weight(g)
        .then(|| {
            weight.derived(|| Some(PackedWeight(PackedA::new(o, k, Mat::row_major(weight, k)))))
        })
        .flatten()
        .filter(|p| p.0.rows() == o && p.0.cols() == k);
    im2col::forward_act(g, x, weight, bias, act, kept.map(|p| &p.0))
}

/// A convolution weight packed for im2col's products, kept on its storage
/// by [`conv2d_forward_act`].
struct PackedWeight(PackedA);

/// What a recording forward convolution keeps for its backward
/// ([`conv2d_forward_keeping`]): the column matrix it unfolded, for the
/// weight gradient ([`conv2d_backward_weight_kept`]), or over tap classes
/// the used taps' weights it copied, for the input gradient
/// ([`conv2d_backward_input_kept`]).
pub(crate) struct Kept<E: Copy> {
    /// The geometry it was made for.
    geom: ConvGeom,
    data: im2col::Kept<E>,
}

impl<E: Copy> Kept<E> {
    /// Whether it holds the column matrix (for
    /// [`conv2d_backward_weight_kept`]).
    pub(crate) fn has_columns(&self) -> bool {
        matches!(self.data, im2col::Kept::Columns(_))
    }
}

/// [`conv2d_forward`], and for the geometries whose forward and weight
/// gradient unfold the same column matrix (im2col and gemm, one group, no
/// tap classes) when that matrix is small enough (`im2col::KEEP_COLS_MAX`
/// elements for the batch), the matrix itself, for
/// [`conv2d_backward_weight_kept`]; over tap classes, the used taps'
/// weights, for [`conv2d_backward_input_kept`]. The output is
/// [`conv2d_forward`]'s, bit for bit.
///
/// # Panics
/// When a buffer's length does not match the geometry.
pub(crate) fn conv2d_forward_keeping<E: Float>(
    g: &ConvGeom,
    x: &[E],
    weight: &[E],
    bias: Option<&[E]>,
) -> (Storage<E>, Option<Kept<E>>) {
    assert_eq!(x.len(), g.n * g.c * g.h * g.w, "conv2d_forward: input");
    assert_eq!(weight.len(), g.o * g.k_len(), "conv2d_forward: weight");
    if conv_small::applies(g) {
        return (conv_small::forward(g, x, weight, bias), None);
    }
    let (y, kept) = im2col::forward_keeping(g, x, weight, bias);
    (y, kept.map(|data| Kept { geom: *g, data }))
}

/// [`conv2d_backward_weight`] over the columns a forward kept: the same
/// gradient, bit for bit, without unfolding the input again.
///
/// # Panics
/// When `cols` was kept for another geometry, or `y_grad`'s length does
/// not match the geometry.
pub(crate) fn conv2d_backward_weight_kept<E: Float>(
    g: &ConvGeom,
    cols: &Kept<E>,
    y_grad: &[E],
) -> Storage<E> {
    assert_eq!(cols.geom, *g, "conv2d_backward_weight_kept: geometry");
    let im2col::Kept::Columns(data) = &cols.data else {
        panic!("conv2d_backward_weight_kept: no columns kept")
    };
    assert_eq!(
        y_grad.len(),
        g.n * g.o * g.l(),
        "conv2d_backward_weight: gradient"
    );
    im2col::backward_weight_kept(g, data, y_grad)
}

/// [`conv2d_forward`] with an 8-bit float weight `[o, c / groups, kh, kw]`
/// held as bytes and scales: where it takes im2col and gemm with the
/// weight packed once for the call (see `im2col::forward_fp8`), the
/// weight is decoded in that packing step, and the output is the one
/// [`conv2d_forward`] gives with the decoded weight, bit for bit (several
/// groups: each group's rows packed from the bytes). `None` elsewhere
/// (the small-channel kernels, whose weights are small, tap classes, thin
/// planes, one output channel a group): the caller decodes the weight and
/// runs [`conv2d_forward`].
///
/// # Panics
/// When a buffer's length does not match the geometry.
pub(crate) fn conv2d_forward_fp8(
    g: &ConvGeom,
    x: &[f32],
    weight: &Fp8Panels,
    bias: Option<&[f32]>,
) -> Option<Storage<f32>> {
    assert_eq!(x.len(), g.n * g.c * g.h * g.w, "conv2d_forward: input");
    assert_eq!(weight.dims(), (g.o, g.k_len()), "conv2d_forward: weight");
    if conv_small::applies(g) {
        return None;
    }
    im2col::forward_fp8(g, x, weight, bias)
}

/// The gradient of the convolution with respect to its input, which is also
/// the transposed convolution: `x_grad [n, c, h, w]` from
/// `y_grad [n, o, oh, ow]` and `weight [o, c / groups, kh, kw]`, plus an
/// optional per-input-channel `bias [c]` (used by the transposed
/// convolution), in a pooled buffer.
///
/// # Panics
/// When a buffer's length does not match the geometry.
pub(crate) fn conv2d_backward_input<E: Float>(
    g: &ConvGeom,
    y_grad: &[E],
    weight: &[E],
    bias: Option<&[E]>,
) -> Storage<E> {
    backward_input_checked(g, y_grad, weight, bias, None)
}

/// [`conv2d_backward_input`]'s length checks, then the input gradient
/// (with the used taps' weights a forward kept, over tap classes).
fn backward_input_checked<E: Float>(
    g: &ConvGeom,
    y_grad: &[E],
    weight: &[E],
    bias: Option<&[E]>,
    taps: Option<&im2col::TapWeights<E>>,
) -> Storage<E> {
    assert_eq!(
        y_grad.len(),
        g.n * g.o * g.l(),
        "conv2d_backward_input: gradient"
    );
    assert_eq!(
        weight.len(),
        g.o * g.k_len(),
        "conv2d_backward_input: weight"
    );
    im2col::backward_input(g, y_grad, weight, bias, taps)
}

/// [`conv2d_backward_input`] with what the forward kept (`weight` must be
/// the weight that forward ran with, unchanged since): over tap classes
/// the used taps' weights it copied are not copied again. The same bits.
///
/// # Panics
/// As [`conv2d_backward_input`], and when `kept` was made for another
/// geometry.
pub(crate) fn conv2d_backward_input_kept<E: Float>(
    g: &ConvGeom,
    y_grad: &[E],
    weight: &[E],
    kept: &Kept<E>,
) -> Storage<E> {
    assert_eq!(kept.geom, *g, "conv2d_backward_input_kept: geometry");
    let taps = match &kept.data {
        im2col::Kept::Taps(t) => Some(t),
        im2col::Kept::Columns(_) => None,
    };
    backward_input_checked(g, y_grad, weight, None, taps)
}

/// The gradient of the convolution with respect to its weight:
/// `weight_grad [o, c / groups, kh, kw]` from `x [n, c, h, w]` and
/// `y_grad [n, o, oh, ow]`, summed over the batch in a fixed order, in a
/// pooled buffer.
///
/// # Panics
/// When a buffer's length does not match the geometry.
pub(crate) fn conv2d_backward_weight<E: Float>(g: &ConvGeom, x: &[E], y_grad: &[E]) -> Storage<E> {
    assert_eq!(
        x.len(),
        g.n * g.c * g.h * g.w,
        "conv2d_backward_weight: input"
    );
    assert_eq!(
        y_grad.len(),
        g.n * g.o * g.l(),
        "conv2d_backward_weight: gradient"
    );
    if conv_small::applies(g) {
        conv_small::backward_weight(g, x, y_grad)
    } else {
        im2col::backward_weight(g, x, y_grad)
    }
}

/// Per-channel sums of `g [n, c, l]`: `out[c] = sum_b sum_i g[b, c, i]`,
/// in a fixed order (batch-major, each run of `l` summed left to right), in
/// a pooled buffer; channels in parallel.
pub(crate) fn channel_sums<E: Float>(g: &[E], n: usize, c: usize, l: usize) -> Storage<E> {
    assert_eq!(g.len(), n * c * l, "channel_sums: gradient");
    // Runs summed side by side: enough independent additions in flight to
    // hide an addition's latency (one chain ran at a quarter of the adder's
    // rate: 4-5% of a LeNet-5 training step, the first convolution's bias).
    const RUNS: usize = 8;
    // Channels per parallel chunk: about 16K values each (from the shape only).
    let per = ((1 << 14) / (n * l).max(1)).clamp(1, c.max(1));
    build(c, |out| {
        for_each_chunk_mut(out, per, |ch, o| {
            for (j, slot) in o.iter_mut().enumerate() {
                let ci = ch * per + j;
                let run = |b: usize| &g[(b * c + ci) * l..(b * c + ci + 1) * l];
                let mut s = E::zero();
                // `RUNS` runs summed side by side (independent chains, each
                // left to right as alone), then added to `s` in batch order:
                // the same additions in the same order as one run at a time.
                let mut b = 0;
                while b + RUNS <= n {
                    let mut acc = [E::zero(); RUNS];
                    let runs: [&[E]; RUNS] = std::array::from_fn(|k| run(b + k));
                    for i in 0..l {
                        for (a, r) in acc.iter_mut().zip(&runs) {
                            *a += r[i];
                        }
                    }
                    for a in acc {
                        s += a;
                    }
                    b += RUNS;
                }
                for b in b..n {
                    s += run(b).iter().fold(E::zero(), |a, &v| a + v);
                }
                slot.write(s);
            }
        });
    })
}

/// `F.unfold` of `x [n, c, h, w]` into `[n, c * kh * kw, oh * ow]` (the
/// geometry's `o` and `groups` are ignored), in a pooled buffer.
///
/// # Panics
/// When `x`'s length does not match the geometry.
pub(crate) fn unfold<E: Float>(g: &ConvGeom, x: &[E]) -> Storage<E> {
    assert_eq!(x.len(), g.n * g.c * g.h * g.w, "unfold: input");
    im2col::unfold(g, x)
}

/// `F.fold`, the adjoint of [`unfold`]: columns `[n, c * kh * kw, oh * ow]`
/// summed onto `[n, c, h, w]`, in a pooled buffer.
///
/// # Panics
/// When `cols`' length does not match the geometry.
pub(crate) fn fold<E: Float>(g: &ConvGeom, cols: &[E]) -> Storage<E> {
    assert_eq!(cols.len(), g.n * g.c * g.kh * g.kw * g.l(), "fold: columns");
    im2col::fold(g, cols)
}

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn conv2d_forward() {
        use crate::cpu::conv::{conv2d_forward, ConvGeom};
        // A 1x1 convolution that doubles its single channel.
        let g = ConvGeom::new([1, 1, 2, 2], [1, 1, 1, 1], [1, 1], [0, 0], [1, 1], 1).unwrap();
        let y = conv2d_forward(&g, &[1.0f32, 2.0, 3.0, 4.0], &[2.0], Some(&[1.0]));
        assert_eq!(&y[..], &[3.0, 5.0, 7.0, 9.0]);
    }

    #[test]
    fn conv2d_backward_input() {
        use crate::cpu::conv::{conv2d_backward_input, ConvGeom};
        let g = ConvGeom::new([1, 1, 2, 2], [1, 1, 1, 1], [1, 1], [0, 0], [1, 1], 1).unwrap();
        let gx = conv2d_backward_input(&g, &[1.0f32, 1.0, 1.0, 1.0], &[3.0], None);
        assert_eq!(&gx[..], &[3.0; 4]);
    }

    #[test]
    fn conv2d_backward_weight() {
        use crate::cpu::conv::{conv2d_backward_weight, ConvGeom};
        let g = ConvGeom::new([1, 1, 2, 2], [1, 1, 1, 1], [1, 1], [0, 0], [1, 1], 1).unwrap();
        let gw = conv2d_backward_weight(&g, &[1.0f32, 2.0, 3.0, 4.0], &[1.0; 4]);
        assert_eq!(&gw[..], &[10.0]);
    }

    #[test]
    fn channel_sums() {
        let g = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]; // [2, 2, 2]
        assert_eq!(
            &crate::cpu::conv::channel_sums(&g, 2, 2, 2)[..],
            &[14.0, 22.0]
        );
    }
}

#[cfg(test)]
mod channel_sum_tests {
    /// [`super::channel_sums`] gives the bits of the definition (each run of
    /// `l` summed left to right from zero, the runs added in batch order)
    /// for batches below, at and around its group of 8 side-by-side runs,
    /// channels split over several chunks, on 1 and 2 threads.
    #[test]
    fn channel_sums_have_the_bits_of_one_run_at_a_time() {
        use crate::cpu::threads::{lock_thread_count, set_num_threads};
        let _threads = lock_thread_count();
        for (n, c, l) in [
            (1, 3, 5),
            (7, 2, 9),
            (8, 5, 1),
            (9, 6, 33),
            (17, 4, 100),
            (128, 6, 784),
        ] {
            // Values of mixed sign and magnitude: any other order of the
            // additions rounds differently somewhere.
            let g: Vec<f32> = (0..n * c * l)
                .map(|i| {
                    (((i * 2_654_435_761) % 1999) as f32 - 999.5) * 1.37e-3 * (1 + i % 5) as f32
                })
                .collect();
            let want: Vec<f32> = (0..c)
                .map(|ci| {
                    (0..n).fold(0.0f32, |a, b| {
                        a + g[(b * c + ci) * l..(b * c + ci + 1) * l]
                            .iter()
                            .fold(0.0f32, |s, &v| s + v)
                    })
                })
                .collect();
            for threads in [1, 2] {
                set_num_threads(threads);
                let got = super::channel_sums(&g, n, c, l);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "n {n} c {c} l {l}, {threads} threads"
                );
            }
        }
    }
}
