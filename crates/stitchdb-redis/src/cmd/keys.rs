//! Commands over keys of any type: `DEL`, `EXISTS`, `TYPE` ...

use super::{CmdResult, Keys, Run, Spec};
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "del",
        arity: -2,
        flags: &["write"],
        keys: Keys::Range {
            first: 1,
            last: -1,
            step: 1,
        },
        run: Run::Data(del),
    },
    Spec {
        name: "exists",
        arity: -2,
        flags: &["readonly", "fast"],
        keys: Keys::Range {
            first: 1,
            last: -1,
            step: 1,
        },
        run: Run::Data(exists),
    },
    Spec {
        name: "type",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: Keys::Range {
            first: 1,
            last: 1,
            step: 1,
        },
        run: Run::Data(type_),
    },
];

fn del(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for key in &args[1..] {
        if ctx.delete_key(key)? {
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

fn exists(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> CmdResult {
    let mut n = 0;
    for key in &args[1..] {
        if ctx.lookup(key)?.is_some() {
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

fn type_(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Simple(
        ctx.lookup(&args[1])?
            .map_or("none", |m| m.kind.name())
            .into(),
    ))
}
