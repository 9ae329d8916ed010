//! Stepping a model: [`Optimizer::step`] visits a [`Layer`]'s trainable
//! weights by path, [`Optimizer::backward_step`] takes the loss, frees its
//! graph and steps; [`Optimizer::check_compatible`] checks saved state
//! against a model.

use super::optimizer::{GradSource, Optimizer, UpdateRule};
use crate::autograd::Gradients;
use crate::nn::{Layer, TensorKind};
use crate::tensor::{Float, Tensor};
use crate::{ForgeError, Result};

impl<R: UpdateRule, E: Float> Optimizer<R, E> {
    /// One optimization step over every trainable weight of `model` (in
    /// traversal order, keyed by path), with gradients from `grads`.
    ///
    /// The optimizer never holds the model. Frozen weights are not visited,
    /// so their state is kept and used again after `unfreeze()`. Everything
    /// is checked before anything changes.
    ///
    /// # Performance
    /// A weight is updated in place only when no other tensor shares its
    /// values. A loss that is still alive holds its graph, and the graph
    /// holds every weight it read, so each weight is then copied into a new
    /// buffer first (ResNet-18's 11.7 M weights: about 3 ms more per step),
    /// and counted in
    /// [`MemoryStats::copies_on_write`](crate::runtime::MemoryStats::copies_on_write).
    /// [`backward_step`](Self::backward_step) takes the loss and frees its
    /// graph before the update, so the copy cannot happen through it.
    ///
    /// # Errors
    /// As [`step_params`](Self::step_params): [`ForgeError::State`] when a
    /// weight's shape differs from its state's (state of another model);
    /// [`ForgeError::NonFinite`] for a NaN or infinite gradient when
    /// [`error_if_nonfinite`](Self::error_if_nonfinite) is on.
    ///
    /// ```
    /// use forge::optim::Sgd;
    /// use forge::prelude::*;
    /// let mut fc = Linear::<f64>::from_weights(Tensor::ones(&[1, 2]).requires_grad(), None).unwrap();
    /// let grads = fc.forward(Tensor::from_vec(vec![1.0, 2.0], &[1, 2])).sum().backward();
    /// let mut opt = Sgd::new(0.5);
    /// opt.step(&mut fc, &grads).unwrap();
    /// assert_eq!(fc.weight.to_vec(), vec![0.5, 0.0]);
    /// assert!(opt.state("weight").is_some());
    /// ```
    pub fn step<L, G>(&mut self, model: &mut L, grads: &G) -> Result<()>
    where
        L: Layer<E> + ?Sized,
        G: GradSource<E> + ?Sized,
    {
        self.validate_settings()?;
        let mut err = None;
        model.for_each_parameter_mut(&mut |path, p| {
            if err.is_none()
                && let Err(e) = self.check_param(path, p, grads.grad_of(path, p))
            {
                err = Some(e);
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        model.for_each_parameter_mut(&mut |path, p| {
            if err.is_none()
                && let Some(g) = grads.grad_of(path, p).cloned()
                && let Err(e) = self.update_param(path, p, &g)
            {
                err = Some(e);
            }
        });
        err.map_or(Ok(()), Err)
    }

    /// The training step in one call: the gradients of `loss` for `model`'s
    /// weights ([`Layer::loss_gradients`], `loss.backward()` unless the model
    /// wraps it), then `loss` and its graph dropped, then
    /// [`step`](Self::step). Returns the loss's value.
    ///
    /// Taking the loss by value is the point: the graph holds every weight
    /// it read, and a weight something else shares cannot be updated in
    /// place (see [`step`](Self::step)). Other tensors of the forward pass
    /// kept alive across the call (the logits, say) hold the graph too:
    /// drop them or let them go out of scope before it.
    ///
    /// # Errors
    /// As [`step`](Self::step), and what the model's
    /// [`loss_gradients`](Layer::loss_gradients) reports.
    ///
    /// # Panics
    /// When `loss` is not a single value.
    ///
    /// ```
    /// use forge::optim::Sgd;
    /// use forge::prelude::*;
    /// let mut fc = Linear::<f64>::from_weights(Tensor::ones(&[1, 2]).requires_grad(), None).unwrap();
    /// let mut opt = Sgd::new(0.5);
    /// let loss = fc.forward(Tensor::from_vec(vec![1.0, 2.0], &[1, 2])).sum();
    /// let value = opt.backward_step(&mut fc, loss).unwrap();
    /// assert_eq!(value, 3.0);
    /// assert_eq!(fc.weight.to_vec(), vec![0.5, 0.0]);
    /// ```
    pub fn backward_step<L>(&mut self, model: &mut L, loss: Tensor<E>) -> Result<E>
    where
        L: Layer<E> + ?Sized,
    {
        self.backward_step_with(model, loss, |_| {})
    }

    /// [`backward_step`](Self::backward_step) with a look at the gradients
    /// between the backward pass and the update: `prepare` runs after the
    /// loss and its graph are dropped and may change them (clipping,
    /// logging their norm). Returns the loss's value.
    ///
    /// # Errors
    /// As [`backward_step`](Self::backward_step).
    ///
    /// # Panics
    /// When `loss` is not a single value.
    ///
    /// ```
    /// use forge::optim::{clip_grad_norm, Sgd};
    /// use forge::prelude::*;
    /// let mut fc = Linear::<f64>::from_weights(Tensor::ones(&[1, 2]).requires_grad(), None).unwrap();
    /// let mut opt = Sgd::new(1.0);
    /// let loss = fc.forward(Tensor::from_vec(vec![3.0, 4.0], &[1, 2])).sum();
    /// let mut norm = 0.0;
    /// opt.backward_step_with(&mut fc, loss, |g| norm = clip_grad_norm(g, 1.0)).unwrap();
    /// assert_eq!(norm, 5.0); // the gradient (3, 4) before clipping
    /// // clipped to norm 1 (PyTorch's 1e-6 margin below it): w = 1 - (0.6, 0.8)
    /// let w = fc.weight.to_vec();
    /// assert!((w[0] - 0.4).abs() < 1e-6 && (w[1] - 0.2).abs() < 1e-6);
    /// ```
    pub fn backward_step_with<L, F>(
        &mut self,
        model: &mut L,
        loss: Tensor<E>,
        prepare: F,
    ) -> Result<E>
    where
        L: Layer<E> + ?Sized,
        F: FnOnce(&mut Gradients<E>),
    {
        let value = loss.item();
        let mut grads = model.loss_gradients(&loss)?;
        drop(loss);
        prepare(&mut grads);
        self.step(model, &grads).map(|()| value)
    }

    /// Checks that every parameter with state exists in `model` as a weight
    /// (trainable or frozen) of the same shape: use it after loading state
    /// saved for a model, before training.
    ///
    /// # Errors
    /// [`ForgeError::State`] listing every path the model lacks and every
    /// shape that differs.
    ///
    /// ```
    /// use forge::optim::Sgd;
    /// use forge::prelude::*;
    /// let mut rng = Rng::new(0);
    /// let mut a = Linear::<f64>::new(2, 3, &mut rng);
    /// let grads = a.forward(Tensor::ones(&[1, 2])).sum().backward();
    /// let mut opt = Sgd::new(0.1).momentum(0.9);
    /// opt.step(&mut a, &grads).unwrap();
    /// assert!(opt.check_compatible(&a).is_ok());
    /// let b = Linear::<f64>::new(2, 4, &mut rng);
    /// let e = opt.check_compatible(&b).unwrap_err();
    /// assert!(e.to_string().contains("weight"));
    /// ```
    pub fn check_compatible<L: Layer<E> + ?Sized>(&self, model: &L) -> Result<()> {
        let weights: std::collections::BTreeMap<String, Vec<usize>> = model
            .named_tensors()
            .into_iter()
            .filter(|(_, _, k)| *k == TensorKind::Weight)
            .map(|(p, t, _)| (p, t.shape().to_vec()))
            .collect();
        let mut problems = Vec::new();
        for (path, s) in &self.state {
            match weights.get(path) {
                None => problems.push(format!("{path}: no such weight in the model")),
                Some(shape) if shape != &s.shape => problems.push(format!(
                    "{path}: state for shape {:?}, the model has {:?}",
                    s.shape, shape
                )),
                Some(_) => {}
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ForgeError::state(
                "",
                format!(
                    "optimizer state does not fit the model: {}",
                    problems.join("; ")
                ),
            ))
        }
    }
}
