//! Log-probability ops: `softmax`, `log_softmax`, `logsumexp` and
//! `log_sigmoid`, all numerically stable (shifted by the maximum, which is
//! treated as a constant: the result does not depend on the shift).
//!
//! Rules are written in tensor ops, so second derivatives work:
//! `d softmax = y * (g - sum(g * y))`, `d log_softmax = g - softmax(x) * sum(g)`,
//! `d logsumexp = g * exp(x - lse)`.

use super::reduce::{reduce_axes, reduced_shape};
use crate::base::Dims;
use crate::cpu::buffers::for_each_chunk_mut;
use crate::cpu::elementwise::widest;
use crate::cpu::reduce::{fold_axes, kept_shape};
use crate::cpu::threads::PARALLEL_MIN_NS;
use crate::cpu::vmath;
use crate::cpu::Storage;
use crate::tensor::{norm_axis, Device, Float, Tensor};

/// `(outer, n, inner)`: the sizes before, along and after `axis`.
fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}

/// Applies `f(row_in, row_out)` to every line along `axis` (strided by
/// `inner`), gathering each line into a contiguous buffer first.
fn per_line<E: Float>(
    x: &[E],
    shape: &[usize],
    axis: usize,
    f: impl Fn(&[E], &mut [E]) + Sync,
) -> Storage<E> {
    let (outer, n, inner) = split_at_axis(shape, axis);
    if inner == 1 {
        // Lines are contiguous rows: run `f` on them in place, in parallel
        // over fixed blocks of rows (each row is computed by one call,
        // which writes all of it: no zeroing pass first).
        let mut out = Storage::stale(x.len());
        let rows = ROW_BLOCK_ELEMS.div_ceil(n.max(1)).max(1);
        row_blocks_mut(
            &mut out,
            rows * n.max(1),
            exp_cost(x.len()),
            #[inline(always)]
            |b, chunk| {
                let src = &x[b * rows * n..][..chunk.len()];
                for (xr, or) in src.chunks(n.max(1)).zip(chunk.chunks_mut(n.max(1))) {
                    f(xr, or);
                }
            },
        );
        return out;
    }
    let mut out = Storage::filled(x.len(), E::zero());
    let mut line = vec![E::zero(); n];
    let mut res = vec![E::zero(); n];
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            for (j, l) in line.iter_mut().enumerate() {
                *l = x[base + j * inner];
            }
            f(&line, &mut res);
            for (j, r) in res.iter().enumerate() {
                out[base + j * inner] = *r;
            }
        }
    }
    out
}

/// The maximum of a line, or 0 when it is empty or every entry is `-inf`
/// (so that `-inf - max` stays `-inf` instead of becoming NaN).
fn line_max<E: Float>(line: &[E]) -> E {
    let m = line_max_raw(line);
    if m == E::neg_infinity() {
        E::zero()
    } else {
        m
    }
}

/// The maximum of a line (`-inf` when it is empty or every entry is).
#[inline(always)]
pub(crate) fn line_max_raw<E: Float>(line: &[E]) -> E {
    // 16 running maxima, then their maximum: the same value as one fold
    // from the left (`max` ignores NaNs whatever the order, and the
    // maximum of numbers does not depend on it; only the sign of a zero
    // maximum can differ, which no caller sees: it is subtracted before
    // `exp`, and `x - 0` is `x - (-0)` for every `x` but a zero, whose
    // `exp` is 1 either way), in 16 independent chains the compiler
    // vectorizes instead of one chain of dependent `max`es.
    let mut acc = [E::neg_infinity(); 16];
    let mut chunks = line.chunks_exact(16);
    for c in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a = a.max(x);
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(E::neg_infinity(), |a, &b| a.max(b));
    acc.iter().fold(tail, |a, &b| a.max(b))
}

/// `line *= scale`, and the [`line_max_raw`] of the scaled line, in one
/// pass: the same products and the same 16 chains of maxima, so the same
/// values as the two passes.
#[inline(always)]
pub(crate) fn scale_line_max_raw<E: Float>(line: &mut [E], scale: E) -> E {
    let mut acc = [E::neg_infinity(); 16];
    let mut chunks = line.chunks_exact_mut(16);
    for c in &mut chunks {
        for (a, x) in acc.iter_mut().zip(c.iter_mut()) {
            *x *= scale;
            *a = a.max(*x);
        }
    }
    let tail = chunks
        .into_remainder()
        .iter_mut()
        .fold(E::neg_infinity(), |a, x| {
            *x *= scale;
            a.max(*x)
        });
    acc.iter().fold(tail, |a, &b| a.max(b))
}

/// Elements per block of rows handed to one parallel task.
pub(crate) const ROW_BLOCK_ELEMS: usize = 1 << 14;

/// Estimated single-thread cost in nanoseconds of a row kernel with one
/// `exp` per element over `len` elements (a few passes over each row).
pub(crate) fn exp_cost(len: usize) -> usize {
    2 * len
}

/// Runs `f(block, chunk)` on the consecutive `chunk_len`-element chunks of
/// `out` (fixed, whatever the thread count), each call compiled at the
/// widest vector width the CPU class allows
/// ([`widest`](crate::cpu::elementwise::widest): mark `f`
/// `#[inline(always)]` so that its loops are compiled there): in parallel when the whole
/// op's single-thread cost `cost_ns` pays for waking a worker
/// ([`parallel_for_cost`](crate::cpu::threads::parallel_for_cost)), else
/// in order on the calling thread.
pub(crate) fn row_blocks_mut<E: Send>(
    out: &mut [E],
    chunk_len: usize,
    cost_ns: usize,
    f: impl Fn(usize, &mut [E]) + Sync,
) {
    // each block at the widest vector width (the same bits: see `widest`)
    let run = |b: usize, chunk: &mut [E]| {
        widest(
            #[inline(always)]
            || f(b, chunk),
        )
    };
    if cost_ns < PARALLEL_MIN_NS {
        for (b, chunk) in out.chunks_mut(chunk_len.max(1)).enumerate() {
            run(b, chunk);
        }
    } else {
        for_each_chunk_mut(out, chunk_len, run);
    }
}

/// A pooled buffer of `n` zeros, written over fixed chunks of
/// `ROW_BLOCK_ELEMS` elements in parallel when the pass costs at least
/// `PARALLEL_MIN_NS` at about 0.25 ns per element: a large op output (a
/// matmul's, a softmax's) zeroed by the caller alone was serial time at
/// 2 threads.
pub(crate) fn zeroed_output<E: Float>(n: usize) -> Storage<E> {
    let mut s = Storage::<E>::with_capacity(n);
    row_blocks_mut(
        &mut s.spare_capacity_mut()[..n],
        ROW_BLOCK_ELEMS,
        n / 4,
        #[inline(always)]
        |_, chunk| {
            for v in chunk {
                v.write(E::zero());
            }
        },
    );
    // SAFETY: the capacity is at least `n`, and the loop above wrote each
    // of the first `n` elements (every chunk of them, once).
    unsafe { s.set_len(n) };
    s
}

/// `sum(v)` in eight interleaved partial sums (so the loop vectorises),
/// combined in a fixed order.
#[inline(always)]
pub(crate) fn lane_sum<E: Float>(v: &[E]) -> E {
    let mut acc = [E::zero(); 8];
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a += x;
        }
    }
    for (a, &x) in acc.iter_mut().zip(chunks.remainder()) {
        *a += x;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

/// `sum(a * b)` as [`lane_sum`] does it.
#[inline(always)]
pub(crate) fn lane_dot<E: Float>(a: &[E], b: &[E]) -> E {
    let mut acc = [E::zero(); 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    for (k, (&x, &y)) in ra.iter().zip(rb).enumerate() {
        acc[k] += x * y;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))
}

/// `out = x - max`, then `exp` in place by [`vmath::exp`]; returns the sum.
fn shifted_exp<E: Float>(line: &[E], out: &mut [E]) -> E {
    let m = line_max(line);
    for (o, &x) in out.iter_mut().zip(line) {
        *o = x - m;
    }
    vmath::exp(out);
    lane_sum(out)
}

fn softmax_line<E: Float>(line: &[E], out: &mut [E]) {
    let s = shifted_exp(line, out);
    for o in out.iter_mut() {
        *o /= s;
    }
}

fn log_softmax_line<E: Float>(line: &[E], out: &mut [E]) {
    let m = line_max(line);
    let s = shifted_exp(line, out);
    let lse = m + s.ln();
    for (o, &x) in out.iter_mut().zip(line) {
        *o = x - lse;
    }
}

/// The softmax input gradient of rows of length `n` (the last axis), one
/// pass per row: `gx = y (g - sum(g y))`.
pub(crate) fn softmax_backward_rows<E: Float>(y: &[E], g: &[E], n: usize) -> Storage<E> {
    // every element is written below
    let mut gx = Storage::stale(y.len());
    let rows = ROW_BLOCK_ELEMS.div_ceil(n.max(1)).max(1);
    row_blocks_mut(
        &mut gx,
        rows * n.max(1),
        exp_cost(y.len()),
        #[inline(always)]
        |b, chunk| {
            let at = b * rows * n;
            let (yb, gb) = (&y[at..at + chunk.len()], &g[at..at + chunk.len()]);
            for ((o, yr), gr) in chunk
                .chunks_mut(n.max(1))
                .zip(yb.chunks(n.max(1)))
                .zip(gb.chunks(n.max(1)))
            {
                let s = lane_dot(gr, yr);
                for ((o, &y), &g) in o.iter_mut().zip(yr).zip(gr) {
                    *o = y * (g - s);
                }
            }
        },
    );
    gx
}

/// The log-softmax input gradient of rows of length `n` from the saved
/// output `lp`: `gx = g - exp(lp) sum(g)`.
fn log_softmax_backward_rows<E: Float>(lp: &[E], g: &[E], n: usize) -> Storage<E> {
    // every element is written below
    let mut gx = Storage::stale(lp.len());
    let rows = ROW_BLOCK_ELEMS.div_ceil(n.max(1)).max(1);
    row_blocks_mut(
        &mut gx,
        rows * n.max(1),
        exp_cost(lp.len()),
        #[inline(always)]
        |b, chunk| {
            let at = b * rows * n;
            chunk.copy_from_slice(&lp[at..at + chunk.len()]);
            vmath::exp(chunk);
            let gb = &g[at..at + chunk.len()];
            for (o, gr) in chunk.chunks_mut(n.max(1)).zip(gb.chunks(n.max(1))) {
                let s = lane_sum(gr);
                for (o, &g) in o.iter_mut().zip(gr) {
                    *o = g - *o * s;
                }
            }
        },
    );
    gx
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// `exp(x) / sum(exp(x))` along `axis` (negative counts from the end).
    ///
    /// # Panics
    /// When the axis is out of range.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![1.0, 1.0, 0.0, 1000.0], &[2, 2]);
    /// assert_eq!(t.softmax(-1).to_vec(), vec![0.5, 0.5, 0.0, 1.0]);
    /// ```
    #[track_caller]
    pub fn softmax(&self, axis: isize) -> Self {
        let ax = norm_axis("softmax", axis, self.rank());
        if self.rank() == 0 {
            return self
                .map(|_| E::one())
                .record("softmax", vec![self.clone()], |ctx| {
                    vec![Some(ctx.grad.mul_scalar(E::zero()))]
                });
        }
        let data = per_line(self.as_slice(), self.shape(), ax, softmax_line);
        let y = Tensor::from_parts(data, self.shape.clone(), None);
        let saved = y.clone();
        let a = ax as isize;
        let last = ax + 1 == self.rank();
        y.record("softmax", vec![self.clone()], move |ctx| {
            if last && !ctx.create_graph {
                let n = saved.dim(-1);
                let gx = softmax_backward_rows(saved.as_slice(), ctx.grad.as_slice(), n);
                return vec![Some(Tensor::from_parts(gx, saved.shape.clone(), None))];
            }
            let y = if ctx.create_graph {
                ctx.inputs[0].softmax(a)
            } else {
                saved.clone()
            };
            let gy = ctx.grad.mul(&y);
            let s = gy.sum_dim(&[a], true);
            vec![Some(gy.sub(&y.mul(&s)))]
        })
    }

    /// `x - logsumexp(x)` along `axis`: log-probabilities, computed without
    /// forming `softmax` (stable for large logits).
    ///
    /// # Panics
    /// When the axis is out of range.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![0.0, 0.0], &[2]);
    /// let l = t.log_softmax(0).to_vec();
    /// assert!((l[0] + 2f64.ln()).abs() < 1e-15);
    /// ```
    #[track_caller]
    pub fn log_softmax(&self, axis: isize) -> Self {
        let ax = norm_axis("log_softmax", axis, self.rank());
        if self.rank() == 0 {
            return self
                .map(|_| E::zero())
                .record("log_softmax", vec![self.clone()], |ctx| {
                    vec![Some(ctx.grad.mul_scalar(E::zero()))]
                });
        }
        let data = per_line(self.as_slice(), self.shape(), ax, log_softmax_line);
        let a = ax as isize;
        let y = Tensor::from_parts(data, self.shape.clone(), None);
        let saved = y.clone();
        let last = ax + 1 == self.rank();
        y.record("log_softmax", vec![self.clone()], move |ctx| {
            if last && !ctx.create_graph {
                let n = saved.dim(-1);
                let gx = log_softmax_backward_rows(saved.as_slice(), ctx.grad.as_slice(), n);
                return vec![Some(Tensor::from_parts(gx, saved.shape.clone(), None))];
            }
            let p = ctx.inputs[0].softmax(a);
            let s = ctx.grad.sum_dim(&[a], true);
            vec![Some(ctx.grad.sub(&p.mul(&s)))]
        })
    }

    /// `log(sum(exp(x)))` over every element, as a 0-d tensor.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![1000.0, 1000.0], &[2]);
    /// assert!((t.logsumexp().item() - (1000.0 + 2f64.ln())).abs() < 1e-12);
    /// ```
    #[track_caller]
    pub fn logsumexp(&self) -> Self {
        self.logsumexp_dim(&[] as &[isize], false)
    }

    /// `log(sum(exp(x)))` over `dims` (every axis when empty), shifted by the
    /// maximum for stability; `keepdim` keeps the reduced axes as size 1.
    ///
    /// # Panics
    /// When an axis is out of range or repeated.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::zeros(&[2, 4]);
    /// let l = t.logsumexp_dim(&[1], true);
    /// assert_eq!(l.shape(), &[2, 1]);
    /// assert!((l.to_vec()[0] - 4f64.ln()).abs() < 1e-15);
    /// ```
    #[track_caller]
    pub fn logsumexp_dim(&self, dims: impl Dims, keepdim: bool) -> Self {
        let dims = &dims.to_dims()[..];
        let axes = reduce_axes("logsumexp", dims, self.rank());
        let kept = kept_shape(self.shape(), &axes);
        let shape = reduced_shape(self.shape(), &axes, keepdim);
        let x = self.as_slice();
        let maxes = fold_axes(x, self.shape(), &axes, E::neg_infinity(), |a, v| a.max(v));
        let maxes: Vec<E> = maxes
            .iter()
            .map(|&m| if m.is_finite() { m } else { E::zero() })
            .collect();
        // Sum exp(x - max) with the max broadcast back over the reduced axes.
        let m_full = crate::cpu::broadcast::expand(&maxes, &kept, self.shape());
        let shifted: Vec<E> = x
            .iter()
            .zip(&m_full)
            .map(|(&v, &m)| (v - m).exp())
            .collect();
        let sums = fold_axes(&shifted, self.shape(), &axes, E::zero(), |a, v| a + v);
        let data: Vec<E> = sums.iter().zip(&maxes).map(|(&s, &m)| m + s.ln()).collect();
        let dims_owned: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
        Tensor::from_parts(data, shape.into(), None).record(
            "logsumexp",
            vec![self.clone()],
            move |ctx| {
                let x = &ctx.inputs[0];
                let lse = x.logsumexp_dim(&dims_owned, true);
                let p = x.sub(&lse).exp();
                vec![Some(ctx.grad.view(&kept).mul(&p))]
            },
        )
    }

    /// `log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|))`, stable for large
    /// `|x|` (PyTorch's `logsigmoid`).
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![0.0, -800.0, 800.0], &[3]);
    /// let y = t.log_sigmoid().to_vec();
    /// assert!((y[0] + 2f64.ln()).abs() < 1e-15);
    /// assert_eq!(y[1], -800.0);
    /// assert_eq!(y[2], 0.0);
    /// ```
    #[track_caller]
    pub fn log_sigmoid(&self) -> Self {
        self.map(|x| x.min(E::zero()) - (-x.abs()).exp().ln_1p())
            .record("log_sigmoid", vec![self.clone()], |ctx| {
                // d/dx log sigmoid(x) = sigmoid(-x)
                vec![Some(ctx.grad.mul(&ctx.inputs[0].neg().sigmoid()))]
            })
    }
}

#[cfg(test)]
mod line_max_tests {
    use super::{line_max_raw, scale_line_max_raw};
    use crate::tensor::Rng;

    /// The attention's fused pass gives the bits of scaling the line and
    /// then taking `line_max_raw`: the scaled values and the maximum, at
    /// every length around the 16 chains, with infinities, NaN, signed
    /// zeros, subnormals and scales that overflow or round to zero.
    #[test]
    fn scale_line_max_raw_equals_the_two_passes() {
        let mut rng = Rng::new(5);
        let specials = [
            f32::NEG_INFINITY,
            f32::INFINITY,
            f32::NAN,
            0.0,
            -0.0,
            1e-40,
            -3e38,
        ];
        for len in 0..70 {
            for trial in 0..12 {
                let line: Vec<f32> = (0..len)
                    .map(|i| {
                        if (i + trial) % 5 == 0 {
                            specials[(i * 3 + trial) % specials.len()]
                        } else {
                            (rng.normal() * 10.0) as f32
                        }
                    })
                    .collect();
                for scale in [0.176_776_7f32, 1.0, -2.5, 1e30, 1e-30] {
                    let mut want = line.clone();
                    want.iter_mut().for_each(|v| *v *= scale);
                    let want_m = line_max_raw(&want);
                    let mut got = line.clone();
                    let got_m = scale_line_max_raw(&mut got, scale);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "len {len}, scale {scale}");
                    assert!(
                        got_m.to_bits() == want_m.to_bits() || (got_m.is_nan() && want_m.is_nan()),
                        "len {len}, scale {scale}: {got_m} vs {want_m}"
                    );
                }
            }
        }
    }

    #[test]
    fn line_max_raw_is_the_maximum_of_one_fold() {
        let mut rng = Rng::new(3);
        let specials = [f32::NEG_INFINITY, f32::INFINITY, f32::NAN, 0.0, -0.0];
        for len in 0..70 {
            for trial in 0..20 {
                let line: Vec<f32> = (0..len)
                    .map(|i| {
                        if (i + trial) % 7 == 0 {
                            specials[(i + trial) % specials.len()]
                        } else if trial % 5 == 0 {
                            f32::NAN
                        } else {
                            (rng.normal() * 10.0) as f32
                        }
                    })
                    .collect();
                let fold = line.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
                let got = line_max_raw(&line);
                // equal as numbers (a zero maximum may carry either sign)
                assert!(
                    got == fold || (got.is_nan() && fold.is_nan()),
                    "{line:?}: {got} vs {fold}"
                );
            }
        }
    }
}
