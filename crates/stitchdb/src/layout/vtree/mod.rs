//! The VT-tree layout: a memtable, then levels of sorted runs merged by stitching.

pub(crate) mod dtable;
pub(crate) mod memtable;
pub(crate) mod run;
