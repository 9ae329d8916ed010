//! The ceiling of forge's f32 products on this machine: the loop of its
//! AVX-512 micro-kernel (a 12 x 32 tile of `c` in 24 accumulators; each
//! step of `k` loads two vectors of a packed `b` panel and broadcasts 12
//! floats of a packed `a` tile) on the blocking the products use (`k`
//! blocks of 256: a 32 KiB panel and a 12 KiB tile), with both operands
//! resident in cache and nothing else around it: no packing, no stores
//! but the tile's, no edge tiles. The FMA peak (`fma_peak`) multiplies
//! registers only; this loop also loads 14 values for every 24
//! multiply-adds, which is what every product pays. On the Intel host of
//! 2026-12-07 it ran at 83-96% of the FMA loop read just before it
//! (median 88%), and MKL's own products (through PyTorch) at 74-81% of
//! the FMA peak on the same core.

use super::json_section::time_threads;
use std::hint::black_box;

/// GFLOP/s of the kernel's loop summed over `threads` threads at once
/// (each with its own operands), `rounds` passes of 64 tiles each; `None`
/// off x86-64 or without AVX-512F.
#[allow(unreachable_code)]
pub(crate) fn tile_peak(rounds: usize, threads: usize) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        const KC: usize = 256;
        const MR: usize = 12;
        const NR: usize = 32;
        const TILES: usize = 64;
        /// `rounds` x `TILES` tiles of `a` (`MR x KC`, packed) times `b`
        /// (`KC x NR`, packed), each into the same registers' `c` tile,
        /// which is then added to `c` (as a later `k` block does).
        #[target_feature(enable = "avx512f")]
        fn run(rounds: usize, a: &[f32], b: &[f32], c: &mut [f32]) -> f32 {
            assert!(a.len() >= MR * KC && b.len() >= KC * NR && c.len() >= MR * NR);
            let (ap, bp) = (a.as_ptr(), b.as_ptr());
            for _ in 0..rounds * TILES {
                let mut acc = [[_mm512_setzero_ps(); 2]; MR];
                for p in 0..KC {
                    // SAFETY: `p < KC`: row `p` of the panel and column `p`
                    // of the tile are inside `b` and `a` (asserted).
                    unsafe {
                        let b0 = _mm512_loadu_ps(bp.add(p * NR));
                        let b1 = _mm512_loadu_ps(bp.add(p * NR + 16));
                        for (i, row) in acc.iter_mut().enumerate() {
                            let av = _mm512_set1_ps(*ap.add(p * MR + i));
                            row[0] = _mm512_fmadd_ps(av, b0, row[0]);
                            row[1] = _mm512_fmadd_ps(av, b1, row[1]);
                        }
                    }
                }
                for (i, row) in acc.iter().enumerate() {
                    for (h, &v) in row.iter().enumerate() {
                        // SAFETY: 16 floats at `(i, 16 h)` of the `MR x NR`
                        // tile, inside `c` (asserted).
                        unsafe {
                            let at = c.as_mut_ptr().add(i * NR + 16 * h);
                            _mm512_storeu_ps(at, _mm512_add_ps(_mm512_loadu_ps(at), v));
                        }
                    }
                }
            }
            c[0]
        }
        if !is_x86_feature_detected!("avx512f") {
            return None;
        }
        let work = || {
            // each operand on a cache line, as the pool hands them out
            let line = |len: usize| {
                let v = vec![0.5f32; len + 16];
                let off = v.as_ptr().align_offset(64);
                (v, off)
            };
            let ((a, oa), (b, ob), (mut c, oc)) = (line(MR * KC), line(KC * NR), line(MR * NR));
            // SAFETY: the CPU has AVX-512F (checked above).
            unsafe { run(black_box(rounds), &a[oa..], &b[ob..], &mut c[oc..]) }
        };
        let flops = (rounds * TILES * KC * MR * NR * 2) as f64;
        return Some(time_threads(threads, &work, flops));
    }
    let _ = (rounds, threads, black_box(0));
    None
}
