//! The page store's checkpoint record: which zones hold the page file, where the log to
//! recover from starts, and the undo information of transactions live at the checkpoint
//! (so the log before it can be dropped). Stored as an extent of kind
//! [`CHECKPOINT_KIND`] named by the superblock's root.

use crate::change::Cursor;
use crate::{PageError, Result};
use stitch_wal::{LogPosition, Lsn, OpId, TxnId};
use stitch_zone::{ExtentKind, ZoneId};

/// The extent kind of a page store checkpoint record (kind 7, the page store's).
pub const CHECKPOINT_KIND: ExtentKind = ExtentKind(7);
const MAGIC: [u8; 4] = *b"SPCK";
/// The checkpoint record's format version.
pub const CHECKPOINT_VERSION: u16 = 1;

/// A logged change a transaction has not committed: what rolling it back needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoEntry {
    /// The transaction.
    pub txn: TxnId,
    /// The record's LSN (compensation records name it).
    pub lsn: Lsn,
    /// The record's operation.
    pub op: OpId,
    /// The record's payload.
    pub payload: Vec<u8>,
}

/// A decoded checkpoint record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The epoch of the log to recover.
    pub epoch: u64,
    /// Where recovery starts reading it.
    pub log_start: LogPosition,
    /// The page file's zones, in page order.
    pub zones: Vec<ZoneId>,
    /// Undo entries of transactions live at the checkpoint whose records lie before
    /// `log_start`, in LSN order.
    pub pending: Vec<UndoEntry>,
}

impl Checkpoint {
    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&CHECKPOINT_VERSION.to_le_bytes());
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(&self.log_start.zone.to_le_bytes());
        out.extend_from_slice(&self.log_start.offset.to_le_bytes());
        out.extend_from_slice(&self.log_start.lsn.to_le_bytes());
        out.extend_from_slice(&(self.zones.len() as u32).to_le_bytes());
        for z in &self.zones {
            out.extend_from_slice(&z.to_le_bytes());
        }
        out.extend_from_slice(&(self.pending.len() as u32).to_le_bytes());
        for e in &self.pending {
            out.extend_from_slice(&e.txn.to_le_bytes());
            out.extend_from_slice(&e.lsn.to_le_bytes());
            out.extend_from_slice(&e.op.to_le_bytes());
            out.extend_from_slice(&(e.payload.len() as u32).to_le_bytes());
            out.extend_from_slice(&e.payload);
        }
        out
    }

    /// Decodes a record.
    pub fn decode(bytes: &[u8]) -> Result<Checkpoint> {
        let mut c = Cursor::new(bytes, "page store checkpoint");
        if c.take(4)? != MAGIC {
            return Err(c.bad("bad magic"));
        }
        let version = c.u16()?;
        if version != CHECKPOINT_VERSION {
            return Err(PageError::Corrupt {
                what: "page store checkpoint",
                detail: format!(
                    "unsupported version {version} (this build reads {CHECKPOINT_VERSION})"
                ),
            });
        }
        let epoch = c.u64()?;
        let log_start = LogPosition {
            zone: c.u32()?,
            offset: c.u32()?,
            lsn: c.u64()?,
        };
        let zones = (0..c.u32()?).map(|_| c.u32()).collect::<Result<_>>()?;
        let n = c.u32()?;
        let mut pending = Vec::new();
        for _ in 0..n {
            let txn = c.u64()?;
            let lsn = c.u64()?;
            let op = c.u16()?;
            let len = c.u32()? as usize;
            pending.push(UndoEntry {
                txn,
                lsn,
                op,
                payload: c.take(len)?.to_vec(),
            });
        }
        if !c.rest().is_empty() {
            return Err(c.bad(format!("{} bytes past its end", c.rest().len())));
        }
        Ok(Checkpoint {
            epoch,
            log_start,
            zones,
            pending,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let cp = Checkpoint {
            epoch: 3,
            log_start: LogPosition {
                zone: 4,
                offset: 64,
                lsn: 10,
            },
            zones: vec![2, 5],
            pending: vec![UndoEntry {
                txn: 7,
                lsn: 9,
                op: 40,
                payload: vec![1, 2, 3],
            }],
        };
        let bytes = cp.encode();
        assert_eq!(Checkpoint::decode(&bytes).unwrap(), cp);
        assert!(Checkpoint::decode(&bytes[..bytes.len() - 1]).is_err());
    }
}
