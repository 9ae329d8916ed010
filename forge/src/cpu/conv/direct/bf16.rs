//! The direct convolution in bf16 with f32 sums (autocast's inference
//! path for the shapes [`preferred`](super::preferred) gives the direct
//! kernel): the f32 kernel's tiles and plan with input channels taken in
//! pairs, one `vdpbf16ps` per pair of channels, tap and 16 output
//! channels.
//!
//! **Layout.** `vdpbf16ps` multiplies the two bf16 of each 32-bit lane
//! and adds both products to the lane's f32 sum, so a lane holds a pair of
//! input channels `(2 i, 2 i + 1)` at one pixel: the input is converted
//! once per call into a zero-padded buffer of such pairs, `[n, c / 2, h +
//! 2 p0, w + 2 p1]` of `u32` (low half the even channel; an odd channel
//! count gets a zero channel), and the weights into `w[ob][tap][c / 2][q]`
//! of the same pairs. Both are the f32 kernel's layouts with `c / 2` pair
//! channels of 32 bits in place of `c` channels of f32, so the f32 plan
//! (`plan.rs`, run on the geometry with `c / 2` channels) gives every
//! offset, and the kernel is the f32 one with `vdpbf16ps` for
//! `vfmadd231ps` and a 32-bit broadcast of the pair for the f32 one.
//!
//! **Arithmetic order.** Each output is one f32 sum started at `+0.0`,
//! over the channel pairs in order and, within a pair, over the tile's
//! taps in `(ky, kx)` order; each pair adds the odd channel's product
//! first, then the even one's, each addition rounded to nearest even and
//! a subnormal sum flushed to zero (what `vdpbf16ps` does: the order of
//! `crate::cpu::bgemm`'s module docs, the pairs here being pairs of
//! channels at one tap rather than consecutive `(c, ky, kx)` indices). Then
//! the f32 epilogue: `+ bias`, `+ residual`, ReLU. Values are rounded to
//! bf16 to nearest even, subnormals to zero ([`to_bf16`]). The portable
//! kernel performs the same operations with plain f32 arithmetic, so every
//! CPU class and thread count gives the same bits (the `amx` class runs
//! the `vdpbf16ps` kernel too: there is no AMX direct kernel).

use super::super::geom::ConvGeom;
use super::plan::{plan_cached, Tile};
use super::{forward_tiles, Acc, PackedConv, MACS_PER_NS, MAX_NP, OB};
use crate::cpu::bgemm::{from_bf16, to_bf16};
use crate::cpu::buffers::for_each_row_work;
use crate::cpu::memory::Storage;

/// Which inner loops run (same bits in each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::cpu::conv) enum Bf16Kernel {
    /// Plain f32 loops reproducing `vdpbf16ps`.
    Portable,
    /// AVX-512F + AVX-512 BF16 intrinsics.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Bf16Kernel {
    /// The fastest kernel the CPU (and its class in force) allows.
    pub(in crate::cpu::conv) fn best() -> Bf16Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::cpu::class::cpu_has as has;
            if has!("avx512f") && has!("avx512bf16") {
                return Bf16Kernel::Avx512;
            }
        }
        Bf16Kernel::Portable
    }

    /// Every kernel this CPU runs, for the tests.
    #[cfg(test)]
    pub(in crate::cpu::conv) fn available() -> Vec<Bf16Kernel> {
        let mut v = vec![Bf16Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bf16")
        {
            v.push(Bf16Kernel::Avx512);
        }
        v
    }
}

/// Two bf16 as one 32-bit lane: `lo` in the low half.
fn pair(lo: u16, hi: u16) -> u32 {
    u32::from(lo) | u32::from(hi) << 16
}

/// One lane of `vdpbf16ps`: `s` plus the odd products, then the even ones
/// (see the module docs).
#[inline(always)]
fn dot_pair(s: f32, x: u32, w: u32) -> f32 {
    let ftz = |v: f32| {
        if v.is_subnormal() {
            0.0f32.copysign(v)
        } else {
            v
        }
    };
    let odd = from_bf16((x >> 16) as u16) * from_bf16((w >> 16) as u16);
    let even = from_bf16(x as u16) * from_bf16(w as u16);
    ftz(ftz(s + odd) + even)
}

/// A convolution weight `[o, c, kh, kw]` rounded to bf16 and packed as
/// `w[ob][tap][c / 2][q]` channel pairs (see the module docs).
pub(crate) struct PackedConvBf16 {
    o: usize,
    c: usize,
    kh: usize,
    kw: usize,
    w: Vec<u32>,
}

impl PackedConvBf16 {
    /// The bf16 packing of the f32 packing `p` (its values rounded).
    pub(crate) fn from_f32(p: &PackedConv) -> Self {
        let (taps, c, cp) = (p.kh * p.kw, p.c, p.c.div_ceil(2));
        let blocks = p.o.div_ceil(OB) * taps;
        let mut w = vec![0u32; blocks * cp * OB];
        for bt in 0..blocks {
            let src = &p.w[bt * c * OB..(bt + 1) * c * OB];
            let dst = &mut w[bt * cp * OB..(bt + 1) * cp * OB];
            for (i, lanes) in dst.chunks_exact_mut(OB).enumerate() {
                for (q, d) in lanes.iter_mut().enumerate() {
                    let even = to_bf16(src[2 * i * OB + q]);
                    let odd = if 2 * i + 1 < c {
                        to_bf16(src[(2 * i + 1) * OB + q])
                    } else {
                        0
                    };
                    *d = pair(even, odd);
                }
            }
        }
        PackedConvBf16 {
            o: p.o,
            c,
            kh: p.kh,
            kw: p.kw,
            w,
        }
    }

    /// Whether this packs a weight of shape `[o, c, kh, kw]`.
    pub(crate) fn fits(&self, g: &ConvGeom) -> bool {
        (self.o, self.c, self.kh, self.kw) == (g.o, g.c, g.kh, g.kw)
    }
}

/// `g` with its input channels counted in pairs: the geometry whose f32
/// plan gives the offsets of the pair layout.
fn pair_geom(g: &ConvGeom) -> ConvGeom {
    ConvGeom {
        c: g.c.div_ceil(2),
        ..*g
    }
}

/// The input as zero-padded channel pairs `[n, c / 2, h + 2 p0, w + 2 p1]`
/// (see the module docs), rounded to bf16.
fn pairs_padded(g: &ConvGeom, x: &[f32]) -> Storage<u32> {
    let [p0, p1] = g.padding;
    let (hp, wp) = (g.h + 2 * p0, g.w + 2 * p1);
    let cp = g.c.div_ceil(2);
    let mut out = Storage::<u32>::zeroed(g.n * cp * hp * wp);
    let hw = g.h * g.w;
    if hw == 0 {
        return out;
    }
    let bf = crate::cpu::bf16_round::to_bf16;
    for_each_row_work(&mut out, hp * wp, 3 * hw, |plane, dst| {
        let (b, i) = (plane / cp, plane % cp);
        let even = &x[(b * g.c + 2 * i) * hw..][..hw];
        let odd = (2 * i + 1 < g.c).then(|| &x[(b * g.c + 2 * i + 1) * hw..][..hw]);
        for r in 0..g.h {
            let row = &mut dst[(r + p0) * wp + p1..][..g.w];
            let lo = &even[r * g.w..][..g.w];
            match odd {
                Some(odd) => {
                    let hi = &odd[r * g.w..][..g.w];
                    for ((d, &l), &h) in row.iter_mut().zip(lo).zip(hi) {
                        *d = pair(bf(l), bf(h));
                    }
                }
                None => {
                    for (d, &l) in row.iter_mut().zip(lo) {
                        *d = u32::from(bf(l));
                    }
                }
            }
        }
    });
    out
}

/// `relu?(conv(x, p) + bias + residual)` in bf16 with f32 sums over `g`
/// by the best kernel: `y [n, o, oh, ow]` in a pooled buffer.
///
/// # Panics
/// When `x`, `bias` or `residual` do not match the geometry or `p` another
/// weight shape.
pub(crate) fn forward_bf16(
    g: &ConvGeom,
    x: &[f32],
    p: &PackedConvBf16,
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    relu: bool,
) -> Storage<f32> {
    forward_bf16_by(Bf16Kernel::best(), g, x, p, bias, residual, relu)
}

/// [`forward_bf16`] by kernel `k` (which the CPU must have).
pub(in crate::cpu::conv) fn forward_bf16_by(
    k: Bf16Kernel,
    g: &ConvGeom,
    x: &[f32],
    p: &PackedConvBf16,
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    relu: bool,
) -> Storage<f32> {
    assert!(
        super::applies(g) && p.fits(g),
        "direct conv (bf16): weight shape"
    );
    assert_eq!(x.len(), g.n * g.c * g.h * g.w, "direct conv (bf16): input");
    let xp = pairs_padded(g, x);
    let gp = pair_geom(g);
    let pl = plan_cached(&gp, false);
    let cp = gp.c;
    let taps = g.kh * g.kw;
    forward_tiles(
        g,
        &pl,
        bias,
        residual,
        relu,
        (2 * MACS_PER_NS, 2),
        |ob, tile, acc| {
            let wblk = &p.w[ob * taps * cp * OB..(ob + 1) * taps * cp * OB];
            run_tile(k, &xp, cp, pl.plane, tile, wblk, acc);
        },
    )
}

/// One tile's sums into `acc[..tile.np]` by kernel `k`.
fn run_tile(
    k: Bf16Kernel,
    xp: &[u32],
    cp: usize,
    plane: usize,
    tile: &Tile,
    w: &[u32],
    acc: &mut Acc,
) {
    let np = tile.np;
    assert!((1..=MAX_NP).contains(&np), "direct conv (bf16): tile size");
    let far_x = tile.offs[..np].iter().max().copied().unwrap_or(0)
        + (cp - 1) * plane
        + tile.taps.iter().map(|t| t.1).max().unwrap_or(0);
    let far_w = (cp - 1) * OB + tile.taps.iter().map(|t| t.0).max().unwrap_or(0) + OB;
    assert!(
        far_x < xp.len() && far_w <= w.len(),
        "direct conv (bf16): tile bounds"
    );
    match k {
        Bf16Kernel::Portable => portable(xp, cp, plane, tile, w, acc),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512F and AVX-512 BF16 (`best` or the
        // tests' `available`); the reads are in bounds (asserted above).
        Bf16Kernel::Avx512 => unsafe { avx512::tile(xp, cp, plane, tile, w, acc) },
    }
}

/// The tile's sums in plain loops: the order every kernel follows.
fn portable(xp: &[u32], cp: usize, plane: usize, tile: &Tile, w: &[u32], acc: &mut Acc) {
    let np = tile.np;
    for a in acc[..np].iter_mut() {
        *a = [0.0; OB];
    }
    for ci in 0..cp {
        let (xc, wc) = (&xp[ci * plane..], &w[ci * OB..]);
        for &(wo, to) in &tile.taps {
            let wv = &wc[wo..wo + OB];
            for (a, &off) in acc[..np].iter_mut().zip(&tile.offs[..np]) {
                let xv = xc[to + off];
                for (av, &wq) in a.iter_mut().zip(wv) {
                    *av = dot_pair(*av, xv, wq);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    //! The tile with `vdpbf16ps`: 32 channels of a position in two zmm
    //! accumulators, up to 12 positions.

    use super::super::plan::Tile;
    use super::super::{Acc, MAX_NP, OB};
    use std::arch::x86_64::*;

    /// See `super::portable`.
    ///
    /// # Safety
    /// The CPU has AVX-512F and AVX-512 BF16; `xp` holds index `offs[j] +
    /// (cp - 1) * plane + tap offset` for every position and tap, `w` index
    /// `(cp - 1) * 32 + tap weight offset + 31`.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn tile(
        xp: &[u32],
        cp: usize,
        plane: usize,
        tile: &Tile,
        w: &[u32],
        acc: &mut Acc,
    ) {
        macro_rules! by_np {
            ($($n:literal)*) => {
                match tile.np {
                    // SAFETY: the caller's contract.
                    $($n => unsafe { block::<$n>(xp, cp, plane, tile, w, acc) },)*
                    _ => unreachable!("tile of {} positions", tile.np),
                }
            };
        }
        by_np!(1 2 3 4 5 6 7 8 9 10 11 12)
    }

    /// [`tile`] for `NP` positions.
    ///
    /// # Safety
    /// As [`tile`].
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn block<const NP: usize>(
        xp: &[u32],
        cp: usize,
        plane: usize,
        tile: &Tile,
        w: &[u32],
        acc: &mut Acc,
    ) {
        const { assert!(NP <= MAX_NP && OB == 32) };
        let mut a0 = [_mm512_setzero_ps(); NP];
        let mut a1 = [_mm512_setzero_ps(); NP];
        let offs: [usize; NP] = std::array::from_fn(|j| tile.offs[j]);
        let (x, wp) = (xp.as_ptr(), w.as_ptr());
        for ci in 0..cp {
            // SAFETY: in bounds by the caller's contract (pair `ci < cp`).
            let (xc, wc) = unsafe { (x.add(ci * plane), wp.add(ci * OB)) };
            for &(wo, to) in &tile.taps {
                // SAFETY: weights `wo..wo + 32` and inputs `to + offs[j]`
                // of pair `ci` are in bounds (contract); `__m512bh` is the
                // same 512 bits read as 32 bf16.
                unsafe {
                    let w0: __m512bh = std::mem::transmute(_mm512_loadu_si512(wc.add(wo).cast()));
                    let w1: __m512bh =
                        std::mem::transmute(_mm512_loadu_si512(wc.add(wo + 16).cast()));
                    let xt = xc.add(to);
                    for j in 0..NP {
                        let xv: __m512bh =
                            std::mem::transmute(_mm512_set1_epi32(*xt.add(offs[j]) as i32));
                        a0[j] = _mm512_dpbf16_ps(a0[j], xv, w0);
                        a1[j] = _mm512_dpbf16_ps(a1[j], xv, w1);
                    }
                }
            }
        }
        for j in 0..NP {
            let row = acc[j].as_mut_ptr();
            // SAFETY: `acc[j]` holds 32 `f32`: lanes 0..16 and 16..32.
            unsafe {
                _mm512_storeu_ps(row, a0[j]);
                _mm512_storeu_ps(row.add(16), a1[j]);
            }
        }
    }
}

#[cfg(test)]
mod tests;
