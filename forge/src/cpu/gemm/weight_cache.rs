//! Weights packed once for inference: a layer's weight `W` (`[n, k]`,
//! row-major, as `Linear` stores it) multiplies its input as `x W^T`, and
//! the packed f32 kernel first copies `W^T` into its panel layout. That
//! copy is the same on every call while the weight does not change, so
//! calls outside autograd (`no_grad`) keep it: the packed operand is the
//! weight storage's derived data ([`Storage::derived`]), built once per
//! write version of the storage outside any arena, emptied by the next
//! write (an optimizer step, a copy-on-write, any `&mut` access) and
//! dropped with the storage. Memory: one packed copy per weight (its
//! columns rounded up to whole 32-wide panels), only for weights used by
//! no-grad products.
//!
//! The products have [`gemm`](super::gemm)'s bits: packing is a copy, and
//! the kernel, the `k` blocking and the split of the work across threads
//! are the ones `gemm` uses for the same shapes (`tests` checks both
//! thread counts). Convolution and recurrent paths can use
//! [`gemm_weight_t`] the same way for their weights.

use super::packed_f32::{self, ASrc, Out, PackedB};
use super::prepacked::as_f32;
use super::{macs_per_ns, num_threads, packed_f32_applies, Mat, PARALLEL_MIN_NS};
use crate::base::Float;
use crate::cpu::memory::Storage;

/// `W^T` (`k x n`) of a row-major `[n, k]` weight, packed.
struct PackedWeightT {
    k: usize,
    n: usize,
    b: PackedB,
}

/// `c = x W^T + beta c` (`x` row-major `m x k`, `w` the storage of a
/// row-major `[n, k]` weight, `c` row-major `m x n`) with `W^T` packed once
/// per write version of `w` (see the module docs); `false`, with nothing
/// written, where [`gemm`](super::gemm) would not take the packed kernel
/// (call it instead). The same bits as `gemm` with `Mat::transposed(w, k)`.
///
/// With an epilogue (a Linear layer's no-grad forward): `c = act(x W^T +
/// bias)`, `bias` one value per column added before the products (with
/// `beta` 0), `act` applied to each block of finished outputs while it is
/// in cache: the bits of `beta = 1` over `c` holding `bias` in every row,
/// then `act` over `c` (`act` must compute each element on its own).
///
/// # Panics
/// When `x` is shorter than `m x k`, `w` than `n x k`, `c` than `m x n`, or
/// `bias` than `n`, or a bias comes with a non-zero `beta`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_weight_t<E: Float>(
    m: usize,
    k: usize,
    n: usize,
    x: &[E],
    w: &Storage<E>,
    beta: E,
    bias: Option<&[E]>,
    act: Option<fn(&mut [f32])>,
    c: &mut [E],
) -> bool {
    if !packed_f32_applies::<E>(m, k, n) {
        return false;
    }
    assert!(x.len() >= m * k, "gemm: lhs buffer too small");
    assert!(w.len() >= n * k, "gemm: weight buffer too small");
    assert!(c.len() >= m * n, "gemm: output buffer too small");
    let (Some(xf), Some(betaf)) = (as_f32(x), as_f32(std::slice::from_ref(&beta))) else {
        return false;
    };
    let biasf = match bias {
        Some(b) => {
            assert!(b.len() >= n, "gemm: bias shorter than the output's columns");
            let Some(bf) = as_f32(b) else {
                return false;
            };
            Some(bf)
        }
        None => None,
    };
    let Some(packed) = w.derived(|| {
        let wf = as_f32(&w[..n * k])?;
        Some(PackedWeightT {
            k,
            n,
            b: PackedB::new(k, n, Mat::transposed(wf, k)),
        })
    }) else {
        return false;
    };
    if (packed.k, packed.n) != (k, n) {
        // the slot holds this storage read as another shape
        return false;
    }
    let threads = num_threads();
    let parts = if threads > 1 && m * n * k / macs_per_ns::<E>() >= PARALLEL_MIN_NS {
        threads
    } else {
        1
    };
    let a = Mat::row_major(xf, k);
    let out = Out::row_major(c.as_mut_ptr().cast::<f32>(), n).with_epilogue(biasf, act);
    // SAFETY: `c` (of `f32`: `E` is `f32`, checked by `as_f32`) holds the
    // `m x n` row-major output (asserted) and is borrowed mutably for the
    // call; `a` covers `m x k` (asserted); the bias is borrowed for the
    // call.
    unsafe {
        packed_f32::gemm_core_packed_b(
            m,
            k,
            n,
            ASrc::Mat(a),
            packed.b.panels(),
            betaf[0],
            out,
            parts,
        )
    };
    true
}

/// Whether `storage` holds a packed `W^T` for its current values (for
/// tests of the layers that use the cache).
#[cfg(test)]
pub(crate) fn holds_packed_weight<E: Float>(storage: &Storage<E>) -> bool {
    storage.derived(|| None::<PackedWeightT>).is_some()
}

/// Whether this CPU runs the packed f32 kernel the cache serves.
#[cfg(test)]
pub(crate) fn packed_f32_available() -> bool {
    packed_f32::available()
}

#[cfg(test)]
mod tests {
    use super::super::gemm;
    use super::*;

    /// Cached products equal `gemm`'s bit for bit at 1 and 2 threads, for
    /// row counts on both sides of the parallel threshold, `k` over two
    /// `KC` blocks and a partial last panel; a second call reuses the
    /// entry; a write to the weight rebuilds it.
    /// A cached weight's product hands off to the pool once (nothing to
    /// pack), so it splits at the threshold's work, not twice it: with
    /// AVX-512 GPT batch-1 inference's 64 x 128 x 256 head product (21 us
    /// estimated) is split, its 64 x 128 x 128 attention output projection
    /// (10 us) is not (with AVX2's lower rate, 26 us: split); the split
    /// ones with the bits of one thread.
    #[test]
    fn cached_products_split_at_one_hand_off() {
        use crate::cpu::threads::pool_dispatches;
        let _threads = crate::cpu::threads::lock_thread_count();
        if !packed_f32::available() {
            return;
        }
        let mut rng = crate::tensor::Rng::new(8);
        let (m, k) = (64, 128);
        let x: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
        let mut in_window = false;
        for n in [256, 128, 384, 64] {
            let cost = m * n * k / macs_per_ns::<f32>();
            let splits = cost >= PARALLEL_MIN_NS;
            // where one hand-off splits and two would not
            in_window |= splits && cost < 2 * PARALLEL_MIN_NS;
            let w: Storage<f32> = (0..n * k).map(|_| rng.normal() as f32).collect();
            let bias: Vec<f32> = (0..n).map(|_| rng.normal() as f32).collect();
            let mut outs = Vec::new();
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                let mut c = vec![f32::NAN; m * n];
                // the first call packs the weight (a copy, not split)
                assert!(gemm_weight_t(
                    m,
                    k,
                    n,
                    &x,
                    &w,
                    0.0,
                    Some(&bias),
                    None,
                    &mut c
                ));
                let before = pool_dispatches();
                assert!(gemm_weight_t(
                    m,
                    k,
                    n,
                    &x,
                    &w,
                    0.0,
                    Some(&bias),
                    None,
                    &mut c
                ));
                let dispatches = pool_dispatches() - before;
                let want = if threads == 2 && splits { 1 } else { 0 };
                assert_eq!(dispatches, want, "{m}x{k}x{n} at {threads} threads");
                outs.push(c.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
            }
            assert!(outs[0] == outs[1], "{m}x{k}x{n}: 2 threads differ from 1");
        }
        assert!(in_window, "no product between one and two hand-offs' work");
        // a weight larger than a core's L2 (2.6 MB) stays split by columns:
        // the same bits too
        let (m, k, n) = (64, 1024, 640);
        let x: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
        let w: Storage<f32> = (0..n * k).map(|_| rng.normal() as f32).collect();
        let mut outs = Vec::new();
        for threads in [1, 2] {
            crate::cpu::set_num_threads(threads);
            let mut c = vec![f32::NAN; m * n];
            assert!(gemm_weight_t(m, k, n, &x, &w, 0.0, None, None, &mut c));
            outs.push(c.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        }
        assert!(outs[0] == outs[1], "{m}x{k}x{n}: 2 threads differ from 1");
        crate::cpu::set_num_threads(1);
    }

    #[test]
    fn cached_products_equal_gemm() {
        // the thread count is set below: no other test may change it meanwhile
        let _threads = crate::cpu::threads::lock_thread_count();
        if !packed_f32::available() {
            return;
        }
        let mut rng = crate::tensor::Rng::new(5);
        let (k, n) = (300, 72);
        let mut w: Storage<f32> = (0..n * k).map(|_| rng.normal() as f32).collect();
        for threads in [1, 2] {
            // (results do not depend on the count, so tests running
            // beside this one and setting it do not disturb it)
            crate::cpu::set_num_threads(threads);
            {
                for m in [2, 13, 64, 300] {
                    let x: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
                    let c0: Vec<f32> = (0..m * n).map(|_| rng.normal() as f32).collect();
                    for beta in [0.0, 1.0] {
                        let (mut c1, mut c2) = (c0.clone(), c0.clone());
                        gemm(
                            m,
                            k,
                            n,
                            Mat::row_major(&x, k),
                            Mat::transposed(&w, k),
                            beta,
                            &mut c1,
                        );
                        assert!(gemm_weight_t(m, k, n, &x, &w, beta, None, None, &mut c2));
                        assert!(c1 == c2, "threads {threads}, m {m}, beta {beta}");
                    }
                }
            }
        }
        // a write drops the entry: the next product packs the new values
        let v = w.version();
        w[0] += 1.0;
        assert!(w.version() > v);
        let x: Vec<f32> = (0..4 * k).map(|_| rng.normal() as f32).collect();
        let (mut c1, mut c2) = (vec![0.0; 4 * n], vec![0.0; 4 * n]);
        gemm(
            4,
            k,
            n,
            Mat::row_major(&x, k),
            Mat::transposed(&w, k),
            0.0,
            &mut c1,
        );
        assert!(gemm_weight_t(4, k, n, &x, &w, 0.0, None, None, &mut c2));
        assert!(c1 == c2, "after a write");
        // shapes the packed kernel does not take, and f64, are declined
        assert!(!gemm_weight_t(1, k, n, &x, &w, 0.0, None, None, &mut c2));
        assert!(!gemm_weight_t(4, k, 16, &x, &w, 0.0, None, None, &mut c2));
        let w64: Storage<f64> = Storage::zeroed(n * k);
        let mut c64 = vec![0.0; 4 * n];
        assert!(!gemm_weight_t(
            4,
            k,
            n,
            &vec![0.0; 4 * k],
            &w64,
            0.0,
            None,
            None,
            &mut c64
        ));
    }

    /// Every `&mut` access of a storage bumps its version and drops the
    /// entry: `deref_mut`, `spare_capacity_mut`, `set_len`, `push`,
    /// `extend_from_slice` (and `extend`, through `spare_capacity_mut`).
    #[test]
    fn every_storage_writer_drops_the_entry() {
        type W = fn(&mut Storage<f32>);
        let writers: &[(&str, W)] = &[
            ("deref_mut", |s| s[0] = 2.0),
            ("spare_capacity_mut", |s| {
                let _ = s.spare_capacity_mut();
            }),
            // SAFETY: the length is unchanged (every element initialised).
            ("set_len", |s| unsafe { s.set_len(s.len()) }),
            ("push", |s| s.push(1.0)),
            ("extend_from_slice", |s| s.extend_from_slice(&[1.0])),
            ("extend", |s| s.extend([1.0])),
        ];
        for &(name, write) in writers {
            let mut s: Storage<f32> = Storage::from_slice(&[1.0; 8]);
            assert_eq!(s.derived(|| Some(7u32)), Some(&7), "{name}: built");
            assert_eq!(s.derived(|| Some(8u32)), Some(&7), "{name}: reused");
            let v = s.version();
            write(&mut s);
            assert!(s.version() != v, "{name}: version not bumped");
            assert_eq!(s.derived(|| Some(9u32)), Some(&9), "{name}: entry kept");
        }
        // another type in the slot, or a declining builder: no entry
        let s: Storage<f32> = Storage::from_slice(&[1.0]);
        assert_eq!(s.derived(|| None::<u32>), None);
        assert_eq!(s.derived(|| Some(1u8)), Some(&1));
        assert_eq!(s.derived(|| Some(1u32)), None);
    }
}
