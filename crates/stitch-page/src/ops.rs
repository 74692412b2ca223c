//! The page store's own log operations: their ids, and what their records carry. Below both
//! the store, which logs them, and recovery, which redoes them; what the structures over the
//! store register of their own is reached through the crate root ([`crate::logical_undo`]).

use crate::change::{decode_changes, Images};
use crate::Result;
use stitch_wal::OpId;

/// Log op 32: physical page writes (after-images redone, before-images undone): the
/// changes of nested top actions (page allocation, bucket splits).
pub const OP_PAGE_WRITE: OpId = 32;
/// Log op 33: a compensation record (ARIES's CLR): the changes that undid the record whose
/// LSN it names. Redone, never undone.
pub const OP_COMPENSATE: OpId = 33;
/// Log op 34: a transaction's commit (flag COMMIT); a nested top action's too.
pub const OP_COMMIT: OpId = 34;
/// Log op 35: a transaction's abort (flag ABORT), logged once its rollback is: recovery
/// undoes nothing more of it.
pub const OP_ROLLED_BACK: OpId = 35;

/// The images `op`'s records carry: before-images only where undo is physical.
pub(crate) fn images_of(op: OpId) -> Images {
    if op == OP_PAGE_WRITE {
        Images::Both
    } else {
        Images::After
    }
}

/// What rollback keeps of a record's payload: a logical operation's undo needs none of its
/// page changes (they are dropped, leaving an empty list before the logical part); a
/// physical write's needs its before-images.
pub(crate) fn undo_payload(op: OpId, payload: Vec<u8>) -> Result<Vec<u8>> {
    if crate::logical_undo(op).is_none() {
        return Ok(payload);
    }
    let (_, logical) = decode_changes(&payload, Images::After)?;
    let mut out = 0u16.to_le_bytes().to_vec();
    out.extend_from_slice(logical);
    Ok(out)
}
