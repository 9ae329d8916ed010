//! [`Deferred`]: the answer to a call submitted to an
//! [`Executor`](super::Executor), available at once and filled in when the
//! call ends.

use std::future::Future;
use std::panic::resume_unwind;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};

/// Where a submitted call is, from [`Deferred::status`].
///
/// ```
/// use forge::runtime::{Executor, Status};
/// let d = Executor::current_thread().submit(|| 1 + 1);
/// assert_eq!(d.status(), Status::Done);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Waiting for the executor.
    Queued,
    /// Running.
    Running,
    /// Finished with a value.
    Done,
    /// Finished with a panic: [`Deferred::wait`] panics with its message.
    Panicked,
}

/// What a call and its `Deferred` share.
pub(super) struct Slot<T> {
    status: Mutex<Status>,
    ended: Condvar,
    value: OnceLock<Result<T, String>>,
    waker: Mutex<Option<Waker>>,
}

impl<T> Slot<T> {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Slot {
            status: Mutex::new(Status::Queued),
            ended: Condvar::new(),
            value: OnceLock::new(),
            waker: Mutex::new(None),
        })
    }

    pub(super) fn start(&self) {
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = Status::Running;
    }

    /// Stores the call's outcome (a panic as its message) and wakes every
    /// waiter.
    pub(super) fn finish(&self, outcome: std::thread::Result<T>) {
        let (value, status) = match outcome {
            Ok(v) => (Ok(v), Status::Done),
            Err(p) => (Err(panic_message(p.as_ref())), Status::Panicked),
        };
        let _ = self.value.set(value);
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = status;
        self.ended.notify_all();
        if let Some(w) = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            w.wake();
        }
    }

    fn block(&self) -> &Result<T, String> {
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        while matches!(*s, Status::Queued | Status::Running) {
            s = self.ended.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        self.value
            .get()
            .expect("a finished call has stored its outcome")
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(a panic without a message)".to_string())
}

/// The answer to a submitted call ([`Executor::submit`](super::Executor::submit)):
/// returned at once, filled in when the call ends.
///
/// * [`wait`](Deferred::wait) blocks until the call ends and answers the
///   same value (a reference to it) every time it is asked.
/// * `&Deferred<T>` is a [`Future`] whose output is `&T`, so an async
///   caller awaits it on any async runtime (forge depends on none): the
///   executor's thread wakes the task when the call ends.
/// * The call owns everything it needs (its closure is `'static`): the
///   caller's inputs may be dropped at once.
/// * Dropping a `Deferred` waits for its call to end, so nothing the call
///   does outlives the handle that asked for it.
///
/// ```
/// use forge::runtime::Executor;
/// use forge::Tensor;
/// let exec = Executor::new(2);
/// let x = Tensor::<f32>::from_vec(vec![1.0, 2.0, 3.0], &[3]);
/// let d = exec.submit(move || x.exp().sum().item());
/// // `x` has moved into the call; the result outlives it.
/// let first = *d.wait();
/// assert_eq!(*d.wait(), first);
/// assert!((first - (1f32.exp() + 2f32.exp() + 3f32.exp())).abs() < 1e-4);
/// ```
pub struct Deferred<T> {
    pub(super) slot: Arc<Slot<T>>,
}

impl<T> Deferred<T> {
    /// Where the call is now.
    ///
    /// ```
    /// use forge::runtime::{Executor, Status};
    /// let d = Executor::new(1).submit(|| 7);
    /// d.wait();
    /// assert_eq!(d.status(), Status::Done);
    /// ```
    pub fn status(&self) -> Status {
        *self.slot.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until the call ends and answers its value; every later call
    /// answers the same value at once.
    ///
    /// # Panics
    /// When the call panicked: with `deferred call panicked: ` and the
    /// call's message, each time it is asked.
    ///
    /// ```
    /// use forge::runtime::Executor;
    /// let d = Executor::new(2).submit(|| vec![1, 2, 3]);
    /// assert_eq!(d.wait(), &[1, 2, 3]);
    /// assert_eq!(d.wait(), &[1, 2, 3]);
    /// ```
    pub fn wait(&self) -> &T {
        match self.slot.block() {
            Ok(v) => v,
            Err(m) => resume_unwind(Box::new(format!("deferred call panicked: {m}"))),
        }
    }

    /// Blocks until the call ends and answers its value, or the message of
    /// its panic, without panicking.
    ///
    /// ```
    /// use forge::runtime::Executor;
    /// let d = Executor::new(1).submit(|| -> u8 { panic!("no") });
    /// assert_eq!(d.try_wait().unwrap_err(), "no");
    /// ```
    pub fn try_wait(&self) -> Result<&T, &str> {
        self.slot.block().as_ref().map_err(String::as_str)
    }
}

impl<'a, T> Future for &'a Deferred<T> {
    type Output = &'a T;

    /// Ready once the call has ended (see [`Deferred::wait`], whose panic
    /// it shares).
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<&'a T> {
        let this: &'a Deferred<T> = *self;
        {
            // The waker is stored under the lock `finish` takes after
            // setting the status, so no wake-up is lost between the look
            // and the store.
            let mut w = this.slot.waker.lock().unwrap_or_else(|e| e.into_inner());
            if matches!(this.status(), Status::Queued | Status::Running) {
                *w = Some(cx.waker().clone());
                return Poll::Pending;
            }
        }
        Poll::Ready(this.wait())
    }
}

impl<T> Drop for Deferred<T> {
    fn drop(&mut self) {
        let _ = self.slot.block();
    }
}

impl<T> std::fmt::Debug for Deferred<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deferred")
            .field("status", &self.status())
            .finish()
    }
}
