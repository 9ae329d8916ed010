//! 8-bit floating point storage: [`Fp8Format::E4M3`] (`float8_e4m3fn`) and
//! [`Fp8Format::E5M2`] (`float8_e5m2`), the two formats safetensors calls
//! `F8_E4M3` and `F8_E5M2`, with PyTorch's conversions bit for bit.
//!
//! - `E4M3`: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no
//!   infinities; NaN is `S.1111.111`; largest finite 448, smallest normal
//!   2^-6, smallest subnormal 2^-9.
//! - `E5M2`: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like:
//!   infinities `S.11111.00`, NaNs `S.11111.xx`; largest finite 57344,
//!   smallest subnormal 2^-16.
//!
//! [`Fp8Format::encode`] rounds to nearest, ties to even, as PyTorch's
//! `tensor.to(torch.float8_*)` (torch 2.15), including its overflow rules,
//! which differ between the formats:
//! - `E4M3` saturates: any magnitude from 464 up (the midpoint past 448),
//!   infinities included, gives ±448 (`0x7e` / `0xfe`); NaN gives NaN
//!   (`0x7f`, `0xff` with the sign bit set);
//! - `E5M2` does not: a magnitude of at least 61440 (the midpoint past
//!   57344, a tie that rounds to the even pattern, the infinity) or an
//!   infinity gives ±infinity (`0x7c` / `0xfc`); NaN gives `0x7f` / `0xff`.
//!
//! [`Fp8Format::encode_saturating`] clamps finite values to the largest
//! finite value first (what the checkpoint writers do after scaling).

/// An 8-bit float format.
///
/// ```
/// use forge::quant::Fp8Format;
/// assert_eq!(Fp8Format::E4M3.max_finite(), 448.0);
/// assert_eq!(Fp8Format::E5M2.max_finite(), 57344.0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8Format {
    /// `float8_e4m3fn` (safetensors `F8_E4M3`).
    E4M3,
    /// `float8_e5m2` (safetensors `F8_E5M2`).
    E5M2,
}

/// `2^e` for an `e` of the normal `f32` range (-126..=127), from its bits:
/// exact, as `2f32.powi(e)` is there, without its library call (which was
/// a third of the time of decoding a model's weights for a state dict).
fn pow2(e: i32) -> f32 {
    debug_assert!((-126..=127).contains(&e), "pow2({e})");
    f32::from_bits(((e + 127) as u32) << 23)
}

impl Fp8Format {
    /// The largest finite value.
    ///
    /// ```
    /// assert_eq!(forge::quant::Fp8Format::E4M3.max_finite(), 448.0);
    /// ```
    pub fn max_finite(self) -> f32 {
        match self {
            Fp8Format::E4M3 => 448.0,
            Fp8Format::E5M2 => 57344.0,
        }
    }

    /// The value of the byte `bits` (exact in `f32`).
    ///
    /// ```
    /// use forge::quant::Fp8Format;
    /// assert_eq!(Fp8Format::E4M3.decode(0x7e), 448.0);
    /// assert!(Fp8Format::E4M3.decode(0x7f).is_nan());
    /// assert_eq!(Fp8Format::E5M2.decode(0x7c), f32::INFINITY);
    /// assert_eq!(Fp8Format::E5M2.decode(0x01), 2f32.powi(-16));
    /// ```
    pub fn decode(self, bits: u8) -> f32 {
        let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
        let (mant_bits, bias) = match self {
            Fp8Format::E4M3 => (3, 7),
            Fp8Format::E5M2 => (2, 15),
        };
        let exp_max: i32 = 0x7f >> mant_bits;
        let exp = ((bits & 0x7f) >> mant_bits) as i32;
        let mant = (bits & ((1 << mant_bits) - 1)) as f32;
        let scale = (1u32 << mant_bits) as f32;
        let magnitude = match self {
            Fp8Format::E4M3 if exp == exp_max && mant == 7.0 => f32::NAN,
            Fp8Format::E5M2 if exp == exp_max => {
                if mant == 0.0 {
                    f32::INFINITY
                } else {
                    f32::NAN
                }
            }
            _ if exp == 0 => mant / scale * pow2(1 - bias),
            _ => (1.0 + mant / scale) * pow2(exp - bias),
        };
        sign * magnitude
    }

    /// `x` rounded to this format (nearest, ties to even), as PyTorch
    /// converts. Overflow: `E4M3` saturates (any magnitude from 464 up,
    /// infinities included, gives ±448); `E5M2` gives ±infinity from 61440
    /// up. NaN stays NaN.
    ///
    /// ```
    /// use forge::quant::Fp8Format;
    /// assert_eq!(Fp8Format::E4M3.encode(1.0), 0x38);
    /// assert_eq!(Fp8Format::E4M3.encode(-448.0), 0xfe);
    /// assert_eq!(Fp8Format::E4M3.encode(500.0), 0x7e); // saturates to 448
    /// assert_eq!(Fp8Format::E4M3.encode(f32::NAN), 0x7f);
    /// assert_eq!(Fp8Format::E5M2.encode(1e6), 0x7c); // inf
    /// ```
    pub fn encode(self, x: f32) -> u8 {
        let bits = x.to_bits();
        let sign = ((bits >> 24) & 0x80) as u8;
        let abs = bits & 0x7fff_ffff;
        let (mant_bits, bias) = match self {
            Fp8Format::E4M3 => (3u32, 7u32),
            Fp8Format::E5M2 => (2u32, 15u32),
        };
        // where the overflow rule takes over: E4M3 from 464 (saturates;
        // 464 itself ties to 448 anyway), E5M2 from 2^16 (61440 up to it
        // rounds to the infinity's pattern by the carry below)
        let overflow = match self {
            Fp8Format::E4M3 => 0x43e8_0000u32,
            Fp8Format::E5M2 => 0x4780_0000u32,
        };
        // exponent field (in f32) of the smallest normal, 2^(1 - bias)
        let min_normal = 128 - bias;
        let out = if abs > 0x7f80_0000 {
            0x7f // NaN in both formats
        } else if abs >= overflow {
            match self {
                Fp8Format::E4M3 => 0x7e,
                Fp8Format::E5M2 => 0x7c,
            }
        } else if abs < min_normal << 23 {
            // subnormal or zero: in the sum with a float whose last
            // mantissa unit is the format's subnormal step, 2^(1 - bias -
            // mant_bits), the hardware rounds to nearest even and the low
            // bits of the sum are the result
            let magic = (151 - bias - mant_bits) << 23;
            let sum = f32::from_bits(abs) + f32::from_bits(magic);
            (sum.to_bits() - magic) as u8
        } else {
            // normal: rebias the exponent, round the mantissa to nearest
            // even (add half a unit less one, plus the kept lowest bit)
            let shift = 23 - mant_bits;
            let odd = (abs >> shift) & 1;
            let rounded = abs - ((127 - bias) << 23) + (1 << (shift - 1)) - 1 + odd;
            (rounded >> shift) as u8
        };
        out | sign
    }

    /// `x` clamped to `[-max_finite, max_finite]` (NaN kept), then
    /// [`encode`](Self::encode)d: no value becomes an infinity (what
    /// `encode` already does in `E4M3`).
    ///
    /// ```
    /// use forge::quant::Fp8Format;
    /// assert_eq!(Fp8Format::E4M3.encode_saturating(500.0), 0x7e); // 448
    /// assert_eq!(Fp8Format::E5M2.encode_saturating(f32::NEG_INFINITY), 0xfb); // -57344
    /// ```
    pub fn encode_saturating(self, x: f32) -> u8 {
        let m = self.max_finite();
        self.encode(if x.is_nan() { x } else { x.clamp(-m, m) })
    }
}

#[cfg(test)]
mod tests {
    use super::Fp8Format;

    /// Every byte of both formats against the definition evaluated in
    /// `f64` (`(-1)^s (1 + m / 2^M) 2^(e - bias)`, subnormals
    /// `(-1)^s (m / 2^M) 2^(1 - bias)`): exact in `f32`, so equal bits,
    /// signed zeros included; NaN and infinity where the format has them.
    #[test]
    fn decode_matches_the_definition_for_every_byte() {
        for (format, mant_bits, bias) in [(Fp8Format::E4M3, 3, 7), (Fp8Format::E5M2, 2, 15)] {
            for b in 0..=255u8 {
                let got = format.decode(b);
                let neg = b & 0x80 != 0;
                let exp = i32::from((b & 0x7f) >> mant_bits);
                let mant = f64::from(b & ((1 << mant_bits) - 1));
                let exp_max = 0x7f >> mant_bits;
                let special = match format {
                    Fp8Format::E4M3 => exp == exp_max && mant == 7.0,
                    Fp8Format::E5M2 => exp == exp_max,
                };
                if special {
                    if format == Fp8Format::E5M2 && mant == 0.0 {
                        let inf = if neg {
                            f32::NEG_INFINITY
                        } else {
                            f32::INFINITY
                        };
                        assert_eq!(got, inf, "{format:?} {b:#04x}");
                    } else {
                        assert!(got.is_nan(), "{format:?} {b:#04x}: {got}");
                    }
                    continue;
                }
                let frac = mant / f64::from(1u32 << mant_bits);
                let mag = if exp == 0 {
                    frac * 2f64.powi(1 - bias)
                } else {
                    (1.0 + frac) * 2f64.powi(exp - bias)
                };
                let want = if neg { -mag } else { mag } as f32;
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{format:?} {b:#04x}: {got} vs {want}"
                );
            }
        }
    }
}
