//! A row cTable's row: every column's value packed into one blob (docs/format.md, "Column
//! tables"). No checksum: the run blocks and log records that hold it have their own.

use crate::codec::{put_varint, Reader};

/// The blob's format version; a reader refuses another.
const VERSION: u8 = 1;

/// Packs a row: the version, the column count, then each column as a varint tag (0: no
/// value; else the value's length plus one) and the value's bytes.
pub fn encode(values: &[Option<&[u8]>]) -> Vec<u8> {
    let len: usize = values.iter().map(|v| v.map_or(1, |v| v.len() + 2)).sum();
    let mut out = Vec::with_capacity(2 + len);
    out.push(VERSION);
    put_varint(&mut out, values.len() as u64);
    for value in values {
        match value {
            None => put_varint(&mut out, 0),
            Some(v) => {
                put_varint(&mut out, v.len() as u64 + 1);
                out.extend_from_slice(v);
            }
        }
    }
    out
}

/// The values of the columns `wanted` picks (`wanted[i]`: whether column `i` is read), in
/// column order, from a blob of a row of `width` columns; the others are skipped unread.
/// `Err` says what is wrong with the blob.
pub fn decode(blob: &[u8], width: usize, wanted: &[bool]) -> Result<Vec<Option<Vec<u8>>>, String> {
    let mut r = Reader::new(blob);
    let version = r.u8()?;
    if version != VERSION {
        return Err(format!(
            "row format version {version}, this build reads {VERSION}"
        ));
    }
    let count = r.varint()?;
    if count != width as u64 {
        return Err(format!("{count} columns, the table has {width}"));
    }
    let mut out = Vec::with_capacity(wanted.iter().filter(|&&w| w).count());
    for i in 0..width {
        let want = wanted.get(i) == Some(&true);
        let tag = r.varint()?;
        let value = match tag {
            0 => None,
            n => {
                let len = usize::try_from(n - 1).map_err(|_| format!("value length {n}"))?;
                Some(r.take(len)?)
            }
        };
        if want {
            out.push(value.map(<[u8]>::to_vec));
        }
    }
    if !r.is_empty() {
        return Err(format!(
            "{} bytes after the last column",
            blob.len() - r.pos()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{decode, encode};

    #[test]
    fn a_row_decodes_to_the_columns_asked_for() {
        let blob = encode(&[Some(b"a"), None, Some(b""), Some(b"xyz")]);
        let all = [true; 4];
        let got = decode(&blob, 4, &all).unwrap();
        assert_eq!(
            got,
            vec![
                Some(b"a".to_vec()),
                None,
                Some(Vec::new()),
                Some(b"xyz".to_vec())
            ]
        );
        let some = decode(&blob, 4, &[false, true, false, true]).unwrap();
        assert_eq!(some, vec![None, Some(b"xyz".to_vec())]);
    }

    #[test]
    fn damaged_rows_are_errors_not_panics() {
        let blob = encode(&[Some(b"abc"), None]);
        assert!(decode(&blob, 3, &[true; 3]).is_err(), "wrong width");
        for cut in 0..blob.len() {
            assert!(decode(&blob[..cut], 2, &[true; 2]).is_err(), "cut at {cut}");
        }
        let mut long = blob.clone();
        long.push(0);
        assert!(decode(&long, 2, &[true; 2]).is_err(), "trailing byte");
        let mut version = blob;
        version[0] = 2;
        assert!(decode(&version, 2, &[true; 2]).is_err(), "version");
        // A length past the end, and a huge varint.
        assert!(decode(&[1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f], 1, &[true]).is_err());
    }

    proptest::proptest! {
        /// Any bytes decode to a row or an error, never a panic.
        #[test]
        fn any_bytes_are_a_row_or_an_error(
            blob in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            width in 0usize..5,
            wanted in proptest::collection::vec(proptest::prelude::any::<bool>(), 0..5),
        ) {
            let _ = decode(&blob, width, &wanted);
            // Past the version byte, where a damaged row of this build would fail.
            let _ = decode(&[&[1], &blob[..]].concat(), width, &wanted);
        }
    }
}
