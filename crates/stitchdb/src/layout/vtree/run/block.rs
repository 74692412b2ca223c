//! Data blocks: a run's sorted entries, a few KiB at a time, each block one extent.
//!
//! A block's payload is a version byte and its entries back to back, each key stored as the
//! bytes it does not share with the key before it; the first key is stored whole, so a block
//! can be read without its index handle (repair rebuilds a run whose index is lost from its
//! blocks).
//! Sorted keys share long prefixes (neighbours in a run of 16-byte keys typically share most
//! of their bytes), so each entry stores only the bytes that differ from the previous key. A
//! block is parsed whole once (then cached): keys are rebuilt into one buffer, every entry is
//! validated, and lookups binary-search the parsed entries. Versions 1 to 4 and 9 are read,
//! version 4 is written, and version 9 (version 4 with back-references to values earlier in
//! the block, see `window`) under `sliding-window`; the byte format of each is specified in
//! `docs/format.md` ("Run blocks").

use super::special::{decode_special, find as find_in_special, is_special};
use super::window::{join_shared, split_shared, Literals, Window, WINDOW_VERSION};
use crate::codec::{put_bytes, put_varint, Reader};
#[cfg(test)]
use crate::entry::Entry;
use crate::entry::EntryRef;
use std::borrow::Cow;
use std::cmp::Ordering;

/// The version merges and flushes write: keys share prefixes, the first key is stored whole
/// (so a block can be read without its index handle: repair rebuilds a run from its blocks),
/// and the entry count is implied by the payload's end (docs/format.md).
const BLOCK_VERSION: u8 = 4;
/// A version still read: the first key and the entry count in the index handle only.
const BLOCK_VERSION_ELIDED: u8 = 3;
/// A version still read: each entry tagged, the entry count at the end of the block.
const BLOCK_VERSION_COUNTED: u8 = 2;
/// A version still read: whole keys, and a table of the entries' offsets.
const BLOCK_VERSION_WHOLE_KEYS: u8 = 1;
const NO_VALUE: u32 = u32::MAX;
/// The fewest bytes an entry takes (shared, key length, sequence number, value; version 2's
/// tag in place of the value): bounds the entry count a damaged block or handle may claim.
const MIN_ENTRY: usize = 4;

/// Values at least this long are copied into a block at the same offset within a cache line
/// as they have where they come from (see [`BlockWriter::align_value`]).
const ALIGNED_VALUE: usize = 1024;
const CACHE_LINE: usize = 64;

/// Accumulates entries into one block payload.
#[derive(Default)]
pub struct BlockWriter {
    /// `lead` unused bytes (see [`align_value`](Self::align_value)), then the payload.
    body: Vec<u8>,
    lead: usize,
    count: u32,
    first_key: Vec<u8>,
    last_key: Vec<u8>,
    /// `sliding-window`: blocks are version 9, values seen in the block's window referred to.
    window: Option<Window>,
}

/// A finished block: its payload, and what its index handle holds (the payload cannot be
/// read without it).
pub struct FinishedBlock {
    buf: Vec<u8>,
    lead: usize,
    pub first_key: Vec<u8>,
    pub last_key: Vec<u8>,
    pub entries: u64,
}

impl FinishedBlock {
    /// A block of `payload` (a specialized format's, see `format`).
    pub fn new(
        payload: Vec<u8>,
        first_key: Vec<u8>,
        last_key: Vec<u8>,
        entries: u64,
    ) -> FinishedBlock {
        FinishedBlock {
            buf: payload,
            lead: 0,
            first_key,
            last_key,
            entries,
        }
    }

    /// The payload.
    pub fn payload(&self) -> &[u8] {
        &self.buf[self.lead..]
    }

    /// The block's buffer, for the writer to fill again ([`BlockWriter::recycle`]).
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }
}

impl BlockWriter {
    /// A writer of version 9 blocks whose values refer back to the block's last `size`
    /// values stored whole (`sliding-window`); of version 4 blocks without it.
    pub fn with_window(size: Option<u32>) -> BlockWriter {
        BlockWriter {
            window: size.map(Window::new),
            ..BlockWriter::default()
        }
    }

    pub fn add(&mut self, e: EntryRef) {
        let shared = if self.count == 0 {
            // Room for a block's worth and the entry that takes it past its target, so the
            // payload is not reallocated (and copied again) as it fills.
            let entry = e.key.len() + e.value.map_or(0, <[u8]>::len) + 32;
            self.body.reserve(CACHE_LINE + 4096 + entry);
            self.body.clear();
            self.lead = 0;
            match &mut self.window {
                Some(window) => {
                    window.clear();
                    self.body.push(WINDOW_VERSION);
                }
                None => self.body.push(BLOCK_VERSION),
            }
            self.first_key.clear();
            self.first_key.extend_from_slice(e.key);
            // The first key is stored whole, though the index handle holds it too: a block
            // whose index extent is damaged can then still be read (repair rebuilds the
            // index from such blocks).
            0
        } else {
            shared_prefix(&self.last_key, e.key)
        };
        self.count += 1;
        // Under a window: the value's hash, and how far back the block stores it, if it does.
        let seen = match (&self.window, e.value) {
            (Some(window), Some(v)) => Some(window.find(&self.body, v)),
            _ => None,
        };
        let back = seen.and_then(|(_, back)| back);
        let first = match self.window {
            Some(_) => join_shared(shared as u64, back.is_some()),
            None => shared as u64,
        };
        put_varint(&mut self.body, first);
        put_bytes(&mut self.body, &e.key[shared..]);
        put_varint(&mut self.body, e.seq);
        match (e.value, back) {
            (Some(_), Some(back)) => put_varint(&mut self.body, back),
            (Some(v), None) => {
                put_varint(&mut self.body, v.len() as u64 + 1);
                if self.count == 1 && v.len() >= ALIGNED_VALUE {
                    self.align_value(v);
                }
                self.body.extend_from_slice(v);
                if let (Some(window), Some((hash, _))) = (&mut self.window, seen) {
                    let end = self.body.len() as u32;
                    window.enter(hash, (end - v.len() as u32, end));
                }
            }
            (None, _) => put_varint(&mut self.body, 0),
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(e.key);
    }

    /// Shifts the block within its buffer so that `v`, appended next, lands at the offset
    /// within a cache line it has where it is copied from. `memcpy` copies large values with
    /// `rep movsb`, which some CPUs (AMD EPYC among them) run several times slower when the
    /// destination lies 8-31 bytes past the source's offset in a line than when the offsets
    /// match. A memtable's 4 KiB values are page-aligned and a new block's buffer too, so
    /// with the bytes in front of a one-entry block's value (its version, key and lengths)
    /// every flush of large values would hit the slow case.
    fn align_value(&mut self, v: &[u8]) {
        let dst = self.body.as_ptr() as usize + self.body.len();
        let lead = (v.as_ptr() as usize).wrapping_sub(dst) % CACHE_LINE;
        // Within the capacity reserved: the buffer does not move.
        self.body.splice(0..0, std::iter::repeat_n(0, lead));
        self.lead = lead;
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The payload size so far.
    pub fn size(&self) -> usize {
        self.body.len().saturating_sub(self.lead)
    }

    /// Gives the writer `buf` (a finished block's, copied out) to fill next, sparing an
    /// allocation.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.body.capacity() == 0 {
            buf.clear();
            self.body = buf;
        }
    }

    /// The finished block; the writer is reset.
    pub fn finish(&mut self) -> FinishedBlock {
        FinishedBlock {
            buf: std::mem::take(&mut self.body),
            lead: self.lead,
            first_key: std::mem::take(&mut self.first_key),
            last_key: std::mem::take(&mut self.last_key),
            entries: u64::from(std::mem::take(&mut self.count)),
        }
    }
}

/// How many leading bytes `a` and `b` share.
pub(super) fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Where one entry's parts lie: its key in the block's key buffer, its value in the payload.
#[derive(Debug, Clone, Copy)]
struct Span {
    key: (u32, u32),
    value: (u32, u32),
    seq: u64,
}

/// How a version's entries are laid out.
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// Tag, sequence number, key, value.
    V2,
    /// Key, sequence number, value length + 1 (0: tombstone) and value.
    V3,
    /// Version 9 (`sliding-window`): V3's, with the shared-prefix length's low bit saying
    /// that the value is a back-reference (see `window`).
    Window,
}

impl Layout {
    /// An entry's first varint: its shared-prefix length, and whether its value is a
    /// back-reference.
    fn shared(self, first: u64) -> (u64, bool) {
        match self {
            Layout::Window => split_shared(first),
            _ => (first, false),
        }
    }
}

/// An entry's value (versions 3, 4 and 9) read from `r`: where it lies, `NO_VALUE` for a
/// tombstone. Under a window (version 9: the block's `literals` so far, and whether the entry
/// refers back) a reference reads as the literal it names, and a literal joins the window.
fn read_value(r: &mut Reader, window: Option<(&mut Literals, bool)>) -> Result<(u32, u32), String> {
    if let Some((literals, true)) = &window {
        return literals.back(r.varint()?);
    }
    let value = match r.varint()? {
        0 => (NO_VALUE, NO_VALUE),
        n => Block::value_at(r, usize::try_from(n - 1).map_err(|_| "value too long")?)?,
    };
    if let (Some((literals, _)), true) = (window, value.0 != NO_VALUE) {
        literals.push(value);
    }
    Ok(value)
}

/// A parsed, validated block.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// Every entry's whole key, back to back (rebuilt from the shared prefixes).
    keys: Vec<u8>,
    spans: Vec<Span>,
    /// An `array` block without holes or a versions section: its first key as a `u64`, the
    /// keys of the entries after it each one more, so a lookup finds an entry by arithmetic
    /// (the format's point) rather than by comparing keys.
    dense_from: Option<u64>,
    /// A `fixed` block without tombstones or a versions section whose keys are all this many
    /// bytes: entry `i`'s key is at `keys[i * stride..]`, so a lookup binary-searches the
    /// keys by arithmetic, not through `spans` (a second place in memory at every probe).
    stride: Option<usize>,
}

/// A block's entries decoded one at a time, in order, from its bytes as read (checksum
/// verified), each checked as parsing checks it (its bytes, its order, the first key against
/// the index handle), but without building a [`Block`]: for a reader that goes through a
/// block once (a point read, a seek, a scan streaming past), which then pays for the entries
/// it reads and keeps no key buffer or entry table. Versions 3 and 4 only.
pub struct RawEntries<D> {
    data: D,
    /// Where the next entry starts.
    pos: usize,
    /// Version 3's first key, which the block leaves out (empty for version 4).
    elided: bool,
    /// Version 9: the block's literals so far, which its references name.
    window: Option<Literals>,
    handle_first_key: Vec<u8>,
    /// Entries decoded, of `count`.
    decoded: u64,
    count: u64,
    /// A specialized block's versions section: entries to the end of the data, no count and
    /// no index handle to check the first against.
    to_end: bool,
    /// The current entry: its key, sequence number and value (`NO_VALUE` for a tombstone).
    key: Vec<u8>,
    seq: u64,
    value: (u32, u32),
}

impl RawEntries<Vec<u8>> {
    /// Whether the payload starting `start` bytes into `data` is of a version read this way.
    pub fn reads(data: &[u8], start: usize) -> bool {
        matches!(
            data.get(start),
            Some(&(BLOCK_VERSION | BLOCK_VERSION_ELIDED | WINDOW_VERSION))
        )
    }
}

impl<D: AsRef<[u8]>> RawEntries<D> {
    /// The entries of the payload starting `start` bytes into `data`; `Ok(None)` for a
    /// version that needs parsing.
    pub fn new(data: D, start: usize, handle: Framing) -> Result<Option<RawEntries<D>>, String> {
        let bytes = data.as_ref();
        let (elided, window) = match bytes.get(start) {
            Some(&BLOCK_VERSION) => (false, None),
            Some(&BLOCK_VERSION_ELIDED) => (true, None),
            Some(&WINDOW_VERSION) => (false, Some(Literals::default())),
            Some(_) => return Ok(None),
            None => return Err("empty block".into()),
        };
        let payload_len = bytes.len() - start;
        if handle.entries == 0 || handle.entries > (payload_len / MIN_ENTRY) as u64 {
            return Err(format!("entry count {} out of range", handle.entries));
        }
        Ok(Some(RawEntries {
            data,
            pos: start + 1,
            elided,
            window,
            handle_first_key: handle.first_key.to_vec(),
            decoded: 0,
            count: handle.entries,
            to_end: false,
            key: Vec::with_capacity(handle.first_key.len() + 16),
            seq: 0,
            value: (NO_VALUE, NO_VALUE),
        }))
    }

    /// The version 4 entries from `at` to the end of `data`: a specialized block's versions
    /// section (see `format`).
    pub fn section(data: D, at: usize) -> RawEntries<D> {
        RawEntries {
            data,
            pos: at,
            elided: false,
            window: None,
            handle_first_key: Vec::new(),
            decoded: 0,
            count: u64::MAX,
            to_end: true,
            key: Vec::new(),
            seq: 0,
            value: (NO_VALUE, NO_VALUE),
        }
    }

    /// Decodes the next entry, now [`current`](Self::current); false once all are (and no
    /// bytes trail them).
    pub fn advance(&mut self) -> Result<bool, String> {
        let bytes = self.data.as_ref();
        if self.to_end && self.pos == bytes.len() {
            return Ok(false);
        }
        if self.decoded == self.count {
            if self.pos != bytes.len() {
                return Err("trailing bytes after the last entry".into());
            }
            return Ok(false);
        }
        let i = self.decoded;
        let entry = |e: String| format!("entry {i}: {e}");
        let mut r = Reader::new(bytes);
        r.take(self.pos).map_err(entry)?;
        let first = r.varint().map_err(entry)?;
        let layout = match self.window {
            Some(_) => Layout::Window,
            None => Layout::V3,
        };
        let (shared, reference) = layout.shared(first);
        let rest = r.bytes().map_err(entry)?;
        let seq = r.varint().map_err(entry)?;
        let window = self.window.as_mut().map(|w| (w, reference));
        let value = read_value(&mut r, window).map_err(entry)?;
        // The first entry shares with the handle's first key (version 3) or nothing.
        let prev_len = match (i, self.elided) {
            (0, true) => self.handle_first_key.len(),
            (0, false) => 0,
            _ => self.key.len(),
        };
        if shared > prev_len as u64 {
            return Err(entry(format!("shares {shared} bytes with a shorter key")));
        }
        let shared = shared as usize;
        if i == 0 {
            self.key.clear();
            self.key.extend_from_slice(&self.handle_first_key[..shared]);
        } else {
            let order = rest.cmp(&self.key[shared..]);
            if order == Ordering::Less || (order == Ordering::Equal && self.seq <= seq) {
                return Err(entry("out of order (key ascending, newest first)".into()));
            }
            self.key.truncate(shared);
        }
        self.key.extend_from_slice(rest);
        if i == 0 && !self.to_end && self.key != self.handle_first_key {
            return Err(NOT_THE_INDEX.into());
        }
        self.pos = r.pos();
        self.seq = seq;
        self.value = value;
        self.decoded += 1;
        Ok(true)
    }

    /// The entry [`advance`](Self::advance) decoded last.
    pub fn current(&self) -> EntryRef<'_> {
        let value =
            (self.value.0 != NO_VALUE).then(|| &self.data.as_ref()[Block::range(self.value)]);
        EntryRef {
            key: &self.key,
            seq: self.seq,
            value,
        }
    }

    /// Whether entries are left to decode.
    pub fn has_next(&self) -> bool {
        self.decoded < self.count
    }
}

/// How many of `keys` (8-byte big-endian integers, ascending, back to back) are below `key`. A block's
/// integer keys are often evenly spread (a sequence, hashes), so the search starts at the
/// entry `key` would be at were they spread evenly between the first and the last: there, or
/// beside it, for such keys (the keys' cache lines the probes of a binary search would miss
/// are the cost of a read from a cached block); elsewhere a binary search on the side of it
/// `key` lies on.
fn seek_integer(keys: &[u8], key: u64) -> usize {
    let at = |i: usize| {
        let mut k = [0; 8];
        k.copy_from_slice(&keys[i * 8..i * 8 + 8]);
        u64::from_be_bytes(k)
    };
    // How many of the keys from `lo` to `hi` are below `key` (a binary search).
    let below = |mut lo: usize, mut hi: usize| {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match at(mid) < key {
                true => lo = mid + 1,
                false => hi = mid,
            }
        }
        lo
    };
    let n = keys.len() / 8;
    if n == 0 || key <= at(0) {
        return 0;
    }
    let last = at(n - 1);
    if key > last {
        return n;
    }
    // at(0) < key <= last, so 0 < guess <= n - 1.
    let spread = u128::from(last - at(0));
    let guess = (u128::from(key - at(0)) * (n as u128 - 1)).div_ceil(spread) as usize;
    if at(guess) >= key {
        match at(guess - 1) < key {
            true => guess,
            false => below(0, guess - 1),
        }
    } else {
        // at(n - 1) >= key: guess + 1 < n.
        match at(guess + 1) >= key {
            true => guess + 1,
            false => below(guess + 2, n - 1),
        }
    }
}

/// A block's damage when its entries are not those its index entry names.
pub const NOT_THE_INDEX: &str = "contents do not match the run index";

/// What [`Block::find`] found of a key.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// Its newest version at or below the snapshot: sequence number and value (`None`: a
    /// tombstone).
    Version(u64, Option<Vec<u8>>),
    /// No version of it is in this run: a larger key follows it here.
    Absent,
    /// None here, but versions may continue in the next block.
    MaybeNext,
}

/// What a block's index handle says of it: a version 3 payload cannot be read without it.
#[derive(Debug, Clone, Copy)]
pub struct Framing<'a> {
    pub first_key: &'a [u8],
    pub entries: u64,
}

/// The little-endian u32 at `at` (the caller has checked that four bytes are there).
fn u32_at(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]])
}

impl Block {
    /// Parses and validates a payload: version, every entry, and their order.
    #[cfg(test)]
    pub fn parse(data: Vec<u8>, handle: Framing) -> Result<Block, String> {
        Self::parse_at(data, 0, handle)
    }

    /// Parses and validates a payload (version, every entry, and their order) that starts
    /// `start` bytes into `data`: a block read with its extent header in front, which is
    /// kept rather than copied away.
    pub fn parse_at(mut data: Vec<u8>, start: usize, handle: Framing) -> Result<Block, String> {
        let payload_len = data.len().saturating_sub(start);
        if payload_len == 0 {
            return Err("empty block".into());
        }
        let version = data[start];
        if is_special(version) {
            let block = Self::parse_special(data, start)?;
            if block.len() as u64 != handle.entries {
                return Err(format!(
                    "{} entries where the index says {}",
                    block.len(),
                    handle.entries
                ));
            }
            if block.len() > 0 && block.entry(0).key != handle.first_key {
                return Err(NOT_THE_INDEX.into());
            }
            return Ok(block);
        }
        let count = match version {
            BLOCK_VERSION | BLOCK_VERSION_ELIDED | WINDOW_VERSION => handle.entries,
            _ if payload_len < 5 => {
                return Err(format!("block of {payload_len} bytes is too short"))
            }
            _ => u64::from(u32_at(&data, data.len() - 4)),
        };
        if count > (payload_len / MIN_ENTRY) as u64 {
            return Err(format!("entry count {count} too large"));
        }
        let count = count as usize;
        let mut block = Block {
            keys: Vec::new(),
            spans: Vec::with_capacity(count),
            data: Vec::new(),
            dense_from: None,
            stride: None,
        };
        match version {
            BLOCK_VERSION => block.parse_entries(&data, start, &[], Some(count), Layout::V3)?,
            WINDOW_VERSION => {
                block.parse_entries(&data, start, &[], Some(count), Layout::Window)?
            }
            BLOCK_VERSION_ELIDED => {
                block.parse_entries(&data, start, handle.first_key, Some(count), Layout::V3)?
            }
            BLOCK_VERSION_COUNTED => {
                let entries = &data[..data.len() - 4];
                block.parse_entries(entries, start, &[], Some(count), Layout::V2)?
            }
            BLOCK_VERSION_WHOLE_KEYS => {
                // Old blocks' offset tables count from the payload's start.
                data.drain(..start);
                block.parse_whole_keys(&data, count)?
            }
            v => return Err(format!("unsupported block version {v}")),
        }
        block.data = data;
        Ok(block)
    }

    /// A version 4 or 9 block read without its index handle (repair, rebuilding a damaged
    /// index): its entries up to the payload's end. Blocks of other versions need their
    /// handle.
    pub fn parse_standalone(data: Vec<u8>, start: usize) -> Result<Block, String> {
        let layout = match data.get(start) {
            Some(&BLOCK_VERSION) => Layout::V3,
            Some(&WINDOW_VERSION) => Layout::Window,
            Some(&v) if is_special(v) => {
                let block = Self::parse_special(data, start)?;
                if block.spans.is_empty() {
                    return Err("block without entries".into());
                }
                return Ok(block);
            }
            Some(v) => {
                return Err(format!(
                    "a version {v} block cannot be read without its index"
                ))
            }
            None => return Err("empty block".into()),
        };
        let mut block = Block {
            keys: Vec::new(),
            spans: Vec::new(),
            data: Vec::new(),
            dense_from: None,
            stride: None,
        };
        block.parse_entries(&data, start, &[], None, layout)?;
        if block.spans.is_empty() {
            return Err("block without entries".into());
        }
        block.data = data;
        Ok(block)
    }

    /// A specialized format's block (see `format`): its special section, every entry at the
    /// block's floor, merged with its versions section (version 4 entries to the payload's
    /// end) in (key ascending, newest first) order.
    fn parse_special(mut data: Vec<u8>, start: usize) -> Result<Block, String> {
        let special = decode_special(&data, start)?;
        let mut versions = Block {
            keys: Vec::new(),
            spans: Vec::new(),
            data: Vec::new(),
            dense_from: None,
            stride: None,
        };
        // `parse_entries` skips the byte at `start`, a version byte in other blocks.
        versions
            .parse_entries(&data, special.versions_at - 1, &[], None, Layout::V3)
            .map_err(|e| format!("versions section: {e}"))?;
        // Values a coding made follow the payload (their spans count on from its end).
        data.extend_from_slice(&special.values);
        let offset = special.keys.len() as u32;
        let mut keys = special.keys;
        keys.extend_from_slice(&versions.keys);
        let shift = |(a, b): (u32, u32)| (a + offset, b + offset);
        let floor = special.floor;
        // Without versions every entry is the special section's, one per key.
        let dense_from = special.dense_from.filter(|_| versions.spans.is_empty());
        let stride = special.key_width.filter(|_| versions.spans.is_empty());
        let mut spans = Vec::with_capacity(special.entries.len() + versions.spans.len());
        let mut a = special.entries.into_iter().map(|(key, value)| Span {
            key,
            value: value.unwrap_or((NO_VALUE, NO_VALUE)),
            seq: floor,
        });
        let mut b = versions.spans.into_iter().map(|s| Span {
            key: shift(s.key),
            ..s
        });
        let (mut x, mut y) = (a.next(), b.next());
        let order = |s: &Span| (&keys[Self::range(s.key)], std::cmp::Reverse(s.seq));
        loop {
            let take_a = match (&x, &y) {
                (Some(p), Some(q)) => match order(p).cmp(&order(q)) {
                    Ordering::Less => true,
                    Ordering::Greater => false,
                    Ordering::Equal => {
                        return Err("a version in both sections".into());
                    }
                },
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if take_a {
                spans.extend(x.take());
                x = a.next();
            } else {
                spans.extend(y.take());
                y = b.next();
            }
        }
        Ok(Block {
            data,
            keys,
            spans,
            dense_from,
            stride,
        })
    }

    /// Versions 2 to 4 and 9: entries one after another, each key sharing a prefix with the one
    /// before (for the first, with `first_key`). Values are located by their position in
    /// `data` (the payload starts at `start`). `count` entries, or (`None`) up to the end.
    fn parse_entries(
        &mut self,
        data: &[u8],
        start: usize,
        first_key: &[u8],
        count: Option<usize>,
        layout: Layout,
    ) -> Result<(), String> {
        let mut r = Reader::new(data);
        r.take(start + 1)?;
        let mut i = 0;
        let mut literals = Literals::default();
        while count.map_or(!r.is_empty(), |count| i < count) {
            let span = self
                .parse_entry(&mut r, first_key, layout, &mut literals)
                .map_err(|e| format!("entry {i}: {e}"))?;
            if let (0, Some(count)) = (i, count) {
                // A run's keys are mostly of one length: size the buffer once, rather than
                // growing it (and over-charging the read cache) as keys are rebuilt.
                let len = (span.key.1 - span.key.0) as usize;
                self.keys
                    .reserve_exact(len.saturating_mul(count).min(1 << 20));
            }
            self.spans.push(span);
            i += 1;
        }
        if !r.is_empty() {
            return Err("trailing bytes after the last entry".into());
        }
        Ok(())
    }

    /// The next entry of `r`; under a window (version 9) its value may name one of the
    /// block's `literals` so far.
    fn parse_entry(
        &mut self,
        r: &mut Reader,
        first_key: &[u8],
        layout: Layout,
        literals: &mut Literals,
    ) -> Result<Span, String> {
        match layout {
            Layout::V2 => {
                let tag = r.u8()?;
                let seq = r.varint()?;
                let (shared, rest) = (r.varint()?, r.bytes()?);
                let key = self.rebuild_key(shared, rest, first_key, seq)?;
                let value = Self::tagged_value(r, tag)?;
                Ok(Span { key, value, seq })
            }
            Layout::V3 | Layout::Window => {
                // The key is read before the sequence number its order check needs.
                let (shared, reference) = layout.shared(r.varint()?);
                let rest = r.bytes()?;
                let seq = r.varint()?;
                let key = self.rebuild_key(shared, rest, first_key, seq)?;
                let window = matches!(layout, Layout::Window).then_some((literals, reference));
                let value = read_value(r, window)?;
                Ok(Span { key, value, seq })
            }
        }
    }

    /// Appends to the key buffer the key made of `shared` bytes of the previous entry's key
    /// (of `first_key` for the first entry) and `rest`, checking that the entry, at `seq`,
    /// sorts after the previous one (key ascending, newest first).
    fn rebuild_key(
        &mut self,
        shared: u64,
        rest: &[u8],
        first_key: &[u8],
        seq: u64,
    ) -> Result<(u32, u32), String> {
        let prev = self.spans.last().map(|p| (Self::range(p.key), p.seq));
        let prev_len = prev.as_ref().map_or(first_key.len(), |(k, _)| k.len());
        // Bounded by the previous key, not by the bytes left: it names bytes already read.
        if shared > prev_len as u64 {
            return Err(format!("shares {shared} bytes with a shorter key"));
        }
        let shared = shared as usize;
        let start = self.keys.len();
        match prev {
            None => self.keys.extend_from_slice(&first_key[..shared]),
            Some((prev_key, prev_seq)) => {
                // Both keys start with the shared prefix: the rests order them, without
                // comparing the keys whole.
                let order = rest.cmp(&self.keys[prev_key.start + shared..prev_key.end]);
                if order == Ordering::Less || (order == Ordering::Equal && prev_seq <= seq) {
                    return Err("out of order (key ascending, newest first)".into());
                }
                self.keys
                    .extend_from_within(prev_key.start..prev_key.start + shared);
            }
        }
        self.keys.extend_from_slice(rest);
        Ok((start as u32, self.keys.len() as u32))
    }

    /// Versions 1 and 2: the value of an entry with `tag`, read from `r`.
    fn tagged_value(r: &mut Reader, tag: u8) -> Result<(u32, u32), String> {
        match tag {
            0 => Ok((NO_VALUE, NO_VALUE)),
            1 => {
                let len = r.len()?;
                Self::value_at(r, len)
            }
            t => Err(format!("unknown tag {t}")),
        }
    }

    /// The next `len` bytes of `r`, a value: where it lies in the payload.
    fn value_at(r: &mut Reader, len: usize) -> Result<(u32, u32), String> {
        r.take(len)?;
        let end = r.pos();
        Ok(((end - len) as u32, end as u32))
    }

    /// Version 1: whole keys, and an offset table before the count.
    fn parse_whole_keys(&mut self, data: &[u8], count: usize) -> Result<(), String> {
        let table = 4 * count;
        if table + 5 > data.len() {
            return Err("entry count too large".into());
        }
        let entries_end = data.len() - 4 - table;
        let offset = |i: usize| {
            let at = entries_end + 4 * i;
            u32_at(data, at) as usize
        };
        for i in 0..count {
            let (start, end) = (
                offset(i),
                if i + 1 < count {
                    offset(i + 1)
                } else {
                    entries_end
                },
            );
            if start >= end || end > entries_end || (i == 0 && start != 1) {
                return Err(format!(
                    "entry {i}: offsets {start}..{end} are out of place"
                ));
            }
            let span = self
                .parse_whole_key_entry(&data[..end], start)
                .map_err(|e| format!("entry {i}: {e}"))?;
            self.push(i, span)?;
        }
        Ok(())
    }

    /// The entry of a version 1 block from `start` to the end of `data`.
    fn parse_whole_key_entry(&mut self, data: &[u8], start: usize) -> Result<Span, String> {
        let mut r = Reader::new(data);
        r.take(start)?;
        let tag = r.u8()?;
        let seq = r.varint()?;
        let key = r.bytes()?;
        let at = self.keys.len();
        self.keys.extend_from_slice(key);
        let key = (at as u32, self.keys.len() as u32);
        let value = Self::tagged_value(&mut r, tag)?;
        if !r.is_empty() {
            return Err("trailing bytes".into());
        }
        Ok(Span { key, value, seq })
    }

    /// Appends entry `i`, which must come after the one before it.
    fn push(&mut self, i: usize, span: Span) -> Result<(), String> {
        if let Some(prev) = self.spans.last() {
            let prev_key = &self.keys[Self::range(prev.key)];
            let key = &self.keys[Self::range(span.key)];
            if (prev_key, std::cmp::Reverse(prev.seq)) >= (key, std::cmp::Reverse(span.seq)) {
                return Err(format!("entry {i} is out of order"));
            }
        }
        self.spans.push(span);
        Ok(())
    }

    fn range((start, end): (u32, u32)) -> std::ops::Range<usize> {
        start as usize..end as usize
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Bytes the block takes in memory (for the read cache's budget).
    pub fn memory(&self) -> usize {
        self.data.capacity()
            + self.keys.capacity()
            + self.spans.capacity() * std::mem::size_of::<Span>()
    }

    pub fn entry(&self, i: usize) -> EntryRef<'_> {
        let s = self.spans[i];
        let value = (s.value.0 != NO_VALUE).then(|| &self.data[Self::range(s.value)]);
        EntryRef {
            key: &self.keys[Self::range(s.key)],
            seq: s.seq,
            value,
        }
    }

    /// Whether lookups find entries by arithmetic (see `dense_from`).
    #[cfg(test)]
    pub fn is_dense(&self) -> bool {
        self.dense_from.is_some()
    }

    /// The index of the first entry whose key is at least `key`.
    pub fn seek(&self, key: &[u8]) -> usize {
        if let (Some(first), Ok(key)) = (self.dense_from, <[u8; 8]>::try_from(key)) {
            // 8-byte big-endian keys order as their integers do.
            let at = u64::from_be_bytes(key).saturating_sub(first);
            return at.min(self.spans.len() as u64) as usize;
        }
        if let Some(width) = self.stride {
            return self.seek_stride(width, key);
        }
        self.spans
            .partition_point(|s| self.keys[Self::range(s.key)].cmp(key) == Ordering::Less)
    }

    /// [`seek`](Self::seek) in a block whose keys are all `width` bytes (see `stride`).
    fn seek_stride(&self, width: usize, key: &[u8]) -> usize {
        // 8-byte keys (big-endian integers, most often) compare as integers, not by `memcmp`.
        if let (8, Ok(key)) = (width, <[u8; 8]>::try_from(key)) {
            return seek_integer(&self.keys, u64::from_be_bytes(key));
        }
        let (mut lo, mut hi) = (0, self.spans.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.keys[mid * width..(mid + 1) * width] < *key {
                true => lo = mid + 1,
                false => hi = mid,
            }
        }
        lo
    }

    /// [`get`](Self::get) on a block not parsed: reads the payload (starting `start` bytes
    /// into `data`, its checksum already verified) entry by entry up to the first key past
    /// `key` (see [`RawEntries`]): a point read that misses the read cache decodes half a
    /// block on average, and builds no parsed block. `Ok(None)` for a block version that
    /// needs parsing (versions 1 and 2).
    pub fn find(
        data: &[u8],
        start: usize,
        handle: Framing,
        key: &[u8],
        snapshot: u64,
    ) -> Result<Option<Found>, String> {
        if data.get(start).is_some_and(|&v| is_special(v)) {
            return Self::find_special(data, start, key, snapshot).map(Some);
        }
        let Some(mut entries) = RawEntries::new(data, start, handle)? else {
            return Ok(None);
        };
        while entries.advance()? {
            let e = entries.current();
            match e.key.cmp(key) {
                Ordering::Less => {}
                Ordering::Greater => return Ok(Some(Found::Absent)),
                Ordering::Equal if e.seq <= snapshot => {
                    return Ok(Some(Found::Version(e.seq, e.value.map(<[u8]>::to_vec))));
                }
                Ordering::Equal => {}
            }
        }
        Ok(Some(Found::MaybeNext))
    }

    /// [`find`](Self::find) in a specialized block: its special section looked up by
    /// `special::find`, then its versions section read up to the first key past `key`; the
    /// newest version at or below `snapshot` of the two wins (the special one reads as the
    /// block's floor).
    fn find_special(data: &[u8], start: usize, key: &[u8], snapshot: u64) -> Result<Found, String> {
        let special = find_in_special(data, start, key)?;
        let mut pending = special.version;
        let mut larger = special.larger;
        let mut entries = RawEntries::section(data, special.versions_at);
        while entries.advance()? {
            let e = entries.current();
            match e.key.cmp(key) {
                Ordering::Less => continue,
                Ordering::Greater => {
                    larger = true;
                    break;
                }
                Ordering::Equal => {}
            }
            // The special version comes before the older versions here.
            if let Some((floor, value)) = pending.take_if(|(floor, _)| *floor > e.seq) {
                if floor <= snapshot {
                    return Ok(Found::Version(floor, value.map(Cow::into_owned)));
                }
            }
            if e.seq <= snapshot {
                return Ok(Found::Version(e.seq, e.value.map(<[u8]>::to_vec)));
            }
        }
        if let Some((floor, value)) = pending.filter(|(floor, _)| *floor <= snapshot) {
            return Ok(Found::Version(floor, value.map(Cow::into_owned)));
        }
        Ok(if larger {
            Found::Absent
        } else {
            Found::MaybeNext
        })
    }

    /// [`get`](Self::get)'s answer as [`find`](Self::find) gives it, the value copied.
    pub fn found(&self, key: &[u8], snapshot: u64) -> Found {
        match self.get(key, snapshot) {
            Ok(e) => Found::Version(e.seq, e.value.map(<[u8]>::to_vec)),
            Err(false) => Found::Absent,
            Err(true) => Found::MaybeNext,
        }
    }

    /// The newest version of `key` at or below `snapshot` in this block; `Err(true)` when there
    /// is none here but older versions may continue in the next block.
    pub fn get(&self, key: &[u8], snapshot: u64) -> Result<EntryRef<'_>, bool> {
        for i in self.seek(key)..self.len() {
            let e = self.entry(i);
            if e.key != key {
                return Err(false);
            }
            if e.seq <= snapshot {
                return Ok(e);
            }
        }
        Err(true)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(e: &Entry) -> EntryRef<'_> {
        EntryRef {
            key: &e.key,
            seq: e.seq,
            value: e.value.as_deref(),
        }
    }

    fn e(key: &str, seq: u64, value: Option<&str>) -> Entry {
        Entry {
            key: key.as_bytes().to_vec(),
            seq,
            value: value.map(|v| v.as_bytes().to_vec()),
        }
    }

    /// What the index handle of a block of `entries` says.
    fn framing(entries: &[Entry]) -> Framing<'_> {
        Framing {
            first_key: entries.first().map_or(&[][..], |x| &x.key),
            entries: entries.len() as u64,
        }
    }

    #[test]
    fn blocks_round_trip_and_search() {
        let entries = vec![
            e("a", 5, Some("a5")),
            e("a", 2, None),
            e("b", 9, Some("")),
            e("d", 1, Some("dd")),
        ];
        let mut w = BlockWriter::default();
        for x in &entries {
            w.add(r(x));
        }
        let size = w.size();
        let block = w.finish();
        // Read behind an extent header's room, as blocks read from the disk are.
        let header = stitch_zone::EXTENT_HEADER_LEN;
        let mut framed = vec![0u8; header];
        framed.extend_from_slice(block.payload());
        assert_eq!(
            (
                framed.len() - header,
                block.first_key,
                block.last_key,
                block.entries
            ),
            (size, b"a".to_vec(), b"d".to_vec(), 4)
        );
        let b = Block::parse_at(framed, header, framing(&entries)).unwrap();
        let back: Vec<Entry> = (0..b.len()).map(|i| b.entry(i).to_entry()).collect();
        assert_eq!(back, entries);
        assert_eq!(b.get(b"a", 10).unwrap().value, Some(&b"a5"[..]));
        assert_eq!(b.get(b"a", 3).unwrap().value, None, "the tombstone at 2");
        assert_eq!(b.get(b"a", 1), Err(false));
        assert_eq!(b.get(b"c", 10), Err(false));
        assert_eq!(
            b.get(b"d", 0),
            Err(true),
            "older versions of the last key may follow"
        );
        assert_eq!(b.seek(b"c"), 3);
    }

    /// A version 1 payload of `entries` (whole keys, an offset table).
    pub(crate) fn whole_keys_payload(entries: &[Entry]) -> Vec<u8> {
        let mut body = vec![BLOCK_VERSION_WHOLE_KEYS];
        let mut offsets = Vec::new();
        for x in entries {
            offsets.push(body.len() as u32);
            body.push(x.value.is_some() as u8);
            put_varint(&mut body, x.seq);
            put_bytes(&mut body, &x.key);
            if let Some(v) = &x.value {
                put_bytes(&mut body, v);
            }
        }
        for off in &offsets {
            body.extend_from_slice(&off.to_le_bytes());
        }
        body.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        body
    }

    /// A version 2 payload of `entries` (tagged entries, the count at the end).
    pub(crate) fn counted_payload(entries: &[Entry]) -> Vec<u8> {
        let mut body = vec![BLOCK_VERSION_COUNTED];
        let mut prev: &[u8] = &[];
        for x in entries {
            let shared = shared_prefix(prev, &x.key);
            body.push(x.value.is_some() as u8);
            put_varint(&mut body, x.seq);
            put_varint(&mut body, shared as u64);
            put_bytes(&mut body, &x.key[shared..]);
            if let Some(v) = &x.value {
                put_bytes(&mut body, v);
            }
            prev = &x.key;
        }
        body.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        body
    }

    /// A version 3 payload of `entries`: version 4's, with the first key left to the index.
    pub(crate) fn elided_payload(entries: &[Entry]) -> Vec<u8> {
        let mut body = vec![BLOCK_VERSION_ELIDED];
        let mut prev: &[u8] = &[];
        for (i, x) in entries.iter().enumerate() {
            let shared = if i == 0 {
                x.key.len()
            } else {
                shared_prefix(prev, &x.key)
            };
            put_varint(&mut body, shared as u64);
            put_bytes(&mut body, &x.key[shared..]);
            put_varint(&mut body, x.seq);
            match &x.value {
                Some(v) => put_bytes_plus_one(&mut body, v),
                None => put_varint(&mut body, 0),
            }
            prev = &x.key;
        }
        body
    }

    fn put_bytes_plus_one(out: &mut Vec<u8>, v: &[u8]) {
        put_varint(out, v.len() as u64 + 1);
        out.extend_from_slice(v);
    }

    #[test]
    fn version_3_blocks_are_read_through_their_handle_and_version_4_alone() {
        let entries = vec![
            e("apple", 7, Some("red")),
            e("apple", 3, None),
            e("apricot", 2, Some("")),
        ];
        let old = elided_payload(&entries);
        assert_eq!(parsed(old.clone(), &entries), entries);
        // Without its handle's first key a version 3 block cannot be read.
        assert!(Block::parse_standalone(old.clone(), 0).is_err());
        let wrong = Framing {
            first_key: b"b",
            entries: 3,
        };
        assert!(Block::parse(old, wrong).is_err());
        // Version 4 holds its first key: read alone, entries up to the payload's end.
        let new = written(&entries);
        assert_eq!(new[0], BLOCK_VERSION);
        let b = Block::parse_standalone(new.clone(), 0).unwrap();
        let alone: Vec<Entry> = (0..b.len()).map(|i| b.entry(i).to_entry()).collect();
        assert_eq!(alone, entries);
        assert_eq!(parsed(new.clone(), &entries), entries);
        // Every truncation of it fails, read alone or through the handle.
        for cut in 1..new.len() {
            let short = new[..cut].to_vec();
            let alone = Block::parse_standalone(short.clone(), 0);
            assert!(
                alone.is_err() || alone.unwrap().len() < entries.len(),
                "cut {cut}"
            );
            assert!(Block::parse(short, framing(&entries)).is_err(), "cut {cut}");
        }
    }

    /// The payload of a block of `entries`.
    fn written(entries: &[Entry]) -> Vec<u8> {
        windowed(entries, None)
    }

    /// The payload of a block of `entries` under a window of `size` values (version 9), or
    /// none (version 4).
    fn windowed(entries: &[Entry], size: Option<u32>) -> Vec<u8> {
        let mut w = BlockWriter::with_window(size);
        for x in entries {
            w.add(r(x));
        }
        w.finish().payload().to_vec()
    }

    #[test]
    fn a_window_stores_a_repeated_value_once_while_it_is_among_the_last_stored_whole() {
        let value = |v: &str| Some(v.repeat(20).into_bytes());
        let entries: Vec<Entry> = ["a", "b", "a", "c", "a", "b"]
            .iter()
            .enumerate()
            .map(|(i, v)| Entry {
                key: format!("key{i}").into_bytes(),
                seq: 9,
                value: value(v),
            })
            .collect();
        let linear = written(&entries);
        // A reference (one byte) in place of a 20-byte value and its length byte saves 20.
        // Window 64: a, b, then "a" 1 back, c, "a" 2 back, "b" 1 back.
        // Window 2: a, b, then "a" 1 back, c; the last "a" and "b" are 2 back: stored again.
        // Window 1: only the latest literal is in reach, and no value repeats its neighbour.
        for (size, saved) in [(64, 3 * 20), (2, 20), (1, 0)] {
            let payload = windowed(&entries, Some(size));
            assert_eq!(payload[0], WINDOW_VERSION);
            assert_eq!(linear.len() - payload.len(), saved, "window {size}");
            assert_eq!(parsed(payload.clone(), &entries), entries);
            let alone = Block::parse_standalone(payload, 0).unwrap();
            let back: Vec<Entry> = (0..alone.len())
                .map(|i| alone.entry(i).to_entry())
                .collect();
            assert_eq!(back, entries);
        }
        // A reference past the literals before it is damage, not a panic: the second entry
        // made to refer 5 back.
        let mut bad = windowed(&entries[..3], Some(64));
        let at = bad.len() - 1;
        assert_eq!(bad[at], 1, "the last entry refers 1 back");
        bad[at] = 5;
        let e = Block::parse(bad.clone(), framing(&entries[..3])).unwrap_err();
        assert!(
            e.contains("entry 2: a reference 5 values back, past the block's 2"),
            "{e}"
        );
        assert!(Block::find(&bad, 0, framing(&entries[..3]), b"key2", 9).is_err());
    }

    fn parsed(payload: Vec<u8>, entries: &[Entry]) -> Vec<Entry> {
        let b = Block::parse(payload, framing(entries)).unwrap();
        (0..b.len()).map(|i| b.entry(i).to_entry()).collect()
    }

    #[test]
    fn blocks_of_earlier_versions_are_still_read() {
        let entries = vec![
            e("apple", 7, Some("red")),
            e("apple", 3, None),
            e("apricot", 2, Some("")),
        ];
        for old in [whole_keys_payload(&entries), counted_payload(&entries)] {
            assert_eq!(parsed(old.clone(), &entries), entries);
            // They carry their own first key and count: a handle's are not needed.
            let b = Block::parse(
                old,
                Framing {
                    first_key: b"",
                    entries: 0,
                },
            )
            .unwrap();
            assert_eq!(b.get(b"apple", 5).unwrap().value, None);
            assert_eq!(b.seek(b"apricot"), 2);
        }
    }

    #[test]
    fn shared_prefixes_make_small_value_blocks_smaller() {
        // Keys as db_bench makes them: 16 decimal digits.
        let entries: Vec<Entry> = (0..100)
            .map(|i| e(&format!("{:016}", 1_000_000 + i * 37), 1_000 + i, Some("v")))
            .collect();
        let (new, old) = (written(&entries), whole_keys_payload(&entries));
        assert_eq!(parsed(new.clone(), &entries), entries);
        // At least 11 shared key bytes, the 4-byte offset and the tag saved per entry after
        // the first.
        assert!(
            new.len() + 99 * 15 <= old.len(),
            "{} bytes against {}",
            new.len(),
            old.len()
        );
    }

    #[test]
    fn a_large_value_block_adds_little_to_its_entry() {
        // One 4 KiB value and a 16-byte key: the version byte, the shared-prefix length (0),
        // the key and its length, 3 bytes of sequence number and 2 of value length.
        let entry = Entry {
            key: b"0000000000123456".to_vec(),
            seq: 200_000,
            value: Some(vec![7; 4096]),
        };
        let payload = written(std::slice::from_ref(&entry));
        assert_eq!(payload.len(), 4096 + 8 + 16);
        assert_eq!(
            counted_payload(std::slice::from_ref(&entry)).len(),
            4096 + 29
        );
        assert_eq!(parsed(payload, std::slice::from_ref(&entry)), vec![entry]);
    }

    #[test]
    fn a_long_first_value_is_copied_to_its_offset_within_a_cache_line() {
        for shift in 0..CACHE_LINE {
            let source = vec![9u8; ALIGNED_VALUE + CACHE_LINE];
            let value = &source[shift..shift + ALIGNED_VALUE];
            let mut w = BlockWriter::default();
            w.add(EntryRef {
                key: b"key",
                seq: 1,
                value: Some(value),
            });
            let block = w.finish();
            let payload = block.payload();
            let copy = &payload[payload.len() - ALIGNED_VALUE..];
            assert_eq!(copy, value);
            assert_eq!(
                copy.as_ptr() as usize % CACHE_LINE,
                value.as_ptr() as usize % CACHE_LINE
            );
        }
    }

    #[test]
    fn a_block_disagreeing_with_its_handle_is_an_error() {
        let entries = vec![e("key1", 3, Some("a")), e("key2", 2, Some("b"))];
        // Version 4 reads its first key from itself; the run's check of a block against its
        // handle compares it.
        let own = Block::parse(
            written(&entries),
            Framing {
                first_key: b"kez1",
                entries: 2,
            },
        )
        .unwrap();
        assert_eq!(own.entry(0).key, b"key1");
        // Version 3 takes its first key from the handle.
        let payload = elided_payload(&entries);
        let wrong = |first_key: &'static [u8], n: u64| {
            Block::parse(
                payload.clone(),
                Framing {
                    first_key,
                    entries: n,
                },
            )
        };
        assert!(wrong(b"key1", 2).is_ok());
        assert!(wrong(b"key1", 1).unwrap_err().contains("trailing bytes"));
        assert!(wrong(b"key1", 3).unwrap_err().contains("entry 2"));
        assert!(wrong(b"key", 2).unwrap_err().contains("shares 4 bytes"));
        assert!(wrong(b"key1", 1 << 40).unwrap_err().contains("too large"));
        // A different first key of the same length reads as that key; the run's check of a
        // block against its handle then compares the last key, and the order check the rest.
        let b = wrong(b"kez1", 2).unwrap();
        assert_eq!(b.entry(0).key, b"kez1");
    }

    fn entries() -> impl Strategy<Value = Vec<Entry>> {
        let key = prop::collection::vec(prop::sample::select(vec![0u8, 1, b'a', b'b', 0xff]), 0..6);
        // Some long enough to be aligned (see `BlockWriter::align_value`), some of a few
        // that repeat (which a window refers back to).
        let value = prop::option::of(prop_oneof![
            4 => prop::collection::vec(any::<u8>(), 0..200),
            1 => prop::collection::vec(any::<u8>(), ALIGNED_VALUE..ALIGNED_VALUE + 100),
            3 => (0u8..4).prop_map(|v| vec![v; usize::from(v) * 7]),
        ]);
        prop::collection::vec((key, 0..5u64, value), 1..60).prop_map(|mut v| {
            v.sort_by(|a, b| (&a.0, std::cmp::Reverse(a.1)).cmp(&(&b.0, std::cmp::Reverse(b.1))));
            v.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
            v.into_iter()
                .map(|(key, seq, value)| Entry { key, seq, value })
                .collect()
        })
    }

    proptest! {
        /// The search that starts where evenly spread keys would put a key finds what a
        /// binary search finds, for keys spread evenly, bunched or far apart.
        #[test]
        fn integer_keys_are_found_as_a_binary_search_finds_them(
            keys in prop::collection::btree_set(
                prop_oneof![0..1000u64, any::<u64>(), (u64::MAX - 50)..=u64::MAX],
                0..300,
            ),
            probes in prop::collection::vec(
                prop_oneof![0..1000u64, any::<u64>(), (u64::MAX - 50)..=u64::MAX],
                1..100,
            ),
        ) {
            let bytes: Vec<u8> = keys.iter().flat_map(|k| k.to_be_bytes()).collect();
            for p in probes.into_iter().chain(keys.iter().copied()) {
                let want = keys.iter().filter(|&&k| k < p).count();
                prop_assert_eq!(seek_integer(&bytes, p), want, "{}", p);
            }
        }

        /// Any sorted entries (empty keys, keys that are prefixes of others) come back as they
        /// went in, from any version; every seek lands where a search of the list does.
        #[test]
        fn any_entries_round_trip(
            entries in entries(),
            probe in prop::collection::vec(any::<u8>(), 0..4),
            header in prop::collection::vec(any::<u8>(), 0..16),
        ) {
            let handle = framing(&entries);
            let payloads = [
                written(&entries),
                windowed(&entries, Some(2)),
                windowed(&entries, Some(64)),
                counted_payload(&entries),
                whole_keys_payload(&entries),
            ];
            for payload in payloads {
                // Alone, and behind a header (as read with its extent's).
                let framed = [header.as_slice(), &payload].concat();
                for b in [Block::parse(payload, handle).unwrap(), Block::parse_at(framed, header.len(), handle).unwrap()] {
                    let back: Vec<Entry> = (0..b.len()).map(|i| b.entry(i).to_entry()).collect();
                    prop_assert_eq!(&back, &entries);
                    prop_assert_eq!(b.seek(&probe), entries.partition_point(|x| x.key < probe));
                }
            }
        }

        /// A block decoded as read holds the entries parsing finds, and a lookup in its raw
        /// bytes answers as the parsed block does, for every key in it and between, at every
        /// snapshot, from both versions it reads.
        #[test]
        fn raw_lookups_answer_as_parsed_blocks(
            entries in entries(),
            probe in prop::collection::vec(any::<u8>(), 0..4),
            header in prop::collection::vec(any::<u8>(), 0..16),
        ) {
            let handle = framing(&entries);
            let mut probes: Vec<Vec<u8>> = entries.iter().map(|x| x.key.clone()).collect();
            probes.push(probe);
            let payloads = [
                written(&entries),
                elided_payload(&entries),
                windowed(&entries, Some(2)),
                windowed(&entries, Some(64)),
            ];
            for payload in payloads {
                let framed = [header.as_slice(), &payload].concat();
                let parsed = Block::parse_at(framed.clone(), header.len(), handle).unwrap();
                let mut raw = RawEntries::new(&framed, header.len(), handle).unwrap().unwrap();
                let mut decoded = Vec::new();
                while raw.advance().unwrap() {
                    decoded.push(raw.current().to_entry());
                }
                prop_assert_eq!(&decoded, &entries);
                for key in &probes {
                    for snapshot in 0..6 {
                        prop_assert_eq!(
                            Block::find(&framed, header.len(), handle, key, snapshot).unwrap(),
                            Some(parsed.found(key, snapshot))
                        );
                    }
                }
            }
        }
    }

    proptest! {
        /// Any bytes after a version byte of 4 or 9 (the versions read without an index
        /// handle) are an error or a block, read every way, never a panic.
        #[test]
        fn random_bytes_are_errors_not_panics(
            window in any::<bool>(),
            bytes in prop::collection::vec(
                prop_oneof![4 => any::<u8>(), 1 => 0u8..4, 1 => Just(b'k')],
                0..200,
            ),
            entries in 0u64..20,
            key in prop::collection::vec(Just(b'k'), 0..3),
        ) {
            let version = if window { WINDOW_VERSION } else { BLOCK_VERSION };
            let payload = [&[version][..], &bytes].concat();
            let handle = Framing { first_key: &key, entries };
            let _ = Block::find(&payload, 0, handle, &key, u64::MAX);
            if let Ok(Some(mut raw)) = RawEntries::new(&payload, 0, handle) {
                while let Ok(true) = raw.advance() {
                    let _ = raw.current();
                }
            }
            for b in [Block::parse(payload.clone(), handle), Block::parse_standalone(payload, 0)]
                .into_iter()
                .flatten()
            {
                for j in 0..b.len() {
                    let _ = b.get(b.entry(j).key, u64::MAX);
                }
            }
        }
    }

    #[test]
    fn damaged_blocks_are_errors_not_panics() {
        let entries: Vec<Entry> = (0..20)
            .map(|i| {
                e(
                    &format!("key{i:02}"),
                    1 + i,
                    (i % 3 != 0).then_some("value"),
                )
            })
            .collect();
        let handle = framing(&entries);
        for payload in [
            written(&entries),
            windowed(&entries, Some(4)),
            counted_payload(&entries),
            whole_keys_payload(&entries),
        ] {
            for cut in 0..payload.len() {
                let _ = Block::parse(payload[..cut].to_vec(), handle);
                let _ = Block::parse_at(payload[..cut].to_vec(), 3, handle);
                let _ = Block::find(&payload[..cut], 0, handle, b"key10", 10);
            }
            for i in 0..payload.len() {
                let mut bad = payload.clone();
                bad[i] ^= 0x5a;
                let _ = Block::find(&bad, 0, handle, b"key19", u64::MAX);
                let _ = Block::parse_standalone(bad.clone(), 0);
                if let Ok(b) = Block::parse(bad, handle) {
                    for j in 0..b.len() {
                        let _ = b.entry(j);
                    }
                }
            }
        }
        let swapped = [e("b", 1, None), e("a", 1, None)];
        assert!(
            Block::parse(written(&swapped), framing(&swapped)).is_err(),
            "order is checked"
        );
    }
}
