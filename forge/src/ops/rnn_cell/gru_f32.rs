//! The GRU step kernel for `f32` on AVX-512 and on AVX2 + FMA: per row, one
//! loop makes the activated `r, z` gates and one loop the candidate `n`,
//! the saved `hp_n` and the output, 16 or 8 units per instruction, instead
//! of the generic kernel's separate passes (the bias pass, `vmath`'s
//! slices, the candidate and the output) at the baseline width. Each
//! element is the generic kernel's arithmetic in the same order (the same
//! scalar `sigmoid_f32` / `tanh_f32` as `vmath`, fused steps included;
//! the cell's own arithmetic has no fused multiply-adds, none contracted),
//! so the same bits.

#[cfg(test)]
use super::isa::supports;
#[cfg(target_arch = "x86_64")]
use super::isa::{f32_bias, f32s, f32s_mut, run_wide, WideRows};
use super::isa::{isa, Isa};
#[cfg(target_arch = "x86_64")]
use crate::cpu::vmath::{sigmoid_f32, tanh_f32};
use crate::tensor::Float;

/// One GRU step's rows: the input projection `xp` (`[rows, 3H]`), the
/// hidden product `hw` (`[rows, 3H]`), `b_hh` (`[3H]`), `h_prev`
/// (`[rows, H]`); out the saved `(r, z, n, hp_n)` (`[rows, 4H]`) and `y`
/// (`[rows, H]`).
pub(super) struct GruStep<'a, E> {
    pub(super) xp: &'a [E],
    pub(super) hw: &'a [E],
    pub(super) b: Option<&'a [E]>,
    pub(super) h_prev: &'a [E],
    pub(super) s: &'a mut [E],
    pub(super) y: &'a mut [E],
}

/// The fused step when `E` is `f32` and the CPU has AVX-512F or AVX2 +
/// FMA ([`isa`]); `false` (nothing written) otherwise.
pub(super) fn gru_rows_f32<E: Float>(h: usize, st: &mut GruStep<'_, E>) -> bool {
    // SAFETY: `isa()` is what the CPU supports.
    unsafe { rows_on(isa(), h, st) }
}

/// [`gru_rows_f32`] on the `isa` build, for the tests that compare the
/// builds.
///
/// # Panics
/// When the CPU cannot run `isa`.
#[cfg(test)]
pub(super) fn gru_rows_f32_on<E: Float>(isa: Isa, h: usize, st: &mut GruStep<'_, E>) -> bool {
    shape_assert!(supports(isa), "gru: this CPU cannot run {isa:?}");
    // SAFETY: the CPU runs `isa` (asserted).
    unsafe { rows_on(isa, h, st) }
}

/// [`gru_rows_f32`] on the `isa` build.
///
/// # Safety
/// The CPU must support `isa`.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
unsafe fn rows_on<E: Float>(isa: Isa, h: usize, st: &mut GruStep<'_, E>) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if isa == Isa::Generic {
            return false;
        }
        let (Some(xp), Some(hw), Some(hp)) = (f32s(st.xp), f32s(st.hw), f32s(st.h_prev)) else {
            return false;
        };
        let Some((has_bias, bias)) = f32_bias(st.b) else {
            return false;
        };
        let (Some(s), Some(y)) = (f32s_mut(st.s), f32s_mut(st.y)) else {
            return false;
        };
        let rows = y.len() / h;
        let (g3, g4) = (3 * h, 4 * h);
        shape_assert!(
            xp.len() >= rows * g3 && hw.len() >= rows * g3,
            "gru: step rows"
        );
        shape_assert!(
            hp.len() >= rows * h && s.len() >= rows * g4,
            "gru: step rows"
        );
        shape_assert!(!has_bias || bias.len() == g3, "gru: bias length");
        let b = Block {
            h,
            xp,
            hw,
            bias,
            hp,
            s,
            y,
        };
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

/// One step's rows as `f32` (sizes checked by [`rows_on`]).
#[cfg(target_arch = "x86_64")]
struct Block<'a> {
    h: usize,
    xp: &'a [f32],
    hw: &'a [f32],
    /// Empty without the bias.
    bias: &'a [f32],
    hp: &'a [f32],
    s: &'a mut [f32],
    y: &'a mut [f32],
}

/// The rows of one step, the same loops on either build.
#[cfg(target_arch = "x86_64")]
impl WideRows for Block<'_> {
    #[inline(always)]
    unsafe fn rows<const AVX512: bool, const BIAS: bool>(self) {
        let b = self;
        let h = b.h;
        let (g3, g4) = (3 * h, 4 * h);
        // without BIAS, `bq` is never read
        for r in 0..b.y.len() / h {
            let x = &b.xp[r * g3..(r + 1) * g3];
            let bq = if BIAS { &b.bias[..g3] } else { x };
            units::<BIAS>(
                x,
                &b.hw[r * g3..(r + 1) * g3],
                bq,
                &b.hp[r * h..(r + 1) * h],
                &mut b.s[r * g4..(r + 1) * g4],
                &mut b.y[r * h..(r + 1) * h],
            );
        }
    }
}

/// One row: `hp = hw + b` (`hw` without `BIAS`); `r, z = sigmoid(x + hp)`
/// into `s[..2H]`; `hp_n` into `s[3H..]`, `n = tanh(x_n + r hp_n)` into
/// `s[2H..3H]`, `y = n + z (h_prev - n)`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn units<const BIAS: bool>(
    x: &[f32],
    w: &[f32],
    bq: &[f32],
    hp: &[f32],
    s: &mut [f32],
    y: &mut [f32],
) {
    let h = y.len();
    let (x, w, bq, hp) = (&x[..3 * h], &w[..3 * h], &bq[..3 * h], &hp[..h]);
    let (rz, rest) = s[..4 * h].split_at_mut(2 * h);
    let (sn, shp) = rest.split_at_mut(h);
    for j in 0..2 * h {
        rz[j] = sigmoid_f32(x[j] + hidden::<BIAS>(w[j], bq[j]));
    }
    let (r, z) = rz.split_at(h);
    let (xn, wn, bn) = (&x[2 * h..], &w[2 * h..], &bq[2 * h..]);
    for j in 0..h {
        let hpn = hidden::<BIAS>(wn[j], bn[j]);
        let n = tanh_f32(xn[j] + r[j] * hpn);
        shp[j] = hpn;
        sn[j] = n;
        y[j] = n + z[j] * (hp[j] - n);
    }
}

/// The hidden product's element with its bias: `w + b`, or `w` without
/// `BIAS`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn hidden<const BIAS: bool>(w: f32, b: f32) -> f32 {
    if BIAS {
        w + b
    } else {
        w
    }
}
