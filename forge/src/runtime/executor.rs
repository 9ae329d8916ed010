//! [`Executor`]: a thread pool of a chosen size, and the settings its
//! calls run with, that a program owns instead of sharing one
//! process-wide setting.

use super::deferred::{Deferred, Slot};
use super::{Arena, MemoryStats, Simd};
use crate::cpu::class::Class;
use crate::cpu::memory::freelists::{self, MemPool, PoolRef};
use crate::cpu::threads::{with_local, Local, Pool, Settings};
use crate::error::{ForgeError, Result};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() + Send>;

/// Where an executor's calls run.
enum Kind {
    /// The process's settings (`set_num_threads`, `FORGE_CPU_CLASS`).
    Process,
    /// Its own thread count, pool and CPU class.
    Own(Local),
    /// One thread, the caller's.
    CurrentThread(Option<Class>),
}

struct Inner {
    kind: Kind,
    /// Calls running or queued (blocking and submitted).
    busy: AtomicUsize,
    /// The queue of submitted calls and the thread that runs them,
    /// started at the first `submit`.
    queue: Mutex<Option<(Sender<Job>, JoinHandle<()>)>>,
    name: String,
    /// The memory pool its calls draw from (`None`: the process's).
    memory: PoolRef,
}

/// Live executors, for [`describe`](crate::runtime::describe).
static LIVE: Mutex<Vec<Weak<Inner>>> = Mutex::new(Vec::new());

/// A thread pool of a chosen size and the settings its calls run with.
///
/// Every forge call made inside [`run`](Executor::run) (on the calling
/// thread) or submitted with [`submit`](Executor::submit) (run on the
/// executor's own thread, one call after another) uses this executor's
/// threads for its parallel kernels, and its pinned CPU class if it has
/// one, whatever other threads and executors do meanwhile. Results are
/// bit-identical whichever executor, thread count or class runs a call;
/// only speed differs. Several executors serve several models at once,
/// e.g. two models on one core each.
///
/// * [`Executor::new`]`(n)`: `n` threads (`n - 1` workers plus the thread
///   running the call), started now and stopped when the last clone of the
///   executor is dropped (after its queued calls).
/// * [`Executor::current_thread`]: one thread, the caller's; `submit` runs
///   the call at once, on the caller.
/// * [`Executor::process`]: the process's default, which
///   [`set_num_threads`](super::set_num_threads) configures; calls outside
///   every executor run on it.
///
/// Memory: each executor owns a buffer pool that its calls' tensors and
/// scratch draw from (on every thread that works for the call), with its
/// own counters ([`memory_stats`](Executor::memory_stats)) and ceiling;
/// the process's default executor uses the process's pool. A buffer goes
/// back to the pool it came from, whichever thread drops it, and an
/// executor's pool is freed when the executor and the last tensor drawn
/// from it are gone. Calls on two executors never contend for one pool.
///
/// ```
/// use forge::prelude::*;
/// use forge::runtime::Executor;
/// let mut rng = Rng::new(0);
/// let model = Linear::<f32>::new(4, 2, &mut rng);
/// let x = Tensor::<f32>::ones(&[3, 4]);
/// let one = Executor::new(1);
/// let two = Executor::new(2);
/// let a = one.run(|| model.forward(x.clone()));
/// let b = two.run(|| model.forward(x.clone()));
/// assert_eq!(a.to_vec(), b.to_vec()); // the same bits
/// assert_eq!(two.run(forge::runtime::num_threads), 2);
/// ```
#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
}

impl Executor {
    fn make(kind: Kind, name: String) -> Self {
        let memory = match kind {
            Kind::Process => None,
            _ => Some(Arc::new(MemPool::new(None))),
        };
        let inner = Arc::new(Inner {
            kind,
            busy: AtomicUsize::new(0),
            queue: Mutex::new(None),
            name,
            memory,
        });
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&inner));
        Executor { inner }
    }

    /// An executor of `threads` threads (clamped to `1..=256`): its calls'
    /// parallel kernels split over `threads - 1` worker threads of its own
    /// and the thread running the call. The CPU class is the process's
    /// until [`with_cpu_class`](Executor::with_cpu_class) pins one.
    ///
    /// ```
    /// let exec = forge::runtime::Executor::new(3);
    /// assert_eq!(exec.threads(), 3);
    /// ```
    pub fn new(threads: usize) -> Self {
        Self::with_settings(threads, None)
    }

    fn with_settings(threads: usize, class: Option<Class>) -> Self {
        let threads = threads.clamp(1, 256);
        let settings = Settings { threads, class };
        let pool =
            (threads > 1).then(|| Arc::new(Pool::new(threads, "forge-exec", Some(settings))));
        Self::make(
            Kind::Own(Local { settings, pool }),
            format!("executor({threads})"),
        )
    }

    /// A single-thread executor that runs every call on the thread that
    /// makes it: [`submit`](Executor::submit) runs the call at once and
    /// answers a finished [`Deferred`].
    ///
    /// ```
    /// use forge::runtime::{Executor, Status};
    /// let exec = Executor::current_thread();
    /// let here = std::thread::current().id();
    /// let d = exec.submit(move || std::thread::current().id() == here);
    /// assert_eq!(d.status(), Status::Done);
    /// assert!(*d.wait());
    /// ```
    pub fn current_thread() -> Self {
        Self::make(Kind::CurrentThread(None), "current_thread".into())
    }

    /// The process's default executor: the thread count of
    /// [`set_num_threads`](super::set_num_threads) (or
    /// `FORGE_NUM_THREADS`) and the class of `FORGE_CPU_CLASS`. Calls
    /// outside every executor run on it.
    ///
    /// ```
    /// use forge::runtime::{num_threads, Executor};
    /// assert_eq!(Executor::process().threads(), num_threads());
    /// ```
    pub fn process() -> Self {
        static PROCESS: std::sync::OnceLock<Executor> = std::sync::OnceLock::new();
        PROCESS
            .get_or_init(|| Self::make(Kind::Process, "process".into()))
            .clone()
    }

    /// The same executor with its kernels pinned to `class` (capped at
    /// what this CPU has): for reproducing a run from another machine's
    /// kernel paths, and for testing every path on one machine. Results
    /// are the same bits in every class. Starts new worker threads.
    ///
    /// # Errors
    /// [`ForgeError::Unsupported`] when this CPU lacks `class`.
    ///
    /// ```
    /// use forge::runtime::{Executor, Simd};
    /// let exec = Executor::new(2).with_cpu_class(Simd::Portable).unwrap();
    /// assert_eq!(exec.run(forge::runtime::cpu_class), Simd::Portable);
    /// ```
    pub fn with_cpu_class(&self, class: Simd) -> Result<Self> {
        let c = super::class_of(class);
        if c > crate::cpu::class::detected() {
            return Err(ForgeError::unsupported(
                "CPU class",
                format!(
                    "{class} (this CPU has {})",
                    super::simd_of(crate::cpu::class::detected())
                ),
            ));
        }
        Ok(match &self.inner.kind {
            Kind::CurrentThread(_) => {
                Self::make(Kind::CurrentThread(Some(c)), "current_thread".into())
            }
            _ => Self::with_settings(self.threads(), Some(c)),
        })
    }

    /// The threads a call of this executor splits its kernels over.
    ///
    /// ```
    /// assert_eq!(forge::runtime::Executor::current_thread().threads(), 1);
    /// ```
    pub fn threads(&self) -> usize {
        match &self.inner.kind {
            Kind::Process => crate::cpu::threads::process_threads(),
            Kind::Own(l) => l.settings.threads,
            Kind::CurrentThread(_) => 1,
        }
    }

    /// The CPU class this executor's kernels use.
    ///
    /// ```
    /// use forge::runtime::{cpu_class, Executor};
    /// assert_eq!(Executor::new(1).cpu_class(), cpu_class());
    /// ```
    pub fn cpu_class(&self) -> Simd {
        let pinned = match &self.inner.kind {
            Kind::Process => None,
            Kind::Own(l) => l.settings.class,
            Kind::CurrentThread(c) => *c,
        };
        super::simd_of(pinned.unwrap_or_else(crate::cpu::class::process_class))
    }

    /// A snapshot of the counters of this executor's buffer pool (the
    /// process's pool for [`Executor::process`]): only this executor's
    /// calls move them.
    ///
    /// ```
    /// use forge::runtime::Executor;
    /// let exec = Executor::new(1);
    /// let before = exec.memory_stats();
    /// let t = exec.run(|| forge::Tensor::<f32>::zeros(&[1000]));
    /// assert_eq!(exec.memory_stats().misses, before.misses + 1);
    /// drop(t); // back to the executor's pool, whatever thread drops it
    /// assert_eq!(exec.memory_stats().live_bytes, before.live_bytes);
    /// ```
    pub fn memory_stats(&self) -> MemoryStats {
        match &self.inner.memory {
            Some(p) => p.stats(),
            None => crate::cpu::memory::stats_of_process(),
        }
    }

    /// Gives every free buffer of this executor's pool back to the
    /// operating system; returns the bytes released (see
    /// [`trim_memory`](super::trim_memory)).
    ///
    /// ```
    /// let exec = forge::runtime::Executor::new(1);
    /// drop(exec.run(|| forge::Tensor::<f32>::zeros(&[1000])));
    /// assert_eq!(exec.trim_memory(), 4096);
    /// assert_eq!(exec.memory_stats().held_bytes, 0);
    /// ```
    pub fn trim_memory(&self) -> usize {
        self.run(super::trim_memory)
    }

    /// Sets the most bytes this executor's pool keeps free (see
    /// [`set_memory_ceiling`](super::set_memory_ceiling)).
    ///
    /// ```
    /// let exec = forge::runtime::Executor::new(1);
    /// exec.set_memory_ceiling(1 << 20);
    /// assert_eq!(exec.memory_stats().ceiling_bytes, 1 << 20);
    /// ```
    pub fn set_memory_ceiling(&self, bytes: usize) {
        self.run(|| super::set_memory_ceiling(bytes))
    }

    /// Calls running or queued on this executor now.
    ///
    /// ```
    /// assert_eq!(forge::runtime::Executor::new(1).pending(), 0);
    /// ```
    pub fn pending(&self) -> usize {
        self.inner.busy.load(Ordering::SeqCst)
    }

    /// Runs `f` on the calling thread, blocking, with this executor's
    /// threads and CPU class for every forge call inside; answers what `f`
    /// returns. Other threads may run calls on the same executor at the
    /// same time (they share its workers).
    ///
    /// # Panics
    /// When `f` panics (the panic passes through).
    ///
    /// ```
    /// use forge::runtime::{num_threads, Executor};
    /// let exec = Executor::new(2);
    /// assert_eq!(exec.run(num_threads), 2);
    /// assert_eq!(Executor::current_thread().run(num_threads), 1);
    /// ```
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        self.inner.busy.fetch_add(1, Ordering::SeqCst);
        struct Done<'a>(&'a AtomicUsize);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let _done = Done(&self.inner.busy);
        self.inner.enter(f)
    }

    /// [`run`](Executor::run) with `arena`: the call's outputs and scratch
    /// land in the arena, which the call rewinds first (see [`Arena`]),
    /// and its kernels use this executor's threads and CPU class. The
    /// `&mut` borrow makes the arena serve one call at a time.
    ///
    /// # Panics
    /// When `f` panics (the panic passes through).
    ///
    /// ```
    /// use forge::prelude::*;
    /// use forge::runtime::{Arena, Executor};
    /// let model = Linear::<f32>::new(4, 2, &mut Rng::new(0));
    /// let x = Tensor::<f32>::ones(&[3, 4]);
    /// let exec = Executor::new(2);
    /// let mut arena = Arena::new("replies");
    /// for _ in 0..3 {
    ///     let y = exec.run_in(&mut arena, || no_grad(|| model.forward(x.clone())));
    ///     assert_eq!(y.shape(), &[3, 2]);
    /// }
    /// assert_eq!(arena.calls(), 3);
    /// ```
    pub fn run_in<R>(&self, arena: &mut Arena, f: impl FnOnce() -> R) -> R {
        self.run(|| arena.run(f))
    }

    /// Queues `f` on this executor and answers its [`Deferred`] at once.
    /// Calls submitted to one executor run one after another, in the order
    /// submitted, on a thread of the executor (on the caller, at once, for
    /// [`current_thread`](Executor::current_thread)). `f` owns what it
    /// needs, so the caller's inputs may go at once; a panic in `f` is
    /// kept in the `Deferred`, and the executor goes on with the next
    /// call.
    ///
    /// Because the calls of one executor run one at a time, a call must not
    /// wait for (or drop) the `Deferred` of another call submitted to the
    /// same executor: that call cannot start until this one ends, so both
    /// wait forever. Submit nested work to a second executor instead.
    ///
    /// ```
    /// use forge::runtime::Executor;
    /// let exec = Executor::new(2);
    /// let calls: Vec<_> = (0..4).map(|i| exec.submit(move || i * i)).collect();
    /// let got: Vec<i32> = calls.iter().map(|d| *d.wait()).collect();
    /// assert_eq!(got, [0, 1, 4, 9]);
    /// ```
    pub fn submit<T: Send + Sync + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Deferred<T> {
        self.inner.busy.fetch_add(1, Ordering::SeqCst);
        self.queue(f)
    }

    /// [`submit`](Executor::submit), unless the executor is busy (a call
    /// running or queued, blocking or submitted): then the call is not
    /// queued.
    ///
    /// # Errors
    /// [`ForgeError::Contended`] when the executor is busy.
    ///
    /// ```
    /// use forge::runtime::Executor;
    /// let exec = Executor::new(1);
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// let first = exec.try_submit(move || rx.recv().unwrap()).unwrap();
    /// let second = exec.try_submit(|| ());
    /// assert_eq!(second.unwrap_err().kind(), "contended");
    /// tx.send(()).unwrap();
    /// first.wait();
    /// ```
    pub fn try_submit<T: Send + Sync + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Deferred<T>> {
        if self
            .inner
            .busy
            .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Err(ForgeError::Contended {
                resource: self.inner.name.clone(),
            });
        }
        Ok(self.queue(f))
    }

    /// Queues `f`, its `busy` count already taken.
    fn queue<T: Send + Sync + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Deferred<T> {
        let slot = Slot::new();
        let job_slot = Arc::clone(&slot);
        let inner = Arc::downgrade(&self.inner);
        let job: Job = Box::new(move || {
            job_slot.start();
            let outcome = match inner.upgrade() {
                Some(inner) => {
                    let r = catch_unwind(AssertUnwindSafe(|| inner.enter(f)));
                    inner.busy.fetch_sub(1, Ordering::SeqCst);
                    r
                }
                None => catch_unwind(AssertUnwindSafe(f)),
            };
            job_slot.finish(outcome);
        });
        if let Kind::CurrentThread(_) = self.inner.kind {
            job();
            return Deferred { slot };
        }
        let mut q = self.inner.queue.lock().unwrap_or_else(|e| e.into_inner());
        let (tx, _) = q.get_or_insert_with(|| {
            let (tx, rx) = channel::<Job>();
            let name = format!("forge-{}", self.inner.name);
            let handle = std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .expect("forge: cannot start an executor's thread");
            (tx, handle)
        });
        tx.send(job)
            .expect("an executor's thread lives as long as its queue");
        Deferred { slot }
    }
}

impl Inner {
    /// Runs `f` with this executor's settings on the calling thread.
    fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        freelists::with_target(self.memory.clone(), || self.enter_threads(f))
    }

    /// Runs `f` with this executor's threads and class on the calling thread.
    fn enter_threads<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.kind {
            Kind::Process => with_local(None, f),
            Kind::Own(local) => with_local(Some(local.clone()), f),
            Kind::CurrentThread(class) => with_local(
                Some(Local {
                    settings: Settings {
                        threads: 1,
                        class: *class,
                    },
                    pool: None,
                }),
                f,
            ),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the queue ends the executor's thread after its queued
        // calls (each of which holds only a weak reference to `self`).
        if let Some((tx, handle)) = self
            .queue
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            drop(tx);
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.memory_stats();
        f.debug_struct("Executor")
            .field("name", &self.inner.name)
            .field("threads", &self.threads())
            .field("cpu_class", &self.cpu_class())
            .field("pending", &self.pending())
            .field(
                "memory",
                &format_args!(
                    "{} pool: {} B live, {} B held, {} reuses, {} requests to the OS",
                    if self.inner.memory.is_some() {
                        "own"
                    } else {
                        "process"
                    },
                    m.live_bytes,
                    m.held_bytes,
                    m.hits,
                    m.misses
                ),
            )
            .finish()
    }
}

/// A line per live executor: its name, threads, CPU class and calls
/// pending (for [`describe`](super::describe)).
pub(super) fn live() -> Vec<Executor> {
    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    live.iter()
        .filter_map(Weak::upgrade)
        .map(|inner| Executor { inner })
        .collect()
}
