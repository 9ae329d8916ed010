//! Direct convolution for few input channels (LeNet's first layer: 1 -> 6
//! channels, 5x5, padding 2, over 28x28 images), where im2col would copy
//! every input element `kh * kw` times to feed a gemm with only `o` rows.
//!
//! Each image is copied once per kernel column `j` into a *shifted plane*
//! `s_j[c][r][ox] = x[c][r - p0][ox + j - p1]` (zero outside the input) of
//! `oh + kh - 1` rows of `ow` columns. Output position `t = oy * ow + ox`
//! then meets tap `(c, i, j)` at `s_j[c][t + i * ow]`: every tap is a
//! contiguous stream over the flattened output, so
//! - the forward is `y[o][t] = sum_taps w[o][tap] s_tap[t]`, a sum of
//!   scaled streams (blocks of 16 outputs, 8 output channels at a time,
//!   accumulators in registers), plus the bias;
//! - the weight gradient is `gw[o][tap] = sum_b sum_t gy[b][o][t] s_tap[t]`,
//!   dot products of contiguous streams.
//!
//! Sums run in a fixed order (taps in `(c, i, j)` order for the forward;
//! 16 lane partial sums over the blocks of each image, images in fixed
//! chunks of `WGRAD_CHUNK`, lanes then the scalar tail, then the chunks
//! in order, for the weight gradient), with `mul_add` (one rounding, the
//! same bits in a vector lane or alone), so results do not depend on the
//! thread count or the vector width. The kernel is chosen once per process
//! (`Kernel::best`): `f32` runs the same lane operations with AVX-512F
//! intrinsics (`avx512.rs`, one register per block) or, without AVX-512,
//! AVX2 + FMA intrinsics (`avx2.rs`, two 8-lane halves per block, output
//! channels in passes that fit the 16 registers); with AVX-512F, blocks of
//! any width (1 to 8 channels, each width its own loop) run two taps per
//! pass in the weight gradient and two output blocks per pass in the
//! forward (`wgrad_pair`, `forward_pair`:
//! each input loaded or weight broadcast once for both); other element types, and
//! `f32` on x86-64 CPUs with FMA but neither, run the portable loops
//! compiled with FMA, so `mul_add` is never a libm call where the CPU has
//! the instruction. Used for stride 1, undilated, ungrouped convolutions
//! with at most [`MAX_CHANNELS`] input channels (see [`applies`]).

use super::geom::ConvGeom;
use crate::base::Float;
use crate::cpu::buffers::build_chunks;
use crate::cpu::memory::Storage;
use std::any::TypeId;
use std::mem::MaybeUninit;

/// Outputs per block: one vector of 16 `f32`.
const LANES: usize = 16;
/// Output channels per block of the forward (accumulators in registers).
const OB: usize = 8;
/// Images per partial sum of the weight gradient (fixed, so the summation
/// order never depends on the thread count).
const WGRAD_CHUNK: usize = 4;
/// The most input channels the direct path takes.
pub(super) const MAX_CHANNELS: usize = 3;

/// Whether the direct kernels take `g`: stride 1, no dilation, one group,
/// at most [`MAX_CHANNELS`] input channels and 16 output channels, a kernel
/// of at most 7x7, and at least 64 output positions per image (shapes
/// only, never the thread count).
pub(super) fn applies(g: &ConvGeom) -> bool {
    g.groups == 1
        && g.stride == [1, 1]
        && g.dilation == [1, 1]
        && (1..=MAX_CHANNELS).contains(&g.c)
        && (1..=2 * OB).contains(&g.o)
        && (1..=7).contains(&g.kh)
        && (1..=7).contains(&g.kw)
        && g.oh * g.ow >= 4 * LANES
}

/// The geometry's sizes used here: output positions, shifted-plane length
/// and taps.
fn sizes(g: &ConvGeom) -> (usize, usize, usize) {
    (g.oh * g.ow, (g.oh + g.kh - 1) * g.ow, g.c * g.kh * g.kw)
}

/// Writes image `img`'s shifted planes into `s` (`c * kw` planes of
/// [`sizes`]' length, plane `c * kw + j`), then `LANES` zeros (read by the
/// last block's unused lanes).
fn shift<E: Float>(g: &ConvGeom, img: &[E], s: &mut [E]) {
    let (_, plane, _) = sizes(g);
    let (ow, p0, p1) = (g.ow, g.padding[0], g.padding[1]);
    for c in 0..g.c {
        let x = &img[c * g.h * g.w..(c + 1) * g.h * g.w];
        for j in 0..g.kw {
            // Output columns `lo..hi` read input columns `lo + j - p1..`.
            let lo = p1.saturating_sub(j).min(ow);
            let hi = (g.w + p1).saturating_sub(j).clamp(lo, ow);
            let dst = &mut s[(c * g.kw + j) * plane..][..plane];
            for (r, row) in dst.chunks_exact_mut(ow).enumerate() {
                match r.checked_sub(p0).filter(|&y| y < g.h && lo < hi) {
                    Some(y) => {
                        let x0 = y * g.w + lo + j - p1;
                        row[..lo].fill(E::zero());
                        row[lo..hi].copy_from_slice(&x[x0..x0 + hi - lo]);
                        row[hi..].fill(E::zero());
                    }
                    None => row.fill(E::zero()),
                }
            }
        }
    }
    s[g.c * g.kw * plane..].fill(E::zero());
}

/// The start of tap `(c, i, j)`'s stream in the shifted planes.
fn tap_at(g: &ConvGeom, tap: usize) -> usize {
    let (_, plane, _) = sizes(g);
    let (c, i, j) = (tap / (g.kh * g.kw), tap / g.kw % g.kh, tap % g.kw);
    (c * g.kw + j) * plane + i * g.ow
}

/// The inner loops the CPU runs, chosen once per process
/// ([`Kernel::best`]): every kernel gives the same bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    /// The portable loops as compiled for the baseline CPU (where the CPU
    /// has no FMA, `mul_add` is a libm call: correct and slow).
    Portable,
    /// The portable loops compiled with FMA (x86-64), so each `mul_add` is
    /// one instruction.
    #[cfg(target_arch = "x86_64")]
    Fma,
    /// `f32` with AVX2 and FMA intrinsics (`avx2.rs`); other element types
    /// take [`Kernel::Fma`].
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// `f32` with AVX-512F and FMA intrinsics (`avx512.rs`); other element
    /// types take [`Kernel::Fma`].
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Kernel {
    /// The fastest kernel the CPU has: AVX-512F, else AVX2 + FMA, else FMA,
    /// else the portable loops (detected once, then cached).
    fn best() -> Kernel {
        // One answer per CPU class (`cpu::class`), each detected once.
        static BEST: [std::sync::OnceLock<Kernel>; crate::cpu::class::CLASSES] =
            [const { std::sync::OnceLock::new() }; crate::cpu::class::CLASSES];
        *BEST[crate::cpu::class::current() as usize].get_or_init(|| {
            Kernel::all()
                .into_iter()
                .rfind(|k| k.available())
                .unwrap_or(Kernel::Portable)
        })
    }

    /// Every kernel of this target, slowest first.
    fn all() -> Vec<Kernel> {
        #[cfg(target_arch = "x86_64")]
        return vec![Kernel::Portable, Kernel::Fma, Kernel::Avx2, Kernel::Avx512];
        #[cfg(not(target_arch = "x86_64"))]
        return vec![Kernel::Portable];
    }

    /// Whether this CPU runs the kernel.
    fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::cpu::class::cpu_has as has;
            match self {
                Kernel::Portable => true,
                Kernel::Fma => has!("fma"),
                Kernel::Avx2 => has!("avx2") && has!("fma"),
                Kernel::Avx512 => has!("avx512f") && has!("fma"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = self;
            true
        }
    }
}

/// `x` seen as `f32` when `E` is `f32`.
fn f32s<E: 'static>(x: &[E]) -> Option<&[f32]> {
    (TypeId::of::<E>() == TypeId::of::<f32>()).then(|| {
        // SAFETY: `E` is `f32`: the slice is reinterpreted as itself.
        unsafe { &*(x as *const [E] as *const [f32]) }
    })
}

/// `x` seen as mutable `f32` when `E` is `f32`.
fn f32s_mut<E: 'static>(x: &mut [E]) -> Option<&mut [f32]> {
    if TypeId::of::<E>() != TypeId::of::<f32>() {
        return None;
    }
    // SAFETY: `E` is `f32` (checked): the slice is reinterpreted as itself.
    Some(unsafe { &mut *(x as *mut [E] as *mut [f32]) })
}

/// The forward's sums for outputs `t0..t0 + 16` and output channels
/// `0..OB` of `wp` (tap-major, `op` per tap): `acc[q][l] = sum_tap
/// wp[tap * op + q] s[starts[tap] + t0 + l]`, taps in order, by kernel `k`
/// (which the CPU must have). Only the channels `q < nq` are needed: a
/// kernel may leave the others as they are.
#[allow(clippy::too_many_arguments)]
fn forward_block<E: Float>(
    k: Kernel,
    s: &[E],
    starts: &[usize],
    wp: &[E],
    op: usize,
    t0: usize,
    nq: usize,
    acc: &mut [[E; LANES]; OB],
) {
    debug_assert!(k.available());
    match k {
        Kernel::Portable => forward_block_portable(s, starts, wp, op, t0, acc),
        #[cfg(target_arch = "x86_64")]
        Kernel::Fma | Kernel::Avx2 | Kernel::Avx512 => {
            if let (Some(s), Some(w), Some(out)) =
                (f32s(s), f32s(wp), f32s_mut(acc.as_flattened_mut()))
            {
                if k == Kernel::Avx512 {
                    // SAFETY: the CPU has AVX-512F and FMA (`k` is available).
                    unsafe { avx512::forward_block(s, starts, w, op, t0, out) };
                    return;
                }
                if k == Kernel::Avx2 {
                    // SAFETY: the CPU has AVX2 and FMA (`k` is available).
                    unsafe { avx2::forward_block(s, starts, w, op, t0, nq, out) };
                    return;
                }
            }
            // SAFETY: every kernel but the portable one implies FMA.
            unsafe { fma::forward_block(s, starts, wp, op, t0, acc) }
        }
    }
}

/// `f::<NQ>(args)` for the block's channel count `nq` (1..=8) as a
/// constant, so that a block of fewer than 8 channels (the last block of
/// 10 or 13) runs only its own accumulators: with the 8-wide loop, 10
/// channels cost as much as 16.
#[cfg(target_arch = "x86_64")]
macro_rules! by_channels {
    ($nq:expr, $($f:ident)::+ ($($a:expr),* $(,)?)) => {
        match $nq {
            1 => $($f)::+::<1>($($a),*),
            2 => $($f)::+::<2>($($a),*),
            3 => $($f)::+::<3>($($a),*),
            4 => $($f)::+::<4>($($a),*),
            5 => $($f)::+::<5>($($a),*),
            6 => $($f)::+::<6>($($a),*),
            7 => $($f)::+::<7>($($a),*),
            _ => $($f)::+::<OB>($($a),*),
        }
    };
}

/// [`forward_block`] for the two blocks at `t0` and `t0 + 16` (into
/// `acc[0]` and `acc[1]`) in one pass over the taps, where kernel `k` has
/// such a loop (`f32` with AVX-512F, instantiated for each block width
/// 1..=8 channels); `false`, with nothing done, elsewhere. The same sums
/// in the same order as two calls of [`forward_block`].
#[allow(clippy::too_many_arguments)]
fn forward_pair<E: Float>(
    k: Kernel,
    s: &[E],
    starts: &[usize],
    wp: &[E],
    op: usize,
    t0: usize,
    nq: usize,
    acc: &mut [[[E; LANES]; OB]; 2],
) -> bool {
    debug_assert!(k.available());
    #[cfg(target_arch = "x86_64")]
    if k == Kernel::Avx512 && (1..=OB).contains(&nq) {
        let [acc_a, acc_b] = acc;
        if let (Some(s), Some(w), Some(a), Some(b)) = (
            f32s(s),
            f32s(wp),
            f32s_mut(acc_a.as_flattened_mut()),
            f32s_mut(acc_b.as_flattened_mut()),
        ) {
            // SAFETY: the CPU has AVX-512F and FMA (`k` is available).
            unsafe { by_channels!(nq, avx512::forward_pair(s, starts, w, op, t0, a, b)) };
            return true;
        }
    }
    let _ = (k, s, starts, wp, op, t0, nq, acc);
    false
}

/// [`forward_block`] in plain loops (any element type and CPU), inlined
/// into its callers so that it takes their target features.
#[inline(always)]
fn forward_block_portable<E: Float>(
    s: &[E],
    starts: &[usize],
    wp: &[E],
    op: usize,
    t0: usize,
    acc: &mut [[E; LANES]; OB],
) {
    for (tap, &at) in starts.iter().enumerate() {
        let src = &s[at + t0..][..LANES];
        let wv = &wp[tap * op..][..OB];
        for (a, &wq) in acc.iter_mut().zip(wv) {
            for (av, &sv) in a.iter_mut().zip(src) {
                *av = wq.mul_add(sv, *av);
            }
        }
    }
}

/// One image's forward: `y[o][t] = sum_tap wp[tap][o] s_tap[t] + bias[o]`
/// (`wp`: the weights tap-major, output channels padded to whole blocks of
/// `OB` with zeros).
fn forward_image<E: Float>(
    k: Kernel,
    g: &ConvGeom,
    s: &[E],
    wp: &[E],
    bias: Option<&[E]>,
    y: &mut [MaybeUninit<E>],
) {
    let (l, _, taps) = sizes(g);
    let op = g.o.div_ceil(OB) * OB;
    let starts: Vec<usize> = (0..taps).map(|t| tap_at(g, t)).collect();
    let mut acc;
    for ob in 0..g.o.div_ceil(OB) {
        let nq = OB.min(g.o - ob * OB);
        let mut t0 = 0;
        while t0 < l {
            // The sums start from zero (the kernels add onto `acc`).
            acc = [[[E::zero(); LANES]; OB]; 2];
            // Two blocks in one pass where the kernel has it, else one.
            let blocks = if t0 + LANES < l
                && forward_pair(k, s, &starts, &wp[ob * OB..], op, t0, nq, &mut acc)
            {
                2
            } else {
                forward_block(k, s, &starts, &wp[ob * OB..], op, t0, nq, &mut acc[0]);
                1
            };
            for a in &acc[..blocks] {
                let n = LANES.min(l - t0);
                for (q, a) in a.iter().enumerate().take(nq) {
                    let oc = ob * OB + q;
                    let b = bias.map_or(E::zero(), |b| b[oc]);
                    for (d, &v) in y[oc * l + t0..][..n].iter_mut().zip(a) {
                        d.write(v + b);
                    }
                }
                t0 += LANES;
            }
        }
    }
}

/// The forward convolution over `g` (see [`applies`]): `y [n, o, oh, ow]`
/// from `x [n, c, h, w]`, `weight [o, c, kh, kw]` and an optional
/// `bias [o]`, in a pooled buffer; images in parallel.
///
/// # Panics
/// When a buffer's length does not match the geometry.
pub(super) fn forward<E: Float>(
    g: &ConvGeom,
    x: &[E],
    weight: &[E],
    bias: Option<&[E]>,
) -> Storage<E> {
    forward_by(Kernel::best(), g, x, weight, bias)
}

/// [`forward`] by kernel `k` (which the CPU must have).
fn forward_by<E: Float>(
    k: Kernel,
    g: &ConvGeom,
    x: &[E],
    weight: &[E],
    bias: Option<&[E]>,
) -> Storage<E> {
    let (l, plane, taps) = sizes(g);
    let img = g.c * g.h * g.w;
    assert_eq!(x.len(), g.n * img, "conv_small::forward: input");
    assert_eq!(weight.len(), g.o * taps, "conv_small::forward: weight");
    let op = g.o.div_ceil(OB) * OB;
    // Scratch comes from the pool like every output: a `vec!` here is a
    // C-allocator buffer, which a worker thread's arena may hand back to
    // the OS and fault in again on a later step.
    let mut wp = Storage::filled(taps * op, E::zero());
    for (o, row) in weight.chunks_exact(taps).enumerate() {
        for (tap, &v) in row.iter().enumerate() {
            wp[tap * op + o] = v;
        }
    }
    let scratch = g.c * g.kw * plane + LANES;
    build_chunks(g.n * g.o * l, g.o * l, |b, y| {
        let mut s = Storage::filled(scratch, E::zero());
        shift(g, &x[b * img..(b + 1) * img], &mut s);
        // Writes every element of the image's output (every block of
        // every output channel).
        forward_image(k, g, &s, &wp, bias, y);
    })
}

/// `sum_t gy[t] s[t]` over one image's blocks for one tap and up to `OB`
/// output channels, added lane-wise into `acc`; the scalar tail past the
/// last whole block into `tail`; by kernel `k` (which the CPU must have).
/// Only the channels `q < nq` are needed: a kernel may leave the others as
/// they are.
fn wgrad_tap<E: Float>(
    k: Kernel,
    l: usize,
    src: &[E],
    gy: &[&[E]; OB],
    nq: usize,
    acc: &mut [[E; LANES]; OB],
    tail: &mut [E; OB],
) {
    debug_assert!(k.available());
    match k {
        Kernel::Portable => wgrad_tap_portable(l, src, gy, acc, tail),
        #[cfg(target_arch = "x86_64")]
        Kernel::Fma | Kernel::Avx2 | Kernel::Avx512 => {
            if let (Some(src), Some(a), Some(t)) = (
                f32s(src),
                f32s_mut(acc.as_flattened_mut()),
                f32s_mut(&mut tail[..]),
            ) {
                let gy = gy.map(|r| f32s(r).expect("E is f32"));
                if k == Kernel::Avx512 {
                    // SAFETY: the CPU has AVX-512F and FMA (`k` is available).
                    unsafe { avx512::wgrad_tap(l, src, gy, a, t) };
                    return;
                }
                if k == Kernel::Avx2 {
                    // SAFETY: the CPU has AVX2 and FMA (`k` is available).
                    unsafe { avx2::wgrad_tap(l, src, &gy, nq, a, t) };
                    return;
                }
            }
            // SAFETY: every kernel but the portable one implies FMA.
            unsafe { fma::wgrad_tap(l, src, gy, acc, tail) }
        }
    }
}

/// [`wgrad_tap`] for two taps (`src`: their streams; `acc`, `tail`: their
/// sums) in one pass over `gy`, where kernel `k` has such a loop (`f32`
/// with AVX-512F, instantiated for each block width 1..=8 channels);
/// `false`, with nothing done, elsewhere. The same sums in the same order
/// as two calls of [`wgrad_tap`].
fn wgrad_pair<E: Float>(
    k: Kernel,
    l: usize,
    src: [&[E]; 2],
    gy: &[&[E]; OB],
    nq: usize,
    acc: &mut [[[E; LANES]; OB]],
    tail: &mut [[E; OB]],
) -> bool {
    debug_assert!(k.available());
    #[cfg(target_arch = "x86_64")]
    if k == Kernel::Avx512 && (1..=OB).contains(&nq) {
        let (acc_a, acc_b) = acc.split_at_mut(1);
        let (tail_a, tail_b) = tail.split_at_mut(1);
        if let (Some(sa), Some(sb), Some(aa), Some(ab), Some(ta), Some(tb)) = (
            f32s(src[0]),
            f32s(src[1]),
            f32s_mut(acc_a[0].as_flattened_mut()),
            f32s_mut(acc_b[0].as_flattened_mut()),
            f32s_mut(&mut tail_a[0][..]),
            f32s_mut(&mut tail_b[0][..]),
        ) {
            let gy = gy.map(|r| f32s(r).expect("E is f32"));
            // SAFETY: the CPU has AVX-512F and FMA (`k` is available).
            unsafe { by_channels!(nq, avx512::wgrad_pair(l, [sa, sb], gy, aa, ab, ta, tb)) };
            return true;
        }
    }
    let _ = (k, l, src, gy, nq, acc, tail);
    false
}

/// [`wgrad_tap`] in plain loops (any element type and CPU), inlined into
/// its callers so that it takes their target features.
#[inline(always)]
fn wgrad_tap_portable<E: Float>(
    l: usize,
    src: &[E],
    gy: &[&[E]; OB],
    acc: &mut [[E; LANES]; OB],
    tail: &mut [E; OB],
) {
    let full = l / LANES * LANES;
    for t0 in (0..full).step_by(LANES) {
        let sv: &[E; LANES] = src[t0..][..LANES].try_into().unwrap();
        for (a, gq) in acc.iter_mut().zip(gy) {
            let gv: &[E; LANES] = gq[t0..][..LANES].try_into().unwrap();
            for ((av, &s), &gv) in a.iter_mut().zip(sv).zip(gv) {
                *av = gv.mul_add(s, *av);
            }
        }
    }
    for (tq, gq) in tail.iter_mut().zip(gy) {
        for t in full..l {
            *tq = gq[t].mul_add(src[t], *tq);
        }
    }
}

/// The weight gradient over `g` (see [`applies`]): `gw [o, c, kh, kw]`
/// from `x [n, c, h, w]` and `gy [n, o, oh, ow]`, summed over the batch in
/// a fixed order, in a pooled buffer.
///
/// # Panics
/// When a buffer's length does not match the geometry.
pub(super) fn backward_weight<E: Float>(g: &ConvGeom, x: &[E], gy: &[E]) -> Storage<E> {
    backward_weight_by(Kernel::best(), g, x, gy)
}

/// [`backward_weight`] by kernel `k` (which the CPU must have).
fn backward_weight_by<E: Float>(kernel: Kernel, g: &ConvGeom, x: &[E], gy: &[E]) -> Storage<E> {
    let (l, plane, taps) = sizes(g);
    let img = g.c * g.h * g.w;
    assert_eq!(x.len(), g.n * img, "conv_small::backward_weight: input");
    assert_eq!(
        gy.len(),
        g.n * g.o * l,
        "conv_small::backward_weight: gradient"
    );
    let chunks = g.n.div_ceil(WGRAD_CHUNK);
    let scratch = g.c * g.kw * plane + LANES;
    let wlen = g.o * taps;
    let partials = build_chunks(chunks * wlen, wlen, |ch, part| {
        // Pooled scratch, as in `forward_by`.
        let mut s = Storage::filled(scratch, E::zero());
        let zeros = Storage::filled(l, E::zero());
        let images = ch * WGRAD_CHUNK..((ch + 1) * WGRAD_CHUNK).min(g.n);
        let blocks = taps * g.o.div_ceil(OB);
        let mut acc_buf = Storage::filled(blocks * OB * LANES, E::zero());
        let mut tail_buf = Storage::filled(blocks * OB, E::zero());
        let acc = acc_buf.as_chunks_mut::<LANES>().0.as_chunks_mut::<OB>().0;
        let tail = tail_buf.as_chunks_mut::<OB>().0;
        for b in images {
            shift(g, &x[b * img..(b + 1) * img], &mut s);
            let gyb = &gy[b * g.o * l..(b + 1) * g.o * l];
            for ob in 0..g.o.div_ceil(OB) {
                let nq = OB.min(g.o - ob * OB);
                let rows: [&[E]; OB] = std::array::from_fn(|q| {
                    let oc = ob * OB + q;
                    if oc < g.o {
                        &gyb[oc * l..(oc + 1) * l]
                    } else {
                        &zeros[..]
                    }
                });
                let mut tap = 0;
                while tap < taps {
                    let i = ob * taps + tap;
                    let src = &s[tap_at(g, tap)..];
                    if tap + 1 < taps {
                        let (acc, tail) = (&mut acc[i..i + 2], &mut tail[i..i + 2]);
                        let src_b = &s[tap_at(g, tap + 1)..];
                        if wgrad_pair(kernel, l, [src, src_b], &rows, nq, acc, tail) {
                            tap += 2;
                            continue;
                        }
                    }
                    wgrad_tap(kernel, l, src, &rows, nq, &mut acc[i], &mut tail[i]);
                    tap += 1;
                }
            }
        }
        // Lanes in order, then the tail: one partial per (o, tap).
        for (oc, row) in part.chunks_exact_mut(taps).enumerate() {
            let (ob, q) = (oc / OB, oc % OB);
            for (tap, v) in row.iter_mut().enumerate() {
                let k = ob * taps + tap;
                v.write(acc[k][q].iter().fold(E::zero(), |a, &b| a + b) + tail[k][q]);
            }
        }
    });
    let mut gw = Storage::filled(g.o * taps, E::zero());
    for part in partials.chunks_exact(wlen) {
        for (a, &b) in gw.iter_mut().zip(part) {
            *a += b;
        }
    }
    gw
}

/// The portable loops compiled with FMA (x86-64).
#[cfg(target_arch = "x86_64")]
mod fma {
    use super::{Float, LANES, OB};

    /// [`super::forward_block_portable`] compiled with FMA.
    ///
    /// # Safety
    /// The CPU has FMA.
    #[target_feature(enable = "fma")]
    pub(super) unsafe fn forward_block<E: Float>(
        s: &[E],
        starts: &[usize],
        wp: &[E],
        op: usize,
        t0: usize,
        acc: &mut [[E; LANES]; OB],
    ) {
        super::forward_block_portable(s, starts, wp, op, t0, acc)
    }

    /// [`super::wgrad_tap_portable`] compiled with FMA.
    ///
    /// # Safety
    /// The CPU has FMA.
    #[target_feature(enable = "fma")]
    pub(super) unsafe fn wgrad_tap<E: Float>(
        l: usize,
        src: &[E],
        gy: &[&[E]; OB],
        acc: &mut [[E; LANES]; OB],
        tail: &mut [E; OB],
    ) {
        super::wgrad_tap_portable(l, src, gy, acc, tail)
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(test)]
mod tests;

/// The examples that documented these kernels while they were public.
#[cfg(test)]
mod examples {
    #[test]
    fn applies() {
        use crate::cpu::conv::conv_small::applies;
        use crate::cpu::conv::ConvGeom;
        let lenet1 =
            ConvGeom::new([128, 1, 28, 28], [6, 1, 5, 5], [1, 1], [2, 2], [1, 1], 1).unwrap();
        let lenet2 =
            ConvGeom::new([128, 6, 14, 14], [16, 6, 5, 5], [1, 1], [0, 0], [1, 1], 1).unwrap();
        assert!(applies(&lenet1) && !applies(&lenet2));
    }

    #[test]
    fn forward() {
        use crate::cpu::conv::conv_small::forward;
        use crate::cpu::conv::ConvGeom;
        // 3x3 box sums of a 10x10 image of ones, padding 1: 4 at the corners.
        let g = ConvGeom::new([1, 1, 10, 10], [1, 1, 3, 3], [1, 1], [1, 1], [1, 1], 1).unwrap();
        let y = forward(&g, &[1.0f32; 100], &[1.0; 9], Some(&[0.5]));
        assert_eq!((y[0], y[11]), (4.5, 9.5));
    }

    #[test]
    fn backward_weight() {
        use crate::cpu::conv::conv_small::backward_weight;
        use crate::cpu::conv::ConvGeom;
        // A 1x1 kernel's gradient is the sum of x * gy.
        let g = ConvGeom::new([1, 1, 8, 8], [1, 1, 1, 1], [1, 1], [0, 0], [1, 1], 1).unwrap();
        let gw = backward_weight(&g, &[2.0f32; 64], &[0.5; 64]);
        assert_eq!(gw[0], 64.0);
    }
}
