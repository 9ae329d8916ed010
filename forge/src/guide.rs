//! The user guide's chapters (`docs/src/*.md`), compiled and run as doc
//! tests: each chapter is the documentation of one item here, so every
//! ```` ```rust ```` block of the book runs under `cargo test`. A new
//! chapter gets a line here and in `docs/src/SUMMARY.md`;
//! `tests/misc/docs_links.rs` fails when either is missing.

/// `docs/src/introduction.md`.
#[doc = include_str!("../../docs/src/introduction.md")]
pub struct Introduction;

/// `docs/src/getting-started.md`.
#[doc = include_str!("../../docs/src/getting-started.md")]
pub struct GettingStarted;

/// `docs/src/coming-from-pytorch.md`.
#[doc = include_str!("../../docs/src/coming-from-pytorch.md")]
pub struct ComingFromPytorch;

/// `docs/src/tensors-autograd.md`.
#[doc = include_str!("../../docs/src/tensors-autograd.md")]
pub struct TensorsAutograd;

/// `docs/src/layers.md`.
#[doc = include_str!("../../docs/src/layers.md")]
pub struct Layers;

/// `docs/src/sequential.md`.
#[doc = include_str!("../../docs/src/sequential.md")]
pub struct Sequential;

/// `docs/src/training-loop.md`.
#[doc = include_str!("../../docs/src/training-loop.md")]
pub struct TrainingLoop;

/// `docs/src/data.md`.
#[doc = include_str!("../../docs/src/data.md")]
pub struct Data;

/// `docs/src/checkpoints.md`.
#[doc = include_str!("../../docs/src/checkpoints.md")]
pub struct Checkpoints;

/// `docs/src/checkpoint-integrity.md`.
#[doc = include_str!("../../docs/src/checkpoint-integrity.md")]
pub struct CheckpointIntegrity;

/// `docs/src/models.md`.
#[doc = include_str!("../../docs/src/models.md")]
pub struct Models;

/// `docs/src/hub.md`.
#[doc = include_str!("../../docs/src/hub.md")]
pub struct Hub;

/// `docs/src/quantization.md`.
#[doc = include_str!("../../docs/src/quantization.md")]
pub struct Quantization;

/// `docs/src/distributed.md`.
#[doc = include_str!("../../docs/src/distributed.md")]
pub struct Distributed;

/// `docs/src/runtime.md`.
#[doc = include_str!("../../docs/src/runtime.md")]
pub struct Runtime;

/// `docs/src/serving.md`.
#[doc = include_str!("../../docs/src/serving.md")]
pub struct Serving;

/// `docs/src/reliability.md`.
#[doc = include_str!("../../docs/src/reliability.md")]
pub struct Reliability;

/// `docs/src/performance.md`.
#[doc = include_str!("../../docs/src/performance.md")]
pub struct Performance;

/// `docs/src/performance-conv.md`.
#[doc = include_str!("../../docs/src/performance-conv.md")]
pub struct PerformanceConv;

/// `docs/src/performance-rnn.md`.
#[doc = include_str!("../../docs/src/performance-rnn.md")]
pub struct PerformanceRnn;

/// `docs/src/performance-products.md`.
#[doc = include_str!("../../docs/src/performance-products.md")]
pub struct PerformanceProducts;

/// `docs/src/performance-machines.md`.
#[doc = include_str!("../../docs/src/performance-machines.md")]
pub struct PerformanceMachines;

/// `docs/src/architecture.md`.
#[doc = include_str!("../../docs/src/architecture.md")]
pub struct Architecture;

/// `docs/src/tools-anomaly.md`.
#[doc = include_str!("../../docs/src/tools-anomaly.md")]
pub struct ToolsAnomaly;

/// `docs/src/tools-graph.md`.
#[doc = include_str!("../../docs/src/tools-graph.md")]
pub struct ToolsGraph;

/// `docs/src/tools-custom-ops.md`.
#[doc = include_str!("../../docs/src/tools-custom-ops.md")]
pub struct ToolsCustomOps;

/// `docs/src/tools-transforms.md`.
#[doc = include_str!("../../docs/src/tools-transforms.md")]
pub struct ToolsTransforms;

/// `docs/src/tools-profiler.md`.
#[doc = include_str!("../../docs/src/tools-profiler.md")]
pub struct ToolsProfiler;

/// `docs/src/tools-layer-diff.md`.
#[doc = include_str!("../../docs/src/tools-layer-diff.md")]
pub struct ToolsLayerDiff;

/// `docs/src/ops-coverage.md`.
#[doc = include_str!("../../docs/src/ops-coverage.md")]
pub struct OpsCoverage;

/// `docs/src/coverage.md`.
#[doc = include_str!("../../docs/src/coverage.md")]
pub struct Coverage;
