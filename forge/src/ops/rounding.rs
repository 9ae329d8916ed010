//! Rounding (`floor`, `ceil`, `round`, `trunc`), the float classification
//! tests (`isnan`, `isinf`, `isfinite`) and `nan_to_num`.
//!
//! The rounding functions are piecewise constant: their gradient is zero
//! (PyTorch's, the derivative almost everywhere), recorded so that a loss
//! built on them still has a gradient of the right shape. The tests return
//! detached `Tensor<bool>`.

use crate::tensor::{Device, Float, Tensor};

impl<E: Float, D: Device> Tensor<E, D> {
    /// Piecewise-constant `f` with a zero gradient.
    fn stepwise(&self, name: &'static str, f: impl Fn(E) -> E + Sync) -> Self {
        self.map(f).record(name, vec![self.clone()], |ctx| {
            vec![Some(Tensor::zeros_in(ctx.grad.shape()))]
        })
    }

    /// The largest integer not above each element (`torch.floor`); zero
    /// gradient.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![-1.5, 0.5, 2.0], &[3]);
    /// assert_eq!(t.floor().to_vec(), vec![-2.0, 0.0, 2.0]);
    /// ```
    pub fn floor(&self) -> Self {
        self.stepwise("floor", |x| x.floor())
    }

    /// The smallest integer not below each element (`torch.ceil`); zero
    /// gradient.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![-1.5, 0.5, 2.0], &[3]);
    /// assert_eq!(t.ceil().to_vec(), vec![-1.0, 1.0, 2.0]);
    /// ```
    pub fn ceil(&self) -> Self {
        self.stepwise("ceil", |x| x.ceil())
    }

    /// The nearest integer, halves to even (`torch.round`, as IEEE
    /// `roundeven`: `0.5 -> 0`, `1.5 -> 2`, `2.5 -> 2`); zero gradient.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![0.5, 1.5, 2.5, -0.5, -1.7], &[5]);
    /// assert_eq!(t.round().to_vec(), vec![0.0, 2.0, 2.0, -0.0, -2.0]);
    /// ```
    pub fn round(&self) -> Self {
        self.stepwise("round", |x| {
            let r = x.round();
            // `round` takes halves away from zero; step back to the even one.
            if (x - x.trunc()).abs() == E::from_f64(0.5)
                && (r / E::from_f64(2.0)).fract() != E::zero()
            {
                r - x.signum()
            } else {
                r
            }
        })
    }

    /// The integer part, rounding toward zero (`torch.trunc`); zero
    /// gradient.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![-1.5, 0.5, 2.7], &[3]);
    /// assert_eq!(t.trunc().to_vec(), vec![-1.0, 0.0, 2.0]);
    /// ```
    pub fn trunc(&self) -> Self {
        self.stepwise("trunc", |x| x.trunc())
    }

    /// Which elements are NaN (`torch.isnan`), detached.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![f32::NAN, 1.0, f32::INFINITY], &[3]);
    /// assert_eq!(t.isnan().to_vec(), vec![true, false, false]);
    /// ```
    pub fn isnan(&self) -> Tensor<bool, D> {
        self.classify(|x| x.is_nan())
    }

    /// Which elements are infinite, of either sign (`torch.isinf`),
    /// detached.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![f32::NAN, 1.0, f32::NEG_INFINITY], &[3]);
    /// assert_eq!(t.isinf().to_vec(), vec![false, false, true]);
    /// ```
    pub fn isinf(&self) -> Tensor<bool, D> {
        self.classify(|x| x.is_infinite())
    }

    /// Which elements are neither NaN nor infinite (`torch.isfinite`),
    /// detached.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![f32::NAN, 1.0, f32::INFINITY], &[3]);
    /// assert_eq!(t.isfinite().to_vec(), vec![false, true, false]);
    /// ```
    pub fn isfinite(&self) -> Tensor<bool, D> {
        self.classify(|x| x.is_finite())
    }

    fn classify(&self, f: impl Fn(E) -> bool + Sync) -> Tensor<bool, D> {
        Tensor::from_parts(D::map(self.as_slice(), f), self.shape.clone(), None)
    }

    /// Replaces NaN by `nan`, `+inf` by `posinf` and `-inf` by `neginf`
    /// (`torch.nan_to_num(input, nan, posinf, neginf)`; `None` means the
    /// element type's largest / lowest finite value, PyTorch's default).
    /// The gradient passes where the input is finite and is zero at the
    /// replaced elements.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![f32::NAN, 1.0, f32::INFINITY, f32::NEG_INFINITY], &[4]);
    /// assert_eq!(t.nan_to_num(0.0, Some(9.0), None).to_vec(), vec![0.0, 1.0, 9.0, f32::MIN]);
    /// ```
    pub fn nan_to_num(&self, nan: f64, posinf: Option<f64>, neginf: Option<f64>) -> Self {
        let nan = E::from_f64(nan);
        let pos = posinf.map_or(E::max_value(), E::from_f64);
        let neg = neginf.map_or(E::min_value(), E::from_f64);
        let y = self.map(|x| {
            if x.is_nan() {
                nan
            } else if x == E::infinity() {
                pos
            } else if x == E::neg_infinity() {
                neg
            } else {
                x
            }
        });
        let replaced = self.isfinite().logical_not();
        y.record("nan_to_num", vec![self.clone()], move |ctx| {
            vec![Some(ctx.grad.masked_fill(&replaced, 0.0))]
        })
    }
}
