//! Damage found in a store, as `check` reports it and `repair` salvages around it: what the
//! damaged structure is, where, and what is wrong; and the keys it put out of reach.

use crate::Error;
use std::fmt;
use std::ops::Bound;
use stitch_wal::WalError;
use stitch_zone::ZoneError;

/// One damaged structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// What the damaged bytes are ("superblock slot", "manifest", "run index", "run index
    /// mirror", "run filter", "run block", "log", "store file" ...).
    pub what: String,
    /// Where they are.
    pub place: String,
    /// What is wrong with them.
    pub detail: String,
}

impl Damage {
    pub(crate) fn new(what: &str, place: impl fmt::Display, detail: impl fmt::Display) -> Damage {
        Damage {
            what: what.to_string(),
            place: place.to_string(),
            detail: detail.to_string(),
        }
    }

    /// The damage an error names (an error that names none, an I/O error say, is reported
    /// as the structure `what` at `place` could not be read).
    pub(crate) fn from_error(e: &Error, what: &str, place: impl fmt::Display) -> Damage {
        match e {
            Error::Corrupt {
                what,
                place,
                detail,
            }
            | Error::Zone(ZoneError::Corrupt {
                what,
                place,
                detail,
            })
            | Error::Log(WalError::Corrupt {
                what,
                place,
                detail,
            }) => Damage::new(what, place, detail),
            Error::Log(WalError::Damaged(end)) => Damage::new("log", end.at, end),
            other => Damage::new(what, place, format!("cannot be read: {other}")),
        }
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "damaged {} at {}: {}",
            self.what, self.place, self.detail
        )
    }
}

/// Keys of a table that damage put out of reach: every version in `start..end`, or as far
/// as the damaged structure says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostKeys {
    /// The table (or `snapshot NAME, table T`).
    pub table: String,
    /// The run that held them.
    pub run: u64,
    /// Where the lost keys start.
    pub start: Bound<Vec<u8>>,
    /// Where they end.
    pub end: Bound<Vec<u8>>,
    /// How many entries (key versions) were lost, when known.
    pub entries: Option<u64>,
    /// Why ("its block 7 is damaged").
    pub why: String,
}

impl fmt::Display for LostKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = |k: &[u8]| k.escape_ascii().to_string();
        let start = match &self.start {
            Bound::Included(k) => format!("[{}", key(k)),
            Bound::Excluded(k) => format!("({}", key(k)),
            Bound::Unbounded => "(start".into(),
        };
        let end = match &self.end {
            Bound::Included(k) => format!("{}]", key(k)),
            Bound::Excluded(k) => format!("{})", key(k)),
            Bound::Unbounded => "end)".into(),
        };
        let entries = self
            .entries
            .map_or("an unknown number of".to_string(), |n| n.to_string());
        write!(
            f,
            "table {}: keys {start} .. {end} ({entries} entries) of run {}: {}",
            self.table, self.run, self.why
        )
    }
}

/// What a salvaging open found: every damaged structure and the keys lost with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Salvage {
    /// Every damaged structure, in the order found.
    pub damage: Vec<Damage>,
    /// The keys the damage put out of reach.
    pub lost: Vec<LostKeys>,
}
