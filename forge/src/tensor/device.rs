//! Devices: where a tensor's memory lives and which kernels run on it.

use std::fmt::Debug;

/// A compute device. forge ships one, [`Cpu`]; ops are written against this
/// trait so that a second device can be added without changing their
/// signatures.
///
/// ```
/// use forge::{Cpu, Device};
/// assert_eq!(Cpu.name(), "cpu");
/// ```
pub trait Device: Copy + Clone + Default + Debug + PartialEq + Send + Sync + 'static {
    /// A short name for messages (`"cpu"`).
    fn name(&self) -> &'static str;
}

/// The host CPU: data in ordinary memory, kernels in [`crate::cpu`].
///
/// ```
/// let t = forge::Tensor::<f32, forge::Cpu>::zeros(&[2]);
/// assert_eq!(t.device(), forge::Cpu);
/// ```
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Cpu;

impl Device for Cpu {
    fn name(&self) -> &'static str {
        "cpu"
    }
}
