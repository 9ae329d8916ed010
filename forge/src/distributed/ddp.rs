//! [`DistributedDataParallel`]: a model replica that keeps in step with the
//! other ranks' replicas.

use super::Communicator;
use crate::autograd::Gradients;
use crate::error::{ForgeError, Result};
use crate::nn::{Forward, Layer, TensorKind, TensorVisitor, TensorVisitorMut};
use crate::tensor::Rng;
use crate::tensor::{Float, Tensor};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The default size of a gradient bucket: 4 MiB (a million `f32`s), so a
/// LeNet step makes one all-reduce and a ResNet-18 step a dozen.
///
/// ```
/// assert_eq!(forge::distributed::DEFAULT_BUCKET_BYTES, 4 << 20);
/// ```
pub const DEFAULT_BUCKET_BYTES: usize = 4 << 20;

/// Data parallelism around any [`Layer`], as PyTorch's
/// `DistributedDataParallel`: every rank holds a replica, runs it on its
/// own shard of the batch, and averages the gradients with the other ranks
/// before the optimizer step, so every replica takes the same step.
///
/// - [`new`](Self::new) checks that every rank built the same model (the
///   same paths, shapes, kinds and trainable flags; a difference is an
///   error on every rank, not a hang), then copies rank 0's tensors to
///   every rank, so replicas start equal whatever their initialisation.
///   The random generators the module owns (dropout's) become rank 0's
///   too, so a checkpoint written by rank 0 restores every rank; ranks
///   then draw the same dropout masks (for different samples).
/// - [`reduce_gradients`](Self::reduce_gradients) (or
///   [`backward`](Self::backward)) averages the gradients: they are packed
///   in traversal order into one flat buffer, reduced bucket by bucket
///   ([`with_bucket_bytes`](Self::with_bucket_bytes)) on the fixed tree of
///   [`Communicator::reduce_sum_to_root`], divided by the world size on
///   rank 0, and broadcast. Every rank then holds the very bytes rank 0
///   holds, so identical optimizers take identical steps and the replicas
///   stay bit-identical.
/// - Then rank 0's buffers (batch-norm running statistics: every
///   [`TensorKind::Frozen`] tensor) are broadcast, as PyTorch does by
///   default (`broadcast_buffers=True`); turn it off with
///   [`broadcast_buffers`](Self::broadcast_buffers).
///
/// The wrapper is itself a [`Layer`] with the module's paths (no
/// `module.` prefix: checkpoints are interchangeable with the bare
/// model's) and forwards like the module.
///
/// Gradients are reduced after `backward` returns, not overlapped with it
/// as PyTorch's hooks do; a parameter that has no gradient on some rank
/// counts as zero there, and one that has none on any rank gets none.
///
/// ```
/// use forge::distributed::{Communicator, DistributedDataParallel, ThreadCommunicator};
/// use forge::optim::Sgd;
/// use forge::prelude::*;
/// // Two ranks (threads here, processes under MPI), each with its half of the batch.
/// let weights = ThreadCommunicator::run(2, |comm| {
///     let rank = comm.rank();
///     // Different seeds: construction copies rank 0's weights to every rank.
///     let model = Linear::<f64>::new(3, 1, &mut Rng::new(rank as u64));
///     let mut ddp = DistributedDataParallel::new(model, comm).unwrap();
///     let mut opt = Sgd::new(0.1);
///     let x = Tensor::<f64>::from_fn(&[2, 3], |i| (i + 3 * rank) as f64);
///     let grads = ddp.backward(&ddp.forward(x).square().mean()).unwrap();
///     opt.step(&mut ddp, &grads).unwrap();
///     ddp.module().weight.to_vec()
/// });
/// assert_eq!(weights[0], weights[1]);
/// ```
#[derive(Debug)]
pub struct DistributedDataParallel<L, C> {
    module: L,
    comm: C,
    bucket_bytes: usize,
    broadcast_buffers: bool,
    comm_time: Duration,
    last_comm_time: Duration,
}

/// One line per stored tensor: path, role, trainable, shape; then the
/// element type. What every rank must agree on.
fn signature<E: Float, L: Layer<E> + ?Sized>(module: &L) -> String {
    let mut s = format!("element type {}\n", E::DTYPE.name());
    module.visit_tensors(&mut |p: &str, t: &Tensor<E>, k: TensorKind| {
        let role = match (k, t.is_tracked()) {
            (TensorKind::Weight, true) => "trainable weight",
            (TensorKind::Weight, false) => "frozen weight",
            (TensorKind::Frozen, _) => "buffer",
        };
        s.push_str(&format!("{p}: {role} of shape {:?}\n", t.shape()));
    });
    for path in module.rng_states().keys() {
        s.push_str(&format!("{path}: random generator\n"));
    }
    s
}

/// 64-bit FNV-1a: a fingerprint that is the same in every process and
/// every build (unlike `std`'s hasher, whose algorithm may change).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The tensors of `module` selected by `pick`, concatenated.
fn flatten<E: Float, L: Layer<E> + ?Sized>(module: &L, pick: fn(TensorKind) -> bool) -> Vec<E> {
    let mut flat = Vec::new();
    module.visit_tensors(&mut |_: &str, t: &Tensor<E>, k: TensorKind| {
        if pick(k) {
            flat.extend_from_slice(t.as_slice());
        }
    });
    flat
}

/// Replaces the tensors of `module` selected by `pick` by consecutive
/// pieces of `flat`, keeping each one's tracked status.
fn unflatten<E: Float, L: Layer<E> + ?Sized>(
    module: &mut L,
    flat: &[E],
    pick: fn(TensorKind) -> bool,
) {
    let mut at = 0;
    module.visit_tensors_mut(&mut |_: &str, t: &mut Tensor<E>, k: TensorKind| {
        if pick(k) {
            let n = t.numel();
            let new = Tensor::from_vec(flat[at..at + n].to_vec(), t.shape());
            *t = if t.is_tracked() {
                new.requires_grad()
            } else {
                new
            };
            at += n;
        }
    });
}

fn every(_: TensorKind) -> bool {
    true
}

fn buffers(k: TensorKind) -> bool {
    k == TensorKind::Frozen
}

impl<L, C: Communicator> DistributedDataParallel<L, C> {
    /// Wraps `module`: checks that every rank built the same model, then
    /// replaces every rank's tensors (weights and buffers) by rank 0's.
    /// Every rank must call it.
    ///
    /// # Errors
    /// [`ForgeError::Distributed`](crate::ForgeError::Distributed) on every
    /// rank when some rank's model differs from rank 0's; the message names
    /// the rank and the first differing tensor
    /// (`rank 1: \`fc1.weight: trainable weight of shape [8, 5]\` where rank 0 has ...`).
    /// Transport errors.
    ///
    /// ```
    /// use forge::distributed::{Communicator, DistributedDataParallel, ThreadCommunicator};
    /// use forge::prelude::*;
    /// let errors = ThreadCommunicator::run(2, |comm| {
    ///     let inputs = 4 + comm.rank(); // a user error: rank 1 builds another model
    ///     let model = Linear::<f32>::new(inputs, 2, &mut Rng::new(0));
    ///     DistributedDataParallel::new(model, comm).unwrap_err().to_string()
    /// });
    /// assert!(errors[0].contains("rank 1: `weight: trainable weight of shape [2, 5]`"), "{}", errors[0]);
    /// assert_eq!(errors[0], errors[1]);
    /// ```
    pub fn new<E: Float>(mut module: L, comm: C) -> Result<Self>
    where
        L: Layer<E>,
    {
        comm.check_same("the model", &signature(&module))?;
        if comm.size() > 1 {
            let mut flat = flatten(&module, every);
            broadcast_flat(&comm, &mut flat, DEFAULT_BUCKET_BYTES)?;
            unflatten(&mut module, &flat, every);
            broadcast_rngs(&comm, &mut module)?;
        }
        Ok(DistributedDataParallel {
            module,
            comm,
            bucket_bytes: DEFAULT_BUCKET_BYTES,
            broadcast_buffers: true,
            comm_time: Duration::ZERO,
            last_comm_time: Duration::ZERO,
        })
    }

    /// Sets the bucket size in bytes (at least one element per bucket):
    /// gradients are reduced in pieces of this size. Bigger buckets mean
    /// fewer messages; smaller ones less memory in flight.
    ///
    /// ```
    /// use forge::distributed::{DistributedDataParallel, LocalCommunicator};
    /// use forge::prelude::*;
    /// let m = Linear::<f32>::new(2, 2, &mut Rng::new(0));
    /// let ddp = DistributedDataParallel::new(m, LocalCommunicator).unwrap().with_bucket_bytes(1 << 20);
    /// assert_eq!(ddp.bucket_bytes(), 1 << 20);
    /// ```
    pub fn with_bucket_bytes(mut self, bytes: usize) -> Self {
        self.bucket_bytes = bytes;
        self
    }

    /// The bucket size in bytes.
    ///
    /// ```
    /// use forge::distributed::{DistributedDataParallel, LocalCommunicator, DEFAULT_BUCKET_BYTES};
    /// use forge::prelude::*;
    /// let ddp = DistributedDataParallel::new(Linear::<f32>::new(2, 2, &mut Rng::new(0)), LocalCommunicator).unwrap();
    /// assert_eq!(ddp.bucket_bytes(), DEFAULT_BUCKET_BYTES);
    /// ```
    pub fn bucket_bytes(&self) -> usize {
        self.bucket_bytes
    }

    /// Whether [`reduce_gradients`](Self::reduce_gradients) also broadcasts
    /// rank 0's buffers (on by default, as in PyTorch). Turn it off for
    /// models whose buffers must stay per-rank.
    ///
    /// ```
    /// use forge::distributed::{DistributedDataParallel, LocalCommunicator};
    /// use forge::prelude::*;
    /// let bn = forge::nn::BatchNorm1d::<f32>::new(3);
    /// let ddp = DistributedDataParallel::new(bn, LocalCommunicator).unwrap().broadcast_buffers(false);
    /// assert!(!ddp.broadcasts_buffers());
    /// ```
    pub fn broadcast_buffers(mut self, on: bool) -> Self {
        self.broadcast_buffers = on;
        self
    }

    /// Whether buffers are broadcast at every step.
    ///
    /// ```
    /// use forge::distributed::{DistributedDataParallel, LocalCommunicator};
    /// use forge::prelude::*;
    /// let ddp = DistributedDataParallel::new(Linear::<f32>::new(2, 2, &mut Rng::new(0)), LocalCommunicator).unwrap();
    /// assert!(ddp.broadcasts_buffers());
    /// ```
    pub fn broadcasts_buffers(&self) -> bool {
        self.broadcast_buffers
    }

    /// The wrapped model.
    ///
    /// ```
    /// use forge::distributed::{DistributedDataParallel, LocalCommunicator};
    /// use forge::prelude::*;
    /// let ddp = DistributedDataParallel::new(Linear::<f32>::new(2, 3, &mut Rng::new(0)), LocalCommunicator).unwrap();
    /// assert_eq!(ddp.module().weight.shape(), &[3, 2]);
    /// ```
    pub fn module(&self) -> &L {
        &self.module
    }

    /// The wrapped model, mutably (changing its layout or freezing
    /// differently on different ranks is caught at the next step).
    ///
    /// ```
    /// use forge::distributed::{DistributedDataParallel, LocalCommunicator};
    /// use forge::prelude::*;
    /// let mut ddp = DistributedDataParallel::new(Linear::<f32>::new(2, 3, &mut Rng::new(0)), LocalCommunicator).unwrap();
    /// ddp.module_mut().eval();
    /// ```
    pub fn module_mut(&mut self) -> &mut L {
        &mut self.module
    }

    /// The wrapped model, unwrapped.
    ///
    /// ```
    /// use forge::distributed::{DistributedDataParallel, LocalCommunicator};
    /// use forge::prelude::*;
    /// let ddp = DistributedDataParallel::new(Linear::<f32>::new(2, 3, &mut Rng::new(0)), LocalCommunicator).unwrap();
    /// let fc: Linear = ddp.into_inner();
    /// ```
    pub fn into_inner(self) -> L {
        self.module
    }

    /// The communicator.
    ///
    /// ```
    /// use forge::distributed::{Communicator, DistributedDataParallel, LocalCommunicator};
    /// use forge::prelude::*;
    /// let ddp = DistributedDataParallel::new(Linear::<f32>::new(2, 3, &mut Rng::new(0)), LocalCommunicator).unwrap();
    /// assert_eq!(ddp.comm().size(), 1);
    /// ```
    pub fn comm(&self) -> &C {
        &self.comm
    }

    /// The total time spent communicating in
    /// [`reduce_gradients`](Self::reduce_gradients) (gradients, the layout
    /// check, and buffers) since construction.
    ///
    /// ```
    /// use forge::distributed::{DistributedDataParallel, LocalCommunicator};
    /// use forge::prelude::*;
    /// let ddp = DistributedDataParallel::new(Linear::<f32>::new(2, 3, &mut Rng::new(0)), LocalCommunicator).unwrap();
    /// assert_eq!(ddp.comm_time(), std::time::Duration::ZERO);
    /// ```
    pub fn comm_time(&self) -> Duration {
        self.comm_time
    }

    /// The time the last [`reduce_gradients`](Self::reduce_gradients)
    /// spent communicating.
    ///
    /// ```
    /// use forge::distributed::{DistributedDataParallel, LocalCommunicator};
    /// use forge::prelude::*;
    /// let ddp = DistributedDataParallel::new(Linear::<f32>::new(2, 3, &mut Rng::new(0)), LocalCommunicator).unwrap();
    /// assert_eq!(ddp.last_comm_time(), std::time::Duration::ZERO);
    /// ```
    pub fn last_comm_time(&self) -> Duration {
        self.last_comm_time
    }

    /// `loss.backward()`, then [`reduce_gradients`](Self::reduce_gradients):
    /// the averaged gradients, ready for `opt.step(&mut ddp, &grads)`.
    ///
    /// # Errors
    /// As [`reduce_gradients`](Self::reduce_gradients).
    ///
    /// ```
    /// use forge::distributed::{DistributedDataParallel, LocalCommunicator};
    /// use forge::prelude::*;
    /// let mut ddp = DistributedDataParallel::new(Linear::<f64>::new(2, 1, &mut Rng::new(0)), LocalCommunicator).unwrap();
    /// let loss = ddp.forward(Tensor::ones(&[4, 2])).sum();
    /// let grads = ddp.backward(&loss).unwrap();
    /// assert_eq!(grads.get(&ddp.module().bias.clone().unwrap()).unwrap().to_vec(), vec![4.0]);
    /// ```
    pub fn backward<E: Float>(&mut self, loss: &Tensor<E>) -> Result<Gradients<E>>
    where
        L: Layer<E>,
    {
        let grads = loss.backward();
        self.reduce_gradients(&grads)
    }

    /// The gradients of the module's trainable weights averaged over the
    /// ranks (the same bytes on every rank), keyed by the module's weights;
    /// then, unless turned off, rank 0's buffers copied to every rank.
    /// Every rank must call it once per step.
    ///
    /// A weight missing from `grads` counts as a zero gradient on this
    /// rank; a weight missing on every rank is missing from the result. In
    /// one process the gradients are returned as they are (no copy).
    ///
    /// # Errors
    /// [`ForgeError::Distributed`](crate::ForgeError::Distributed) on every
    /// rank when the model's layout (tensors, shapes, trainable flags) has
    /// come to differ between ranks since construction; transport errors.
    ///
    /// ```
    /// use forge::distributed::{Communicator, DistributedDataParallel, ThreadCommunicator};
    /// use forge::prelude::*;
    /// let g = ThreadCommunicator::run(2, |comm| {
    ///     let r = comm.rank() as f64;
    ///     let mut ddp = DistributedDataParallel::new(Linear::<f64>::new(1, 1, &mut Rng::new(0)), comm).unwrap();
    ///     // Rank 0's input is 1, rank 1's is 3: d(sum w x)/dw is 1 and 3, averaged 2.
    ///     let loss = ddp.forward(Tensor::full(&[1, 1], 1.0 + 2.0 * r)).sum();
    ///     let grads = ddp.backward(&loss).unwrap();
    ///     grads.get(&ddp.module().weight).unwrap().item()
    /// });
    /// assert_eq!(g, vec![2.0, 2.0]);
    /// ```
    pub fn reduce_gradients<E: Float>(&mut self, grads: &Gradients<E>) -> Result<Gradients<E>>
    where
        L: Layer<E>,
    {
        let params = self.module.parameters();
        let mut out = Gradients::new();
        if self.comm.size() == 1 {
            for p in &params {
                if let Some(g) = grads.get(p) {
                    out.insert(p, g.clone());
                }
            }
            return Ok(out);
        }
        let start = Instant::now();
        self.check_layout()?;
        // Gradients in traversal order, then one presence flag per weight.
        let total: usize = params.iter().map(|p| p.numel()).sum();
        let mut flat = Vec::with_capacity(total + params.len());
        for p in &params {
            match grads.get(p) {
                Some(g) => flat.extend_from_slice(g.as_slice()),
                None => flat.resize(flat.len() + p.numel(), E::zero()),
            }
        }
        flat.extend(params.iter().map(|p| {
            if grads.get(p).is_some() {
                E::one()
            } else {
                E::zero()
            }
        }));
        let per = (self.bucket_bytes / std::mem::size_of::<E>()).max(1);
        let n = E::from_f64(self.comm.size() as f64);
        for (b, chunk) in flat.chunks_mut(per).enumerate() {
            self.comm.reduce_sum_to_root(chunk)?;
            if self.comm.is_root() {
                // Gradients are averaged; the presence flags stay counts.
                let grads_here = total.saturating_sub(b * per).min(chunk.len());
                chunk[..grads_here].iter_mut().for_each(|v| *v /= n);
            }
            self.comm.broadcast_slice(chunk, 0)?;
        }
        let (values, flags) = flat.split_at(total);
        let mut at = 0;
        for (p, &flag) in params.iter().zip(flags) {
            let k = p.numel();
            if flag > E::zero() {
                out.insert(p, Tensor::from_vec(values[at..at + k].to_vec(), p.shape()));
            }
            at += k;
        }
        if self.broadcast_buffers {
            self.sync_buffers()?;
        }
        self.last_comm_time = start.elapsed();
        self.comm_time += self.last_comm_time;
        Ok(out)
    }

    /// Copies rank 0's buffers (every [`TensorKind::Frozen`] tensor:
    /// batch-norm running statistics) to every rank.
    /// [`reduce_gradients`](Self::reduce_gradients) calls it unless
    /// [`broadcast_buffers`](Self::broadcast_buffers) is off.
    ///
    /// # Errors
    /// Transport errors.
    ///
    /// ```
    /// use forge::distributed::{Communicator, DistributedDataParallel, ThreadCommunicator};
    /// use forge::nn::BatchNorm1d;
    /// use forge::prelude::*;
    /// let means = ThreadCommunicator::run(2, |comm| {
    ///     let r = comm.rank() as f32;
    ///     let mut ddp = DistributedDataParallel::new(BatchNorm1d::<f32>::new(1), comm).unwrap();
    ///     let _ = ddp.forward(Tensor::full(&[2, 1], r)); // updates the running mean
    ///     ddp.sync_buffers().unwrap();
    ///     ddp.module().running_mean.get().item()
    /// });
    /// assert_eq!(means, vec![0.0, 0.0]); // rank 0's
    /// ```
    pub fn sync_buffers<E: Float>(&mut self) -> Result<()>
    where
        L: Layer<E>,
    {
        if self.comm.size() == 1 {
            return Ok(());
        }
        let mut flat = flatten(&self.module, buffers);
        if flat.is_empty() {
            return Ok(());
        }
        broadcast_flat(&self.comm, &mut flat, self.bucket_bytes)?;
        unflatten(&mut self.module, &flat, buffers);
        Ok(())
    }

    /// Checks that every rank's model has rank 0's layout: an exchange of
    /// 8-byte fingerprints, and the full comparison (for the message) only
    /// when they differ. Every rank sees every fingerprint, so every rank
    /// takes the same branch.
    fn check_layout<E: Float>(&self) -> Result<()>
    where
        L: Layer<E>,
    {
        let sig = signature(&self.module);
        let all = self
            .comm
            .all_gather_bytes(&fnv1a(sig.as_bytes()).to_le_bytes())?;
        if all.iter().any(|f| f != &all[0]) {
            self.comm.check_same("the model's layout", &sig)?;
        }
        Ok(())
    }
}

/// Replaces the module's random generators (dropout's) by rank 0's.
fn broadcast_rngs<E: Float, L: Layer<E>, C: Communicator>(comm: &C, module: &mut L) -> Result<()> {
    let mine = if comm.is_root() {
        postcard::to_allocvec(&module.rng_states()).map_err(|e| {
            ForgeError::format(
                "random generators",
                format!("cannot encode the random generators: {e}"),
            )
            .with_source(e)
        })?
    } else {
        Vec::new()
    };
    let all = comm.all_gather_bytes(&mine)?;
    let states: BTreeMap<String, Rng> = postcard::from_bytes(&all[0]).map_err(|e| {
        ForgeError::Distributed(format!("rank 0's random generators do not decode: {e}"))
    })?;
    module.load_rng_states(&states)
}

/// Broadcasts `flat` from rank 0 in buckets of `bucket_bytes`.
fn broadcast_flat<E: Float, C: Communicator>(
    comm: &C,
    flat: &mut [E],
    bucket_bytes: usize,
) -> Result<()> {
    let per = (bucket_bytes / std::mem::size_of::<E>()).max(1);
    for chunk in flat.chunks_mut(per) {
        comm.broadcast_slice(chunk, 0)?;
    }
    Ok(())
}

impl<E: Float, L: Layer<E>, C: Communicator> Layer<E> for DistributedDataParallel<L, C> {
    fn visit_tensors(&self, v: &mut dyn TensorVisitor<E>) {
        self.module.visit_tensors(v)
    }

    fn visit_tensors_mut(&mut self, v: &mut dyn TensorVisitorMut<E>) {
        self.module.visit_tensors_mut(v)
    }

    /// [`backward`](DistributedDataParallel::backward): the gradients
    /// averaged over the ranks, so that
    /// [`Optimizer::backward_step`](crate::optim::Optimizer::backward_step)
    /// steps every rank alike.
    fn loss_gradients(&mut self, loss: &Tensor<E>) -> Result<Gradients<E>> {
        self.backward(loss)
    }
}

impl<I, L: Forward<I>, C> Forward<I> for DistributedDataParallel<L, C> {
    type Output = L::Output;

    fn forward(&self, x: I) -> L::Output {
        self.module.forward(x)
    }
}
