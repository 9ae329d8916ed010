//! More activation functions, as `torch.nn.functional`: `hardswish`,
//! `hardsigmoid`, `relu6`, `hardtanh`, `prelu`, `selu`, `celu`, `glu`,
//! `softsign` (`log_sigmoid` is in `softmax.rs`).
//!
//! The piecewise ones are one parallel elementwise pass forward and one
//! backward, with a constant mask (or, for `hardswish`, a gradient written
//! in tensor ops so it is differentiable again); the others compose
//! differentiable ops (`elu`, `sigmoid`, `abs`), so every order of
//! gradient works.

use crate::tensor::{Device, Float, Tensor};

/// SELU's `alpha` (PyTorch's constant).
pub const SELU_ALPHA: f64 = 1.673_263_242_354_377_3;
/// SELU's `scale` (PyTorch's constant).
pub const SELU_SCALE: f64 = 1.050_700_987_355_480_5;

impl<E: Float, D: Device> Tensor<E, D> {
    /// A boolean mask `f(x)` of the input, computed raw (constant: its
    /// derivative is zero almost everywhere).
    fn mask_where(&self, f: impl Fn(E) -> bool + Sync) -> Tensor<bool, D> {
        Tensor::from_parts(D::map(self.as_slice(), f), self.shape.clone(), None)
    }

    /// `min(max(x, min_val), max_val)` (`F.hardtanh(x, min_val, max_val)`;
    /// PyTorch's defaults are -1 and 1). The gradient passes strictly
    /// inside `(min_val, max_val)`, as PyTorch's.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![-2.0, 0.5, 3.0], &[3]);
    /// assert_eq!(t.hardtanh(-1.0, 1.0).to_vec(), vec![-1.0, 0.5, 1.0]);
    /// ```
    pub fn hardtanh(&self, min_val: f64, max_val: f64) -> Self {
        let (lo, hi) = (E::from_f64(min_val), E::from_f64(max_val));
        let outside = self.mask_where(move |x| !(x > lo && x < hi));
        self.map(move |x| {
            if x < lo {
                lo
            } else if x > hi {
                hi
            } else {
                x
            }
        })
        .record("hardtanh", vec![self.clone()], move |ctx| {
            vec![Some(ctx.grad.masked_fill(&outside, 0.0))]
        })
    }

    /// `min(max(x, 0), 6)` (`F.relu6`).
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![-2.0, 0.5, 7.0], &[3]);
    /// assert_eq!(t.relu6().to_vec(), vec![0.0, 0.5, 6.0]);
    /// ```
    pub fn relu6(&self) -> Self {
        self.hardtanh(0.0, 6.0)
    }

    /// `relu6(x + 3) / 6` (`F.hardsigmoid`); gradient 1/6 strictly
    /// inside `(-3, 3)`, 0 outside (the float32 value of 1/6 in every
    /// element type, as PyTorch's kernel).
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![-4.0, 0.0, 4.0], &[3]);
    /// assert_eq!(t.hardsigmoid().to_vec(), vec![0.0, 0.5, 1.0]);
    /// ```
    pub fn hardsigmoid(&self) -> Self {
        let (three, six) = (E::from_f64(3.0), E::from_f64(6.0));
        let outside = self.mask_where(move |x| !(x > -three && x < three));
        self.map(move |x| (x + three).max(E::zero()).min(six) / six)
            .record("hardsigmoid", vec![self.clone()], move |ctx| {
                // PyTorch's slope is the float32 1/6 in every precision.
                let sixth = E::from_f64(f64::from(1.0f32 / 6.0f32));
                vec![Some(ctx.grad.mul_scalar(sixth).masked_fill(&outside, 0.0))]
            })
    }

    /// `x * relu6(x + 3) / 6` (`F.hardswish`); gradient 0 below -3,
    /// `x / 3 + 1/2` on `[-3, 3]`, 1 above 3 (PyTorch's).
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![-4.0, 1.0, 4.0], &[3]);
    /// assert_eq!(t.hardswish().to_vec(), vec![0.0, 4.0 / 6.0, 4.0]);
    /// ```
    pub fn hardswish(&self) -> Self {
        let (three, six) = (E::from_f64(3.0), E::from_f64(6.0));
        self.map(move |x| x * (x + three).max(E::zero()).min(six) / six)
            .record("hardswish", vec![self.clone()], move |ctx| {
                let x = &ctx.inputs[0];
                let middle = x.mask_where(move |v| v >= -three && v <= three);
                let above = Tensor::from_parts(
                    D::map(
                        x.as_slice(),
                        move |v| if v > three { E::one() } else { E::zero() },
                    ),
                    x.shape.clone(),
                    None,
                );
                let slope = x.div_scalar(E::from_f64(3.0)).add_scalar(E::from_f64(0.5));
                vec![Some(
                    ctx.grad.mul(&Tensor::where_cond(&middle, &slope, &above)),
                )]
            })
    }

    /// `x` where positive, `weight * x` elsewhere (`F.prelu(input,
    /// weight)`): `weight` holds one slope, or one per channel (dimension
    /// 1 of the input). Differentiable in both.
    ///
    /// # Panics
    /// When `weight` is neither 1 element nor one per channel.
    ///
    /// ```
    /// use forge::Tensor;
    /// let x = Tensor::<f32>::from_vec(vec![-1.0, 2.0, -3.0, 4.0], &[1, 2, 2]);
    /// let w = Tensor::from_vec(vec![0.5, 0.1], &[2]);
    /// assert_eq!(x.prelu(&w).to_vec(), vec![-0.5, 2.0, -0.3, 4.0]);
    /// ```
    #[track_caller]
    pub fn prelu(&self, weight: &Self) -> Self {
        let n = weight.numel();
        let w = if n == 1 {
            weight.view(&[1])
        } else {
            shape_assert!(
                self.rank() >= 2 && self.shape()[1] == n,
                "prelu: weight of shape {:?} for input of shape {:?} (need 1 or one per channel, dimension 1)",
                weight.shape(),
                self.shape()
            );
            let mut shape = vec![1; self.rank()];
            shape[1] = n;
            weight.view(&shape)
        };
        self.relu().add(&self.clamp(None, Some(0.0)).mul(&w))
    }

    /// `scale * elu(x, alpha)` with PyTorch's constants
    /// ([`SELU_ALPHA`], [`SELU_SCALE`]) (`F.selu`).
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![1.0, 0.0], &[2]);
    /// assert_eq!(t.selu().to_vec(), vec![forge::ops::SELU_SCALE, 0.0]);
    /// ```
    pub fn selu(&self) -> Self {
        self.elu(SELU_ALPHA).mul_scalar(E::from_f64(SELU_SCALE))
    }

    /// `max(0, x) + min(0, alpha (exp(x / alpha) - 1))` (`F.celu(x,
    /// alpha)`, PyTorch's default alpha 1).
    ///
    /// # Panics
    /// When `alpha` is 0.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![2.0, -1.0], &[2]);
    /// let y = t.celu(2.0).to_vec();
    /// assert_eq!(y[0], 2.0);
    /// assert!((y[1] - 2.0 * ((-0.5f64).exp() - 1.0)).abs() < 1e-15);
    /// ```
    pub fn celu(&self, alpha: f64) -> Self {
        shape_assert!(alpha != 0.0, "celu: alpha must not be 0");
        self.mul_scalar(E::from_f64(1.0 / alpha))
            .elu(1.0)
            .mul_scalar(E::from_f64(alpha))
    }

    /// The gated linear unit (`F.glu(input, dim)`): the input is split in
    /// halves `a`, `b` along `dim` and the result is `a * sigmoid(b)`.
    ///
    /// # Panics
    /// When `dim` is out of range or its size is odd.
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![3.0, 0.0], &[1, 2]);
    /// assert_eq!(t.glu(-1).to_vec(), vec![1.5]);
    /// ```
    #[track_caller]
    pub fn glu(&self, dim: isize) -> Self {
        let axis = crate::base::norm_axis("glu", dim, self.rank());
        let n = self.shape()[axis];
        shape_assert!(
            n.is_multiple_of(2),
            "glu: dimension {dim} of shape {:?} has odd size {n}",
            self.shape()
        );
        let a = self.narrow(axis as isize, 0, n / 2);
        let b = self.narrow(axis as isize, n / 2, n / 2);
        a.mul(&b.sigmoid())
    }

    /// `x / (1 + |x|)` (`F.softsign`).
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![1.0, -3.0], &[2]);
    /// assert_eq!(t.softsign().to_vec(), vec![0.5, -0.75]);
    /// ```
    pub fn softsign(&self) -> Self {
        self.map(|x| x / (E::one() + x.abs()))
            .record("softsign", vec![self.clone()], |ctx| {
                let x = &ctx.inputs[0];
                vec![Some(ctx.grad.div(&x.abs().add_scalar(E::one()).square()))]
            })
    }
}
