//! The quotient filter: inserts and lookups over a canonical slot table.
//!
//! The table is kept in its canonical layout: runs in quotient order, remainders ascending and
//! distinct within a run, and each run starting as early as it can, at
//! `max(quotient, end of the previous run + 1)`. The layout is a function of the set of stored
//! fingerprints alone, which is what lets a merge (which writes runs in one sorted pass) produce
//! the same table as inserting the same fingerprints one by one.

use crate::params::FilterParams;
use crate::table::{SlotTable, SLOTS_PER_BLOCK};
use crate::{hash_key, FilterError};

/// A quotient filter over 64-bit key hashes: an approximate set with no false negatives, whose
/// stored fingerprints can be merged into larger filters without the keys.
///
/// Build one with [`QuotientFilter::new`] (or [`with_merge_target`](Self::with_merge_target),
/// [`with_spare_bits`](Self::with_spare_bits), [`with_params`](Self::with_params)), fill it with [`insert`](Self::insert) or
/// [`insert_key`](Self::insert_key), query it with [`contains`](Self::contains), combine
/// filters with [`merge`](Self::merge), and persist it with [`encode`](Self::encode) /
/// [`decode`](Self::decode).
///
/// The filter stores a set: a fingerprint inserted twice (the same key again, or two keys whose
/// fingerprints collide) is stored once, and [`len`](Self::len) counts distinct fingerprints.
#[derive(Clone, PartialEq)]
pub struct QuotientFilter {
    params: FilterParams,
    table: SlotTable,
    len: u64,
}

impl std::fmt::Debug for QuotientFilter {
    /// The parameters and counts, not the slots.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuotientFilter")
            .field("params", &self.params)
            .field("len", &self.len)
            .field("blocks", &self.table.block_count())
            .finish()
    }
}

/// Where the run of a quotient is, or would be.
enum RunPlace {
    /// The run exists and its last remainder is in this slot.
    EndsAt(u64),
    /// The quotient has no run; one inserted now would start in this slot.
    WouldStartAt(u64),
}

/// The outcome of searching a run for a remainder.
enum RunSearch {
    Found,
    /// The remainder is absent; keeping the run sorted puts it in this slot.
    InsertAt(u64),
}

impl QuotientFilter {
    /// An empty filter for `capacity` keys at false-positive rate `fp_rate` (in `(0, 0.5]`),
    /// whose fingerprints are wide enough to be merged into filters of up to
    /// [`DEFAULT_MERGE_TARGET`](crate::DEFAULT_MERGE_TARGET) entries at `fp_rate`. Until then
    /// its own rate is lower than `fp_rate`, about `len / 2^p`. See the crate documentation for
    /// the parameter rules.
    pub fn new(capacity: u64, fp_rate: f64) -> Result<Self, FilterError> {
        Self::with_merge_target(capacity, fp_rate, crate::DEFAULT_MERGE_TARGET)
    }

    /// An empty filter whose fingerprints keep `fp_rate` in merges of up to
    /// `max(capacity, merge_target)` entries ([`FilterParams::for_merge_target`]).
    /// `merge_target = 0` gives the narrowest fingerprints that meet `fp_rate` at `capacity`.
    pub fn with_merge_target(
        capacity: u64,
        fp_rate: f64,
        merge_target: u64,
    ) -> Result<Self, FilterError> {
        Self::with_params(FilterParams::for_merge_target(
            capacity,
            fp_rate,
            merge_target,
        )?)
    }

    /// An empty filter whose fingerprints carry `spare_bits` bits beyond what `fp_rate` needs
    /// at `capacity`. Each spare bit doubles the merged size the fingerprints can serve at
    /// `fp_rate`, costs one bit per slot, and halves this filter's own false-positive rate.
    pub fn with_spare_bits(
        capacity: u64,
        fp_rate: f64,
        spare_bits: u32,
    ) -> Result<Self, FilterError> {
        Self::with_params(FilterParams::for_capacity(capacity, fp_rate, spare_bits)?)
    }

    /// An empty filter with explicit parameters, e.g. those a merge chose
    /// (`QuotientFilter::with_params(merged.params())` rebuilds the merged filter from the
    /// keys).
    pub fn with_params(params: FilterParams) -> Result<Self, FilterError> {
        let table = SlotTable::new(
            params.slot_count() / SLOTS_PER_BLOCK,
            params.remainder_bits(),
        )?;
        Ok(Self::from_parts(params, table, 0))
    }

    /// A filter over a table already known to be canonical for `params` and to hold `len`
    /// fingerprints.
    pub(crate) fn from_parts(params: FilterParams, table: SlotTable, len: u64) -> Self {
        Self { params, table, len }
    }

    /// Adds a hash (see [`hash_key`]). Returns `Ok(true)` if its fingerprint was new and
    /// `Ok(false)` if the filter already held it. Fails with [`FilterError::Full`] when a new
    /// fingerprint would exceed the capacity.
    pub fn insert(&mut self, hash: u64) -> Result<bool, FilterError> {
        let (quotient, remainder) = self.params.split(self.params.fingerprint(hash));
        match self.find_run(quotient) {
            RunPlace::EndsAt(end) => match self.search_run(quotient, end, remainder) {
                RunSearch::Found => Ok(false),
                RunSearch::InsertAt(slot) => {
                    self.make_room(slot)?;
                    self.table.set_remainder(slot, remainder);
                    if slot == end + 1 {
                        // Appended: the run now ends one slot later.
                        self.table.set_runend(end, false);
                        self.table.set_runend(slot, true);
                    } else {
                        // Inside the run: its end moved up with the shift.
                        self.table.set_runend(slot, false);
                    }
                    self.len += 1;
                    Ok(true)
                }
            },
            RunPlace::WouldStartAt(slot) => {
                self.make_room(slot)?;
                self.table.set_remainder(slot, remainder);
                self.table.set_runend(slot, true);
                self.table.set_occupied(quotient);
                self.len += 1;
                Ok(true)
            }
        }
    }

    /// [`insert`](Self::insert) of [`hash_key`]`(key)`.
    pub fn insert_key(&mut self, key: &[u8]) -> Result<bool, FilterError> {
        self.insert(hash_key(key))
    }

    /// Whether the filter may hold the hash: always `true` for an inserted hash, and `true`
    /// for an absent one with probability [`fp_rate_estimate`](Self::fp_rate_estimate).
    pub fn contains(&self, hash: u64) -> bool {
        let (quotient, remainder) = self.params.split(self.params.fingerprint(hash));
        if !self.table.is_occupied(quotient) {
            return false;
        }
        match self.find_run(quotient) {
            RunPlace::EndsAt(end) => {
                matches!(self.search_run(quotient, end, remainder), RunSearch::Found)
            }
            // Not reachable on a canonical table (an occupied quotient has a run); answering
            // "maybe" keeps the no-false-negative promise regardless.
            RunPlace::WouldStartAt(_) => true,
        }
    }

    /// [`contains`](Self::contains) of [`hash_key`]`(key)`.
    pub fn contains_key(&self, key: &[u8]) -> bool {
        self.contains(hash_key(key))
    }

    /// The parameters: enough to build an empty filter of the same layout.
    pub fn params(&self) -> FilterParams {
        self.params
    }

    /// Distinct fingerprints stored.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the filter holds no fingerprint.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most distinct fingerprints the filter takes.
    pub fn capacity(&self) -> u64 {
        self.params.capacity()
    }

    /// The configured false-positive rate (what the filter was built for, not what it has now;
    /// see [`fp_rate_estimate`](Self::fp_rate_estimate)).
    pub fn fp_rate(&self) -> f64 {
        self.params.fp_rate()
    }

    /// The expected false-positive rate now, from the fingerprint width and the number of
    /// stored fingerprints: about `len / 2^p`. Below the configured rate while the filter has
    /// spare bits; above it after merges that outgrew them.
    pub fn fp_rate_estimate(&self) -> f64 {
        self.params.fp_rate_at(self.len)
    }

    /// `p`: how many top bits of each hash the filter keeps.
    pub fn fingerprint_bits(&self) -> u32 {
        self.params.fingerprint_bits()
    }

    /// `r`: the width of a stored remainder.
    pub fn remainder_bits(&self) -> u32 {
        self.params.remainder_bits()
    }

    /// Stored fingerprints over home slots (`len / Q`).
    pub fn load_factor(&self) -> f64 {
        self.len as f64 / self.params.slot_count() as f64
    }

    /// Bytes the filter occupies in memory (the slot table plus this struct).
    pub fn memory_bytes(&self) -> usize {
        self.table.allocated_bytes() + std::mem::size_of::<Self>()
    }

    /// Memory bits per stored fingerprint (infinite for an empty filter).
    pub fn bits_per_entry(&self) -> f64 {
        self.memory_bytes() as f64 * 8.0 / self.len as f64
    }

    pub(crate) fn table(&self) -> &SlotTable {
        &self.table
    }

    /// The stored fingerprints in ascending order.
    pub(crate) fn fingerprints(&self) -> Fingerprints<'_> {
        Fingerprints {
            params: &self.params,
            table: &self.table,
            next_quotient: 0,
            next_slot: 0,
            run: None,
        }
    }

    /// Locates the run of `quotient`: counts the runs that started at or before it and had not
    /// ended before it (see [`SlotTable::open_runs_at`]); they end, in order, at the next run
    /// ends, and the run of `quotient` (if occupied) is the last of them.
    fn find_run(&self, quotient: u64) -> RunPlace {
        let table = &self.table;
        if !table.is_used(quotient) {
            // Occupied implies used, so there is no run here and nothing reaches this slot.
            return RunPlace::WouldStartAt(quotient);
        }
        let open = table.open_runs_at(quotient);
        if let Some(end) = open
            .checked_sub(1)
            .and_then(|n| table.nth_runend_from(quotient, n))
        {
            if table.is_occupied(quotient) {
                return RunPlace::EndsAt(end);
            }
            // The slot is covered by earlier runs; a run for this quotient would follow them.
            return RunPlace::WouldStartAt(end + 1);
        }
        // Only a non-canonical table gets here; both callers stay safe with this answer.
        RunPlace::WouldStartAt(quotient)
    }

    /// Searches the run of `quotient`, which ends at `end`, for `remainder`, from its end
    /// backwards (runs are sorted and short).
    fn search_run(&self, quotient: u64, end: u64, remainder: u64) -> RunSearch {
        let mut slot = end;
        loop {
            let stored = self.table.remainder(slot);
            if stored == remainder {
                return RunSearch::Found;
            }
            if stored < remainder {
                return RunSearch::InsertAt(slot + 1);
            }
            // The run starts at its quotient or right after the previous run's end.
            if slot <= quotient || self.table.is_runend(slot - 1) {
                return RunSearch::InsertAt(slot);
            }
            slot -= 1;
        }
    }

    /// Frees `slot` for a new remainder by shifting everything from it up to the next unused
    /// slot one slot up, growing the table past its end if needed.
    fn make_room(&mut self, slot: u64) -> Result<(), FilterError> {
        if self.len >= self.params.capacity() {
            return Err(FilterError::Full {
                capacity: self.params.capacity(),
            });
        }
        let free = loop {
            match self.table.first_unused_from(slot) {
                Some(free) => break free,
                None => self.table.grow_to(self.table.block_count() + 1)?,
            }
        };
        self.table.shift_up(slot, free);
        Ok(())
    }
}

/// Iterator over a filter's fingerprints in ascending order: runs come in quotient order and
/// remainders ascend within a run.
pub(crate) struct Fingerprints<'a> {
    params: &'a FilterParams,
    table: &'a SlotTable,
    /// Where to look for the next occupied quotient.
    next_quotient: u64,
    /// The slot after the last one read.
    next_slot: u64,
    /// The quotient of the run being read, if one is.
    run: Option<u64>,
}

impl Iterator for Fingerprints<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let quotient = match self.run {
            Some(quotient) => quotient,
            None => {
                let quotient = self.table.next_occupied_from(self.next_quotient)?;
                self.next_quotient = quotient + 1;
                self.next_slot = self.next_slot.max(quotient);
                quotient
            }
        };
        // A canonical table ends every run before its last slot; stop rather than read past it.
        if self.next_slot >= self.table.slot_count() {
            return None;
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        self.run = (!self.table.is_runend(slot)).then_some(quotient);
        self.params.join(quotient, self.table.remainder(slot))
    }
}
