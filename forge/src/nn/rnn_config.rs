//! [`RnnConfig`]: the hyperparameters every recurrent layer shares.

/// The hyperparameters every recurrent layer shares, with PyTorch's names
/// and defaults (`num_layers = 1`, `bias = true`, `batch_first = false`,
/// `bidirectional = false`).
///
/// ```
/// use forge::nn::RnnConfig;
/// let c = RnnConfig::new(5, 7).num_layers(2).batch_first(true).bidirectional(true);
/// assert_eq!((c.input_size, c.hidden_size, c.num_layers), (5, 7, 2));
/// assert!(c.bias && c.batch_first && c.bidirectional);
/// assert_eq!(c.num_directions(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RnnConfig {
    /// Features of each input step (`I`).
    pub input_size: usize,
    /// Features of the hidden state (`H`).
    pub hidden_size: usize,
    /// Stacked layers; layer `k > 0` reads the output sequence of layer `k - 1`.
    pub num_layers: usize,
    /// Whether the cells have the biases `bias_ih_l{k}` and `bias_hh_l{k}`.
    pub bias: bool,
    /// Input and output are `[N, T, features]` instead of `[T, N, features]`
    /// (the states stay `[layers * directions, N, H]`).
    pub batch_first: bool,
    /// Adds a reverse direction to every layer; outputs are
    /// `[forward, reverse]` on the last dimension.
    pub bidirectional: bool,
}

impl RnnConfig {
    /// One unidirectional layer with biases, time-major, as PyTorch's
    /// defaults.
    ///
    /// ```
    /// let c = forge::nn::RnnConfig::new(3, 4);
    /// assert_eq!(c.num_layers, 1);
    /// assert!(c.bias && !c.batch_first && !c.bidirectional);
    /// ```
    pub fn new(input_size: usize, hidden_size: usize) -> Self {
        RnnConfig {
            input_size,
            hidden_size,
            num_layers: 1,
            bias: true,
            batch_first: false,
            bidirectional: false,
        }
    }

    /// Sets the number of stacked layers.
    ///
    /// ```
    /// assert_eq!(forge::nn::RnnConfig::new(3, 4).num_layers(3).num_layers, 3);
    /// ```
    pub fn num_layers(mut self, num_layers: usize) -> Self {
        self.num_layers = num_layers;
        self
    }

    /// Sets whether the cells have biases.
    ///
    /// ```
    /// assert!(!forge::nn::RnnConfig::new(3, 4).bias(false).bias);
    /// ```
    pub fn bias(mut self, bias: bool) -> Self {
        self.bias = bias;
        self
    }

    /// Sets whether inputs and outputs are batch-major (`[N, T, ..]`).
    ///
    /// ```
    /// assert!(forge::nn::RnnConfig::new(3, 4).batch_first(true).batch_first);
    /// ```
    pub fn batch_first(mut self, batch_first: bool) -> Self {
        self.batch_first = batch_first;
        self
    }

    /// Sets whether every layer also runs in reverse time order.
    ///
    /// ```
    /// assert!(forge::nn::RnnConfig::new(3, 4).bidirectional(true).bidirectional);
    /// ```
    pub fn bidirectional(mut self, bidirectional: bool) -> Self {
        self.bidirectional = bidirectional;
        self
    }

    /// 2 when bidirectional, else 1.
    ///
    /// ```
    /// assert_eq!(forge::nn::RnnConfig::new(3, 4).num_directions(), 1);
    /// ```
    pub fn num_directions(&self) -> usize {
        if self.bidirectional {
            2
        } else {
            1
        }
    }
}
