//! Thread-local switch that turns recording off (`no_grad`).

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether operations on this thread are currently recorded on the tape.
///
/// ```
/// assert!(forge::is_grad_enabled());
/// forge::no_grad(|| assert!(!forge::is_grad_enabled()));
/// ```
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Restores the previous recording state when dropped.
///
/// ```
/// {
///     let _g = forge::NoGradGuard::new();
///     assert!(!forge::is_grad_enabled());
/// }
/// assert!(forge::is_grad_enabled());
/// ```
pub struct NoGradGuard {
    prev: bool,
}

impl NoGradGuard {
    /// Turns recording off on this thread until the guard is dropped.
    ///
    /// ```
    /// let _g = forge::NoGradGuard::new();
    /// ```
    pub fn new() -> Self {
        Self::set(false)
    }

    pub(crate) fn set(enabled: bool) -> Self {
        let prev = GRAD_ENABLED.with(|g| g.replace(enabled));
        NoGradGuard { prev }
    }
}

impl Default for NoGradGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.prev));
    }
}

/// Runs `f` with recording turned off on this thread: no graph is built, as
/// in PyTorch's `torch.no_grad()`. Use it for inference and for updates of
/// parameters.
///
/// ```
/// let w = forge::Tensor::<f32>::ones(&[2]).requires_grad();
/// let y = forge::no_grad(|| &w * 2.0);
/// assert!(!y.is_tracked());
/// ```
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _g = NoGradGuard::new();
    f()
}
