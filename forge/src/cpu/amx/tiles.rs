//! The tile instructions, one wrapper each, behind a guard that holds a
//! tile configuration for the calling thread.

use core::arch::asm;
use std::marker::PhantomData;

/// Rows of a tile, at most.
pub(crate) const MAX_ROWS: usize = 16;
/// Bytes per tile row, at most.
pub(crate) const MAX_COLSB: usize = 64;

/// The 64-byte operand of `ldtilecfg` (palette 1): rows and bytes per
/// row of each of the eight tiles (a tile left at 0 x 0 is unused).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

impl Config {
    /// Palette 1 with every tile unused.
    pub(crate) fn new() -> Config {
        Config {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            colsb: [0; 16],
            rows: [0; 16],
        }
    }

    /// Shapes tile `tile` as `rows` rows of `colsb` bytes.
    ///
    /// # Panics
    /// When `tile > 7`, `rows` is not in `1..=16` or `colsb` is not a
    /// multiple of 4 in `4..=64` (what `ldtilecfg` accepts).
    pub(crate) fn set(&mut self, tile: usize, rows: usize, colsb: usize) -> &mut Config {
        assert!(
            tile < 8 && (1..=MAX_ROWS).contains(&rows) && (4..=MAX_COLSB).contains(&colsb),
            "amx: tile {tile} of {rows} x {colsb} bytes"
        );
        assert!(colsb.is_multiple_of(4), "amx: {colsb} bytes per row");
        self.rows[tile] = rows as u8;
        self.colsb[tile] = colsb as u16;
        self
    }

    /// The shape of tile `tile`: (rows, bytes per row).
    pub(crate) fn shape(&self, tile: u8) -> (usize, usize) {
        let t = usize::from(tile);
        (usize::from(self.rows[t]), usize::from(self.colsb[t]))
    }
}

/// A tile configuration in force on the calling thread: made by
/// `ldtilecfg`, ended by `tilerelease` when dropped. Not `Send`: tiles
/// belong to the thread that configured them.
pub(crate) struct Tiles {
    config: Config,
    _not_send: PhantomData<*const ()>,
}

impl Tiles {
    /// Loads `config` (every tile starts at zero).
    ///
    /// # Safety
    /// The CPU and the OS allow the tile state (`super::any()` is true:
    /// the permission has been granted), and no other `Tiles` is alive
    /// on this thread (the configuration is one per thread).
    pub(crate) unsafe fn new(config: &Config) -> Tiles {
        // SAFETY: `config` is a valid 64-byte palette-1 configuration
        // (`Config::set` checks every shape), readable for 64 bytes; the
        // caller guarantees AMX is enabled and permitted.
        unsafe {
            asm!("ldtilecfg [{}]", in(reg) config as *const Config, options(nostack, readonly));
        }
        Tiles {
            config: *config,
            _not_send: PhantomData,
        }
    }

    /// The configured shape of tile `T`.
    fn shape<const T: u8>(&self) -> (usize, usize) {
        self.config.shape(T)
    }

    /// `tileloadd`: tile `T` from `ptr`, rows `stride` bytes apart.
    ///
    /// # Safety
    /// For each of the tile's configured rows `r`, the bytes
    /// `ptr + r * stride .. + colsb` are readable.
    #[inline(always)]
    pub(crate) unsafe fn load<const T: u8>(&self, ptr: *const u8, stride: usize) {
        debug_assert!(self.shape::<T>().0 > 0, "amx: tile {T} is not configured");
        // SAFETY: the caller guarantees the rows read are readable; the
        // tile is configured (this guard is alive).
        unsafe {
            asm!("tileloadd tmm{t}, [{p} + {s} * 1]", t = const T, p = in(reg) ptr,
                s = in(reg) stride, options(nostack, readonly, preserves_flags));
        }
    }

    /// `tileloaddt1`: [`load`](Self::load) with a hint that the data will
    /// not be reused soon (the CPU may keep it out of the first-level
    /// cache).
    ///
    /// # Safety
    /// As for [`load`](Self::load).
    #[inline(always)]
    pub(crate) unsafe fn load_t1<const T: u8>(&self, ptr: *const u8, stride: usize) {
        debug_assert!(self.shape::<T>().0 > 0, "amx: tile {T} is not configured");
        // SAFETY: as in `load`.
        unsafe {
            asm!("tileloaddt1 tmm{t}, [{p} + {s} * 1]", t = const T, p = in(reg) ptr,
                s = in(reg) stride, options(nostack, readonly, preserves_flags));
        }
    }

    /// `tilestored`: tile `T` to `ptr`, rows `stride` bytes apart.
    ///
    /// # Safety
    /// For each of the tile's configured rows `r`, the bytes
    /// `ptr + r * stride .. + colsb` are writable and not aliased.
    #[inline(always)]
    pub(crate) unsafe fn store<const T: u8>(&self, ptr: *mut u8, stride: usize) {
        debug_assert!(self.shape::<T>().0 > 0, "amx: tile {T} is not configured");
        // SAFETY: the caller guarantees the rows written are writable.
        unsafe {
            asm!("tilestored [{p} + {s} * 1], tmm{t}", t = const T, p = in(reg) ptr,
                s = in(reg) stride, options(nostack, preserves_flags));
        }
    }

    /// `tilezero`: tile `T` to zero.
    #[inline(always)]
    pub(crate) fn zero<const T: u8>(&self) {
        // SAFETY: tilezero touches only the tile register, configured
        // while this guard lives.
        unsafe {
            asm!("tilezero tmm{t}", t = const T, options(nomem, nostack, preserves_flags));
        }
    }

    /// `tdpbusd`: tile `C` (`i32`) += tile `A` (`u8`) x tile `B` (`i8`,
    /// four `k` per 32-bit element), exact `i32` sums.
    ///
    /// # Safety
    /// The CPU has AMX-INT8 (`super::int8()`), and the shapes agree: `C`
    /// is `m` rows of `4 n` bytes, `A` `m` rows of `4 k` bytes, `B` `k`
    /// rows of `4 n` bytes (otherwise the instruction faults).
    #[inline(always)]
    pub(crate) unsafe fn dpbusd<const C: u8, const A: u8, const B: u8>(&self) {
        // SAFETY: registers only; the caller guarantees the instruction
        // and the shapes.
        unsafe {
            asm!("tdpbusd tmm{c}, tmm{a}, tmm{b}", c = const C, a = const A, b = const B,
                options(nomem, nostack, preserves_flags));
        }
    }

    /// `tdpbf16ps`: tile `C` (`f32`) += tile `A` (bf16 pairs) x tile `B`
    /// (bf16 pairs).
    ///
    /// # Safety
    /// The CPU has AMX-BF16 (`super::bf16()`), and the shapes agree as for
    /// [`dpbusd`](Self::dpbusd) (a 32-bit element holds two bf16).
    #[inline(always)]
    pub(crate) unsafe fn dpbf16ps<const C: u8, const A: u8, const B: u8>(&self) {
        // SAFETY: registers only; the caller guarantees the instruction
        // and the shapes.
        unsafe {
            asm!("tdpbf16ps tmm{c}, tmm{a}, tmm{b}", c = const C, a = const A, b = const B,
                options(nomem, nostack, preserves_flags));
        }
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        // SAFETY: tilerelease returns the tile state to its initial state;
        // it needs AMX, which `Tiles::new`'s caller guaranteed.
        unsafe { asm!("tilerelease", options(nomem, nostack, preserves_flags)) };
    }
}
