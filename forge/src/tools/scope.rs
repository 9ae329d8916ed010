//! The layer path ops run under, for the profiler's grouping by layer: a
//! per-thread stack of path segments, pushed by every `Sequential` element
//! (its index, while a tool is on) and by [`layer_scope`] (a name, always).
//!
//! The `runtime` work replaces the `Sequential` side with its own layer
//! context; [`current_path`] is the one function that reads it.

use super::switch;
use std::cell::RefCell;

/// One segment of a layer path.
enum Segment {
    /// A `Sequential` element's index.
    Index(usize),
    /// A name given to [`layer_scope`].
    Name(String),
}

thread_local! {
    static PATH: RefCell<Vec<Segment>> = const { RefCell::new(Vec::new()) };
}

/// Pops its segment when dropped (also when the layer panics).
pub(crate) struct Frame(bool);

impl Drop for Frame {
    fn drop(&mut self) {
        if self.0 {
            PATH.with(|p| p.borrow_mut().pop());
        }
    }
}

/// Enters element `index` of a `Sequential` until the frame is dropped;
/// nothing (one relaxed load) when no tool is on.
pub(crate) fn enter_index(index: usize) -> Frame {
    if !switch::active() {
        return Frame(false);
    }
    PATH.with(|p| p.borrow_mut().push(Segment::Index(index)));
    Frame(true)
}

/// Runs `f` under the layer path segment `name` (joined to the enclosing
/// ones with `.`): the profiler groups the ops `f` runs, forward and
/// backward, under that path ([`Profile::layers`](super::Profile::layers)).
/// `Sequential` elements add their index by themselves; name the fields of
/// a hand-written model with this.
///
/// ```
/// use forge::prelude::*;
/// use forge::tools::{layer_scope, profile};
/// let x = Tensor::<f32>::ones(&[4]).requires_grad();
/// let (_, p) = profile(|| layer_scope("encoder", || layer_scope("act", || x.tanh())).sum().backward());
/// assert_eq!(p.events()[0].layer.as_deref(), Some("encoder.act"));
/// // The backward rule of the same op is credited to the same layer.
/// assert!(p.events().iter().any(|e| e.op == "tanh" && e.phase == forge::tools::Phase::Backward
///     && e.layer.as_deref() == Some("encoder.act")));
/// ```
pub fn layer_scope<R>(name: &str, f: impl FnOnce() -> R) -> R {
    PATH.with(|p| p.borrow_mut().push(Segment::Name(name.to_string())));
    let _frame = Frame(true);
    f()
}

/// The current layer path of this thread (`"2.0"`, `"encoder.1"`), or
/// `None` outside every layer.
pub(crate) fn current_path() -> Option<String> {
    PATH.with(|p| {
        let p = p.borrow();
        if p.is_empty() {
            return None;
        }
        let mut s = String::new();
        for (i, seg) in p.iter().enumerate() {
            if i > 0 {
                s.push('.');
            }
            match seg {
                Segment::Index(n) => s.push_str(&n.to_string()),
                Segment::Name(n) => s.push_str(n),
            }
        }
        Some(s)
    })
}
