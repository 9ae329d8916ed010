//! [`ForgeError`]: the one error type for everything that touches the
//! outside world (files, bytes, optimizer state, state dicts).

use std::fmt;
use std::path::PathBuf;

/// Errors from I/O, file formats, state dicts and optimizer state.
///
/// Op shape errors are programming errors and panic instead (naming the op
/// and the shapes), as in PyTorch and ndarray.
///
/// ```
/// let e = forge::ForgeError::Format("bad magic".into());
/// assert_eq!(e.to_string(), "invalid format: bad magic");
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
    Format(String),
    /// A tensor whose shape differs from the one expected.
    Shape {
        /// The tensor path or name.
        name: String,
        /// The shape expected.
        expected: Vec<usize>,
        /// The shape found.
        found: Vec<usize>,
    },
    /// A tensor whose element type differs from the one expected.
    DType {
        /// The tensor path or name.
        name: String,
        /// The type expected.
        expected: String,
        /// The type found.
        found: String,
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
    /// Optimizer or schedule state that does not fit the model or the
    /// optimizer it is loaded into.
    State(String),
    /// An argument out of its valid range (a learning rate below zero, ...).
    Invalid(String),
    /// A failure between the processes of a data-parallel run: ranks that
    /// disagree (different models, buffer sizes), a peer that is gone, or a
    /// launcher that does not match the MPI library.
    Distributed(String),
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
}

impl fmt::Display for ForgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForgeError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            ForgeError::Format(m) => write!(f, "invalid format: {m}"),
            ForgeError::Shape {
                name,
                expected,
                found,
            } => write!(f, "{name}: expected shape {expected:?}, found {found:?}"),
            ForgeError::DType {
                name,
                expected,
                found,
            } => write!(f, "{name}: expected dtype {expected}, found {found}"),
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
            ForgeError::State(m) => write!(f, "invalid state: {m}"),
            ForgeError::Invalid(m) => write!(f, "invalid argument: {m}"),
            ForgeError::Distributed(m) => write!(f, "distributed: {m}"),
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
