//! Data-parallel training: one process (or thread) per model replica, each
//! on its own shard of every batch, gradients averaged across them.
//!
//! - [`Communicator`]: what the ranks of a run can do together (rank, world
//!   size, barrier, broadcast, point-to-point send and receive) and, built
//!   on those, the collectives forge needs: a sum or mean all-reduce in a
//!   fixed order, tensor broadcasts, byte all-gathers, and
//!   [`run_on_root`](Communicator::run_on_root) for rank-0-only work
//!   (checkpoints, progress lines).
//! - [`LocalCommunicator`]: one process alone (rank 0 of 1). Code written
//!   for data parallelism runs unchanged with it.
//! - [`ThreadCommunicator`]: N ranks as N threads of one process, over
//!   channels; what the tests use to check the multi-rank logic without
//!   MPI.
//! - `MpiCommunicator` (cargo feature `mpi`): the ranks of an `mpirun` job,
//!   over Open MPI (or any MPI the `mpi` crate builds against).
//! - [`DistributedDataParallel`]: wraps any [`Layer`](crate::nn::Layer);
//!   checks that every rank built the same model, broadcasts rank 0's
//!   tensors, then averages gradients in flat buckets and broadcasts
//!   rank 0's buffers (batch-norm statistics) at every step.
//! - The sampler that gives each rank its shard of an epoch is
//!   [`crate::data::DistributedSampler`].
//!
//! # Why the reduction is a fixed tree, not `MPI_Allreduce`
//!
//! Floating-point addition is not associative: `(a + b) + c` and
//! `a + (b + c)` can differ in the last bit. `MPI_Allreduce` leaves the
//! order to the library, which picks an algorithm by message size and
//! process count (so a different bucket size changes the bits), and the MPI
//! standard only *advises* that every rank get the same result. forge
//! instead sums on a binomial tree whose shape depends only on the world
//! size (rank `r` adds the partial sum of rank `r + 2^k` at level `k`), so
//! the result is the same on every run, then rank 0 broadcasts it, so every
//! rank holds the very bytes rank 0 holds. The cost is a reduce plus a
//! broadcast (`2 log2 N` message latencies) where a ring all-reduce moves
//! less data per link on many ranks; for the handful of CPU processes this
//! targets the difference is small, and bit-identical replicas are what
//! make a run reproducible and a checkpoint independent of the rank that
//! wrote it.
//!
//! ```
//! use forge::distributed::{Communicator, ThreadCommunicator};
//! // Four ranks as four threads: each contributes its rank + 1.
//! let sums = ThreadCommunicator::run(4, |comm| {
//!     let mut v = [comm.rank() as f64 + 1.0];
//!     comm.all_reduce_sum(&mut v).unwrap();
//!     v[0]
//! });
//! assert_eq!(sums, vec![10.0; 4]);
//! ```

mod ddp;
#[cfg(feature = "mpi")]
mod mpi;
#[cfg(test)]
mod tests;
mod threads;

pub use ddp::{DistributedDataParallel, DEFAULT_BUCKET_BYTES};
#[cfg(feature = "mpi")]
pub use mpi::MpiCommunicator;
pub use threads::ThreadCommunicator;

use crate::error::{ForgeError, Result};
use crate::tensor::{Float, Tensor};
use std::any::TypeId;

/// A read-only message buffer of one of the element types the transports
/// carry.
///
/// ```
/// use forge::distributed::Buf;
/// let b = Buf::F64(&[1.0, 2.0]);
/// assert_eq!(b.len(), 2);
/// ```
#[derive(Debug, Clone, Copy)]
pub enum Buf<'a> {
    /// Bytes.
    U8(&'a [u8]),
    /// Single-precision floats.
    F32(&'a [f32]),
    /// Double-precision floats.
    F64(&'a [f64]),
}

impl Buf<'_> {
    /// The number of elements.
    ///
    /// ```
    /// assert_eq!(forge::distributed::Buf::U8(&[1, 2, 3]).len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        match self {
            Buf::U8(b) => b.len(),
            Buf::F32(b) => b.len(),
            Buf::F64(b) => b.len(),
        }
    }

    /// Whether the buffer has no elements.
    ///
    /// ```
    /// assert!(forge::distributed::Buf::F32(&[]).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type's name (`u8`, `f32`, `f64`), for messages.
    ///
    /// ```
    /// assert_eq!(forge::distributed::Buf::F32(&[]).type_name(), "f32");
    /// ```
    pub fn type_name(&self) -> &'static str {
        match self {
            Buf::U8(_) => "u8",
            Buf::F32(_) => "f32",
            Buf::F64(_) => "f64",
        }
    }
}

/// A writable message buffer: what [`Communicator::receive`] and
/// [`Communicator::broadcast`] fill.
///
/// ```
/// use forge::distributed::BufMut;
/// let mut v = [0u8; 4];
/// assert_eq!(BufMut::U8(&mut v).len(), 4);
/// ```
#[derive(Debug)]
pub enum BufMut<'a> {
    /// Bytes.
    U8(&'a mut [u8]),
    /// Single-precision floats.
    F32(&'a mut [f32]),
    /// Double-precision floats.
    F64(&'a mut [f64]),
}

impl BufMut<'_> {
    /// The number of elements.
    ///
    /// ```
    /// assert_eq!(forge::distributed::BufMut::F64(&mut [0.0; 3]).len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.as_buf().len()
    }

    /// Whether the buffer has no elements.
    ///
    /// ```
    /// assert!(forge::distributed::BufMut::U8(&mut []).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same memory, read-only.
    ///
    /// ```
    /// use forge::distributed::{Buf, BufMut};
    /// let mut v = [1.0f32];
    /// assert!(matches!(BufMut::F32(&mut v).as_buf(), Buf::F32(&[1.0])));
    /// ```
    pub fn as_buf(&self) -> Buf<'_> {
        match self {
            BufMut::U8(b) => Buf::U8(b),
            BufMut::F32(b) => Buf::F32(b),
            BufMut::F64(b) => Buf::F64(b),
        }
    }
}

/// The [`Buf`] over a float slice (`f32` or `f64`, the two [`Float`] types).
fn float_buf<E: Float>(s: &[E]) -> Result<Buf<'_>> {
    let (ptr, n) = (s.as_ptr(), s.len());
    if TypeId::of::<E>() == TypeId::of::<f32>() {
        // SAFETY: `E` is `f32` (same TypeId), so the slice is a `[f32]`.
        Ok(Buf::F32(unsafe {
            std::slice::from_raw_parts(ptr as *const f32, n)
        }))
    } else if TypeId::of::<E>() == TypeId::of::<f64>() {
        // SAFETY: `E` is `f64` (same TypeId), so the slice is a `[f64]`.
        Ok(Buf::F64(unsafe {
            std::slice::from_raw_parts(ptr as *const f64, n)
        }))
    } else {
        Err(unsupported::<E>())
    }
}

/// The [`BufMut`] over a float slice (`f32` or `f64`).
fn float_buf_mut<E: Float>(s: &mut [E]) -> Result<BufMut<'_>> {
    let (ptr, n) = (s.as_mut_ptr(), s.len());
    if TypeId::of::<E>() == TypeId::of::<f32>() {
        // SAFETY: `E` is `f32` (same TypeId) and `s` is borrowed mutably
        // for the lifetime of the result.
        Ok(BufMut::F32(unsafe {
            std::slice::from_raw_parts_mut(ptr as *mut f32, n)
        }))
    } else if TypeId::of::<E>() == TypeId::of::<f64>() {
        // SAFETY: `E` is `f64` (same TypeId), borrowed as above.
        Ok(BufMut::F64(unsafe {
            std::slice::from_raw_parts_mut(ptr as *mut f64, n)
        }))
    } else {
        Err(unsupported::<E>())
    }
}

fn unsupported<E: Float>() -> ForgeError {
    ForgeError::dtype(
        "distributed buffer",
        &[crate::DType::F32, crate::DType::F64],
        E::DTYPE,
    )
}

/// What the ranks of a data-parallel run can do together.
///
/// An implementation provides the six transport methods (rank, size,
/// barrier, broadcast, send, receive); every collective forge needs is a
/// provided method built on them, so it behaves the same (to the bit) over
/// every transport. Every rank must call the same collectives in the same
/// order with buffers of the same type and length, as in MPI.
///
/// Transport failures that a transport can report (a peer thread that is
/// gone, a message of the wrong type or length) are
/// [`ForgeError::Distributed`]; MPI's own failures abort the job, which is
/// MPI's default error handler.
///
/// ```
/// use forge::distributed::{Communicator, LocalCommunicator};
/// let comm = LocalCommunicator;
/// assert_eq!((comm.rank(), comm.size()), (0, 1));
/// let mut g = [2.0f32, 4.0];
/// comm.all_reduce_mean(&mut g).unwrap(); // one rank: unchanged
/// assert_eq!(g, [2.0, 4.0]);
/// ```
pub trait Communicator {
    /// This process's rank, `0..size()`.
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// assert_eq!(ThreadCommunicator::run(2, |c| c.rank()), vec![0, 1]);
    /// ```
    fn rank(&self) -> usize;

    /// The number of ranks.
    ///
    /// ```
    /// use forge::distributed::{Communicator, LocalCommunicator};
    /// assert_eq!(LocalCommunicator.size(), 1);
    /// ```
    fn size(&self) -> usize;

    /// Returns once every rank has called it.
    ///
    /// # Errors
    /// [`ForgeError::Distributed`] when a peer is gone.
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// ThreadCommunicator::run(3, |c| c.barrier().unwrap());
    /// ```
    fn barrier(&self) -> Result<()>;

    /// Copies `root`'s buffer into every other rank's (same type and
    /// length on every rank).
    ///
    /// # Errors
    /// [`ForgeError::Distributed`] when a peer is gone or the buffers
    /// differ in type or length.
    ///
    /// ```
    /// use forge::distributed::{BufMut, Communicator, ThreadCommunicator};
    /// let out = ThreadCommunicator::run(2, |c| {
    ///     let mut v = [c.rank() as u8; 2];
    ///     c.broadcast(BufMut::U8(&mut v), 1).unwrap();
    ///     v
    /// });
    /// assert_eq!(out, vec![[1, 1]; 2]);
    /// ```
    fn broadcast(&self, buf: BufMut<'_>, root: usize) -> Result<()>;

    /// Sends `buf` to rank `to`, which must [`receive`](Communicator::receive)
    /// it. Messages between two ranks arrive in the order they were sent.
    ///
    /// # Errors
    /// [`ForgeError::Distributed`] when the peer is gone.
    ///
    /// ```
    /// use forge::distributed::{Buf, BufMut, Communicator, ThreadCommunicator};
    /// let out = ThreadCommunicator::run(2, |c| {
    ///     let mut v = [0.0f32; 2];
    ///     if c.rank() == 0 {
    ///         c.send(Buf::F32(&[1.0, 2.0]), 1).unwrap();
    ///     } else {
    ///         c.receive(BufMut::F32(&mut v), 0).unwrap();
    ///     }
    ///     v
    /// });
    /// assert_eq!(out[1], [1.0, 2.0]);
    /// ```
    fn send(&self, buf: Buf<'_>, to: usize) -> Result<()>;

    /// Receives into `buf` the next message from rank `from`.
    ///
    /// # Errors
    /// [`ForgeError::Distributed`] when the peer is gone or its message
    /// differs in type or length from `buf`.
    ///
    /// ```
    /// use forge::distributed::{Buf, BufMut, Communicator, ThreadCommunicator};
    /// let out = ThreadCommunicator::run(2, |c| {
    ///     if c.rank() == 1 {
    ///         return c.send(Buf::U8(&[1, 2, 3]), 0).is_ok();
    ///     }
    ///     let mut short = [0u8; 2]; // three bytes come: an error, not a truncation
    ///     c.receive(BufMut::U8(&mut short), 1).is_err()
    /// });
    /// assert_eq!(out, vec![true, true]);
    /// ```
    fn receive(&self, buf: BufMut<'_>, from: usize) -> Result<()>;

    /// Whether this is rank 0, the rank that writes checkpoints and prints.
    ///
    /// ```
    /// use forge::distributed::{Communicator, LocalCommunicator};
    /// assert!(LocalCommunicator.is_root());
    /// ```
    fn is_root(&self) -> bool {
        self.rank() == 0
    }

    /// Every rank's `mine`, in rank order, on every rank (the lengths may
    /// differ). Gathered on rank 0, then broadcast.
    ///
    /// # Errors
    /// As [`send`](Communicator::send) and [`receive`](Communicator::receive).
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// let all = ThreadCommunicator::run(3, |c| c.all_gather_bytes(&vec![7; c.rank()]).unwrap());
    /// assert_eq!(all[2], vec![vec![], vec![7], vec![7, 7]]);
    /// ```
    fn all_gather_bytes(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let (rank, size) = (self.rank(), self.size());
        // Rank 0 collects `[len_0 .. len_{n-1}] ++ payload_0 ++ ...`.
        let mut packed = Vec::new();
        if rank == 0 {
            let mut lens = vec![mine.len() as u64];
            let mut payloads = vec![mine.to_vec()];
            for from in 1..size {
                let mut len = [0u8; 8];
                self.receive(BufMut::U8(&mut len), from)?;
                let n = usize::try_from(u64::from_le_bytes(len)).map_err(|_| {
                    ForgeError::Distributed(format!("rank {from} announced an impossible length"))
                })?;
                let mut p = vec![0u8; n];
                self.receive(BufMut::U8(&mut p), from)?;
                lens.push(n as u64);
                payloads.push(p);
            }
            for l in &lens {
                packed.extend_from_slice(&l.to_le_bytes());
            }
            for p in payloads {
                packed.extend_from_slice(&p);
            }
        } else {
            self.send(Buf::U8(&(mine.len() as u64).to_le_bytes()), 0)?;
            self.send(Buf::U8(mine), 0)?;
        }
        let mut total = (packed.len() as u64).to_le_bytes();
        self.broadcast(BufMut::U8(&mut total), 0)?;
        packed.resize(u64::from_le_bytes(total) as usize, 0);
        self.broadcast(BufMut::U8(&mut packed), 0)?;
        let head = 8 * size;
        if packed.len() < head {
            return Err(ForgeError::Distributed(
                "all_gather_bytes: short message".into(),
            ));
        }
        let mut out = Vec::with_capacity(size);
        let mut at = head;
        for r in 0..size {
            let n = u64::from_le_bytes(packed[8 * r..8 * r + 8].try_into().expect("8 bytes"));
            let end = at
                .checked_add(n as usize)
                .filter(|&e| e <= packed.len())
                .ok_or_else(|| ForgeError::Distributed("all_gather_bytes: bad lengths".into()))?;
            out.push(packed[at..end].to_vec());
            at = end;
        }
        Ok(out)
    }

    /// Sums `buf` over the ranks into rank 0's `buf`, on the fixed binomial
    /// tree described in the [module docs](self): at level `k`, rank `r`
    /// with `r % 2^(k+1) == 0` adds the partial sum of rank `r + 2^k`
    /// (its own partial first). Other ranks' buffers hold partial sums
    /// afterwards.
    ///
    /// # Errors
    /// As [`send`](Communicator::send) and [`receive`](Communicator::receive).
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// let out = ThreadCommunicator::run(3, |c| {
    ///     let mut v = [1.0f32; 2];
    ///     c.reduce_sum_to_root(&mut v).unwrap();
    ///     v
    /// });
    /// assert_eq!(out[0], [3.0, 3.0]);
    /// ```
    fn reduce_sum_to_root<E: Float>(&self, buf: &mut [E]) -> Result<()>
    where
        Self: Sized,
    {
        let (rank, size) = (self.rank(), self.size());
        let mut scratch: Vec<E> = Vec::new();
        let mut step = 1;
        while step < size {
            if rank % (2 * step) == step {
                return self.send(float_buf(buf)?, rank - step);
            }
            if rank + step < size {
                scratch.resize(buf.len(), E::zero());
                self.receive(float_buf_mut(&mut scratch)?, rank + step)?;
                for (a, &b) in buf.iter_mut().zip(&scratch) {
                    *a += b;
                }
            }
            step *= 2;
        }
        Ok(())
    }

    /// Every rank's `buf` replaced by the sum over the ranks, the same bytes
    /// on every rank ([`reduce_sum_to_root`](Communicator::reduce_sum_to_root),
    /// then a broadcast from rank 0).
    ///
    /// # Errors
    /// As [`send`](Communicator::send) and [`receive`](Communicator::receive).
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// let out = ThreadCommunicator::run(2, |c| {
    ///     let mut v = [c.rank() as f64, 1.0];
    ///     c.all_reduce_sum(&mut v).unwrap();
    ///     v
    /// });
    /// assert_eq!(out, vec![[1.0, 2.0]; 2]);
    /// ```
    fn all_reduce_sum<E: Float>(&self, buf: &mut [E]) -> Result<()>
    where
        Self: Sized,
    {
        if self.size() == 1 {
            return Ok(());
        }
        self.reduce_sum_to_root(buf)?;
        self.broadcast(float_buf_mut(buf)?, 0)
    }

    /// Every rank's `buf` replaced by the mean over the ranks (the tree sum
    /// divided by the world size on rank 0, then broadcast), as
    /// data-parallel training averages gradients.
    ///
    /// # Errors
    /// As [`send`](Communicator::send) and [`receive`](Communicator::receive).
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// let out = ThreadCommunicator::run(4, |c| {
    ///     let mut v = [c.rank() as f32];
    ///     c.all_reduce_mean(&mut v).unwrap();
    ///     v[0]
    /// });
    /// assert_eq!(out, vec![1.5; 4]);
    /// ```
    fn all_reduce_mean<E: Float>(&self, buf: &mut [E]) -> Result<()>
    where
        Self: Sized,
    {
        if self.size() == 1 {
            return Ok(());
        }
        self.reduce_sum_to_root(buf)?;
        if self.rank() == 0 {
            let n = E::from_f64(self.size() as f64);
            buf.iter_mut().for_each(|v| *v /= n);
        }
        self.broadcast(float_buf_mut(buf)?, 0)
    }

    /// Copies `root`'s float slice into every rank's.
    ///
    /// # Errors
    /// As [`broadcast`](Communicator::broadcast).
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// let out = ThreadCommunicator::run(2, |c| {
    ///     let mut v = [c.rank() as f64 + 5.0];
    ///     c.broadcast_slice(&mut v, 1).unwrap();
    ///     v[0]
    /// });
    /// assert_eq!(out, vec![6.0, 6.0]);
    /// ```
    fn broadcast_slice<E: Float>(&self, buf: &mut [E], root: usize) -> Result<()>
    where
        Self: Sized,
    {
        if self.size() == 1 {
            return Ok(());
        }
        self.broadcast(float_buf_mut(buf)?, root)
    }

    /// Checks that every rank passes the same `signature` (a description
    /// of what the ranks are about to exchange: shapes, names, sizes); when
    /// they differ, every rank returns the same error, naming each rank
    /// that differs from rank 0 and its first differing line. Call it
    /// before a collective whose sizes come from user data, so that a
    /// mismatch fails with a message instead of hanging or aborting.
    ///
    /// # Errors
    /// [`ForgeError::Distributed`] when the signatures differ (the message
    /// starts with `what`), or as [`all_gather_bytes`](Communicator::all_gather_bytes).
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// let out = ThreadCommunicator::run(2, |c| {
    ///     let sig = if c.rank() == 0 { "x [2, 3]" } else { "x [2, 4]" };
    ///     c.check_same("tensor x", sig).unwrap_err().to_string()
    /// });
    /// assert_eq!(out[0], out[1]);
    /// assert!(out[1].contains("rank 1: `x [2, 4]` where rank 0 has `x [2, 3]`"), "{}", out[1]);
    /// ```
    fn check_same(&self, what: &str, signature: &str) -> Result<()> {
        if self.size() == 1 {
            return Ok(());
        }
        let all = self.all_gather_bytes(signature.as_bytes())?;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let root = text(&all[0]);
        let mut diffs = Vec::new();
        for (r, sig) in all.iter().enumerate().skip(1) {
            let sig = text(sig);
            if sig != root {
                diffs.push(format!("rank {r}: {}", first_difference(&root, &sig)));
            }
        }
        if diffs.is_empty() {
            Ok(())
        } else {
            Err(ForgeError::Distributed(format!(
                "{what} differs between ranks (every rank must build the same one): {}",
                diffs.join("; ")
            )))
        }
    }

    /// Runs `f` on rank 0 only (writing a checkpoint, printing), then tells
    /// every rank how it went: every rank returns `Ok` when `f` succeeded
    /// and an error carrying `f`'s message when it failed. It is also a
    /// synchronisation point: when it returns, rank 0's `f` has finished,
    /// so other ranks may read the file it wrote.
    ///
    /// # Errors
    /// `f`'s error on rank 0; on other ranks a [`ForgeError::Distributed`]
    /// with its message; or a transport error.
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// use forge::ForgeError;
    /// let out = ThreadCommunicator::run(2, |c| {
    ///     c.run_on_root(|| Err(ForgeError::invalid("disk", "disk full"))).unwrap_err().to_string()
    /// });
    /// assert!(out[1].contains("rank 0 failed: invalid argument: disk full"), "{}", out[1]);
    /// ```
    fn run_on_root(&self, f: impl FnOnce() -> Result<()>) -> Result<()>
    where
        Self: Sized,
    {
        let outcome = if self.rank() == 0 { f() } else { Ok(()) };
        if self.size() == 1 {
            return outcome;
        }
        let msg = match &outcome {
            Err(e) if self.rank() == 0 => e.to_string(),
            _ => String::new(),
        };
        let all = self.all_gather_bytes(msg.as_bytes())?;
        match outcome {
            Err(e) => Err(e),
            Ok(()) if all[0].is_empty() => Ok(()),
            Ok(()) => Err(ForgeError::Distributed(format!(
                "rank 0 failed: {}",
                String::from_utf8_lossy(&all[0])
            ))),
        }
    }

    /// Rank `root`'s tensor, on every rank. Every rank passes a tensor of
    /// the same shape (its values are ignored except on `root`); shapes
    /// are checked first, so a mismatch is an error on every rank.
    ///
    /// # Errors
    /// [`ForgeError::Distributed`] when the shapes differ; transport errors.
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// use forge::Tensor;
    /// let out = ThreadCommunicator::run(2, |c| {
    ///     let t = Tensor::<f32>::full(&[2], c.rank() as f32 + 1.0);
    ///     c.broadcast_tensor(&t, 0).unwrap().to_vec()
    /// });
    /// assert_eq!(out[1], vec![1.0, 1.0]);
    /// ```
    fn broadcast_tensor<E: Float>(&self, t: &Tensor<E>, root: usize) -> Result<Tensor<E>>
    where
        Self: Sized,
    {
        self.check_same("broadcast_tensor: the shape", &format!("{:?}", t.shape()))?;
        let mut v = t.as_slice().to_vec();
        self.broadcast_slice(&mut v, root)?;
        Ok(Tensor::from_vec(v, t.shape()))
    }

    /// The sum of every rank's tensor (same shape everywhere, checked
    /// first), identical on every rank.
    ///
    /// # Errors
    /// [`ForgeError::Distributed`] when the shapes differ; transport errors.
    ///
    /// ```
    /// use forge::distributed::{Communicator, ThreadCommunicator};
    /// use forge::Tensor;
    /// let out = ThreadCommunicator::run(3, |c| {
    ///     c.all_reduce_sum_tensor(&Tensor::<f64>::ones(&[2])).unwrap().to_vec()
    /// });
    /// assert_eq!(out[2], vec![3.0, 3.0]);
    /// ```
    fn all_reduce_sum_tensor<E: Float>(&self, t: &Tensor<E>) -> Result<Tensor<E>>
    where
        Self: Sized,
    {
        self.check_same(
            "all_reduce_sum_tensor: the shape",
            &format!("{:?}", t.shape()),
        )?;
        let mut v = t.as_slice().to_vec();
        self.all_reduce_sum(&mut v)?;
        Ok(Tensor::from_vec(v, t.shape()))
    }
}

/// The first line where `other` differs from `root`, for error messages.
fn first_difference(root: &str, other: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (root.lines().collect(), other.lines().collect());
    for i in 0..a.len().max(b.len()) {
        match (a.get(i), b.get(i)) {
            (Some(x), Some(y)) if x == y => continue,
            (Some(x), Some(y)) => return format!("`{y}` where rank 0 has `{x}`"),
            (Some(x), None) => return format!("nothing where rank 0 has `{x}`"),
            (None, Some(y)) => return format!("`{y}` where rank 0 has nothing"),
            (None, None) => break,
        }
    }
    "the same lines, different bytes".into()
}

/// One process alone: rank 0 of a world of 1. Every collective returns
/// its input, so data-parallel code runs unchanged in a single process.
///
/// ```
/// use forge::distributed::{Communicator, LocalCommunicator};
/// let c = LocalCommunicator;
/// c.barrier().unwrap();
/// assert_eq!(c.all_gather_bytes(b"hi").unwrap(), vec![b"hi".to_vec()]);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalCommunicator;

impl Communicator for LocalCommunicator {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn barrier(&self) -> Result<()> {
        Ok(())
    }
    fn broadcast(&self, _buf: BufMut<'_>, root: usize) -> Result<()> {
        check_peer(root, 1)
    }
    fn send(&self, _buf: Buf<'_>, to: usize) -> Result<()> {
        Err(ForgeError::Distributed(format!(
            "send to rank {to}: a single process has no peer"
        )))
    }
    fn receive(&self, _buf: BufMut<'_>, from: usize) -> Result<()> {
        Err(ForgeError::Distributed(format!(
            "receive from rank {from}: a single process has no peer"
        )))
    }
}

/// An error unless `rank < size`.
fn check_peer(rank: usize, size: usize) -> Result<()> {
    if rank < size {
        Ok(())
    } else {
        Err(ForgeError::Distributed(format!(
            "rank {rank} does not exist in a world of {size}"
        )))
    }
}

/// `&C` and `Box<C>` are communicators when `C` is: every method
/// delegates to `C`'s.
macro_rules! delegate_communicator {
    ($($ty:ty),*) => {$(
        impl<C: Communicator + ?Sized> Communicator for $ty {
            fn rank(&self) -> usize {
                (**self).rank()
            }
            fn size(&self) -> usize {
                (**self).size()
            }
            fn barrier(&self) -> Result<()> {
                (**self).barrier()
            }
            fn broadcast(&self, buf: BufMut<'_>, root: usize) -> Result<()> {
                (**self).broadcast(buf, root)
            }
            fn send(&self, buf: Buf<'_>, to: usize) -> Result<()> {
                (**self).send(buf, to)
            }
            fn receive(&self, buf: BufMut<'_>, from: usize) -> Result<()> {
                (**self).receive(buf, from)
            }
        }
    )*};
}

delegate_communicator!(&C, Box<C>);
