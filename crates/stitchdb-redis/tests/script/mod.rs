//! Scripts of commands with the replies Redis 7.0 gives them, run against our server: one
//! command a line, `ARGS => REPLY`. Arguments are split on spaces (`\s` is a space inside
//! one, `\e` an empty one); replies are written as `render` writes them (`:3`, `"bulk"`,
//! `nil`, `[...]`, `,1.5` for a double, `-ERR ...`). A `HELLO` line's reply is not
//! checked (`(hello)`). The expected replies were produced by running the same lines
//! against a real redis-server 7.0.15.

#![allow(dead_code)]

use crate::support::{Client, Value};

/// A reply as a script writes it.
pub fn render(v: &Value) -> String {
    let list = |items: &[Value]| items.iter().map(render).collect::<Vec<_>>().join(", ");
    match v {
        Value::Simple(s) => format!("+{s}"),
        Value::Error(e) => format!("-{e}"),
        Value::Int(n) => format!(":{n}"),
        Value::Bulk(b) => quote(b),
        Value::Nil => "nil".into(),
        Value::Array(items) => format!("[{}]", list(items)),
        Value::Set(items) => format!("~[{}]", list(items)),
        Value::Map(pairs) => {
            let flat: Vec<Value> = pairs
                .iter()
                .flat_map(|(k, v)| [k.clone(), v.clone()])
                .collect();
            format!("%[{}]", list(&flat))
        }
        Value::Double(s) => format!(",{s}"),
        Value::Bool(b) => format!("#{}", if *b { 't' } else { 'f' }),
        Value::Verbatim(s) => format!("={s}"),
    }
}

/// Bytes in double quotes, `"` and `\` escaped, bytes outside printable ASCII as `\xHH`.
fn quote(b: &[u8]) -> String {
    let mut out = String::from("\"");
    for &c in b {
        match c {
            b'"' | b'\\' => {
                out.push('\\');
                out.push(c as char);
            }
            32..=126 => out.push(c as char),
            _ => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push('"');
    out
}

/// The arguments of a script line.
pub fn split(line: &str) -> Vec<String> {
    line.split_whitespace()
        .map(|a| a.replace("\\s", " ").replace("\\e", ""))
        .collect()
}

/// Runs every line of `script` on `c` and panics listing each reply that differs.
pub fn run(c: &mut Client, script: &str) {
    let mut wrong = Vec::new();
    for line in script.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (cmd, want) = line
            .split_once(" => ")
            .unwrap_or_else(|| panic!("no ' => ' in {line:?}"));
        let args = split(cmd);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let got = render(&c.cmd(&refs));
        if want.trim() != "(hello)" && got != want.trim() {
            wrong.push(format!(
                "{}\n    want {}\n    got  {got}",
                cmd.trim(),
                want.trim()
            ));
        }
    }
    assert!(wrong.is_empty(), "replies differ:\n{}", wrong.join("\n"));
}

/// Sends `batch` (arguments, the reply expected, the step that made it) pipelined, which
/// the server runs as one group, and checks each reply; empties it.
pub fn pipelined(c: &mut Client, batch: &mut Vec<(Vec<String>, Value, usize)>) {
    let mut bytes = Vec::new();
    for (args, _, _) in batch.iter() {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        bytes.extend(Client::encode(&raw));
    }
    c.send_raw(&bytes);
    for (args, want, step) in batch.drain(..) {
        let got = c.read().expect("a reply");
        assert_eq!(got, want, "step {step}: {args:?}");
    }
}
