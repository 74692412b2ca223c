//! The operations registry (Stasis): each layer logs its own operations, registered by id with
//! a redo function and, for operations that change state before their transaction commits, an
//! undo function.
//!
//! # Contract for redo and undo functions
//!
//! Recovery writes nothing (no compensation records), so a crash during recovery just means
//! running it again from the same log: a record may be redone, or undone, more than once, and
//! a record whose effect already reached the upper layer's durable state is redone again.
//! Redo and undo must therefore be idempotent *given the state they act on*: physical writes
//! (after-images, before-images) are naturally so; logical operations must check their own
//! state (a page LSN, a key's version) to tell whether the change is already there.

use crate::{LogRecord, OpId, Result, WalError};
use std::collections::HashMap;
use std::fmt;

/// A redo or undo function. The error message is reported with the record's lsn and op.
pub type OpFn = Box<dyn Fn(&LogRecord) -> std::result::Result<(), String> + Send + Sync>;

/// Op id 0, reserved: a record recovery skips (a bare COMMIT or ABORT marker, say).
pub const OP_NOOP: OpId = 0;

struct Operation {
    name: String,
    redo: OpFn,
    undo: Option<OpFn>,
}

/// The registered operations, by id.
#[derive(Default)]
pub struct OpRegistry {
    ops: HashMap<OpId, Operation>,
}

impl fmt::Debug for OpRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ops: Vec<_> = self
            .ops
            .iter()
            .map(|(id, op)| (*id, op.name.as_str(), op.undo.is_some()))
            .collect();
        ops.sort_unstable();
        f.debug_struct("OpRegistry")
            .field("ops (id, name, has undo)", &ops)
            .finish()
    }
}

impl OpRegistry {
    /// A registry with no operation.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers operation `op`. With `undo`, recovery redoes it for every transaction and
    /// undoes it for losers (ARIES repeats history). Without, it is *redo-only*: applied at
    /// commit by the upper layer, so recovery redoes it only for winners.
    pub fn register(
        &mut self,
        op: OpId,
        name: impl Into<String>,
        redo: OpFn,
        undo: Option<OpFn>,
    ) -> Result<()> {
        if op == OP_NOOP {
            return Err(WalError::ReservedOp { op });
        }
        if let Some(existing) = self.ops.get(&op) {
            return Err(WalError::DuplicateOp {
                op,
                name: existing.name.clone(),
            });
        }
        self.ops.insert(
            op,
            Operation {
                name: name.into(),
                redo,
                undo,
            },
        );
        Ok(())
    }

    /// The name `op` was registered under, if it was.
    pub fn name(&self, op: OpId) -> Option<&str> {
        self.ops.get(&op).map(|o| o.name.as_str())
    }

    /// `Some(true)` for a registered op with an undo function, `None` for an unknown one.
    pub fn has_undo(&self, op: OpId) -> Option<bool> {
        self.ops.get(&op).map(|o| o.undo.is_some())
    }

    /// Operations registered.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether no operation is registered.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub(crate) fn redo(&self, record: &LogRecord) -> Result<()> {
        let op = self.get(record)?;
        (op.redo)(record).map_err(|message| WalError::Redo {
            lsn: record.lsn,
            txn: record.txn,
            op: record.op,
            name: op.name.clone(),
            message,
        })
    }

    /// Runs the undo function; a no-op for redo-only operations.
    pub(crate) fn undo(&self, record: &LogRecord) -> Result<()> {
        let op = self.get(record)?;
        let Some(undo) = &op.undo else { return Ok(()) };
        undo(record).map_err(|message| WalError::Undo {
            lsn: record.lsn,
            txn: record.txn,
            op: record.op,
            name: op.name.clone(),
            message,
        })
    }

    fn get(&self, record: &LogRecord) -> Result<&Operation> {
        self.ops.get(&record.op).ok_or(WalError::UnknownOp {
            lsn: record.lsn,
            txn: record.txn,
            op: record.op,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> OpFn {
        Box::new(|_| Ok(()))
    }

    #[test]
    fn registering_twice_or_op_zero_fails() {
        let mut r = OpRegistry::new();
        r.register(1, "put", ok(), None).unwrap();
        assert_eq!(
            r.register(1, "other", ok(), Some(ok())),
            Err(WalError::DuplicateOp {
                op: 1,
                name: "put".into()
            })
        );
        assert_eq!(
            r.register(OP_NOOP, "noop", ok(), None),
            Err(WalError::ReservedOp { op: 0 })
        );
        assert_eq!(r.name(1), Some("put"));
        assert_eq!(r.has_undo(1), Some(false));
        assert_eq!(r.has_undo(2), None);
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn errors_name_the_record() {
        let mut r = OpRegistry::new();
        r.register(3, "write", Box::new(|_| Err("disk on fire".into())), None)
            .unwrap();
        let rec = LogRecord {
            lsn: 9,
            txn: 2,
            op: 3,
            flags: crate::Flags::NONE,
            payload: vec![],
        };
        let e = r.redo(&rec).unwrap_err().to_string();
        assert!(
            e.contains("lsn 9") && e.contains("\"write\"") && e.contains("disk on fire"),
            "{e}"
        );
        let unknown = LogRecord { op: 4, ..rec };
        assert_eq!(
            r.redo(&unknown),
            Err(WalError::UnknownOp {
                lsn: 9,
                txn: 2,
                op: 4
            })
        );
    }
}
