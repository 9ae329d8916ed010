//! f32 activations to bf16 rows for the bf16 products, into pooled
//! buffers, by the vector rounding of [`crate::cpu::bf16_round`] (re-exported
//! here for autocast's users).

use crate::cpu::bf16_round::{convert_with, Isa};
use crate::cpu::bgemm::padded_k;
use crate::cpu::memory::Storage;

pub(crate) use crate::cpu::bf16_round::{to_bf16_slice, Bf16Rounder};

/// `rows` rows of `k` f32 (row-major) as bf16 rows of [`padded_k`]`(k)`
/// elements in a pooled buffer, the padding zero.
pub(crate) fn rows_to_bf16(src: &[f32], rows: usize, k: usize) -> Storage<u16> {
    let kp = padded_k(k);
    let isa = Isa::detect();
    if kp == k {
        let mut out = Storage::<u16>::zeroed(rows * k);
        convert_with(isa, &src[..rows * k], &mut out);
        return out;
    }
    let mut out = Storage::<u16>::zeroed(rows * kp);
    for (dst, row) in out.chunks_exact_mut(kp).zip(src.chunks_exact(k.max(1))) {
        convert_with(isa, row, &mut dst[..k]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::bgemm;

    #[test]
    fn every_path_rounds_as_the_scalar_reference() {
        let mut values = vec![
            0.0f32,
            -0.0,
            1.0,
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001), // signalling NaN
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::from_bits(1),           // subnormal
            f32::from_bits(0x807f_ffff), // negative subnormal
            f32::from_bits(0x3f80_8000), // a tie, even below
            f32::from_bits(0x3f81_8000), // a tie, odd below
            f32::from_bits(0x7f7f_8000), // rounds past the largest bf16
        ];
        // pseudo-random bit patterns, every exponent
        let mut s = 0x9e37_79b9u32;
        for _ in 0..5000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            values.push(f32::from_bits(s));
        }
        let want: Vec<u16> = values.iter().map(|&v| bgemm::to_bf16(v)).collect();
        for isa in Isa::all() {
            // every length around the 32-value blocks
            for len in [0, 1, 31, 32, 33, 64, 100, values.len()] {
                let mut got = vec![0u16; len];
                convert_with(isa, &values[..len], &mut got);
                assert_eq!(got, want[..len], "{isa:?} {len}");
            }
        }
    }

    #[test]
    fn odd_rows_are_padded_with_zeros() {
        let src = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let out = rows_to_bf16(&src, 2, 3);
        assert_eq!(&out[..], &bgemm::rows_to_bf16(&src, 2, 3)[..]);
        assert_eq!(out[3], 0);
    }
}
