//! Setting one parameter's optimizer state from tensors: how state trained
//! elsewhere (a PyTorch `optimizer.state_dict()` exported by name, for
//! instance) is taken over.

use super::optimizer::{Optimizer, UpdateRule};
use super::state::{checked_numel, ParamState, MAX_STEP};
use crate::tensor::{Float, Tensor};
use crate::{ForgeError, Result};

impl<R: UpdateRule, E: Float> Optimizer<R, E> {
    /// Replaces the state of the parameter at `path` by `step` steps taken
    /// and the given buffers (PyTorch's names: `exp_avg`, `exp_avg_sq`,
    /// `momentum_buffer`, ...). The next step of that parameter is step
    /// `step + 1`. Buffers the rule keeps but `buffers` omits start at the
    /// rule's initial value; the parameter's shape is taken from the
    /// buffers (and checked against the parameter at the next step).
    ///
    /// # Errors
    /// [`ForgeError::State`] when a buffer is not one this rule keeps, is
    /// given twice, holds a non-finite value (or a negative one in a buffer
    /// of squares), the buffers' shapes differ, or `step` is 2^53 or more;
    /// nothing is changed then.
    ///
    /// ```
    /// use forge::optim::AdamW;
    /// use forge::Tensor;
    /// let mut opt = AdamW::<f64>::new(1e-3);
    /// let m = Tensor::from_vec(vec![0.1, 0.2], &[2]);
    /// let v = Tensor::from_vec(vec![0.01, 0.04], &[2]);
    /// opt.set_state("w", 400, &[("exp_avg", m), ("exp_avg_sq", v)]).unwrap();
    /// assert_eq!(opt.state("w").unwrap().step(), 400);
    /// assert_eq!(opt.state("w").unwrap().buffer("exp_avg_sq").unwrap().to_vec(), vec![0.01, 0.04]);
    /// assert!(opt.set_state("w", 1, &[("momentum_buffer", Tensor::zeros(&[2]))]).is_err());
    /// ```
    pub fn set_state(
        &mut self,
        path: &str,
        step: u64,
        buffers: &[(&str, Tensor<E>)],
    ) -> Result<()> {
        let Some((_, first)) = buffers.first() else {
            return Err(ForgeError::state(
                path.to_string(),
                "set_state needs at least one buffer to know the parameter's shape",
            ));
        };
        let shape = first.shape().to_vec();
        for (name, t) in buffers {
            if t.shape() != shape.as_slice() {
                return Err(ForgeError::state(
                    path.to_string(),
                    format!(
                        "buffer {name} has shape {:?}, the first buffer {:?}",
                        t.shape(),
                        shape
                    ),
                ));
            }
        }
        let named = buffers
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_vec()))
            .collect();
        let state = self.checked_state(path, step, shape, named)?;
        self.state.insert(path.to_string(), state);
        Ok(())
    }

    /// Builds one parameter's state from named buffers, refusing anything
    /// that could not be used safely: a name the rule does not keep or
    /// given twice, a length that does not match the shape, a non-finite
    /// value, a negative value in a buffer of squares, a step counter that
    /// cannot advance. Every error names the path, the field and the value.
    pub(crate) fn checked_state(
        &self,
        path: &str,
        step: u64,
        shape: Vec<usize>,
        buffers: Vec<(String, Vec<E>)>,
    ) -> Result<ParamState<R::State<E>>> {
        let n = checked_numel(&shape).ok_or_else(|| {
            ForgeError::state(
                path.to_string(),
                format!("shape {shape:?} has more elements than memory can address"),
            )
        })?;
        if step >= MAX_STEP {
            return Err(ForgeError::state(
                path.to_string(),
                format!(
                    "step = {step} is beyond the largest step count forge takes ({})",
                    MAX_STEP - 1
                ),
            ));
        }
        for (i, (name, values)) in buffers.iter().enumerate() {
            if !R::BUFFERS.contains(&name.as_str()) {
                return Err(ForgeError::state(
                    path.to_string(),
                    format!(
                        "state buffer {name} is not used by {} (it keeps {:?})",
                        R::NAME,
                        R::BUFFERS
                    ),
                ));
            }
            if buffers[..i].iter().any(|(m, _)| m == name) {
                return Err(ForgeError::state(
                    path.to_string(),
                    format!("buffer {name} given twice"),
                ));
            }
            if values.len() != n {
                return Err(ForgeError::state(
                    path.to_string(),
                    format!(
                        "buffer {name} has {} values, shape {shape:?} needs {n}",
                        values.len()
                    ),
                ));
            }
            let squares = NON_NEGATIVE_BUFFERS.contains(&name.as_str());
            if let Some((j, v)) = values
                .iter()
                .enumerate()
                .find(|(_, v)| !v.is_finite() || (squares && **v < E::zero()))
            {
                let rule = if squares {
                    "finite and >= 0 (it averages squares)"
                } else {
                    "finite"
                };
                return Err(ForgeError::state(
                    path.to_string(),
                    format!("{name}[{j}] = {v} must be {rule}"),
                ));
            }
        }
        Ok(ParamState {
            step,
            shape,
            buffers: self.rule.state_from_buffers(n, buffers),
        })
    }
}

/// Buffers of squares (or their sums), which are never negative.
const NON_NEGATIVE_BUFFERS: &[&str] = &[
    "exp_avg_sq",
    "max_exp_avg_sq",
    "sum",
    "square_avg",
    "acc_delta",
];

#[cfg(test)]
mod tests {
    use crate::optim::{AdamW, Sgd};
    use crate::Tensor;
    use std::collections::BTreeMap;

    #[test]
    fn a_step_from_set_state_equals_the_uninterrupted_step() {
        let g1 = BTreeMap::from([(
            "w".to_string(),
            Tensor::<f64>::from_vec(vec![0.3, -1.2, 0.5], &[3]),
        )]);
        let g2 = BTreeMap::from([(
            "w".to_string(),
            Tensor::<f64>::from_vec(vec![-0.1, 0.4, 2.0], &[3]),
        )]);
        let mut w = Tensor::<f64>::from_vec(vec![1.0, 2.0, -3.0], &[3]).requires_grad();
        let mut a = AdamW::<f64>::new(0.01).betas(0.9, 0.95);
        a.step_params([("w", &mut w)], &g1).unwrap();
        let s = a.state("w").unwrap().clone();
        let mut resumed = w.clone();
        a.step_params([("w", &mut w)], &g2).unwrap();

        let mut b = AdamW::<f64>::new(0.01).betas(0.9, 0.95);
        let bufs: Vec<(&str, Tensor<f64>)> = s
            .buffer_names()
            .into_iter()
            .map(|n| (n, s.buffer(n).unwrap()))
            .collect();
        b.set_state("w", s.step(), &bufs).unwrap();
        b.step_params([("w", &mut resumed)], &g2).unwrap();
        assert_eq!(resumed.to_vec(), w.to_vec());
        assert_eq!(b.state("w").unwrap().step(), 2);
    }

    #[test]
    fn bad_buffers_are_refused_and_change_nothing() {
        let mut o = AdamW::<f32>::new(0.1);
        let z = |n: usize| Tensor::<f32>::zeros(&[n]);
        assert!(o.set_state("w", 1, &[]).is_err());
        assert!(o
            .set_state("w", 1, &[("exp_avg", z(2)), ("exp_avg", z(2))])
            .is_err());
        assert!(o
            .set_state("w", 1, &[("exp_avg", z(2)), ("exp_avg_sq", z(3))])
            .is_err());
        assert!(o.state("w").is_none());
        // A buffer left out starts at the rule's initial value.
        o.set_state("w", 5, &[("exp_avg", z(2))]).unwrap();
        assert_eq!(
            o.state("w").unwrap().buffer("exp_avg_sq").unwrap().to_vec(),
            vec![0.0, 0.0]
        );
        let mut sgd = Sgd::<f32>::new(0.1).momentum(0.9);
        assert!(sgd.set_state("w", 1, &[("exp_avg", z(2))]).is_err());
        sgd.set_state("w", 1, &[("momentum_buffer", z(2))]).unwrap();
    }
}
