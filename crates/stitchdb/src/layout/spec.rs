//! The layout string: its grammar, the parser that checks it, and its canonical form.
//!
//! ```text
//! layout := module ("->" module)*
//! module := name ["(" [param ("," param)*] ")"]
//! param  := value | key "=" value
//! ```
//!
//! Whitespace around tokens is ignored. Names are lowercase ASCII letters, digits and `-`; a
//! value without a key may only be the first parameter, and is the module's first parameter.
//! Integers are plain decimal; `fp` is a decimal number (`0.01`, or `1e-2`). The modules, in the
//! only order they may come, each at most once: `managed`; a filter (`quotient` or `bloom`);
//! `cache`; `btree`; `existential`; `delta-integer`; `sliding-window`, directly over `linear`;
//! `exception`; a value coding (`small-integer`), directly over a `fixed` or `array` of its
//! width; the format (`linear`, `fixed`, `array` or `unique-string`); and, only after
//! `exception` and a specialized format (any but `linear`), `linear` last.

use std::fmt;
use std::str::FromStr;

/// The longest layout string, in bytes.
pub const MAX_LAYOUT_LEN: usize = 1024;

/// A run's block payload target in a table without a `btree`: its index then has one entry
/// per 64 KiB.
pub const UNINDEXED_BLOCK_BYTES: usize = 64 * 1024;

/// Bits per key of `bloom` when not given.
pub const DEFAULT_BLOOM_BITS: u32 = 10;

/// Bytes of a `btree` node when not given.
pub const DEFAULT_BTREE_NODE: u32 = 4096;

/// Lookups `cache` holds when not given.
pub const DEFAULT_CACHE_KEYS: u32 = 65536;

/// The most distinct values per block of `unique-string` when not given.
pub const DEFAULT_UNIQUE_MAX: u32 = 255;

/// The longest value `unique-string` holds, in bytes, when not given.
pub const DEFAULT_UNIQUE_LEN: u32 = 255;

/// Values `sliding-window` remembers when not given: a reference back to one is then always
/// one byte (a varint below 128).
pub const DEFAULT_WINDOW: u32 = 64;

/// What `state-dictionary` holds: the US Postal Service codes of the 50 states, the District
/// of Columbia and the five inhabited territories (AS, GU, MP, PR, VI), in alphabetical
/// order. A code is stored as its index here, so the table is part of the block format
/// (docs/format.md): it may only ever grow at its end.
pub const STATE_CODES: [[u8; 2]; 56] = [
    *b"AK", *b"AL", *b"AR", *b"AS", *b"AZ", *b"CA", *b"CO", *b"CT", *b"DC", *b"DE", *b"FL", *b"GA",
    *b"GU", *b"HI", *b"IA", *b"ID", *b"IL", *b"IN", *b"KS", *b"KY", *b"LA", *b"MA", *b"MD", *b"ME",
    *b"MI", *b"MN", *b"MO", *b"MP", *b"MS", *b"MT", *b"NC", *b"ND", *b"NE", *b"NH", *b"NJ", *b"NM",
    *b"NV", *b"NY", *b"OH", *b"OK", *b"OR", *b"PA", *b"PR", *b"RI", *b"SC", *b"SD", *b"TN", *b"TX",
    *b"UT", *b"VA", *b"VI", *b"VT", *b"WA", *b"WI", *b"WV", *b"WY",
];

/// A table's layout: the stack of modules its data goes through.
///
/// Always `managed` first (the writable memtable plus the read-only runs digested from it and
/// combined by compaction), then optionally a filter, a `cache` of lookups and a `btree`
/// index over each run, then the transforming layers (`existential`, `delta-integer`, or
/// `sliding-window` over `linear`), optionally `exception`, a value coding, then the format
/// of the runs' blocks. With
/// `exception` the format is a specialized one, and `linear` under it keeps the pairs the
/// modules between reject (see `docs/layouts.md` for the stacking rules).
///
/// [`Display`](fmt::Display) writes the canonical form, which [`LayoutSpec::parse`] reads back
/// to the same spec (for any spec a layout string can describe).
#[derive(Debug, Clone, PartialEq)]
pub struct LayoutSpec {
    /// The filter in front of each run, if any.
    pub filter: Option<FilterSpec>,
    /// The cache of point lookups in the runs, if any.
    pub cache: Option<CacheSpec>,
    /// The index over each run's blocks, if any.
    pub btree: Option<BtreeSpec>,
    /// Whether tombstones are kept out of the versions section (`existential`).
    pub existential: bool,
    /// Whether values are stored as deltas (`delta-integer`, above `exception`).
    pub delta: bool,
    /// `sliding-window(window=N)`, over `linear`: a value equal to one of the last N stored
    /// whole in its block is stored as a reference back to it.
    pub window: Option<u32>,
    /// Whether pairs the modules under it reject go to a `linear` format stacked last.
    pub exception: bool,
    /// How values are coded for the format, if they are (under `exception`, if any).
    pub coding: Option<CodingSpec>,
    /// How a run's blocks hold their pairs.
    pub format: FormatSpec,
}

/// A transforming layer that codes each value into fewer bytes for the `fixed` or `array`
/// format under it, rejecting values it cannot code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodingSpec {
    /// Values that are 4-byte little-endian `u32`s below `2^(8 * bytes)`, stored in their
    /// low `bytes` bytes: `small-integer(bytes=N)`, N in 1..=3.
    SmallInteger {
        /// Bytes a value is stored in.
        bytes: u32,
    },
    /// Values that are a code of [`STATE_CODES`], stored as its index in one byte:
    /// `state-dictionary`.
    StateDictionary,
}

/// What a run's blocks are written in: the modules of a layout from the first transforming
/// layer down to the format (the filter and index are the run's, and `exception` only
/// decides which writes are refused: a block keeps in its versions section whatever its
/// format does not take), but `sliding-window`, which only a linear block's writer takes
/// ([`LayoutSpec::window`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockFormat {
    /// `existential`: tombstones every reader sees go to the special section as keys alone.
    pub existential: bool,
    /// `delta-integer`: each value of a block's special section after its first is stored
    /// as the difference from the one before (zigzag-coded), through the coding.
    pub delta: bool,
    pub coding: Option<CodingSpec>,
    pub format: FormatSpec,
}

/// The filter in front of each run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FilterSpec {
    /// A quotient filter: `quotient(fp=F)`, F in (0, 0.5].
    Quotient {
        /// The false-positive rate; `None` is the store's `Options::filter_fp_rate`.
        fp_rate: Option<f64>,
    },
    /// A Bloom filter: `bloom(bits=B)`, B in 1..=32.
    Bloom {
        /// Bits per key.
        bits_per_key: u32,
    },
}

/// A cache of what point lookups found in the table's runs: `cache(keys=K)`, K in
/// 1..=16777216, the most lookups (keys found, or found absent past the filter) it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSpec {
    /// The most lookups held.
    pub keys: u32,
}

/// The index over a run's blocks: `btree(node=N)`, N in 512..=65536.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BtreeSpec {
    /// Bytes of an index node (a block), and so the run's block payload target.
    pub node: u32,
}

/// How a run's blocks hold their pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatSpec {
    /// Any keys and values: `linear`.
    Linear,
    /// Values of exactly `size` bytes: `fixed(size=S)`, S in 1..=4096.
    Fixed {
        /// Bytes of every value.
        size: u32,
    },
    /// Keys that are 8-byte big-endian integers (`u64`), values of exactly `size` bytes:
    /// `array(size=S)`, S in 1..=4096.
    Array {
        /// Bytes of every value.
        size: u32,
    },
    /// Values of at most `len` bytes, at most `max` distinct ones per block:
    /// `unique-string(max=M, len=L)`, M in 1..=65535, L in 1..=4096.
    UniqueString {
        /// The most distinct values in one block.
        max: u32,
        /// The longest value, in bytes.
        len: u32,
    },
    /// Empty values only (sets, secondary indexes): keys alone are stored: `empty`.
    Empty,
}

/// Why a string is not a layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutError {
    /// The layout as written (its first 64 characters then `...`, when too long).
    pub layout: String,
    /// The region of a partitioned layout at fault, if one is: its number, from 1.
    pub region: Option<usize>,
    /// The module at fault, if one is: its number (from 1) and its name as written (empty
    /// when it has none).
    pub module: Option<(usize, String)>,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "layout \"{}\"", self.layout.escape_debug())?;
        let mut sep = ": ";
        if let Some(region) = self.region {
            write!(f, ": region {region}")?;
            sep = ", ";
        }
        match &self.module {
            Some((n, name)) if name.is_empty() => write!(f, "{sep}module {n}")?,
            Some((n, name)) => write!(f, "{sep}module {n} \"{}\"", name.escape_debug())?,
            None => {}
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for LayoutError {}

impl Default for LayoutSpec {
    /// `managed -> quotient -> btree(node=4096) -> linear`: the VT-tree.
    fn default() -> LayoutSpec {
        LayoutSpec {
            filter: Some(FilterSpec::Quotient { fp_rate: None }),
            cache: None,
            btree: Some(BtreeSpec {
                node: DEFAULT_BTREE_NODE,
            }),
            existential: false,
            delta: false,
            window: None,
            exception: false,
            coding: None,
            format: FormatSpec::Linear,
        }
    }
}

/// The module that partitions a table (`crate::layout::partition`): first in a layout, never
/// inside a stack.
pub(crate) const PARTITION: &str = "partition";
/// The name of the copy-on-write B+tree layout, which is a whole table's layout.
pub(crate) const COW_BTREE: &str = "cow-btree";

/// Goby's copy-on-write B+tree (`crate::layout::cowbtree`): `cow-btree(node=N)`, N a power
/// of two in 1024..=65536, 4096 by default. Written out canonically with its node size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CowBTreeSpec {
    /// Bytes a node is split above (a node of one larger entry is that entry's size).
    pub node: usize,
}

impl fmt::Display for CowBTreeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{COW_BTREE}(node={})", self.node)
    }
}

/// Parses a `cow-btree` layout string (`layout`, which starts with the name).
pub(crate) fn parse_cow_btree(layout: &str) -> Result<CowBTreeSpec, LayoutError> {
    let fail = |reason: String| LayoutError {
        layout: layout.to_string(),
        region: None,
        module: Some((1, COW_BTREE.to_string())),
        reason,
    };
    if layout.contains("->") {
        return Err(fail(
            "a B+tree is a whole table's layout: nothing stacks on or under it".to_string(),
        ));
    }
    let (_, params) = syntax(layout.trim()).map_err(|(_, reason)| fail(reason))?;
    let mut node = crate::layout::cowbtree::DEFAULT_NODE_SIZE;
    for (i, p) in params.iter().enumerate() {
        match p.key {
            Some("node") | None if i == 0 => {
                node = p
                    .value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| n.is_power_of_two() && (1024..=65536).contains(n))
                    .ok_or_else(|| {
                        fail(format!(
                            "node={} is not a power of two in 1024..=65536",
                            p.value
                        ))
                    })?;
            }
            _ => {
                return Err(fail(format!(
                    "unknown parameter {:?} (parameters: node)",
                    p.key.unwrap_or(p.value)
                )))
            }
        }
    }
    Ok(CowBTreeSpec { node })
}

/// Refuses a layout string over [`MAX_LAYOUT_LEN`], showing its start.
pub(crate) fn check_len(layout: &str) -> Result<(), LayoutError> {
    if layout.len() <= MAX_LAYOUT_LEN {
        return Ok(());
    }
    let mut shown: String = layout.chars().take(64).collect();
    shown.push_str("...");
    Err(LayoutError {
        layout: shown,
        region: None,
        module: None,
        reason: format!("too long: {} bytes, at most {MAX_LAYOUT_LEN}", layout.len()),
    })
}

impl FromStr for LayoutSpec {
    type Err = LayoutError;

    fn from_str(layout: &str) -> Result<LayoutSpec, LayoutError> {
        LayoutSpec::parse(layout)
    }
}

impl LayoutSpec {
    /// Parses and checks a layout string (see the module docs for the grammar and rules).
    pub fn parse(layout: &str) -> Result<LayoutSpec, LayoutError> {
        check_len(layout)?;
        let fail = |module: Option<(usize, &str)>, reason: String| LayoutError {
            layout: layout.to_string(),
            region: None,
            module: module.map(|(n, name)| (n, name.to_string())),
            reason,
        };
        if layout.trim().is_empty() {
            return Err(fail(
                None,
                "empty: a layout names at least \"managed\" and a format".to_string(),
            ));
        }
        let pieces: Vec<&str> = layout.split("->").collect();
        let mut stack = Stack::default();
        for (i, piece) in pieces.iter().enumerate() {
            let n = i + 1;
            let text = piece.trim();
            if text.is_empty() {
                let reason = if i == 0 {
                    "empty: nothing before \"->\""
                } else if n == pieces.len() {
                    "empty: nothing after \"->\""
                } else {
                    "empty: nothing between \"->\" and \"->\""
                };
                return Err(fail(Some((n, "")), reason.to_string()));
            }
            if text.split('(').next().map(str::trim_end) == Some(PARTITION) {
                let reason = format!("\"{PARTITION}\" comes only first, and not inside a region");
                return Err(fail(Some((n, PARTITION)), reason));
            }
            let (name, params) =
                syntax(text).map_err(|(name, reason)| fail(Some((n, name)), reason))?;
            let at = Some((n, name));
            let Some(kind) = Kind::named(name) else {
                let names: Vec<&str> = KINDS.iter().map(|k| k.name()).collect();
                return Err(fail(
                    at,
                    format!("unknown module (modules: {})", names.join(", ")),
                ));
            };
            let values = kind.values(&params).map_err(|reason| fail(at, reason))?;
            stack
                .push(kind, &values)
                .map_err(|reason| fail(at, reason))?;
        }
        stack
            .finish()
            .map_err(|(n, kind, reason)| fail(Some((n, kind.name())), reason))
    }

    /// Whether a write of `value` (`None`: a tombstone) under `key` fits the layout. With
    /// `exception` everything does (the final `linear` keeps what the format rejects);
    /// without it a value must pass [`FormatSpec::rejects`], and a tombstone always
    /// passes, except that an `array` table's keys must be 8 bytes even for a tombstone: a
    /// delete of a key the table could never hold is an error too.
    pub fn check_write(&self, key: &[u8], value: Option<&[u8]>) -> Result<(), String> {
        // `delta-integer` is above `exception`: what it rejects is refused whatever is below.
        if let (true, Some(value)) = (self.delta, value) {
            if let Some(why) = delta_rejects(value) {
                return Err(why);
            }
        }
        if self.exception {
            return Ok(());
        }
        let why = match value {
            Some(value) => self.block_format().rejects(key, value),
            None => self.format.rejects_key(key),
        };
        why.map_or(Ok(()), Err)
    }

    /// What the table's runs' blocks are written in.
    pub fn block_format(&self) -> BlockFormat {
        BlockFormat {
            existential: self.existential,
            delta: self.delta,
            coding: self.coding,
            format: self.format,
        }
    }

    /// A run's block payload target, in bytes: the `btree` node, or
    /// [`UNINDEXED_BLOCK_BYTES`] (64 KiB) without a `btree`.
    pub fn block_bytes(&self) -> usize {
        self.btree
            .map_or(UNINDEXED_BLOCK_BYTES, |btree| btree.node as usize)
    }

    /// Whether merges of this table may stitch (reuse blocks of their inputs): only with a
    /// quotient filter or none, and the `linear` format. A Bloom filter cannot be merged
    /// without rereading the keys; a stitched block keeps the format it was written in, and
    /// runs that ingests and transactions write are linear, so a specialized format's table
    /// copies its merges (Anvil's combine) to store everything in its format.
    pub fn stitches(&self) -> bool {
        matches!(self.filter, None | Some(FilterSpec::Quotient { .. }))
            && self.format == FormatSpec::Linear
    }
}

impl BlockFormat {
    /// The blocks of `format` with no transforming layer over it.
    pub fn plain(format: FormatSpec) -> BlockFormat {
        BlockFormat {
            existential: false,
            delta: false,
            coding: None,
            format,
        }
    }

    /// Why these blocks' special section cannot hold this pair, if it cannot: the coding's
    /// reason, or the format's. Under `delta-integer` only a value that is not 4 bytes (and
    /// a key the format rejects): whether a delta fits the coding depends on the value
    /// before it in the block, which the block's writer knows.
    pub fn rejects(&self, key: &[u8], value: &[u8]) -> Option<String> {
        if self.delta {
            return self
                .format
                .rejects_key(key)
                .or_else(|| delta_rejects(value));
        }
        match self.coding {
            // The format under a coding has the coding's width: a key is all left to check.
            Some(coding) => self
                .format
                .rejects_key(key)
                .or_else(|| coding.rejects(value)),
            None => self.format.rejects(key, value),
        }
    }
}

/// Why `delta-integer` cannot hold `value`, if it cannot: its values are 4-byte integers.
fn delta_rejects(value: &[u8]) -> Option<String> {
    (value.len() != 4).then(|| {
        format!(
            "a {}-byte value in delta-integer: its values are 4-byte integers (u32 \
             little-endian)",
            value.len()
        )
    })
}

impl CodingSpec {
    /// The bytes a coded value takes: the width of the format under it.
    pub fn width(&self) -> u32 {
        match *self {
            CodingSpec::SmallInteger { bytes } => bytes,
            CodingSpec::StateDictionary => 1,
        }
    }

    /// The index in [`STATE_CODES`] of the code `value`, if it is one.
    pub fn state_index(value: &[u8]) -> Option<u8> {
        let i = STATE_CODES
            .binary_search_by(|c| c.as_slice().cmp(value))
            .ok()?;
        Some(i as u8)
    }

    /// Why the coding cannot hold `value`, if it cannot.
    pub fn rejects(&self, value: &[u8]) -> Option<String> {
        match *self {
            CodingSpec::SmallInteger { bytes } => {
                let Ok(int) = <[u8; 4]>::try_from(value) else {
                    return Some(format!(
                        "a {}-byte value in {self}: its values are 4-byte integers (u32 \
                         little-endian)",
                        value.len()
                    ));
                };
                let int = u32::from_le_bytes(int);
                (u64::from(int) >= 1 << (8 * bytes))
                    .then(|| format!("{int} in {self}: its values are below 2^{}", 8 * bytes))
            }
            CodingSpec::StateDictionary => Self::state_index(value).is_none().then(|| {
                format!(
                    "{:?} in {self}: its values are US postal codes of states and territories \
                     (AK to WY)",
                    String::from_utf8_lossy(value)
                )
            }),
        }
    }
}

impl FormatSpec {
    /// Why the format cannot hold this pair, if it cannot: `fixed` holds values of exactly
    /// its size; `array` keys of exactly 8 bytes (a big-endian `u64`) and values of exactly
    /// its size; `unique-string` values of at most its `len` bytes; `linear` anything.
    pub fn rejects(&self, key: &[u8], value: &[u8]) -> Option<String> {
        if let Some(why) = self.rejects_key(key) {
            return Some(why);
        }
        match *self {
            FormatSpec::Linear => None,
            FormatSpec::Fixed { size } | FormatSpec::Array { size } => {
                (value.len() != size as usize).then(|| {
                    format!(
                        "a {}-byte value in {}: its values are {size} bytes",
                        value.len(),
                        self
                    )
                })
            }
            FormatSpec::Empty => (!value.is_empty()).then(|| {
                format!(
                    "a {}-byte value in empty: its values are empty",
                    value.len()
                )
            }),
            FormatSpec::UniqueString { len, .. } => (value.len() > len as usize).then(|| {
                format!(
                    "a {}-byte value in {}: its values are at most {len} bytes",
                    value.len(),
                    self
                )
            }),
        }
    }

    /// Why the format cannot hold this key whatever its value (only `array` limits keys).
    pub fn rejects_key(&self, key: &[u8]) -> Option<String> {
        match *self {
            FormatSpec::Array { .. } if key.len() != 8 => Some(format!(
                "a {}-byte key in {}: its keys are 8 bytes (a big-endian u64)",
                key.len(),
                self
            )),
            _ => None,
        }
    }
}

impl fmt::Display for LayoutSpec {
    /// The canonical form: every parameter written out (but a quotient filter's `fp` when it
    /// is the store's), modules joined by `" -> "`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("managed")?;
        if let Some(filter) = self.filter {
            write!(f, " -> {filter}")?;
        }
        if let Some(cache) = self.cache {
            write!(f, " -> cache(keys={})", cache.keys)?;
        }
        if let Some(btree) = self.btree {
            write!(f, " -> btree(node={})", btree.node)?;
        }
        if self.existential {
            f.write_str(" -> existential")?;
        }
        if self.delta {
            f.write_str(" -> delta-integer")?;
        }
        if let Some(window) = self.window {
            write!(f, " -> sliding-window(window={window})")?;
        }
        if self.exception {
            f.write_str(" -> exception")?;
        }
        if let Some(coding) = self.coding {
            write!(f, " -> {coding}")?;
        }
        write!(f, " -> {}", self.format)?;
        if self.exception {
            f.write_str(" -> linear")?;
        }
        Ok(())
    }
}

impl fmt::Display for FilterSpec {
    /// The canonical form of the filter's module.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterSpec::Quotient { fp_rate: None } => f.write_str("quotient"),
            FilterSpec::Quotient {
                fp_rate: Some(fp_rate),
            } => write!(f, "quotient(fp={fp_rate})"),
            FilterSpec::Bloom { bits_per_key } => write!(f, "bloom(bits={bits_per_key})"),
        }
    }
}

impl fmt::Display for CodingSpec {
    /// The canonical form of the coding's module.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodingSpec::SmallInteger { bytes } => write!(f, "small-integer(bytes={bytes})"),
            CodingSpec::StateDictionary => f.write_str("state-dictionary"),
        }
    }
}

impl fmt::Display for FormatSpec {
    /// The canonical form of the format's module.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatSpec::Linear => f.write_str("linear"),
            FormatSpec::Fixed { size } => write!(f, "fixed(size={size})"),
            FormatSpec::Array { size } => write!(f, "array(size={size})"),
            FormatSpec::UniqueString { max, len } => {
                write!(f, "unique-string(max={max}, len={len})")
            }
            FormatSpec::Empty => f.write_str("empty"),
        }
    }
}

/// A module a layout may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Managed,
    Quotient,
    Bloom,
    Cache,
    Btree,
    Existential,
    DeltaInteger,
    SlidingWindow,
    Exception,
    SmallInteger,
    StateDictionary,
    Linear,
    Fixed,
    Array,
    UniqueString,
    Empty,
}

/// Every module, in the order the unknown-module message lists them.
const KINDS: [Kind; 16] = [
    Kind::Managed,
    Kind::Quotient,
    Kind::Bloom,
    Kind::Cache,
    Kind::Btree,
    Kind::Existential,
    Kind::DeltaInteger,
    Kind::SlidingWindow,
    Kind::Exception,
    Kind::SmallInteger,
    Kind::StateDictionary,
    Kind::Linear,
    Kind::Fixed,
    Kind::Array,
    Kind::UniqueString,
    Kind::Empty,
];

/// Where a module stands in a layout: a layout's modules go up the stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Managed,
    Filter,
    Cache,
    Btree,
    Existential,
    Delta,
    Window,
    Exception,
    Coding,
    Format,
}

/// What values a parameter takes.
#[derive(Debug, Clone, Copy)]
enum Range {
    /// A plain decimal integer in `min..=max`.
    Int { min: u32, max: u32 },
    /// A false-positive rate: a decimal number in (0, 0.5].
    Rate,
}

/// A parameter of a module.
struct ParamDef {
    key: &'static str,
    range: Range,
    required: bool,
}

const QUOTIENT_PARAMS: &[ParamDef] = &[ParamDef {
    key: "fp",
    range: Range::Rate,
    required: false,
}];

const BLOOM_PARAMS: &[ParamDef] = &[ParamDef {
    key: "bits",
    range: Range::Int { min: 1, max: 32 },
    required: false,
}];

const CACHE_PARAMS: &[ParamDef] = &[ParamDef {
    key: "keys",
    range: Range::Int {
        min: 1,
        max: 1 << 24,
    },
    required: false,
}];

const BTREE_PARAMS: &[ParamDef] = &[ParamDef {
    key: "node",
    range: Range::Int {
        min: 512,
        max: 65536,
    },
    required: false,
}];

const SIZE_PARAMS: &[ParamDef] = &[ParamDef {
    key: "size",
    range: Range::Int { min: 1, max: 4096 },
    required: true,
}];

const SMALL_INTEGER_PARAMS: &[ParamDef] = &[ParamDef {
    key: "bytes",
    range: Range::Int { min: 1, max: 3 },
    required: true,
}];

const SLIDING_WINDOW_PARAMS: &[ParamDef] = &[ParamDef {
    key: "window",
    range: Range::Int { min: 1, max: 4096 },
    required: false,
}];

const UNIQUE_STRING_PARAMS: &[ParamDef] = &[
    ParamDef {
        key: "max",
        range: Range::Int { min: 1, max: 65535 },
        required: false,
    },
    ParamDef {
        key: "len",
        range: Range::Int { min: 1, max: 4096 },
        required: false,
    },
];

/// A parameter's value, checked against its range.
#[derive(Debug, Clone, Copy)]
enum Value {
    Int(u32),
    Rate(f64),
}

impl Range {
    /// The range as messages write it.
    fn shown(self) -> String {
        match self {
            Range::Int { min, max } => format!("{min} to {max}"),
            Range::Rate => "in (0, 0.5]".to_string(),
        }
    }
}

impl ParamDef {
    fn parse(&self, text: &str) -> Result<Value, String> {
        let key = self.key;
        let out_of_range = || {
            format!(
                "parameter \"{key}\": {text:?} is out of range ({})",
                self.range.shown()
            )
        };
        match self.range {
            Range::Int { min, max } => {
                if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!(
                        "parameter \"{key}\": {text:?} is not a number (a decimal integer)"
                    ));
                }
                // Only digits: a failed parse is a number past u32.
                match text.parse::<u32>() {
                    Ok(n) if (min..=max).contains(&n) => Ok(Value::Int(n)),
                    _ => Err(out_of_range()),
                }
            }
            Range::Rate => {
                let decimal = text
                    .bytes()
                    .next()
                    .is_some_and(|b| b.is_ascii_digit() || b == b'.')
                    && text
                        .bytes()
                        .all(|b| b.is_ascii_digit() || b".eE+-".contains(&b));
                match decimal.then(|| text.parse::<f64>().ok()).flatten() {
                    None => Err(format!(
                        "parameter \"{key}\": {text:?} is not a number (a decimal such as 0.01)"
                    )),
                    Some(rate) if rate > 0.0 && rate <= 0.5 => Ok(Value::Rate(rate)),
                    Some(_) => Err(out_of_range()),
                }
            }
        }
    }
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Managed => "managed",
            Kind::Quotient => "quotient",
            Kind::Bloom => "bloom",
            Kind::Cache => "cache",
            Kind::Btree => "btree",
            Kind::Existential => "existential",
            Kind::DeltaInteger => "delta-integer",
            Kind::SlidingWindow => "sliding-window",
            Kind::Exception => "exception",
            Kind::SmallInteger => "small-integer",
            Kind::StateDictionary => "state-dictionary",
            Kind::Linear => "linear",
            Kind::Fixed => "fixed",
            Kind::Array => "array",
            Kind::UniqueString => "unique-string",
            Kind::Empty => "empty",
        }
    }

    fn named(name: &str) -> Option<Kind> {
        KINDS.into_iter().find(|k| k.name() == name)
    }

    fn stage(self) -> Stage {
        match self {
            Kind::Managed => Stage::Managed,
            Kind::Quotient | Kind::Bloom => Stage::Filter,
            Kind::Cache => Stage::Cache,
            Kind::Btree => Stage::Btree,
            Kind::Existential => Stage::Existential,
            Kind::DeltaInteger => Stage::Delta,
            Kind::SlidingWindow => Stage::Window,
            Kind::Exception => Stage::Exception,
            Kind::SmallInteger | Kind::StateDictionary => Stage::Coding,
            Kind::Linear | Kind::Fixed | Kind::Array | Kind::UniqueString | Kind::Empty => {
                Stage::Format
            }
        }
    }

    /// A format that rejects some pairs (which `exception` can send to a `linear` under it).
    fn specialized(self) -> bool {
        matches!(
            self,
            Kind::Fixed | Kind::Array | Kind::UniqueString | Kind::Empty
        )
    }

    fn params(self) -> &'static [ParamDef] {
        match self {
            Kind::Quotient => QUOTIENT_PARAMS,
            Kind::Bloom => BLOOM_PARAMS,
            Kind::Cache => CACHE_PARAMS,
            Kind::Btree => BTREE_PARAMS,
            Kind::Fixed | Kind::Array => SIZE_PARAMS,
            Kind::UniqueString => UNIQUE_STRING_PARAMS,
            Kind::SmallInteger => SMALL_INTEGER_PARAMS,
            Kind::SlidingWindow => SLIDING_WINDOW_PARAMS,
            Kind::Managed
            | Kind::Existential
            | Kind::DeltaInteger
            | Kind::Exception
            | Kind::Linear
            | Kind::StateDictionary
            | Kind::Empty => &[],
        }
    }

    /// The module's parameter values as written (in the order of [`Kind::params`], `None`
    /// where not given), checked.
    fn values(self, params: &[RawParam<'_>]) -> Result<Vec<Option<Value>>, String> {
        let defs = self.params();
        if defs.is_empty() && !params.is_empty() {
            return Err("takes no parameters".to_string());
        }
        let mut values: Vec<Option<Value>> = vec![None; defs.len()];
        for param in params {
            // A value without a key is the first parameter's (`syntax` allows it only first).
            let at = match param.key {
                None => 0,
                Some(key) => defs.iter().position(|d| d.key == key).ok_or_else(|| {
                    let keys: Vec<&str> = defs.iter().map(|d| d.key).collect();
                    format!(
                        "unknown parameter {key:?} (parameters: {})",
                        keys.join(", ")
                    )
                })?,
            };
            if values[at].is_some() {
                return Err(format!("parameter \"{}\" given twice", defs[at].key));
            }
            values[at] = Some(defs[at].parse(param.value)?);
        }
        if let Some((def, _)) = defs
            .iter()
            .zip(&values)
            .find(|(def, value)| def.required && value.is_none())
        {
            return Err(format!(
                "missing parameter \"{}\" ({}={})",
                def.key,
                def.key,
                def.range.shown()
            ));
        }
        Ok(values)
    }
}

/// The integer at `at` of a module's values, or `default`.
fn int(values: &[Option<Value>], at: usize, default: u32) -> u32 {
    match values.get(at) {
        Some(Some(Value::Int(n))) => *n,
        _ => default,
    }
}

/// A parameter as written: its key, if it has one, and its value's text.
struct RawParam<'a> {
    key: Option<&'a str>,
    value: &'a str,
}

fn name_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

/// Splits a module's text (trimmed, not empty) into its name and parameters. An error names
/// the module as written.
fn syntax(text: &str) -> Result<(&str, Vec<RawParam<'_>>), (&str, String)> {
    let (name, rest) = match text.split_once('(') {
        Some((name, rest)) => (name.trim_end(), Some(rest)),
        None => (text, None),
    };
    if name.is_empty() {
        return Err((name, "no module name before \"(\"".to_string()));
    }
    if name.contains(')') {
        return Err((name, "\")\" without \"(\"".to_string()));
    }
    if let Some(c) = name.chars().find(|&c| !name_char(c)) {
        let reason = if c.is_whitespace() {
            "a space inside a module name (a missing \"->\"?)".to_string()
        } else {
            format!(
                "bad character {c:?} in a module name (names are lowercase letters, digits \
                 and '-')"
            )
        };
        return Err((name, reason));
    }
    let Some(rest) = rest else {
        return Ok((name, Vec::new()));
    };
    let Some((inner, after)) = rest.split_once(')') else {
        return Err((name, "unclosed \"(\"".to_string()));
    };
    if inner.contains('(') {
        return Err((name, "\"(\" inside parameters".to_string()));
    }
    let after = after.trim();
    if !after.is_empty() {
        return Err((
            name,
            format!("unexpected {after:?} after \")\" (a missing \"->\"?)"),
        ));
    }
    let inner = inner.trim();
    let mut params = Vec::new();
    if inner.is_empty() {
        return Ok((name, params));
    }
    for (i, param) in inner.split(',').enumerate() {
        let param = param.trim();
        if param.is_empty() {
            return Err((name, format!("parameter {} is empty", i + 1)));
        }
        match param.split_once('=') {
            Some((key, value)) => {
                let (key, value) = (key.trim(), value.trim());
                if key.is_empty() {
                    return Err((name, format!("no parameter name before \"=\" in {param:?}")));
                }
                if value.is_empty() {
                    return Err((name, format!("parameter {key:?} has no value")));
                }
                params.push(RawParam {
                    key: Some(key),
                    value,
                });
            }
            None if i > 0 => {
                return Err((
                    name,
                    format!(
                        "a value without a name ({param:?}) may only be the first parameter: \
                         write key=value"
                    ),
                ));
            }
            None => params.push(RawParam {
                key: None,
                value: param,
            }),
        }
    }
    Ok((name, params))
}

/// The modules of a layout read so far, checked against the stacking rules as each comes.
#[derive(Default)]
struct Stack {
    /// The modules so far: module `n` is `kinds[n - 1]`.
    kinds: Vec<Kind>,
    filter: Option<FilterSpec>,
    cache: Option<CacheSpec>,
    btree: Option<BtreeSpec>,
    /// Whether `existential` has come.
    existential: bool,
    /// Whether `delta-integer` has come.
    delta: bool,
    /// `sliding-window`'s size, once it has come.
    window: Option<u32>,
    /// The number of the `exception` module.
    exception: Option<usize>,
    /// The value coding, and its module's number and kind.
    coding: Option<(usize, Kind, CodingSpec)>,
    /// The format, and its module's number and kind.
    format: Option<(usize, Kind, FormatSpec)>,
    /// Whether the `linear` after `exception`'s specialized format has come.
    final_linear: bool,
}

impl Stack {
    /// Adds the next module (its parameter values checked), or says why it cannot come next.
    fn push(&mut self, kind: Kind, values: &[Option<Value>]) -> Result<(), String> {
        self.place(kind)?;
        self.kinds.push(kind);
        let n = self.kinds.len();
        match kind {
            Kind::Managed => {}
            Kind::Quotient => {
                let fp_rate = match values.first() {
                    Some(Some(Value::Rate(rate))) => Some(*rate),
                    _ => None,
                };
                self.filter = Some(FilterSpec::Quotient { fp_rate });
            }
            Kind::Bloom => {
                self.filter = Some(FilterSpec::Bloom {
                    bits_per_key: int(values, 0, DEFAULT_BLOOM_BITS),
                });
            }
            Kind::Cache => {
                self.cache = Some(CacheSpec {
                    keys: int(values, 0, DEFAULT_CACHE_KEYS),
                });
            }
            Kind::Btree => {
                self.btree = Some(BtreeSpec {
                    node: int(values, 0, DEFAULT_BTREE_NODE),
                });
            }
            Kind::Existential => self.existential = true,
            Kind::DeltaInteger => self.delta = true,
            // Over `linear` only: `existential` and `delta-integer` are for specialized
            // formats, and `place` lets only `linear` follow.
            Kind::SlidingWindow if self.existential || self.delta => {
                let over = if self.existential {
                    "existential"
                } else {
                    "delta-integer"
                };
                return Err(format!(
                    "\"sliding-window\" cannot be under {over:?}: it is over \"linear\", \
                     which {over:?} is never over"
                ));
            }
            Kind::SlidingWindow => self.window = Some(int(values, 0, DEFAULT_WINDOW)),
            Kind::Exception => self.exception = Some(n),
            Kind::SmallInteger => {
                let coding = CodingSpec::SmallInteger {
                    bytes: int(values, 0, 0),
                };
                self.coding = Some((n, kind, coding));
            }
            Kind::StateDictionary => {
                self.coding = Some((n, kind, CodingSpec::StateDictionary));
            }
            Kind::Linear if self.format.is_some() => self.final_linear = true,
            Kind::Linear => self.format = Some((n, kind, FormatSpec::Linear)),
            Kind::Fixed => {
                let size = int(values, 0, 0);
                self.format = Some((n, kind, FormatSpec::Fixed { size }));
            }
            Kind::Array => {
                let size = int(values, 0, 0);
                self.format = Some((n, kind, FormatSpec::Array { size }));
            }
            Kind::Empty => self.format = Some((n, kind, FormatSpec::Empty)),
            Kind::UniqueString => {
                let format = FormatSpec::UniqueString {
                    max: int(values, 0, DEFAULT_UNIQUE_MAX),
                    len: int(values, 1, DEFAULT_UNIQUE_LEN),
                };
                self.format = Some((n, kind, format));
            }
        }
        if let (Some((_, _, coding)), Some((_, _, format))) = (self.coding, self.format) {
            if let Some(why) = Self::under_coding(coding, format) {
                return Err(why);
            }
        }
        if self.delta {
            if let Some(why) = self.under_delta(kind) {
                return Err(why);
            }
        }
        if let (true, Some((_, Kind::Linear, _)), false) =
            (self.existential, self.format, self.final_linear)
        {
            return Err(
                "\"linear\" cannot be under \"existential\": it keeps tombstones out \
                        of a specialized format, and linear blocks hold them already"
                    .to_string(),
            );
        }
        Ok(())
    }

    /// Why module `kind`, just added, cannot be under `delta-integer`, if it cannot. Its
    /// deltas are 4-byte integers, for a `small-integer` with `exception` between them (a
    /// delta's size depends on the values before it in a block, known only when a run is
    /// written: Anvil's Fig 3.10) or a `fixed(4)` or `array(4)`.
    fn under_delta(&self, kind: Kind) -> Option<String> {
        let name = kind.name();
        match (kind, self.coding, self.format) {
            (Kind::StateDictionary, ..) => Some(format!(
                "{name:?} cannot be under \"delta-integer\": deltas are integers (small-integer \
                 codes them)"
            )),
            (Kind::SmallInteger, ..) if self.exception.is_none() => Some(format!(
                "{name:?} under \"delta-integer\" needs \"exception\" between them: whether a \
                 delta fits depends on the values before it, known only when a run is written"
            )),
            (_, None, Some((_, _, format))) if !self.final_linear => match format {
                FormatSpec::Fixed { size: 4 } if self.exception.is_some() => Some(format!(
                    "{format} under \"delta-integer -> exception\" rejects nothing for the \
                     exception to keep (small-integer over it would)"
                )),
                FormatSpec::Fixed { size: 4 } | FormatSpec::Array { size: 4 } => None,
                _ => Some(format!(
                    "{format} cannot be under \"delta-integer\": its deltas are 4-byte \
                     integers, for fixed(4), array(4) or small-integer over one"
                )),
            },
            _ => None,
        }
    }

    /// Why `format` cannot be the format under `coding`, if it cannot: only a `fixed` or
    /// `array` of the coding's width can.
    fn under_coding(coding: CodingSpec, format: FormatSpec) -> Option<String> {
        let width = coding.width();
        match format {
            FormatSpec::Fixed { size } | FormatSpec::Array { size } if size == width => None,
            _ => Some(format!(
                "{format} cannot be under {coding}: its coded values are {width} bytes, so \
                 the format is fixed({width}) or array({width})"
            )),
        }
    }

    /// Why `kind` cannot be the next module, if it cannot.
    fn place(&self, kind: Kind) -> Result<(), String> {
        let name = kind.name();
        let Some(&prev) = self.kinds.last() else {
            return match kind {
                Kind::Managed => Ok(()),
                _ => Err("a layout starts with \"managed\"".to_string()),
            };
        };
        if let Some(i) = self.kinds.iter().position(|&k| k == kind) {
            return Err(format!(
                "repeated (module {} is {name:?} too): each module comes at most once",
                i + 1
            ));
        }
        if let Some((format_n, format_kind, _)) = self.format {
            let format = format_kind.name();
            if self.exception.is_some() && !self.final_linear {
                // After `exception` and its specialized format only the final `linear` comes.
                return match kind {
                    Kind::Linear => Ok(()),
                    _ if kind.stage() == Stage::Format => Err(format!(
                        "two formats (module {format_n} is {format:?}): after \"exception -> \
                         {format}\" only \"linear\" may come"
                    )),
                    _ => Err(format!(
                        "{name:?} cannot follow {format:?}: after \"exception -> {format}\" \
                         only \"linear\" may come"
                    )),
                };
            }
            if kind.stage() == Stage::Format {
                let hint = if kind == Kind::Linear && format_kind.specialized() {
                    " (a \"linear\" after a specialized format needs \"exception\" before it)"
                } else {
                    ""
                };
                return Err(format!(
                    "two formats (module {format_n} is {format:?}){hint}"
                ));
            }
            return Err(format!(
                "nothing may follow the format: the layout ends at module {} {:?}",
                self.kinds.len(),
                prev.name()
            ));
        }
        if self.window.is_some() && kind != Kind::Linear {
            return Err(format!(
                "{name:?} cannot be under \"sliding-window\": it stores values whole or as \
                 references in linear blocks, so only \"linear\" may follow it"
            ));
        }
        let what = match kind.stage() {
            Stage::Filter => Some("filters"),
            Stage::Coding => Some("codings"),
            _ => None,
        };
        if let Some(what) = what {
            if let Some(i) = self.kinds.iter().position(|k| k.stage() == kind.stage()) {
                return Err(format!(
                    "two {what} (module {} is {:?}): a layout has at most one",
                    i + 1,
                    self.kinds[i].name()
                ));
            }
        }
        if kind.stage() < prev.stage() {
            return Err(format!(
                "{name:?} cannot follow {:?} (the order is managed, a filter, cache, \
                 btree, existential, delta-integer, sliding-window, exception, a coding, the \
                 format)",
                prev.name()
            ));
        }
        if self.coding.is_some() {
            // `push` checks the format under the coding.
            return Ok(());
        }
        if kind == Kind::Linear && self.exception.is_some() {
            return Err(
                "\"exception -> linear\" keeps nothing, as linear rejects nothing: \
                 \"exception\" needs a specialized format (fixed, array or unique-string) \
                 before the final \"linear\""
                    .to_string(),
            );
        }
        Ok(())
    }

    /// The layout, once every module has come, or the module at fault and why.
    fn finish(self) -> Result<LayoutSpec, (usize, Kind, String)> {
        let Some((_, format_kind, format)) = self.format else {
            if let Some(n) = self.exception {
                return Err((
                    n,
                    Kind::Exception,
                    "needs a specialized format (fixed, array or unique-string) after it, \
                     then \"linear\""
                        .to_string(),
                ));
            }
            let last = self.kinds.last().copied().unwrap_or(Kind::Managed);
            return Err((
                self.kinds.len(),
                last,
                "missing format: a layout ends with a format (linear, fixed, array or \
                 unique-string)"
                    .to_string(),
            ));
        };
        if let (Some(n), false) = (self.exception, self.final_linear) {
            let format = format_kind.name();
            return Err((
                n,
                Kind::Exception,
                format!(
                    "needs \"linear\" after {format:?}: the format that keeps what {format:?} \
                     rejects"
                ),
            ));
        }
        Ok(LayoutSpec {
            filter: self.filter,
            cache: self.cache,
            btree: self.btree,
            existential: self.existential,
            delta: self.delta,
            window: self.window,
            exception: self.exception.is_some(),
            coding: self.coding.map(|(_, _, coding)| coding),
            format,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(layout: &str) -> LayoutSpec {
        match LayoutSpec::parse(layout) {
            Ok(spec) => spec,
            Err(e) => panic!("{layout:?}: {e}"),
        }
    }

    fn error(layout: &str) -> LayoutError {
        match LayoutSpec::parse(layout) {
            Ok(spec) => panic!("{layout:?} parsed as {spec:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn the_examples_parse_as_written_and_print_canonically() {
        let spec = parse("managed -> bloom -> btree -> linear");
        assert_eq!(
            spec,
            LayoutSpec {
                cache: None,
                filter: Some(FilterSpec::Bloom { bits_per_key: 10 }),
                btree: Some(BtreeSpec { node: 4096 }),
                existential: false,
                delta: false,
                window: None,
                exception: false,
                coding: None,
                format: FormatSpec::Linear,
            }
        );
        assert_eq!(
            spec.to_string(),
            "managed -> bloom(bits=10) -> btree(node=4096) -> linear"
        );
        assert!(!spec.stitches());

        let spec = parse("managed -> btree -> fixed(8)");
        assert_eq!(
            spec,
            LayoutSpec {
                cache: None,
                filter: None,
                btree: Some(BtreeSpec { node: 4096 }),
                existential: false,
                delta: false,
                window: None,
                exception: false,
                coding: None,
                format: FormatSpec::Fixed { size: 8 },
            }
        );
        assert_eq!(
            spec.to_string(),
            "managed -> btree(node=4096) -> fixed(size=8)"
        );
        assert!(!spec.stitches(), "a specialized format's merges copy");

        let spec = parse("managed -> exception -> unique-string -> linear");
        assert_eq!(
            spec,
            LayoutSpec {
                cache: None,
                filter: None,
                btree: None,
                existential: false,
                delta: false,
                window: None,
                exception: true,
                coding: None,
                format: FormatSpec::UniqueString { max: 255, len: 255 },
            }
        );
        assert_eq!(
            spec.to_string(),
            "managed -> exception -> unique-string(max=255, len=255) -> linear"
        );
        assert_eq!(spec.block_bytes(), 65536);
    }

    #[test]
    fn sliding_window_is_over_linear_with_its_size() {
        let spec = parse("managed -> btree -> sliding-window -> linear");
        assert_eq!(spec.window, Some(DEFAULT_WINDOW));
        assert_eq!(
            spec.to_string(),
            "managed -> btree(node=4096) -> sliding-window(window=64) -> linear"
        );
        // Its blocks read alone, so its merges stitch as a linear table's do.
        assert!(spec.stitches());
        assert_eq!(spec.check_write(b"k", Some(&[1; 100])), Ok(()));
        assert_eq!(spec.check_write(b"k", None), Ok(()));
        assert_eq!(
            parse("managed -> sliding-window(4096) -> linear").window,
            Some(4096)
        );
        let spec = parse("managed -> quotient -> sliding-window( window = 1 ) -> linear");
        assert_eq!(
            spec.to_string(),
            "managed -> quotient -> sliding-window(window=1) -> linear"
        );
        assert_eq!(parse(&spec.to_string()), spec);
        assert_eq!(LayoutSpec::default().window, None);
    }

    #[test]
    fn the_default_is_the_vt_tree() {
        let spec = LayoutSpec::default();
        assert_eq!(
            spec.to_string(),
            "managed -> quotient -> btree(node=4096) -> linear"
        );
        assert_eq!(spec, LayoutSpec::default());
        assert_eq!(
            parse("managed->quotient->btree->linear"),
            LayoutSpec::default()
        );
        assert_ne!(
            parse("managed -> quotient(fp=0.01) -> btree -> linear"),
            LayoutSpec::default()
        );
        assert_ne!(
            parse("managed -> quotient -> btree(8192) -> linear"),
            LayoutSpec::default()
        );
        assert!(spec.stitches());
        assert_eq!(spec.block_bytes(), 4096);
        assert_eq!("managed -> quotient -> btree -> linear".parse(), Ok(spec));
    }

    #[test]
    fn whitespace_positional_values_and_empty_parentheses() {
        let spec = parse(
            "  managed()->quotient( fp = 1e-3 )->\tbtree ( 8192 )\n-> exception-> \
             unique-string(100 , len=20)->linear() ",
        );
        assert_eq!(
            spec,
            LayoutSpec {
                cache: None,
                filter: Some(FilterSpec::Quotient {
                    fp_rate: Some(0.001)
                }),
                btree: Some(BtreeSpec { node: 8192 }),
                existential: false,
                delta: false,
                window: None,
                exception: true,
                coding: None,
                format: FormatSpec::UniqueString { max: 100, len: 20 },
            }
        );
        assert_eq!(
            spec.to_string(),
            "managed -> quotient(fp=0.001) -> btree(node=8192) -> exception -> \
             unique-string(max=100, len=20) -> linear"
        );
        assert_eq!(
            parse("managed -> bloom(32) -> array(size=4096)").to_string(),
            "managed -> bloom(bits=32) -> array(size=4096)"
        );
        assert_eq!(
            parse("managed -> unique-string(len=7) ").format,
            FormatSpec::UniqueString { max: 255, len: 7 }
        );
        assert_eq!(parse("managed -> linear").block_bytes(), 65536);
        assert_eq!(
            parse("managed -> btree(node=512) -> linear").block_bytes(),
            512
        );
    }

    #[test]
    fn the_length_limit_counts_bytes() {
        let padded = format!("{:<1024}", "managed -> linear");
        assert_eq!(padded.len(), MAX_LAYOUT_LEN);
        parse(&padded);
        let e = error(&format!("{padded} "));
        assert_eq!(e.module, None);
        assert!(
            e.to_string().contains("too long: 1025 bytes, at most 1024"),
            "{e}"
        );
        // The message shows the start of the layout only, cut at a character.
        let e = error(&"é".repeat(1000));
        assert_eq!(e.layout, format!("{}...", "é".repeat(64)));
    }

    #[test]
    fn the_unknown_module_message() {
        assert_eq!(
            error("managed -> fixd(8)").to_string(),
            "layout \"managed -> fixd(8)\": module 2 \"fixd\": unknown module (modules: \
             managed, quotient, bloom, cache, btree, existential, delta-integer, \
             sliding-window, exception, small-integer, \
             state-dictionary, linear, fixed, array, unique-string, empty)"
        );
    }

    /// Each error case: the layout, the module its message must name, and what else it says.
    const ERRORS: &[(&str, &str, &str)] = &[
        // Empty, and syntax.
        ("", "", "layout \"\": empty"),
        (" \t ", "", "empty"),
        (
            "managed -> -> linear",
            "module 2:",
            "nothing between \"->\" and \"->\"",
        ),
        ("-> managed -> linear", "module 1:", "nothing before \"->\""),
        ("managed -> linear ->", "module 3:", "nothing after \"->\""),
        (
            "managed -> fixed(8 -> linear",
            "module 2 \"fixed\"",
            "unclosed \"(\"",
        ),
        (
            "managed -> fixed(8))",
            "module 2 \"fixed\"",
            "unexpected \")\" after \")\"",
        ),
        (
            "managed -> fixed 8)",
            "module 2 \"fixed 8)\"",
            "\")\" without \"(\"",
        ),
        (
            "managed -> fixed((8))",
            "module 2 \"fixed\"",
            "\"(\" inside parameters",
        ),
        ("managed -> (8)", "module 2:", "no module name before \"(\""),
        (
            "managed -> fixed(8) linear",
            "module 2 \"fixed\"",
            "unexpected \"linear\"",
        ),
        (
            "managed linear",
            "module 1 \"managed linear\"",
            "a space inside a module name",
        ),
        (
            "managed -> Linear",
            "module 2 \"Linear\"",
            "bad character 'L'",
        ),
        (
            "managéd -> linear",
            "module 1 \"managéd\"",
            "bad character 'é'",
        ),
        (
            "managed -> lin_ear",
            "module 2 \"lin_ear\"",
            "bad character '_'",
        ),
        (
            "managed -> fixed(8,)",
            "module 2 \"fixed\"",
            "parameter 2 is empty",
        ),
        (
            "managed -> fixed(,8)",
            "module 2 \"fixed\"",
            "parameter 1 is empty",
        ),
        (
            "managed -> fixed(=8)",
            "module 2 \"fixed\"",
            "no parameter name before \"=\"",
        ),
        (
            "managed -> fixed(size=)",
            "module 2 \"fixed\"",
            "\"size\" has no value",
        ),
        (
            "managed -> unique-string(len=4, 8)",
            "module 2 \"unique-string\"",
            "a value without a name (\"8\") may only be the first parameter",
        ),
        // Unknown modules, and modules out of place.
        (
            "managed -> fixd(8)",
            "module 2 \"fixd\"",
            "unknown module (modules: managed,",
        ),
        (
            "btree -> managed -> linear",
            "module 1 \"btree\"",
            "a layout starts with \"managed\"",
        ),
        (
            "linear",
            "module 1 \"linear\"",
            "a layout starts with \"managed\"",
        ),
        (
            "managed -> exception -> btree -> fixed(8) -> linear",
            "module 3 \"btree\"",
            "\"btree\" cannot follow \"exception\"",
        ),
        (
            "managed -> btree -> bloom -> linear",
            "module 3 \"bloom\"",
            "\"bloom\" cannot follow \"btree\"",
        ),
        (
            "managed -> quotient -> bloom -> linear",
            "module 3 \"bloom\"",
            "two filters (module 2 is \"quotient\")",
        ),
        (
            "managed -> btree -> btree -> linear",
            "module 3 \"btree\"",
            "repeated (module 2",
        ),
        (
            "managed -> managed -> linear",
            "module 2 \"managed\"",
            "repeated (module 1",
        ),
        (
            "managed -> exception -> exception -> fixed(8) -> linear",
            "module 3 \"exception\"",
            "repeated",
        ),
        // Formats.
        (
            "managed -> fixed(8) -> array(8)",
            "module 3 \"array\"",
            "two formats (module 2",
        ),
        (
            "managed -> fixed(8) -> linear",
            "module 3 \"linear\"",
            "needs \"exception\" before it",
        ),
        (
            "managed -> linear -> linear",
            "module 3 \"linear\"",
            "repeated",
        ),
        ("managed", "module 1 \"managed\"", "missing format"),
        (
            "managed -> bloom -> btree",
            "module 3 \"btree\"",
            "missing format",
        ),
        (
            "managed -> linear -> btree",
            "module 3 \"btree\"",
            "nothing may follow the format: the layout ends at module 2 \"linear\"",
        ),
        (
            "managed -> exception -> fixed(8) -> linear -> bloom",
            "module 5 \"bloom\"",
            "nothing may follow the format",
        ),
        // `exception`.
        (
            "managed -> exception",
            "module 2 \"exception\"",
            "needs a specialized format",
        ),
        (
            "managed -> btree -> exception -> fixed(8)",
            "module 3 \"exception\"",
            "needs \"linear\" after \"fixed\"",
        ),
        (
            "managed -> exception -> linear",
            "module 3 \"linear\"",
            "keeps nothing, as linear rejects nothing",
        ),
        (
            "managed -> exception -> fixed(8) -> array(8) -> linear",
            "module 4 \"array\"",
            "two formats (module 3 is \"fixed\")",
        ),
        (
            "managed -> exception -> fixed(8) -> btree -> linear",
            "module 4 \"btree\"",
            "\"btree\" cannot follow \"fixed\": after \"exception -> fixed\" only \"linear\"",
        ),
        // Codings.
        (
            "managed -> small-integer(2) -> fixed(8)",
            "module 3 \"fixed\"",
            "fixed(size=8) cannot be under small-integer(bytes=2): its coded values are 2 \
             bytes, so the format is fixed(2) or array(2)",
        ),
        (
            "managed -> exception -> small-integer(1) -> unique-string -> linear",
            "module 4 \"unique-string\"",
            "cannot be under small-integer(bytes=1)",
        ),
        (
            "managed -> small-integer(1) -> linear",
            "module 3 \"linear\"",
            "cannot be under small-integer(bytes=1)",
        ),
        (
            "managed -> small-integer(1) -> exception -> fixed(1) -> linear",
            "module 3 \"exception\"",
            "cannot follow \"small-integer\"",
        ),
        (
            "managed -> small-integer(1)",
            "module 2 \"small-integer\"",
            "missing format",
        ),
        (
            "managed -> small-integer(1) -> state-dictionary -> fixed(1)",
            "module 3 \"state-dictionary\"",
            "two codings (module 2 is \"small-integer\")",
        ),
        (
            "managed -> state-dictionary -> fixed(2)",
            "module 3 \"fixed\"",
            "fixed(size=2) cannot be under state-dictionary: its coded values are 1 bytes",
        ),
        (
            "managed -> delta-integer -> small-integer(1) -> array(1)",
            "module 3 \"small-integer\"",
            "under \"delta-integer\" needs \"exception\" between them",
        ),
        (
            "managed -> delta-integer -> exception -> state-dictionary -> array(1) -> linear",
            "module 4 \"state-dictionary\"",
            "cannot be under \"delta-integer\"",
        ),
        (
            "managed -> delta-integer -> fixed(8)",
            "module 3 \"fixed\"",
            "fixed(size=8) cannot be under \"delta-integer\": its deltas are 4-byte integers",
        ),
        (
            "managed -> delta-integer -> linear",
            "module 3 \"linear\"",
            "cannot be under \"delta-integer\"",
        ),
        (
            "managed -> delta-integer -> exception -> fixed(4) -> linear",
            "module 4 \"fixed\"",
            "rejects nothing for the exception to keep",
        ),
        (
            "managed -> exception -> delta-integer -> fixed(4) -> linear",
            "module 3 \"delta-integer\"",
            "cannot follow \"exception\"",
        ),
        (
            "managed -> existential -> linear",
            "module 3 \"linear\"",
            "cannot be under \"existential\"",
        ),
        (
            "managed -> exception -> existential -> fixed(8) -> linear",
            "module 3 \"existential\"",
            "cannot follow \"exception\"",
        ),
        (
            "managed -> state-dictionary(1) -> fixed(1)",
            "module 2 \"state-dictionary\"",
            "takes no parameters",
        ),
        (
            "managed -> small-integer(4) -> fixed(4)",
            "module 2 \"small-integer\"",
            "\"4\" is out of range (1 to 3)",
        ),
        (
            "managed -> small-integer -> fixed(1)",
            "module 2 \"small-integer\"",
            "missing parameter \"bytes\"",
        ),
        // Parameters.
        (
            "managed -> fixed(sz=8)",
            "module 2 \"fixed\"",
            "unknown parameter \"sz\" (parameters: size)",
        ),
        (
            "managed -> fixed(8, size=8)",
            "module 2 \"fixed\"",
            "parameter \"size\" given twice",
        ),
        (
            "managed -> fixed",
            "module 2 \"fixed\"",
            "missing parameter \"size\" (size=1 to 4096)",
        ),
        (
            "managed -> array()",
            "module 2 \"array\"",
            "missing parameter \"size\"",
        ),
        (
            "managed -> fixed(size=eight)",
            "module 2 \"fixed\"",
            "\"eight\" is not a number",
        ),
        (
            "managed -> fixed(size=-8)",
            "module 2 \"fixed\"",
            "\"-8\" is not a number",
        ),
        (
            "managed -> fixed(size=+8)",
            "module 2 \"fixed\"",
            "\"+8\" is not a number",
        ),
        (
            "managed -> fixed(size=0)",
            "module 2 \"fixed\"",
            "\"0\" is out of range (1 to 4096)",
        ),
        (
            "managed -> array(4097)",
            "module 2 \"array\"",
            "out of range (1 to 4096)",
        ),
        (
            "managed -> fixed(99999999999)",
            "module 2 \"fixed\"",
            "\"99999999999\" is out of range (1 to 4096)",
        ),
        (
            "managed -> bloom(bits=33) -> linear",
            "module 2 \"bloom\"",
            "out of range (1 to 32)",
        ),
        (
            "managed -> bloom(bits=0) -> linear",
            "module 2 \"bloom\"",
            "out of range (1 to 32)",
        ),
        (
            "managed -> btree(node=511) -> linear",
            "module 2 \"btree\"",
            "out of range (512 to 65536)",
        ),
        (
            "managed -> btree(65537) -> linear",
            "module 2 \"btree\"",
            "out of range (512 to 65536)",
        ),
        (
            "managed -> unique-string(max=65536)",
            "module 2 \"unique-string\"",
            "(1 to 65535)",
        ),
        (
            "managed -> unique-string(len=0)",
            "module 2 \"unique-string\"",
            "(1 to 4096)",
        ),
        // `sliding-window`: its size, and over `linear` only.
        (
            "managed -> sliding-window(window=0) -> linear",
            "module 2 \"sliding-window\"",
            "parameter \"window\": \"0\" is out of range (1 to 4096)",
        ),
        (
            "managed -> sliding-window(4097) -> linear",
            "module 2 \"sliding-window\"",
            "out of range (1 to 4096)",
        ),
        (
            "managed -> sliding-window(size=8) -> linear",
            "module 2 \"sliding-window\"",
            "unknown parameter \"size\" (parameters: window)",
        ),
        (
            "managed -> sliding-window -> fixed(8)",
            "module 3 \"fixed\"",
            "\"fixed\" cannot be under \"sliding-window\": it stores values whole or as \
             references in linear blocks, so only \"linear\" may follow it",
        ),
        (
            "managed -> sliding-window -> exception -> unique-string -> linear",
            "module 3 \"exception\"",
            "only \"linear\" may follow it",
        ),
        (
            "managed -> sliding-window -> btree -> linear",
            "module 3 \"btree\"",
            "cannot be under \"sliding-window\"",
        ),
        (
            "managed -> existential -> sliding-window -> linear",
            "module 3 \"sliding-window\"",
            "\"sliding-window\" cannot be under \"existential\": it is over \"linear\", which \
             \"existential\" is never over",
        ),
        (
            "managed -> delta-integer -> sliding-window -> linear",
            "module 3 \"sliding-window\"",
            "cannot be under \"delta-integer\"",
        ),
        (
            "managed -> exception -> sliding-window -> linear",
            "module 3 \"sliding-window\"",
            "\"sliding-window\" cannot follow \"exception\" (the order is managed, a filter, \
             cache, btree, existential, delta-integer, sliding-window, exception",
        ),
        (
            "managed -> sliding-window",
            "module 2 \"sliding-window\"",
            "missing format",
        ),
        (
            "managed -> quotient(fp=0.6) -> linear",
            "module 2 \"quotient\"",
            "out of range (in (0, 0.5])",
        ),
        (
            "managed -> quotient(0) -> linear",
            "module 2 \"quotient\"",
            "out of range (in (0, 0.5])",
        ),
        (
            "managed -> quotient(1e-400) -> linear",
            "module 2 \"quotient\"",
            "out of range",
        ),
        (
            "managed -> quotient(fp=abc) -> linear",
            "module 2 \"quotient\"",
            "not a number",
        ),
        (
            "managed -> quotient(fp=nan) -> linear",
            "module 2 \"quotient\"",
            "not a number",
        ),
        (
            "managed -> quotient(fp=0.1.2) -> linear",
            "module 2 \"quotient\"",
            "not a number",
        ),
        (
            "managed -> quotient(fp=-0.1) -> linear",
            "module 2 \"quotient\"",
            "not a number",
        ),
        (
            "managed(1) -> linear",
            "module 1 \"managed\"",
            "takes no parameters",
        ),
        (
            "managed -> exception(x) -> fixed(8) -> linear",
            "module 2 \"exception\"",
            "takes no parameters",
        ),
        (
            "managed -> linear(size=1)",
            "module 2 \"linear\"",
            "takes no parameters",
        ),
    ];

    #[test]
    fn every_error_names_the_module_and_what_is_wrong() {
        for &(layout, module, reason) in ERRORS {
            let message = error(layout).to_string();
            let prefix = format!("layout \"{}\"", layout.escape_debug());
            assert!(message.starts_with(&prefix), "{layout:?}: {message}");
            assert!(
                message.contains(module),
                "{layout:?}: {message} (no {module:?})"
            );
            assert!(
                message.contains(reason),
                "{layout:?}: {message} (no {reason:?})"
            );
        }
    }

    /// The modules the exhaustive test stacks, parameters given where a module needs them.
    const MODULES: &[&str] = &[
        "managed",
        "quotient",
        "bloom",
        "cache",
        "btree",
        "existential",
        "delta-integer",
        "sliding-window",
        "exception",
        "small-integer(1)",
        "state-dictionary",
        "linear",
        "fixed(8)",
        "array(8)",
        "unique-string",
        "fixed(1)",
        "array(1)",
        "fixed(4)",
        "array(4)",
        "empty",
    ];

    /// Every layout of [`MODULES`], in order, built from the rules rather than by the parser.
    fn valid_sequences() -> Vec<Vec<&'static str>> {
        // What may come under the index: a format, or a coding over a format of its width,
        // alone or under `exception` with `linear` last.
        let mut lowers: Vec<Vec<&str>> = vec![vec!["linear"]];
        let mut specialized: Vec<Vec<&str>> = ["fixed(8)", "array(8)", "unique-string"]
            .iter()
            .chain(&["fixed(1)", "array(1)", "fixed(4)", "array(4)", "empty"])
            .map(|&f| vec![f])
            .collect();
        for coding in ["small-integer(1)", "state-dictionary"] {
            specialized.extend([vec![coding, "fixed(1)"], vec![coding, "array(1)"]]);
        }
        for lower in specialized {
            lowers.push([&["exception"], &lower[..], &["linear"]].concat());
            lowers.push(lower);
        }
        // `delta-integer` over a format of 4-byte values, or through `exception` over one
        // that rejects some: a small-integer, or an array (keys that are not 8 bytes).
        lowers.extend([
            vec!["delta-integer", "fixed(4)"],
            vec!["delta-integer", "array(4)"],
            vec!["delta-integer", "exception", "array(4)", "linear"],
            vec![
                "delta-integer",
                "exception",
                "small-integer(1)",
                "fixed(1)",
                "linear",
            ],
            vec![
                "delta-integer",
                "exception",
                "small-integer(1)",
                "array(1)",
                "linear",
            ],
        ]);
        // `existential` over any of them but `linear`.
        let kept: Vec<Vec<&str>> = lowers[1..]
            .iter()
            .map(|lower| [&["existential"], &lower[..]].concat())
            .collect();
        lowers.extend(kept);
        // `sliding-window` over `linear` alone.
        lowers.push(vec!["sliding-window", "linear"]);
        let mut valid = Vec::new();
        for filter in [None, Some("quotient"), Some("bloom")] {
            for cache in [None, Some("cache")] {
                for btree in [None, Some("btree")] {
                    let head: Vec<&str> = ["managed"]
                        .into_iter()
                        .chain(filter)
                        .chain(cache)
                        .chain(btree)
                        .collect();
                    for lower in &lowers {
                        valid.push([&head[..], lower].concat());
                    }
                }
            }
        }
        valid
    }

    /// Every layout that is a valid one or one more module after a beginning of a valid one
    /// parses exactly when the rules allow it; and one that no valid layout begins with fails
    /// at its last module, so no longer layout starting with it parses either.
    #[test]
    fn exactly_the_layouts_the_rules_allow_parse() {
        let valid = valid_sequences();
        let mut starts: Vec<Vec<&str>> = vec![vec![]];
        for v in &valid {
            for n in 1..=v.len() {
                if !starts.contains(&v[..n].to_vec()) {
                    starts.push(v[..n].to_vec());
                }
            }
        }
        let mut ok = 0;
        for start in &starts {
            for &module in MODULES {
                let modules = [&start[..], &[module]].concat();
                let layout = modules.join(" -> ");
                match LayoutSpec::parse(&layout) {
                    Ok(spec) => {
                        ok += 1;
                        assert!(valid.contains(&modules), "{layout:?} parsed");
                        assert_eq!(parse(&spec.to_string()), spec);
                    }
                    Err(e) => {
                        assert!(!valid.contains(&modules), "{layout:?}: {e}");
                        let (n, name) = e.module.as_ref().expect("a module named");
                        assert!(*n >= 1 && *n <= modules.len(), "{layout:?}: {e}");
                        assert!(modules[n - 1].starts_with(name.as_str()), "{layout:?}: {e}");
                        if !starts.contains(&modules) {
                            assert_eq!(*n, modules.len(), "{layout:?}: {e}");
                        }
                    }
                }
            }
        }
        assert_eq!(ok, valid.len());
    }

    #[test]
    fn what_each_format_rejects() {
        let key8 = 7u64.to_be_bytes();
        let linear = parse("managed -> linear");
        assert_eq!(linear.format.rejects(b"", b""), None);
        assert_eq!(linear.format.rejects(&[1; 300], &[2; 70_000]), None);
        assert_eq!(linear.check_write(b"k", None), Ok(()));

        let fixed = parse("managed -> fixed(8)");
        assert_eq!(fixed.format.rejects(b"any key", &[0; 8]), None);
        assert_eq!(
            fixed.format.rejects(b"k", &[0; 7]).as_deref(),
            Some("a 7-byte value in fixed(size=8): its values are 8 bytes")
        );
        assert!(fixed.format.rejects(b"k", &[0; 9]).is_some());
        assert!(fixed.format.rejects(b"k", b"").is_some());
        assert_eq!(fixed.check_write(b"k", Some(&[0; 8])), Ok(()));
        assert!(fixed.check_write(b"k", Some(&[0; 9])).is_err());
        assert_eq!(fixed.check_write(b"k", None), Ok(()));

        let array = parse("managed -> btree -> array(size=4)");
        assert_eq!(array.format.rejects(&key8, &[0; 4]), None);
        assert_eq!(
            array.format.rejects(b"short", &[0; 4]).as_deref(),
            Some("a 5-byte key in array(size=4): its keys are 8 bytes (a big-endian u64)")
        );
        assert!(array.format.rejects(&[0; 9], &[0; 4]).is_some());
        assert!(array
            .format
            .rejects(&key8, &[0; 5])
            .unwrap()
            .contains("its values are 4 bytes"));
        assert_eq!(array.check_write(&key8, None), Ok(()));
        // A delete of a key an array table could never hold is an error too.
        assert!(array
            .check_write(b"short", None)
            .unwrap_err()
            .contains("5-byte key"));
        assert!(array.check_write(&key8, Some(&[0; 3])).is_err());

        let unique = parse("managed -> unique-string(max=4, len=3)");
        assert_eq!(unique.format.rejects(b"k", b""), None);
        assert_eq!(unique.format.rejects(b"k", b"abc"), None);
        assert_eq!(
            unique.format.rejects(b"k", b"abcd").as_deref(),
            Some("a 4-byte value in unique-string(max=4, len=3): its values are at most 3 bytes")
        );
        assert!(unique.check_write(b"k", Some(b"abcd")).is_err());
        assert_eq!(unique.check_write(b"k", None), Ok(()));

        let small = parse("managed -> small-integer(2) -> array(2)");
        let int = |n: u32| n.to_le_bytes();
        assert_eq!(small.check_write(&key8, Some(&int(65535))), Ok(()));
        assert_eq!(
            small.check_write(&key8, Some(&int(65536))),
            Err("65536 in small-integer(bytes=2): its values are below 2^16".to_string())
        );
        assert_eq!(
            small.check_write(&key8, Some(b"ab")),
            Err(
                "a 2-byte value in small-integer(bytes=2): its values are 4-byte integers \
                 (u32 little-endian)"
                    .to_string()
            )
        );
        assert!(small
            .check_write(b"short", Some(&int(1)))
            .unwrap_err()
            .contains("5-byte key"));
        assert!(small.check_write(b"short", None).is_err());
        assert_eq!(small.check_write(&key8, None), Ok(()));
        let small = parse("managed -> exception -> small-integer(1) -> fixed(1) -> linear");
        assert!(small.block_format().rejects(b"k", &int(256)).is_some());
        assert_eq!(small.block_format().rejects(b"k", &int(255)), None);
        assert_eq!(small.check_write(b"k", Some(&int(256))), Ok(()));

        let states = parse("managed -> state-dictionary -> fixed(1)");
        assert_eq!(STATE_CODES.len(), 56);
        assert!(STATE_CODES.windows(2).all(|w| w[0] < w[1]), "sorted");
        for code in STATE_CODES {
            assert_eq!(states.check_write(b"k", Some(&code)), Ok(()));
        }
        assert_eq!(CodingSpec::state_index(b"AK"), Some(0));
        assert_eq!(CodingSpec::state_index(b"WY"), Some(55));
        assert_eq!(
            states.check_write(b"k", Some(b"ZZ")),
            Err(
                "\"ZZ\" in state-dictionary: its values are US postal codes of states and \
                 territories (AK to WY)"
                    .to_string()
            )
        );
        for odd in [&b"ca"[..], b"CAL", b"", b"C"] {
            assert!(states.check_write(b"k", Some(odd)).is_err(), "{odd:?}");
        }

        let delta = parse(
            "managed -> delta-integer -> exception -> small-integer(1) -> array(1) -> linear",
        );
        assert_eq!(delta.check_write(&key8, Some(&int(u32::MAX))), Ok(()));
        assert_eq!(delta.check_write(b"odd key", Some(&int(7))), Ok(()));
        assert_eq!(
            delta.check_write(&key8, Some(b"abc")),
            Err(
                "a 3-byte value in delta-integer: its values are 4-byte integers (u32 \
                 little-endian)"
                    .to_string()
            )
        );
        assert_eq!(delta.check_write(b"odd key", None), Ok(()));
        let delta = parse("managed -> delta-integer -> array(4)");
        assert!(delta.check_write(b"odd key", Some(&int(7))).is_err());
        assert!(delta.check_write(&key8, Some(b"abcde")).is_err());
        assert_eq!(delta.check_write(&key8, Some(&int(7))), Ok(()));

        let empty = parse("managed -> empty");
        assert_eq!(empty.check_write(b"k", Some(b"")), Ok(()));
        assert_eq!(
            empty.check_write(b"k", Some(b"x")),
            Err("a 1-byte value in empty: its values are empty".to_string())
        );
        assert_eq!(empty.check_write(b"k", None), Ok(()));

        // With `exception` the format still rejects, but every write passes.
        for layout in [
            "managed -> exception -> fixed(8) -> linear",
            "managed -> exception -> array(4) -> linear",
            "managed -> exception -> unique-string(len=3) -> linear",
        ] {
            let spec = parse(layout);
            assert!(
                spec.format.rejects(b"odd", b"a value too long").is_some(),
                "{layout}"
            );
            assert_eq!(spec.check_write(b"odd", Some(b"a value too long")), Ok(()));
            assert_eq!(spec.check_write(b"odd", None), Ok(()));
        }
    }

    fn rate() -> impl Strategy<Value = f64> {
        // Every positive double below 0.5, by bits (so every magnitude), and 0.5 itself.
        prop_oneof![
            (1u64..0.5f64.to_bits()).prop_map(f64::from_bits),
            Just(0.5),
            Just(0.01),
        ]
    }

    fn specialized() -> impl Strategy<Value = FormatSpec> {
        prop_oneof![
            (1u32..=4096).prop_map(|size| FormatSpec::Fixed { size }),
            (1u32..=4096).prop_map(|size| FormatSpec::Array { size }),
            (1u32..=65535, 1u32..=4096)
                .prop_map(|(max, len)| FormatSpec::UniqueString { max, len }),
            Just(FormatSpec::Empty),
        ]
    }

    pub(crate) fn valid_spec() -> impl Strategy<Value = LayoutSpec> {
        let filter = prop_oneof![
            Just(None),
            Just(Some(FilterSpec::Quotient { fp_rate: None })),
            rate().prop_map(|r| Some(FilterSpec::Quotient { fp_rate: Some(r) })),
            (1u32..=32).prop_map(|bits_per_key| Some(FilterSpec::Bloom { bits_per_key })),
        ];
        let cache = prop::option::of((1u32..=1 << 24).prop_map(|keys| CacheSpec { keys }));
        let btree = prop::option::of((512u32..=65536).prop_map(|node| BtreeSpec { node }));
        let coded = (1u32..=3, any::<bool>()).prop_map(|(bytes, array)| {
            let format = match array {
                true => FormatSpec::Array { size: bytes },
                false => FormatSpec::Fixed { size: bytes },
            };
            (Some(CodingSpec::SmallInteger { bytes }), format)
        });
        let states = prop_oneof![
            Just(FormatSpec::Fixed { size: 1 }),
            Just(FormatSpec::Array { size: 1 })
        ]
        .prop_map(|f| (Some(CodingSpec::StateDictionary), f));
        let lower = prop_oneof![
            Just((false, None, FormatSpec::Linear)),
            (any::<bool>(), specialized()).prop_map(|(e, f)| (e, None, f)),
            (any::<bool>(), coded.clone()).prop_map(|(e, (c, f))| (e, c, f)),
            (any::<bool>(), states).prop_map(|(e, (c, f))| (e, c, f)),
        ]
        .prop_map(|(e, c, f)| (false, e, c, f));
        let deltas = prop_oneof![
            Just((false, None, FormatSpec::Fixed { size: 4 })),
            Just((false, None, FormatSpec::Array { size: 4 })),
            Just((true, None, FormatSpec::Array { size: 4 })),
            coded.prop_map(|(c, f)| (true, c, f)),
        ]
        .prop_map(|(e, c, f)| (true, e, c, f));
        let lower = prop_oneof![lower, deltas];
        // Over a linear format only (not the final `linear` of `exception`).
        let window = prop::option::of(1u32..=4096);
        (filter, cache, btree, lower, any::<bool>(), window).prop_map(
            |(filter, cache, btree, (delta, exception, coding, format), existential, window)| {
                let linear = format == FormatSpec::Linear;
                LayoutSpec {
                    filter,
                    cache,
                    btree,
                    existential: existential && !linear,
                    delta,
                    window: window.filter(|_| linear),
                    exception,
                    coding,
                    format,
                }
            },
        )
    }

    /// Names that are no module's, beside every module's (`KINDS`).
    const NOT_NAMES: &[&str] = &["fixd", "", "Managed"];
    const KEYS: &[&str] = &[
        "fp", "bits", "keys", "node", "size", "max", "len", "bytes", "window", "x", "", " ",
    ];
    const VALUES: &[&str] = &[
        "0",
        "1",
        "8",
        "10",
        "32",
        "255",
        "512",
        "4096",
        "65535",
        "65536",
        "0.01",
        "0.5",
        "1e-3",
        "-1",
        "abc",
        "99999999999",
        "",
        "nan",
        "(",
        ")",
        "=",
    ];

    /// A module named as a module is or as none is, with parameters from the keys and values
    /// above.
    fn module() -> impl Strategy<Value = String> {
        let names: Vec<&'static str> = KINDS
            .iter()
            .map(|k| k.name())
            .chain(NOT_NAMES.iter().copied())
            .collect();
        let param = (prop::option::of(0..KEYS.len()), 0..VALUES.len()).prop_map(|(k, v)| match k {
            Some(k) => format!("{}={}", KEYS[k], VALUES[v]),
            None => VALUES[v].to_string(),
        });
        (
            0..names.len(),
            prop::option::of(prop::collection::vec(param, 0..3)),
        )
            .prop_map(move |(name, params)| match params {
                Some(params) => format!("{}({})", names[name], params.join(", ")),
                None => names[name].to_string(),
            })
    }

    /// Parses without panicking, and what parses prints to a layout that parses back to it.
    fn parses_sanely(layout: &str) -> Result<(), TestCaseError> {
        if let Ok(spec) = LayoutSpec::parse(layout) {
            let canonical = spec.to_string();
            prop_assert_eq!(LayoutSpec::parse(&canonical), Ok(spec), "{}", canonical);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn the_canonical_form_parses_back(spec in valid_spec()) {
            let canonical = spec.to_string();
            prop_assert!(canonical.len() <= MAX_LAYOUT_LEN);
            let parsed = LayoutSpec::parse(&canonical);
            prop_assert_eq!(parsed.as_ref(), Ok(&spec), "{}", canonical);
            prop_assert_eq!(parsed.map(|p| p.to_string()), Ok(canonical));
        }

        #[test]
        fn arbitrary_strings_do_not_panic(s in any::<String>()) {
            parses_sanely(&s)?;
        }

        #[test]
        fn strings_of_the_grammars_characters_do_not_panic(
            s in "[a-z0-9(),=> .\\-é]{0,80}",
        ) {
            parses_sanely(&s)?;
        }

        #[test]
        fn random_module_sequences_do_not_panic(
            managed in any::<bool>(),
            modules in prop::collection::vec(module(), 0..8),
        ) {
            let layout = modules.join(" -> ");
            let layout = if managed { format!("managed -> {layout}") } else { layout };
            parses_sanely(&layout)?;
        }
    }
}
