//! Whether any tool is on: the one flag the hot path reads, below the
//! hooks and the tools that switch them on (so no file imports its own
//! importer).

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many tool switches are on in the process (scopes on any thread and
/// process-wide flags).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Whether any tool is on anywhere in the process (one relaxed load).
#[inline]
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed) != 0
}

/// Counts one more tool switch as on.
pub(crate) fn acquire() {
    ACTIVE.fetch_add(1, Ordering::Relaxed);
}

/// Counts one tool switch as off again.
pub(crate) fn release() {
    ACTIVE.fetch_sub(1, Ordering::Relaxed);
}
