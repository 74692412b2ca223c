//! The allocator's one setting the `mimalloc` crate offers no safe form of: how long memory
//! it frees stays resident before it is given back to the system. Every `unsafe` block of the
//! crate is here.
//!
//! mimalloc v3 (the crate's default) waits a second, so a bench run's resident peak counted
//! every buffer freed within the last second: the memtable written out, a checkpoint's log
//! pieces, a merge's blocks. 10 ms (v2's delay) gave the engine's memory back: fillrandom
//! 1M x 100 B at 8 MiB memtable and cache, --disable_wal 1, 90-100 -> 71-74 MiB, --sync 0,
//! 64-66 -> 52-55 MiB, at the same speed.

#![allow(unsafe_code)]

use std::os::raw::{c_int, c_long};

/// `mi_option_purge_delay` in mimalloc v3's `mi_option_e` (its `mimalloc.h`; the sys crate
/// names no constant for it).
const PURGE_DELAY: c_int = 15;

/// v3's default purge delay, milliseconds: a value other than this means the index names
/// another option (another mimalloc) or the user set `MIMALLOC_PURGE_DELAY`; either way it
/// is left alone.
const DEFAULT_PURGE_DELAY_MS: c_long = 1000;

/// The purge delay the CLI runs with, milliseconds.
const PURGE_DELAY_MS: c_long = 10;

extern "C" {
    fn mi_option_get(option: c_int) -> c_long;
    fn mi_option_set(option: c_int, value: c_long);
}

/// Makes mimalloc give freed memory back after [`PURGE_DELAY_MS`] instead of a second,
/// unless the option reads as something else than v3's default (see
/// [`DEFAULT_PURGE_DELAY_MS`]).
pub fn purge_freed_memory_sooner() {
    // SAFETY: mi_option_get and mi_option_set take and return integers only; mimalloc
    // ignores an index past its last option, and options may be set at any time.
    unsafe {
        if mi_option_get(PURGE_DELAY) == DEFAULT_PURGE_DELAY_MS {
            mi_option_set(PURGE_DELAY, PURGE_DELAY_MS);
        }
    }
}
