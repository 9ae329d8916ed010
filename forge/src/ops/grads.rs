//! Shared pieces of backward rules.

use crate::cpu::threads::join;

/// The two gradients of a rule, each computed when `needs` asks for it;
/// both at once on two threads ([`join`]) when both are needed. Each is a
/// whole op with its own fixed chunks, so the values are the same either
/// way. Two threads on one op each, one after the other, lost more: each
/// gradient of a small convolution splits poorly (ResNet-18's 1x1
/// downsampling layers ran no faster on 2 threads than on 1) and the
/// second waited for the first's last chunk. Sum of ResNet-18's
/// convolution backward times at batch 16 and 2 threads: 14.5-14.7 ms one
/// after the other, 12.5-12.9 ms joined (commit cdbed9e).
pub(super) fn both<A: Send, B: Send>(
    needs: [bool; 2],
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (Option<A>, Option<B>) {
    match needs {
        [true, true] => {
            let (a, b) = join(a, b);
            (Some(a), Some(b))
        }
        [na, nb] => (na.then(a), nb.then(b)),
    }
}
