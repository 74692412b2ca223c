//! A run's filter: quotient filters, which a merge combines from its inputs' without
//! rereading a key (so blocks can be stitched unread), or Bloom filters, smaller at the same
//! false-positive rate but rebuilt from every key (a table with one copies its merges). The
//! table's layout chooses (`crate::layout`); a filter extent's payload says which it holds.

use stitch_filter::{is_bloom, BloomFilter, QuotientFilter};

/// One part of a run's filter.
#[derive(Debug, Clone, PartialEq)]
pub enum RunFilter {
    Quotient(QuotientFilter),
    Bloom(BloomFilter),
}

impl RunFilter {
    /// Whether a key of this hash (`stitch_filter::hash_key`) may be in the part's blocks.
    #[inline]
    pub fn contains(&self, hash: u64) -> bool {
        match self {
            RunFilter::Quotient(f) => f.contains(hash),
            RunFilter::Bloom(f) => f.contains(hash),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        match self {
            RunFilter::Quotient(f) => f.encode(),
            RunFilter::Bloom(f) => f.encode(),
        }
    }

    /// A filter extent's payload, of either kind (told apart by its magic).
    pub fn decode(payload: &[u8]) -> Result<RunFilter, String> {
        match is_bloom(payload) {
            true => BloomFilter::decode(payload).map(RunFilter::Bloom),
            false => QuotientFilter::decode(payload).map(RunFilter::Quotient),
        }
        .map_err(|e| e.to_string())
    }

    pub fn memory_bytes(&self) -> usize {
        match self {
            RunFilter::Quotient(f) => f.memory_bytes(),
            RunFilter::Bloom(f) => f.memory_bytes(),
        }
    }

    /// The quotient filter, if this is one (what merges combine).
    pub fn quotient(&self) -> Option<&QuotientFilter> {
        match self {
            RunFilter::Quotient(f) => Some(f),
            RunFilter::Bloom(_) => None,
        }
    }
}

/// Which filter a table's runs get.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FilterChoice {
    None,
    /// A quotient filter of this false-positive rate.
    Quotient(f64),
    /// A Bloom filter of this many bits per key.
    Bloom(u32),
}

impl FilterChoice {
    /// The filter of a run holding keys of `hashes` (`None`: no filter was chosen, or it
    /// cannot be built; the run then answers every lookup itself).
    pub fn build(self, hashes: &[u64]) -> Option<RunFilter> {
        let keys = hashes.len().max(1) as u64;
        match self {
            FilterChoice::None => None,
            FilterChoice::Quotient(rate) => {
                let mut filter = QuotientFilter::new(keys, rate).ok()?;
                for &h in hashes {
                    filter.insert(h).ok()?;
                }
                Some(RunFilter::Quotient(filter))
            }
            FilterChoice::Bloom(bits) => {
                let mut filter = BloomFilter::new(keys, bits).ok()?;
                for &h in hashes {
                    filter.insert(h);
                }
                Some(RunFilter::Bloom(filter))
            }
        }
    }

    /// A quotient filter of `rate`, or none without one.
    pub fn quotient(rate: Option<f64>) -> FilterChoice {
        rate.map_or(FilterChoice::None, FilterChoice::Quotient)
    }

    /// Whether runs get a filter, so their keys' hashes are wanted.
    pub fn wants_hashes(self) -> bool {
        self != FilterChoice::None
    }
}
