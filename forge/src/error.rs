//! [`ForgeError`]: the one error type for everything that touches the
//! outside world (files, bytes, optimizer state, state dicts).

use crate::base::DType;
use std::fmt;
use std::path::PathBuf;

/// Errors from I/O, file formats, state dicts and optimizer state.
///
/// Op shape errors are programming errors and panic instead (naming the op
/// and the shapes), as in PyTorch and ndarray.
///
/// Every variant carries fields a caller can match on (the path of the
/// tensor at fault, the argument's name, the shapes) beside a message:
///
/// ```
/// use forge::ForgeError;
/// let e = ForgeError::format("IDX", "bad magic");
/// assert_eq!(e.to_string(), "invalid format: IDX: bad magic");
/// let e = ForgeError::missing("fc1.weight.exp_avg", "optimizer state");
/// assert!(matches!(&e, ForgeError::MissingKey { path, .. } if path == "fc1.weight.exp_avg"));
/// assert_eq!(e.to_string(), "optimizer state: missing fc1.weight.exp_avg");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum ForgeError {
    /// An operating-system I/O error, with the path it concerned.
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Bytes that do not follow the expected format (truncated, corrupt,
    /// inconsistent header, trailing garbage).
    Format {
        /// Where the bytes came from: the file (`data/train.idx`), the
        /// format (`safetensors`, `IDX`, `training checkpoint`), or both
        /// (`model.safetensors: safetensors`); empty when the detail says
        /// it all (`not a safetensors file: ...`).
        origin: String,
        /// What is wrong, naming the tensor or field at fault.
        detail: String,
    },
    /// A tensor whose shape differs from the one expected.
    Shape {
        /// The tensor path or name.
        name: String,
        /// The shape expected.
        expected: Vec<usize>,
        /// The shape found.
        found: Vec<usize>,
    },
    /// A tensor whose element type is not one of those expected.
    DType {
        /// The tensor path or name.
        name: String,
        /// The types accepted (one or more).
        expected: Vec<DType>,
        /// The type found.
        found: DType,
    },
    /// A state dict that does not fit a model: every missing, unexpected
    /// and mis-shaped key at once.
    StateDict {
        /// Keys the model has and the file lacks.
        missing: Vec<String>,
        /// Keys the file has and the model lacks.
        unexpected: Vec<String>,
        /// `(key, model shape, file shape)` for keys whose shapes differ.
        mismatched: Vec<(String, Vec<usize>, Vec<usize>)>,
    },
    /// A file written by a newer (or unknown) format version.
    Version {
        /// What kind of file.
        what: String,
        /// The version found.
        found: u32,
        /// The newest version this build reads.
        supported: u32,
    },
    /// A required entry that is absent: a buffer of optimizer state, a
    /// part of a training checkpoint.
    MissingKey {
        /// The full path of the missing entry (`fc1.weight.exp_avg`,
        /// `loader`).
        path: String,
        /// Where it was looked for (`optimizer state`, `training
        /// checkpoint`).
        within: String,
    },
    /// Optimizer, schedule, loader or random-generator state that does not
    /// fit the model or the object it is loaded into.
    State {
        /// The tensor path the state belongs to (`fc1.weight`), or the
        /// part it concerns (`data loader`, `schedule`); empty when the
        /// state as a whole does not fit.
        path: String,
        /// What does not fit.
        detail: String,
    },
    /// An argument out of its valid range (a learning rate below zero, ...).
    Invalid {
        /// The argument, with its owner (`Sgd.momentum`,
        /// `LinearLr.start_factor`, `tensor name`).
        name: String,
        /// The whole explanation, naming the argument and its value
        /// (`Sgd: momentum = -1 must be finite and >= 0`).
        detail: String,
    },
    /// A failure between the processes of a data-parallel run: ranks that
    /// disagree (different models, buffer sizes), a peer that is gone, or a
    /// launcher that does not match the MPI library.
    Distributed(String),
    /// A NaN or an infinity where finite values are required: a gradient
    /// given to an optimizer or to gradient clipping whose
    /// `error_if_nonfinite` option is on. Nothing was changed.
    NonFinite {
        /// The tensor at fault (`gradient of fc1.weight`, `total norm of
        /// the gradients`).
        name: String,
        /// What was found (`NaN at index 3`).
        detail: String,
    },
    /// Something this build does not support: a checkpoint's
    /// `model_type`, a configuration option, an element type, a CPU class.
    /// Nothing falls back to a silent default.
    Unsupported {
        /// What is unsupported (`model_type`, `hidden_act`, `dtype`).
        what: String,
        /// The value met and what is supported instead.
        detail: String,
    },
    /// A call that a progress handler stopped by answering `Flow::Cancel`.
    /// What the call had changed is left consistent (see the call's docs).
    Cancelled {
        /// The call that stopped (`evaluate`, `fit`, `generate`).
        call: String,
        /// How far it got (`batch 3 of 10`).
        detail: String,
    },
    /// A `try_` call that found its executor or arena busy and did not
    /// queue.
    Contended {
        /// What was busy (`executor`, `arena`).
        resource: String,
    },
}

impl ForgeError {
    /// An [`Io`](ForgeError::Io) error for `path`.
    ///
    /// ```
    /// let e = forge::ForgeError::io("x.bin", std::io::Error::other("boom"));
    /// assert!(e.to_string().contains("x.bin"));
    /// ```
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ForgeError::Io {
            path: path.into(),
            source,
        }
    }

    /// A [`Format`](ForgeError::Format) error.
    ///
    /// ```
    /// let e = forge::ForgeError::format("safetensors", "tensor 'w': invalid BOOL value");
    /// assert_eq!(e.to_string(), "invalid format: safetensors: tensor 'w': invalid BOOL value");
    /// ```
    pub fn format(origin: impl Into<String>, detail: impl Into<String>) -> Self {
        ForgeError::Format {
            origin: origin.into(),
            detail: detail.into(),
        }
    }

    /// The same error, read from the file at `path`: a
    /// [`Format`](ForgeError::Format) error's origin gains the path in
    /// front; other errors are returned as they are.
    ///
    /// ```
    /// let e = forge::ForgeError::format("IDX", "truncated").in_file("train.idx");
    /// assert_eq!(e.to_string(), "invalid format: train.idx: IDX: truncated");
    /// ```
    pub fn in_file(self, path: impl AsRef<std::path::Path>) -> Self {
        match self {
            ForgeError::Format { origin, detail } => {
                let path = path.as_ref().display();
                let origin = if origin.is_empty() {
                    path.to_string()
                } else {
                    format!("{path}: {origin}")
                };
                ForgeError::Format { origin, detail }
            }
            other => other,
        }
    }

    /// A [`MissingKey`](ForgeError::MissingKey) error.
    ///
    /// ```
    /// let e = forge::ForgeError::missing("loader", "training checkpoint");
    /// assert_eq!(e.to_string(), "training checkpoint: missing loader");
    /// ```
    pub fn missing(path: impl Into<String>, within: impl Into<String>) -> Self {
        ForgeError::MissingKey {
            path: path.into(),
            within: within.into(),
        }
    }

    /// A [`State`](ForgeError::State) error.
    ///
    /// ```
    /// let e = forge::ForgeError::state("fc.bias", "step = 3 cannot advance");
    /// assert_eq!(e.to_string(), "invalid state: fc.bias: step = 3 cannot advance");
    /// ```
    pub fn state(path: impl Into<String>, detail: impl Into<String>) -> Self {
        ForgeError::State {
            path: path.into(),
            detail: detail.into(),
        }
    }

    /// An [`Unsupported`](ForgeError::Unsupported) error.
    ///
    /// ```
    /// let e = forge::ForgeError::unsupported("model_type", "'t5' (supported: gpt2, llama, bert)");
    /// assert_eq!(e.to_string(), "unsupported model_type: 't5' (supported: gpt2, llama, bert)");
    /// assert_eq!(e.kind(), "unsupported");
    /// ```
    pub fn unsupported(what: impl Into<String>, detail: impl Into<String>) -> Self {
        ForgeError::Unsupported {
            what: what.into(),
            detail: detail.into(),
        }
    }

    /// A stable, lower-case spelling of the variant, for logs, metrics and
    /// bindings; it never changes once released.
    ///
    /// ```
    /// let e = forge::ForgeError::missing("loader", "training checkpoint");
    /// assert_eq!(e.kind(), "missing_key");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            ForgeError::Io { .. } => "io",
            ForgeError::Format { .. } => "format",
            ForgeError::Shape { .. } => "shape",
            ForgeError::DType { .. } => "dtype",
            ForgeError::StateDict { .. } => "state_dict",
            ForgeError::Version { .. } => "version",
            ForgeError::MissingKey { .. } => "missing_key",
            ForgeError::State { .. } => "state",
            ForgeError::Invalid { .. } => "invalid",
            ForgeError::Distributed(_) => "distributed",
            ForgeError::NonFinite { .. } => "non_finite",
            ForgeError::Unsupported { .. } => "unsupported",
            ForgeError::Cancelled { .. } => "cancelled",
            ForgeError::Contended { .. } => "contended",
        }
    }

    /// A [`DType`](ForgeError::DType) error: `name` holds `found` where one
    /// of `expected` was needed.
    ///
    /// ```
    /// use forge::{DType, ForgeError};
    /// let e = ForgeError::dtype("w", &[DType::F32, DType::F64], DType::I64);
    /// assert_eq!(e.to_string(), "w: expected dtype F32 or F64, found I64");
    /// assert!(matches!(e, ForgeError::DType { found: DType::I64, .. }));
    /// ```
    pub fn dtype(name: impl Into<String>, expected: &[DType], found: DType) -> Self {
        ForgeError::DType {
            name: name.into(),
            expected: expected.to_vec(),
            found,
        }
    }

    /// An [`Invalid`](ForgeError::Invalid) error.
    ///
    /// ```
    /// let e = forge::ForgeError::invalid("Sgd.momentum", "Sgd: momentum = -1 must be >= 0");
    /// assert_eq!(e.to_string(), "invalid argument: Sgd: momentum = -1 must be >= 0");
    /// ```
    pub fn invalid(name: impl Into<String>, detail: impl Into<String>) -> Self {
        ForgeError::Invalid {
            name: name.into(),
            detail: detail.into(),
        }
    }
}

impl fmt::Display for ForgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForgeError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            ForgeError::Format { origin, detail } if origin.is_empty() => {
                write!(f, "invalid format: {detail}")
            }
            ForgeError::Format { origin, detail } => {
                write!(f, "invalid format: {origin}: {detail}")
            }
            ForgeError::Shape {
                name,
                expected,
                found,
            } => write!(f, "{name}: expected shape {expected:?}, found {found:?}"),
            ForgeError::DType {
                name,
                expected,
                found,
            } => {
                write!(f, "{name}: expected dtype ")?;
                for (i, d) in expected.iter().enumerate() {
                    let sep = match i {
                        0 => "",
                        _ if i + 1 == expected.len() => " or ",
                        _ => ", ",
                    };
                    write!(f, "{sep}{}", d.name())?;
                }
                write!(f, ", found {}", found.name())
            }
            ForgeError::StateDict {
                missing,
                unexpected,
                mismatched,
            } => {
                write!(f, "state dict does not fit the model:")?;
                if !missing.is_empty() {
                    write!(f, " missing keys {missing:?};")?;
                }
                if !unexpected.is_empty() {
                    write!(f, " unexpected keys {unexpected:?};")?;
                }
                for (k, m, file) in mismatched {
                    write!(f, " {k}: model has shape {m:?}, file has {file:?};")?;
                }
                Ok(())
            }
            ForgeError::Version {
                what,
                found,
                supported,
            } => write!(
                f,
                "{what}: format version {found} is newer than the supported version {supported}"
            ),
            ForgeError::MissingKey { path, within } => write!(f, "{within}: missing {path}"),
            ForgeError::State { path, detail } if path.is_empty() => {
                write!(f, "invalid state: {detail}")
            }
            ForgeError::State { path, detail } => write!(f, "invalid state: {path}: {detail}"),
            ForgeError::Invalid { detail, .. } => write!(f, "invalid argument: {detail}"),
            ForgeError::Distributed(m) => write!(f, "distributed: {m}"),
            ForgeError::NonFinite { name, detail } => write!(f, "non-finite {name}: {detail}"),
            ForgeError::Unsupported { what, detail } => write!(f, "unsupported {what}: {detail}"),
            ForgeError::Cancelled { call, detail } if detail.is_empty() => {
                write!(f, "{call}: cancelled")
            }
            ForgeError::Cancelled { call, detail } => write!(f, "{call}: cancelled at {detail}"),
            ForgeError::Contended { resource } => {
                write!(f, "{resource} is busy (a try_ call does not queue)")
            }
        }
    }
}

impl std::error::Error for ForgeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ForgeError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// `Result<T, ForgeError>`.
pub type Result<T> = std::result::Result<T, ForgeError>;
