//! Concurrency control for transactions: the [`Oracle`] that validates optimistic transactions
//! against the commits made since their snapshots, and the [`LockManager`] of key and range
//! locks that locking (serializable) transactions and writes through the database take.

mod locks;
mod oracle;

pub(crate) use locks::{HeldLocks, LockError, LockManager, LockMode};
pub(crate) use oracle::{Oracle, TableKey};
