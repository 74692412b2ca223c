//! Reading a value as a stream, one chunk in memory at a time.

use super::chunks::read_chunk;
use super::Found;
use crate::db::Inner;
use std::io::Read;
use std::sync::Arc;
use stitch_zone::EXTENT_HEADER_LEN;

/// A reader over one value as it was when the reader was made (its chunks are kept while it
/// lives). A damaged chunk is an `io::Error` whose inner error names it.
pub struct ValueReader {
    inner: Arc<Inner>,
    found: Found,
    pos: u64,
    /// The chunk read last, and its index.
    buf: Option<(usize, Vec<u8>)>,
}

impl ValueReader {
    pub(crate) fn new(inner: Arc<Inner>, found: Found) -> ValueReader {
        ValueReader {
            inner,
            found,
            pos: 0,
            buf: None,
        }
    }

    /// The value's length in bytes.
    pub fn len(&self) -> u64 {
        self.found.len()
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Read for ValueReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.found.len() || out.is_empty() {
            return Ok(0);
        }
        let n = match &self.found {
            Found::Inline(v) => {
                let rest = &v[self.pos as usize..];
                let n = rest.len().min(out.len());
                out[..n].copy_from_slice(&rest[..n]);
                n
            }
            Found::Large(r, _) => {
                let i = (self.pos / r.chunk_len) as usize;
                if self.buf.as_ref().is_none_or(|(at, _)| *at != i) {
                    let bytes =
                        read_chunk(&self.inner.zones, r, i).map_err(std::io::Error::other)?;
                    self.buf = Some((i, bytes));
                }
                let chunk = (self.buf.as_ref()).map_or(&[][..], |(_, b)| &b[EXTENT_HEADER_LEN..]);
                let rest = &chunk[(self.pos - r.chunk_range(i).start) as usize..];
                let n = rest.len().min(out.len());
                out[..n].copy_from_slice(&rest[..n]);
                n
            }
        };
        self.pos += n as u64;
        Ok(n)
    }
}
