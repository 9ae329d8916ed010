//! The dynamic int8 product with its rows split over the threads: each
//! thread quantizes its own block of rows, multiplies it and runs the
//! epilogue on it, end to end.
//!
//! [`Int8Weight::linear_whole`] takes the range on the calling thread, then
//! hands the pool its quantization pass and its product separately, and
//! the product splits the weight's columns, so each thread reads every
//! quantized row. Split by rows, a thread's bytes and outputs stay in its
//! own cache, and the next layer's same split finds its rows there.
//!
//! The scale and the zero point come from the range of all the rows: each
//! block's minimum and maximum are taken by a first parallel loop on the
//! thread the second one (quantization, product, epilogue) gives the block,
//! so that the rows are read where the previous layer wrote them (two
//! hand-offs a layer); the epilogue's per-column terms are made once.
//! Every element is then computed as in one product over all the rows (the
//! quantization is element-wise, the `i32` sums exact, the epilogue
//! element-wise in the same order), so the bits do not depend on the split
//! or the thread count (`tests`).

use super::int8::{activation_params, Int8Weight};
use crate::cpu::memory::Storage;
use crate::cpu::qgemm::{padded_k, quantize_rows, range};
use crate::cpu::threads::{num_threads, parallel_for, worth_splitting};
use std::sync::Mutex;

/// The fewest rows in a block: the AMX path's chunk of rows (two tiles of
/// 16). The blocks' edges fall on multiples of it where the rows allow, so
/// that no block leaves a partly filled chunk in the middle of the rows.
const PART_ROWS: usize = 32;

/// One thread's block: its first row, its row count and its rows of each
/// buffer.
struct Part<'a> {
    r0: usize,
    rows: usize,
    a: &'a mut [u8],
    acc: &'a mut [i32],
    y: &'a mut [f32],
}

impl Int8Weight {
    /// [`linear_pooled`](Self::linear_pooled) with the rows split into one
    /// block per thread, when there are at least two threads, at least
    /// [`PART_ROWS`] rows per block and the whole op (quantization,
    /// product, epilogue) is worth its two hand-offs
    /// ([`worth_splitting`]); `None` otherwise.
    ///
    /// `x` must be whole rows of `in_features` (checked by the caller).
    pub(crate) fn linear_by_rows(
        &self,
        x: &[f32],
        bias: Option<&[f32]>,
        act: Option<fn(&mut [f32])>,
    ) -> Option<Storage<f32>> {
        let (n, k) = (self.out_features(), self.in_features());
        let m = x.len() / k;
        let parts = num_threads().min(m / PART_ROWS);
        if parts < 2 || n == 0 {
            return None;
        }
        // quantization (as `quantize_rows` estimates it), product, epilogue
        let cost = m * k / 4 + self.product_cost_ns(m) + m * n / 8;
        if !worth_splitting(cost, 2) {
            return None;
        }
        Some(self.linear_in_parts(x, bias, act, parts))
    }

    /// [`linear_pooled`](Self::linear_pooled) in `parts` blocks of rows
    /// (see [`row_bound`]), one chunk of one parallel loop each.
    ///
    /// # Panics
    /// When `parts` is 0 or more than the rows, or as
    /// [`linear`](Self::linear).
    pub(crate) fn linear_in_parts(
        &self,
        x: &[f32],
        bias: Option<&[f32]>,
        act: Option<fn(&mut [f32])>,
        parts: usize,
    ) -> Storage<f32> {
        let (n, k) = (self.out_features(), self.in_features());
        let m = x.len() / k;
        assert!(
            parts > 0 && parts <= m,
            "Int8Weight: {m} rows in {parts} blocks"
        );
        let kp = padded_k(k);
        let bounds: Vec<usize> = (0..=parts).map(|i| row_bound(i, parts, m)).collect();
        let (scale, zero_point) = block_range_params(x, k, &bounds);
        let terms = self.epilogue_terms(scale, zero_point);
        let mut a = Storage::<u8>::stale(m * kp);
        let mut acc = Storage::<i32>::stale(m * n);
        let mut y = Storage::<f32>::stale(m * n);
        // each block's rows of every buffer, claimed once by the chunk that
        // runs it (the lock is never contended)
        let mut blocks = Vec::with_capacity(parts);
        let (mut a_rest, mut acc_rest, mut y_rest) = (&mut a[..], &mut acc[..], &mut y[..]);
        for i in 0..parts {
            let r0 = bounds[i];
            let rows = bounds[i + 1] - r0;
            let (a_i, a_r) = std::mem::take(&mut a_rest).split_at_mut(rows * kp);
            let (acc_i, acc_r) = std::mem::take(&mut acc_rest).split_at_mut(rows * n);
            let (y_i, y_r) = std::mem::take(&mut y_rest).split_at_mut(rows * n);
            (a_rest, acc_rest, y_rest) = (a_r, acc_r, y_r);
            blocks.push(Mutex::new(Part {
                r0,
                rows,
                a: a_i,
                acc: acc_i,
                y: y_i,
            }));
        }
        parallel_for(parts, |i| {
            let mut guard = blocks[i].lock().unwrap_or_else(|e| e.into_inner());
            let p = &mut *guard;
            // both run inline here: this chunk is the block's only thread
            quantize_rows(
                &x[p.r0 * k..(p.r0 + p.rows) * k],
                k,
                kp,
                scale,
                zero_point,
                p.a,
            );
            self.product_with(p.rows, p.a, &terms, bias, act, p.acc, p.y);
        });
        drop(blocks);
        y
    }
}

/// [`range_params`](super::int8::range_params)`(x)` (`x` rows of `k`, nonempty), each block of rows
/// `bounds[i]..bounds[i + 1]` scanned by the chunk of a parallel loop that
/// the product's loop gives the same thread, so that a block's rows are
/// read where its previous layer wrote them, not pulled to the calling
/// thread. The same result: the blocks' minima and maxima (NaNs skipped,
/// zeros as `+0`) combine exactly.
fn block_range_params(x: &[f32], k: usize, bounds: &[usize]) -> (f32, i32) {
    let parts = bounds.len() - 1;
    let empty = (f32::INFINITY, f32::NEG_INFINITY);
    let ranges: Vec<Mutex<(f32, f32)>> = (0..parts).map(|_| Mutex::new(empty)).collect();
    parallel_for(parts, |i| {
        let r = range(&x[bounds[i] * k..bounds[i + 1] * k]);
        *ranges[i].lock().unwrap_or_else(|e| e.into_inner()) = r;
    });
    let (lo, hi) = ranges.iter().fold(empty, |(lo, hi), r| {
        let (l, h) = *r.lock().unwrap_or_else(|e| e.into_inner());
        (lo.min(l), hi.max(h))
    });
    activation_params(lo + 0.0, hi + 0.0)
}

/// The first row of block `i` of `parts` over `m` rows (`m` for `i ==
/// parts`): `i m / parts` rounded to the nearest multiple of [`PART_ROWS`]
/// when the blocks are at least that long, so that the blocks differ by
/// less than `PART_ROWS` rows and every one but the last starts and ends on
/// a multiple of it.
fn row_bound(i: usize, parts: usize, m: usize) -> usize {
    let at = i * m / parts;
    if i == parts || m / parts < PART_ROWS {
        return at;
    }
    (at + PART_ROWS / 2) / PART_ROWS * PART_ROWS
}

#[cfg(test)]
mod tests;
