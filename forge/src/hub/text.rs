//! [`generate_text`]: text in, streamed text out, with stop strings.

use super::causal::CausalLm;
use super::generate::{generate, Flow, GenerateOptions};
use super::tokenizer::HfTokenizer;
use crate::error::Result;
use crate::tensor::Float;

/// What [`generate_text`] returns.
///
/// ```
/// let g = forge::hub::Generated { text: "hi".into(), ids: vec![1], stopped_by: None };
/// assert_eq!(g.ids.len(), 1);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generated {
    /// The new text (up to and including a stop string that ended it).
    pub text: String,
    /// The new token ids (an end token included when one ended it).
    pub ids: Vec<i64>,
    /// The stop string that ended the call, if one did.
    pub stopped_by: Option<String>,
}

/// Continues `prompt_ids` with [`generate`] and streams the new text:
/// `on_text` receives each piece of text as soon as the tokens decode to
/// it (it can stop the call). The call also ends after a token whose text
/// completes one of `stop_strings`.
///
/// # Errors
/// When the tokenizer cannot decode a token.
///
/// # Panics
/// As [`generate`].
///
/// ```
/// use forge::hub::{generate_text, load_gpt2, Flow, GenerateOptions, HfTokenizer};
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/hub/gpt2_tiny");
/// let (gpt, tok) = (load_gpt2::<f32>(dir).unwrap(), HfTokenizer::from_dir(dir).unwrap());
/// let prompt = tok.encode("The quick", false).unwrap();
/// let opts = GenerateOptions { max_new_tokens: 5, ..Default::default() };
/// let mut streamed = String::new();
/// let out = generate_text(&gpt, &tok, &prompt, &opts, &[], |piece| {
///     streamed.push_str(piece);
///     Flow::Continue
/// })
/// .unwrap();
/// assert_eq!(out.text, streamed);
/// assert_eq!(out.ids.len(), 5);
/// ```
pub fn generate_text<E: Float, M: CausalLm<E> + ?Sized>(
    model: &M,
    tokenizer: &HfTokenizer,
    prompt_ids: &[i64],
    opts: &GenerateOptions,
    stop_strings: &[&str],
    mut on_text: impl FnMut(&str) -> Flow,
) -> Result<Generated> {
    let mut ids = Vec::new();
    let mut text = String::new();
    let mut stopped_by = None;
    let mut error = None;
    generate(model, &[prompt_ids.to_vec()], opts, |_, tok| {
        ids.push(tok);
        let full = match tokenizer.decode(&ids, true) {
            Ok(t) => t,
            Err(e) => {
                error = Some(e);
                return Flow::Stop;
            }
        };
        // A token can end inside a multi-byte character: wait for the rest.
        if full.ends_with('\u{FFFD}') || !full.starts_with(&text) {
            return Flow::Continue;
        }
        let mut piece = full[text.len()..].to_string();
        let hit = stop_strings
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| full.find(s).map(|at| (at + s.len(), *s)))
            .min();
        if let Some((end, s)) = hit {
            piece.truncate(end.saturating_sub(text.len()));
            stopped_by = Some(s.to_string());
        }
        text.push_str(&piece);
        let flow = on_text(&piece);
        if stopped_by.is_some() {
            Flow::Stop
        } else {
            flow
        }
    });
    if let Some(e) = error {
        return Err(e);
    }
    Ok(Generated {
        text,
        ids,
        stopped_by,
    })
}
