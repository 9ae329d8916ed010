//! The state an optimizer keeps for one parameter: a step counter, the
//! shape it was created for, and the rule's typed buffers.

use crate::tensor::{Float, Tensor};
use crate::{ForgeError, Result};
use std::fmt::Debug;

/// The buffers an [`UpdateRule`](crate::optim::UpdateRule) keeps for one
/// parameter, as a typed struct (`AdamState { exp_avg, exp_avg_sq, .. }`).
///
/// Every buffer holds one value per element of the parameter. The trait
/// gives the buffers by PyTorch's names (`exp_avg`, `momentum_buffer`, ...)
/// for inspection, validation and files; the update itself uses the typed
/// fields.
///
/// ```
/// use forge::optim::{AdamState, RuleState};
/// let s = AdamState::<f32> { exp_avg: vec![0.0; 2], exp_avg_sq: vec![0.0; 2], max_exp_avg_sq: None };
/// let names: Vec<&str> = s.buffers().iter().map(|(n, _)| *n).collect();
/// assert_eq!(names, ["exp_avg", "exp_avg_sq"]);
/// ```
pub trait RuleState: Clone + Debug + PartialEq + Send + Sync {
    /// The element type of the buffers.
    type Elem: Float;
    /// The buffers the state holds now, by name, in the rule's order.
    fn buffers(&self) -> Vec<(&'static str, &[Self::Elem])>;
}

/// Takes the buffer called `name` out of a list of named buffers.
///
/// ```
/// let mut b = vec![("sum".to_string(), vec![1.0f32])];
/// assert_eq!(forge::optim::take_buffer(&mut b, "sum"), Some(vec![1.0]));
/// assert!(b.is_empty());
/// ```
pub fn take_buffer<E>(buffers: &mut Vec<(String, Vec<E>)>, name: &str) -> Option<Vec<E>> {
    let i = buffers.iter().position(|(n, _)| n == name)?;
    Some(buffers.swap_remove(i).1)
}

/// The optimizer state of one parameter: its step count, the shape it was
/// created for, and the rule's buffers `S` (PyTorch's state keys:
/// `momentum_buffer`, `exp_avg`, `exp_avg_sq`, `max_exp_avg_sq`, `sum`,
/// `square_avg`, `acc_delta`, `grad_avg`).
///
/// ```
/// use forge::optim::{Optimizer, Sgd};
/// use forge::{Gradients, Tensor};
/// let mut w = Tensor::<f64>::ones(&[2]).requires_grad();
/// let mut g = Gradients::new();
/// g.insert(&w, Tensor::full(&[2], 0.5));
/// let mut opt = Sgd::new(0.1).momentum(0.9);
/// opt.step_params(vec![("w", &mut w)], &g).unwrap();
/// let s = opt.state("w").unwrap();
/// assert_eq!((s.step(), s.shape()), (1, &[2usize][..]));
/// assert_eq!(s.buffer("momentum_buffer").unwrap().to_vec(), vec![0.5, 0.5]);
/// assert_eq!(s.rule_state().momentum_buffer.as_deref(), Some(&[0.5, 0.5][..]));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ParamState<S> {
    pub(crate) step: u64,
    pub(crate) shape: Vec<usize>,
    pub(crate) buffers: S,
}

impl<S: RuleState> ParamState<S> {
    /// How many updates this parameter has received.
    ///
    /// ```
    /// # use forge::optim::{Optimizer, Adam};
    /// # use forge::{Gradients, Tensor};
    /// # let mut w = Tensor::<f32>::ones(&[1]).requires_grad();
    /// # let mut g = Gradients::new();
    /// # g.insert(&w, Tensor::ones(&[1]));
    /// let mut opt = Adam::new(1e-3);
    /// opt.step_params(vec![("w", &mut w)], &g).unwrap();
    /// assert_eq!(opt.state("w").unwrap().step(), 1);
    /// ```
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The shape of the parameter the state belongs to.
    ///
    /// ```
    /// # use forge::optim::{Optimizer, Adam};
    /// # use forge::{Gradients, Tensor};
    /// # let mut w = Tensor::<f32>::ones(&[3]).requires_grad();
    /// # let mut g = Gradients::new();
    /// # g.insert(&w, Tensor::ones(&[3]));
    /// let mut opt = Adam::new(1e-3);
    /// opt.step_params(vec![("w", &mut w)], &g).unwrap();
    /// assert_eq!(opt.state("w").unwrap().shape(), &[3]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The rule's typed buffers.
    ///
    /// ```
    /// # use forge::optim::{Optimizer, Adagrad};
    /// # use forge::{Gradients, Tensor};
    /// # let mut w = Tensor::<f64>::ones(&[2]).requires_grad();
    /// # let mut g = Gradients::new();
    /// # g.insert(&w, Tensor::full(&[2], 2.0));
    /// let mut opt = Adagrad::new(0.1);
    /// opt.step_params(vec![("w", &mut w)], &g).unwrap();
    /// assert_eq!(opt.state("w").unwrap().rule_state().sum, vec![4.0, 4.0]);
    /// ```
    pub fn rule_state(&self) -> &S {
        &self.buffers
    }

    /// The names of the buffers, in the order the rule keeps them.
    ///
    /// ```
    /// # use forge::optim::{Optimizer, Adam};
    /// # use forge::{Gradients, Tensor};
    /// # let mut w = Tensor::<f32>::ones(&[3]).requires_grad();
    /// # let mut g = Gradients::new();
    /// # g.insert(&w, Tensor::ones(&[3]));
    /// let mut opt = Adam::new(1e-3);
    /// opt.step_params(vec![("w", &mut w)], &g).unwrap();
    /// assert_eq!(opt.state("w").unwrap().buffer_names(), vec!["exp_avg", "exp_avg_sq"]);
    /// ```
    pub fn buffer_names(&self) -> Vec<&'static str> {
        self.buffers.buffers().into_iter().map(|(n, _)| n).collect()
    }

    /// A buffer as a tensor of the parameter's shape.
    ///
    /// ```
    /// # use forge::optim::{Optimizer, Adagrad};
    /// # use forge::{Gradients, Tensor};
    /// # let mut w = Tensor::<f64>::ones(&[2]).requires_grad();
    /// # let mut g = Gradients::new();
    /// # g.insert(&w, Tensor::full(&[2], 2.0));
    /// let mut opt = Adagrad::new(0.1);
    /// opt.step_params(vec![("w", &mut w)], &g).unwrap();
    /// assert_eq!(opt.state("w").unwrap().buffer("sum").unwrap().to_vec(), vec![4.0, 4.0]);
    /// ```
    pub fn buffer(&self, name: &str) -> Option<Tensor<S::Elem>> {
        self.buffers
            .buffers()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| Tensor::from_vec(v.to_vec(), &self.shape))
    }

    /// Checks internal consistency (the shape's size does not overflow,
    /// every buffer has that many values, the step counter can still
    /// advance): state from a file or from `set_state` is checked before
    /// use.
    pub(crate) fn validate(&self, path: &str) -> Result<()> {
        let n = checked_numel(&self.shape).ok_or_else(|| {
            ForgeError::state(
                path.to_string(),
                format!(
                    "shape {:?} has more elements than memory can address",
                    self.shape
                ),
            )
        })?;
        for (name, v) in self.buffers.buffers() {
            if v.len() != n {
                return Err(ForgeError::state(
                    path.to_string(),
                    format!(
                        "buffer {name} has {} values, shape {:?} needs {n}",
                        v.len(),
                        self.shape
                    ),
                ));
            }
        }
        if self.step >= MAX_STEP {
            return Err(ForgeError::state(
                path.to_string(),
                format!(
                    "step = {} is beyond the largest step count forge takes ({})",
                    self.step,
                    MAX_STEP - 1
                ),
            ));
        }
        Ok(())
    }
}

/// Step counters stay below this (2^53): every count is exact as an `f64`
/// (bias corrections use `t as f64`), and `step + 1` never overflows.
pub(crate) const MAX_STEP: u64 = 1 << 53;

/// The product of a shape, or `None` on overflow.
pub(crate) fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}
