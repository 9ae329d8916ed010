//! What the LSTM and GRU kernel tests share: the hidden sizes, the input
//! values, the wide builds to compare and the bits of either float type.

use super::isa::{supports, Isa};
use crate::tensor::Float;
use crate::Rng;

/// Hidden sizes: below, at and off multiples of 8 and 16 lanes.
pub(super) const HS: [usize; 9] = [1, 3, 7, 8, 13, 16, 24, 37, 128];

/// `len` values around 0, every 7th large enough to saturate the gates,
/// with exact zeros of both signs among them.
pub(super) fn values(rng: &mut Rng, len: usize) -> Vec<f32> {
    (0..len)
        .map(|k| match k % 23 {
            5 => 0.0,
            11 => -0.0,
            _ => {
                let v = 3.0 * rng.normal() as f32;
                if k % 7 == 3 {
                    12.0 * v
                } else {
                    v
                }
            }
        })
        .collect()
}

/// [`values`] as `E`; with `act`, through `tanh` into (-1, 1), where
/// activated gates and `tanh(c)` lie.
pub(super) fn floats<E: Float>(rng: &mut Rng, len: usize, act: bool) -> Vec<E> {
    values(rng, len)
        .into_iter()
        .map(|v| E::from_f64(if act { (v as f64).tanh() } else { v as f64 }))
        .collect()
}

/// The bit pattern of an `f32` or `f64`.
pub(super) trait Bits: Float {
    fn bits(self) -> u64;
}
impl Bits for f32 {
    fn bits(self) -> u64 {
        self.to_bits().into()
    }
}
impl Bits for f64 {
    fn bits(self) -> u64 {
        self.to_bits()
    }
}

pub(super) fn bits<E: Bits>(v: &[E]) -> Vec<u64> {
    v.iter().map(|x| x.bits()).collect()
}

/// The wide builds of the `cell`'s step kernel this CPU runs.
pub(super) fn wide_builds(cell: &str) -> Vec<Isa> {
    let b: Vec<Isa> = [Isa::Avx512, Isa::Avx2]
        .into_iter()
        .filter(|&i| supports(i))
        .collect();
    if b.is_empty() {
        eprintln!("no wide build of the {cell} step kernel on this CPU: nothing compared");
    }
    b
}

/// The builds a step kernel must decline for `E`: every one the CPU runs
/// for `f64`, only [`Isa::Generic`] for `f32`.
pub(super) fn builds_to_decline<E: Float>() -> Vec<Isa> {
    if std::any::TypeId::of::<E>() == std::any::TypeId::of::<f32>() {
        vec![Isa::Generic]
    } else {
        [Isa::Avx512, Isa::Avx2, Isa::Generic]
            .into_iter()
            .filter(|&i| supports(i))
            .collect()
    }
}
