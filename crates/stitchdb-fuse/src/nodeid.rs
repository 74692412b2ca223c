//! FUSE node ids: `nodeid = (view << 48) | ino`. View 0 is the mainline file system, whose
//! node id is its inode number (inode numbers stay below 2^48: `stitchdb_fs::MAX_INO`); view
//! [`CONTROL`] is the control directory `/.stitch` (`control`); the views between are kept
//! for the trees of transactions and snapshots, which answer `ESTALE` until they exist.

/// Where the view starts in a node id.
const VIEW_SHIFT: u32 = 48;

/// The mainline file system.
pub const MAINLINE: u16 = 0;

/// The control namespace `/.stitch`.
pub const CONTROL: u16 = 0xFFFF;

/// A node id's view and inode number within it.
pub fn split(nodeid: u64) -> (u16, u64) {
    ((nodeid >> VIEW_SHIFT) as u16, nodeid & stitchdb_fs::MAX_INO)
}

/// The node id of `ino` in `view` (`ino` must be at most `MAX_INO`).
pub fn join(view: u16, ino: u64) -> u64 {
    (u64::from(view) << VIEW_SHIFT) | (ino & stitchdb_fs::MAX_INO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_id_splits_into_what_it_was_joined_from() {
        for (view, ino) in [
            (MAINLINE, 1),
            (MAINLINE, stitchdb_fs::MAX_INO),
            (CONTROL, 3),
            (7, 9),
        ] {
            assert_eq!(split(join(view, ino)), (view, ino));
        }
        assert_eq!(
            join(MAINLINE, 42),
            42,
            "mainline node ids are inode numbers"
        );
    }
}
