//! TSV lines: `key<TAB>value`, with the escapes described in [`super`].

/// Appends `bytes` to `out` escaped: the result holds no TAB, LF or CR and is printable UTF-8.
pub fn escape_into(bytes: &[u8], out: &mut String) {
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                // Other control characters (C0, DEL, C1) would garble a terminal: write their
                // UTF-8 bytes in hex.
                c if c.is_control() => hex_escape(c.encode_utf8(&mut [0; 4]).as_bytes(), out),
                c => out.push(c),
            }
        }
        hex_escape(chunk.invalid(), out);
    }
}

/// `bytes` escaped, for showing a key or value in a message.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    escape_into(bytes, &mut out);
    out
}

fn hex_escape(bytes: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push_str("\\x");
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0xf)] as char);
    }
}

/// Decodes the escapes of one field. Bytes other than `\` are taken as they are, so a
/// hand-written file need not escape anything but backslashes, TABs and line breaks.
pub fn unescape(field: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let b = field[i];
        i += 1;
        if b != b'\\' {
            out.push(b);
            continue;
        }
        let Some(&kind) = field.get(i) else {
            return Err("a lone \\ at the end (write a backslash as \\\\)".into());
        };
        i += 1;
        match kind {
            b'\\' => out.push(b'\\'),
            b't' => out.push(b'\t'),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b'x' => {
                let digits = field.get(i..i + 2).unwrap_or(&field[i..]);
                match parse_hex_byte(digits) {
                    Some(byte) => out.push(byte),
                    None => {
                        return Err(format!(
                            "invalid escape \"\\x{}\" (\\x takes two hex digits)",
                            escape(digits)
                        ))
                    }
                }
                i += 2;
            }
            _ => {
                return Err(format!(
                    "invalid escape \"\\{}\"; the escapes are \\\\ \\t \\n \\r \\xHH",
                    escape(&field[i - 1..next_char_end(field, i - 1)])
                ))
            }
        }
    }
    Ok(out)
}

fn parse_hex_byte(digits: &[u8]) -> Option<u8> {
    let [hi, lo] = digits else { return None };
    let hex = |d: u8| (d as char).to_digit(16);
    Some((hex(*hi)? * 16 + hex(*lo)?) as u8)
}

/// Where the character starting at `start` ends, so an error can show it whole.
fn next_char_end(bytes: &[u8], start: usize) -> usize {
    let rest = &bytes[start..];
    let len = rest
        .utf8_chunks()
        .next()
        .map_or(1, |c| c.valid().chars().next().map_or(1, char::len_utf8));
    start + len
}

/// Writes one `key<TAB>value` line, newline included.
pub fn encode_line(key: &[u8], value: &[u8], out: &mut String) {
    escape_into(key, out);
    out.push('\t');
    escape_into(value, out);
    out.push('\n');
}

/// Decodes one line (without its line break) into a key and a value.
pub fn decode_line(line: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut fields = line.split(|&b| b == b'\t');
    let (Some(key), Some(value), None) = (fields.next(), fields.next(), fields.next()) else {
        let tabs = line.iter().filter(|&&b| b == b'\t').count();
        return Err(match tabs {
            0 => "no TAB between key and value".into(),
            n => format!("{n} TABs, expected one (write a TAB inside a key or value as \\t)"),
        });
    };
    let key = unescape(key).map_err(|e| format!("key: {e}"))?;
    let value = unescape(value).map_err(|e| format!("value: {e}"))?;
    Ok((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn escapes_separators_controls_and_invalid_utf8() {
        assert_eq!(escape(b"a\tb\nc\rd\\e"), "a\\tb\\nc\\rd\\\\e");
        assert_eq!(escape(b"\x00\x7f\xff"), "\\x00\\x7f\\xff");
        // U+0085 (a C1 control) is escaped byte by byte; other non-ASCII text stays readable.
        assert_eq!(escape("é\u{85}日".as_bytes()), "é\\xc2\\x85日");
        assert_eq!(escape(b""), "");
    }

    #[test]
    fn unescapes_every_escape_and_passes_raw_bytes() {
        assert_eq!(
            unescape(b"a\\tb\\nc\\rd\\\\e\\x41\\xfF").unwrap(),
            b"a\tb\nc\rd\\eA\xff"
        );
        assert_eq!(unescape(b"raw \x01 \xfe").unwrap(), b"raw \x01 \xfe");
    }

    #[test]
    fn invalid_escapes_are_errors_that_show_them() {
        assert!(unescape(b"a\\q").unwrap_err().contains("\"\\q\""));
        assert!(unescape(b"a\\").unwrap_err().contains("lone"));
        assert!(unescape(b"\\x4").unwrap_err().contains("\"\\x4\""));
        assert!(unescape(b"\\xzz").unwrap_err().contains("\"\\xzz\""));
        assert!(unescape("\\é".as_bytes()).unwrap_err().contains("\"\\é\""));
    }

    #[test]
    fn lines_need_exactly_one_tab() {
        assert_eq!(
            decode_line(b"k\tv").unwrap(),
            (b"k".to_vec(), b"v".to_vec())
        );
        assert_eq!(decode_line(b"\t").unwrap(), (Vec::new(), Vec::new()));
        assert!(decode_line(b"kv").unwrap_err().contains("no TAB"));
        assert!(decode_line(b"k\tv\tw").unwrap_err().contains("2 TABs"));
        assert!(decode_line(b"k\tv\\").unwrap_err().starts_with("value:"));
    }

    proptest! {
        #[test]
        fn escaping_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let escaped = escape(&bytes);
            prop_assert!(!escaped.contains(['\t', '\n', '\r']));
            prop_assert_eq!(unescape(escaped.as_bytes()).unwrap(), bytes);
        }

        #[test]
        fn text_round_trips(text in "\\PC*") {
            prop_assert_eq!(unescape(escape(text.as_bytes()).as_bytes()).unwrap(), text.as_bytes());
        }

        #[test]
        fn lines_round_trip(key in proptest::collection::vec(any::<u8>(), 0..32),
                            value in proptest::collection::vec(any::<u8>(), 0..32)) {
            let mut line = String::new();
            encode_line(&key, &value, &mut line);
            let body = line.strip_suffix('\n').unwrap();
            prop_assert_eq!(decode_line(body.as_bytes()).unwrap(), (key, value));
        }
    }
}
