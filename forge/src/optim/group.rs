//! Per-parameter options by tensor path: forge's version of PyTorch's
//! parameter groups.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A predicate on a tensor path, deciding which parameters a
/// [`ParamGroup`] applies to.
///
/// The type is deliberately not recursive (no nested "any of"): a file
/// cannot describe an arbitrarily deep value. To give several patterns the
/// same options, add one group per pattern.
///
/// Every variant but [`Custom`](PathMatch::Custom) is plain data and is
/// saved with the optimizer. A closure cannot be written to a file: after
/// [`Persist::load`](crate::optim::Persist::load) a `Custom` matcher is
/// *unbound* and the next step fails with [`ForgeError::State`](crate::ForgeError::State)
/// until the optimizer is rebuilt in code and its state restored with
/// [`Optimizer::restore`](crate::optim::Optimizer::restore).
///
/// ```
/// use forge::optim::PathMatch;
/// assert!(PathMatch::Suffix("bias".into()).matches("fc1.bias"));
/// assert!(PathMatch::Prefix("encoder.".into()).matches("encoder.0.weight"));
/// assert!(!PathMatch::Exact(vec!["a".into()]).matches("b"));
/// ```
#[derive(Clone, Serialize, Deserialize)]
pub enum PathMatch {
    /// Paths starting with the string (`"encoder."`).
    Prefix(String),
    /// Paths ending with the string (`"bias"`).
    Suffix(String),
    /// Paths containing the string (`"norm"`).
    Contains(String),
    /// Exactly these paths.
    Exact(Vec<String>),
    /// A closure; not saved (see the type's documentation).
    Custom(#[serde(skip)] Option<PathFn>),
}

/// A shareable path predicate, as stored by [`PathMatch::Custom`].
pub type PathFn = Arc<dyn Fn(&str) -> bool + Send + Sync>;

impl PathMatch {
    /// Whether `path` matches. An unbound [`Custom`](PathMatch::Custom)
    /// matcher matches nothing (the optimizer refuses to step with one).
    ///
    /// ```
    /// use forge::optim::PathMatch;
    /// let m = PathMatch::Exact(vec!["fc.bias".into(), "ln.weight".into()]);
    /// assert!(m.matches("ln.weight") && m.matches("fc.bias") && !m.matches("fc.weight"));
    /// ```
    pub fn matches(&self, path: &str) -> bool {
        match self {
            PathMatch::Prefix(s) => path.starts_with(s.as_str()),
            PathMatch::Suffix(s) => path.ends_with(s.as_str()),
            PathMatch::Contains(s) => path.contains(s.as_str()),
            PathMatch::Exact(v) => v.iter().any(|p| p == path),
            PathMatch::Custom(f) => f.as_ref().is_some_and(|f| f(path)),
        }
    }

    /// Whether this matcher is a closure lost in a save/load round trip.
    ///
    /// ```
    /// use forge::optim::PathMatch;
    /// assert!(PathMatch::Custom(None).is_unbound());
    /// assert!(!PathMatch::Suffix("bias".into()).is_unbound());
    /// ```
    pub fn is_unbound(&self) -> bool {
        match self {
            PathMatch::Custom(f) => f.is_none(),
            _ => false,
        }
    }
}

impl fmt::Debug for PathMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathMatch::Prefix(s) => write!(f, "Prefix({s:?})"),
            PathMatch::Suffix(s) => write!(f, "Suffix({s:?})"),
            PathMatch::Contains(s) => write!(f, "Contains({s:?})"),
            PathMatch::Exact(v) => write!(f, "Exact({v:?})"),
            PathMatch::Custom(Some(_)) => write!(f, "Custom(<closure>)"),
            PathMatch::Custom(None) => write!(f, "Custom(<unbound>)"),
        }
    }
}

/// Options for the parameters whose path matches: PyTorch's parameter
/// groups, selected by tensor path instead of by listing tensors.
///
/// A group can change the weight decay (for example none on biases and
/// norm weights) and scale the learning rate (`lr_scale(0.1)` for a
/// pretrained encoder). The scale multiplies the optimizer's rate, so a
/// schedule that drives [`set_lr`](crate::optim::Optimizer::set_lr) keeps
/// the ratio between groups, as PyTorch's multiplicative schedules do.
/// The first group that matches a path wins; paths that match no group use
/// the optimizer's own settings.
///
/// ```
/// use forge::optim::{AdamW, ParamGroup};
/// let opt = AdamW::<f32>::new(1e-3)
///     .with_group(ParamGroup::matching(|p| p.ends_with("bias")).weight_decay(0.0))
///     .with_group(ParamGroup::prefix("encoder.").lr_scale(0.1));
/// assert_eq!(opt.hyper_for("fc.bias").weight_decay, 0.0);
/// assert!((opt.hyper_for("encoder.0.weight").lr - 1e-4).abs() < 1e-12);
/// assert_eq!(opt.hyper_for("fc.weight").weight_decay, 0.01);
/// ```
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ParamGroup {
    /// Which paths belong to the group.
    pub matcher: PathMatch,
    /// Multiplies the optimizer's learning rate (default 1).
    pub lr_scale: f64,
    /// Replaces the optimizer's weight decay when set.
    pub weight_decay: Option<f64>,
}

impl ParamGroup {
    /// A group for the paths a matcher selects, with the optimizer's
    /// settings until changed.
    ///
    /// ```
    /// use forge::optim::{ParamGroup, PathMatch};
    /// let g = ParamGroup::new(PathMatch::Contains("norm".into()));
    /// assert_eq!(g.lr_scale, 1.0);
    /// ```
    pub fn new(matcher: PathMatch) -> Self {
        ParamGroup {
            matcher,
            lr_scale: 1.0,
            weight_decay: None,
        }
    }

    /// A group for the paths a closure accepts. The closure is not saved
    /// with the optimizer (see [`PathMatch::Custom`]); prefer
    /// [`prefix`](Self::prefix) / [`suffix`](Self::suffix) for optimizers
    /// you save.
    ///
    /// ```
    /// let g = forge::optim::ParamGroup::matching(|p| p.ends_with("bias"));
    /// assert!(g.matcher.matches("fc.bias"));
    /// ```
    pub fn matching(f: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        Self::new(PathMatch::Custom(Some(Arc::new(f))))
    }

    /// A group for the paths starting with `prefix`.
    ///
    /// ```
    /// let g = forge::optim::ParamGroup::prefix("encoder.");
    /// assert!(g.matcher.matches("encoder.wq"));
    /// ```
    pub fn prefix(prefix: impl Into<String>) -> Self {
        Self::new(PathMatch::Prefix(prefix.into()))
    }

    /// A group for the paths ending with `suffix`.
    ///
    /// ```
    /// let g = forge::optim::ParamGroup::suffix("bias");
    /// assert!(g.matcher.matches("fc1.bias"));
    /// ```
    pub fn suffix(suffix: impl Into<String>) -> Self {
        Self::new(PathMatch::Suffix(suffix.into()))
    }

    /// Sets the group's weight decay.
    ///
    /// ```
    /// let g = forge::optim::ParamGroup::suffix("bias").weight_decay(0.0);
    /// assert_eq!(g.weight_decay, Some(0.0));
    /// ```
    pub fn weight_decay(mut self, wd: f64) -> Self {
        self.weight_decay = Some(wd);
        self
    }

    /// Multiplies the learning rate for the group by `scale`.
    ///
    /// ```
    /// let g = forge::optim::ParamGroup::prefix("encoder.").lr_scale(0.1);
    /// assert_eq!(g.lr_scale, 0.1);
    /// ```
    pub fn lr_scale(mut self, scale: f64) -> Self {
        self.lr_scale = scale;
        self
    }
}
