//! A small, seedable, portable random number generator (xoshiro256++
//! seeded through SplitMix64). The same seed gives the same numbers on every
//! platform and thread.

use super::{numel, Device, Float, Tensor};
use crate::cpu::memory::Storage;

/// A seedable pseudo-random generator.
///
/// ```
/// let mut a = forge::Rng::new(7);
/// let mut b = forge::Rng::new(7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator from a seed.
    ///
    /// ```
    /// let _rng = forge::Rng::new(0);
    /// ```
    pub fn new(seed: u64) -> Self {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^ (x >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    /// The next 64 random bits.
    ///
    /// ```
    /// let mut r = forge::Rng::new(1);
    /// assert_ne!(r.next_u64(), r.next_u64());
    /// ```
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform value in `[0, 1)` with 53 random bits.
    ///
    /// ```
    /// let x = forge::Rng::new(3).uniform();
    /// assert!((0.0..1.0).contains(&x));
    /// ```
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal value (Box-Muller).
    ///
    /// ```
    /// let x = forge::Rng::new(3).normal();
    /// assert!(x.is_finite());
    /// ```
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// A uniform integer in `0..n`.
    ///
    /// # Panics
    /// When `n` is zero.
    ///
    /// ```
    /// assert!(forge::Rng::new(5).below(10) < 10);
    /// ```
    pub fn below(&mut self, n: usize) -> usize {
        shape_assert!(n > 0, "Rng::below: empty range");
        // Lemire's multiply-shift; the tiny bias for huge n does not matter here.
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Shuffles a slice in place (Fisher-Yates).
    ///
    /// ```
    /// let mut v: Vec<usize> = (0..10).collect();
    /// forge::Rng::new(1).shuffle(&mut v);
    /// let mut s = v.clone(); s.sort();
    /// assert_eq!(s, (0..10).collect::<Vec<_>>());
    /// ```
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// Values drawn uniformly from `[low, high)`.
    ///
    /// ```
    /// let mut rng = forge::Rng::new(0);
    /// let t = forge::Tensor::<f32>::uniform(&[100], -1.0, 1.0, &mut rng);
    /// assert!(t.to_vec().iter().all(|v| (-1.0..1.0).contains(v)));
    /// ```
    pub fn uniform(shape: &[usize], low: f64, high: f64, rng: &mut Rng) -> Self {
        let data: Storage<E> = (0..numel(shape))
            .map(|_| E::from_f64(low + (high - low) * rng.uniform()))
            .collect();
        Self::from_storage(data, shape)
    }

    /// Values drawn from a normal distribution.
    ///
    /// ```
    /// let mut rng = forge::Rng::new(0);
    /// let t = forge::Tensor::<f64>::normal(&[1000], 0.0, 1.0, &mut rng);
    /// let mean = t.to_vec().iter().sum::<f64>() / 1000.0;
    /// assert!(mean.abs() < 0.1);
    /// ```
    pub fn normal(shape: &[usize], mean: f64, std: f64, rng: &mut Rng) -> Self {
        let data: Storage<E> = (0..numel(shape))
            .map(|_| E::from_f64(mean + std * rng.normal()))
            .collect();
        Self::from_storage(data, shape)
    }
}
