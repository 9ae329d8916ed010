//! The state an optimizer keeps for one parameter.

use crate::tensor::{numel, Element, Tensor};
use crate::{ForgeError, Result};
use serde::{Deserialize, Serialize};

/// The optimizer state of one parameter: its step count, the shape it was
/// created for, and named buffers of the parameter's size (PyTorch's state
/// keys: `momentum_buffer`, `exp_avg`, `exp_avg_sq`, `max_exp_avg_sq`,
/// `sum`, `square_avg`, `acc_delta`, `grad_avg`).
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
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamState<E> {
    pub(crate) step: u64,
    pub(crate) shape: Vec<usize>,
    pub(crate) buffers: Vec<(String, Vec<E>)>,
}

impl<E: Element> ParamState<E> {
    /// Fresh state for a parameter of `shape`, with the given buffers
    /// filled with their initial values.
    pub(crate) fn new(shape: &[usize], buffers: &[(&str, f64)]) -> Self {
        let n = numel(shape);
        ParamState {
            step: 0,
            shape: shape.to_vec(),
            buffers: buffers
                .iter()
                .map(|(name, v)| (name.to_string(), vec![E::from_f64(*v); n]))
                .collect(),
        }
    }

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
    pub fn buffer_names(&self) -> Vec<&str> {
        self.buffers.iter().map(|(n, _)| n.as_str()).collect()
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
    pub fn buffer(&self, name: &str) -> Option<Tensor<E>> {
        self.buffers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| Tensor::from_vec(v.clone(), &self.shape))
    }

    /// Checks internal consistency (every buffer has the shape's size):
    /// state read from a file is checked before use.
    pub(crate) fn validate(&self, path: &str) -> Result<()> {
        let n = checked_numel(&self.shape).ok_or_else(|| {
            ForgeError::State(format!("{path}: shape {:?} overflows", self.shape))
        })?;
        for (name, v) in &self.buffers {
            if v.len() != n {
                return Err(ForgeError::State(format!(
                    "{path}: buffer {name} has {} values, shape {:?} needs {n}",
                    v.len(),
                    self.shape
                )));
            }
        }
        Ok(())
    }

    /// Makes the buffer list exactly `wanted` (creating missing buffers with
    /// their initial values), or fails if the state has buffers the rule
    /// does not know.
    /// Fails if the state has buffers the rule does not keep.
    pub(crate) fn check_buffers(&self, path: &str, wanted: &[(&str, f64)]) -> Result<()> {
        match self
            .buffers
            .iter()
            .find(|(n, _)| !wanted.iter().any(|(w, _)| w == n))
        {
            Some((extra, _)) => Err(ForgeError::State(format!(
                "{path}: state buffer {extra} is not used by this optimizer (it keeps {:?})",
                wanted.iter().map(|(w, _)| *w).collect::<Vec<_>>()
            ))),
            None => Ok(()),
        }
    }

    /// Makes the buffer list exactly `wanted` (creating missing buffers with
    /// their initial values), or fails if the state has buffers the rule
    /// does not know.
    pub(crate) fn conform(&mut self, path: &str, wanted: &[(&str, f64)]) -> Result<()> {
        self.check_buffers(path, wanted)?;
        let n = numel(&self.shape);
        let mut out = Vec::with_capacity(wanted.len());
        for (w, init) in wanted {
            match self.buffers.iter().position(|(n, _)| n == w) {
                Some(i) => out.push(std::mem::take(&mut self.buffers[i])),
                None => out.push((w.to_string(), vec![E::from_f64(*init); n])),
            }
        }
        self.buffers = out;
        Ok(())
    }
}

/// The product of a shape, or `None` on overflow.
pub(crate) fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}
