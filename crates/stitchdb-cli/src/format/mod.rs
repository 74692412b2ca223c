//! Line formats for `import`, `export` and `scan`.
//!
//! **TSV** (`tsv`): one `key<TAB>value` line per pair. In keys and values the bytes that would
//! break the line structure or a terminal are escaped: `\` as `\\`, TAB as `\t`, LF as `\n`,
//! CR as `\r`, and every byte that is not part of printable UTF-8 (invalid UTF-8, and control
//! characters such as NUL, ESC, DEL or U+0085) as `\xHH`. Import decodes those escapes; any
//! other byte after a `\` is an error naming the line. Import takes other bytes as they are, so
//! raw non-UTF-8 bytes are accepted, and a line may end in CRLF. Any byte string survives
//! export then import unchanged.
//!
//! **JSON lines** (`jsonl`): one `{"key": "...", "value": "..."}` object per line, keys and
//! values as JSON (so UTF-8) strings. Exporting a key or value that is not UTF-8 is an error
//! that suggests TSV.
//!
//! Both: empty lines are skipped on import; export writes pairs in key order.

mod jsonl;
pub mod tsv;

use crate::error::{CliError, CliResult, IoContext};
use std::io::{BufRead, Write};
use std::path::Path;

/// The format summary `--help` shows (the module documentation above has the details).
pub const FORMATS_HELP: &str = "\
Formats:
  tsv    one KEY<TAB>VALUE per line. In keys and values, \\ TAB LF CR are written as
         \\\\ \\t \\n \\r and any byte that is not printable UTF-8 as \\xHH; import decodes
         these escapes (any other \\ escape is an error). Round-trips any bytes.
  jsonl  one {\"key\": \"...\", \"value\": \"...\"} object per line, UTF-8 strings only;
         exporting a non-UTF-8 key or value is an error (use tsv).
Empty lines are skipped on import. Without --format, a FILE ending in .jsonl or .json is
read or written as jsonl, anything else as tsv.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Tsv,
    Jsonl,
}

impl Format {
    /// The format `--format` names, else the one `path`'s extension suggests, else TSV.
    pub fn choose(given: Option<Format>, path: Option<&Path>) -> Format {
        let by_extension = || {
            let ext = path?.extension()?.to_str()?.to_ascii_lowercase();
            matches!(ext.as_str(), "jsonl" | "json").then_some(Format::Jsonl)
        };
        given.or_else(by_extension).unwrap_or(Format::Tsv)
    }
}

/// One decoded input line.
pub struct Record {
    /// 1-based line number in the input.
    pub line: u64,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// Reads records from lines of input.
pub struct RecordReader<R> {
    input: R,
    format: Format,
    buf: Vec<u8>,
    line: u64,
    bytes_read: u64,
}

impl<R: BufRead> RecordReader<R> {
    pub fn new(input: R, format: Format) -> Self {
        RecordReader {
            input,
            format,
            buf: Vec::new(),
            line: 0,
            bytes_read: 0,
        }
    }

    /// Lines read so far.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// Bytes of input consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// The next record, `None` at the end of the input. Errors name the line.
    pub fn next_record(&mut self) -> CliResult<Option<Record>> {
        loop {
            self.buf.clear();
            let n = self
                .input
                .read_until(b'\n', &mut self.buf)
                .context(format_args!("reading line {}", self.line + 1))?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            self.bytes_read += n as u64;
            let text = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            if text.is_empty() {
                continue;
            }
            let decoded = match self.format {
                Format::Tsv => tsv::decode_line(text),
                Format::Jsonl => jsonl::decode_line(text),
            };
            let (key, value) =
                decoded.map_err(|e| CliError::new(format!("line {}: {e}", self.line)))?;
            return Ok(Some(Record {
                line: self.line,
                key,
                value,
            }));
        }
    }
}

/// Writes records as lines.
pub struct RecordWriter<W> {
    out: W,
    format: Format,
    /// Where the lines go, for error messages.
    destination: String,
    line: Vec<u8>,
    tsv_line: String,
}

impl<W: Write> RecordWriter<W> {
    pub fn new(out: W, format: Format, destination: String) -> Self {
        RecordWriter {
            out,
            format,
            destination,
            line: Vec::new(),
            tsv_line: String::new(),
        }
    }

    pub fn write(&mut self, key: &[u8], value: &[u8]) -> CliResult {
        let line = match self.format {
            Format::Tsv => {
                self.tsv_line.clear();
                tsv::encode_line(key, value, &mut self.tsv_line);
                self.tsv_line.as_bytes()
            }
            Format::Jsonl => {
                self.line.clear();
                jsonl::encode_line(key, value, &mut self.line).map_err(CliError::new)?;
                &self.line
            }
        };
        self.out
            .write_all(line)
            .context(format_args!("writing {}", self.destination))
    }

    /// Flushes what is buffered; returns the output.
    pub fn finish(mut self) -> CliResult<W> {
        self.out
            .flush()
            .context(format_args!("writing {}", self.destination))?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_is_given_or_guessed_from_the_extension() {
        let p = |s: &'static str| Some(Path::new(s));
        assert_eq!(Format::choose(None, p("a.jsonl")), Format::Jsonl);
        assert_eq!(Format::choose(None, p("a.JSON")), Format::Jsonl);
        assert_eq!(Format::choose(None, p("a.txt")), Format::Tsv);
        assert_eq!(Format::choose(None, None), Format::Tsv);
        assert_eq!(Format::choose(Some(Format::Tsv), p("a.jsonl")), Format::Tsv);
    }

    #[test]
    fn reader_skips_empty_lines_accepts_crlf_and_numbers_lines() {
        let input: &[u8] = b"a\t1\r\n\nb\t2\nbad\n";
        let mut r = RecordReader::new(input, Format::Tsv);
        let first = r.next_record().unwrap().unwrap();
        assert_eq!(
            (first.line, first.key, first.value),
            (1, b"a".to_vec(), b"1".to_vec())
        );
        let second = r.next_record().unwrap().unwrap();
        assert_eq!((second.line, second.key), (3, b"b".to_vec()));
        let err = r.next_record().err().unwrap().to_string();
        assert!(err.starts_with("line 4: no TAB"), "{err}");
    }

    #[test]
    fn last_line_needs_no_line_break() {
        let mut r = RecordReader::new(&br#"{"key": "k", "value": "v"}"#[..], Format::Jsonl);
        assert_eq!(r.next_record().unwrap().unwrap().value, b"v");
        assert!(r.next_record().unwrap().is_none());
        assert_eq!(r.bytes_read(), 26);
    }
}
