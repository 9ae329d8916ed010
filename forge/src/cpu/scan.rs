//! Scans along one axis (running sums and products) of a tensor viewed as
//! `[outer, len, inner]`: the running value of each `inner` column is
//! carried down the axis, one contiguous row of `inner` elements at a time
//! (a loop the compiler vectorises). Work is split into fixed chunks of
//! whole `[len, inner]` blocks, so results are the same for any thread
//! count.

use super::elementwise::{build_in, CHUNK};
use super::memory::Storage;
use std::mem::MaybeUninit;

/// Which running value a scan carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanOp {
    /// Running sum (`cumsum`).
    Sum,
    /// Running product (`cumprod`).
    Prod,
}

/// The inclusive scan of `x` (viewed as `[outer, len, inner]`) along the
/// middle axis, from the first index to the last, or from the last to the
/// first when `reverse`.
///
/// # Panics
/// When `x.len() != outer * len * inner`.
pub fn scan<E>(
    x: &[E],
    outer: usize,
    len: usize,
    inner: usize,
    op: ScanOp,
    reverse: bool,
) -> Storage<E>
where
    E: Copy + Send + Sync + std::ops::Add<Output = E> + std::ops::Mul<Output = E>,
{
    assert_eq!(
        x.len(),
        outer * len * inner,
        "scan: {} values for [{outer}, {len}, {inner}]",
        x.len()
    );
    let block = len * inner;
    let blocks_per_chunk = (CHUNK / block.max(1)).max(1);
    build_in(x.len(), blocks_per_chunk * block.max(1), |offset, out| {
        if block == 0 {
            return;
        }
        for (b, dst) in out.chunks_mut(block).enumerate() {
            let start = offset + b * block;
            scan_block(&x[start..start + block], dst, inner, op, reverse);
        }
    })
}

/// One `[len, inner]` block.
fn scan_block<E>(src: &[E], dst: &mut [MaybeUninit<E>], inner: usize, op: ScanOp, reverse: bool)
where
    E: Copy + std::ops::Add<Output = E> + std::ops::Mul<Output = E>,
{
    let len = src.len() / inner;
    let row = |k: usize| if reverse { len - 1 - k } else { k };
    let first = row(0) * inner;
    for j in 0..inner {
        dst[first + j].write(src[first + j]);
    }
    for k in 1..len {
        let (prev, cur) = (row(k - 1) * inner, row(k) * inner);
        for j in 0..inner {
            // SAFETY: row `prev` was written in the previous iteration (or
            // just above, for the first row).
            let p = unsafe { dst[prev + j].assume_init() };
            let v = src[cur + j];
            dst[cur + j].write(match op {
                ScanOp::Sum => p + v,
                ScanOp::Prod => p * v,
            });
        }
    }
}

#[cfg(test)]
mod tests {

    /// Formerly a doc example (the `cpu` module is private).
    #[test]
    fn example_0() {
        use crate::cpu::scan::{scan, ScanOp};
        let x = [1.0f64, 2.0, 3.0, 4.0];
        assert_eq!(
            &scan(&x, 1, 4, 1, ScanOp::Sum, false)[..],
            &[1.0, 3.0, 6.0, 10.0]
        );
        assert_eq!(
            &scan(&x, 1, 4, 1, ScanOp::Prod, true)[..],
            &[24.0, 24.0, 12.0, 4.0]
        );
        // two columns (inner = 2)
        assert_eq!(
            &scan(&x, 1, 2, 2, ScanOp::Sum, false)[..],
            &[1.0, 2.0, 4.0, 6.0]
        );
    }
    use super::*;

    #[test]
    fn scans_match_a_naive_loop_for_any_thread_count() {
        let (outer, len, inner) = (9, 37, 301);
        let x: Vec<f64> = (0..outer * len * inner)
            .map(|i| ((i * 7) % 11) as f64 * 0.25 - 1.0)
            .collect();
        let _guard = crate::cpu::threads::lock_thread_count();
        for op in [ScanOp::Sum, ScanOp::Prod] {
            for reverse in [false, true] {
                crate::cpu::set_num_threads(1);
                let one = scan(&x, outer, len, inner, op, reverse).to_vec();
                crate::cpu::set_num_threads(2);
                let two = scan(&x, outer, len, inner, op, reverse).to_vec();
                assert_eq!(one, two);
                for a in 0..outer {
                    for j in 0..inner {
                        let mut acc: Option<f64> = None;
                        let ks: Vec<usize> = if reverse {
                            (0..len).rev().collect()
                        } else {
                            (0..len).collect()
                        };
                        for k in ks {
                            let v = x[(a * len + k) * inner + j];
                            let n = match (acc, op) {
                                (None, _) => v,
                                (Some(p), ScanOp::Sum) => p + v,
                                (Some(p), ScanOp::Prod) => p * v,
                            };
                            acc = Some(n);
                            assert_eq!(one[(a * len + k) * inner + j], n);
                        }
                    }
                }
            }
        }
    }
}
