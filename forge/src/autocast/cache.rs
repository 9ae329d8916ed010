//! The cache of bf16 weights: each weight is converted (and packed) once
//! and reused by every later bf16 product on this thread, across autocast
//! scopes, until the weight is written or dropped.
//!
//! An entry is keyed by the weight's buffer (address, length, layout) and
//! holds a reference to that buffer. Holding it is what keys the entry to
//! the weight's values: forge writes a tensor's values in place only when
//! nothing else shares them, so while the cache holds the buffer any write
//! (an optimizer step, an in-place op) makes a new buffer first
//! (copy-on-write), whose address misses the cache; and the address of a
//! cached buffer cannot be reused by another weight. An entry whose buffer
//! nobody but the cache holds any more (the weight was dropped or written)
//! is evicted at the next miss.

use crate::cpu::bgemm::PackedBf16;
use crate::cpu::memory::Storage;
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

/// The weight's f32 buffer, shared with the weight while the entry exists.
pub(super) type Keeper = Arc<Storage<f32>>;

thread_local! {
    static CACHE: RefCell<HashMap<Key, (Keeper, Entry)>> = RefCell::new(HashMap::new());
}

/// The entry for `key`, made by `make` the first time; `keep` is the
/// weight's buffer.
pub(super) fn get_or_make(key: Key, keep: &Keeper, make: impl FnOnce() -> Entry) -> Entry {
    if let Some(e) = CACHE.with(|c| c.borrow().get(&key).map(|(_, e)| e.clone())) {
        return e;
    }
    let e = make();
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        // entries of weights dropped or rewritten since (only the cache
        // holds their old buffer)
        c.retain(|_, (k, _)| Arc::strong_count(k) > 1);
        c.insert(key, (Arc::clone(keep), e.clone()));
    });
    e
}

/// Drops every entry of this thread.
pub(super) fn clear() {
    CACHE.with(|c| c.borrow_mut().clear());
}

/// How many entries the cache holds on this thread.
pub(super) fn len() -> usize {
    CACHE.with(|c| c.borrow().len())
}
