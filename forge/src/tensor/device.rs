//! Devices: where a tensor's memory lives, which threads run its kernels.

use crate::cpu::memory::Storage;
use std::fmt::Debug;

/// A compute device. forge ships one, [`Cpu`]; ops are written against this
/// trait so that a second device can be added without changing their
/// signatures.
///
/// A device owns what a computation needs: the memory outputs are written
/// into ([`alloc`](Device::alloc), a pool that reuses freed buffers) and the
/// threads that run kernels ([`parallel_for`](Device::parallel_for), a
/// persistent pool). Ops reach both through the device.
///
/// ```
/// use forge::{Cpu, Device};
/// assert_eq!(Cpu.name(), "cpu");
/// let mut out = Cpu::alloc::<f32>(3);
/// out.extend([1.0, 2.0, 3.0]);
/// assert_eq!(&out[..], &[1.0, 2.0, 3.0]);
/// ```
pub trait Device: Copy + Clone + Default + Debug + PartialEq + Send + Sync + 'static {
    /// A short name for messages (`"cpu"`).
    fn name(&self) -> &'static str;

    /// Empty storage with room for `n` elements, from the device's pool.
    ///
    /// ```
    /// use forge::{Cpu, Device};
    /// assert!(Cpu::alloc::<f64>(10).capacity() >= 10);
    /// ```
    fn alloc<T: Copy>(n: usize) -> Storage<T>;

    /// Runs `f(i)` for every chunk index `i` in `0..chunks` on the device's
    /// worker threads. Chunk `i` must always do the same work, whatever the
    /// thread count, so results do not depend on it.
    ///
    /// ```
    /// use forge::{Cpu, Device};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let n = AtomicUsize::new(0);
    /// Cpu::parallel_for(5, |_| { n.fetch_add(1, Ordering::Relaxed); });
    /// assert_eq!(n.load(Ordering::Relaxed), 5);
    /// ```
    fn parallel_for(chunks: usize, f: impl Fn(usize) + Sync);

    /// `n` copies of `v`, in storage from the device's pool.
    ///
    /// ```
    /// use forge::{Cpu, Device};
    /// assert_eq!(&Cpu::filled(2, 1.5f32)[..], &[1.5, 1.5]);
    /// ```
    fn filled<T: Copy>(n: usize, v: T) -> Storage<T> {
        let mut s = Self::alloc(n);
        s.extend(std::iter::repeat_n(v, n));
        s
    }

    /// `out[i] = f(a[i])` into storage from the device's pool.
    ///
    /// ```
    /// use forge::{Cpu, Device};
    /// assert_eq!(&Cpu::map(&[1.0f32, -2.0], |x| x.abs())[..], &[1.0, 2.0]);
    /// ```
    fn map<A: Copy + Sync, B: Copy + Send>(a: &[A], f: impl Fn(A) -> B + Sync) -> Storage<B>;

    /// `out = f(a, b)` with `a` and `b` broadcast to `out_shape`
    /// (NumPy rules; the shapes must already be known to broadcast).
    ///
    /// ```
    /// use forge::{Cpu, Device};
    /// let v = Cpu::zip_broadcast(&[1.0f32, 2.0], &[2], &[10.0], &[1], &[2], |a, b| a * b);
    /// assert_eq!(&v[..], &[10.0, 20.0]);
    /// ```
    fn zip_broadcast<A: Copy + Sync, B: Copy + Sync, C: Copy + Send>(
        a: &[A],
        a_shape: &[usize],
        b: &[B],
        b_shape: &[usize],
        out_shape: &[usize],
        f: impl Fn(A, B) -> C + Sync,
    ) -> Storage<C>;

    /// `acc[i] = f(acc[i], b[i])` in place (gradient accumulation,
    /// optimizer updates).
    ///
    /// # Panics
    /// When the lengths differ.
    ///
    /// ```
    /// use forge::{Cpu, Device};
    /// let mut acc = [1.0f32, 2.0];
    /// Cpu::zip_assign(&mut acc, &[1.0, 1.0], |a, b| a + b);
    /// assert_eq!(acc, [2.0, 3.0]);
    /// ```
    fn zip_assign<A: Copy + Send + Sync, B: Copy + Sync>(
        acc: &mut [A],
        b: &[B],
        f: impl Fn(A, B) -> A + Sync,
    );
}

/// The host CPU: data in ordinary memory from the buffer pool, kernels on
/// persistent worker threads (both described in [`crate::runtime`]).
///
/// ```
/// let t = forge::Tensor::<f32, forge::Cpu>::zeros(&[2]);
/// assert_eq!(t.device(), forge::Cpu);
/// ```
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Cpu;

impl Device for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }

    #[inline]
    fn alloc<T: Copy>(n: usize) -> Storage<T> {
        Storage::with_capacity(n)
    }

    #[inline]
    fn parallel_for(chunks: usize, f: impl Fn(usize) + Sync) {
        crate::cpu::parallel_for(chunks, f)
    }

    #[inline]
    fn filled<T: Copy>(n: usize, v: T) -> Storage<T> {
        Storage::filled(n, v)
    }

    #[inline]
    fn map<A: Copy + Sync, B: Copy + Send>(a: &[A], f: impl Fn(A) -> B + Sync) -> Storage<B> {
        crate::cpu::elementwise::map(a, f)
    }

    #[inline]
    fn zip_broadcast<A: Copy + Sync, B: Copy + Sync, C: Copy + Send>(
        a: &[A],
        a_shape: &[usize],
        b: &[B],
        b_shape: &[usize],
        out_shape: &[usize],
        f: impl Fn(A, B) -> C + Sync,
    ) -> Storage<C> {
        crate::cpu::broadcast::zip_broadcast(a, a_shape, b, b_shape, out_shape, f)
    }

    #[inline]
    fn zip_assign<A: Copy + Send + Sync, B: Copy + Sync>(
        acc: &mut [A],
        b: &[B],
        f: impl Fn(A, B) -> A + Sync,
    ) {
        crate::cpu::elementwise::zip_assign(acc, b, f)
    }
}
