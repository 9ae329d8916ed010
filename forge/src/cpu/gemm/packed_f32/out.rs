//! Where a packed product's output goes ([`Out`]): its layout in
//! segments, and the epilogues run on each block of finished outputs (a
//! bias per column or per row, an activation).

use super::Shared;

/// Where a product's `m x n` output goes: element `(i, j)` at
/// `ptr + (j / seg) * seg_stride + j % seg + i * ldc`. A plain row-major
/// matrix is one segment; a convolution's `[o, images x positions]`
/// product written straight into `[images, o, positions]` has one segment
/// per image.
///
/// An output may carry an epilogue ([`Out::with_epilogue`]): a bias per
/// column that each element starts from, and an activation applied to each
/// block of finished outputs while it is in cache.
#[derive(Clone, Copy)]
pub(crate) struct Out {
    ptr: Shared,
    pub(super) ldc: usize,
    seg: usize,
    seg_stride: usize,
    /// One value per column that every row starts from (null: none), read
    /// only.
    pub(super) bias: Shared,
    /// Floats at `bias`.
    pub(super) bias_len: usize,
    /// One value per row added to every element of the row once its sum
    /// is final, before `act` (null: none), read only.
    pub(super) row_bias: Shared,
    /// Floats at `row_bias`.
    pub(super) row_bias_len: usize,
    /// Applied to every element once its sum is final.
    pub(super) act: Option<fn(&mut [f32])>,
}

impl Out {
    /// A row-major output with rows `ldc` apart.
    pub(crate) fn row_major(ptr: *mut f32, ldc: usize) -> Self {
        Out {
            ptr: Shared(ptr),
            ldc,
            seg: usize::MAX,
            seg_stride: 0,
            bias: Shared(std::ptr::null_mut()),
            bias_len: 0,
            row_bias: Shared(std::ptr::null_mut()),
            row_bias_len: 0,
            act: None,
        }
    }

    /// Columns cut into segments of `seg` (a multiple of 16), segment `s`
    /// at `ptr + s * seg_stride`, rows `ldc` apart within a segment.
    ///
    /// # Panics
    /// When `seg` is not a positive multiple of 16.
    pub(crate) fn segmented(ptr: *mut f32, ldc: usize, seg: usize, seg_stride: usize) -> Self {
        assert!(
            seg > 0 && seg.is_multiple_of(16),
            "Out: segments of whole vectors"
        );
        Out {
            ptr: Shared(ptr),
            ldc,
            seg,
            seg_stride,
            bias: Shared(std::ptr::null_mut()),
            bias_len: 0,
            row_bias: Shared(std::ptr::null_mut()),
            row_bias_len: 0,
            act: None,
        }
    }

    /// The same output with an epilogue: element `(i, j)` becomes
    /// `act(bias[j] + a b)`, with exactly the bits of the product with
    /// `beta = 1` over an output holding `bias` in every row, followed by
    /// `act` over the whole output (the kernel adds the bias, held in
    /// registers, to each tile's first `k` block of products as it stores
    /// them, one rounding as with that output; `act` runs
    /// on each tile's rows after its last block, and must compute each
    /// element on its own, whatever the slice it is given). The product
    /// must then be called with `beta = 0` (the bias replaces the old
    /// output); `bias`, when given, holds at least `n` floats and outlives
    /// the call (the product's safety contract).
    pub(crate) fn with_epilogue(self, bias: Option<&[f32]>, act: Option<fn(&mut [f32])>) -> Self {
        Out {
            bias: Shared(bias.map_or(std::ptr::null_mut(), |b| b.as_ptr().cast_mut())),
            bias_len: bias.map_or(0, <[f32]>::len),
            act,
            ..self
        }
    }

    /// The same output with an epilogue by rows: element `(i, j)` becomes
    /// `act(s + bias[i])`, `s` its finished sum (`beta c + a b`), with
    /// exactly the bits of the product followed by a pass adding `bias[i]`
    /// to row `i` and then `act` over the whole output: both run on each
    /// block of rows after its last `k` block, while it is in cache. A
    /// convolution's `[o, positions]` product with its bias per output
    /// channel. `bias`, when given, holds at least `m` floats and outlives
    /// the call (the product's safety contract); `act` computes each
    /// element on its own, whatever the slice it is given.
    pub(crate) fn with_row_epilogue(
        self,
        bias: Option<&[f32]>,
        act: Option<fn(&mut [f32])>,
    ) -> Self {
        Out {
            row_bias: Shared(bias.map_or(std::ptr::null_mut(), |b| b.as_ptr().cast_mut())),
            row_bias_len: bias.map_or(0, <[f32]>::len),
            act,
            ..self
        }
    }

    /// The address of element `(i, j)`, computed without dereferencing.
    pub(super) fn at(&self, i: usize, j: usize) -> *mut f32 {
        self.ptr
            .0
            .wrapping_add((j / self.seg) * self.seg_stride + j % self.seg + i * self.ldc)
    }
}

/// Panels of finished outputs an activation epilogue runs on at once:
/// one call per row of up to 256 columns, where a call per 16-column half
/// tile cost more than GPT-2's `gelu_tanh` itself (the vector-math
/// dispatch per call), while the block (at most `MAX_CHUNK_TILES * MR`
/// rows of 256 floats) is still in cache.
pub(super) const ACT_PANELS: usize = 8;

/// Runs `out`'s finishing epilogue on rows `r0..r1`, columns `c0..c1`: the
/// row's bias added (when there is one), then the activation (when there
/// is one), on each contiguous piece of a row (a row's columns are
/// contiguous within a segment).
///
/// # Safety
/// The block lies inside `out`'s buffer and nothing else accesses it during
/// the call; a row bias holds at least `r1` floats and is alive.
pub(super) unsafe fn epilogue_rows(out: Out, r0: usize, r1: usize, c0: usize, c1: usize) {
    for i in r0..r1 {
        // SAFETY: row `i < r1` of the bias, inside it (the caller's
        // contract), read only.
        let b = (!out.row_bias.0.is_null()).then(|| unsafe { *out.row_bias.0.add(i) });
        let mut c = c0;
        while c < c1 {
            let end = if out.seg == usize::MAX {
                c1
            } else {
                c1.min((c / out.seg + 1) * out.seg)
            };
            // SAFETY: columns `c..end` of row `i` lie in one segment, so
            // they are contiguous, and inside the block (the caller's
            // contract).
            let piece = unsafe { std::slice::from_raw_parts_mut(out.at(i, c), end - c) };
            if let Some(b) = b {
                piece.iter_mut().for_each(|v| *v += b);
            }
            if let Some(act) = out.act {
                act(piece);
            }
            c = end;
        }
    }
}
