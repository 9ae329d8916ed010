use super::tiles::{Config, Tiles};
use super::*;

#[test]
fn detection_is_stable_and_consistent() {
    assert_eq!(int8(), int8());
    assert_eq!(any(), int8() || bf16());
    // CPUID's own word for it, as a cross-check of the bit numbers.
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if cpuinfo.contains(" amx_int8") && cpuinfo.contains(" amx_tile") {
        // The permission request may be refused (seccomp), never the CPUID bits.
        let (_, i8_bit, _) = probe_bits();
        assert!(
            i8_bit,
            "/proc/cpuinfo lists amx_int8 but CPUID leaf 7 does not"
        );
    }
}

/// The CPUID bits alone.
fn probe_bits() -> (bool, bool, bool) {
    // Leaf 7 exists on CPUs that list AMX in /proc/cpuinfo.
    let l7 = std::arch::x86_64::__cpuid_count(7, 0);
    (
        l7.edx & (1 << 24) != 0,
        l7.edx & (1 << 25) != 0,
        l7.edx & (1 << 22) != 0,
    )
}

#[test]
fn one_tdpbusd_is_the_exact_sum() {
    if !int8() {
        return;
    }
    // a: 16 x 64 bytes, b: 16 quads x 16 columns x 4 bytes.
    let a: Vec<u8> = (0..16 * 64).map(|i| (i * 37 % 256) as u8).collect();
    let b: Vec<i8> = (0..16 * 64).map(|i| (i * 91 % 256) as u8 as i8).collect();
    let mut c = [0i32; 256];
    let mut cfg = Config::new();
    cfg.set(0, 16, 64).set(1, 16, 64).set(2, 16, 64);
    // SAFETY: AMX-INT8 is usable (checked); a, b and c are 16 rows of 64
    // bytes at stride 64, the configured shapes.
    unsafe {
        let t = Tiles::new(&cfg);
        t.load::<1>(a.as_ptr(), 64);
        t.load::<2>(b.as_ptr().cast(), 64);
        t.dpbusd::<0, 1, 2>();
        t.store::<0>(c.as_mut_ptr().cast(), 64);
    }
    for i in 0..16 {
        for j in 0..16 {
            let want: i32 = (0..64)
                .map(|p| a[i * 64 + p] as i32 * b[(p / 4) * 64 + j * 4 + p % 4] as i32)
                .sum();
            assert_eq!(c[i * 16 + j], want, "({i}, {j})");
        }
    }
}

#[test]
fn zeroed_on_a_line_starts_on_a_line_and_is_zero() {
    for len in [1, 31, 32, 33, 1024] {
        let mut v = vec![7u16; 3];
        let at = super::zeroed_on_a_line(&mut v, len);
        assert_eq!(v[at..].as_ptr() as usize % 64, 0, "{len}");
        assert!(v[at..at + len].iter().all(|&x| x == 0));
        let mut f = vec![1i32; 5];
        let at = super::zeroed_on_a_line(&mut f, len);
        assert_eq!(f[at..].as_ptr() as usize % 64, 0, "{len}");
        assert!(f[at..at + len].iter().all(|&x| x == 0));
        let mut b = vec![1u8; 70];
        let at = super::zeroed_on_a_line(&mut b, len);
        assert_eq!(b[at..].as_ptr() as usize % 64, 0, "{len}");
        assert!(b[at..at + len].iter().all(|&x| x == 0));
    }
}
