//! The LSTM step kernel for `f32` on AVX-512: one pass over each row's
//! hidden units computes the four gates, the cell and the output, 16 units
//! per instruction, instead of one pass per gate and per update. Each
//! element is the generic kernel's arithmetic in the same order (the same
//! scalar `sigmoid_f32` / `tanh_f32` as `vmath`, whose slice loops are
//! these functions vectorised; no fused multiply-adds), so the same bits.
//! Under `no_grad` the activated gates are not stored at all.

use crate::cpu::vmath::{sigmoid_f32, tanh_f32};
use crate::tensor::Float;
use std::any::TypeId;

/// `x` as `f32` when `E` is `f32`.
#[cfg(target_arch = "x86_64")]
fn f32s<E: Float>(x: &[E]) -> Option<&[f32]> {
    // SAFETY: `E` is `f32` (checked), so this is the same slice under its
    // own type.
    (TypeId::of::<E>() == TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<f32>(), x.len()) })
}

/// `x` as `f32` when `E` is `f32`.
#[cfg(target_arch = "x86_64")]
fn f32s_mut<E: Float>(x: &mut [E]) -> Option<&mut [f32]> {
    // SAFETY: as `f32s`; the borrow is moved into the result.
    (TypeId::of::<E>() == TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast::<f32>(), x.len()) })
}

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
/// AVX-512F; `false` (and nothing written) otherwise.
pub(super) fn lstm_rows_f32<E: Float>(
    h: usize,
    ins: &StepIns<'_, E>,
    out: &mut Outs<'_, E>,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return false;
        }
        let (Some(xp), Some(hw), Some(cp)) = (f32s(ins.xp), f32s(ins.hw), f32s(ins.c_prev)) else {
            return false;
        };
        // an empty bias when there is none (never read then)
        let (has_bias, bias) = match ins.bias.map(f32s) {
            Some(Some(b)) => (true, b),
            Some(None) => return false,
            None => (false, &[][..]),
        };
        let (Some(c), Some(y)) = (f32s_mut(out.c), f32s_mut(out.y)) else {
            return false;
        };
        let saved = match out.tc.as_deref_mut() {
            Some(tc) => match (f32s_mut(out.gates), f32s_mut(tc)) {
                (Some(g), Some(tc)) => Some((g, tc)),
                _ => return false,
            },
            None => None,
        };
        // SAFETY: the CPU has AVX-512F (checked just above).
        unsafe {
            rows_avx512(
                Block {
                    h,
                    xp,
                    bias,
                    hw,
                    cp,
                    c,
                    y,
                    y_stride: out.y_stride,
                },
                has_bias,
                saved,
            )
        };
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (h, ins, out);
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
}

/// [`lstm_rows_f32`]'s loops, compiled for AVX-512.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn rows_avx512(b: Block<'_>, has_bias: bool, saved: Option<(&mut [f32], &mut [f32])>) {
    if has_bias {
        assert_eq!(b.bias.len(), 4 * b.h, "lstm: bias length");
        rows_with::<true>(b, saved)
    } else {
        rows_with::<false>(b, saved)
    }
}

/// [`rows_avx512`] with or without the bias.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn rows_with<const BIAS: bool>(mut b: Block<'_>, saved: Option<(&mut [f32], &mut [f32])>) {
    let h = b.h;
    let g4 = 4 * h;
    let rows = b.c.len() / h;
    assert!(b.xp.len() >= rows * g4 && b.hw.len() >= rows * g4);
    assert!(b.y_stride >= h, "lstm: output rows overlap");
    assert!(b.cp.len() >= rows * h && (rows == 0 || b.y.len() >= (rows - 1) * b.y_stride + h));
    match saved {
        Some((gates, tcs)) => {
            assert!(gates.len() >= rows * g4 && tcs.len() >= rows * h);
            for r in 0..rows {
                let keep = (
                    &mut gates[r * g4..(r + 1) * g4],
                    &mut tcs[r * h..(r + 1) * h],
                );
                row::<BIAS>(&mut b, r, Some(keep));
            }
        }
        None => {
            for r in 0..rows {
                row::<BIAS>(&mut b, r, None);
            }
        }
    }
}

/// Row `r` of one step: `a = (xp + bias) + hw` (`xp + hw` without
/// `BIAS`), `i, f, o = sigmoid`, `g = tanh`, `c = f c_prev + i g`,
/// `y = o tanh(c)`; into `keep` (`[4H]`, `[H]`) the activated gates and
/// `tanh(c)` when they are saved.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn row<const BIAS: bool>(b: &mut Block<'_>, r: usize, keep: Option<(&mut [f32], &mut [f32])>) {
    let h = b.h;
    let x = &b.xp[r * 4 * h..(r + 1) * 4 * h];
    let w = &b.hw[r * 4 * h..(r + 1) * 4 * h];
    // without BIAS, `bq` is never read
    let bq = if BIAS { &b.bias[..4 * h] } else { x };
    let cp = &b.cp[r * h..(r + 1) * h];
    let y0 = r * b.y_stride;
    let (cr, yr) = (&mut b.c[r * h..(r + 1) * h], &mut b.y[y0..y0 + h]);
    match keep {
        Some((gates, tr)) => units::<BIAS, true>(x, bq, w, cp, cr, yr, gates, tr),
        None => units::<BIAS, false>(x, bq, w, cp, cr, yr, &mut [], &mut []),
    }
}

/// The loop over one row's units (`x`, `bq`, `w`, `g`: `4H`, gate blocks
/// `H` apart; the rest `H`), a function of its own so that every operand
/// is a separate argument (the compiler then knows that the outputs
/// overlap nothing, and vectorises); with `SAVE`, the gates and `tanh(c)`
/// go to `g` and `tc` too (empty slices otherwise).
#[allow(clippy::too_many_arguments)]
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline(never)]
fn units<const BIAS: bool, const SAVE: bool>(
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
    let pre = |x: f32, b: f32, w: f32| if BIAS { (x + b) + w } else { x + w };
    // unit j's activated gates and new cell
    let unit = |j: usize| {
        let i = sigmoid_f32(pre(xi[j], bi[j], wi[j]));
        let f = sigmoid_f32(pre(xf[j], bf[j], wf[j]));
        let gv = tanh_f32(pre(xg[j], bg[j], wg[j]));
        let o = sigmoid_f32(pre(xo[j], bo[j], wo[j]));
        (i, f, gv, o, f * cp[j] + i * gv)
    };
    if SAVE {
        let (gi, rest) = g.split_at_mut(h);
        let (gf, rest) = rest.split_at_mut(h);
        let (gg, go) = rest.split_at_mut(h);
        let (go, tc) = (&mut go[..h], &mut tc[..h]);
        for j in 0..h {
            let (i, f, gv, o, cv) = unit(j);
            let t = tanh_f32(cv);
            (gi[j], gf[j], gg[j], go[j], tc[j]) = (i, f, gv, o, t);
            c[j] = cv;
            y[j] = o * t;
        }
    } else {
        for j in 0..h {
            let (_, _, _, o, cv) = unit(j);
            c[j] = cv;
            y[j] = o * tanh_f32(cv);
        }
    }
}

/// The four gate blocks of `H` of a `4H` row.
#[cfg(target_arch = "x86_64")]
fn quarters(v: &[f32], h: usize) -> [&[f32]; 4] {
    [&v[..h], &v[h..2 * h], &v[2 * h..3 * h], &v[3 * h..4 * h]]
}
