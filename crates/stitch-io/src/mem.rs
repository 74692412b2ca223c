use crate::error::{check_range, IoError, IoErrorKind, IoOp, Result};
use crate::Disk;
use parking_lot::RwLock;

/// A disk in memory. Every write is immediately "durable"; `sync` does nothing.
#[derive(Debug, Default)]
pub struct MemDisk {
    bytes: RwLock<Vec<u8>>,
}

impl MemDisk {
    /// A zeroed disk of `len` bytes, all allocated up front (use [`crate::SimDisk`] for large
    /// sparse disks).
    pub fn new(len: u64) -> Self {
        MemDisk {
            bytes: RwLock::new(vec![0; len as usize]),
        }
    }
}

impl Disk for MemDisk {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let bytes = self.bytes.read();
        check_range(
            self,
            IoOp::Read,
            offset,
            buf.len() as u64,
            bytes.len() as u64,
        )?;
        buf.copy_from_slice(&bytes[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let mut bytes = self.bytes.write();
        check_range(
            self,
            IoOp::Write,
            offset,
            data.len() as u64,
            bytes.len() as u64,
        )?;
        bytes[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }

    fn len(&self) -> u64 {
        self.bytes.read().len() as u64
    }

    /// Fails with `NoSpace` when the memory cannot be had, rather than aborting.
    fn grow(&self, new_len: u64) -> Result<()> {
        let mut bytes = self.bytes.write();
        let len = bytes.len() as u64;
        if new_len <= len {
            return Ok(());
        }
        let no_space = || {
            IoError::new(
                IoOp::Grow,
                self.describe(),
                len,
                new_len - len,
                IoErrorKind::NoSpace,
            )
        };
        let additional = usize::try_from(new_len - len).map_err(|_| no_space())?;
        bytes
            .try_reserve_exact(additional)
            .map_err(|_| no_space())?;
        bytes.resize(new_len as usize, 0);
        Ok(())
    }

    fn punch_hole(&self, offset: u64, len: u64) -> Result<()> {
        let mut bytes = self.bytes.write();
        check_range(self, IoOp::PunchHole, offset, len, bytes.len() as u64)?;
        bytes[offset as usize..(offset + len) as usize].fill(0);
        Ok(())
    }

    fn describe(&self) -> String {
        "memdisk".to_string()
    }
}
