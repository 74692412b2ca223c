//! JSON lines: one `{"key": "...", "value": "..."}` object per line.

use serde::{Deserialize, Serialize};

#[derive(Serialize)]
struct RecordOut<'a> {
    key: &'a str,
    value: &'a str,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordIn {
    key: String,
    value: String,
}

/// Appends one JSON line, newline included. Fails, naming the field, if the key or value is
/// not UTF-8: JSON strings cannot hold arbitrary bytes.
pub fn encode_line(key: &[u8], value: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let utf8 = |field: &'static str, bytes| {
        std::str::from_utf8(bytes).map_err(|_| {
            format!(
                "the {field} of key \"{}\" is not UTF-8, which JSON lines cannot hold; \
                 export with --format tsv instead",
                super::tsv::escape(key)
            )
        })
    };
    let record = RecordOut {
        key: utf8("key", key)?,
        value: utf8("value", value)?,
    };
    serde_json::to_writer(&mut *out, &record).map_err(|e| e.to_string())?;
    out.push(b'\n');
    Ok(())
}

/// Decodes one line (without its line break) into a key and a value.
pub fn decode_line(line: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
    match serde_json::from_slice::<RecordIn>(line) {
        Ok(record) => Ok((record.key.into_bytes(), record.value.into_bytes())),
        Err(e) => Err(describe(&e)),
    }
}

/// serde_json ends its messages with "at line 1 column N"; the line is always 1 here (we parse
/// one line at a time), so keep only the column.
fn describe(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let location = format!(" at line {} column {}", e.line(), e.column());
    match message.strip_suffix(&location) {
        Some(what) => format!("column {}: {what}", e.column()),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_text_with_quotes_and_line_breaks() {
        let mut out = Vec::new();
        encode_line(
            "k\"1\"".as_bytes(),
            "line\nbreak\ttab é".as_bytes(),
            &mut out,
        )
        .unwrap();
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
        let line = out.strip_suffix(b"\n").unwrap();
        let (key, value) = decode_line(line).unwrap();
        assert_eq!(key, "k\"1\"".as_bytes());
        assert_eq!(value, "line\nbreak\ttab é".as_bytes());
    }

    #[test]
    fn non_utf8_is_refused_with_a_hint() {
        let err = encode_line(b"k", b"\xff", &mut Vec::new()).unwrap_err();
        assert!(
            err.contains("value of key \"k\"") && err.contains("--format tsv"),
            "{err}"
        );
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        assert!(decode_line(br#"{"key": "k"}"#)
            .unwrap_err()
            .contains("missing field `value`"));
        assert!(decode_line(br#"{"key": "k", "value": 1}"#)
            .unwrap_err()
            .contains("invalid type"));
        assert!(decode_line(br#"{"key": "k", "value": "v", "x": 1}"#)
            .unwrap_err()
            .contains("unknown field"));
        let err = decode_line(br#"{"key": "k""#).unwrap_err();
        assert!(err.starts_with("column ") && !err.contains("line"), "{err}");
    }
}
