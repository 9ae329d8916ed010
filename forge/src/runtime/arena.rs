//! [`Arena`]: where a call's outputs and scratch land, rewound by each
//! call.

use super::MemoryStats;
use crate::cpu::memory::freelists::{self, ArenaMark, MemPool};
use crate::{Element, Tensor};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A memory region for repeated calls (an inference loop, a server's
/// requests): every tensor and scratch buffer a call makes inside
/// [`run`](Arena::run) (or [`Executor::run_in`](super::Executor::run_in))
/// comes from the arena's own pool, and each call rewinds the arena
/// first. The outputs of a call are valid until the arena's next call
/// starts; after that, reading one panics with a message naming the arena
/// and both calls, instead of showing values of another call.
///
/// Once a loop has run at its largest shapes, the arena holds every
/// buffer a call needs: later calls take nothing from the operating
/// system ([`memory_stats`](Arena::memory_stats)`().misses` stays put).
/// A call's buffers are reused by the next calls as soon as they are
/// dropped; an output kept alive across a call keeps its memory (it is
/// never handed out twice), it only can no longer be read.
///
/// Rules:
/// * **One call at a time**: `run` takes `&mut self`, so two threads
///   cannot use one arena at once (the compiler refuses); use one arena
///   per thread or per executor.
/// * **Keeping a result**: copy it out with [`keep`](Arena::keep) (or
///   [`Tensor::to_vec`]) before the next call; the copy belongs to no
///   arena. Model weights and inputs made outside the arena are never
///   affected.
/// * **Inference only**: a training step's in-place updates would move
///   the weights into the arena; run training outside it. Values a call
///   caches for later calls (a lazily built table) should be built inside
///   [`outside_arena`](super::outside_arena).
///
/// Like PyTorch's caching allocator or burn's memory pools, but scoped:
/// the arena is a value the program owns and drops (its memory goes back
/// to the operating system once the arena and its last output are gone).
///
/// ```
/// use forge::prelude::*;
/// use forge::runtime::Arena;
/// let model = Linear::<f32>::new(8, 4, &mut Rng::new(0));
/// let x = Tensor::<f32>::ones(&[2, 8]);
/// let mut arena = Arena::new("predict");
/// let mut kept = Vec::new();
/// for _ in 0..4 {
///     let y = arena.run(|| no_grad(|| model.forward(x.clone()).relu()));
///     kept.push(arena.keep(&y)); // a copy outside the arena
/// }
/// let warm = arena.memory_stats().misses;
/// for _ in 0..10 {
///     let y = arena.run(|| no_grad(|| model.forward(x.clone()).relu()));
///     assert_eq!(y.shape(), &[2, 4]);
/// }
/// assert_eq!(arena.memory_stats().misses, warm); // nothing new from the OS
/// assert_eq!(kept[0].to_vec(), kept[3].to_vec());
/// ```
///
/// One call at a time: two threads cannot run one arena at once.
///
/// ```compile_fail
/// let mut arena = forge::runtime::Arena::new("one");
/// std::thread::scope(|s| {
///     s.spawn(|| arena.run(|| ()));
///     s.spawn(|| arena.run(|| ())); // error: `arena` borrowed mutably twice
/// });
/// ```
///
/// A stale output panics:
///
/// ```should_panic
/// # use forge::prelude::*;
/// # use forge::runtime::Arena;
/// let mut arena = Arena::new("stale");
/// let first = arena.run(|| Tensor::<f32>::ones(&[4]).mul_scalar(2.0));
/// let _second = arena.run(|| Tensor::<f32>::ones(&[4]).mul_scalar(3.0));
/// first.to_vec(); // panics: arena "stale": a tensor made in its call 1 was read after call 2 started
/// ```
pub struct Arena {
    pool: Arc<MemPool>,
}

impl Arena {
    /// An empty arena named `name` (the name appears in its panics and in
    /// its `Debug`).
    ///
    /// ```
    /// let arena = forge::runtime::Arena::new("requests");
    /// assert_eq!((arena.name(), arena.calls()), ("requests", 0));
    /// ```
    pub fn new(name: impl Into<String>) -> Self {
        Arena {
            pool: Arc::new(MemPool::new(Some(ArenaMark {
                name: name.into(),
                generation: std::sync::atomic::AtomicU64::new(0),
            }))),
        }
    }

    fn mark(&self) -> &ArenaMark {
        self.pool.arena().expect("an arena's pool has its mark")
    }

    /// The arena's name.
    ///
    /// ```
    /// assert_eq!(forge::runtime::Arena::new("a").name(), "a");
    /// ```
    pub fn name(&self) -> &str {
        &self.mark().name
    }

    /// How many calls the arena has started (its generation: outputs of
    /// call `calls()` are the readable ones).
    ///
    /// ```
    /// let mut arena = forge::runtime::Arena::new("a");
    /// arena.run(|| ());
    /// assert_eq!(arena.calls(), 1);
    /// ```
    pub fn calls(&self) -> u64 {
        self.mark().generation.load(Ordering::Acquire)
    }

    /// Rewinds the arena (outputs of earlier calls become unreadable) and
    /// runs `f` on the calling thread with the arena as the source of every
    /// buffer `f`'s forge calls take, on this thread and on the worker
    /// threads that help it; answers what `f` returns, which may hold
    /// tensors of this call. Threads and CPU class are the calling
    /// thread's (see [`Executor::run_in`](super::Executor::run_in) to
    /// choose them).
    ///
    /// # Panics
    /// When `f` panics (the panic passes through; the arena stays usable).
    ///
    /// ```
    /// let mut arena = forge::runtime::Arena::new("a");
    /// let y = arena.run(|| forge::Tensor::<f32>::ones(&[3]).exp());
    /// assert_eq!(y.shape(), &[3]);
    /// ```
    pub fn run<R>(&mut self, f: impl FnOnce() -> R) -> R {
        self.mark().generation.fetch_add(1, Ordering::AcqRel);
        freelists::with_target(Some(Arc::clone(&self.pool)), f)
    }

    /// A copy of `t`'s values (detached, no gradient) that belongs to no
    /// arena, so it stays readable after the arena's next call.
    ///
    /// # Panics
    /// When `t` is already stale (made in an earlier call of its arena).
    ///
    /// ```
    /// let mut arena = forge::runtime::Arena::new("a");
    /// let y = arena.run(|| forge::Tensor::<f32>::ones(&[2]).mul_scalar(5.0));
    /// let kept = arena.keep(&y);
    /// arena.run(|| ());
    /// assert_eq!(kept.to_vec(), vec![5.0, 5.0]);
    /// ```
    pub fn keep<E: Element>(&self, t: &Tensor<E>) -> Tensor<E> {
        Tensor::from_vec(t.to_vec(), t.shape())
    }

    /// A snapshot of the counters of the arena's pool (see
    /// [`MemoryStats`]): `misses` counts the buffers it took from the
    /// operating system.
    ///
    /// ```
    /// let mut arena = forge::runtime::Arena::new("a");
    /// drop(arena.run(|| forge::Tensor::<f32>::zeros(&[100])));
    /// let s = arena.memory_stats();
    /// assert_eq!((s.misses, s.live_bytes, s.held_bytes), (1, 0, 512));
    /// ```
    pub fn memory_stats(&self) -> MemoryStats {
        self.pool.stats()
    }

    /// Gives the arena's free buffers back to the operating system;
    /// returns the bytes released.
    ///
    /// ```
    /// let mut arena = forge::runtime::Arena::new("a");
    /// drop(arena.run(|| forge::Tensor::<f32>::zeros(&[100])));
    /// assert_eq!(arena.trim(), 512);
    /// ```
    pub fn trim(&mut self) -> usize {
        self.pool.release_above(0)
    }
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.memory_stats();
        f.debug_struct("Arena")
            .field("name", &self.name())
            .field("calls", &self.calls())
            .field("live_bytes", &m.live_bytes)
            .field("held_bytes", &m.held_bytes)
            .field("misses", &m.misses)
            .finish()
    }
}

/// Runs `f` with its buffers taken from the pool outside the calling
/// thread's arena (its executor's, or the process's): for values a call
/// builds to keep past the arena's next call, such as a cache. Outside
/// every arena it simply runs `f`.
///
/// ```
/// use forge::runtime::{outside_arena, Arena};
/// let mut arena = Arena::new("a");
/// let cache = arena.run(|| outside_arena(|| forge::Tensor::<f32>::ones(&[4]).exp()));
/// arena.run(|| ());
/// assert_eq!(cache.shape(), &[4]); // still readable
/// let _ = cache.to_vec();
/// ```
pub fn outside_arena<R>(f: impl FnOnce() -> R) -> R {
    freelists::with_target(freelists::current_base(), f)
}
