//! [`Handles`]: what a tree keeps of the files open in it and of the deleted inodes its
//! caller still holds.

use crate::schema::Attr;
use std::collections::HashMap;

/// The open files of one tree, and (with [`crate::FsOptions::keep_deleted`]) the last
/// attributes of the inodes it deleted that the caller still holds.
#[derive(Default)]
pub struct Handles {
    pub(crate) open: HashMap<u64, u32>,
    pub(crate) deleted: HashMap<u64, Attr>,
}

impl Handles {
    /// Whether `ino` is open.
    pub(crate) fn is_open(&self, ino: u64) -> bool {
        self.open.contains_key(&ino)
    }

    /// Counts one more open of `ino`.
    pub(crate) fn opened(&mut self, ino: u64) {
        *self.open.entry(ino).or_insert(0) += 1;
    }

    /// Counts one close of `ino`: whether it was its last.
    pub(crate) fn closed(&mut self, ino: u64) -> bool {
        match self.open.get_mut(&ino) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                self.open.remove(&ino);
                true
            }
            None => false,
        }
    }

    /// The inodes open now.
    pub(crate) fn open_inodes(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.open.iter().map(|(&i, &n)| (i, n))
    }

    /// Keeps the last attributes of inodes an operation deleted (see
    /// [`crate::FsOptions::keep_deleted`]).
    pub(crate) fn keep_deleted(&mut self, deleted: Vec<Attr>) {
        self.deleted.extend(deleted.into_iter().map(|a| (a.ino, a)));
    }
}
