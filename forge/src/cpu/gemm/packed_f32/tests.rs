//! Tests of the packed kernel: the packing, and every instruction set's
//! kernel against the scalar order it promises.

use super::*;

/// The CPU's instruction sets, failing loudly where it has none (the
/// session's CPUs all have AVX2 + FMA at least; an empty list would make
/// every test here pass without running anything).
fn isas() -> Vec<Isa> {
    let all = Isa::all();
    #[cfg(target_arch = "x86_64")]
    assert!(
        // (the CPU class in force may cap the features: FORGE_CPU_CLASS)
        !all.is_empty() || !crate::cpu::class::cpu_has!("avx2"),
        "an AVX2 CPU without FMA?"
    );
    all
}

/// A strided view (neither rows nor columns contiguous) of an `r x c`
/// matrix stored every other element of rows `2 c + 3` apart.
fn strided(data: &[f32], c: usize) -> Mat<'_, f32> {
    Mat {
        data,
        rs: 2 * c + 3,
        cs: 2,
    }
}

/// The packed panels of `b` and tiles of `a` equal an element-by-element
/// reading of the operand, zero padding included, for every instruction
/// set, every layout (rows contiguous, columns contiguous, neither), edge
/// panels and tiles, and `k` blocks whose length is not a multiple of 16
/// (the transposing paths go 16 x 16 blocks at a time).
#[test]
fn packs_equal_the_element_reading() {
    let (m, k, n) = (29, 300, 45);
    let buf: Vec<f32> = (0..(2 * k + 3) * 2 * m.max(n))
        .map(|v| v as f32 + 0.5)
        .collect();
    let blocks = [(0, KC), (KC, k - KC), (3, 37)];
    for isa in isas() {
        for b in [
            Mat::row_major(&buf, n),
            Mat::transposed(&buf, k),
            strided(&buf, n),
        ] {
            for j0 in (0..n).step_by(NR) {
                for (k0, kc) in blocks {
                    let mut dst = vec![f32::NAN; kc * NR];
                    pack_b_with(isa, b, k0, kc, j0, n, &mut dst);
                    for p in 0..kc {
                        for jj in 0..NR {
                            let j = j0 + jj;
                            let want = if j < n {
                                b.data[(k0 + p) * b.rs + j * b.cs]
                            } else {
                                0.0
                            };
                            assert_eq!(
                                dst[p * NR + jj],
                                want,
                                "{isa:?} b rs {} cs {} ({p}, {j})",
                                b.rs,
                                b.cs
                            );
                        }
                    }
                }
            }
        }
        // tiles of MR rows and gemm_prepacked's short tiles
        check_a::<MR>(isa, &buf, m, k, blocks);
        check_a::<SHORT>(isa, &buf, m, k, blocks);
    }
}

/// The packing's row kernels on their own, at every small size: the
/// transposes ([`pack_a_rows`], for `a`'s tiles of 12 and 8 rows and
/// `b`'s panels of 32 columns) and the masked row copies
/// ([`copy_rows_padded`], every `len <= width` of the packing's widths)
/// equal an element-by-element reading for every `kc` (or row count) up to
/// 40 (whole 16 x 16 blocks, a masked last block, both), every number of
/// live rows, into a NaN-filled destination (every slot written), reading a source that ends
/// exactly at the last float read.
#[test]
fn row_kernels_equal_the_element_reading() {
    for isa in isas() {
        check_rows::<MR>(isa);
        check_rows::<SHORT>(isa);
        check_rows::<NR>(isa);
        for width in [8, 12, 16, 20, 32] {
            for len in 0..=width {
                for rows in [0, 1, 5, 16, 17, 40] {
                    let stride = len + 7;
                    let base = 3;
                    let need = if rows == 0 {
                        0
                    } else {
                        base + (rows - 1) * stride + len
                    };
                    let src: Vec<f32> = (0..need).map(|v| v as f32 + 0.25).collect();
                    let mut dst = vec![f32::NAN; rows * width + 5];
                    copy_rows_padded(isa, &src, base, stride, len, &mut dst, width, rows);
                    for p in 0..rows {
                        for q in 0..width {
                            let want = if q < len {
                                src[base + p * stride + q]
                            } else {
                                0.0
                            };
                            assert_eq!(
                                dst[p * width + q].to_bits(),
                                want.to_bits(),
                                "{isa:?} copy width {width} len {len} rows {rows}: ({p}, {q})"
                            );
                        }
                    }
                    assert!(
                        dst[rows * width..].iter().all(|v| v.is_nan()),
                        "{isa:?} copy width {width} len {len} rows {rows}: wrote past the rows"
                    );
                }
            }
        }
    }
}

/// [`row_kernels_equal_the_element_reading`] for the transposes to `R`.
fn check_rows<const R: usize>(isa: Isa) {
    for kc in 1..=40 {
        for rows in 0..=R {
            {
                let rs = kc + 5;
                let i0 = 2;
                // the source ends at the last float the tile reads
                let len = if rows == 0 {
                    0
                } else {
                    (i0 + rows - 1) * rs + kc
                };
                let src: Vec<f32> = (0..len).map(|v| v as f32 - 0.75).collect();
                let a = Mat::row_major(&src, rs);
                let mut dst = vec![f32::NAN; R * kc + 3];
                pack_a_rows::<R>(isa, a, i0, rows, 0, kc, &mut dst);
                for p in 0..kc {
                    for i in 0..R {
                        let want = if i < rows {
                            src[(i0 + i) * rs + p]
                        } else {
                            0.0
                        };
                        assert_eq!(
                            dst[p * R + i].to_bits(),
                            want.to_bits(),
                            "{isa:?} R {R} kc {kc} rows {rows}: ({i}, {p})"
                        );
                    }
                }
                assert!(
                    dst[R * kc..].iter().all(|v| v.is_nan()),
                    "{isa:?} R {R} kc {kc} rows {rows}: wrote past the tile"
                );
            }
        }
    }
}

/// [`packs_equal_the_element_reading`] for `a` in tiles of `R` rows.
fn check_a<const R: usize>(isa: Isa, buf: &[f32], m: usize, k: usize, blocks: [(usize, usize); 3]) {
    for a in [
        Mat::row_major(buf, k),
        Mat::transposed(buf, m),
        strided(buf, k),
    ] {
        for (i0, rows) in [(0, m), (5, 13), (17, 12)] {
            for (k0, kc) in blocks {
                let tiles = rows.div_ceil(R);
                let mut dst = vec![f32::NAN; tiles * R * kc];
                pack_a::<R>(isa, a, i0, rows, k0, kc, &mut dst);
                for t in 0..tiles {
                    for p in 0..kc {
                        for i in 0..R {
                            let r = t * R + i;
                            let want = if r < rows {
                                a.data[(i0 + r) * a.rs + (k0 + p) * a.cs]
                            } else {
                                0.0
                            };
                            assert_eq!(
                                dst[(t * kc + p) * R + i],
                                want,
                                "{isa:?} a rs {} cs {} ({r}, {p})",
                                a.rs,
                                a.cs
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The order of operations every kernel promises, one element at a time:
/// per `KC` block of `k` (in increasing `k`) the products accumulated from
/// zero in increasing `k` with fused multiply-adds, the first block
/// combined with `c` as `acc` (beta 0, `c` not read) or a fused
/// `beta c + acc`, the later blocks added to `c`. Output rows `ldc` apart.
///
/// # Safety
/// The CPU has FMA (so that `mul_add` is an instruction here, not a call).
#[allow(clippy::too_many_arguments)]
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn scalar_order(
    m: usize,
    k: usize,
    n: usize,
    a: Mat<f32>,
    b: Mat<f32>,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
) {
    for i in 0..m {
        for j in 0..n {
            let at = i * ldc + j;
            let mut k0 = 0;
            while k0 < k {
                let kc = KC.min(k - k0);
                let mut acc = 0f32;
                for p in k0..k0 + kc {
                    acc = a.data[i * a.rs + p * a.cs].mul_add(b.data[p * b.rs + j * b.cs], acc);
                }
                c[at] = if k0 > 0 {
                    c[at] + acc
                } else if beta == 0.0 {
                    acc
                } else {
                    beta.mul_add(c[at], acc)
                };
                k0 += kc;
            }
        }
    }
}

/// Uniform values in [-1, 1) from a small deterministic generator.
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// `r x c` views of `buf` in four layouts: row-major, row-major with
/// rows 3 floats longer than `c` (a left operand's whole tiles are then
/// read in place at a row stride other than `k`), transposed storage
/// (columns contiguous), and strided (neither).
fn layouts(buf: &[f32], r: usize, c: usize) -> [(&'static str, Mat<'_, f32>); 4] {
    [
        ("rows", Mat::row_major(buf, c)),
        (
            "padded rows",
            Mat {
                data: buf,
                rs: c + 3,
                cs: 1,
            },
        ),
        ("cols", Mat::transposed(buf, r)),
        ("strided", strided(buf, c)),
    ]
}

/// Bit-equal, or the first difference.
fn same_bits(got: &[f32], want: &[f32]) -> Result<(), String> {
    match got
        .iter()
        .zip(want)
        .position(|(x, y)| x.to_bits() != y.to_bits())
    {
        None => Ok(()),
        Some(i) => Err(format!("[{i}] {} vs {}", got[i], want[i])),
    }
}

/// Every instruction set's kernel (AVX-512F and AVX2 + FMA where the CPU
/// has them: on an AVX-512 CPU both run, so their bits are pinned to each
/// other too) equals [`scalar_order`] bit for bit: edge tiles in `m` (12
/// and 6 row passes) and `n` (32, 16 and 8 lanes; every width of a last
/// panel in [`every_panel_width_equals_the_scalar_order`]), `k` of one
/// step, under and over a `KC` block and with remainders, `a` and `b` in every layout
/// (a left operand with contiguous rows read in place by the AVX-512 kernel, whole
/// tiles at its row stride from the block's first column, against the same operand
/// packed beforehand), a left operand packed beforehand, an output with a row stride wider
/// than `n`, beta 0 (a NaN in `c` overwritten), 1 and -0.75, 1 and 2
/// threads (the 200-row product is large enough to be split by rows, the
/// 40x300x700 one, wider than tall, by columns over two `KC` blocks, the
/// 200x70x450 one by columns and in two row chunks).
#[cfg(target_arch = "x86_64")]
#[test]
fn kernels_equal_the_scalar_order() {
    let shapes = [
        (1, 1, 1),
        (5, 7, 3),
        (6, 16, 16),
        (7, 9, 17),
        (12, 256, 32),
        (13, 257, 33),
        (48, 1, 32),
        (8, 256, 48),
        (9, 40, 47),
        (17, 257, 41),
        (3, 5, 20),
        (4, 9, 30),
        (25, 300, 70),
        (37, 513, 95),
        (200, 300, 100),
        (40, 300, 700),
        (200, 70, 450),
    ];
    for isa in isas() {
        for (s, &(m, k, n)) in shapes.iter().enumerate() {
            let abuf = values((2 * k + 3) * 2 * m.max(k), 10 + s as u64);
            let bbuf = values((2 * n + 3) * 2 * k.max(n), 20 + s as u64);
            let ldc = if s % 2 == 0 { n } else { n + 3 };
            let c0 = values(m * ldc, 30 + s as u64);
            for (an, a) in layouts(&abuf, m, k) {
                let packed_a = PackedA::new(m, k, a);
                for (bn, b) in layouts(&bbuf, k, n) {
                    for beta in [0.0f32, 1.0, -0.75] {
                        let start = if beta == 0.0 {
                            vec![f32::NAN; m * ldc]
                        } else {
                            c0.clone()
                        };
                        let mut want = start.clone();
                        // SAFETY: the CPU has FMA (every `Isa` implies it).
                        unsafe { scalar_order(m, k, n, a, b, beta, &mut want, ldc) };
                        let pack = |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| {
                            pack_b_with(isa, b, k0, kc, j0, n, dst)
                        };
                        for threads in [1, 2] {
                            for src in [ASrc::Mat(a), ASrc::Packed(&packed_a)] {
                                let mut c = start.clone();
                                let out = Out::row_major(c.as_mut_ptr(), ldc);
                                // SAFETY: `c` holds `m` rows of `ldc >= n`
                                // and is borrowed for the call.
                                unsafe {
                                    gemm_core_isa(isa, m, k, n, src, &pack, beta, out, threads)
                                };
                                let packed = matches!(src, ASrc::Packed(_));
                                if let Err(e) = same_bits(&c, &want) {
                                    panic!(
                                        "{isa:?} {m}x{k}x{n} a {an} b {bn} beta {beta} \
                                         {threads} threads packed a {packed}: {e}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Every width of a last panel (`n` from 1 to `2 NR`: the AVX-512
/// kernel's second vector, the AVX2 kernel's second half, partial or
/// absent, and each 8-lane vector partial at every length) with every
/// instruction set equals [`scalar_order`] bit for bit, for row counts that
/// are not a multiple of `MR` (and one that is), `k` within one block and
/// over two, beta 0 and -0.75, 1 and 2 threads, `b` packed in the call and
/// beforehand ([`PackedB`] through [`gemm_prepacked`]).
#[cfg(target_arch = "x86_64")]
#[test]
fn every_panel_width_equals_the_scalar_order() {
    for isa in isas() {
        for (m, k) in [(13, 19), (12, 5), (5, KC + 3)] {
            let abuf = values(m * k, 80 + m as u64);
            let a = Mat::row_major(&abuf, k);
            for n in 1..=2 * NR {
                let bbuf = values(k * n, 90 + n as u64);
                let b = Mat::row_major(&bbuf, n);
                let pb = PackedB::new(k, n, b);
                for beta in [0.0f32, -0.75] {
                    let start = if beta == 0.0 {
                        vec![f32::NAN; m * n]
                    } else {
                        values(m * n, 100 + n as u64)
                    };
                    let mut want = start.clone();
                    // SAFETY: the CPU has FMA (every `Isa` implies it).
                    unsafe { scalar_order(m, k, n, a, b, beta, &mut want, n) };
                    let pack = |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| {
                        pack_b_with(isa, b, k0, kc, j0, n, dst)
                    };
                    for threads in [1, 2] {
                        let mut c = start.clone();
                        let out = Out::row_major(c.as_mut_ptr(), n);
                        // SAFETY: `c` holds `m x n` and is borrowed for the
                        // call.
                        unsafe {
                            gemm_core_isa(isa, m, k, n, ASrc::Mat(a), &pack, beta, out, threads)
                        };
                        if let Err(e) = same_bits(&c, &want) {
                            panic!("{isa:?} {m}x{k}x{n} beta {beta} {threads} threads: {e}");
                        }
                    }
                    let mut c = start;
                    gemm_prepacked_isa(isa, m, a, &pb, beta, &mut c);
                    if let Err(e) = same_bits(&c, &want) {
                        panic!("{isa:?} {m}x{k}x{n} beta {beta} prepacked: {e}");
                    }
                }
            }
        }
    }
}

/// [`gemm_prepacked`] with every instruction set equals [`scalar_order`]
/// bit for bit, for row counts that take every cut of [`row_split`] (the
/// 8-row short tiles, with their 4-row AVX2 passes, and padded full
/// tiles), `k` under and over a block, partial last panels, `a` and `b`
/// in every layout, beta 0, 1 and -0.75.
#[cfg(target_arch = "x86_64")]
#[test]
fn prepacked_kernels_equal_the_scalar_order() {
    for isa in isas() {
        for (s, &(k, n)) in [(5, 17), (300, 40), (64, 64), (20, 45)].iter().enumerate() {
            let bbuf = values((2 * n + 3) * 2 * k.max(n), 40 + s as u64);
            for (bn, b) in layouts(&bbuf, k, n) {
                let pb = PackedB::new(k, n, b);
                for m in [1, 2, 4, 5, 7, 8, 9, 12, 13, 16, 20, 23, 64] {
                    let abuf = values((2 * k + 3) * 2 * m.max(k), 50 + m as u64);
                    let c0 = values(m * n, 60 + m as u64);
                    for (an, a) in layouts(&abuf, m, k) {
                        for beta in [0.0f32, 1.0, -0.75] {
                            let start = if beta == 0.0 {
                                vec![f32::NAN; m * n]
                            } else {
                                c0.clone()
                            };
                            let mut want = start.clone();
                            // SAFETY: the CPU has FMA (every `Isa` implies
                            // it).
                            unsafe { scalar_order(m, k, n, a, b, beta, &mut want, n) };
                            let mut c = start;
                            gemm_prepacked_isa(isa, m, a, &pb, beta, &mut c);
                            if let Err(e) = same_bits(&c, &want) {
                                panic!("{isa:?} {m}x{k}x{n} a {an} b {bn} beta {beta}: {e}");
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The activation the epilogue tests run: `max(x, 0)` element by element,
/// a NaN kept (so that an output never written shows).
fn relu(xs: &mut [f32]) {
    for x in xs {
        if *x < 0.0 {
            *x = 0.0;
        }
    }
}

/// The bias epilogue (the kernels add the tile's bias, held in registers,
/// to the first `k` block of products as they store them: `c` never read)
/// equals [`scalar_order`] with `beta = 1` over an output prefilled with
/// the bias, bit for bit, with every instruction set: edge tiles in `m`
/// and `n` (every lane count of a last panel's vectors, and both AVX2
/// halves), `k` within one block, of exactly one and over two, `a` in
/// every layout, packed in the call and beforehand, `b` packed in the
/// call and (for the CPU's own set) beforehand as a cached weight is,
/// with and without an activation, 1 and 2 threads, segmented outputs.
/// The output starts as NaN, so a bias or product left out shows.
#[cfg(target_arch = "x86_64")]
#[test]
fn bias_epilogue_equals_the_scalar_order() {
    let _threads = crate::cpu::threads::lock_thread_count();
    let shapes = [
        (1, 1, 1),
        (5, 7, 3),
        (12, 16, 32),
        (13, 17, 33),
        (7, KC, 47),
        (25, KC + 19, 70),
        (37, 40, 100),
        (130, 100, 130),
        (64, 2 * KC + 5, 40),
        (200, 784 - 2 * KC, 10),
    ];
    for isa in isas() {
        for (s, &(m, k, n)) in shapes.iter().enumerate() {
            let abuf = values((2 * k + 3) * 2 * m.max(k), 110 + s as u64);
            let bbuf = values(k * n, 120 + s as u64);
            let bias = values(n, 130 + s as u64);
            // `x W^T`, the weight's columns contiguous
            let b = Mat::transposed(&bbuf, k);
            let pack = |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| {
                pack_b_with(isa, b, k0, kc, j0, n, dst)
            };
            let packed_b = PackedB::new(k, n, b);
            for (an, a) in layouts(&abuf, m, k) {
                let packed_a = PackedA::new(m, k, a);
                let mut plain: Vec<f32> = (0..m).flat_map(|_| bias.iter().copied()).collect();
                // SAFETY: the CPU has FMA (every `Isa` implies it).
                unsafe { scalar_order(m, k, n, a, b, 1.0, &mut plain, n) };
                for act in [None, Some(relu as fn(&mut [f32]))] {
                    let mut want = plain.clone();
                    if let Some(f) = act {
                        f(&mut want);
                    }
                    for threads in [1, 2] {
                        crate::cpu::set_num_threads(threads);
                        for src in [ASrc::Mat(a), ASrc::Packed(&packed_a)] {
                            let packed = matches!(src, ASrc::Packed(_));
                            let what = format!(
                                "{isa:?} {m}x{k}x{n} a {an} packed a {packed} \
                                 act {} {threads} threads",
                                act.is_some()
                            );
                            let mut c = vec![f32::NAN; m * n];
                            let out =
                                Out::row_major(c.as_mut_ptr(), n).with_epilogue(Some(&bias), act);
                            // SAFETY: `c` holds `m x n` and is borrowed for
                            // the call, as is the bias.
                            unsafe { gemm_core_isa(isa, m, k, n, src, &pack, 0.0, out, threads) };
                            if let Err(e) = same_bits(&c, &want) {
                                panic!("{what}: {e}");
                            }
                            if Some(isa) == Isa::detect() {
                                let mut c = vec![f32::NAN; m * n];
                                let out = Out::row_major(c.as_mut_ptr(), n)
                                    .with_epilogue(Some(&bias), act);
                                // SAFETY: as above.
                                unsafe {
                                    gemm_core_packed_b(
                                        m,
                                        k,
                                        n,
                                        src,
                                        packed_b.panels(),
                                        0.0,
                                        out,
                                        threads,
                                    )
                                };
                                if let Err(e) = same_bits(&c, &want) {
                                    panic!("{what} b packed beforehand: {e}");
                                }
                            }
                        }
                    }
                }
            }
            // Segments of 16 columns, 16 + 5 floats apart: each tile's
            // halves in different places.
            if m > 1 {
                let seg_n = n.div_ceil(16) * 16;
                let a = Mat::row_major(&abuf, k);
                let mut plain: Vec<f32> = (0..m).flat_map(|_| bias.iter().copied()).collect();
                // SAFETY: the CPU has FMA.
                unsafe { scalar_order(m, k, n, a, b, 1.0, &mut plain, n) };
                let (seg, stride) = (16, 16 * m + 5);
                let mut c = vec![f32::NAN; seg_n / seg * stride];
                let out = Out::segmented(c.as_mut_ptr(), 16, seg, stride)
                    .with_epilogue(Some(&bias), None);
                // SAFETY: the segments hold `m` rows of 16 each, inside `c`.
                unsafe { gemm_core_isa(isa, m, k, n, ASrc::Mat(a), &pack, 0.0, out, 2) };
                for i in 0..m {
                    for j in 0..n {
                        let got = c[j / seg * stride + j % seg + i * 16];
                        assert_eq!(
                            got.to_bits(),
                            plain[i * n + j].to_bits(),
                            "{isa:?} {m}x{k}x{n} segmented ({i}, {j})"
                        );
                    }
                }
            }
        }
    }
    crate::cpu::set_num_threads(1);
}

/// The epilogue by rows (a bias per row added to each finished sum, then
/// an activation, on each block after its last `k` block) equals
/// [`scalar_order`] followed by a pass adding the bias to each row and
/// then the activation, bit for bit, with every instruction set: edge
/// tiles in `m` (a short last tile included) and `n`, `k` within one
/// block and over two, `a` in every layout, packed in the call and
/// beforehand, `b` with contiguous rows (a convolution's columns) and
/// columns, with and without the bias and the activation, beta 0 (the
/// output starts as NaN) and -0.75, 1 and 2 threads, and a convolution's
/// output: segments of `l` columns (one image's positions), `m l` floats
/// apart.
#[cfg(target_arch = "x86_64")]
#[test]
fn row_epilogue_equals_the_product_then_a_row_pass() {
    let _threads = crate::cpu::threads::lock_thread_count();
    let shapes = [
        (2, 5, 17),
        (12, 16, 32),
        (13, 17, 64),
        (20, KC + 19, 96),
        (64, 2 * KC + 5, 48),
        (37, 40, 160),
    ];
    for isa in isas() {
        for (s, &(m, k, n)) in shapes.iter().enumerate() {
            let abuf = values((2 * k + 3) * 2 * m.max(k), 210 + s as u64);
            let bbuf = values(k * n, 220 + s as u64);
            let bias = values(m, 230 + s as u64);
            let c0 = values(m * n, 240 + s as u64);
            for (bn, b) in [
                ("rows", Mat::row_major(&bbuf, n)),
                ("columns", Mat::transposed(&bbuf, k)),
            ] {
                let pack = |k0: usize, kc: usize, j0: usize, dst: &mut [f32]| {
                    pack_b_with(isa, b, k0, kc, j0, n, dst)
                };
                for (an, a) in layouts(&abuf, m, k) {
                    let packed_a = PackedA::new(m, k, a);
                    for beta in [0.0f32, -0.75] {
                        let start = if beta == 0.0 {
                            vec![f32::NAN; m * n]
                        } else {
                            c0.clone()
                        };
                        let mut sums = start.clone();
                        // SAFETY: the CPU has FMA (every `Isa` implies it).
                        unsafe { scalar_order(m, k, n, a, b, beta, &mut sums, n) };
                        for (rb, act) in [
                            (Some(&bias[..]), None),
                            (Some(&bias[..]), Some(relu as fn(&mut [f32]))),
                            (None, Some(relu as fn(&mut [f32]))),
                        ] {
                            let mut want = sums.clone();
                            for (i, row) in want.chunks_mut(n).enumerate() {
                                if let Some(rb) = rb {
                                    row.iter_mut().for_each(|v| *v += rb[i]);
                                }
                                if let Some(f) = act {
                                    f(row);
                                }
                            }
                            for threads in [1, 2] {
                                for src in [ASrc::Mat(a), ASrc::Packed(&packed_a)] {
                                    let mut c = start.clone();
                                    let out = Out::row_major(c.as_mut_ptr(), n)
                                        .with_row_epilogue(rb, act);
                                    // SAFETY: `c` holds `m x n` and is
                                    // borrowed for the call, as is the bias.
                                    unsafe {
                                        gemm_core_isa(isa, m, k, n, src, &pack, beta, out, threads)
                                    };
                                    if let Err(e) = same_bits(&c, &want) {
                                        panic!(
                                            "{isa:?} {m}x{k}x{n} a {an} b {bn} beta {beta} \
                                             bias {} act {} {threads} threads packed a {}: {e}",
                                            rb.is_some(),
                                            act.is_some(),
                                            matches!(src, ASrc::Packed(_))
                                        );
                                    }
                                }
                            }
                            // a convolution's `[images, m, l]` output, `l`
                            // = 16 positions an image
                            if n % 16 == 0 && beta == 0.0 {
                                let (l, imgs) = (16, n / 16);
                                let mut c = vec![f32::NAN; imgs * m * l];
                                let out = Out::segmented(c.as_mut_ptr(), l, l, m * l)
                                    .with_row_epilogue(rb, act);
                                // SAFETY: image `j / l` holds `m` rows of
                                // `l` at `j / l * m l`, inside `c`.
                                unsafe {
                                    gemm_core_isa(
                                        isa,
                                        m,
                                        k,
                                        n,
                                        ASrc::Packed(&packed_a),
                                        &pack,
                                        0.0,
                                        out,
                                        2,
                                    )
                                };
                                for i in 0..m {
                                    for j in 0..n {
                                        let got = c[j / l * m * l + i * l + j % l];
                                        assert_eq!(
                                            got.to_bits(),
                                            want[i * n + j].to_bits(),
                                            "{isa:?} {m}x{k}x{n} b {bn} images ({i}, {j})"
                                        );
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    crate::cpu::set_num_threads(1);
}

/// `PackedA::new` takes its buffer from the pool unzeroed
/// (`Storage::stale`), so packing must write every slot, the zero padding
/// of a last partial tile included: with the pool seeded with NaN-filled
/// blocks of the packed size, no NaN may survive, for every layout, partial
/// and whole tiles and `k` blocks past `KC`.
#[test]
fn packed_a_writes_every_slot_of_a_stale_buffer() {
    use crate::cpu::memory::Storage;
    if !available() {
        // The path is off under this CPU class (FORGE_CPU_CLASS=portable).
        return;
    }
    for (m, k) in [(1, 1), (7, 5), (12, 300), (13, 17), (25, 2 * KC + 3)] {
        let abuf = values((2 * k + 3) * 2 * m.max(k), 70 + m as u64);
        for (an, a) in layouts(&abuf, m, k) {
            let len = m.div_ceil(MR) * MR * k;
            // Several, so that a block freed by another test's thread in
            // between does not leave this one without a stale block.
            let seeds: Vec<Storage<f32>> = (0..4).map(|_| Storage::filled(len, f32::NAN)).collect();
            drop(seeds);
            let packed = PackedA::new(m, k, a);
            let nan = packed.data.iter().position(|v| v.is_nan());
            assert_eq!(
                nan, None,
                "{m}x{k} a {an}: a slot of the packed buffer was never written"
            );
        }
    }
}
