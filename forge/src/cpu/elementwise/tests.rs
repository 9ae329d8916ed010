//! Tests of the elementwise loops: parallel against inline, every CPU
//! class against the per-element loop, the chunked updates.

use super::*;
use crate::cpu::class::{pin_thread, Class};

#[test]
fn parallel_and_inline_loops_agree() {
    let _threads = crate::cpu::threads::lock_thread_count();
    let n = PAR_MIN * 2 + 123;
    let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
    let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
    let row: Vec<f32> = (0..123).map(|i| i as f32).collect();
    let col: Vec<f32> = (0..n / 123).map(|i| i as f32 * 0.5).collect();
    let mut want = Vec::new();
    for threads in [1, 2, 3] {
        crate::cpu::set_num_threads(threads);
        let mut acc = a.clone();
        zip_assign(&mut acc, &b, |x, y| x * 2.0 + y);
        let got = (
            map(&a, |x| x.exp()).to_vec(),
            zip(&a, &b, |x, y| x * y).to_vec(),
            zip_rows(&a[..n / 123 * 123], &row, |x, y| x - y).to_vec(),
            zip_cols(&a[..n / 123 * 123], &col, 123, |x, y| x * y).to_vec(),
            acc,
        );
        if threads == 1 {
            // Reference values with plain per-index arithmetic.
            assert!(got.0.iter().zip(&a).all(|(o, x)| *o == x.exp()));
            assert!((0..n).all(|i| got.1[i] == a[i] * b[i]));
            assert!((0..n / 123 * 123).all(|i| got.2[i] == a[i] - row[i % 123]));
            assert!((0..n / 123 * 123).all(|i| got.3[i] == a[i] * col[i / 123]));
            assert!((0..n).all(|i| got.4[i] == a[i] * 2.0 + b[i]));
            want.push(got);
        } else {
            assert!(got == want[0], "{threads} threads differ");
        }
    }
}

#[test]
fn slice_kernels_give_the_same_bits_for_any_split() {
    let _threads = crate::cpu::threads::lock_thread_count();
    // Long enough to split, with a ragged last chunk.
    let n = PAR_MIN * 2 + 123;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 4.0).collect();
    let g: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
    let kernel = |s: &mut [f32]| crate::cpu::vmath::gelu_tanh(s);
    let grad = |z: &[f32], s: &mut [f32]| crate::cpu::vmath::gelu_tanh_grad(z, s);
    // Reference: the kernels over whole copies, in one call.
    let mut want_y = x.clone();
    kernel(&mut want_y);
    let mut want_g = g.clone();
    grad(&x, &mut want_g);
    for threads in [1, 2, 3] {
        crate::cpu::set_num_threads(threads);
        let before = crate::cpu::threads::pool_dispatches();
        let y = map_slices(&x, kernel);
        let gx = zip_slices(&x, &g, grad);
        assert!(
            y[..] == want_y[..],
            "{threads} threads: forward bits differ"
        );
        assert!(
            gx[..] == want_g[..],
            "{threads} threads: gradient bits differ"
        );
        let split = crate::cpu::threads::pool_dispatches() - before;
        assert_eq!(split, if threads > 1 { 2 } else { 0 }, "{threads} threads");
        // the out-of-place kernels (no copy first) at the same split
        let y = map_slices_into(&x, crate::cpu::vmath::gelu_tanh_into);
        let gx = zip_slices_into(&x, &g, crate::cpu::vmath::gelu_tanh_grad_into);
        assert!(
            y[..] == want_y[..],
            "{threads} threads: out-of-place forward bits differ"
        );
        assert!(
            gx[..] == want_g[..],
            "{threads} threads: out-of-place gradient bits differ"
        );
    }
}

#[test]
fn update_chunks_cover_every_element_once_and_split_large_loops() {
    let _threads = crate::cpu::threads::lock_thread_count();
    crate::cpu::set_num_threads(2);
    let n = 3 * CHUNK + 17;
    let mut p: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut m = vec![0.0f32; n];
    let mut unused: Vec<f32> = Vec::new();
    let before = crate::cpu::threads::pool_dispatches();
    update_chunks([&mut p, &mut m, &mut unused], 1, |off, [p, m, u]| {
        assert!(u.is_empty() && p.len() == m.len() && p.len() <= UPDATE_CHUNK);
        assert_eq!(off % UPDATE_CHUNK, 0);
        for (j, (p, m)) in p.iter_mut().zip(m.iter_mut()).enumerate() {
            assert_eq!(*p, (off + j) as f32);
            *p += 1.0;
            *m += 1.0;
        }
    });
    assert!((0..n).all(|i| p[i] == i as f32 + 1.0 && m[i] == 1.0));
    // 50k elements at 1 ns each: above the threshold, split
    assert_eq!(crate::cpu::threads::pool_dispatches(), before + 1);
    let mut small = vec![0.0f32; 1000];
    update_chunks([&mut small], 1, |_, [s]| {
        s.iter_mut().for_each(|x| *x = 2.0)
    });
    assert!(small.iter().all(|&x| x == 2.0));
    assert_eq!(crate::cpu::threads::pool_dispatches(), before + 1);
    // one `CHUNK` at 2 ns an element (the benchmark GPT's projection
    // weights under AdamW, 33 us): split too, in several chunks
    let mut w = vec![0.0f32; CHUNK];
    let chunks = std::sync::atomic::AtomicUsize::new(0);
    update_chunks([&mut w], 2, |_, [w]| {
        chunks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        w.iter_mut().for_each(|x| *x += 1.0)
    });
    assert!(w.iter().all(|&x| x == 1.0));
    assert_eq!(chunks.into_inner(), 4);
    assert_eq!(crate::cpu::threads::pool_dispatches(), before + 2);
}

/// Runs `f` with the calling thread pinned to each CPU class this
/// machine has (portable first), one thread, and returns the results.
fn in_each_class<R>(f: impl Fn() -> R) -> Vec<(Class, R)> {
    let _threads = crate::cpu::threads::lock_thread_count();
    let threads = num_threads();
    crate::cpu::set_num_threads(1);
    let mut out = Vec::new();
    for class in [Class::Portable, Class::Avx2, Class::Avx512] {
        if class > crate::cpu::class::detected() {
            continue;
        }
        let prev = pin_thread(Some(class));
        out.push((class, f()));
        pin_thread(prev);
    }
    crate::cpu::set_num_threads(threads);
    out
}

/// `n` values with the cases the lanes must agree on: signed zeros,
/// infinities, NaN, subnormals, large and ordinary values.
fn awkward(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let u = (state >> 8) as f32 / (1u32 << 24) as f32;
            match i % 23 {
                3 => -0.0,
                5 => 0.0,
                7 => f32::INFINITY,
                11 => f32::NEG_INFINITY,
                13 => f32::NAN,
                17 => 1e-40,
                19 => -3e38,
                _ => (u - 0.5) * 12.0,
            }
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Every loop run through `widest` gives, in every CPU class, the bits
/// of a plain per-element loop (lengths around the 4-, 8- and 16-lane
/// widths and their tails).
#[test]
fn widened_loops_give_the_per_element_bits_in_every_class() {
    let lens = [0usize, 1, 3, 7, 15, 16, 17, 31, 33, 47, 100, 1003];
    let runs = in_each_class(|| {
        let mut got = Vec::new();
        for &n in &lens {
            let a = awkward(n, n as u32 + 1);
            let b = awkward(n, n as u32 + 99);
            let relu = |x: f32| x.max(0.0);
            let mix = |x: f32, y: f32| x * y + (x - y) / 3.0;
            let want_map: Vec<f32> = a.iter().map(|&x| relu(x)).collect();
            let want_zip: Vec<f32> = a.iter().zip(&b).map(|(&x, &y)| mix(x, y)).collect();
            assert_eq!(bits(&map(&a, relu)), bits(&want_map), "map, n {n}");
            assert_eq!(bits(&zip(&a, &b, mix)), bits(&want_zip), "zip, n {n}");
            let mut acc = a.clone();
            zip_assign(&mut acc, &b, mix);
            assert_eq!(bits(&acc), bits(&want_zip), "zip_assign, n {n}");
            for cols in [1usize, 7, 19] {
                let rows = n / cols;
                let m = &a[..rows * cols];
                let row = &b[..cols.min(n)];
                if row.len() == cols {
                    let want: Vec<f32> = (0..m.len()).map(|i| mix(m[i], row[i % cols])).collect();
                    assert_eq!(
                        bits(&zip_rows(m, row, mix)),
                        bits(&want),
                        "zip_rows {n} {cols}"
                    );
                }
                let col = &b[..rows];
                let want: Vec<f32> = (0..m.len()).map(|i| mix(m[i], col[i / cols])).collect();
                assert_eq!(
                    bits(&zip_cols(m, col, cols, mix)),
                    bits(&want),
                    "zip_cols {n} {cols}"
                );
            }
            // an Adam-like update: square root and division per element
            let mut p = a.clone();
            let mut v = b.iter().map(|x| x * x).collect::<Vec<f32>>();
            update_chunks([&mut p, &mut v], 1, |_, [p, v]| {
                for (p, v) in p.iter_mut().zip(v.iter_mut()) {
                    *v = 0.999 * *v + 0.001 * *p * *p;
                    *p -= 0.01 * (*p / (v.sqrt() / 0.3 + 1e-8));
                }
            });
            let want: Vec<f32> = a
                .iter()
                .zip(&b)
                .map(|(&p, &b)| {
                    let v = 0.999 * (b * b) + 0.001 * p * p;
                    p - 0.01 * (p / (v.sqrt() / 0.3 + 1e-8))
                })
                .collect();
            assert_eq!(bits(&p), bits(&want), "update_chunks, n {n}");
            // the vector-math kernels promise equal values, NaN for
            // NaN (not the NaN's sign and payload) in every class
            let canon = |v: &[f32]| {
                v.iter()
                    .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
                    .collect::<Vec<_>>()
            };
            let y = map_slices(&a, crate::cpu::vmath::gelu_tanh);
            let gx = zip_slices(&a, &b, crate::cpu::vmath::gelu_tanh_grad);
            // their out-of-place forms: the same values as in place
            let y_into = map_slices_into(&a, crate::cpu::vmath::gelu_tanh_into);
            let gx_into = zip_slices_into(&a, &b, crate::cpu::vmath::gelu_tanh_grad_into);
            assert_eq!(canon(&y_into), canon(&y), "gelu_tanh_into, n {n}");
            assert_eq!(canon(&gx_into), canon(&gx), "gelu_tanh_grad_into, n {n}");
            got.push((canon(&y), canon(&gx)));
        }
        got
    });
    // the slice kernels (their own reference is the vector-math
    // tests'): the same bits in every class
    for (class, got) in &runs[1..] {
        assert!(got == &runs[0].1, "{class:?}: slice kernels differ");
    }
}

#[test]
fn empty_inputs() {
    assert!(map(&[] as &[f32], |x| x).is_empty());
    assert!(zip_rows(&[] as &[f32], &[] as &[f32], |x, _| x).is_empty());
}
