//! Subcommands (`CLIENT SETNAME`, `CONFIG GET` ...): what `COMMAND INFO` and the arity check
//! see of each, and Redis's replies to an unknown one and to `HELP`.

use super::{args, subcommands, Failure};
use crate::resp::reply::Reply;

/// A subcommand (`client|setname`), as `COMMAND INFO` and the arity check see it.
pub struct Sub {
    /// The full name, in lower case: the command's, `|`, the subcommand's.
    pub name: &'static str,
    /// Redis's arity, counting the command and the subcommand.
    pub arity: i32,
    /// Redis's flags.
    pub flags: &'static [&'static str],
    /// Its lines in the command's `HELP`: the usage, then what it does (indented).
    pub help: &'static [&'static str],
}

/// The subcommand `a[1]` of command `parent`, checked against its arity; Redis's errors for
/// an unknown one and for a wrong number of arguments.
pub fn find_sub(parent: &str, a: &[Vec<u8>]) -> Result<&'static Sub, Failure> {
    let wanted = a.get(1).map(|s| args::text(s)).unwrap_or_default();
    let lower = wanted.to_ascii_lowercase();
    let sub = subcommands(parent)
        .iter()
        .find(|s| s.name.split_once('|').is_some_and(|(_, n)| n == lower))
        .ok_or_else(|| {
            let shown: String = wanted.chars().take(128).collect();
            args::err(format!(
                "ERR unknown subcommand '{shown}'. Try {} HELP.",
                parent.to_ascii_uppercase()
            ))
        })?;
    let n = a.len();
    let fits = if sub.arity >= 0 {
        n == sub.arity as usize
    } else {
        n >= sub.arity.unsigned_abs() as usize
    };
    if !fits {
        return Err(args::err(args::arity_error(sub.name)));
    }
    Ok(sub)
}

/// A command's `HELP`: Redis's header, each subcommand's lines, then `HELP`'s.
pub fn help(parent: &str) -> Reply {
    let mut lines = vec![format!(
        "{} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        parent.to_ascii_uppercase()
    )];
    for sub in subcommands(parent) {
        lines.extend(sub.help.iter().map(|l| l.to_string()));
    }
    lines.push("HELP".into());
    lines.push("    Prints this help.".into());
    Reply::Array(lines.into_iter().map(Reply::Simple).collect())
}
