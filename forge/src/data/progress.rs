//! Long calls over a [`DataLoader`] that report progress and can be
//! cancelled: [`evaluate`] (evaluation and prediction) and [`fit`] (a
//! training loop).

use super::{Collate, DataLoader, Dataset};
use crate::nn::Layer;
use crate::optim::{Optimizer, UpdateRule};
use crate::runtime::Flow;
use crate::tensor::{Float, Tensor};
use crate::{ForgeError, Result};

type Batch<D> = <<D as Dataset>::Item as Collate>::Batch;

/// Leaves `loader` so that its next `iter` hands out the rest of the
/// interrupted epoch (what `set_state` does with a mid-epoch state).
fn keep_position<D: Dataset>(loader: &DataLoader<'_, D>) -> Result<()> {
    loader.set_state(loader.state())
}

fn cancelled(call: &str, done: usize, total: usize) -> ForgeError {
    ForgeError::Cancelled {
        call: call.into(),
        detail: format!("batch {done} of {total}"),
    }
}

/// Runs `f` on every batch of one epoch of `loader` without recording
/// gradients (inside [`no_grad`](crate::no_grad)), and answers what it
/// returned for each batch, in order: evaluation (a loss, a count of
/// correct answers) or prediction (the model's outputs).
///
/// After each batch, `progress(done, total)` is called (`total` batches
/// in this epoch, `done` of them finished, counting those finished before
/// a resume); answering [`Flow::Cancel`] stops before the next batch. The
/// handler runs on the calling thread, never two at once.
///
/// # Errors
/// [`ForgeError::Cancelled`] when `progress` answers `Cancel`; the loader
/// then stays where it stopped, and the next `evaluate` (or `iter`) over
/// it hands out the rest of the epoch, so a cancelled evaluation resumes
/// exactly.
///
/// ```
/// use forge::data::{evaluate, DataLoader, InMemoryDataset};
/// use forge::runtime::Flow;
/// use forge::Tensor;
/// let ds = InMemoryDataset::new(Tensor::<f32>::ones(&[10, 2]), (0..10).collect()).unwrap();
/// let loader = DataLoader::new(&ds, 4);
/// let sums = evaluate(&loader, |(x, _)| x.sum().item(), |_, _| Flow::Continue).unwrap();
/// assert_eq!(sums, [8.0, 8.0, 4.0]);
/// // Cancel after the first batch, then resume: the remaining two.
/// let err = evaluate(&loader, |(x, _)| x.dim(0), |done, _| {
///     if done == 1 { Flow::Cancel } else { Flow::Continue }
/// })
/// .unwrap_err();
/// assert_eq!(err.kind(), "cancelled");
/// let rest = evaluate(&loader, |(x, _)| x.dim(0), |_, _| Flow::Continue).unwrap();
/// assert_eq!(rest, [4, 2]);
/// ```
pub fn evaluate<D: Dataset, T>(
    loader: &DataLoader<'_, D>,
    mut f: impl FnMut(Batch<D>) -> T,
    mut progress: impl FnMut(usize, usize) -> Flow,
) -> Result<Vec<T>> {
    let _no_grad = crate::autograd::NoGradGuard::new();
    let batches = loader.iter();
    let total = loader.num_batches();
    let mut done = total - batches.len();
    let mut out = Vec::with_capacity(batches.len());
    for batch in batches {
        out.push(f(batch));
        done += 1;
        if progress(done, total).is_cancel() && done < total {
            keep_position(loader)?;
            return Err(cancelled("evaluate", done, total));
        }
    }
    Ok(out)
}

/// Trains `model` with `opt` until `loader` has completed `epochs` epochs
/// (counting the epochs it had completed before: a resumed loader goes on
/// where it stopped), one step per batch: `loss(model, batch)`, then
/// [`Optimizer::backward_step`]. Answers the loss of each step this call
/// ran.
///
/// After each step, `progress(done, total)` is called with the steps
/// finished and the steps of all `epochs`; answering [`Flow::Cancel`]
/// stops before the next step. The handler runs on the calling thread,
/// never two at once.
///
/// # Errors
/// [`ForgeError::Cancelled`] when `progress` answers `Cancel`: the last
/// step was applied whole, so the model, the optimizer and the loader's
/// position agree. Save them then (a [training
/// checkpoint](crate::checkpoint::TrainingCheckpoint::save_with_loader)),
/// and a later `fit` from that checkpoint gives the same bits as a run
/// that was never stopped. Errors of
/// [`Optimizer::backward_step`] pass through (the failing step changed
/// nothing).
///
/// ```
/// use forge::data::{fit, DataLoader, InMemoryDataset};
/// use forge::optim::Sgd;
/// use forge::prelude::*;
/// use forge::runtime::Flow;
/// let ds = InMemoryDataset::new(Tensor::<f32>::ones(&[8, 2]), vec![0; 8]).unwrap();
/// let loader = DataLoader::new(&ds, 4);
/// let mut model = Linear::<f32>::new(2, 1, &mut Rng::new(0));
/// let mut opt = Sgd::new(0.1);
/// let mut bar = vec![];
/// let losses = fit(&mut model, &mut opt, &loader, 3, |m, (x, _)| m.forward(x).square().mean(), |done, total| {
///     bar.push(format!("{done}/{total}"));
///     Flow::Continue
/// })
/// .unwrap();
/// assert_eq!(losses.len(), 6);
/// assert_eq!(bar.last().unwrap(), "6/6");
/// ```
pub fn fit<E, R, L, D>(
    model: &mut L,
    opt: &mut Optimizer<R, E>,
    loader: &DataLoader<'_, D>,
    epochs: u64,
    mut loss: impl FnMut(&L, Batch<D>) -> Tensor<E>,
    mut progress: impl FnMut(usize, usize) -> Flow,
) -> Result<Vec<E>>
where
    E: Float,
    R: UpdateRule,
    L: Layer<E>,
    D: Dataset,
{
    let per_epoch = loader.num_batches();
    let total = per_epoch * epochs as usize;
    let mut losses = Vec::new();
    for epoch in loader.epochs_done()..epochs {
        let batches = loader.iter();
        let mut done = epoch as usize * per_epoch + (per_epoch - batches.len());
        for batch in batches {
            let l = loss(model, batch);
            losses.push(opt.backward_step(model, l)?);
            done += 1;
            if progress(done, total).is_cancel() && done < total {
                keep_position(loader)?;
                return Err(cancelled("fit", done, total));
            }
        }
    }
    Ok(losses)
}
