//! The tools' tests (`forge::tools`): anomaly detection, graph export,
//! custom ops, functional transforms, the profiler. A module of the one
//! suite binary (`tests/suite.rs`), its files modules named as the files.

mod anomaly;
mod custom_op;
mod func_parity;
mod graph;
mod layer_diff;
mod profiler;
