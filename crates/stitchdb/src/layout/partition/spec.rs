//! A table's layout string, which is either a stack or a partition of the key space with a
//! stack per region:
//!
//! ```text
//! table     := layout | partition
//! partition := "partition" "(" bound ("," bound)* ")" "->" (layout | "[" layout ("|" layout)* "]")
//! bound     := "at" "=" (quoted | hex)
//! ```
//!
//! A `quoted` key is `"..."` with the escapes `\"`, `\\` and `\xHH`; a `hex` key is `0x` and
//! an even number of hex digits. N boundaries (not empty, strictly increasing) make N + 1
//! regions; one stack without brackets is every region's. Each stack is checked by the stack
//! rules (`LayoutSpec::parse`), and its errors name the region and the module in it.

use super::PartitionSpec;
use crate::layout::spec::{check_len, parse_cow_btree, COW_BTREE, PARTITION};
use crate::layout::{CowBTreeSpec, LayoutError, LayoutSpec};
use std::fmt;
use std::sync::{Arc, LazyLock};

/// A table's layout: one stack of modules, or a partition whose regions each have one.
#[derive(Debug, Clone, PartialEq)]
pub enum TableLayout {
    /// The table's data goes through this stack.
    Stack(LayoutSpec),
    /// The table's key space is cut into regions, each stored as its own table of its stack.
    Partition(Arc<PartitionSpec>),
    /// The table is Goby's copy-on-write B+tree (`crate::layout::cowbtree`), not a stack.
    CowBTree(CowBTreeSpec),
}

impl Default for TableLayout {
    /// The VT-tree stack.
    fn default() -> TableLayout {
        TableLayout::Stack(LayoutSpec::default())
    }
}

/// A partitioned table's own data is never written (its regions hold it): it stays empty, in
/// the default stack.
static UNWRITTEN: LazyLock<LayoutSpec> = LazyLock::new(LayoutSpec::default);

impl TableLayout {
    /// Parses and checks a table's layout string (see the module docs).
    pub fn parse(layout: &str) -> Result<TableLayout, LayoutError> {
        check_len(layout)?;
        let text = layout.trim_start();
        match text.strip_prefix(PARTITION) {
            Some(rest) if !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-') => {
                let parsed = TableLayout::Partition(Arc::new(parse_partition(layout, rest)?));
                // A table's layout is stored in its canonical form, which must parse back
                // (its parameters written out and its binary keys in hex make it longer).
                let canonical = parsed.to_string();
                match check_len(&canonical) {
                    Ok(()) => Ok(parsed),
                    Err(e) => Err(LayoutError {
                        layout: layout.to_string(),
                        reason: format!("its canonical form is {}", e.reason),
                        ..e
                    }),
                }
            }
            _ => match text.strip_prefix(COW_BTREE) {
                Some(rest)
                    if !rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-') =>
                {
                    parse_cow_btree(layout).map(TableLayout::CowBTree)
                }
                _ => LayoutSpec::parse(layout).map(TableLayout::Stack),
            },
        }
    }

    /// The stack the table's own data goes through: for a partitioned table, whose own data
    /// stays empty, and a B+tree, which has no stack of runs, the default one (what it
    /// refuses: nothing).
    pub fn stack(&self) -> &LayoutSpec {
        match self {
            TableLayout::Stack(stack) => stack,
            TableLayout::Partition(_) | TableLayout::CowBTree(_) => &UNWRITTEN,
        }
    }

    /// The partition, for a partitioned table.
    pub fn partition(&self) -> Option<&Arc<PartitionSpec>> {
        match self {
            TableLayout::Partition(p) => Some(p),
            TableLayout::Stack(_) | TableLayout::CowBTree(_) => None,
        }
    }

    /// The B+tree's parameters, for a table laid out as one.
    pub fn cow_btree(&self) -> Option<&CowBTreeSpec> {
        match self {
            TableLayout::CowBTree(spec) => Some(spec),
            TableLayout::Stack(_) | TableLayout::Partition(_) => None,
        }
    }
}

fn parse_partition(layout: &str, rest: &str) -> Result<PartitionSpec, LayoutError> {
    let fail = |reason: String| LayoutError {
        layout: layout.to_string(),
        region: None,
        module: Some((1, PARTITION.to_string())),
        reason,
    };
    let (bounds, rest) = parse_bounds(rest).map_err(fail)?;
    let Some(stacks) = rest.trim_start().strip_prefix("->") else {
        return Err(fail(
            "expected \"->\" and the regions' stacks after \")\"".to_string(),
        ));
    };
    let stacks = stacks.trim();
    let regions = match stacks.strip_prefix('[') {
        Some(inner) => {
            let Some(inner) = inner.strip_suffix(']') else {
                return Err(fail("\"[\" without \"]\" at the end".to_string()));
            };
            if inner.trim().is_empty() {
                return Err(fail("no regions inside \"[]\"".to_string()));
            }
            let regions = inner
                .split('|')
                .enumerate()
                .map(|(i, stack)| {
                    LayoutSpec::parse(stack.trim()).map_err(|e| LayoutError {
                        layout: layout.to_string(),
                        region: Some(i + 1),
                        ..e
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            if regions.len() != bounds.len() + 1 {
                return Err(fail(format!(
                    "{} boundaries make {} regions, and {} stacks are given",
                    bounds.len(),
                    bounds.len() + 1,
                    regions.len()
                )));
            }
            regions
        }
        None => {
            // One stack for every region: its modules are numbered after `partition`.
            let stack = LayoutSpec::parse(stacks).map_err(|e| LayoutError {
                layout: layout.to_string(),
                module: e.module.map(|(n, name)| (n + 1, name)),
                ..e
            })?;
            vec![stack; bounds.len() + 1]
        }
    };
    Ok(PartitionSpec { bounds, regions })
}

/// Reads `(at=KEY, ...)` off the start of `text`: the boundaries, and what follows `)`.
fn parse_bounds(text: &str) -> Result<(Vec<Vec<u8>>, &str), String> {
    let Some(mut s) = text.trim_start().strip_prefix('(') else {
        return Err("needs its boundaries: partition(at=\"k\", ...)".to_string());
    };
    let mut bounds: Vec<Vec<u8>> = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix(')') {
            if bounds.is_empty() {
                return Err("no boundaries: partition(at=\"k\", ...)".to_string());
            }
            return Ok((bounds, after));
        }
        let n = bounds.len() + 1;
        if n > 1 {
            let Some(after) = s.strip_prefix(',') else {
                return Err(format!("expected \",\" or \")\" after boundary {}", n - 1));
            };
            s = after.trim_start();
        }
        let name_len = s.find(|c: char| !c.is_ascii_lowercase()).unwrap_or(s.len());
        let (name, after) = s.split_at(name_len);
        if name != "at" {
            return Err(format!(
                "parameter {n} is not at=KEY (a boundary: at=\"k\" or at=0xHEX)"
            ));
        }
        let Some(after) = after.trim_start().strip_prefix('=') else {
            return Err(format!("expected \"=\" after \"at\" in parameter {n}"));
        };
        let (bound, after) =
            parse_key(after.trim_start()).map_err(|why| format!("boundary {n}: {why}"))?;
        if bound.is_empty() {
            return Err(format!(
                "boundary {n} is empty (the first region starts at the empty key)"
            ));
        }
        if let Some(before) = bounds.last().filter(|before| bound <= **before) {
            return Err(format!(
                "boundary {n} ({}) is not above boundary {} ({}): boundaries increase",
                Key(&bound),
                n - 1,
                Key(before)
            ));
        }
        bounds.push(bound);
        s = after;
    }
}

/// Reads a quoted or hex key off the start of `s`: the key, and what follows it.
fn parse_key(s: &str) -> Result<(Vec<u8>, &str), String> {
    if let Some(hex) = s.strip_prefix("0x") {
        let digits = hex
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(hex.len());
        if digits == 0 || digits % 2 == 1 {
            return Err("0x takes an even number of hex digits, at least two".to_string());
        }
        let key = (0..digits)
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|e| e.to_string())?;
        return Ok((key, &hex[digits..]));
    }
    let Some(quoted) = s.strip_prefix('"') else {
        return Err("a key is quoted (\"k\"; escapes \\\", \\\\, \\xHH) or hex (0x6b)".to_string());
    };
    let mut key = Vec::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((key, &quoted[i + 1..])),
            '\\' => match chars.next().map(|(_, c)| c) {
                Some(c @ ('"' | '\\')) => key.push(c as u8),
                Some('x') => {
                    let hex: String = chars.by_ref().take(2).map(|(_, c)| c).collect();
                    let byte = (hex.len() == 2)
                        .then(|| u8::from_str_radix(&hex, 16).ok())
                        .flatten()
                        .ok_or_else(|| format!("\\x{hex} is not \\x and two hex digits"))?;
                    key.push(byte);
                }
                other => {
                    let shown = other.map_or_else(String::new, String::from);
                    return Err(format!(
                        "unknown escape \\{shown} (escapes: \\\", \\\\, \\xHH)"
                    ));
                }
            },
            c => key.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    Err("a quote without its end".to_string())
}

/// A key as a boundary is written: quoted if it is printable ASCII, else in hex.
struct Key<'a>(&'a [u8]);

impl fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.iter().all(|b| (0x20..0x7f).contains(b)) {
            f.write_str("\"")?;
            for &b in self.0 {
                if b == b'"' || b == b'\\' {
                    f.write_str("\\")?;
                }
                write!(f, "{}", b as char)?;
            }
            f.write_str("\"")
        } else {
            f.write_str("0x")?;
            self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
        }
    }
}

impl fmt::Display for TableLayout {
    /// The canonical form: a stack's; a partition's boundaries, then its one stack if every
    /// region has the same, else each region's in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = match self {
            TableLayout::Stack(stack) => return stack.fmt(f),
            TableLayout::CowBTree(spec) => return spec.fmt(f),
            TableLayout::Partition(p) => p,
        };
        f.write_str(PARTITION)?;
        for (i, bound) in p.bounds.iter().enumerate() {
            let sep = if i == 0 { "(" } else { ", " };
            write!(f, "{sep}at={}", Key(bound))?;
        }
        f.write_str(") -> ")?;
        match p.regions.split_first() {
            Some((first, rest)) if rest.iter().all(|r| r == first) => first.fmt(f),
            _ => {
                for (i, region) in p.regions.iter().enumerate() {
                    let sep = if i == 0 { "[" } else { " | " };
                    write!(f, "{sep}{region}")?;
                }
                f.write_str("]")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::spec::tests::valid_spec;
    use crate::layout::{FormatSpec, MAX_LAYOUT_LEN};
    use proptest::prelude::*;

    fn parse(layout: &str) -> TableLayout {
        TableLayout::parse(layout).unwrap_or_else(|e| panic!("{layout:?}: {e}"))
    }

    fn error(layout: &str) -> String {
        match TableLayout::parse(layout) {
            Ok(spec) => panic!("{layout:?} parsed as {spec:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_partition_parses_as_written_and_prints_canonically() {
        let layout = parse(
            r#"partition(at="g", at = 0x70) -> [managed -> quotient -> btree -> linear
               | managed -> btree -> fixed(8) | managed -> linear]"#,
        );
        let p = layout.partition().expect("a partition");
        assert_eq!(p.bounds, vec![b"g".to_vec(), b"p".to_vec()]);
        assert_eq!(p.regions[1].format, FormatSpec::Fixed { size: 8 });
        assert_eq!(
            layout.to_string(),
            "partition(at=\"g\", at=\"p\") -> [managed -> quotient -> btree(node=4096) -> \
             linear | managed -> btree(node=4096) -> fixed(size=8) | managed -> linear]"
        );
        // One stack is every region's, and printed once.
        let same = parse(r#"partition(at="a\"\\\x00") -> managed -> linear"#);
        let p = same.partition().expect("a partition");
        assert_eq!(p.bounds, vec![b"a\"\\\x00".to_vec()]);
        assert_eq!(
            p.regions,
            vec![LayoutSpec::parse("managed -> linear").unwrap(); 2]
        );
        assert_eq!(
            same.to_string(),
            "partition(at=0x61225c00) -> managed -> linear"
        );
        assert_eq!(parse("managed -> linear").partition(), None);
        assert_eq!(parse("managed -> linear").to_string(), "managed -> linear");
        let quoted = parse(r#"partition(at="a\"b") -> managed -> linear"#);
        assert_eq!(
            quoted.to_string(),
            r#"partition(at="a\"b") -> managed -> linear"#
        );
    }

    const ERRORS: &[(&str, &str)] = &[
        (
            r#"partition(at="g", at="p") -> [managed -> linear | managed -> btree -> fixd(8) | managed -> linear]"#,
            "region 2, module 3 \"fixd\": unknown module",
        ),
        (
            r#"partition(at="g") -> managed -> fixd(8)"#,
            "module 3 \"fixd\": unknown module",
        ),
        (
            r#"partition(at="p", at="g") -> managed -> linear"#,
            "module 1 \"partition\": boundary 2 (\"g\") is not above boundary 1 (\"p\")",
        ),
        (
            r#"partition(at="g", at="g") -> managed -> linear"#,
            "boundary 2 (\"g\") is not above",
        ),
        (
            r#"partition(at="g") -> []"#,
            "module 1 \"partition\": no regions inside \"[]\"",
        ),
        (
            r#"partition(at="g") -> [managed -> linear]"#,
            "1 boundaries make 2 regions, and 1 stacks are given",
        ),
        (
            r#"partition(at="g") -> [managed -> linear | managed -> linear | managed -> linear]"#,
            "and 3 stacks are given",
        ),
        (
            r#"partition(at="g") -> [managed -> linear | partition(at="x") -> managed -> linear]"#,
            "region 2, module 1 \"partition\": \"partition\" comes only first",
        ),
        (
            "managed -> partition(at=\"x\") -> linear",
            "module 2 \"partition\": \"partition\" comes only first",
        ),
        ("partition -> managed -> linear", "needs its boundaries"),
        ("partition() -> managed -> linear", "no boundaries"),
        (
            r#"partition(at="") -> managed -> linear"#,
            "boundary 1 is empty",
        ),
        (
            r#"partition(at=0x1) -> managed -> linear"#,
            "even number of hex digits",
        ),
        (r#"partition(at=g) -> managed -> linear"#, "a key is quoted"),
        (
            r#"partition(at="g) -> managed -> linear"#,
            "a quote without its end",
        ),
        (
            r#"partition(at="\q") -> managed -> linear"#,
            "unknown escape \\q",
        ),
        (
            r#"partition(at="\x4") -> managed -> linear"#,
            "is not \\x and two hex digits",
        ),
        (
            r#"partition(to="g") -> managed -> linear"#,
            "parameter 1 is not at=KEY",
        ),
        (
            r#"partition(at="g" at="h") -> managed -> linear"#,
            "expected \",\" or \")\"",
        ),
        (r#"partition(at="g")"#, "expected \"->\""),
        (
            r#"partition(at="g") -> [managed -> linear | managed -> linear"#,
            "without \"]\"",
        ),
        (
            r#"partition(at="g") -> [managed -> linear | ]"#,
            "region 2: empty",
        ),
    ];

    #[test]
    fn a_partition_whose_canonical_form_is_too_long_is_refused() {
        // 600 bytes quoted, 1,202 in hex.
        let layout = format!("partition(at=\"{}\") -> managed -> linear", "é".repeat(300));
        assert!(layout.len() <= MAX_LAYOUT_LEN);
        let message = error(&layout);
        assert!(
            message.contains("its canonical form is too long"),
            "{message}"
        );
    }

    #[test]
    fn every_error_names_the_region_and_module_at_fault() {
        for &(layout, expected) in ERRORS {
            let message = error(layout);
            let prefix = format!("layout \"{}\"", layout.escape_debug());
            assert!(message.starts_with(&prefix), "{layout:?}: {message}");
            assert!(
                message.contains(expected),
                "{layout:?}: {message} (no {expected:?})"
            );
        }
    }

    fn valid_partition() -> impl Strategy<Value = PartitionSpec> {
        let bounds = prop::collection::btree_set(prop::collection::vec(any::<u8>(), 1..6), 1..4);
        bounds.prop_flat_map(|bounds| {
            let bounds: Vec<Vec<u8>> = bounds.into_iter().collect();
            let n = bounds.len() + 1;
            let regions = prop_oneof![
                valid_spec().prop_map(move |r| vec![r; n]),
                prop::collection::vec(valid_spec(), n),
            ];
            (Just(bounds), regions).prop_map(|(bounds, regions)| PartitionSpec { bounds, regions })
        })
    }

    /// Parses without panicking, and what parses prints to a layout that parses back to it.
    fn parses_back(layout: &str) -> Result<(), TestCaseError> {
        if let Ok(parsed) = TableLayout::parse(layout) {
            let canonical = parsed.to_string();
            prop_assert_eq!(TableLayout::parse(&canonical), Ok(parsed), "{}", canonical);
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn the_canonical_form_parses_back(p in valid_partition()) {
            let layout = TableLayout::Partition(Arc::new(p));
            let canonical = layout.to_string();
            prop_assume!(canonical.len() <= MAX_LAYOUT_LEN);
            let parsed = TableLayout::parse(&canonical);
            prop_assert_eq!(parsed.as_ref(), Ok(&layout), "{}", canonical);
            prop_assert_eq!(parsed.map(|p| p.to_string()), Ok(canonical));
        }

        #[test]
        fn partition_like_strings_do_not_panic(
            s in "partition ?\\(([a-z]{0,3} ?= ?(\"[a-z\\\\\"x0-9]{0,4}\"?|0x[0-9a-f]{0,3})[, ]{0,2}){0,3}\\)? ?(-> ?)?\\[?(managed|linear|[|\\] ]|-> ){0,6}",
        ) {
            parses_back(&s)?;
        }

        #[test]
        fn arbitrary_strings_after_partition_do_not_panic(s in any::<String>()) {
            parses_back(&format!("partition{s}"))?;
        }
    }
}
