use std::fmt;

/// Everything that can go wrong in StitchDB, each saying what and where. More kinds may be
/// added: match with a wildcard arm.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The disk failed.
    #[error(transparent)]
    Io(#[from] stitch_io::IoError),
    /// The block cache (the patch layer) failed.
    #[error(transparent)]
    Patch(#[from] stitch_patch::PatchError),
    /// The zone store failed (or found an extent damaged).
    #[error(transparent)]
    Zone(#[from] stitch_zone::ZoneError),
    /// The write-ahead log failed (its error is the source).
    #[error("write-ahead log: {0}")]
    Log(#[source] stitch_wal::WalError),
    /// A stored structure failed its checks.
    #[error("corrupt {what} at {place}: {detail}")]
    Corrupt {
        /// What the damaged bytes were ("manifest", "run block" ...).
        what: &'static str,
        /// Where they are.
        place: String,
        /// What is wrong with them.
        detail: String,
    },
    /// No table has this name (or number, `#n`).
    #[error("no table named {0:?}")]
    NoSuchTable(String),
    /// `create_table` of a name in use.
    #[error("a table named {0:?} already exists")]
    TableExists(String),
    /// A table name that is empty or too long (the name, and why).
    #[error("invalid table name {0:?}: {1}")]
    BadTableName(String, &'static str),
    /// A layout string that is not valid: the whole message (it names the layout and the
    /// module at fault).
    #[error("{0}")]
    BadLayout(String),
    /// A write the table's layout cannot hold (a `fixed(size=8)` table without `exception`
    /// given a 9-byte value): the table, its layout, and why.
    #[error("table {table:?} (layout {layout}) cannot hold this write: {why}")]
    LayoutRejects {
        /// The table.
        table: String,
        /// Its layout, as `stitchdb tables` shows it.
        layout: String,
        /// What its format cannot hold.
        why: String,
    },
    /// A store whose tables use a layout this build does not know: refused, never read with
    /// another layout.
    #[error("table {table:?} has layout {layout:?}, which this build cannot read: {why}")]
    UnknownLayout {
        /// The table.
        table: String,
        /// Its layout as stored.
        layout: String,
        /// Why this build refuses it.
        why: String,
    },
    /// A key or value over its size limit.
    #[error("{what} of {len} bytes is over the limit of {limit} bytes")]
    TooLarge {
        /// "key" or "value".
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit it is over.
        limit: usize,
    },
    /// A large value could not be written as asked (its source ended early, say).
    #[error("large value: {0}")]
    LargeValue(String),
    /// A write to a store opened read-only, or turned read-only by a failed write (why).
    #[error("the store is read-only: {0}")]
    ReadOnly(String),
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
    /// A patchgroup operation broke Featherstitch's rules (or named no group).
    #[error(transparent)]
    PatchGroup(#[from] stitch_patch::PatchGroupError),
    /// Options that cannot work together, saying which.
    #[error("invalid option: {0}")]
    Config(String),
    /// No named snapshot has this name.
    #[error("no snapshot named {0:?}")]
    NoSuchSnapshot(String),
    /// `snapshot` with a name in use.
    #[error("a snapshot named {0:?} already exists")]
    SnapshotExists(String),
    /// A snapshot name that is empty or too long (the name, and why).
    #[error("invalid snapshot name {0:?}: {1}")]
    BadSnapshotName(String, &'static str),
    #[error(
        "transaction conflict: key {} of table {table:?}, {what} by this transaction, was \
         changed by commit {commit} after its snapshot {snapshot}; retry the transaction",
        key.escape_ascii()
    )]
    /// An optimistic transaction's commit found a key it used changed since its snapshot.
    Conflict {
        /// The key's table.
        table: String,
        /// The key.
        key: Vec<u8>,
        /// How the transaction used the key: "written", "read" or "scanned".
        what: &'static str,
        /// The transaction's snapshot.
        snapshot: u64,
        /// The commit that changed the key.
        commit: u64,
    },
    #[error(
        "deadlock: transaction {victim} (the youngest in the wait cycle {cycle:?}) was aborted \
         waiting for key {} of table {table:?}; retry the transaction",
        key.escape_ascii()
    )]
    /// A locking transaction was chosen to break a cycle of transactions waiting for locks.
    Deadlock {
        /// The table of the key the victim asked for.
        table: String,
        /// The key the victim asked for; for a range, its start key (empty when unbounded).
        key: Vec<u8>,
        /// The transaction aborted to break the cycle: the youngest in it.
        victim: u64,
        /// The transactions waiting for one another, each for the next and the last for the
        /// first.
        cycle: Vec<u64>,
    },
    #[error(
        "lock wait timeout: gave up on key {} of table {table:?} after {waited_ms} ms; retry \
         the transaction",
        key.escape_ascii()
    )]
    /// A locking transaction waited for a lock longer than `Options::lock_timeout`.
    LockTimeout {
        /// The table of the key waited for.
        table: String,
        /// The key waited for; for a range, its start key (empty when unbounded).
        key: Vec<u8>,
        /// How long it waited.
        waited_ms: u64,
    },
    /// No column table (cTable) has this name.
    #[error("no column table named {0:?}")]
    NoSuchCTable(String),
    /// Creating a column table whose name is in use with another definition.
    #[error("a column table named {0:?} already exists")]
    CTableExists(String),
    /// A column table's definition, or a row, update or projection that does not fit its
    /// columns (a bad name, a duplicate or unknown column, a row of the wrong width): the
    /// whole message. Nothing was created or written.
    #[error("{0}")]
    BadColumns(String),
    /// A value a column's layout cannot hold: the whole row write was refused.
    #[error("column {column:?} of column table {ctable:?} (layout {layout}) cannot hold this value: {why}")]
    ColumnRejects {
        /// The column table.
        ctable: String,
        /// The column.
        column: String,
        /// The column's layout.
        layout: String,
        /// What its format cannot hold.
        why: String,
    },
}

impl Error {
    /// Whether the store or its device is full: the failed write itself, or a later write
    /// refused because a write failed for want of space (the store turned read-only then).
    /// A file system answers these with `ENOSPC`.
    pub fn is_no_space(&self) -> bool {
        if self
            .io_error()
            .is_some_and(|e| e.kind == stitch_io::IoErrorKind::NoSpace)
        {
            return true;
        }
        match self {
            Error::Zone(stitch_zone::ZoneError::NoSpace(_))
            | Error::Log(stitch_wal::WalError::Zone(stitch_zone::ZoneError::NoSpace(_))) => true,
            // A failed log, cache or store keeps only the failure's text.
            Error::Log(_)
            | Error::Patch(stitch_patch::PatchError::Failed(_))
            | Error::ReadOnly(_) => self.to_string().contains("no space"),
            _ => false,
        }
    }

    /// Whether the store found no free zone to write into: taking a zone failed (the store
    /// reached its size limit, or the device or file system would not grow it) before
    /// anything was written. Unlike other write failures, this leaves the log, the block
    /// cache and the zone store as they were.
    pub fn is_out_of_zones(&self) -> bool {
        matches!(
            self,
            Error::Zone(stitch_zone::ZoneError::NoSpace(_))
                | Error::Log(stitch_wal::WalError::Zone(stitch_zone::ZoneError::NoSpace(
                    _
                )))
        )
    }

    /// The failed disk operation underneath this error, through the layers that wrap it, if
    /// one is what failed: its [`IoErrorKind`](stitch_io::IoErrorKind) tells a missing file, a
    /// refused permission or a held lock apart without reading the message.
    pub fn io_error(&self) -> Option<&stitch_io::IoError> {
        match self {
            Error::Io(e) => Some(e),
            Error::Zone(e) => zone_io_error(e),
            Error::Patch(e) => patch_io_error(e),
            Error::Log(e) => wal_io_error(e),
            _ => None,
        }
    }

    /// Whether this error says the store's bytes are damaged, or are not a StitchDB store at
    /// all: a failed checksum or structure check at any layer.
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Corrupt { .. } => true,
            Error::Zone(e) => zone_is_corruption(e),
            Error::Log(e) => wal_is_corruption(e),
            _ => false,
        }
    }

    /// Adds what the damaged bytes were to a corruption found by a lower layer, which knows
    /// only where they are ("corrupt run block at table t run 4 block 7, extent zone 3 ...").
    pub(crate) fn within(self, what: &'static str, place: impl fmt::Display) -> Error {
        match self {
            Error::Zone(stitch_zone::ZoneError::Corrupt {
                place: inner,
                detail,
                ..
            })
            | Error::Corrupt {
                place: inner,
                detail,
                ..
            } => Error::Corrupt {
                what,
                place: format!("{place}, {inner}"),
                detail,
            },
            other => other,
        }
    }

    /// Adds to a corruption's place where the structure sits (its table, say), keeping what
    /// the structure is: a damaged run filter stays a "run filter".
    pub(crate) fn placed_in(self, outer: impl fmt::Display) -> Error {
        match self {
            Error::Corrupt {
                what,
                place,
                detail,
            } => Error::Corrupt {
                what,
                place: format!("{outer}, {place}"),
                detail,
            },
            other => other,
        }
    }

    pub(crate) fn corrupt(
        what: &'static str,
        place: impl fmt::Display,
        detail: impl fmt::Display,
    ) -> Error {
        Error::Corrupt {
            what,
            place: place.to_string(),
            detail: detail.to_string(),
        }
    }
}

fn zone_io_error(e: &stitch_zone::ZoneError) -> Option<&stitch_io::IoError> {
    match e {
        stitch_zone::ZoneError::Io(e) => Some(e),
        stitch_zone::ZoneError::Patch(e) => patch_io_error(e),
        _ => None,
    }
}

fn patch_io_error(e: &stitch_patch::PatchError) -> Option<&stitch_io::IoError> {
    match e {
        stitch_patch::PatchError::Io(e) => Some(e),
        _ => None,
    }
}

fn wal_io_error(e: &stitch_wal::WalError) -> Option<&stitch_io::IoError> {
    match e {
        stitch_wal::WalError::Zone(e) => zone_io_error(e),
        stitch_wal::WalError::Patch(e) => patch_io_error(e),
        stitch_wal::WalError::Failed(e) => wal_io_error(e),
        _ => None,
    }
}

fn zone_is_corruption(e: &stitch_zone::ZoneError) -> bool {
    matches!(
        e,
        stitch_zone::ZoneError::Corrupt { .. } | stitch_zone::ZoneError::NotAStore(_)
    )
}

fn wal_is_corruption(e: &stitch_wal::WalError) -> bool {
    match e {
        stitch_wal::WalError::Corrupt { .. } | stitch_wal::WalError::Damaged(_) => true,
        stitch_wal::WalError::Zone(e) => zone_is_corruption(e),
        stitch_wal::WalError::Failed(e) => wal_is_corruption(e),
        _ => false,
    }
}

/// A result whose error is StitchDB's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disk_error_and_corruption_are_found_through_every_layer() {
        use stitch_io::{IoError, IoErrorKind, IoOp};
        let io = IoError::new(IoOp::Open, "file s", 0, 0, IoErrorKind::PermissionDenied);
        let zone = stitch_zone::ZoneError::Io(io.clone());
        let patch = stitch_patch::PatchError::Io(io.clone());
        let wrapped = [
            Error::Io(io.clone()),
            Error::Zone(zone.clone()),
            Error::Patch(patch.clone()),
            Error::Zone(stitch_zone::ZoneError::Patch(patch.clone())),
            Error::Log(stitch_wal::WalError::Zone(zone)),
            Error::Log(stitch_wal::WalError::Failed(Box::new(
                stitch_wal::WalError::Patch(patch),
            ))),
        ];
        for e in wrapped {
            assert_eq!(e.io_error(), Some(&io), "{e:?}");
            assert!(!e.is_corruption(), "{e:?}");
        }
        assert_eq!(Error::Closed.io_error(), None);

        let corrupt = [
            Error::corrupt("manifest", "zone 1", "bad checksum"),
            Error::Zone(stitch_zone::ZoneError::NotAStore("no magic".into())),
            Error::Log(stitch_wal::WalError::Failed(Box::new(
                stitch_wal::WalError::Corrupt {
                    what: "log record",
                    place: "zone 2".into(),
                    detail: "bad checksum".into(),
                },
            ))),
        ];
        for e in corrupt {
            assert!(e.is_corruption(), "{e:?}");
            assert_eq!(e.io_error(), None, "{e:?}");
        }
        assert!(!Error::Closed.is_corruption());
    }

    #[test]
    fn a_log_error_keeps_its_source_and_its_message() {
        let wal = stitch_wal::WalError::Invalid("no such segment".into());
        let e = Error::Log(wal.clone());
        assert_eq!(
            e.to_string(),
            "write-ahead log: invalid log request: no such segment"
        );
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source, Some(wal.to_string()));
    }
}
