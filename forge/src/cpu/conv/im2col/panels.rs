//! The column matrix's packed panels written straight from the input
//! image: the packed `f32` kernel multiplies the weight by `kc x 32`
//! panels of `cols [c kh kw, nb oh ow]` (rows `k0..k0 + kc`, 32 columns
//! from `j0`, zero past the last), which the forward used to build in two
//! passes, im2col writing the whole column matrix and the packing copying
//! each panel out of it. [`ImagePanels::pack`] writes each panel from the
//! images directly, the values im2col would have put there (zero where
//! the window meets the padding), so the product has the same bits (the
//! packing is a copy) without the column matrix.
//!
//! A panel's 32 columns are cut once per panel into runs of consecutive
//! positions within one output row of one image ([`Run`]; never across
//! lane 16); row `(ci, ky, kx)` of the panel reads, for each run, the
//! input row that the tap meets (or nothing, on the padding rows) and the
//! run's inside columns. At column stride 1 those are consecutive input
//! values, so with AVX-512 each run is one masked load merged into its
//! 16-lane vector: several output rows share a vector on planes narrower
//! than 16. Other strides, and CPUs without AVX-512F, copy run by run.

use crate::cpu::conv::geom::ConvGeom;
use crate::cpu::gemm::prepared::PANEL_COLS as NR;

/// A run of a panel's columns: lanes `lane..lane + len` are output
/// columns `ox..ox + len` of output row `oy` of the image whose first
/// channel starts at `img` in the input. Within one half (16 lanes).
#[derive(Clone, Copy, Default, Debug)]
struct Run {
    lane: usize,
    len: usize,
    img: usize,
    oy: usize,
    ox: usize,
}

/// How the panels are written (the same values either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Writer {
    /// One masked AVX-512 load per run and half at column stride 1.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx512,
    /// Run by run in plain code (any stride; other CPUs).
    Portable,
}

impl Writer {
    /// The widest writer the CPU class in force allows.
    fn detect() -> Writer {
        Writer::all()[0]
    }

    /// Every writer this CPU (and class in force) has, widest first.
    pub(super) fn all() -> Vec<Writer> {
        let mut all = Vec::new();
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::class::cpu_has!("avx512f") {
            all.push(Writer::Avx512);
        }
        all.push(Writer::Portable);
        all
    }
}

/// The panels of images `b0..b0 + nb` of an `f32` input, the column matrix
/// `[c kh kw, nb oh ow]` of [`ConvGeom::im2col_batch`] (one group) as the
/// packed kernel reads it ([`pack`](Self::pack)).
pub(super) struct ImagePanels<'a> {
    g: ConvGeom,
    x: &'a [f32],
    b0: usize,
    nb: usize,
    /// [`ConvGeom::inside_cols`] of every kernel column.
    inside: Vec<(usize, usize)>,
    writer: Writer,
}

impl<'a> ImagePanels<'a> {
    /// The panels of images `b0..b0 + nb` of `x` (`[n, c, h, w]`), written
    /// by the widest [`Writer`].
    ///
    /// # Panics
    /// When `g` has several groups, or `x` does not hold those images.
    pub(super) fn new(g: &ConvGeom, x: &'a [f32], b0: usize, nb: usize) -> Self {
        Self::with_writer(g, x, b0, nb, Writer::detect())
    }

    /// [`new`](Self::new) with `writer` (one of [`Writer::all`]).
    ///
    /// # Panics
    /// As [`new`](Self::new).
    pub(super) fn with_writer(
        g: &ConvGeom,
        x: &'a [f32],
        b0: usize,
        nb: usize,
        writer: Writer,
    ) -> Self {
        assert_eq!(g.groups, 1, "image panels: one group");
        assert!(
            (b0 + nb) * g.c * g.h * g.w <= x.len(),
            "image panels: images {b0}..{} of a {}-float input",
            b0 + nb,
            x.len()
        );
        ImagePanels {
            g: *g,
            x,
            b0,
            nb,
            inside: g.inside_table(),
            writer,
        }
    }

    /// Columns of the matrix: `nb oh ow`.
    pub(super) fn cols(&self) -> usize {
        self.nb * self.g.l()
    }

    /// Writes the `kc x 32` panel at rows `k0..k0 + kc`, columns
    /// `j0..j0 + 32` of the column matrix into `dst` (row `p` at `32 p`),
    /// zero past its last column: every element of `dst[..32 kc]`. The
    /// layout and values of `pack_b_panel` over the column matrix
    /// (`tests::panels_equal_the_packed_columns`).
    ///
    /// # Panics
    /// When the rows pass `c kh kw`, `j0` is not a column, or `dst` is
    /// shorter than `32 kc`.
    pub(super) fn pack(&self, k0: usize, kc: usize, j0: usize, dst: &mut [f32]) {
        let g = &self.g;
        let taps = g.kh * g.kw;
        assert!(k0 + kc <= g.c * taps && j0 < self.cols() && dst.len() >= kc * NR);
        let mut runs = [Run::default(); NR];
        let (count, split) = self.runs(j0, &mut runs);
        let runs = &runs[..count];
        match self.writer {
            // SAFETY: the writer is `Avx512` only where the CPU has
            // AVX-512F (`Writer::all`); the function checks every read.
            #[cfg(target_arch = "x86_64")]
            Writer::Avx512 if g.stride[1] == 1 => unsafe {
                avx512::pack(self, k0, kc, runs, split, dst)
            },
            _ => self.pack_portable(k0, kc, runs, dst),
        }
    }

    /// Cuts the panel's columns `j0..j0 + 32` (those below the matrix's)
    /// into [`Run`]s, in lane order, none crossing lane 16; returns their
    /// count and the index of the first at or past lane 16.
    fn runs(&self, j0: usize, runs: &mut [Run; NR]) -> (usize, usize) {
        let (l, ow) = (self.g.l(), self.g.ow);
        let img_len = self.g.c * self.g.h * self.g.w;
        let end = self.cols().min(j0 + NR);
        let (mut j, mut count, mut split) = (j0, 0, None);
        while j < end {
            let (bi, q) = (j / l, j % l);
            let (oy, ox) = (q / ow, q % ow);
            let lane = j - j0;
            // to the end of the output row, the panel, or its half
            let half_end = if lane < 16 { j0 + 16 } else { j0 + NR };
            let len = (ow - ox).min(end - j).min(half_end - j);
            if lane >= 16 && split.is_none() {
                split = Some(count);
            }
            runs[count] = Run {
                lane,
                len,
                img: (self.b0 + bi) * img_len,
                oy,
                ox,
            };
            count += 1;
            j += len;
        }
        (count, split.unwrap_or(count))
    }

    /// The input run `run` meets at tap `(ky, kx)` of channel `ci`:
    /// `(lanes a..b, the input index of lane a)`, or `None` when the tap
    /// falls on the padding for every lane of the run.
    fn source(&self, run: &Run, ci: usize, ky: usize, kx: usize) -> Option<(usize, usize, usize)> {
        let g = &self.g;
        let iy = (run.oy * g.stride[0] + ky * g.dilation[0]).wrapping_sub(g.padding[0]);
        if iy >= g.h {
            return None;
        }
        let (a, b, ix) = self.source_cols(run, kx)?;
        Some((a, b, run.img + (ci * g.h + iy) * g.w + ix))
    }

    /// The columns run `run` reads at kernel column `kx`: `(lanes a..b,
    /// the input column of lane a)`, or `None` when every lane is on the
    /// padding.
    fn source_cols(&self, run: &Run, kx: usize) -> Option<(usize, usize, usize)> {
        let (lo, hi) = self.inside[kx];
        let (a, b) = (lo.max(run.ox), hi.min(run.ox + run.len));
        if a >= b {
            return None;
        }
        let ix = a * self.g.stride[1] + kx * self.g.dilation[1] - self.g.padding[1];
        Some((run.lane + a - run.ox, run.lane + b - run.ox, ix))
    }

    /// [`pack`](Self::pack) in plain code: each row zeroed, then each
    /// run's inside values copied.
    fn pack_portable(&self, k0: usize, kc: usize, runs: &[Run], dst: &mut [f32]) {
        let g = &self.g;
        let s1 = g.stride[1];
        for (p, row) in dst[..kc * NR].chunks_exact_mut(NR).enumerate() {
            let (ci, t) = ((k0 + p) / (g.kh * g.kw), (k0 + p) % (g.kh * g.kw));
            let (ky, kx) = (t / g.kw, t % g.kw);
            row.fill(0.0);
            for run in runs {
                let Some((a, b, at)) = self.source(run, ci, ky, kx) else {
                    continue;
                };
                if s1 == 1 {
                    row[a..b].copy_from_slice(&self.x[at..at + (b - a)]);
                } else {
                    for (d, i) in row[a..b].iter_mut().zip((at..).step_by(s1)) {
                        *d = self.x[i];
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{ImagePanels, Run, NR};
    use std::arch::x86_64::*;

    /// A run's reads at one kernel column: lanes `a..b` of its half
    /// (`mask`), lane `i` reading `x[base + ch + row + i]` for the channel
    /// offset `ch` and input row offset `row` of the tap (wrapping: `base`
    /// may be below zero by up to `a`); `mask` 0 when every lane is on the
    /// padding.
    #[derive(Clone, Copy, Default)]
    struct Cols {
        mask: u16,
        a: usize,
        b: usize,
        base: usize,
    }

    /// No input row: the tap's row is on the padding.
    const PAD: usize = usize::MAX;

    /// [`ImagePanels::pack`] at column stride 1: per row and half, one
    /// masked load per run merged into a zeroed vector (each run reads
    /// consecutive input values; a plain load for a run that fills the
    /// half, which measured 2-4% faster on the VGG rows), and one store. Each run's reads per
    /// kernel row and column are worked out once per panel.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    ///
    /// # Panics
    /// When `dst` is shorter than `32 kc`, or a run's input passes `x`
    /// (never, for runs from [`ImagePanels::runs`]).
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn pack(
        p: &ImagePanels<'_>,
        k0: usize,
        kc: usize,
        runs: &[Run],
        split: usize,
        dst: &mut [f32],
    ) {
        let g = &p.g;
        assert!(dst.len() >= kc * NR && g.stride[1] == 1);
        let (kh, kw, plane) = (g.kh, g.kw, g.h * g.w);
        // per run: the input row offset of each kernel row, and the reads
        // of each kernel column
        let mut rows = vec![PAD; runs.len() * kh];
        let mut cols = vec![Cols::default(); runs.len() * kw];
        for (r, run) in runs.iter().enumerate() {
            let half = 16 * (run.lane / 16);
            for ky in 0..kh {
                let iy = (run.oy * g.stride[0] + ky * g.dilation[0]).wrapping_sub(g.padding[0]);
                if iy < g.h {
                    rows[r * kh + ky] = iy * g.w;
                }
            }
            for (kx, c) in cols[r * kw..(r + 1) * kw].iter_mut().enumerate() {
                // (channel 0, input row 0: the column offsets alone)
                if let Some((a, b, at)) = p.source_cols(run, kx) {
                    let (a, b) = (a - half, b - half);
                    *c = Cols {
                        mask: (((1u32 << (b - a)) - 1) << a) as u16,
                        a,
                        b,
                        base: (run.img + at).wrapping_sub(a),
                    };
                }
            }
        }
        let (x, d) = (p.x, dst.as_mut_ptr());
        let halves = [(0, split), (split, runs.len())];
        let (ci, t) = (k0 / (kh * kw), k0 % (kh * kw));
        let (mut ch, mut ky, mut kx) = (ci * plane, t / kw, t % kw);
        for row in 0..kc {
            for (h, &(r0, r1)) in halves.iter().enumerate() {
                let mut v = _mm512_setzero_ps();
                for r in r0..r1 {
                    let (iy, c) = (rows[r * kh + ky], cols[r * kw + kx]);
                    if iy == PAD || c.mask == 0 {
                        continue;
                    }
                    let base = c.base.wrapping_add(ch + iy);
                    let (first, end) = (base.wrapping_add(c.a), base.wrapping_add(c.b));
                    assert!(first < end && end <= x.len());
                    // lane `i` of the vector reads `x[base + i]`
                    let from = x.as_ptr().wrapping_add(base);
                    if c.mask == 0xffff {
                        // the run fills the half (the only one in it)
                        // SAFETY: `x[first..end]` is the 16 floats from
                        // `from`, inside `x` (asserted).
                        v = unsafe { _mm512_loadu_ps(from) };
                        continue;
                    }
                    // SAFETY: only the lanes a..b are read (masked), at
                    // `x[first..end]`, inside `x` (asserted).
                    v = unsafe { _mm512_mask_loadu_ps(v, c.mask, from) };
                }
                // SAFETY: row `row < kc` half `h` is 16 floats at
                // `32 row + 16 h`, inside `dst` (asserted).
                unsafe { _mm512_storeu_ps(d.add(row * NR + 16 * h), v) };
            }
            kx += 1;
            if kx == kw {
                kx = 0;
                ky += 1;
                if ky == kh {
                    ky = 0;
                    ch += plane;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
