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

const SIZES: [(usize, usize, usize); 9] = [
    (1, 1, 1),
    (3, 5, 7),
    (4, 4, 16),
    (5, 13, 17),
    (7, 33, 65),
    (9, 64, 64),
    (13, 127, 70),
    (2, 300, 131),
    (17, 9, 200),
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
    let (m, k, n) = (67, 300, 201);
    let a = padded(m, k, &bytes(m * k, 7));
    let b: Vec<i8> = bytes(n * k, 8).into_iter().map(|v| v as i8).collect();
    let packed = PackedI8::new(n, k, &b);
    assert_eq!(
        packed.row_sums()[3],
        b[3 * k..4 * k].iter().map(|&v| v as i32).sum::<i32>()
    );
    let mut one = vec![0i32; m * n];
    crate::cpu::set_num_threads(1);
    packed.gemm(m, &a, &mut one);
    crate::cpu::set_num_threads(2);
    let mut two = vec![0i32; m * n];
    packed.gemm(m, &a, &mut two);
    assert_eq!(one, two);
}
