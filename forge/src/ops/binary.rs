//! Binary elementwise ops with NumPy/PyTorch broadcasting, their operator
//! overloads, and scalar forms.

use crate::tensor::{broadcast_shapes, Device, Element, Float, Tensor};
use std::ops::{Add, Div, Mul, Neg, Sub};

impl<E: Element, D: Device> Tensor<E, D> {
    /// `f` applied elementwise to `self` and `other` broadcast together
    /// (NumPy/PyTorch rules), with no recording: the loop behind every
    /// binary op, comparison and logical op.
    ///
    /// # Panics
    /// When the shapes cannot be broadcast together (the message names `op`).
    #[track_caller]
    pub(crate) fn broadcast_op<O: Element>(
        &self,
        other: &Self,
        op: &str,
        f: impl Fn(E, E) -> O + Sync,
    ) -> Tensor<O, D> {
        // No closure around the panic: it would hide the caller's line.
        let Some(shape) = broadcast_shapes(self.shape(), other.shape()) else {
            shape_panic!(
                "{op}: shapes {:?} and {:?} cannot be broadcast together",
                self.shape(),
                other.shape()
            )
        };
        let data = D::zip_broadcast(
            self.as_slice(),
            self.shape(),
            other.as_slice(),
            other.shape(),
            &shape,
            f,
        );
        Tensor::from_parts(data, shape.into(), None)
    }
}

impl<E: Float, D: Device> Tensor<E, D> {
    /// Elementwise `self + other` with broadcasting. Also available as `+`.
    ///
    /// # Panics
    /// When the shapes cannot be broadcast together.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<f32>::from_vec(vec![1.0, 2.0], &[2, 1]);
    /// let b = Tensor::<f32>::from_vec(vec![10.0, 20.0], &[2]);
    /// assert_eq!(a.add(&b).to_vec(), vec![11.0, 21.0, 12.0, 22.0]);
    /// ```
    #[track_caller]
    pub fn add(&self, other: &Self) -> Self {
        self.broadcast_op(other, "add", |a, b| a + b).record(
            "add",
            vec![self.clone(), other.clone()],
            |ctx| {
                let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
                vec![
                    ctx.needs(0).then(|| ctx.grad.sum_to(a.shape())),
                    ctx.needs(1).then(|| ctx.grad.sum_to(b.shape())),
                ]
            },
        )
    }

    /// Elementwise `self - other` with broadcasting. Also available as `-`.
    ///
    /// # Panics
    /// When the shapes cannot be broadcast together.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<f32>::from_vec(vec![5.0, 7.0], &[2]);
    /// assert_eq!(a.sub(&Tensor::scalar(1.0)).to_vec(), vec![4.0, 6.0]);
    /// ```
    #[track_caller]
    pub fn sub(&self, other: &Self) -> Self {
        self.broadcast_op(other, "sub", |a, b| a - b).record(
            "sub",
            vec![self.clone(), other.clone()],
            |ctx| {
                let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
                vec![
                    ctx.needs(0).then(|| ctx.grad.sum_to(a.shape())),
                    ctx.needs(1).then(|| ctx.grad.neg().sum_to(b.shape())),
                ]
            },
        )
    }

    /// Elementwise `self * other` with broadcasting. Also available as `*`.
    ///
    /// # Panics
    /// When the shapes cannot be broadcast together.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<f32>::from_vec(vec![2.0, 3.0], &[2]);
    /// assert_eq!(a.mul(&a).to_vec(), vec![4.0, 9.0]);
    /// ```
    #[track_caller]
    pub fn mul(&self, other: &Self) -> Self {
        self.broadcast_op(other, "mul", |a, b| a * b).record(
            "mul",
            vec![self.clone(), other.clone()],
            |ctx| {
                let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
                vec![
                    ctx.needs(0).then(|| ctx.grad.mul(b).sum_to(a.shape())),
                    ctx.needs(1).then(|| ctx.grad.mul(a).sum_to(b.shape())),
                ]
            },
        )
    }

    /// Elementwise `self / other` with broadcasting. Also available as `/`.
    ///
    /// # Panics
    /// When the shapes cannot be broadcast together.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<f32>::from_vec(vec![2.0, 3.0], &[2]);
    /// assert_eq!(a.div(&Tensor::scalar(2.0)).to_vec(), vec![1.0, 1.5]);
    /// ```
    #[track_caller]
    pub fn div(&self, other: &Self) -> Self {
        self.broadcast_op(other, "div", |a, b| a / b).record(
            "div",
            vec![self.clone(), other.clone()],
            |ctx| {
                let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
                vec![
                    ctx.needs(0).then(|| ctx.grad.div(b).sum_to(a.shape())),
                    // d(a/b)/db = -a / b^2
                    ctx.needs(1)
                        .then(|| ctx.grad.mul(a).div(&b.mul(b)).neg().sum_to(b.shape())),
                ]
            },
        )
    }

    /// Elementwise `self ^ other` with broadcasting (`torch.pow`).
    ///
    /// The gradient with respect to the exponent uses `ln(self)`, defined
    /// for positive bases.
    ///
    /// # Panics
    /// When the shapes cannot be broadcast together.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<f64>::from_vec(vec![2.0, 3.0], &[2]);
    /// assert_eq!(a.pow(&Tensor::scalar(2.0)).to_vec(), vec![4.0, 9.0]);
    /// ```
    #[track_caller]
    pub fn pow(&self, other: &Self) -> Self {
        self.broadcast_op(other, "pow", |a, b| a.powf(b)).record(
            "pow",
            vec![self.clone(), other.clone()],
            |ctx| {
                let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
                vec![
                    // d/da a^b = b a^(b-1)
                    ctx.needs(0).then(|| {
                        ctx.grad
                            .mul(&b.mul(&a.pow(&b.sub_scalar(E::one()))))
                            .sum_to(a.shape())
                    }),
                    // d/db a^b = a^b ln a
                    ctx.needs(1)
                        .then(|| ctx.grad.mul(&a.pow(b).mul(&a.log())).sum_to(b.shape())),
                ]
            },
        )
    }

    /// Elementwise maximum with broadcasting (`torch.maximum`). The gradient
    /// goes to the larger operand; on a tie it is split equally, as PyTorch
    /// does.
    ///
    /// # Panics
    /// When the shapes cannot be broadcast together.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<f32>::from_vec(vec![1.0, 5.0], &[2]);
    /// assert_eq!(a.maximum(&Tensor::scalar(2.0)).to_vec(), vec![2.0, 5.0]);
    /// ```
    #[track_caller]
    pub fn maximum(&self, other: &Self) -> Self {
        self.broadcast_op(other, "maximum", |a, b| if a >= b { a } else { b })
            .record("maximum", vec![self.clone(), other.clone()], |ctx| {
                select_grads(ctx, |a, b| a > b)
            })
    }

    /// Elementwise minimum with broadcasting (`torch.minimum`). The gradient
    /// goes to the smaller operand; on a tie it is split equally.
    ///
    /// # Panics
    /// When the shapes cannot be broadcast together.
    ///
    /// ```
    /// use forge::Tensor;
    /// let a = Tensor::<f32>::from_vec(vec![1.0, 5.0], &[2]);
    /// assert_eq!(a.minimum(&Tensor::scalar(2.0)).to_vec(), vec![1.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn minimum(&self, other: &Self) -> Self {
        self.broadcast_op(other, "minimum", |a, b| if a <= b { a } else { b })
            .record("minimum", vec![self.clone(), other.clone()], |ctx| {
                select_grads(ctx, |a, b| a < b)
            })
    }

    #[track_caller]
    fn scalar_map(&self, f: impl Fn(E) -> E + Sync) -> Self {
        Tensor::from_parts(D::map(self.as_slice(), f), self.shape.clone(), None)
    }

    /// `self + s` for a scalar `s`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::ones(&[2]);
    /// assert_eq!(t.add_scalar(1.0).to_vec(), vec![2.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn add_scalar(&self, s: E) -> Self {
        self.scalar_map(|x| x + s)
            .record("add_scalar", vec![self.clone()], |ctx| {
                vec![Some(ctx.grad.clone())]
            })
    }

    /// `self - s` for a scalar `s`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::ones(&[2]);
    /// assert_eq!(t.sub_scalar(1.0).to_vec(), vec![0.0, 0.0]);
    /// ```
    #[track_caller]
    pub fn sub_scalar(&self, s: E) -> Self {
        self.add_scalar(-s)
    }

    /// `s - self` for a scalar `s` (PyTorch's `rsub`).
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::ones(&[2]);
    /// assert_eq!(t.rsub_scalar(3.0).to_vec(), vec![2.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn rsub_scalar(&self, s: E) -> Self {
        self.scalar_map(|x| s - x)
            .record("rsub_scalar", vec![self.clone()], |ctx| {
                vec![Some(ctx.grad.neg())]
            })
    }

    /// `self * s` for a scalar `s`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::ones(&[2]);
    /// assert_eq!(t.mul_scalar(3.0).to_vec(), vec![3.0, 3.0]);
    /// ```
    #[track_caller]
    pub fn mul_scalar(&self, s: E) -> Self {
        self.scalar_map(|x| x * s)
            .record("mul_scalar", vec![self.clone()], move |ctx| {
                vec![Some(ctx.grad.mul_scalar(s))]
            })
    }

    /// `self / s` for a scalar `s`.
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::ones(&[2]);
    /// assert_eq!(t.div_scalar(2.0).to_vec(), vec![0.5, 0.5]);
    /// ```
    #[track_caller]
    pub fn div_scalar(&self, s: E) -> Self {
        self.scalar_map(|x| x / s)
            .record("div_scalar", vec![self.clone()], move |ctx| {
                vec![Some(ctx.grad.div_scalar(s))]
            })
    }

    /// `s / self` for a scalar `s` (PyTorch's `rdiv`).
    ///
    /// ```
    /// let t = forge::Tensor::<f32>::from_vec(vec![2.0, 4.0], &[2]);
    /// assert_eq!(t.rdiv_scalar(1.0).to_vec(), vec![0.5, 0.25]);
    /// ```
    #[track_caller]
    pub fn rdiv_scalar(&self, s: E) -> Self {
        self.scalar_map(|x| s / x)
            .record("rdiv_scalar", vec![self.clone()], move |ctx| {
                let x = &ctx.inputs[0];
                // d(s/x)/dx = -s / x^2
                vec![Some(ctx.grad.mul(&x.square().rdiv_scalar(-s)))]
            })
    }

    /// `s ^ self` for a scalar base `s > 0` (PyTorch's `rpow`).
    ///
    /// ```
    /// let t = forge::Tensor::<f64>::from_vec(vec![1.0, 3.0], &[2]);
    /// assert_eq!(t.rpow_scalar(2.0).to_vec(), vec![2.0, 8.0]);
    /// ```
    #[track_caller]
    pub fn rpow_scalar(&self, s: E) -> Self {
        self.scalar_map(|x| s.powf(x))
            .record("rpow_scalar", vec![self.clone()], move |ctx| {
                let x = &ctx.inputs[0];
                vec![Some(ctx.grad.mul(&x.rpow_scalar(s)).mul_scalar(s.ln()))]
            })
    }
}

/// Gradients of `maximum`/`minimum`: all of it to the operand that wins
/// (`wins(a, b)`), half to each on a tie.
#[track_caller]
fn select_grads<E: Float, D: Device>(
    ctx: &crate::autograd::BackwardCtx<'_, E, D>,
    wins: impl Fn(E, E) -> bool + Sync,
) -> Vec<Option<Tensor<E, D>>> {
    let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
    let half = E::from_f64(0.5);
    let w = a.broadcast_op(b, "select", |x, y| {
        if x == y {
            half
        } else if wins(x, y) {
            E::one()
        } else {
            E::zero()
        }
    });
    vec![
        ctx.needs(0).then(|| ctx.grad.mul(&w).sum_to(a.shape())),
        ctx.needs(1)
            .then(|| ctx.grad.mul(&w.rsub_scalar(E::one())).sum_to(b.shape())),
    ]
}

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $scalar:ident) => {
        impl<E: Float, D: Device> $trait<&Tensor<E, D>> for &Tensor<E, D> {
            type Output = Tensor<E, D>;
            #[track_caller]
            fn $method(self, rhs: &Tensor<E, D>) -> Tensor<E, D> {
                Tensor::$method(self, rhs)
            }
        }
        impl<E: Float, D: Device> $trait<Tensor<E, D>> for &Tensor<E, D> {
            type Output = Tensor<E, D>;
            #[track_caller]
            fn $method(self, rhs: Tensor<E, D>) -> Tensor<E, D> {
                Tensor::$method(self, &rhs)
            }
        }
        impl<E: Float, D: Device> $trait<&Tensor<E, D>> for Tensor<E, D> {
            type Output = Tensor<E, D>;
            #[track_caller]
            fn $method(self, rhs: &Tensor<E, D>) -> Tensor<E, D> {
                Tensor::$method(&self, rhs)
            }
        }
        impl<E: Float, D: Device> $trait<Tensor<E, D>> for Tensor<E, D> {
            type Output = Tensor<E, D>;
            #[track_caller]
            fn $method(self, rhs: Tensor<E, D>) -> Tensor<E, D> {
                Tensor::$method(&self, &rhs)
            }
        }
        impl<E: Float, D: Device> $trait<E> for &Tensor<E, D> {
            type Output = Tensor<E, D>;
            #[track_caller]
            fn $method(self, rhs: E) -> Tensor<E, D> {
                self.$scalar(rhs)
            }
        }
        impl<E: Float, D: Device> $trait<E> for Tensor<E, D> {
            type Output = Tensor<E, D>;
            #[track_caller]
            fn $method(self, rhs: E) -> Tensor<E, D> {
                self.$scalar(rhs)
            }
        }
    };
}

binary_operator!(Add, add, add_scalar);
binary_operator!(Sub, sub, sub_scalar);
binary_operator!(Mul, mul, mul_scalar);
binary_operator!(Div, div, div_scalar);

/// A plain number on the left of an operator: `2.0 * &t`, `1.0 - &t`.
pub trait ScalarOperand: Float {}
impl ScalarOperand for f32 {}
impl ScalarOperand for f64 {}

macro_rules! scalar_lhs {
    ($t:ty) => {
        impl<D: Device> Add<&Tensor<$t, D>> for $t {
            type Output = Tensor<$t, D>;
            #[track_caller]
            fn add(self, rhs: &Tensor<$t, D>) -> Tensor<$t, D> {
                rhs.add_scalar(self)
            }
        }
        impl<D: Device> Add<Tensor<$t, D>> for $t {
            type Output = Tensor<$t, D>;
            #[track_caller]
            fn add(self, rhs: Tensor<$t, D>) -> Tensor<$t, D> {
                rhs.add_scalar(self)
            }
        }
        impl<D: Device> Sub<&Tensor<$t, D>> for $t {
            type Output = Tensor<$t, D>;
            #[track_caller]
            fn sub(self, rhs: &Tensor<$t, D>) -> Tensor<$t, D> {
                rhs.rsub_scalar(self)
            }
        }
        impl<D: Device> Sub<Tensor<$t, D>> for $t {
            type Output = Tensor<$t, D>;
            #[track_caller]
            fn sub(self, rhs: Tensor<$t, D>) -> Tensor<$t, D> {
                rhs.rsub_scalar(self)
            }
        }
        impl<D: Device> Mul<&Tensor<$t, D>> for $t {
            type Output = Tensor<$t, D>;
            #[track_caller]
            fn mul(self, rhs: &Tensor<$t, D>) -> Tensor<$t, D> {
                rhs.mul_scalar(self)
            }
        }
        impl<D: Device> Mul<Tensor<$t, D>> for $t {
            type Output = Tensor<$t, D>;
            #[track_caller]
            fn mul(self, rhs: Tensor<$t, D>) -> Tensor<$t, D> {
                rhs.mul_scalar(self)
            }
        }
        impl<D: Device> Div<&Tensor<$t, D>> for $t {
            type Output = Tensor<$t, D>;
            #[track_caller]
            fn div(self, rhs: &Tensor<$t, D>) -> Tensor<$t, D> {
                rhs.rdiv_scalar(self)
            }
        }
        impl<D: Device> Div<Tensor<$t, D>> for $t {
            type Output = Tensor<$t, D>;
            #[track_caller]
            fn div(self, rhs: Tensor<$t, D>) -> Tensor<$t, D> {
                rhs.rdiv_scalar(self)
            }
        }
    };
}

scalar_lhs!(f32);
scalar_lhs!(f64);

impl<E: Float, D: Device> Neg for &Tensor<E, D> {
    type Output = Tensor<E, D>;
    #[track_caller]
    fn neg(self) -> Tensor<E, D> {
        Tensor::neg(self)
    }
}

impl<E: Float, D: Device> Neg for Tensor<E, D> {
    type Output = Tensor<E, D>;
    #[track_caller]
    fn neg(self) -> Tensor<E, D> {
        Tensor::neg(&self)
    }
}
