//! The CPU class the kernels may use: the widest vector instructions a
//! kernel may pick, below what the CPU has.
//!
//! Every kernel that picks its instructions at run time asks
//! `cpu_has!` instead of `is_x86_feature_detected!`
//! alone: a feature counts when the CPU has it and the class in force
//! allows it. The class in force is the executor's, when the calling
//! thread runs an executor's call that pins one (set on its worker
//! threads too), else the process's: `FORGE_CPU_CLASS`
//! (`portable`, `avx2`, `avx512`, `amx`), read once, or
//! [`set_process_class`]. A class above what the CPU has means the CPU's
//! own best. Results are the same bits in every class; only speed
//! differs (see the kernels' own notes), which is what pinning lets a
//! test check on one machine.

use std::cell::Cell;
use std::sync::atomic::{AtomicU8, Ordering};

/// A CPU class, narrowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Class {
    /// Baseline x86-64 (SSE2) or the target's own baseline: no
    /// run-time-detected features.
    Portable = 0,
    /// AVX2 with FMA (and F16C).
    Avx2 = 1,
    /// AVX-512F on top of AVX2.
    Avx512 = 2,
    /// AMX tiles on top of AVX-512F (`crate::cpu::amx`: the CPU has them,
    /// the OS enables them and granted this process the tile state).
    Amx = 3,
}

/// The number of classes: the length of an array indexed by
/// `class as usize` (one detection per class).
pub(crate) const CLASSES: usize = 4;

impl Class {
    fn from_u8(v: u8) -> Class {
        match v {
            0 => Class::Portable,
            1 => Class::Avx2,
            2 => Class::Avx512,
            _ => Class::Amx,
        }
    }

    /// The class named `portable`, `avx2`, `avx512` or `amx` (any case).
    pub(crate) fn parse(name: &str) -> Option<Class> {
        match name.trim().to_ascii_lowercase().as_str() {
            "portable" => Some(Class::Portable),
            "avx2" => Some(Class::Avx2),
            "avx512" => Some(Class::Avx512),
            "amx" => Some(Class::Amx),
            _ => None,
        }
    }
}

/// The widest class this CPU supports.
pub(crate) fn detected() -> Class {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") {
            return if has!("avx512f") && crate::cpu::amx::any() {
                Class::Amx
            } else if has!("avx512f") {
                Class::Avx512
            } else {
                Class::Avx2
            };
        }
    }
    Class::Portable
}

/// The process's class, plus one; 0 until `FORGE_CPU_CLASS` is read.
static PROCESS: AtomicU8 = AtomicU8::new(0);

/// The process's class: [`set_process_class`]'s, else `FORGE_CPU_CLASS`
/// (read once; unset or not a class name: the CPU's best), never above
/// what the CPU has.
pub(crate) fn process_class() -> Class {
    match PROCESS.load(Ordering::Relaxed) {
        0 => {
            let asked = std::env::var("FORGE_CPU_CLASS")
                .ok()
                .and_then(|v| Class::parse(&v));
            let c = asked.map_or(detected(), |a| a.min(detected()));
            // A concurrent set_process_class wins over the variable.
            let _ = PROCESS.compare_exchange(0, c as u8 + 1, Ordering::Relaxed, Ordering::Relaxed);
            Class::from_u8(PROCESS.load(Ordering::Relaxed) - 1)
        }
        v => Class::from_u8(v - 1),
    }
}

/// Sets the process's class (capped at what the CPU has) and returns the
/// class now in force.
pub(crate) fn set_process_class(c: Class) -> Class {
    let c = c.min(detected());
    PROCESS.store(c as u8 + 1, Ordering::Relaxed);
    c
}

thread_local! {
    /// The class pinned for this thread by the executor whose call it runs.
    static PINNED: Cell<Option<Class>> = const { Cell::new(None) };
}

/// Pins `class` for this thread (`None`: the process's), returning the
/// previous pin.
pub(crate) fn pin_thread(class: Option<Class>) -> Option<Class> {
    PINNED.with(|p| p.replace(class.map(|c| c.min(detected()))))
}

/// The class in force on this thread.
pub(crate) fn current() -> Class {
    PINNED.with(Cell::get).unwrap_or_else(process_class)
}

/// Whether the class in force allows a kernel that needs `feature` (an
/// `is_x86_feature_detected!` name, or `amx-int8` / `amx-bf16`): AMX
/// needs [`Class::Amx`], AVX-512 features [`Class::Avx512`], AVX2, FMA and
/// F16C [`Class::Avx2`]; older ones are always allowed.
pub(crate) fn allows(feature: &str) -> bool {
    let needs = if feature.starts_with("amx") {
        Class::Amx
    } else if feature.starts_with("avx512") {
        Class::Avx512
    } else if matches!(feature, "avx2" | "fma" | "f16c" | "bmi1" | "bmi2") {
        Class::Avx2
    } else {
        Class::Portable
    };
    current() >= needs
}

/// `is_x86_feature_detected!(feature)`, and allowed by the CPU class in
/// force on this thread (see the module docs). `"amx-int8"` and
/// `"amx-bf16"` ask `crate::cpu::amx` (CPU, OS and the process's
/// permission) instead of the standard macro.
macro_rules! cpu_has {
    ("amx-int8") => {
        ($crate::cpu::amx::int8() && $crate::cpu::class::allows("amx-int8"))
    };
    ("amx-bf16") => {
        ($crate::cpu::amx::bf16() && $crate::cpu::class::allows("amx-bf16"))
    };
    ($feature:tt) => {
        (std::arch::is_x86_feature_detected!($feature) && $crate::cpu::class::allows($feature))
    };
}
pub(crate) use cpu_has;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_class_caps_the_features() {
        let prev = pin_thread(Some(Class::Portable));
        assert!(!allows("avx2") && !allows("avx512f") && allows("sse2"));
        pin_thread(Some(Class::Avx2));
        assert!(!allows("avx512f"));
        assert_eq!(allows("avx2"), detected() >= Class::Avx2);
        pin_thread(Some(Class::Avx512));
        assert!(!allows("amx-int8") && !cpu_has!("amx-int8") && !cpu_has!("amx-bf16"));
        assert_eq!(allows("avx512f"), detected() >= Class::Avx512);
        pin_thread(Some(Class::Amx));
        assert_eq!(cpu_has!("amx-int8"), crate::cpu::amx::int8());
        pin_thread(prev);
        assert_eq!(Class::parse("AVX512"), Some(Class::Avx512));
        assert_eq!(Class::parse("sse"), None);
        assert_eq!(Class::parse("amx"), Some(Class::Amx));
    }
}
