//! Checking that a decoded table is exactly the canonical table of some fingerprint set.
//!
//! A checksum only catches accidental damage; this check makes sure that whatever a decoder
//! accepts is a table the insert, lookup and merge code can work on (so they never see a run
//! without an end, remainders out of order or out of range) and that re-encoding it gives the
//! same bytes.

use crate::params::FilterParams;
use crate::table::{SlotTable, SLOTS_PER_BLOCK};

/// Walks the runs in quotient order, checking each against the canonical placement rule, and
/// that the table holds `len` fingerprints and has no block beyond the last one it needs.
pub(crate) fn check_canonical(
    params: &FilterParams,
    table: &SlotTable,
    len: u64,
) -> Result<(), &'static str> {
    if len > params.capacity() {
        return Err("more entries than the capacity");
    }
    let mut next_free = 0u64;
    let mut count = 0u64;
    let mut next_quotient = 0u64;
    while let Some(quotient) = table.next_occupied_from(next_quotient) {
        next_quotient = quotient + 1;
        let start = quotient.max(next_free);
        check_unused(table, next_free, start)?;
        let mut slot = start;
        let mut previous: Option<u64> = None;
        loop {
            if slot >= table.slot_count() || !table.is_used(slot) {
                return Err("a run is not closed by a run end");
            }
            let remainder = table.remainder(slot);
            if params.join(quotient, remainder).is_none() {
                return Err("a fingerprint is out of range");
            }
            if previous.is_some_and(|previous| remainder <= previous) {
                return Err("remainders of a run are not strictly ascending");
            }
            previous = Some(remainder);
            count += 1;
            slot += 1;
            if table.is_runend(slot - 1) {
                break;
            }
        }
        next_free = slot;
    }
    check_unused(table, next_free, table.slot_count())?;
    if count != len {
        return Err("the entry count does not match the runs");
    }
    let needed_blocks =
        (params.slot_count() / SLOTS_PER_BLOCK).max(next_free.div_ceil(SLOTS_PER_BLOCK));
    if table.block_count() != needed_blocks {
        return Err("the table does not have the canonical number of blocks");
    }
    Ok(())
}

/// Slots outside runs are all zero.
fn check_unused(table: &SlotTable, from: u64, to: u64) -> Result<(), &'static str> {
    if (from..to)
        .any(|slot| table.is_used(slot) || table.is_runend(slot) || table.remainder(slot) != 0)
    {
        Err("a slot outside every run is not empty")
    } else {
        Ok(())
    }
}
