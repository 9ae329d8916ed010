use super::*;
use crate::tensor::Rng;

/// The module's summation order on plain rows (`a` is `m x k`, `b` is
/// `n x k`, both already bf16 values), without packing.
fn reference(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
    let mut c = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0f32;
            for q in 0..k.div_ceil(2) {
                let (p0, p1) = (2 * q, 2 * q + 1);
                if p1 < k {
                    s = ftz(s + a[i * k + p1] * b[j * k + p1]);
                } else {
                    s = ftz(s + 0.0);
                }
                s = ftz(s + a[i * k + p0] * b[j * k + p0]);
            }
            c[i * n + j] = s + bias.map_or(0.0, |bs| bs[j]);
        }
    }
    c
}

fn bf16_values(len: usize, scale: f32, rng: &mut Rng) -> Vec<f32> {
    (0..len)
        .map(|_| round_bf16((rng.uniform() as f32 - 0.5) * 2.0 * scale))
        .collect()
}

fn check(m: usize, n: usize, k: usize, scale: f32, seed: u64) {
    let mut rng = Rng::new(seed);
    let a = bf16_values(m * k, scale, &mut rng);
    let b = bf16_values(n * k, scale, &mut rng);
    let bias = bf16_values(n, 1.0, &mut rng);
    let want = reference(m, n, k, &a, &b, Some(&bias));
    let packed = PackedBf16::new(n, k, &b);
    assert_eq!(packed.unpack(), b, "pack/unpack {m}x{n}x{k}");
    let rows = rows_to_bf16(&a, m, k);
    // the AMX path has its own bits (`amx_*` tests below)
    for isa in Isa::all().into_iter().filter(|&i| i != Isa::Amx) {
        let mut c = vec![f32::NAN; m * n];
        packed.gemm_with(isa, m, &rows, Some(&bias), &mut c);
        for (idx, (x, y)) in c.iter().zip(&want).enumerate() {
            assert_eq!(
                x.to_bits(),
                y.to_bits(),
                "{isa:?} {m}x{n}x{k} element {idx}: {x} vs reference {y}"
            );
        }
    }
}

#[test]
fn every_path_equals_the_reference() {
    // odd sizes: partial row blocks, partial panels and tiles, odd k, and
    // k past one block of pairs
    for &(m, n, k) in &[
        (1, 1, 1),
        (3, 5, 7),
        (7, 17, 33),
        (13, 65, 257),
        (49, 70, 300),
        (6, 64, 2),
        (50, 130, 515),
    ] {
        check(m, n, k, 1.0, (m * 1000 + n * 10 + k) as u64);
    }
}

#[test]
fn tiny_and_huge_values_take_the_same_bits() {
    // products near the bottom of the f32 range (flushed sums) and near the
    // top (infinities): the paths still agree with the reference
    check(9, 33, 41, 1e-19, 7);
    check(9, 33, 41, 1e19, 8);
    check(9, 33, 41, 1e-30, 9);
}

#[test]
fn the_sum_is_the_same_for_any_thread_count() {
    let (m, n, k) = (97, 150, 700);
    let mut rng = Rng::new(3);
    let a = bf16_values(m * k, 1.0, &mut rng);
    let b = bf16_values(n * k, 1.0, &mut rng);
    let packed = PackedBf16::new(n, k, &b);
    let rows = rows_to_bf16(&a, m, k);
    let _guard = crate::cpu::threads::lock_thread_count();
    let before = crate::cpu::num_threads();
    let mut outs = Vec::new();
    for t in [1, 2, 3] {
        crate::cpu::set_num_threads(t);
        let mut c = vec![0f32; m * n];
        packed.gemm(m, &rows, None, &mut c);
        outs.push(c);
    }
    crate::cpu::set_num_threads(before);
    assert_eq!(outs[0], outs[1]);
    assert_eq!(outs[0], outs[2]);
}

#[test]
fn conversion_rounds_to_nearest_even_and_flushes_subnormals() {
    assert_eq!(to_bf16(1.0), 0x3f80);
    // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (down)
    assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
    // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: up to even
    assert_eq!(to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
    assert_eq!(to_bf16(-f32::MIN_POSITIVE / 2.0), 0x8000);
    assert_eq!(to_bf16(f32::MAX), 0x7f80);
    assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
    assert_eq!(from_bf16(to_bf16(f32::NEG_INFINITY)), f32::NEG_INFINITY);
    for &x in &[0.1f32, -3.7, 1e-20, 6.5e4] {
        assert_eq!(to_bf16(x), half::bf16::from_f32(x).to_bits(), "{x}");
    }
}

#[test]
fn sums_are_close_to_f64() {
    // the f32 accumulation of exact bf16 products stays within k ulps of
    // the exact sum of the same bf16 values
    let (m, n, k) = (5, 20, 1000);
    let mut rng = Rng::new(11);
    let a = bf16_values(m * k, 1.0, &mut rng);
    let b = bf16_values(n * k, 1.0, &mut rng);
    let packed = PackedBf16::new(n, k, &b);
    let mut c = vec![0f32; m * n];
    packed.gemm(m, &rows_to_bf16(&a, m, k), None, &mut c);
    for i in 0..m {
        for j in 0..n {
            let exact: f64 = (0..k)
                .map(|p| f64::from(a[i * k + p]) * f64::from(b[j * k + p]))
                .sum();
            let abs: f64 = (0..k)
                .map(|p| (f64::from(a[i * k + p]) * f64::from(b[j * k + p])).abs())
                .sum();
            let err = (f64::from(c[i * n + j]) - exact).abs();
            assert!(
                err <= abs * k as f64 * f64::from(f32::EPSILON),
                "{err} {abs}"
            );
        }
    }
}

/// Packing from bf16 rows (keys) and from bf16 columns (values) gives the
/// packing of the same values from f32, padding included: odd `n` and `k`,
/// a lone channel, a lone pair.
#[test]
fn packing_from_bf16_rows_and_columns_equals_packing_from_f32() {
    for &(n, k) in &[
        (1, 1),
        (1, 2),
        (3, 5),
        (16, 64),
        (17, 33),
        (40, 7),
        (128, 64),
        (64, 128),
    ] {
        let mut rng = Rng::new((n * 100 + k) as u64);
        let b = bf16_values(n * k, 3.0, &mut rng);
        let want = PackedBf16::new(n, k, &b);
        let bits: Vec<u16> = b.iter().map(|&x| to_bf16(x)).collect();
        // rows of `k` at a stride of `k + 3` (the callers' rows are padded)
        let ld = k + 3;
        let mut rows = vec![0xffffu16; n * ld];
        for j in 0..n {
            rows[j * ld..j * ld + k].copy_from_slice(&bits[j * k..(j + 1) * k]);
        }
        let from_rows = PackedBf16::from_bf16_rows(n, k, |j| &rows[j * ld..]);
        assert_eq!(&from_rows.data[..], &want.data[..], "rows {n} x {k}");
        // column `p` of the `n x k` matrix is row `p` of its transpose
        let ldt = n + 1;
        let mut cols = vec![0xffffu16; k * ldt];
        for j in 0..n {
            for p in 0..k {
                cols[p * ldt + j] = bits[j * k + p];
            }
        }
        let from_cols = PackedBf16::from_bf16_cols(n, k, |p| &cols[p * ldt..]);
        assert_eq!(&from_cols.data[..], &want.data[..], "columns {n} x {k}");
    }
}

/// `gemm_gelu_bf16` gives, on every path, the bits of that path's product
/// followed by `GeluBf16` and the rounding to bf16, element by element:
/// with and without a bias, at odd sizes (rows past a block of 32,
/// channels past a panel and past a group of 16 panels, `k` past a tile
/// and a block), whole blocks (the AMX path's in-place rows), and 1 to 3
/// threads.
#[test]
fn gelu_epilogue_equals_the_product_then_gelu() {
    let _guard = crate::cpu::threads::lock_thread_count();
    let before = crate::cpu::num_threads();
    for &(m, n, k) in &[
        (1, 1, 1),
        (3, 5, 7),
        (33, 17, 40),
        (64, 272, 96),
        (50, 130, 515),
        (32, 512, 800),
    ] {
        let mut rng = Rng::new((m * 7 + n * 3 + k) as u64);
        let a = bf16_values(m * k, 1.0, &mut rng);
        let b = bf16_values(n * k, 1.0, &mut rng);
        let bias = bf16_values(n, 2.0, &mut rng);
        let packed = PackedBf16::new(n, k, &b);
        let rows = rows_to_bf16(&a, m, k);
        for isa in Isa::all() {
            for bias in [None, Some(&bias[..])] {
                let mut c = vec![f32::NAN; m * n];
                packed.gemm_with(isa, m, &rows, bias, &mut c);
                GeluBf16::new().apply(&mut c);
                let want: Vec<u16> = c.iter().map(|&x| to_bf16(x)).collect();
                for threads in [1, 2, 3] {
                    crate::cpu::set_num_threads(threads);
                    let mut got = vec![0xffffu16; m * n];
                    packed.gemm_gelu_bf16_with(isa, m, &rows, bias, &mut got);
                    crate::cpu::set_num_threads(before);
                    if let Some(i) = (0..m * n).find(|&i| got[i] != want[i]) {
                        panic!(
                            "{isa:?} {m}x{n}x{k}, bias {}, {threads} threads, element {i}: \
                             {:#06x} vs {:#06x} (sum {})",
                            bias.is_some(),
                            got[i],
                            want[i],
                            c[i]
                        );
                    }
                }
            }
        }
    }
}

/// The AMX path, when this machine may run it.
fn amx() -> Option<Isa> {
    let has = Isa::all().contains(&Isa::Amx);
    if !has {
        eprintln!("no AMX-BF16 here: the AMX test checks nothing");
    }
    has.then_some(Isa::Amx)
}

/// `m x n` product of `a` (`m x k`) and `b` (`n x k`) on `isa`.
fn product(isa: Isa, m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
    let packed = PackedBf16::new(n, k, b);
    let mut c = vec![f32::NAN; m * n];
    packed.gemm_with(isa, m, &rows_to_bf16(a, m, k), None, &mut c);
    c
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The AMX bits of an element depend only on its row of `a` and its row of
/// `b`: the same for every thread count and run, for a row computed alone,
/// for a channel packed alone or at another position in its panel, with
/// odd sizes at every edge (rows past a block of 32, channels past a tile
/// of 16, `k` past a tile of 32 and past a block of 512).
#[test]
fn amx_bits_do_not_depend_on_the_split() {
    let Some(isa) = amx() else { return };
    let _guard = crate::cpu::threads::lock_thread_count();
    let before = crate::cpu::num_threads();
    for &(m, n, k) in &[
        (1, 1, 1),
        (7, 17, 33),
        (33, 49, 70),
        (70, 130, 1100),
        (20, 40, 4200),
    ] {
        let mut rng = Rng::new((m * 1000 + n * 10 + k) as u64);
        let a = bf16_values(m * k, 1.0, &mut rng);
        let b = bf16_values(n * k, 1.0, &mut rng);
        crate::cpu::set_num_threads(1);
        let one = bits(&product(isa, m, n, k, &a, &b));
        for t in [2, 3, 2] {
            crate::cpu::set_num_threads(t);
            let again = bits(&product(isa, m, n, k, &a, &b));
            assert_eq!(again, one, "{m}x{n}x{k}, {t} threads");
        }
        crate::cpu::set_num_threads(1);
        for i in [0, m / 2, m - 1] {
            let row = bits(&product(isa, 1, n, k, &a[i * k..(i + 1) * k], &b));
            assert_eq!(row, one[i * n..(i + 1) * n], "{m}x{n}x{k}: row {i} alone");
        }
        // channel j moved 5 places on (another lane, maybe another panel)
        let mut shifted = bf16_values(5 * k, 1.0, &mut rng);
        shifted.extend(&b);
        let c = bits(&product(isa, m, n + 5, k, &a, &shifted));
        for i in 0..m {
            assert_eq!(
                c[i * (n + 5) + 5..(i + 1) * (n + 5)],
                one[i * n..(i + 1) * n],
                "{m}x{n}x{k}: channels 5 lanes on, row {i}"
            );
        }
    }
    crate::cpu::set_num_threads(before);
}

/// A panel's last, partial tile of `k` never reads the next panels'
/// values: infinite weights in channels 16..96 leave channels 0..16 finite
/// (`0 x inf` would be NaN; the next panels hold more than a tile).
#[test]
fn amx_partial_tiles_read_no_other_panel() {
    let Some(isa) = amx() else { return };
    let (m, n, k) = (3, 96, 10);
    let mut rng = Rng::new(21);
    let a = bf16_values(m * k, 1.0, &mut rng);
    let mut b = bf16_values(n * k, 1.0, &mut rng);
    b[16 * k..].fill(f32::INFINITY);
    let c = product(isa, m, n, k, &a, &b);
    for i in 0..m {
        assert!(
            c[i * n..i * n + 16].iter().all(|v| v.is_finite()),
            "row {i}: {c:?}"
        );
    }
}

/// Mean and largest error of `c` against the exact (f64) sums of the same
/// bf16 products, each relative to the sum of the products' magnitudes.
fn errors(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &[f32]) -> (f64, f64) {
    let (mut sum, mut max) = (0f64, 0f64);
    for i in 0..m {
        for j in 0..n {
            let (mut exact, mut abs) = (0f64, 0f64);
            for p in 0..k {
                let prod = f64::from(a[i * k + p]) * f64::from(b[j * k + p]);
                exact += prod;
                abs += prod.abs();
            }
            let e = (f64::from(c[i * n + j]) - exact).abs() / abs.max(f64::MIN_POSITIVE);
            sum += e;
            max = max.max(e);
        }
    }
    (sum / (m * n) as f64, max)
}

/// The AMX sums are no further from the exact sums of the bf16 products
/// than the vector path's, give or take a factor: its mean and largest
/// relative errors (relative to the sum of the products' magnitudes) stay
/// within [`AMX_ERROR_FACTOR`] times the `vdpbf16ps` order's, at the `k`
/// of the reference models' layers.
#[test]
fn amx_error_is_bounded_by_the_vector_paths() {
    let Some(isa) = amx() else { return };
    for &(m, n, k) in &[(32, 64, 64), (32, 64, 768), (16, 32, 3072), (16, 32, 4608)] {
        let mut rng = Rng::new(k as u64);
        let a = bf16_values(m * k, 1.0, &mut rng);
        let b = bf16_values(n * k, 1.0, &mut rng);
        let vector = product(Isa::Portable, m, n, k, &a, &b);
        let tiles = product(isa, m, n, k, &a, &b);
        let (vm, vx) = errors(m, n, k, &a, &b, &vector);
        let (am, ax) = errors(m, n, k, &a, &b, &tiles);
        eprintln!(
            "k {k}: mean error amx {am:.3e} vector {vm:.3e}, largest amx {ax:.3e} vector {vx:.3e}"
        );
        assert!(
            am <= AMX_ERROR_FACTOR * vm,
            "k {k}: mean error {am:e} vs {vm:e}"
        );
        assert!(
            ax <= AMX_ERROR_FACTOR * vx,
            "k {k}: largest error {ax:e} vs {vx:e}"
        );
    }
}

/// How much further from the exact sums the AMX path may be than the
/// vector path (`amx_error_is_bounded_by_the_vector_paths`).
const AMX_ERROR_FACTOR: f64 = 1.0;

/// Pinned to the `avx512` class (or any narrower), a product takes the
/// vector order's bits even on a machine with AMX; the `amx` class takes
/// the tiles.
#[test]
fn the_avx512_class_keeps_the_vector_bits() {
    use crate::cpu::class::{pin_thread, Class};
    let (m, n, k) = (40, 50, 300);
    let mut rng = Rng::new(77);
    let a = bf16_values(m * k, 1.0, &mut rng);
    let b = bf16_values(n * k, 1.0, &mut rng);
    let want = reference(m, n, k, &a, &b, None);
    let packed = PackedBf16::new(n, k, &b);
    let rows = rows_to_bf16(&a, m, k);
    for class in [Class::Avx512, Class::Avx2, Class::Portable] {
        let old = pin_thread(Some(class));
        let mut c = vec![0f32; m * n];
        packed.gemm(m, &rows, None, &mut c);
        pin_thread(old);
        assert_eq!(bits(&c), bits(&want), "{class:?}");
    }
    if let Some(isa) = amx() {
        let old = pin_thread(Some(Class::Amx));
        assert_eq!(Isa::detect(), Isa::Amx);
        let mut c = vec![0f32; m * n];
        packed.gemm(m, &rows, None, &mut c);
        pin_thread(old);
        assert_eq!(bits(&c), bits(&product(isa, m, n, k, &a, &b)));
    }
}

/// GFLOP/s of the AMX path and of `vdpbf16ps` on one thread, at the
/// shapes of BERT-base's products (1024 tokens) and smaller row counts;
/// prints only (the machine is shared: no timed assertion).
#[test]
#[ignore = "prints the speed of the AMX and vdpbf16ps paths (run by hand with --nocapture) and checks they agree within the f32 summation bound"]
fn amx_speed() {
    let Some(amx_isa) = amx() else { return };
    let _guard = crate::cpu::threads::lock_thread_count();
    let before = crate::cpu::num_threads();
    crate::cpu::set_num_threads(1);
    for &(m, k, n) in &[
        (1, 768, 768),
        (16, 768, 768),
        (128, 768, 768),
        (1024, 768, 768),
        (1024, 768, 3072),
        (1024, 3072, 768),
        (128, 64, 128),
        (128, 128, 64),
    ] {
        let mut rng = Rng::new(1);
        let a = bf16_values(m * k, 1.0, &mut rng);
        let b = bf16_values(n * k, 1.0, &mut rng);
        let packed = PackedBf16::new(n, k, &b);
        // on cache lines, as the pooled buffers of the model paths are
        // (`amx::zeroed_on_a_line` says what a misaligned tile row costs)
        let rows_v = rows_to_bf16(&a, m, k);
        let mut rows = crate::cpu::memory::Storage::<u16>::zeroed(rows_v.len());
        rows.copy_from_slice(&rows_v);
        let reps = (4e8 / (m * n * k) as f64).clamp(1.0, 400.0) as usize;
        // sum |a| |b| per output, for the bound the two paths must meet
        let abs = |v: &[f32]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
        let mut mag = vec![0f32; m * n];
        PackedBf16::new(n, k, &abs(&b)).gemm_with(
            amx_isa,
            m,
            &rows_to_bf16(&abs(&a), m, k),
            None,
            &mut mag,
        );
        let mut results: Vec<Vec<f32>> = Vec::new();
        let mut time = |isa: Isa| {
            let mut c = crate::cpu::memory::Storage::<f32>::zeroed(m * n);
            packed.gemm_with(isa, m, &rows, None, &mut c);
            // the best of 5 timings: the machine is shared
            let best = (0..5)
                .map(|_| {
                    let t = std::time::Instant::now();
                    for _ in 0..reps {
                        packed.gemm_with(isa, m, &rows, None, &mut c);
                    }
                    t.elapsed().as_secs_f64() / reps as f64
                })
                .fold(f64::INFINITY, f64::min);
            results.push(c.to_vec());
            best
        };
        let gflops = |s: f64| 2.0 * (m * n * k) as f64 / s / 1e9;
        let mut line = format!("{m:5} x {k:5} x {n:5}:");
        for isa in [amx_isa, Isa::Avx512Bf16] {
            if Isa::all().contains(&isa) {
                line += &format!(" {isa:?} {:7.1} GFLOP/s", gflops(time(isa)));
            }
        }
        eprintln!("{line}");
        // Both paths sum the same exact products in f32 in their own
        // orders: each is within k * 2^-24 * sum |a| |b| of the exact sum
        // (the usual recursive summation bound), so they differ by at most
        // twice that.
        if let [x, y] = &results[..] {
            for ((p, q), s) in x.iter().zip(y).zip(&mag) {
                let bound = k as f32 * f32::EPSILON * s; // 2 k 2^-24 s
                assert!(
                    (p - q).abs() <= bound,
                    "{m}x{k}x{n}: {p} vs {q}, bound {bound}"
                );
            }
        }
    }
    crate::cpu::set_num_threads(before);
}
