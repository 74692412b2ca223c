//! String commands: `GET`, `SET` ...

use super::{args, CmdResult, Keys, Run, Spec};
use crate::keyspace::encoding::{Body, Kind, Meta};
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "get",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: Keys::Range {
            first: 1,
            last: 1,
            step: 1,
        },
        run: Run::Data(get),
    },
    Spec {
        name: "set",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: Keys::Range {
            first: 1,
            last: 1,
            step: 1,
        },
        run: Run::Data(set),
    },
];

/// A string key's value (`None`: no such key; `WrongType` if it holds another type).
pub fn string_value(ctx: &mut Ctx<'_>, key: &[u8]) -> Result<Option<Vec<u8>>, super::Failure> {
    Ok(match ctx.lookup_kind(key, Kind::String)? {
        Some(Meta {
            body: Body::String(v),
            ..
        }) => Some(v),
        _ => None,
    })
}

fn get(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::opt_bulk(string_value(ctx, &args[1])?))
}

fn set(ctx: &mut Ctx<'_>, args: &[Vec<u8>]) -> CmdResult {
    if args.len() > 3 {
        return Err(args::syntax());
    }
    ctx.put_meta(&args[1], &Meta::string(args[2].clone()))?;
    Ok(Reply::Ok)
}
