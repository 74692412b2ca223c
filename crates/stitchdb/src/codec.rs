//! Little helpers for the byte formats: LEB128 varints and a bounds-checked reader that turns
//! truncation into an error instead of a panic.

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Reads a byte string; every method fails with a description rather than panicking.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| format!("truncated: {n} bytes wanted at byte {}", self.pos))?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    #[inline]
    pub fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    #[inline]
    pub fn varint(&mut self) -> Result<u64, String> {
        // Most varints in blocks (tags, lengths, shared prefixes) are one byte.
        if let Some(&b) = self.bytes.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        // The rest (sequence numbers, mostly) straight from the slice: no bounds check, and no
        // error built, per byte.
        let mut v = 0u64;
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        for (i, &b) in rest.iter().take(10).enumerate() {
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                self.pos += i + 1;
                return Ok(v);
            }
        }
        Err(self.bad_varint(rest.len()))
    }

    #[cold]
    fn bad_varint(&self, left: usize) -> String {
        match left {
            ..10 => format!("truncated: a varint runs past the end at byte {}", self.pos),
            _ => format!("varint too long at byte {}", self.pos),
        }
    }

    /// A varint used as a length or count: bounded by what is left, so a damaged length cannot
    /// make the caller allocate gigabytes.
    #[inline]
    pub fn len(&mut self) -> Result<usize, String> {
        let n = self.varint()?;
        if n > (self.bytes.len() - self.pos) as u64 {
            return Err(format!("length {n} at byte {} runs past the end", self.pos));
        }
        Ok(n as usize)
    }

    #[inline]
    pub fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.len()?;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_truncation_is_an_error() {
        let values = [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        let mut out = Vec::new();
        for v in values {
            put_varint(&mut out, v);
        }
        let mut r = Reader::new(&out);
        for v in values {
            assert_eq!(r.varint().unwrap(), v);
        }
        assert!(r.is_empty());
        assert!(r.varint().is_err());
        let mut r = Reader::new(&[0xff, 0xff]);
        assert!(r.varint().is_err());
        let mut r = Reader::new(&[200, 1, 0]);
        assert!(r.bytes().is_err(), "a length past the end is refused");
    }
}
