//! [`generate`]: decoding with a [`KvCache`](super::KvCache): greedy or
//! sampled, stop tokens, batched prompts of different lengths.

use super::causal::CausalLm;
use crate::no_grad;
use crate::tensor::{Element, Float, Rng, Tensor};

/// How each new token is chosen from the logits.
///
/// ```
/// use forge::hub::Sampling;
/// let s = Sampling::Sample { temperature: 0.8, top_k: Some(40), top_p: Some(0.95) };
/// assert_ne!(s, Sampling::Greedy);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    /// The most likely token (the first of equal ones).
    Greedy,
    /// A draw from `softmax(logits / temperature)`, restricted to the
    /// `top_k` most likely tokens, then to the smallest set of most likely
    /// tokens whose probabilities sum to at least `top_p` (Hugging Face's
    /// order).
    Sample {
        /// Positive; below 1 sharpens, above 1 flattens.
        temperature: f64,
        /// Keep only the k most likely tokens (ties at the k-th kept).
        top_k: Option<usize>,
        /// Nucleus: keep the most likely tokens up to this total probability.
        top_p: Option<f64>,
    },
}

/// The settings of [`generate`].
///
/// ```
/// let o = forge::hub::GenerateOptions { max_new_tokens: 5, ..Default::default() };
/// assert_eq!(o.sampling, forge::hub::Sampling::Greedy);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    /// The most tokens added to each prompt (fewer when an end token comes
    /// first or the model's positions run out).
    pub max_new_tokens: usize,
    /// Greedy or sampled.
    pub sampling: Sampling,
    /// Hugging Face's repetition penalty (1 = none): the logit of a token
    /// already in the sequence (prompt included) is divided by it when
    /// positive and multiplied by it when negative.
    pub repetition_penalty: f64,
    /// The seed of the sampling draws: the same seed gives the same tokens,
    /// for any number of threads.
    pub seed: u64,
    /// A sequence ends after any of these tokens (it is included in the
    /// output).
    pub eos_token_ids: Vec<i64>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_new_tokens: 32,
            sampling: Sampling::Greedy,
            repetition_penalty: 1.0,
            seed: 0,
            eos_token_ids: Vec::new(),
        }
    }
}

/// What the per-token callback of [`generate`] answers.
///
/// ```
/// assert_ne!(forge::hub::Flow::Continue, forge::hub::Flow::Stop);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// End the whole call now (the tokens so far are returned).
    Stop,
}

/// Extends each prompt with new tokens, decoding with a
/// [`KvCache`](super::KvCache): the prompts are read once (left-padded to
/// the longest, the padding masked and not counted as positions), then one
/// token per sequence per step. `on_token(sequence, token)` is called for
/// every new token as it is chosen (in sequence order within a step) and can
/// stop the call. Returns the new tokens of each prompt, an end token
/// included when one stopped it.
///
/// Runs without recording a tape. Logits are compared and sampled in f64.
///
/// # Panics
/// When a prompt is empty, a token is out of range, the options are out of
/// range (`temperature <= 0`, `top_k == Some(0)`, `top_p` outside `(0, 1]`,
/// `repetition_penalty <= 0`), or a prompt is longer than the model's
/// positions.
///
/// ```
/// use forge::hub::{generate, load_gpt2, Flow, GenerateOptions};
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
/// let gpt = load_gpt2::<f32>(dir).unwrap();
/// let opts = GenerateOptions { max_new_tokens: 4, ..Default::default() };
/// let mut seen = 0;
/// let out = generate(&gpt, &[vec![5, 6, 7], vec![8]], &opts, |_, _| {
///     seen += 1;
///     Flow::Continue
/// });
/// assert_eq!((out[0].len(), out[1].len(), seen), (4, 4, 8));
/// // A batch gives each prompt the tokens it gets alone.
/// assert_eq!(out[1], generate(&gpt, &[vec![8]], &opts, |_, _| Flow::Continue)[0]);
/// ```
pub fn generate<E: Float, M: CausalLm<E> + ?Sized>(
    model: &M,
    prompts: &[Vec<i64>],
    opts: &GenerateOptions,
    mut on_token: impl FnMut(usize, i64) -> Flow,
) -> Vec<Vec<i64>> {
    check_options(opts);
    let b = prompts.len();
    if b == 0 {
        return Vec::new();
    }
    assert!(
        prompts.iter().all(|p| !p.is_empty()),
        "generate: every prompt needs at least one token"
    );
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let limit = model.max_positions();
    assert!(
        prompts.iter().all(|p| p.len() <= limit),
        "generate: a prompt of {longest} tokens is longer than the model's {limit} positions"
    );
    let mut ids = Vec::with_capacity(b * longest);
    let mut valid = Vec::with_capacity(b * longest);
    for p in prompts {
        let pad = longest - p.len();
        ids.extend(std::iter::repeat_n(0, pad).chain(p.iter().copied()));
        valid.extend(std::iter::repeat_n(false, pad).chain(std::iter::repeat_n(true, p.len())));
    }
    let mut rng = Rng::new(opts.seed);
    let mut history: Vec<Vec<i64>> = prompts.to_vec();
    let mut out = vec![Vec::new(); b];
    let mut done = vec![false; b];
    let v = model.vocab_size();
    no_grad(|| {
        let mut cache = model.new_cache();
        let mut logits = model.forward_cached_last(
            &Tensor::from_vec(ids, &[b, longest]),
            Some(&valid),
            &mut cache,
        );
        for _ in 0..opts.max_new_tokens {
            let data = logits.as_slice();
            let mut next = vec![0i64; b];
            let mut stop = false;
            for r in 0..b {
                if done[r] {
                    continue;
                }
                let row = &data[r * v..(r + 1) * v];
                let mut row: Vec<f64> = row.iter().map(|&x| Element::to_f64(x)).collect();
                penalize(&mut row, &history[r], opts.repetition_penalty);
                let tok = pick(&row, opts.sampling, &mut rng);
                next[r] = tok;
                out[r].push(tok);
                history[r].push(tok);
                if opts.eos_token_ids.contains(&tok) || history[r].len() >= limit {
                    done[r] = true;
                }
                if on_token(r, tok) == Flow::Stop {
                    stop = true;
                }
            }
            if stop || done.iter().all(|&d| d) || out.iter().all(|o| o.len() >= opts.max_new_tokens)
            {
                break;
            }
            let step_valid: Vec<bool> = done.iter().map(|d| !d).collect();
            logits = model.forward_cached_last(
                &Tensor::from_vec(next, &[b, 1]),
                Some(&step_valid),
                &mut cache,
            );
        }
    });
    out
}

fn check_options(o: &GenerateOptions) {
    assert!(
        o.repetition_penalty > 0.0 && o.repetition_penalty.is_finite(),
        "generate: repetition_penalty must be positive, got {}",
        o.repetition_penalty
    );
    if let Sampling::Sample {
        temperature,
        top_k,
        top_p,
    } = o.sampling
    {
        assert!(
            temperature > 0.0 && temperature.is_finite(),
            "generate: temperature must be positive, got {temperature}"
        );
        assert!(top_k != Some(0), "generate: top_k must be at least 1");
        if let Some(p) = top_p {
            assert!(
                p > 0.0 && p <= 1.0,
                "generate: top_p must be in (0, 1], got {p}"
            );
        }
    }
}

/// Hugging Face's repetition penalty over the tokens of `seen`.
pub(crate) fn penalize(row: &mut [f64], seen: &[i64], penalty: f64) {
    if penalty == 1.0 {
        return;
    }
    let mut marked = vec![false; row.len()];
    for &s in seen {
        if let Some(m) = usize::try_from(s).ok().and_then(|i| marked.get_mut(i)) {
            *m = true;
        }
    }
    for (x, m) in row.iter_mut().zip(marked) {
        if m {
            *x = if *x < 0.0 { *x * penalty } else { *x / penalty };
        }
    }
}

/// The index of the first largest value (NaN never wins).
pub(crate) fn argmax(row: &[f64]) -> i64 {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] || row[best].is_nan() {
            best = i;
        }
    }
    best as i64
}

/// Chooses one token of `row` (logits).
pub(crate) fn pick(row: &[f64], sampling: Sampling, rng: &mut Rng) -> i64 {
    let Sampling::Sample {
        temperature,
        top_k,
        top_p,
    } = sampling
    else {
        return argmax(row);
    };
    let scaled: Vec<f64> = row.iter().map(|x| x / temperature).collect();
    let mut order: Vec<usize> = (0..scaled.len()).collect();
    order.sort_by(|&a, &b| scaled[b].total_cmp(&scaled[a]).then(a.cmp(&b)));
    let mut keep = scaled.len();
    if let Some(k) = top_k.filter(|&k| k < scaled.len()) {
        let kth = scaled[order[k - 1]];
        keep = order.iter().take_while(|&&i| scaled[i] >= kth).count();
    }
    let max = scaled[order[0]];
    let weights: Vec<f64> = order[..keep]
        .iter()
        .map(|&i| (scaled[i] - max).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    if let Some(p) = top_p {
        let mut acc = 0.0;
        let mut n = 0;
        for w in &weights {
            acc += w / total;
            n += 1;
            if acc >= p {
                break;
            }
        }
        keep = n.max(1);
    }
    let total: f64 = weights[..keep].iter().sum();
    let mut u = rng.uniform() * total;
    for (j, w) in weights[..keep].iter().enumerate() {
        if u < *w {
            return order[j] as i64;
        }
        u -= w;
    }
    order[keep - 1] as i64
}

#[cfg(test)]
mod tests {
    use super::{penalize, pick, Sampling};
    use crate::Rng;

    #[test]
    fn top_p_keeps_the_nucleus_and_top_k_the_k_best() {
        // probabilities about 0.64, 0.24, 0.09, 0.03
        let row = [3.0, 2.0, 1.0, 0.0];
        let mut rng = Rng::new(1);
        let s = Sampling::Sample {
            temperature: 1.0,
            top_k: None,
            top_p: Some(0.8),
        };
        let mut seen = [0; 4];
        for _ in 0..2000 {
            seen[pick(&row, s, &mut rng) as usize] += 1;
        }
        assert_eq!(seen[2] + seen[3], 0, "{seen:?}");
        assert!(seen[1] > 300, "{seen:?}");
        let s = Sampling::Sample {
            temperature: 1.0,
            top_k: Some(1),
            top_p: None,
        };
        assert!((0..50).all(|_| pick(&row, s, &mut rng) == 0));
    }

    #[test]
    fn repetition_penalty_divides_positive_and_multiplies_negative_logits() {
        let mut row = [2.0, -2.0, 1.0];
        penalize(&mut row, &[0, 1, 1, 7], 2.0);
        assert_eq!(row, [1.0, -4.0, 1.0]);
    }
}
