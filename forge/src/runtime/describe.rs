//! [`describe`]: what the runtime is and holds, in one value.

use super::{cpu_class, detected_cpu_class, executor, Executor, MemoryStats, Simd};
use std::fmt;

/// What [`describe`] reports.
///
/// ```
/// let d = forge::runtime::describe();
/// assert!(d.logical_cores >= 1);
/// assert!(d.to_string().contains("CPU class"));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Description {
    /// The target architecture (`"x86_64"`, ...).
    pub arch: &'static str,
    /// The widest CPU class this CPU supports.
    pub detected_class: Simd,
    /// The class the calling thread's kernels use now.
    pub class: Simd,
    /// The logical cores the operating system lets this process use.
    pub logical_cores: usize,
    /// The process's default thread count.
    pub process_threads: usize,
    /// Every live executor: its name, threads, CPU class, calls pending
    /// and its memory pool (own or the process's: live and held bytes,
    /// reuses, requests to the OS).
    pub executors: Vec<String>,
    /// The counters of every live executor's pool, in the order of
    /// `executors`.
    pub executor_memory: Vec<MemoryStats>,
    /// The process's buffer pool's counters: held and live bytes,
    /// ceiling, reuse.
    pub memory: MemoryStats,
}

/// Describes the runtime: the CPU class in use and the best one this CPU
/// has, the logical cores, the process's thread count, every live
/// [`Executor`] (threads, class, calls pending, its memory pool) and the
/// process's buffer pool's sizes and the memory it holds. Its `Display` is a few lines for a log.
///
/// ```
/// use forge::runtime::{describe, Executor};
/// let exec = Executor::new(2);
/// let d = describe();
/// assert!(d.executors.iter().any(|e| e.contains("executor(2)")));
/// println!("{d}");
/// drop(exec);
/// ```
pub fn describe() -> Description {
    let live = executor::live();
    Description {
        arch: std::env::consts::ARCH,
        detected_class: detected_cpu_class(),
        class: cpu_class(),
        logical_cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        process_threads: crate::cpu::threads::process_threads(),
        executors: live.iter().map(|e: &Executor| format!("{e:?}")).collect(),
        executor_memory: live.iter().map(Executor::memory_stats).collect(),
        memory: crate::cpu::memory::stats_of_process(),
    }
}

impl fmt::Display for Description {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "forge runtime: {}, CPU class {} (best here {}), {} logical cores, {} process threads",
            self.arch, self.class, self.detected_class, self.logical_cores, self.process_threads
        )?;
        for e in &self.executors {
            writeln!(f, "  {e}")?;
        }
        let m = &self.memory;
        write!(
            f,
            "  process memory pool: {} B live, {} B held (ceiling {} B), high water {} B, {} reuses, {} requests to the OS",
            m.live_bytes, m.held_bytes, m.ceiling_bytes, m.high_water_bytes, m.hits, m.misses
        )
    }
}
