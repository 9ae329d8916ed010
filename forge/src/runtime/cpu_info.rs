//! What this machine's CPU offers the kernels.

use std::fmt;

/// The vector instructions forge's hand-written `f32` kernels (gemm,
/// small convolutions, max pooling, the recurrent cells, the
/// transcendental functions) run with: the CPU class. The widest this CPU
/// has unless `FORGE_CPU_CLASS`, [`set_cpu_class`](super::set_cpu_class)
/// or an executor ([`Executor::with_cpu_class`](super::Executor::with_cpu_class))
/// pins a narrower one. Other element types and other CPUs run portable
/// loops. [`Simd::Amx`] adds the AMX tile kernels (the int8 matrix
/// products) to AVX-512F; the class `Avx512` turns them off.
///
/// ```
/// use forge::runtime::Simd;
/// assert_eq!(Simd::Avx512.to_string(), "AVX-512F");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Simd {
    /// AVX-512F: 16 `f32` lanes.
    Avx512,
    /// AVX2 with FMA: 8 `f32` lanes.
    Avx2Fma,
    /// Neither: the portable loops (what the compiler vectorises).
    Portable,
    /// AVX-512F plus the AMX tiles (`tdpbusd` for the int8 matrix
    /// products), where the CPU has them and Linux grants the process the
    /// tile state.
    Amx,
}

impl fmt::Display for Simd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Simd::Avx512 => "AVX-512F",
            Simd::Avx2Fma => "AVX2+FMA",
            Simd::Portable => "portable",
            Simd::Amx => "AMX+AVX-512F",
        })
    }
}

/// A description of the CPU as the runtime sees it, from [`cpu_info`].
///
/// ```
/// let c = forge::runtime::cpu_info();
/// assert!(c.logical_cores >= 1);
/// assert!(c.to_string().contains(c.arch));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuInfo {
    /// The target architecture forge was compiled for (`"x86_64"`, ...).
    pub arch: &'static str,
    /// The widest vector instructions the kernels use here.
    pub simd: Simd,
    /// The logical cores the operating system lets this process use.
    pub logical_cores: usize,
    /// The threads the kernels use now ([`num_threads`](super::num_threads)).
    pub threads: usize,
}

impl fmt::Display for CpuInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, {} kernels, {} logical cores, {} threads",
            self.arch, self.simd, self.logical_cores, self.threads
        )
    }
}

/// Describes this machine's CPU: the architecture, the vector
/// instructions the kernels use on the calling thread (its CPU class), the
/// logical cores available and the current thread count.
///
/// ```
/// let c = forge::runtime::cpu_info();
/// assert_eq!(c.threads, forge::runtime::num_threads());
/// println!("{c}"); // e.g. "x86_64, AVX-512F kernels, 2 logical cores, 2 threads"
/// ```
pub fn cpu_info() -> CpuInfo {
    CpuInfo {
        arch: std::env::consts::ARCH,
        simd: detect(),
        logical_cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        threads: super::num_threads(),
    }
}

/// The class in force on the calling thread.
fn detect() -> Simd {
    super::cpu_class()
}
