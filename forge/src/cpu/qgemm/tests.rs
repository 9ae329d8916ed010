use super::*;

/// The definition: `c[i][j] = sum_p a[i][p] b[j][p]` in `i64`.
fn reference(m: usize, k: usize, n: usize, a: &[u8], b: &[i8]) -> Vec<i32> {
    let mut c = vec![0i32; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: i64 = (0..k)
                .map(|p| a[i * k + p] as i64 * b[j * k + p] as i64)
                .sum();
            c[i * n + j] = i32::try_from(s).expect("the test sizes cannot overflow");
        }
    }
    c
}

/// `a` (`m x k`) with rows padded to [`padded_k`] by zeros.
fn padded(m: usize, k: usize, a: &[u8]) -> Vec<u8> {
    let kp = padded_k(k);
    let mut out = vec![0u8; m * kp];
    for i in 0..m {
        out[i * kp..i * kp + k].copy_from_slice(&a[i * k..(i + 1) * k]);
    }
    out
}

/// Bytes from a small linear congruential generator.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u8
        })
        .collect()
}

/// Odd sizes for every path; the last five for the AMX tiles: rows past
/// one and two tiles, `k` past whole 64-byte tiles (and short of one),
/// a lone last panel, and more than one chunk of panels.
const SIZES: [(usize, usize, usize); 14] = [
    (1, 1, 1),
    (3, 5, 7),
    (4, 4, 16),
    (5, 13, 17),
    (7, 33, 65),
    (9, 64, 64),
    (13, 127, 70),
    (2, 300, 131),
    (17, 9, 200),
    (33, 130, 47),
    (16, 64, 16),
    (20, 1000, 33),
    (70, 260, 300),
    (35, 12, 530),
];

#[test]
fn every_path_equals_the_reference() {
    let paths = Isa::all();
    assert_eq!(paths.last(), Some(&Isa::Portable));
    for (t, &(m, k, n)) in SIZES.iter().enumerate() {
        let a = bytes(m * k, t as u64);
        let b: Vec<i8> = bytes(n * k, 100 + t as u64)
            .into_iter()
            .map(|v| v as i8)
            .collect();
        let want = reference(m, k, n, &a, &b);
        let packed = PackedI8::new(n, k, &b);
        assert_eq!(packed.unpack(), b);
        for &isa in &paths {
            let mut c = vec![-1i32; m * n];
            packed.gemm_with(isa, m, &padded(m, k, &a), &mut c);
            assert_eq!(c, want, "{isa:?} at {m} x {k} x {n}");
        }
    }
}

#[test]
fn saturating_values_are_exact_on_every_path() {
    // 255 x -128 and 255 x 127 everywhere: each pair of products is out of
    // 16-bit range (where vpmaddubsw would saturate), the sums large.
    for &(m, k, n) in &SIZES {
        for wv in [-128i8, 127] {
            let a = vec![255u8; m * k];
            let b = vec![wv; n * k];
            let want = reference(m, k, n, &a, &b);
            assert_eq!(want[0], 255 * wv as i32 * k as i32);
            let packed = PackedI8::new(n, k, &b);
            for isa in Isa::all() {
                let mut c = vec![0i32; m * n];
                packed.gemm_with(isa, m, &padded(m, k, &a), &mut c);
                assert_eq!(c, want, "{isa:?} at {m} x {k} x {n}, weight {wv}");
            }
        }
    }
}

#[test]
fn row_sums_and_thread_counts() {
    // the thread count is set below: no other test may change it meanwhile
    let _threads = crate::cpu::threads::lock_thread_count();
    let (m, k, n) = (67, 300, 201);
    let a = padded(m, k, &bytes(m * k, 7));
    let b: Vec<i8> = bytes(n * k, 8).into_iter().map(|v| v as i8).collect();
    let packed = PackedI8::new(n, k, &b);
    assert_eq!(
        packed.row_sums()[3],
        b[3 * k..4 * k].iter().map(|&v| v as i32).sum::<i32>()
    );
    let mut want = vec![0i32; m * n];
    packed.gemm_with(Isa::Portable, m, &a, &mut want);
    for isa in Isa::all() {
        for threads in [1, 2] {
            crate::cpu::set_num_threads(threads);
            let mut c = vec![0i32; m * n];
            packed.gemm_with(isa, m, &a, &mut c);
            assert_eq!(c, want, "{isa:?} on {threads} threads");
        }
    }
    let mut c = vec![0i32; m * n];
    packed.gemm(m, &a, &mut c);
    assert_eq!(c, want, "the dispatched path");
}

#[test]
fn the_epilogue_sees_every_sum_once_on_every_path() {
    // the thread count is set below: no other test may change it meanwhile
    let _threads = crate::cpu::threads::lock_thread_count();
    // Each output element must come from exactly one epilogue call, with
    // its own sum and column: out = 3 sum - column, the same for every
    // path, size and thread count (the AMX path's blocks are 32 x 256, the
    // vector paths' smaller, so the odd sizes end blocks mid-way).
    for &(m, k, n) in &SIZES {
        let a = padded(m, k, &bytes(m * k, 11));
        let b: Vec<i8> = bytes(n * k, 12).into_iter().map(|v| v as i8).collect();
        let packed = PackedI8::new(n, k, &b);
        let want: Vec<i64> = reference(m, k, n, &bytes(m * k, 11), &b)
            .iter()
            .enumerate()
            .map(|(i, &s)| 3 * s as i64 - (i % n) as i64)
            .collect();
        let then = |j0: usize, sums: &[i32], out: &mut [i64]| {
            for (j, (o, &s)) in out.iter_mut().zip(sums).enumerate() {
                assert_eq!(*o, i64::MIN, "an element given twice");
                *o = 3 * s as i64 - (j0 + j) as i64;
            }
        };
        for isa in Isa::all() {
            for threads in [1, 2] {
                crate::cpu::set_num_threads(threads);
                let mut c = vec![0i32; m * n];
                let mut out = vec![i64::MIN; m * n];
                packed.run(isa, m, &a, &mut c, &mut out, Some(&then));
                assert_eq!(out, want, "{isa:?} at {m} x {k} x {n}, {threads} threads");
            }
        }
    }
}

#[test]
fn the_fused_dequantize_equals_the_product_then_a_pass_on_every_path() {
    // the thread count is set below: no other test may change it meanwhile
    let _threads = crate::cpu::threads::lock_thread_count();
    // The epilogue reads the micro-tiles' sums where they are (no `i32`
    // matrix in between): the outputs must be the bits of the definition,
    // `(sum - offset) as f32 * scale + bias` per element over the exact
    // sums, on every path and thread count, at sizes ending tiles and
    // chunks of rows mid-way.
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (t, &(m, k, n)) in SIZES.iter().enumerate() {
        let a = bytes(m * k, 20 + t as u64);
        let b: Vec<i8> = bytes(n * k, 40 + t as u64)
            .into_iter()
            .map(|v| v as i8)
            .collect();
        let sums = reference(m, k, n, &a, &b);
        let packed = PackedI8::new(n, k, &b);
        let offsets: Vec<i32> = packed.row_sums().iter().map(|&s| 37 * s).collect();
        let scales: Vec<f32> = (0..n).map(|j| 1e-3 * (1.0 + (j % 7) as f32)).collect();
        let bias: Vec<f32> = (0..n).map(|j| (j % 5) as f32 * 0.25 - 0.5).collect();
        for bias in [Some(&bias[..]), None] {
            let want: Vec<f32> = sums
                .iter()
                .enumerate()
                .map(|(i, &s)| {
                    let j = i % n;
                    s.wrapping_sub(offsets[j]) as f32 * scales[j] + bias.map_or(0.0, |b| b[j])
                })
                .collect();
            let epi = Dequantize::new(&offsets, &scales, bias);
            let then = |j0: usize, acc: &[i32], y: &mut [f32]| epi.run(j0, acc, y);
            for isa in Isa::all() {
                for threads in [1, 2] {
                    crate::cpu::set_num_threads(threads);
                    let mut c = vec![0i32; m * n];
                    let mut y = vec![f32::NAN; m * n];
                    packed.run(isa, m, &padded(m, k, &a), &mut c, &mut y, Some(&then));
                    assert_eq!(
                        bits(&y),
                        bits(&want),
                        "{isa:?} at {m} x {k} x {n}, {threads} threads, bias: {}",
                        bias.is_some()
                    );
                }
            }
        }
    }
}

#[test]
fn the_class_turns_amx_off() {
    use crate::cpu::class::{pin_thread, Class};
    let prev = pin_thread(Some(Class::Avx512));
    assert_ne!(Isa::detect(), Isa::Amx);
    pin_thread(prev);
    if crate::cpu::amx::int8() && crate::cpu::class::current() == Class::Amx {
        assert_eq!(Isa::detect(), Isa::Amx);
    }
}

/// GOP/s of every path (one thread) at the shapes of the bench rows: run
/// with `--ignored --nocapture` to choose `AMX_MIN_ROWS`.
#[test]
#[ignore = "prints GOP/s per path and k-block size at model-sized products (~1 min) and checks they all give the same sums"]
fn amx_speed() {
    // the thread count is set below: no other test may change it meanwhile
    let _threads = crate::cpu::threads::lock_thread_count();
    crate::cpu::set_num_threads(1);
    for &(m, k, n) in &[
        (1, 768, 2304),
        (4, 768, 768),
        (8, 768, 768),
        (16, 768, 768),
        (32, 768, 768),
        (128, 784, 512),
        (1024, 768, 768),
        (1024, 768, 3072),
        (1024, 3072, 768),
    ] {
        let a = padded(m, k, &bytes(m * k, 1));
        let b: Vec<i8> = bytes(n * k, 2).into_iter().map(|v| v as i8).collect();
        let packed = PackedI8::new(n, k, &b);
        let mut want: Option<Vec<i32>> = None;
        let mut line = format!("{m:5} x {k:5} x {n:5}:");
        // the best of 5 timings of `reps / 5` calls: the machine is shared
        let reps = (4e8 / (m * n * k) as f64).clamp(1.0, 400.0) as usize;
        // the best time and the sums the calls left
        let time = |isa: Isa| {
            let mut c = vec![0i32; m * n];
            packed.gemm_with(isa, m, &a, &mut c);
            let best = (0..5)
                .map(|_| {
                    let t = std::time::Instant::now();
                    for _ in 0..reps {
                        packed.gemm_with(isa, m, &a, &mut c);
                    }
                    t.elapsed().as_secs_f64() / reps as f64
                })
                .fold(f64::INFINITY, f64::min);
            (best, c)
        };
        let gops = |s: f64| 2.0 * (m * n * k) as f64 / s / 1e9;
        // every timed path and k-block size leaves the same sums in `c`
        let mut check = |c: &[i32], what: String| match &want {
            None => want = Some(c.to_vec()),
            Some(w) => assert!(w == c, "{m} x {k} x {n}: {what} gives other sums"),
        };
        for isa in Isa::all() {
            if isa == Isa::Amx {
                for kb in [4, 8, 16, 1000] {
                    amx::KB_TILES_TEST.with(|c| c.set(Some(kb)));
                    let (t, c) = time(isa);
                    line += &format!("  Amx(kb {kb}) {:.0}", gops(t));
                    check(&c, format!("Amx(kb {kb})"));
                }
                amx::KB_TILES_TEST.with(|c| c.set(None));
            } else if isa != Isa::Portable {
                let (t, c) = time(isa);
                line += &format!("  {isa:?} {:.0}", gops(t));
                check(&c, format!("{isa:?}"));
            }
        }
        println!("{line} GOP/s");
    }
}
