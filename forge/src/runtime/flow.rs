//! [`Flow`]: what a progress handler answers.

/// What a progress handler answers after each unit of work of a long call
/// ([`evaluate`](crate::data::evaluate), [`fit`](crate::data::fit), and
/// the generation loops that take one): go on, or stop.
///
/// A handler has the shape `FnMut(done, total) -> Flow`: `done` units of
/// `total` are finished (batches, steps, tokens). It is called on one
/// thread at a time, never concurrently, so it may hold plain mutable
/// state (a progress bar, a counter). Answering [`Flow::Cancel`] ends the
/// call with [`ForgeError::Cancelled`](crate::ForgeError::Cancelled) before
/// the next unit starts: the call's effects stop at a unit boundary.
///
/// ```
/// use forge::runtime::Flow;
/// let mut seen = vec![];
/// let mut handler = |done: usize, total: usize| {
///     seen.push((done, total));
///     if done >= 2 { Flow::Cancel } else { Flow::Continue }
/// };
/// assert_eq!(handler(1, 5), Flow::Continue);
/// assert_eq!(handler(2, 5), Flow::Cancel);
/// assert_eq!(seen, [(1, 5), (2, 5)]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flow {
    /// Go on with the next unit of work.
    Continue,
    /// Stop before the next unit: the call answers
    /// [`ForgeError::Cancelled`](crate::ForgeError::Cancelled).
    Cancel,
}

impl Flow {
    /// Whether the handler asked to stop.
    ///
    /// ```
    /// assert!(forge::runtime::Flow::Cancel.is_cancel());
    /// ```
    pub fn is_cancel(self) -> bool {
        self == Flow::Cancel
    }
}
