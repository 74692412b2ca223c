//! Errors of the filter crate.

/// Everything that can go wrong building, filling, merging or decoding a filter.
///
/// No operation panics on bad input: bad arguments and damaged encodings come back as one of
/// these.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FilterError {
    /// The false-positive rate is not in `(0, 0.5]` (or is NaN).
    #[error("false-positive rate {0} is outside (0, 0.5]")]
    InvalidFpRate(f64),
    /// More entries than any filter is built for ([`MAX_CAPACITY`](crate::MAX_CAPACITY)).
    #[error("capacity {capacity} exceeds the maximum of {max} entries")]
    CapacityTooLarge {
        /// The capacity asked for.
        capacity: u64,
        /// The largest there is.
        max: u64,
    },
    /// The requested fingerprint width is outside `1..=64`.
    #[error("fingerprint width of {0} bits is outside 1..=64")]
    InvalidFingerprintBits(u32),
    /// The capacity, rate and spare bits asked for need fingerprints wider than the 64-bit
    /// hash.
    #[error("the filter would need {needed}-bit fingerprints; the hash has 64 bits")]
    FingerprintTooWide {
        /// The fingerprint bits needed.
        needed: u32,
    },
    /// The table could not be allocated.
    #[error("cannot allocate a slot table of {bytes} bytes")]
    OutOfMemory {
        /// The table's size.
        bytes: u64,
    },
    /// The filter already holds `capacity` distinct fingerprints.
    #[error("the filter is full: it holds its capacity of {capacity} fingerprints")]
    Full {
        /// The filter's capacity.
        capacity: u64,
    },
    /// The Bloom filter's bits per key are outside `1..=32`.
    #[error("{0} bits per key is outside 1..=32")]
    InvalidBitsPerKey(u32),
    /// A Bloom filter of this many keys and bits per key would exceed
    /// [`MAX_BLOOM_BITS`](crate::MAX_BLOOM_BITS).
    #[error(
        "a Bloom filter of {keys} keys at {bits_per_key} bits per key exceeds {max_bits} bits"
    )]
    BloomTooLarge {
        /// The keys asked for.
        keys: u64,
        /// The bits per key asked for.
        bits_per_key: u32,
        /// The most bits a Bloom filter has.
        max_bits: u64,
    },
    /// [`QuotientFilter::merge`](crate::QuotientFilter::merge) was given no filters.
    #[error("a merge needs at least one input filter")]
    NoInputs,
    /// The encoding is shorter than the smallest possible filter.
    #[error("an encoded filter needs at least {min} bytes; got {len}")]
    TooShort {
        /// The encoding's length.
        len: usize,
        /// The smallest filter's.
        min: usize,
    },
    /// The encoding does not start with the magic of the filter kind being decoded
    /// ([`FILTER_MAGIC`](crate::FILTER_MAGIC) or [`BLOOM_MAGIC`](crate::BLOOM_MAGIC));
    /// [`is_bloom`](crate::is_bloom) tells the kinds apart before decoding.
    #[error("not an encoded filter of this kind (bad magic)")]
    BadMagic,
    /// The encoding is of a format version this code does not read.
    #[error("unsupported filter format version {0}")]
    UnsupportedVersion(u32),
    /// The CRC32C of the encoding does not match its contents.
    #[error("filter checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// The checksum the encoding carries.
        stored: u32,
        /// The checksum of its contents.
        computed: u32,
    },
    /// The encoding's checksum matches but its contents are not a filter this code writes.
    #[error("corrupt filter encoding: {0}")]
    Corrupt(&'static str),
}
