//! The page store's checkpoint record: which zones hold the page file, where the log to
//! recover from starts, and the undo information of transactions live at the checkpoint
//! (so the log before it can be dropped). Stored as extents of kind [`CHECKPOINT_KIND`]:
//! the record, named by the superblock's root, and the undo information in as many
//! chunks as it needs (each at most an extent's largest payload), which the record lists.

use crate::change::Cursor;
use crate::{PageError, Result};
use stitch_patch::PatchId;
use stitch_wal::{LogPosition, Lsn, OpId, TxnId};
use stitch_zone::{ExtentAddr, ExtentKind, Stream, ZoneId, ZoneStore};

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
    /// Writes the record and its undo chunks after `deps`; returns the record's address,
    /// every extent written (record last) and the patches writing them.
    pub fn write(
        &self,
        zones: &ZoneStore,
        deps: &[PatchId],
    ) -> Result<(ExtentAddr, Vec<ExtentAddr>, Vec<PatchId>)> {
        let undo = self.encode_pending();
        let mut written = Vec::new();
        let mut patches = Vec::new();
        for chunk in undo.chunks(zones.max_payload().max(1)) {
            let (addr, patch) = zones.append_to(Stream::Manifest, CHECKPOINT_KIND, chunk, deps)?;
            written.push(addr);
            patches.push(patch);
        }
        let (addr, patch) = zones.append_to(
            Stream::Manifest,
            CHECKPOINT_KIND,
            &self.encode(&written),
            deps,
        )?;
        written.push(addr);
        patches.push(patch);
        Ok((addr, written, patches))
    }

    /// Reads the record at `addr` and its undo chunks; returns it and every extent read.
    pub fn read(zones: &ZoneStore, addr: ExtentAddr) -> Result<(Checkpoint, Vec<ExtentAddr>)> {
        let (mut cp, mut chunks) = Checkpoint::decode(&zones.read(addr, CHECKPOINT_KIND)?)?;
        let mut undo = Vec::new();
        for &chunk in &chunks {
            undo.extend_from_slice(&zones.read(chunk, CHECKPOINT_KIND)?);
        }
        cp.pending = decode_pending(&undo)?;
        chunks.push(addr);
        Ok((cp, chunks))
    }

    fn encode_pending(&self) -> Vec<u8> {
        let mut out = Vec::new();
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

    /// The record's bytes, naming the undo chunks `chunks` (`pending` is not in them).
    pub fn encode(&self, chunks: &[ExtentAddr]) -> Vec<u8> {
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
        out.extend_from_slice(&(chunks.len() as u32).to_le_bytes());
        for c in chunks {
            c.encode(&mut out);
        }
        out
    }

    /// Decodes a record (its `pending` empty) and the undo chunks it names.
    pub fn decode(bytes: &[u8]) -> Result<(Checkpoint, Vec<ExtentAddr>)> {
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
        let chunks = (0..c.u32()?)
            .map(|_| {
                let at = c.take(ExtentAddr::ENCODED_LEN)?;
                ExtentAddr::decode(at).ok_or_else(|| c.bad("bad undo chunk address"))
            })
            .collect::<Result<_>>()?;
        if !c.rest().is_empty() {
            return Err(c.bad(format!("{} bytes past its end", c.rest().len())));
        }
        let cp = Checkpoint {
            epoch,
            log_start,
            zones,
            pending: Vec::new(),
        };
        Ok((cp, chunks))
    }
}

fn decode_pending(bytes: &[u8]) -> Result<Vec<UndoEntry>> {
    let mut c = Cursor::new(bytes, "page store checkpoint's undo information");
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
    Ok(pending)
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
        let chunk = ExtentAddr {
            zone: 3,
            offset: 16,
            len: 100,
        };
        let bytes = cp.encode(&[chunk]);
        let (back, chunks) = Checkpoint::decode(&bytes).unwrap();
        assert_eq!(chunks, vec![chunk]);
        assert_eq!(back.epoch, cp.epoch);
        assert!(Checkpoint::decode(&bytes[..bytes.len() - 1]).is_err());
        assert_eq!(decode_pending(&cp.encode_pending()).unwrap(), cp.pending);
    }
}
