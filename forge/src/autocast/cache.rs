//! The per-scope cache of bf16 weights, keyed by the weight's buffer.

use crate::cpu::bgemm::PackedBf16;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

/// What a cached entry was made for: the buffer's address and length and
/// the layout asked for (the kernels pack a weight one way per use).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) addr: usize,
    pub(super) len: usize,
    pub(super) layout: Layout,
}

/// How a weight is held in bf16.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Layout {
    /// Packed `n x k` panels (a linear weight, the `b` of the product).
    Packed,
    /// Plain rows of even length (a convolution weight, the `a`).
    Rows,
}

/// A cached bf16 weight.
#[derive(Clone)]
pub(super) enum Entry {
    Packed(Arc<PackedBf16>),
    Rows(Arc<Vec<u16>>),
}

/// Keeps the f32 buffer alive while its entry exists, so that its address
/// cannot be reused by another weight inside the scope.
type Keeper = Arc<dyn std::any::Any>;

thread_local! {
    static CACHE: RefCell<HashMap<Key, (Keeper, Entry)>> = RefCell::new(HashMap::new());
}

/// The entry for `key`, made by `make` the first time; `keep` holds the
/// weight's buffer.
pub(super) fn get_or_make(
    key: Key,
    keep: impl FnOnce() -> Keeper,
    make: impl FnOnce() -> Entry,
) -> Entry {
    if let Some(e) = CACHE.with(|c| c.borrow().get(&key).map(|(_, e)| e.clone())) {
        return e;
    }
    let e = make();
    CACHE.with(|c| c.borrow_mut().insert(key, (keep(), e.clone())));
    e
}

/// Drops every entry (the outermost scope ended).
pub(super) fn clear() {
    CACHE.with(|c| c.borrow_mut().clear());
}

/// How many entries the cache holds.
#[cfg(test)]
pub(super) fn len() -> usize {
    CACHE.with(|c| c.borrow().len())
}
