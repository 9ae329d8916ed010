//! Pooling kernels over the last two dimensions of a stack of planes.
//!
//! Every pooling window is a rectangle `rows[oy] x cols[ox]` of input
//! positions (already clipped to the input, so padding never appears in a
//! window). Max pooling ([`max_forward`]) returns, per output, the window's
//! maximum and its position inside the plane, in one pass vectorised over
//! output rows (`max_rows`; 2x2 windows at stride 2 in `f32` with
//! AVX-512F, 16 outputs a register, `max_2x2`); gradients then move with [`scatter_add`],
//! whose adjoint is [`gather`]. Average pooling sums a window and divides by
//! a per-output divisor ([`avg_forward`], adjoint [`avg_backward`]).
//! Planes are processed in parallel in fixed chunks; each output is computed
//! by one call in a fixed order, so results do not depend on the thread count.

use super::buffers::{build_chunks, build_planes, fill_init, for_each_chunk_mut};
use super::memory::Storage;
#[cfg(target_arch = "x86_64")]
use super::same_type::{cast, cast_uninit};
use crate::base::Float;

mod max_2x2;
mod max_rows;
mod max_s2;
mod max_values;
#[cfg(test)]
mod tests;

/// Input elements per parallel chunk of [`max_forward`] (whole planes, at
/// least one): fixed, so the chunks depend on the shape only.
const MAX_CHUNK_ELEMS: usize = 1 << 14;

/// Input elements per parallel chunk of [`max_values`] where it runs the
/// position-tracking kernel (whole planes, at least one; fixed, so the
/// chunks depend on the shape only): about 2 ns per input element for a
/// 3x3 window, so a chunk of this size is about [`PARALLEL_MIN_NS`] of
/// work. ResNet-18's pooling after the stem at batch 1 (`[1, 64, 16, 16]`,
/// 3x3 stride 2: 33 µs on one thread, 3.5% of the forward) was one chunk
/// of [`MAX_CHUNK_ELEMS`], so the second thread waited through it; it is
/// two chunks of 32 planes with this size.
///
/// [`PARALLEL_MIN_NS`]: crate::cpu::threads::PARALLEL_MIN_NS
const RUNS_CHUNK_ELEMS: usize = 1 << 13;

/// The windows of a pooling over `h x w` planes producing `oh x ow` planes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolWindows {
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Half-open input row range `[start, end)` of each output row.
    pub rows: Vec<(usize, usize)>,
    /// Half-open input column range of each output column.
    pub cols: Vec<(usize, usize)>,
    /// The step between window positions (rows, columns): 1 except for a
    /// dilated max pooling. Each range's start is a window position.
    pub dilation: [usize; 2],
}

/// Window ranges along one axis for a sliding window of `k` positions
/// `dilation` apart, moved by `s` over the input padded by `p` on each side,
/// in floor or ceil mode (PyTorch's output size, whose last window must
/// start inside the input or its left padding); `None` when the padded
/// input is shorter than the window. Each range starts at its first
/// position inside the input and ends past its last one.
fn sliding_axis(
    len: usize,
    k: usize,
    s: usize,
    p: usize,
    dilation: usize,
    ceil: bool,
) -> Option<Vec<(usize, usize)>> {
    let span = dilation * (k - 1) + 1;
    let room = (len + 2 * p).checked_sub(span)?;
    let mut out = if ceil { room.div_ceil(s) } else { room / s } + 1;
    if ceil && (out - 1) * s >= len + p {
        out -= 1;
    }
    Some(
        (0..out)
            .map(|o| {
                let first = (o * s) as isize - p as isize;
                // The first window position at or after 0.
                let skip = if first < 0 {
                    (-first as usize).div_ceil(dilation)
                } else {
                    0
                };
                let start = (first + (skip * dilation) as isize) as usize;
                let end = ((first + span as isize).max(0) as usize).min(len);
                (start.min(end), end)
            })
            .collect(),
    )
}

/// The count-include-pad divisor along one axis: the window's extent
/// clipped to the padded input (`min(start + k, len + p) - start`), which
/// is `k` except for a ceil-mode window running past the right padding.
fn padded_extent(len: usize, k: usize, s: usize, p: usize, out: usize) -> Vec<usize> {
    (0..out)
        .map(|o| (o * s + k).min(len + 2 * p) - o * s)
        .collect()
}

/// PyTorch's adaptive bins `[floor(i * len / out), ceil((i + 1) * len / out))`.
fn adaptive_axis(len: usize, out: usize) -> Vec<(usize, usize)> {
    (0..out)
        .map(|i| ((i * len) / out, ((i + 1) * len).div_ceil(out)))
        .collect()
}

impl PoolWindows {
    /// Sliding windows of size `kernel`, moved by `stride`, over the input
    /// padded by `padding` on each side (floor mode). `None` when the padded
    /// input is smaller than the kernel or a stride is zero.
    pub fn sliding(
        input: [usize; 2],
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Option<Self> {
        Self::sliding_with(input, kernel, stride, padding, [1, 1], false)
    }

    /// Sliding windows as [`sliding`](Self::sliding), with window positions
    /// `dilation` apart and PyTorch's `ceil_mode` (an extra window at the end
    /// when the last one would start inside the input or its left padding).
    /// `None` when the padded input is smaller than the dilated kernel, or a
    /// kernel size, stride or dilation is zero.
    pub fn sliding_with(
        input: [usize; 2],
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
        dilation: [usize; 2],
        ceil_mode: bool,
    ) -> Option<Self> {
        if stride.contains(&0) || kernel.contains(&0) || dilation.contains(&0) {
            return None;
        }
        Some(PoolWindows {
            h: input[0],
            w: input[1],
            rows: sliding_axis(
                input[0],
                kernel[0],
                stride[0],
                padding[0],
                dilation[0],
                ceil_mode,
            )?,
            cols: sliding_axis(
                input[1],
                kernel[1],
                stride[1],
                padding[1],
                dilation[1],
                ceil_mode,
            )?,
            dilation,
        })
    }

    /// PyTorch's count-include-pad divisors of undilated sliding windows,
    /// row-major over the output: `kh * kw`, except for ceil-mode windows
    /// that run past the right padding, which count only their part inside
    /// the padded input.
    pub fn padded_counts(
        &self,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Vec<usize> {
        let r = padded_extent(self.h, kernel[0], stride[0], padding[0], self.oh());
        let c = padded_extent(self.w, kernel[1], stride[1], padding[1], self.ow());
        r.iter()
            .flat_map(|&a| c.iter().map(move |&b| a * b))
            .collect()
    }

    /// Adaptive bins producing an `out` plane; bins may overlap.
    pub fn adaptive(input: [usize; 2], out: [usize; 2]) -> Self {
        PoolWindows {
            h: input[0],
            w: input[1],
            rows: adaptive_axis(input[0], out[0]),
            cols: adaptive_axis(input[1], out[1]),
            dilation: [1, 1],
        }
    }

    /// Output height.
    pub fn oh(&self) -> usize {
        self.rows.len()
    }

    /// Output width.
    pub fn ow(&self) -> usize {
        self.cols.len()
    }

    /// The number of input elements in each (undilated) window, row-major
    /// over the output.
    pub fn counts(&self) -> Vec<usize> {
        let mut v = Vec::with_capacity(self.oh() * self.ow());
        for &(r0, r1) in &self.rows {
            for &(c0, c1) in &self.cols {
                v.push((r1 - r0) * (c1 - c0));
            }
        }
        v
    }

    fn in_plane(&self) -> usize {
        self.h * self.w
    }

    fn out_plane(&self) -> usize {
        self.oh() * self.ow()
    }
}

/// For each output of each plane of `x` (planes of `h * w`), the position of
/// its window's maximum inside the plane (the first one on ties; a NaN
/// wins). An empty window yields position 0. In a pooled buffer. The
/// reference the tests check the fused [`max_forward`] against.
#[cfg(test)]
pub fn max_argmax<E: Float>(win: &PoolWindows, x: &[E]) -> Storage<usize> {
    let (ip, op) = (win.in_plane(), win.out_plane());
    let planes = x.len() / ip.max(1);
    let [dr, dc] = win.dilation;
    build_planes(planes, op, ip.max(op), |p, out| {
        let plane = &x[p * ip..(p + 1) * ip];
        let mut slots = out.iter_mut();
        for &(r0, r1) in &win.rows {
            for &(c0, c1) in &win.cols {
                let mut best = 0;
                if r0 < r1 && c0 < c1 {
                    best = r0 * win.w + c0;
                    let mut bv = plane[best];
                    for r in (r0..r1).step_by(dr) {
                        let row = &plane[r * win.w..(r + 1) * win.w];
                        for c in (c0..c1).step_by(dc) {
                            let v = row[c];
                            if v > bv || (v.is_nan() && !bv.is_nan()) {
                                (best, bv) = (r * win.w + c, v);
                            }
                        }
                    }
                }
                if let Some(slot) = slots.next() {
                    slot.write(best);
                }
            }
        }
    })
}

/// Max pooling of every `h x w` plane of `x`: per output, its window's
/// maximum and that maximum's position inside the plane (the first one on
/// ties; the first NaN wins), exactly `max_argmax` and [`gather`] in one
/// pass vectorised over output rows. An empty window yields `x`'s first
/// element of the plane and position 0. Both in pooled buffers; planes in
/// parallel, each computed by one call, so the results do not depend on
/// the thread count.
pub fn max_forward<E: Float>(win: &PoolWindows, x: &[E]) -> (Storage<E>, Storage<usize>) {
    let (ip, op) = (win.in_plane(), win.out_plane());
    let planes = x.len() / ip.max(1);
    let n = planes * op;
    let (mut vals, mut idx) = (Storage::with_capacity(n), Storage::with_capacity(n));
    if n > 0 {
        let per = (MAX_CHUNK_ELEMS / ip.max(1)).max(1);
        let run = max_rows::Run::of(win);
        let mut parts: Vec<(_, _)> = vals.spare_capacity_mut()[..n]
            .chunks_mut(per * op)
            .zip(idx.spare_capacity_mut()[..n].chunks_mut(per * op))
            .collect();
        let two_by_two = max_2x2::applies::<E>(win);
        for_each_chunk_mut(&mut parts, 1, |ch, part| {
            let (v, i) = &mut part[0];
            if two_by_two {
                max_2x2::max_planes(win, &x[ch * per * ip..planes * ip], v, i);
                return;
            }
            let mut sc = max_rows::Scratch::new(win, &run);
            max_rows::max_planes(win, &run, &mut sc, &x[..planes * ip], ch * per, v, i);
        });
    }
    // SAFETY: the chunks cover `0..n` of both buffers (capacity `n`), and
    // `max_plane` writes every element of the output planes it is given.
    unsafe {
        vals.set_len(n);
        idx.set_len(n);
    }
    (vals, idx)
}

/// The values of [`max_forward`] without the positions (for inference,
/// when no gradient flows back), bit for bit: per output, its window's
/// first maximum, or its first NaN, in a pooled buffer. Planes in parallel
/// in chunks fixed by the shape, so the result does not depend on the
/// thread count.
pub fn max_values<E: Float>(win: &PoolWindows, x: &[E]) -> Storage<E> {
    let (ip, op) = (win.in_plane(), win.out_plane());
    let planes = x.len() / ip.max(1);
    let per = (MAX_CHUNK_ELEMS / ip.max(1)).max(1);
    let run = max_rows::Run::of(win);
    if planes * op > 0 && max_2x2::applies::<E>(win) {
        // The 2x2 stride-2 kernel, positions into a scratch buffer and
        // dropped (the same values).
        return build_chunks(planes * op, per * op, |ch, out| {
            let mut idx_buf = Storage::<usize>::with_capacity(out.len());
            let idx = &mut idx_buf.spare_capacity_mut()[..out.len()];
            max_2x2::max_planes(win, &x[ch * per * ip..planes * ip], out, idx);
        });
    }
    #[cfg(target_arch = "x86_64")]
    if planes * op > 0 && max_s2::applies::<E>(win) {
        // Stride-2 windows (ResNet's stem): whole padded planes in 16-lane
        // registers, the same values.
        let len = max_s2::Padded::of(win).map_or(0, |g| g.scratch_len());
        return build_chunks(planes * op, per * op, |ch, out| {
            let x = &x[ch * per * ip..][..out.len() / op * ip];
            let mut scratch = Storage::<f32>::stale(len);
            let (Some(x), Some(out)) = (cast::<E, f32>(x), cast_uninit::<E, f32>(out)) else {
                unreachable!("max_s2 applies to f32 only")
            };
            max_s2::max_planes(win, x, &mut scratch, out);
        });
    }
    if planes * op > 0 && max_rows::avx2_runs::<E>(win, &run) {
        // The position-tracking kernel, positions into a scratch buffer
        // and dropped: with its AVX2 intrinsics it is about twice as fast
        // as the separable kernel here, and its values are the same bits.
        // Chunks of half the usual size (see `RUNS_CHUNK_ELEMS`).
        let per = (RUNS_CHUNK_ELEMS / ip.max(1)).max(1);
        return build_chunks(planes * op, per * op, |ch, out| {
            let mut sc = max_rows::Scratch::new(win, &run);
            // The positions in a pooled buffer (a `vec!` of this size is a
            // C-allocator block that a worker's arena may return to the OS
            // and fault in again on the next step).
            let mut idx_buf = Storage::<usize>::with_capacity(out.len());
            let idx = &mut idx_buf.spare_capacity_mut()[..out.len()];
            max_rows::max_planes(win, &run, &mut sc, &x[..planes * ip], ch * per, out, idx);
        });
    }
    build_chunks(planes * op, per * op, |ch, out| {
        let mut scratch = vec![E::zero(); (win.h + 1) * win.ow()];
        let x = &x[ch * per * ip..][..out.len() / op.max(1) * ip];
        max_values::max_planes(win, x, &mut scratch, out);
    })
}

/// `out[p, k] = x[p, idx[p, k]]` for planes of `in_plane` inputs and
/// `out_plane` outputs, in a pooled buffer.
pub fn gather<E: Float>(x: &[E], idx: &[usize], in_plane: usize, out_plane: usize) -> Storage<E> {
    let planes = idx.len() / out_plane.max(1);
    build_planes(planes, out_plane, out_plane, |p, o| {
        let plane = &x[p * in_plane..(p + 1) * in_plane];
        for (v, &i) in o.iter_mut().zip(&idx[p * out_plane..]) {
            v.write(plane[i]);
        }
    })
}

/// The adjoint of [`gather`]: `x[p, idx[p, k]] += g[p, k]`, over `planes`
/// planes, in increasing `k` within each plane, in a pooled buffer.
pub fn scatter_add<E: Float>(
    g: &[E],
    idx: &[usize],
    in_plane: usize,
    out_plane: usize,
    planes: usize,
) -> Storage<E> {
    build_planes(planes, in_plane, in_plane + out_plane, |p, plane| {
        let plane = fill_init(plane, E::zero());
        let range = p * out_plane..(p + 1) * out_plane;
        for (&v, &i) in g[range.clone()].iter().zip(&idx[range]) {
            plane[i] += v;
        }
    })
}

/// Average pooling: each output is its window's sum divided by `div[k]`
/// (one divisor per output position of a plane), in a pooled buffer.
pub fn avg_forward<E: Float>(win: &PoolWindows, x: &[E], div: &[E]) -> Storage<E> {
    let (ip, op) = (win.in_plane(), win.out_plane());
    let planes = x.len() / ip.max(1);
    build_planes(planes, op, ip.max(op), |p, o| {
        let plane = &x[p * ip..(p + 1) * ip];
        let mut k = 0;
        for &(r0, r1) in &win.rows {
            for &(c0, c1) in &win.cols {
                let mut s = E::zero();
                for r in r0..r1 {
                    for &v in &plane[r * win.w + c0..r * win.w + c1] {
                        s += v;
                    }
                }
                o[k].write(s / div[k]);
                k += 1;
            }
        }
    })
}

/// The adjoint of [`avg_forward`]: every input in output `k`'s window
/// receives `g[k] / div[k]`; in a pooled buffer.
pub fn avg_backward<E: Float>(win: &PoolWindows, g: &[E], div: &[E]) -> Storage<E> {
    let (ip, op) = (win.in_plane(), win.out_plane());
    let planes = g.len() / op.max(1);
    build_planes(planes, ip, ip.max(op), |p, plane| {
        let plane = fill_init(plane, E::zero());
        let gp = &g[p * op..(p + 1) * op];
        let mut k = 0;
        for &(r0, r1) in &win.rows {
            for &(c0, c1) in &win.cols {
                let v = gp[k] / div[k];
                for r in r0..r1 {
                    for dst in &mut plane[r * win.w + c0..r * win.w + c1] {
                        *dst += v;
                    }
                }
                k += 1;
            }
        }
    })
}

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn pool_windows() {
        use crate::cpu::pool::PoolWindows;
        let p = PoolWindows::sliding([5, 5], [2, 2], [2, 2], [0, 0]).unwrap();
        assert_eq!((p.oh(), p.ow()), (2, 2));
        assert_eq!(p.rows, vec![(0, 2), (2, 4)]);
    }

    #[test]
    fn sliding() {
        use crate::cpu::pool::PoolWindows;
        let p = PoolWindows::sliding([7, 6], [3, 3], [2, 2], [1, 1]).unwrap();
        assert_eq!(p.rows, vec![(0, 2), (1, 4), (3, 6), (5, 7)]);
    }

    #[test]
    fn sliding_with() {
        use crate::cpu::pool::PoolWindows;
        // k 2, stride 2 over 5: floor mode drops the last element, ceil mode keeps it.
        let p = PoolWindows::sliding_with([1, 5], [1, 2], [1, 2], [0, 0], [1, 1], true).unwrap();
        assert_eq!(p.cols, vec![(0, 2), (2, 4), (4, 5)]);
        // k 2, dilation 2: positions {0, 2}, {2, 4}.
        let p = PoolWindows::sliding_with([1, 5], [1, 2], [1, 2], [0, 0], [1, 2], false).unwrap();
        assert_eq!(p.cols, vec![(0, 3), (2, 5)]);
    }

    #[test]
    fn padded_counts() {
        use crate::cpu::pool::PoolWindows;
        let p = PoolWindows::sliding_with([1, 5], [1, 2], [1, 2], [0, 0], [1, 1], true).unwrap();
        assert_eq!(p.padded_counts([1, 2], [1, 2], [0, 0]), vec![2, 2, 1]);
    }

    #[test]
    fn adaptive() {
        use crate::cpu::pool::PoolWindows;
        let p = PoolWindows::adaptive([7, 5], [3, 2]);
        assert_eq!(p.rows, vec![(0, 3), (2, 5), (4, 7)]);
        assert_eq!(p.cols, vec![(0, 3), (2, 5)]);
    }

    #[test]
    fn oh() {
        assert_eq!(
            crate::cpu::pool::PoolWindows::adaptive([4, 4], [2, 3]).oh(),
            2
        );
    }

    #[test]
    fn ow() {
        assert_eq!(
            crate::cpu::pool::PoolWindows::adaptive([4, 4], [2, 3]).ow(),
            3
        );
    }

    #[test]
    fn counts() {
        let p = crate::cpu::pool::PoolWindows::sliding([3, 3], [2, 2], [2, 2], [1, 1]).unwrap();
        assert_eq!(p.counts(), vec![1, 2, 2, 4]);
    }

    #[test]
    fn max_argmax() {
        use crate::cpu::pool::{max_argmax, PoolWindows};
        let p = PoolWindows::sliding([2, 2], [2, 2], [2, 2], [0, 0]).unwrap();
        assert_eq!(&max_argmax(&p, &[1.0f32, 4.0, 3.0, 2.0])[..], &[1]);
    }

    #[test]
    fn max_forward() {
        use crate::cpu::pool::{max_forward, PoolWindows};
        let p = PoolWindows::sliding([2, 4], [2, 2], [2, 2], [0, 0]).unwrap();
        let (v, i) = max_forward(&p, &[1.0f32, 4.0, 0.0, 5.0, 3.0, 2.0, 5.0, 1.0]);
        assert_eq!((&v[..], &i[..]), (&[4.0, 5.0][..], &[1, 3][..]));
    }

    #[test]
    fn max_values() {
        use crate::cpu::pool::{max_values, PoolWindows};
        let p = PoolWindows::sliding([2, 4], [2, 2], [2, 2], [0, 0]).unwrap();
        let v = max_values(&p, &[1.0f32, 4.0, 0.0, 5.0, 3.0, 2.0, 5.0, 1.0]);
        assert_eq!(&v[..], &[4.0, 5.0]);
    }

    #[test]
    fn gather() {
        let y = crate::cpu::pool::gather(&[1.0f32, 2.0, 3.0, 4.0], &[1, 0], 2, 1);
        assert_eq!(&y[..], &[2.0, 3.0]);
    }

    #[test]
    fn scatter_add() {
        let x = crate::cpu::pool::scatter_add(&[1.0f32, 2.0], &[1, 1], 2, 2, 1);
        assert_eq!(&x[..], &[0.0, 3.0]);
    }

    #[test]
    fn avg_forward() {
        use crate::cpu::pool::{avg_forward, PoolWindows};
        let p = PoolWindows::adaptive([2, 2], [1, 1]);
        assert_eq!(
            &avg_forward(&p, &[1.0f64, 2.0, 3.0, 6.0], &[4.0])[..],
            &[3.0]
        );
    }

    #[test]
    fn avg_backward() {
        use crate::cpu::pool::{avg_backward, PoolWindows};
        let p = PoolWindows::adaptive([2, 2], [1, 1]);
        assert_eq!(&avg_backward(&p, &[8.0f64], &[4.0])[..], &[2.0; 4]);
    }
}
