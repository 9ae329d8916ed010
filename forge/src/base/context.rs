//! The layer context: which layers of a [`Sequential`](crate::nn::Sequential)
//! the current thread is inside, read by forge's own shape messages.
//!
//! A `Sequential` enters a frame (its element's index and type) around each
//! element's `forward` and leaves it when the element returns, also when
//! it unwinds. A shape check that fails inside reads the frames and puts
//! them before its own message
//! (`Sequential layer 2 (Linear): Linear(4 -> 2): expected ...`), so the
//! panic names the failing layer without forge catching the panic or
//! touching the process's panic hook. The context is per thread and costs
//! a push and a pop per element; nothing reads it unless a check fails.

use std::cell::RefCell;
use std::fmt;

/// One element of a `Sequential` the thread is inside.
#[derive(Clone, Copy)]
struct Frame {
    index: usize,
    type_name: &'static str,
}

thread_local! {
    /// The frames this thread is inside, outermost first.
    static FRAMES: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
}

/// While alive, the current thread is inside one element of a
/// `Sequential`; dropping it (on return or while unwinding) leaves it.
pub(crate) struct LayerScope {
    depth: usize,
}

/// Enters element `index` (of type `type_name`, without its path) of a
/// `Sequential` on this thread until the returned scope is dropped.
pub(crate) fn enter(index: usize, type_name: &'static str) -> LayerScope {
    FRAMES.with(|f| {
        let mut f = f.borrow_mut();
        f.push(Frame { index, type_name });
        LayerScope { depth: f.len() }
    })
}

impl Drop for LayerScope {
    fn drop(&mut self) {
        // Truncate rather than pop: a scope dropped out of order (leaked
        // inner scope) cannot leave a stale frame behind.
        FRAMES.with(|f| f.borrow_mut().truncate(self.depth - 1));
    }
}

/// The context as a message prefix, empty outside every `Sequential`:
/// `Sequential layer 1 (Sequential): Sequential layer 0 (Linear): `.
pub(crate) struct Prefix;

impl fmt::Display for Prefix {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        FRAMES.with(|f| {
            f.borrow().iter().try_for_each(|fr| {
                write!(out, "Sequential layer {} ({}): ", fr.index, fr.type_name)
            })
        })
    }
}

/// The layers the current thread is inside, as forge's shape messages
/// name them (`"Sequential layer 1 (Sequential): Sequential layer 0 (Linear): "`),
/// or an empty string outside every `Sequential`.
#[cfg(test)]
pub(crate) fn prefix() -> String {
    Prefix.to_string()
}

/// Panics with `args` after the layer context (see the module docs), at
/// the caller's location.
#[track_caller]
#[cold]
#[inline(never)]
pub(crate) fn fail(args: fmt::Arguments<'_>) -> ! {
    panic!("{Prefix}{args}")
}

/// `assert!` whose message names the layers the thread is inside (see
/// [`fail`]); the form without a message says which condition failed.
macro_rules! shape_assert {
    // The condition is bound first: `!(a >= b)` on floats would read as
    // `a < b`, which it is not for NaN.
    ($cond:expr $(,)?) => {
        let holds: bool = $cond;
        if !holds {
            $crate::base::context::fail(format_args!(
                "assertion failed: {}",
                stringify!($cond)
            ))
        }
    };
    ($cond:expr, $($arg:tt)+) => {
        let holds: bool = $cond;
        if !holds {
            $crate::base::context::fail(format_args!($($arg)+))
        }
    };
}

/// `panic!` whose message names the layers the thread is inside (see
/// [`fail`]).
macro_rules! shape_panic {
    ($($arg:tt)+) => {
        $crate::base::context::fail(format_args!($($arg)+))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_nest_and_leave_on_unwind() {
        assert_eq!(prefix(), "");
        let outer = enter(1, "Sequential");
        {
            let _inner = enter(0, "Linear");
            assert_eq!(
                prefix(),
                "Sequential layer 1 (Sequential): Sequential layer 0 (Linear): "
            );
        }
        assert_eq!(prefix(), "Sequential layer 1 (Sequential): ");
        let r = std::panic::catch_unwind(|| {
            let _s = enter(3, "Relu");
            shape_assert!(1 + 1 == 3, "two is {}", 2);
        });
        let msg = r.unwrap_err().downcast::<String>().unwrap();
        assert_eq!(
            *msg,
            "Sequential layer 1 (Sequential): Sequential layer 3 (Relu): two is 2"
        );
        assert_eq!(prefix(), "Sequential layer 1 (Sequential): ");
        drop(outer);
        assert_eq!(prefix(), "");
        let r = std::panic::catch_unwind(|| shape_panic!("plain {}", 1));
        assert_eq!(*r.unwrap_err().downcast::<String>().unwrap(), "plain 1");
    }
}
