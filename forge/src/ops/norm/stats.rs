//! What the normalisation ops share, below all three: the composed
//! normalisation of the `create_graph` rules ([`normalize`]), the check and
//! view of per-channel tensors, the parallel loops over channels and runs
//! (blocks of [`BN_CHUNK`] values), and the eight-lane deviation sums.

use crate::cpu::buffers::build_chunks;
use crate::cpu::Storage;
use crate::tensor::{Device, Float, Tensor};

/// `(x - mean) / sqrt(var + eps)` over `axes` with the biased variance;
/// also returns the (keepdim) mean and variance.
pub(super) fn normalize<E: Float, D: Device>(
    x: &Tensor<E, D>,
    axes: &[isize],
    eps: f64,
) -> (Tensor<E, D>, Tensor<E, D>, Tensor<E, D>) {
    let mean = x.mean_dim(axes, true);
    let xc = x.sub(&mean);
    let var = xc.square().mean_dim(axes, true);
    let out = xc.mul(&var.add_scalar(E::from_f64(eps)).rsqrt());
    (out, mean, var)
}

/// Checks that a per-channel tensor has shape `(C,)` and views it as
/// `(1, C, 1, ...)` for an input of rank `rank`.
pub(super) fn per_channel<E: Float, D: Device>(
    op: &str,
    what: &str,
    t: &Tensor<E, D>,
    x_shape: &[usize],
) -> Tensor<E, D> {
    let c = x_shape[1];
    shape_assert!(
        t.shape() == [c],
        "{op}: {what} of shape {:?} does not match {c} channels (input shape {x_shape:?})",
        t.shape()
    );
    let mut v = vec![1usize; x_shape.len()];
    v[1] = c;
    t.view(&v)
}

/// Values per parallel chunk of the batch- and group-norm kernels (a size, never a
/// thread count: the chunking, and so every result, is the same for any
/// number of threads). Every sum is taken inside one channel, row or run,
/// so the chunk size does not change any value either. At 16K, ResNet-18's
/// `[16, 256, 2, 2]` layers (16,384 values) were one chunk, on one thread:
/// 4K halved their 2-thread time (backward of the four 0.30 -> 0.17-0.22
/// ms, forward 0.21 -> 0.12-0.17 ms; commit eaf46a8).
pub(super) const BN_CHUNK: usize = 1 << 12;

/// `f(ch)` for every item `ch < c` (a channel of a batch norm; a row or
/// an `(image, channel)` run of a group norm), in parallel over blocks of
/// items of about [`BN_CHUNK`] values (`count` values per item), into a
/// pooled buffer.
pub(super) fn per_channel_par<T: Copy + Send>(
    c: usize,
    count: usize,
    f: impl Fn(usize) -> T + Sync,
) -> Storage<T> {
    let per = (BN_CHUNK / count.max(1)).clamp(1, c.max(1));
    build_chunks(c, per, |blk, out| {
        for (j, slot) in out.iter_mut().enumerate() {
            slot.write(f(blk * per + j));
        }
    })
}

/// `out[j] = f(coef(j / sp), x[j], g[j])`: the elements of `[n, c, sp]`
/// taken as `n c` runs of `sp` (one per `(image, channel)`), `g` zero when
/// absent, in parallel over blocks of whole images of about [`BN_CHUNK`]
/// values, into a pooled buffer; the inner loops run over one run at a
/// time with its coefficients taken once (so they vectorise). Each element
/// depends on its own inputs only.
pub(super) fn per_run_par<E: Float, C: Copy>(
    c: usize,
    sp: usize,
    x: &[E],
    g: Option<&[E]>,
    coef: impl Fn(usize) -> C + Sync,
    f: impl Fn(C, E, E) -> E + Sync,
) -> Storage<E> {
    let (c, sp) = (c.max(1), sp.max(1));
    let per = (BN_CHUNK / (c * sp)).max(1) * c * sp;
    build_chunks(x.len(), per, |blk, out| {
        for (r, run) in out.chunks_mut(sp).enumerate() {
            let j0 = blk * per + r * sp;
            let k = coef(j0 / sp);
            let xr = &x[j0..j0 + run.len()];
            match g {
                Some(g) => {
                    let gr = &g[j0..j0 + run.len()];
                    for ((o, &v), &gv) in run.iter_mut().zip(xr).zip(gr) {
                        o.write(f(k, v, gv));
                    }
                }
                None => {
                    for (o, &v) in run.iter_mut().zip(xr) {
                        o.write(f(k, v, E::zero()));
                    }
                }
            }
        }
    })
}

/// `sum((v - mu)^2)` over `v` in eight interleaved partial sums, added as
/// `lane_sum` (ops/softmax.rs) adds them.
pub(super) fn lane_sq_dev<E: Float>(v: &[E], mu: E) -> E {
    let mut acc = [E::zero(); 8];
    let mut chunks = v.chunks_exact(8);
    for ch in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(ch) {
            *a += (x - mu) * (x - mu);
        }
    }
    for (a, &x) in acc.iter_mut().zip(chunks.remainder()) {
        *a += (x - mu) * (x - mu);
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

/// `sum(g * (v - mu))` over paired slices, summed as [`lane_sq_dev`].
pub(super) fn lane_dot_dev<E: Float>(g: &[E], v: &[E], mu: E) -> E {
    let mut acc = [E::zero(); 8];
    let (cg, cv) = (g.chunks_exact(8), v.chunks_exact(8));
    let (rg, rv) = (cg.remainder(), cv.remainder());
    for (a8, b8) in cg.zip(cv) {
        for k in 0..8 {
            acc[k] += a8[k] * (b8[k] - mu);
        }
    }
    for (k, (&a, &b)) in rg.iter().zip(rv).enumerate() {
        acc[k] += a * (b - mu);
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}
