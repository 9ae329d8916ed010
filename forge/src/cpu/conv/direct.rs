//! Direct convolution for inference (`f32`, one group): no column matrix,
//! the weights pre-arranged once per write version of their storage.
//!
//! **Layout.** The weights are packed into blocks of [`OB`] = 32 output
//! channels, `w[ob][tap][c][q]` (`q` the channel in the block, channels
//! past `o` zero): the 32 weights one input value meets are contiguous, a
//! blocked channel layout for the output side (NCHWc with `c = 32` for the
//! weights; the activations stay NCHW, so no layer around the convolution
//! changes), and one tap's weights for all input channels are one
//! contiguous run, so a tile that runs only some taps (small planes) reads
//! only their weights, in long streams (tap-minor, the 1x1 plane of
//! ResNet-18's last stage read every line of all nine taps: 17 GFLOP/s
//! against 64 with this layout, batch 1, load 12). The input is copied once into a zero-padded buffer
//! `[n, c, h + 2 p0, w + 2 p1]`, so every tap of every output position is
//! one load at a fixed offset; the copy is skipped without padding, and
//! where every tile's positions are of one tap class (see **Tiles**: the
//! classes grouped over the batch, e.g. every ResNet-18 layer at batch
//! 32), since then a tile reads only taps inside the image and the input
//! is read as it is, at offsets shifted back by the padding (the same
//! values, so the same sums). At batch 32 the copies (a `memset` and a
//! `memcpy` per row of 1-8 values over 2048-16384 planes per layer) were
//! 18% of ResNet-18's one-thread inference.
//!
//! **Tiles.** Output positions `(image, oy, ox)` go in tiles of at most
//! [`MAX_NP`]: a tile's 32 x `np` sums live in registers (AVX-512: 2 x 12
//! zmm accumulators; AVX2: two passes of 16 channels over at most 6
//! positions, 12 ymm) while the kernel walks the input channels and the
//! taps, one weight load per 16 channels and one broadcast per position.
//! A tile runs only the taps that meet the image at one of its positions;
//! where every *tap class* (positions whose windows meet the image at the
//! same taps) has at least [`MAX_NP`] positions over the batch, positions
//! are grouped by class so that no tile runs a tap that is padding for all
//! of its positions (a 1x1 plane runs only the centre tap; a 2x2 plane at
//! batch 32 four taps per position instead of nine).
//!
//! **Arithmetic order (differs from im2col + gemm).** Each output is one
//! accumulator started at zero, updated with `mul_add` (one rounding) over
//! the input channels in order and, within a channel, over the tile's taps
//! in order `(ky, kx)`; then `+ bias`, `+ residual`, ReLU (`v > 0 ? v :
//! 0`). The gemm path sums the same products in `k = (c, ky, kx)` order but
//! in `KC` blocks and with its own accumulator split, so the two paths
//! differ by rounding (the tests bound it). Taps skipped as padding for a
//! whole tile contribute `0 * w`: exact zeros. Tiles and their tap lists
//! depend on the shapes only, each output is computed by one task, and
//! every kernel (AVX-512, AVX2, portable `mul_add`) performs the same
//! operations per output, so the bits do not depend on the thread count
//! or the CPU class.
//!
//! **bf16.** Under bf16 autocast the same plan runs `bf16.rs`'s kernel:
//! input channels in pairs, one `vdpbf16ps` per pair, tap and 16 output
//! channels, f32 sums and the same output pass (see that module's docs for
//! its order and bits).
//!
//! **When.** `f32`, one group, outside autograd (`ops/conv_infer.rs`; the
//! packed weights are kept on the weight's storage like
//! [`gemm_weight_t`](crate::cpu::gemm::gemm_weight_t)'s, and dropped by
//! its next write: an optimizer step or a load), where [`preferred`]'s
//! thresholds say it is faster than im2col + gemm. Measured per layer of
//! ResNet-18 on 3x32x32 (`examples`-style timing, best of 7 x 20 calls,
//! one thread, 2026-12-05 under load 11, so ratios only), direct / im2col
//! time:
//!
//! | layer (c -> o, plane) | batch 1 | batch 32 |
//! |---|---|---|
//! | stem 7x7 s2 (3 -> 64, 32x32) | 0.93 | 0.87-0.91 (8192 positions, see [`preferred_f32`]) |
//! | 3x3 (64 -> 64, 8x8) | 0.84 | 0.92 |
//! | 3x3 s2 (64 -> 128, 8x8) | 0.47 | 0.75 |
//! | 3x3 (128 -> 128, 4x4) | 0.50 | 0.75 |
//! | 3x3 (256 -> 256, 2x2) | 0.16 | 0.74 |
//! | 3x3 (512 -> 512, 1x1) | 0.09 | 0.55 |
//! | 1x1 s2 (64 -> 128, 8x8) | 0.81 | 2.85 (512 positions: im2col) |
//! | 1x1 s2 (128 -> 256, 4x4) | 0.34 | 1.07 |
//! | 1x1 s2 (256 -> 512, 2x2) | 1.02 | 0.31 |
//!
//! Hence at most 4096 output positions over the batch, 256 for a 1x1
//! kernel (a tile's 12 positions meet each input line once, so its
//! broadcasts miss L1 once the tiles span images; with 3x3 windows the
//! lines are reused across taps and neighbours); in `f32`, up to 16384
//! for windows of at least 64 values ([`preferred_f32`], measured after
//! the tile's register spills were removed and the padded copy skipped).

#[cfg(target_arch = "x86_64")]
mod avx2;
mod bf16;
pub(crate) use bf16::{forward_bf16, PackedConvBf16};
#[cfg(target_arch = "x86_64")]
mod avx512;
mod padded;
mod plan;
#[cfg(test)]
mod tests;

use super::geom::ConvGeom;
use crate::cpu::gemm::Fp8Panels;
use crate::cpu::memory::Storage;
use crate::cpu::threads::parallel_for_cost;
use padded::padded;
use plan::{plan_cached, Tile};
use std::sync::{Arc, Mutex, OnceLock};

/// Output channels per weight block (two AVX-512 registers).
pub(super) const OB: usize = 32;
/// Most output positions per tile (AVX-512: 2 x 12 accumulators).
pub(super) const MAX_NP: usize = 12;
/// Tiles per parallel task (each task shares one weight block).
const TILES_PER_TASK: usize = 8;
/// Multiply-adds per nanosecond assumed for the split decision (about
/// 100 GFLOP/s on one AVX-512 core).
const MACS_PER_NS: usize = 50;
/// Bytes of packed weights per nanosecond one core streams from the
/// last-level cache, for the split decision of a convolution that reads
/// more weight than it multiplies (a deep layer at batch 1: ResNet-18's
/// 1x1 downsample from 256 to 512 channels reads 0.5 MB for 0.13 M
/// multiply-adds, which the multiply-adds alone priced at 3 µs, under the
/// threshold, so it ran on one thread). A sequential read of 16-40 MB
/// ran at 22-24 GB/s on one core of the bench host (2026-12-06).
const WEIGHT_BYTES_PER_NS: usize = 20;

/// A tile's accumulators: `acc[j][q]` for position `j`, channel `q`.
pub(super) type Acc = [[f32; OB]; MAX_NP];

/// The inner loops the CPU runs (same bits in each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kernel {
    /// Plain loops with `mul_add`.
    Portable,
    /// AVX2 + FMA intrinsics (`avx2.rs`).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512F intrinsics (`avx512.rs`).
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Kernel {
    /// The fastest kernel the CPU (and its class in force) allows.
    pub(super) fn best() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::cpu::class::cpu_has as has;
            if has!("avx512f") && has!("fma") {
                return Kernel::Avx512;
            }
            if has!("avx2") && has!("fma") {
                return Kernel::Avx2;
            }
        }
        Kernel::Portable
    }

    /// Every kernel this CPU runs, for the tests.
    #[cfg(test)]
    pub(super) fn available() -> Vec<Kernel> {
        let mut v = vec![Kernel::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                v.push(Kernel::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("fma")
            {
                v.push(Kernel::Avx512);
            }
        }
        v
    }
}

/// A convolution weight `[o, c, kh, kw]` packed as `w[ob][tap][c][q]`
/// (see the module docs).
pub(crate) struct PackedConv {
    o: usize,
    c: usize,
    kh: usize,
    kw: usize,
    /// Pooled (an fp8 layer packs its weight on every call).
    w: Storage<f32>,
}

impl PackedConv {
    /// Packs `weight [o, c, kh, kw]`.
    ///
    /// # Panics
    /// When `weight` is not `o * c * kh * kw` long.
    pub(crate) fn new(o: usize, c: usize, kh: usize, kw: usize, weight: &[f32]) -> Self {
        let taps = kh * kw;
        assert_eq!(weight.len(), o * c * taps, "direct conv: weight length");
        let mut w = Storage::<f32>::zeroed(o.div_ceil(OB) * c * taps * OB);
        for (oc, row) in weight.chunks_exact(c * taps).enumerate() {
            let (ob, q) = (oc / OB, oc % OB);
            for (ct, &v) in row.iter().enumerate() {
                let (ci, t) = (ct / taps, ct % taps);
                w[((ob * taps + t) * c + ci) * OB + q] = v;
            }
        }
        PackedConv { o, c, kh, kw, w }
    }

    /// Packs the 8-bit float weight `w` (`[o, c * kh * kw]`), each value
    /// decoded from its byte in this step (panel by panel,
    /// [`Fp8Panels::for_each_panel`]) and, with `row_scale`, multiplied by
    /// its output channel's factor (a batch norm folded in, one rounding,
    /// as `nn/fuse.rs`'s `scaled_rows` multiplies the decoded weight): the
    /// packing [`new`](Self::new) makes of the decoded (and scaled)
    /// weight, bit for bit, with no f32 copy of the weight besides it.
    ///
    /// A panel is `kc` values of `k = (c, tap)` for 32 output channels,
    /// and a block of this layout holds 32 output channels too ([`OB`]):
    /// each decoded panel row (one `k`, 32 channels) is one contiguous run
    /// of the packing, at `(tap, c)` instead of `(c, tap)`.
    ///
    /// # Panics
    /// When `w` is not `[o, c * kh * kw]` or `row_scale` not `o` long.
    pub(crate) fn from_fp8(
        (o, c, kh, kw): (usize, usize, usize, usize),
        w: &Fp8Panels,
        row_scale: Option<&[f32]>,
    ) -> Self {
        const { assert!(OB == Fp8Panels::WIDTH) };
        let taps = kh * kw;
        assert_eq!(w.dims(), (o, c * taps), "direct conv: fp8 weight shape");
        assert!(
            row_scale.is_none_or(|s| s.len() == o),
            "direct conv: row scales"
        );
        // unzeroed: the panels cover every channel of every block (zero
        // past `o`) and every `k`
        let mut out = Storage::<f32>::stale(o.div_ceil(OB) * c * taps * OB);
        w.for_each_panel(|k0, j0, panel| {
            let ob = j0 / OB;
            for (p, row) in panel.chunks_exact(OB).enumerate() {
                let (ci, t) = ((k0 + p) / taps, (k0 + p) % taps);
                let dst = &mut out[((ob * taps + t) * c + ci) * OB..][..OB];
                match row_scale {
                    None => dst.copy_from_slice(row),
                    Some(s) => {
                        for (q, (d, &v)) in dst.iter_mut().zip(row).enumerate() {
                            *d = if j0 + q < o { v * s[j0 + q] } else { 0.0 };
                        }
                    }
                }
            }
        });
        PackedConv {
            o,
            c,
            kh,
            kw,
            w: out,
        }
    }

    /// Whether this packs a weight of shape `[o, c, kh, kw]`.
    fn fits(&self, g: &ConvGeom) -> bool {
        (self.o, self.c, self.kh, self.kw) == (g.o, g.c, g.kh, g.kw)
    }
}

/// Whether the direct path computes `g`: one group, kernel extents and
/// channel counts the plan takes (at most 64 taps per axis).
pub(crate) fn applies(g: &ConvGeom) -> bool {
    g.groups == 1 && g.kh <= 64 && g.kw <= 64 && g.c > 0 && g.o > 0 && g.n > 0
}

/// Whether the direct path is the faster one for `g` (measured; see the
/// module docs' table): it [`applies`], and the output positions over the
/// batch are few enough that im2col + gemm's packing is not amortised:
/// at most [`MAX_POSITIONS`], or [`MAX_POSITIONS_1X1`] for a 1x1 kernel
/// (whose tiles reuse each input line for one tap only).
pub(crate) fn preferred(g: &ConvGeom) -> bool {
    let max = if g.kh * g.kw == 1 {
        MAX_POSITIONS_1X1
    } else {
        MAX_POSITIONS
    };
    applies(g) && g.n * g.l() <= max
}

/// [`preferred`] for an `f32` convolution: also not where im2col + gemm
/// is measured faster, the planes of 8x8 and up with many channels, where
/// every tap meets the image at most positions (so the direct kernel skips
/// little) and the gemm's packed products outrun the direct tile's (the
/// tile streams its 32-channel weight block, `c x taps x 32` floats, from
/// L2 for every 12 positions). Measured (`examples/conv_paths.rs`, 3x3
/// padding 1, one thread, 2026-12-06 under load 6, so ratios only),
/// direct / im2col time:
///
/// | batch, c -> o, plane | direct / im2col |
/// |---|---|
/// | 16, 64 -> 128, 16x16 | 1.45 |
/// | 16, 48 -> 48, 16x16 | 1.46 |
/// | 16, 24 -> 24, 16x16 | 1.13 |
/// | 16, 16 -> 16, 16x16 | 0.66 (kept direct) |
/// | 1, 256 -> 256, 16x16 | 1.21 |
/// | 16, 96 -> 96, 8x8 | 1.34 |
/// | 8, 256 -> 256, 8x8 | 1.40 |
/// | 32 / 64, 64 -> 64, 8x8 | 0.94 / 0.91 (kept direct) |
/// | 1, 128 -> 128, 8x8 | 0.94 (kept direct) |
/// | 32, 128 -> 128, 4x4 | 0.58 (kept direct) |
///
/// Hence im2col for a kernel larger than 1x1 with at least
/// [`GEMM_MIN_PLANE_WIDE`] output positions per image and
/// [`GEMM_MIN_CHANNELS_WIDE`] input channels, or at least
/// [`GEMM_MIN_PLANE`] positions, [`GEMM_MIN_CHANNELS`] channels and more
/// than one image. ResNet-18 on 32x32 (64 channels at 8x8, more only on
/// smaller planes) keeps the direct kernel everywhere.
///
/// Beyond [`preferred`]'s 4096 positions, `f32` takes the direct kernel up
/// to [`MAX_POSITIONS_F32`] positions for a kernel larger than 1x1 whose
/// window holds at least [`MIN_WINDOW_F32`] values (`c kh kw`: a tile's
/// fixed cost, storing and writing out its 32 x 12 sums, is then small
/// against its multiply-adds). Measured after the tile's spills were
/// removed and the padded copy skipped (`examples/conv_paths.rs`, one
/// thread, 2026-12-06 19:10 UTC under load 6, so ratios only), direct /
/// im2col time:
///
/// | batch, c -> o, plane, kernel | direct / im2col |
/// |---|---|
/// | 32 / 64, 3 -> 64, 32x32, 7x7 s2 (ResNet stem) | 0.87-0.91 / 0.89 |
/// | 64 / 128, 64 -> 64, 8x8 | 0.70 / 0.90 |
/// | 128, 128 -> 128, 4x4 | 0.61 |
/// | 16, 16 -> 16, 32x32 | 0.79 |
/// | 64, 16 -> 32, 16x16 | 0.64 |
/// | 16, 8 -> 16, 32x32 (window 72) | 0.99 |
/// | 16, 3 -> 64, 32x32 (window 27: kept im2col) | 3.13 |
///
/// The bf16 kernel's choice is [`preferred`]'s alone (not measured
/// against the bf16 gemm).
pub(crate) fn preferred_f32(g: &ConvGeom) -> bool {
    let (per_image, kernel) = (g.l(), g.kh * g.kw);
    let gemm_faster = kernel > 1
        && ((per_image >= GEMM_MIN_PLANE_WIDE && g.c >= GEMM_MIN_CHANNELS_WIDE)
            || (per_image >= GEMM_MIN_PLANE && g.c >= GEMM_MIN_CHANNELS && g.n > 1));
    let wide = applies(g)
        && kernel > 1
        && g.c * kernel >= MIN_WINDOW_F32
        && g.n * per_image <= MAX_POSITIONS_F32;
    (preferred(g) || wide) && !gemm_faster
}

/// The most output positions (over the batch) [`preferred_f32`] takes for
/// a window of at least [`MIN_WINDOW_F32`] values.
const MAX_POSITIONS_F32: usize = 1 << 14;
/// The fewest values per window (`c kh kw`) for [`MAX_POSITIONS_F32`].
const MIN_WINDOW_F32: usize = 64;

/// Output positions per image from which [`preferred_f32`] takes im2col
/// with [`GEMM_MIN_CHANNELS_WIDE`] input channels (16x16).
const GEMM_MIN_PLANE_WIDE: usize = 256;
/// Input channels from which [`preferred_f32`] takes im2col on planes of
/// [`GEMM_MIN_PLANE_WIDE`] positions.
const GEMM_MIN_CHANNELS_WIDE: usize = 24;
/// Output positions per image from which [`preferred_f32`] takes im2col
/// with [`GEMM_MIN_CHANNELS`] input channels and a batch (8x8).
const GEMM_MIN_PLANE: usize = 64;
/// Input channels from which [`preferred_f32`] takes im2col on planes of
/// [`GEMM_MIN_PLANE`] positions.
const GEMM_MIN_CHANNELS: usize = 96;

/// The most output positions (over the batch) [`preferred`] takes.
const MAX_POSITIONS: usize = 1 << 12;
/// The same for 1x1 kernels.
const MAX_POSITIONS_1X1: usize = 256;

/// What a weight storage keeps for the direct path: its plain packing, and
/// the last packing with a batch norm folded in (with the values it was
/// folded from, compared on every use).
#[derive(Default)]
pub(crate) struct ConvCache {
    plain: OnceLock<PackedConv>,
    plain_bf16: OnceLock<PackedConvBf16>,
    folded: Mutex<Option<Arc<Folded>>>,
}

/// Weights with a batch norm folded in, and the fused bias.
pub(crate) struct Folded {
    key: Vec<u64>,
    /// The packed fused weight.
    pub(crate) packed: PackedConv,
    /// The fused bias `[o]`.
    pub(crate) bias: Vec<f32>,
    /// The packed fused weight rounded to bf16, made at its first use.
    bf16: OnceLock<PackedConvBf16>,
}

impl Folded {
    /// The packed fused weight rounded to bf16 (the batch norm folded in
    /// f32 first), made at the first call and kept with the f32 one.
    pub(crate) fn packed_bf16(&self) -> &PackedConvBf16 {
        self.bf16
            .get_or_init(|| PackedConvBf16::from_f32(&self.packed))
    }
}

/// The cache entry of `w` (`None` when its slot holds another kind of
/// derived data, e.g. a packed linear weight of the same storage).
fn cache(w: &Storage<f32>) -> Option<&ConvCache> {
    w.derived(|| Some(ConvCache::default()))
}

/// `w`'s values (a weight `[g.o, g.c, g.kh, g.kw]`) packed, built on first
/// use and kept until the storage's next write.
pub(crate) fn packed_plain<'a>(g: &ConvGeom, w: &'a Storage<f32>) -> Option<&'a PackedConv> {
    let n = g.o * g.c * g.kh * g.kw;
    if w.len() < n {
        return None;
    }
    let p = cache(w)?
        .plain
        .get_or_init(|| PackedConv::new(g.o, g.c, g.kh, g.kw, &w[..n]));
    p.fits(g).then_some(p)
}

/// [`packed_plain`] rounded to bf16 for [`forward_bf16`], built on first
/// use and kept until the storage's next write.
pub(crate) fn packed_plain_bf16<'a>(
    g: &ConvGeom,
    w: &'a Storage<f32>,
) -> Option<&'a PackedConvBf16> {
    let plain = packed_plain(g, w)?;
    let p = cache(w)?
        .plain_bf16
        .get_or_init(|| PackedConvBf16::from_f32(plain));
    p.fits(g).then_some(p)
}

/// The folded weights for the values `matches` accepts (a kept fold's
/// key: the bits of everything the fold reads besides `w`), built by
/// `fold` (returning the fused weight and bias) when the kept ones were
/// folded from other values, and kept with the key `key` makes.
pub(crate) fn packed_folded(
    g: &ConvGeom,
    w: &Storage<f32>,
    (matches, key): (impl Fn(&[u64]) -> bool, impl FnOnce() -> Vec<u64>),
    fold: impl FnOnce() -> (Vec<f32>, Vec<f32>),
) -> Option<Arc<Folded>> {
    let entry = cache(w)?;
    let mut slot = entry.folded.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(f) = slot
        .as_ref()
        .filter(|f| f.packed.fits(g) && matches(&f.key))
    {
        return Some(f.clone());
    }
    let (fw, fb) = fold();
    let f = Arc::new(Folded {
        key: key(),
        packed: PackedConv::new(g.o, g.c, g.kh, g.kw, &fw),
        bias: fb,
        bf16: OnceLock::new(),
    });
    *slot = Some(f.clone());
    Some(f)
}

/// A raw pointer to the output, shared by tasks that write disjoint
/// elements.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: every task writes only the outputs of its own tiles (disjoint
// positions) and its own channel block, and the buffer outlives the loop.
unsafe impl Send for OutPtr {}
// SAFETY: as above; the pointer itself is only copied.
unsafe impl Sync for OutPtr {}

/// `relu?(conv(x, p) + bias + residual)` over `g` with the packed weights
/// `p`, by the best kernel: `y [n, o, oh, ow]` in a pooled buffer.
///
/// # Panics
/// When `x`, `bias` or `residual` do not match the geometry or `p` another
/// weight shape.
pub(crate) fn forward(
    g: &ConvGeom,
    x: &[f32],
    p: &PackedConv,
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    relu: bool,
) -> Storage<f32> {
    forward_by(Kernel::best(), g, x, p, bias, residual, relu)
}

/// [`forward`] (or, when `bf16`, [`forward_bf16`] with the packing
/// rounded as [`packed_plain_bf16`] rounds it) with the 8-bit float weight
/// `w` (`[g.o, g.c * g.kh * g.kw]`) packed for this call by
/// [`PackedConv::from_fp8`], each value decoded (and multiplied by
/// `row_scale`'s factor for its output channel) in the packing step: the
/// bits of the f32 weight holding those values, packed and run the same
/// way.
///
/// # Panics
/// As [`PackedConv::from_fp8`] and [`forward`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn forward_fp8(
    g: &ConvGeom,
    x: &[f32],
    w: &Fp8Panels,
    row_scale: Option<&[f32]>,
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    relu: bool,
    bf16: bool,
) -> Storage<f32> {
    let p = PackedConv::from_fp8((g.o, g.c, g.kh, g.kw), w, row_scale);
    if bf16 {
        forward_bf16(g, x, &PackedConvBf16::from_f32(&p), bias, residual, relu)
    } else {
        forward(g, x, &p, bias, residual, relu)
    }
}

/// [`forward`] by kernel `k` (which the CPU must have).
pub(super) fn forward_by(
    k: Kernel,
    g: &ConvGeom,
    x: &[f32],
    p: &PackedConv,
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    relu: bool,
) -> Storage<f32> {
    forward_planned(k, g, x, p, &plan_cached(g, true), bias, residual, relu)
}

/// [`forward_by`] over the plan `pl` (of `g`): the input copied with its
/// padding when the plan reads that copy, read as it is otherwise.
#[allow(clippy::too_many_arguments)]
fn forward_planned(
    k: Kernel,
    g: &ConvGeom,
    x: &[f32],
    p: &PackedConv,
    pl: &plan::Plan,
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    relu: bool,
) -> Storage<f32> {
    assert!(applies(g) && p.fits(g), "direct conv: weight shape");
    assert_eq!(x.len(), g.n * g.c * g.h * g.w, "direct conv: input");
    let xp_store = if pl.padded { padded(g, x) } else { None };
    let xp: &[f32] = xp_store.as_deref().unwrap_or(x);
    let taps = g.kh * g.kw;
    // weights of block `ob`: `taps * c * OB`, channel `ci` of tap `t` at
    // `(t * c + ci) * OB` (the tap's offset comes with the plan)
    forward_tiles(
        g,
        pl,
        bias,
        residual,
        relu,
        (MACS_PER_NS, 4),
        |ob, tile, acc| {
            let wblk = &p.w[ob * taps * g.c * OB..(ob + 1) * taps * g.c * OB];
            run_tile(k, xp, g.c, pl.plane, tile, wblk, OB, acc);
        },
    )
}

/// The tiles of `pl` over the output blocks of `g`'s channels, in
/// parallel tasks (a few tiles of one channel block each): `sums(ob,
/// tile, acc)` writes the tile's sums for channel block `ob` into `acc`,
/// and this writes `relu?(sum + bias + residual)` to `y [n, o, oh, ow]`
/// (a pooled buffer). `(macs_per_ns, weight_bytes)` are the kernel's
/// assumed speed and the bytes of one packed weight, for the split
/// decision: the whole op costs its multiply-adds at that speed or its
/// weight stream (the taps the tiles run) at [`WEIGHT_BYTES_PER_NS`],
/// whichever is more.
///
/// # Panics
/// When `bias` or `residual` do not match the geometry.
fn forward_tiles(
    g: &ConvGeom,
    pl: &plan::Plan,
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    relu: bool,
    (macs_per_ns, weight_bytes): (usize, usize),
    sums: impl Fn(usize, &Tile, &mut Acc) + Sync,
) -> Storage<f32> {
    let (l, o) = (g.l(), g.o);
    assert!(bias.is_none_or(|b| b.len() == o), "direct conv: bias");
    assert!(
        residual.is_none_or(|r| r.len() == g.n * o * l),
        "direct conv: residual"
    );
    let taps = g.kh * g.kw;
    let nob = o.div_ceil(OB);
    let groups = pl.tiles.len().div_ceil(TILES_PER_TASK);
    let mut y = Storage::<f32>::stale(g.n * o * l);
    let out = OutPtr(y.as_mut_ptr());
    let macs = g.n * l * o * g.c * taps;
    let taps_read = pl.tiles.iter().map(|t| t.taps.len()).max().unwrap_or(0);
    let stream_ns = o * g.c * taps_read * weight_bytes / WEIGHT_BYTES_PER_NS;
    let cost_ns = (macs / macs_per_ns).max(stream_ns);
    parallel_for_cost(nob * groups, cost_ns, |t| {
        let (ob, grp) = (t / groups, t % groups);
        let nq = OB.min(o - ob * OB);
        let tiles =
            &pl.tiles[grp * TILES_PER_TASK..((grp + 1) * TILES_PER_TASK).min(pl.tiles.len())];
        let mut acc: Acc = [[0.0; OB]; MAX_NP];
        for tile in tiles {
            sums(ob, tile, &mut acc);
            assert!(
                tile.outs[..tile.np]
                    .iter()
                    .all(|&at| at + (o - 1) * l < g.n * o * l),
                "direct conv: output index"
            );
            let res = residual.unwrap_or(&[]);
            let bq = bias.map_or(&[][..], |b| &b[ob * OB..ob * OB + nq]);
            let cols = (out, ob * OB * l, l, nq);
            // the output pass with the options fixed at compile time (no
            // branch per element)
            match (bias.is_some(), residual.is_some(), relu) {
                (false, false, false) => {
                    write_tile::<false, false, false>(cols, &acc, tile, bq, res)
                }
                (false, false, true) => write_tile::<false, false, true>(cols, &acc, tile, bq, res),
                (false, true, false) => write_tile::<false, true, false>(cols, &acc, tile, bq, res),
                (false, true, true) => write_tile::<false, true, true>(cols, &acc, tile, bq, res),
                (true, false, false) => write_tile::<true, false, false>(cols, &acc, tile, bq, res),
                (true, false, true) => write_tile::<true, false, true>(cols, &acc, tile, bq, res),
                (true, true, false) => write_tile::<true, true, false>(cols, &acc, tile, bq, res),
                (true, true, true) => write_tile::<true, true, true>(cols, &acc, tile, bq, res),
            }
        }
    });
    y
}

/// Writes one tile's outputs for one channel block of `nq` channels:
/// `y[outs[j] + first + q * l] = relu?(acc[j][q] + bias[q] + residual[that
/// index])` (`(out, first, l, nq)`: the output, the block's first
/// channel's offset, the plane, the block's channel count), the options
/// fixed at compile time. Per element the operations and their order are
/// those of the scalar pass it replaced: the sum, `+ bias`, `+ residual`,
/// then `v > 0 ? v : 0` (so NaN and -0 give 0).
///
/// The caller has asserted that every index written is inside `y`, that
/// `residual` is as long as `y` (with `RES`) and that `bias` holds the
/// block's `nq` channels (with `BIAS`).
#[inline(always)]
fn write_tile<const BIAS: bool, const RES: bool, const RELU: bool>(
    (out, first, l, nq): (OutPtr, usize, usize, usize),
    acc: &Acc,
    tile: &Tile,
    bias: &[f32],
    residual: &[f32],
) {
    let outs = &tile.outs[..tile.np];
    for q in 0..nq {
        let col = first + q * l;
        let b = if BIAS { bias[q] } else { 0.0 };
        for (a, &at) in acc.iter().zip(outs) {
            let idx = at + col;
            let mut v = a[q];
            if BIAS {
                v += b;
            }
            if RES {
                // SAFETY: `idx < y.len() == residual.len()` (asserted by the
                // caller for the tile's positions and the last channel).
                v += unsafe { *residual.get_unchecked(idx) };
            }
            if RELU {
                v = if v > 0.0 { v } else { 0.0 };
            }
            // SAFETY: `idx` is inside `y` (asserted by the caller); output
            // `(position, channel)` belongs to this tile and this channel
            // block only, so no other task writes it.
            unsafe { *out.0.add(idx) = v };
        }
    }
}

/// One tile's sums into `acc[..tile.np]` by kernel `k`.
#[allow(clippy::too_many_arguments)]
fn run_tile(
    k: Kernel,
    xp: &[f32],
    c: usize,
    plane: usize,
    tile: &Tile,
    w: &[f32],
    wstride: usize,
    acc: &mut Acc,
) {
    // Every read is inside the buffers: the farthest input is the last
    // channel's farthest tap at the farthest position, the farthest weight
    // the last channel's last tap.
    let far_w = (c - 1) * wstride + tile.taps.iter().map(|t| t.0).max().unwrap_or(0) + OB;
    assert!(
        tile_reads_inside(tile, c, plane, xp.len()) && far_w <= w.len(),
        "direct conv: tile bounds"
    );
    match k {
        Kernel::Portable => portable(xp, c, plane, tile, w, wstride, acc),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512F and FMA (`Kernel::best` or the
        // tests' `available`); the reads are in bounds (asserted above).
        Kernel::Avx512 => unsafe { avx512::tile(xp, c, plane, tile, w, wstride, acc) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2 and FMA; reads in bounds (asserted).
        Kernel::Avx2 => unsafe { avx2::tile(xp, c, plane, tile, w, wstride, acc) },
    }
}

/// Whether every input a tile reads is inside an input of `len` values
/// of `c` channels of `plane`: the farthest read of channel 0
/// ([`Tile::far`], which a read before the input, a wrapped sum, would
/// exceed) plus the last channel's start is below `len`.
fn tile_reads_inside(tile: &Tile, c: usize, plane: usize, len: usize) -> bool {
    (c - 1)
        .checked_mul(plane)
        .and_then(|last| last.checked_add(tile.far))
        .is_some_and(|far| far < len)
}

/// The tile's sums in plain loops: the order every kernel follows.
fn portable(
    xp: &[f32],
    c: usize,
    plane: usize,
    tile: &Tile,
    w: &[f32],
    wstride: usize,
    acc: &mut Acc,
) {
    let np = tile.np;
    for a in acc[..np].iter_mut() {
        *a = [0.0; OB];
    }
    for ci in 0..c {
        let (xc, wc) = (&xp[ci * plane..], &w[ci * wstride..]);
        for &(wo, to) in &tile.taps {
            let wv = &wc[wo..wo + OB];
            for (a, &off) in acc[..np].iter_mut().zip(&tile.offs[..np]) {
                let xv = xc[to.wrapping_add(off)];
                for (av, &wq) in a.iter_mut().zip(wv) {
                    *av = wq.mul_add(xv, *av);
                }
            }
        }
    }
}
