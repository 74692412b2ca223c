//! Merging filters: the filter of the union of the inputs, from their stored fingerprints.
//!
//! Each input yields its fingerprints in ascending order; cutting them down to the merged width
//! (dropping low bits) keeps them sorted, so a k-way merge feeds the one-pass
//! [`SortedBuilder`]. The cost is linear in the total number of slots, times the logarithm of
//! the number of inputs (a heap picks the smallest head).

use crate::build::SortedBuilder;
use crate::filter::QuotientFilter;
use crate::params::FilterParams;
use crate::FilterError;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

impl QuotientFilter {
    /// The parameters [`merge`](Self::merge) picks for these inputs:
    ///
    /// * capacity: the sum of the inputs' lengths (the union cannot hold more distinct
    ///   fingerprints);
    /// * fingerprint width: the smallest width among the non-empty inputs (among all inputs if
    ///   every one is empty): a merge keeps every fingerprint bit the inputs have in common and
    ///   can have no more;
    /// * false-positive rate: `fp_rate`, as configured rate of the result. It does not change
    ///   the width; the result's [`fp_rate_estimate`](Self::fp_rate_estimate) tells the rate it
    ///   actually has, which exceeds `fp_rate` when the total outgrew the inputs' spare bits
    ///   (see [`FilterParams::fp_rate_capacity`]).
    pub fn merge_params(
        inputs: &[&QuotientFilter],
        fp_rate: f64,
    ) -> Result<FilterParams, FilterError> {
        // Saturating: a sum past u64 is past MAX_CAPACITY too, which the parameters reject.
        let capacity = inputs
            .iter()
            .fold(0u64, |total, input| total.saturating_add(input.len()));
        let non_empty_width = inputs
            .iter()
            .filter(|input| !input.is_empty())
            .map(|input| input.fingerprint_bits())
            .min();
        let width = non_empty_width
            .or_else(|| inputs.iter().map(|input| input.fingerprint_bits()).min())
            .ok_or(FilterError::NoInputs)?;
        FilterParams::with_fingerprint_bits(capacity, fp_rate, width)
    }

    /// The filter of the union of `inputs`, built from their stored fingerprints alone, with the
    /// parameters of [`merge_params`](Self::merge_params).
    ///
    /// The result equals (slot for slot, and in its encoding) the filter built by inserting
    /// every key hash of every input into `QuotientFilter::with_params(result.params())`.
    /// Fingerprints that coincide (the same key in two inputs, or two keys that agree in the
    /// merged width) are stored once.
    ///
    /// A merge never fails because its rate degrades: it keeps what the inputs' fingerprints
    /// allow and reports it through [`fp_rate_estimate`](Self::fp_rate_estimate). A caller
    /// that needs the configured rate rebuilds from the keys when
    /// `merged.fp_rate_estimate() > fp_rate` (or checks beforehand that the total length stays
    /// within every non-empty input's [`FilterParams::fp_rate_capacity`]).
    pub fn merge(inputs: &[&QuotientFilter], fp_rate: f64) -> Result<QuotientFilter, FilterError> {
        let params = Self::merge_params(inputs, fp_rate)?;
        let width = params.fingerprint_bits();
        let mut streams: Vec<_> = inputs
            .iter()
            .filter(|input| !input.is_empty())
            .map(|input| {
                let dropped_bits = input.fingerprint_bits() - width;
                input
                    .fingerprints()
                    .map(move |fingerprint| fingerprint >> dropped_bits)
            })
            .collect();
        let mut builder = SortedBuilder::new(params)?;
        // The smallest head of every stream, on a heap: a run's filter may come in thousands
        // of parts (one per ingested run it stitched), and scanning every head for each
        // fingerprint made merging one such filter take seconds.
        let mut heads: BinaryHeap<Reverse<(u64, usize)>> = streams
            .iter_mut()
            .enumerate()
            .filter_map(|(index, stream)| stream.next().map(|f| Reverse((f, index))))
            .collect();
        while let Some(Reverse((fingerprint, index))) = heads.pop() {
            builder.push(fingerprint)?;
            if let Some(next) = streams[index].next() {
                heads.push(Reverse((next, index)));
            }
        }
        Ok(builder.finish())
    }
}
