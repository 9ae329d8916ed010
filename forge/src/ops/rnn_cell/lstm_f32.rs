//! The LSTM step kernel for `f32` on AVX-512 and on AVX2 + FMA, without
//! the generic kernel's pass per gate block through `vmath`'s dispatch,
//! copy of the cell and separate output product. On AVX-512 one pass over
//! each row's hidden units computes the four gates and the cell, a second
//! one `tanh(c)` and the output, 16 units per instruction
//! ([`units_body`]); on AVX2 (16 vector registers, too few for five
//! activations in flight) one loop per gate block, then one for the cell
//! and the output, 8 units per instruction ([`units_blocks`]). Each
//! element is the generic kernel's arithmetic in the same order (the same
//! scalar `sigmoid_f32` / `tanh_f32` as `vmath`, whose slice loops are
//! these functions vectorised, fused steps included; the cell's own
//! arithmetic has no fused multiply-adds, none contracted),
//! so all three give the same bits. Under `no_grad` the gates row is
//! scratch (the AVX-512 build keeps the output gate there between its two
//! passes).

#[cfg(test)]
use super::isa::supports;
#[cfg(target_arch = "x86_64")]
use super::isa::{f32_bias, f32s, f32s_mut, run_wide, WideRows};
use super::isa::{isa, Isa};
#[cfg(target_arch = "x86_64")]
use crate::cpu::vmath::{sigmoid_f32, tanh_f32};
use crate::tensor::Float;

/// One step's inputs on a block of rows: the input projection `xp`
/// (`[rows, 4H]`), the bias added to it first (`[4H]`), the hidden product
/// `hw` (`[rows, 4H]`) and the previous cell `c_prev` (`[rows, H]`).
#[derive(Clone, Copy)]
pub(super) struct StepIns<'a, E> {
    pub(super) xp: &'a [E],
    pub(super) bias: Option<&'a [E]>,
    pub(super) hw: &'a [E],
    pub(super) c_prev: &'a [E],
}

/// Where one step's results go: the cell `c` (`[rows, H]`), the output
/// `y` (`rows` rows of `H` at `y_stride` apart: `H` for a `[rows, H]`
/// block, more when the rows lie in a batch-first sequence), the
/// activated gates (`[rows, 4H]`; scratch when they are not saved) and,
/// when it is saved for the backward pass, `tanh(c)` (`[rows, H]`). The
/// gates are saved exactly when `tc` is.
pub(super) struct Outs<'a, E> {
    pub(super) c: &'a mut [E],
    pub(super) y: &'a mut [E],
    pub(super) y_stride: usize,
    pub(super) gates: &'a mut [E],
    pub(super) tc: Option<&'a mut [E]>,
}

/// The fused step on a block of rows when `E` is `f32` and the CPU has
/// AVX-512F or AVX2 + FMA ([`isa`]); `false` (and nothing written)
/// otherwise.
pub(super) fn lstm_rows_f32<E: Float>(
    h: usize,
    ins: &StepIns<'_, E>,
    out: &mut Outs<'_, E>,
) -> bool {
    // SAFETY: `isa()` is what the CPU supports.
    unsafe { rows_on(isa(), h, ins, out) }
}

/// [`lstm_rows_f32`] with the `isa` build, which must be one the CPU
/// runs ([`supports`]); `false` (nothing written) for [`Isa::Generic`] or
/// when `E` is not `f32`. For the tests that compare the builds.
///
/// # Panics
/// When the CPU cannot run `isa`.
#[cfg(test)]
pub(super) fn lstm_rows_f32_on<E: Float>(
    isa: Isa,
    h: usize,
    ins: &StepIns<'_, E>,
    out: &mut Outs<'_, E>,
) -> bool {
    shape_assert!(supports(isa), "lstm: this CPU cannot run {isa:?}");
    // SAFETY: the CPU runs `isa` (asserted).
    unsafe { rows_on(isa, h, ins, out) }
}

/// [`lstm_rows_f32`] on the `isa` build.
///
/// # Safety
/// The CPU must support `isa` ([`supports`]).
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
unsafe fn rows_on<E: Float>(
    isa: Isa,
    h: usize,
    ins: &StepIns<'_, E>,
    out: &mut Outs<'_, E>,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if isa == Isa::Generic {
            return false;
        }
        let (Some(xp), Some(hw), Some(cp)) = (f32s(ins.xp), f32s(ins.hw), f32s(ins.c_prev)) else {
            return false;
        };
        let Some((has_bias, bias)) = f32_bias(ins.bias) else {
            return false;
        };
        let (Some(c), Some(y)) = (f32s_mut(out.c), f32s_mut(out.y)) else {
            return false;
        };
        let Some(gates) = f32s_mut(out.gates) else {
            return false;
        };
        let tc = match out.tc.as_deref_mut().map(f32s_mut) {
            Some(Some(tc)) => Some(tc),
            Some(None) => return false,
            None => None,
        };
        let b = Block {
            h,
            xp,
            bias,
            hw,
            cp,
            c,
            y,
            y_stride: out.y_stride,
            gates,
            tc,
        };
        if has_bias {
            assert_eq!(b.bias.len(), 4 * h, "lstm: bias length");
        }
        // SAFETY: the CPU supports `isa` (the caller's promise), which is
        // not `Generic` (returned above).
        unsafe { run_wide(isa, b, has_bias) };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One step's inputs and outputs on a block of rows, as `f32`.
#[cfg(target_arch = "x86_64")]
struct Block<'a> {
    h: usize,
    xp: &'a [f32],
    bias: &'a [f32],
    hw: &'a [f32],
    cp: &'a [f32],
    c: &'a mut [f32],
    y: &'a mut [f32],
    /// Row `r` of `y` starts at `r * y_stride`.
    y_stride: usize,
    /// The activated gates, `[rows, 4H]`: saved when `tc` is, scratch
    /// otherwise.
    gates: &'a mut [f32],
    /// `tanh(c)`, `[rows, H]`, when it is saved.
    tc: Option<&'a mut [f32]>,
}

/// The rows of one step, on the AVX-512 build (`AVX512`) or the AVX2 one,
/// with or without the bias.
#[cfg(target_arch = "x86_64")]
impl WideRows for Block<'_> {
    #[inline(always)]
    unsafe fn rows<const AVX512: bool, const BIAS: bool>(mut self) {
        let b = &mut self;
        let h = b.h;
        let g4 = 4 * h;
        let rows = b.c.len() / h;
        shape_assert!(b.xp.len() >= rows * g4 && b.hw.len() >= rows * g4);
        shape_assert!(b.y_stride >= h, "lstm: output rows overlap");
        shape_assert!(
            b.cp.len() >= rows * h && (rows == 0 || b.y.len() >= (rows - 1) * b.y_stride + h)
        );
        shape_assert!(b.gates.len() >= rows * g4, "lstm: gate buffer length");
        if let Some(tc) = &b.tc {
            shape_assert!(tc.len() >= rows * h, "lstm: tanh(c) buffer length");
        }
        for r in 0..rows {
            // SAFETY: the CPU has the build's features (our contract).
            unsafe { row::<AVX512, BIAS>(b, r) };
        }
    }
}

/// Row `r` of one step: `a = (xp + bias) + hw` (`xp + hw` without
/// `BIAS`), `i, f, o = sigmoid`, `g = tanh`, `c = f c_prev + i g`,
/// `y = o tanh(c)`; the activated gates and `tanh(c)` into their rows of
/// `b.gates` and `b.tc` when they are saved.
///
/// # Safety
/// The CPU must have AVX-512F (`AVX512`) or AVX2 and FMA (otherwise).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn row<const AVX512: bool, const BIAS: bool>(b: &mut Block<'_>, r: usize) {
    let h = b.h;
    let g4 = 4 * h;
    let x = &b.xp[r * g4..(r + 1) * g4];
    let w = &b.hw[r * g4..(r + 1) * g4];
    // without BIAS, `bq` is never read
    let bq = if BIAS { &b.bias[..g4] } else { x };
    let cp = &b.cp[r * h..(r + 1) * h];
    let y0 = r * b.y_stride;
    let (cr, yr) = (&mut b.c[r * h..(r + 1) * h], &mut b.y[y0..y0 + h]);
    let tc = b.tc.as_deref_mut().map(|t| &mut t[r * h..(r + 1) * h]);
    // All four arms: the CPU has the build's features (our contract), and
    // the unit loops index their slices (bounds-checked safe code); the row
    // slices above were cut with checked ranges.
    match (tc, AVX512) {
        // SAFETY: the CPU has AVX-512F (`AVX512`, our contract); see above.
        (Some(tr), true) => unsafe {
            let g = &mut b.gates[r * g4..(r + 1) * g4];
            units_avx512::<BIAS, true>(x, bq, w, cp, cr, yr, g, tr)
        },
        // SAFETY: as the first arm.
        (None, true) => unsafe {
            let g = &mut b.gates[r * g4..(r + 1) * g4];
            units_avx512::<BIAS, false>(x, bq, w, cp, cr, yr, g, &mut [])
        },
        // SAFETY: the CPU has AVX2 and FMA (not `AVX512`, our contract).
        (Some(tr), false) => unsafe {
            let g = &mut b.gates[r * g4..(r + 1) * g4];
            units_avx2::<BIAS, true>(x, bq, w, cp, cr, yr, g, tr)
        },
        // SAFETY: as the previous arm.
        (None, false) => unsafe {
            let g = &mut b.gates[r * g4..(r + 1) * g4];
            units_avx2::<BIAS, false>(x, bq, w, cp, cr, yr, g, &mut [])
        },
    }
}

/// `units_build!(name, "features", body)`: `body` compiled for `features`
/// as a function of its own, so that every operand is a separate argument
/// (the compiler then knows that the outputs overlap nothing, and
/// vectorises). `g` is the row's gates (saved with `SAVE`; scratch for
/// the AVX2 build, unused by the AVX-512 one otherwise).
///
/// # Safety (of the function defined)
/// The CPU must have `features`.
#[cfg(target_arch = "x86_64")]
macro_rules! units_build {
    ($name:ident, $features:literal, $body:ident) => {
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = $features)]
        #[inline(never)]
        unsafe fn $name<const BIAS: bool, const SAVE: bool>(
            x: &[f32],
            bq: &[f32],
            w: &[f32],
            cp: &[f32],
            c: &mut [f32],
            y: &mut [f32],
            g: &mut [f32],
            tc: &mut [f32],
        ) {
            $body::<BIAS, SAVE>(x, bq, w, cp, c, y, g, tc)
        }
    };
}
#[cfg(target_arch = "x86_64")]
units_build!(units_avx512, "avx512f", units_body);
#[cfg(target_arch = "x86_64")]
units_build!(units_avx2, "avx2,fma", units_blocks);

/// The AVX-512 build's loops over one row's units (`x`, `bq`, `w`, `g`:
/// `4H`, gate blocks `H` apart; the rest `H`): one pass for the four
/// gates and the cell, writing the cell and the output gate (into `g`'s
/// `o` block with `SAVE`, which also takes the other three gates; into
/// its first `H` as scratch otherwise), then one pass for `tanh(c)` (into
/// `tc` with `SAVE`) and the output. The split shortens each iteration's
/// chain of dependent operations: in one pass, `tanh(c)` waits for the
/// gates' divisions and the loop ran at about half the vector units'
/// rate (a 64 x 128 step 15-19% faster split; the same operations per
/// element, so the same bits). Inlined into the build; its helpers are
/// `inline(always)` functions, not closures, so that nothing in the loop
/// is compiled apart from the build's target features.
#[allow(clippy::too_many_arguments)]
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn units_body<const BIAS: bool, const SAVE: bool>(
    x: &[f32],
    bq: &[f32],
    w: &[f32],
    cp: &[f32],
    c: &mut [f32],
    y: &mut [f32],
    g: &mut [f32],
    tc: &mut [f32],
) {
    let h = c.len();
    let [xi, xf, xg, xo] = quarters(x, h);
    let [bi, bf, bg, bo] = quarters(bq, h);
    let [wi, wf, wg, wo] = quarters(w, h);
    let (cp, y) = (&cp[..h], &mut y[..h]);
    if SAVE {
        let (gi, rest) = g.split_at_mut(h);
        let (gf, rest) = rest.split_at_mut(h);
        let (gg, go) = rest.split_at_mut(h);
        let (go, tc) = (&mut go[..h], &mut tc[..h]);
        for j in 0..h {
            let i = sigmoid_f32(pre::<BIAS>(xi[j], bi[j], wi[j]));
            let f = sigmoid_f32(pre::<BIAS>(xf[j], bf[j], wf[j]));
            let gv = tanh_f32(pre::<BIAS>(xg[j], bg[j], wg[j]));
            let o = sigmoid_f32(pre::<BIAS>(xo[j], bo[j], wo[j]));
            (gi[j], gf[j], gg[j], go[j]) = (i, f, gv, o);
            c[j] = cell(i, f, gv, cp[j]);
        }
        for j in 0..h {
            let t = tanh_f32(c[j]);
            tc[j] = t;
            y[j] = go[j] * t;
        }
    } else {
        let os = &mut g[..h];
        for j in 0..h {
            let i = sigmoid_f32(pre::<BIAS>(xi[j], bi[j], wi[j]));
            let f = sigmoid_f32(pre::<BIAS>(xf[j], bf[j], wf[j]));
            let gv = tanh_f32(pre::<BIAS>(xg[j], bg[j], wg[j]));
            os[j] = sigmoid_f32(pre::<BIAS>(xo[j], bo[j], wo[j]));
            c[j] = cell(i, f, gv, cp[j]);
        }
        for j in 0..h {
            y[j] = os[j] * tanh_f32(c[j]);
        }
    }
}

/// The AVX2 build's loops over one row's units: one loop per gate block
/// writes the activated gates into `g` (`4H`: saved with `SAVE`, scratch
/// otherwise), then one loop makes the cell, `tanh(c)` (into `tc` with
/// `SAVE`) and the output. With 16 vector registers, the one-pass loop of
/// [`units_body`] (five activations in flight) spills and reloads its
/// polynomial constants; a loop per activation keeps them in registers
/// (about 10% faster per step on AVX2 than the generic loops, 14% than the
/// one-pass loop; the same operations per element, so the same bits).
#[allow(clippy::too_many_arguments)]
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn units_blocks<const BIAS: bool, const SAVE: bool>(
    x: &[f32],
    bq: &[f32],
    w: &[f32],
    cp: &[f32],
    c: &mut [f32],
    y: &mut [f32],
    g: &mut [f32],
    tc: &mut [f32],
) {
    let h = c.len();
    let (x, bq, w, a) = (&x[..4 * h], &bq[..4 * h], &w[..4 * h], &mut g[..4 * h]);
    for j in 0..2 * h {
        a[j] = sigmoid_f32(pre::<BIAS>(x[j], bq[j], w[j]));
    }
    for j in 2 * h..3 * h {
        a[j] = tanh_f32(pre::<BIAS>(x[j], bq[j], w[j]));
    }
    for j in 3 * h..4 * h {
        a[j] = sigmoid_f32(pre::<BIAS>(x[j], bq[j], w[j]));
    }
    let [ai, af, ag, ao] = quarters(a, h);
    let (cp, y) = (&cp[..h], &mut y[..h]);
    if SAVE {
        let tc = &mut tc[..h];
        for j in 0..h {
            let cv = cell(ai[j], af[j], ag[j], cp[j]);
            let t = tanh_f32(cv);
            c[j] = cv;
            tc[j] = t;
            y[j] = ao[j] * t;
        }
    } else {
        for j in 0..h {
            let cv = cell(ai[j], af[j], ag[j], cp[j]);
            c[j] = cv;
            y[j] = ao[j] * tanh_f32(cv);
        }
    }
}

/// A gate's pre-activation: `(x + b) + w`, or `x + w` without `BIAS`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn pre<const BIAS: bool>(x: f32, b: f32, w: f32) -> f32 {
    if BIAS {
        (x + b) + w
    } else {
        x + w
    }
}

/// The new cell `f c_prev + i g`: two products and a sum, unfused, as the
/// generic kernel.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn cell(i: f32, f: f32, g: f32, c_prev: f32) -> f32 {
    f * c_prev + i * g
}

/// The four gate blocks of `H` of a `4H` row.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn quarters(v: &[f32], h: usize) -> [&[f32]; 4] {
    [&v[..h], &v[h..2 * h], &v[2 * h..3 * h], &v[3 * h..4 * h]]
}
