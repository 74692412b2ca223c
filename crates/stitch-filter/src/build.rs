//! Building a filter in one pass from fingerprints in ascending order.
//!
//! Because the input is sorted, every fingerprint lands at the end of the table built so far:
//! either at the end of the current run, or as a new run at `max(quotient, next free slot)`.
//! Nothing is ever shifted, so building is linear in the number of slots, and the result is the
//! canonical layout that inserting the same fingerprints one by one also produces.

use crate::filter::QuotientFilter;
use crate::params::FilterParams;
use crate::table::{SlotTable, SLOTS_PER_BLOCK};
use crate::FilterError;

pub(crate) struct SortedBuilder {
    params: FilterParams,
    table: SlotTable,
    len: u64,
    /// The last fingerprint placed, its quotient and its slot.
    last: Option<Placed>,
}

#[derive(Clone, Copy)]
struct Placed {
    fingerprint: u64,
    quotient: u64,
    slot: u64,
}

impl SortedBuilder {
    pub(crate) fn new(params: FilterParams) -> Result<Self, FilterError> {
        let table = SlotTable::new(
            params.slot_count() / SLOTS_PER_BLOCK,
            params.remainder_bits(),
        )?;
        Ok(Self {
            params,
            table,
            len: 0,
            last: None,
        })
    }

    /// Appends a fingerprint no smaller than the previous one; a repeat of the previous one is
    /// dropped (the filter is a set).
    pub(crate) fn push(&mut self, fingerprint: u64) -> Result<(), FilterError> {
        let last = self.last;
        if last.is_some_and(|last| last.fingerprint == fingerprint) {
            return Ok(());
        }
        debug_assert!(last.is_none_or(|last| last.fingerprint < fingerprint));
        if self.len >= self.params.capacity() {
            return Err(FilterError::Full {
                capacity: self.params.capacity(),
            });
        }
        let (quotient, remainder) = self.params.split(fingerprint);
        let slot = match last {
            Some(last) if last.quotient == quotient => last.slot + 1,
            _ => {
                if let Some(last) = last {
                    self.table.set_runend(last.slot, true);
                }
                self.table.set_occupied(quotient);
                last.map_or(quotient, |last| quotient.max(last.slot + 1))
            }
        };
        if slot >= self.table.slot_count() {
            self.table.grow_to(slot / SLOTS_PER_BLOCK + 1)?;
        }
        self.table.set_used(slot);
        self.table.set_remainder(slot, remainder);
        self.len += 1;
        self.last = Some(Placed {
            fingerprint,
            quotient,
            slot,
        });
        Ok(())
    }

    pub(crate) fn finish(mut self) -> QuotientFilter {
        if let Some(last) = self.last {
            self.table.set_runend(last.slot, true);
        }
        QuotientFilter::from_parts(self.params, self.table, self.len)
    }
}
