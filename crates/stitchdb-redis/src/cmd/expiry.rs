//! Keys' time to live: `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT` (with `NX`, `XX`, `GT`,
//! `LT`), `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME`, `PERSIST`; and the deadline arithmetic
//! `SET`, `SETEX` and `GETEX` share with them. Deadlines are Unix milliseconds in the key's
//! metadata record (`Ctx::put_meta` keeps the expiry index in step); a deadline already
//! passed deletes the key at once, as Redis does.

use super::args::check_key;
use super::single_key;
use super::{args, CmdResult, Failure, Spec};
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;

/// The family's commands.
pub const COMMANDS: &[Spec] = &[
    single_key("expire", -3, &["write", "fast"], expire),
    single_key("pexpire", -3, &["write", "fast"], pexpire),
    single_key("expireat", -3, &["write", "fast"], expireat),
    single_key("pexpireat", -3, &["write", "fast"], pexpireat),
    single_key("ttl", 2, &["readonly", "fast"], ttl),
    single_key("pttl", 2, &["readonly", "fast"], pttl),
    single_key("expiretime", 2, &["readonly", "fast"], expiretime),
    single_key("pexpiretime", 2, &["readonly", "fast"], pexpiretime),
    single_key("persist", 2, &["write", "fast"], persist),
];

/// Milliseconds in a second: the unit of `EXPIRE`, `EX` ...
pub const SECONDS: i64 = 1000;
/// Milliseconds in a millisecond: the unit of `PEXPIRE`, `PX` ...
pub const MILLIS: i64 = 1;

/// Redis's error for a deadline out of range, naming the command as Redis names it.
pub fn invalid_expire(a: &[Vec<u8>]) -> Failure {
    args::err(format!(
        "ERR invalid expire time in '{}' command",
        args::text(&a[0]).to_ascii_lowercase()
    ))
}

/// The deadline an expiry option of `SET`, `SETEX` or `GETEX` names (`value` in `unit`,
/// from now if `relative`), as Redis's `getExpireMillisecondsOrReply` reads it: a positive
/// integer whose deadline in milliseconds is in range.
pub fn option_deadline(
    ctx: &Ctx<'_>,
    a: &[Vec<u8>],
    value: &[u8],
    unit: i64,
    relative: bool,
) -> Result<u64, Failure> {
    let v = args::int(value)?;
    if v <= 0 || v > i64::MAX / unit {
        return Err(invalid_expire(a));
    }
    let base = if relative { ctx.now as i64 } else { 0 };
    (v * unit)
        .checked_add(base)
        .map(|at| at as u64)
        .ok_or_else(|| invalid_expire(a))
}

/// `NX`, `XX`, `GT`, `LT`: when the `EXPIRE` family may set a deadline.
#[derive(Default)]
struct Conditions {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

impl Conditions {
    /// Reads the options after the deadline, with Redis's errors for unknown and
    /// incompatible ones.
    fn parse(a: &[Vec<u8>]) -> Result<Conditions, Failure> {
        let mut c = Conditions::default();
        for opt in &a[3..] {
            let flag = match args::text(opt).to_ascii_lowercase().as_str() {
                "nx" => &mut c.nx,
                "xx" => &mut c.xx,
                "gt" => &mut c.gt,
                "lt" => &mut c.lt,
                _ => {
                    return Err(args::err(format!(
                        "ERR Unsupported option {}",
                        args::text(opt)
                    )))
                }
            };
            *flag = true;
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return Err(args::err(
                "ERR NX and XX, GT or LT options at the same time are not compatible",
            ));
        }
        if c.gt && c.lt {
            return Err(args::err(
                "ERR GT and LT options at the same time are not compatible",
            ));
        }
        Ok(c)
    }

    /// Whether the deadline `when` may replace `current` (`None`: no deadline, which `GT`
    /// and `LT` take as infinite).
    fn allow(&self, current: Option<u64>, when: i64) -> bool {
        let current = current.map(|c| c as i64);
        let refused = (self.nx && current.is_some())
            || (self.xx && current.is_none())
            || (self.gt && current.is_none_or(|c| when <= c))
            || (self.lt && current.is_some_and(|c| when >= c));
        !refused
    }
}

/// `EXPIRE` and its kin: `a[2]` in `unit`, from now if `relative`, else from the epoch.
fn expire_generic(ctx: &mut Ctx<'_>, a: &[Vec<u8>], unit: i64, relative: bool) -> CmdResult {
    let conditions = Conditions::parse(a)?;
    let when = args::int(&a[2])?;
    // Negative deadlines are allowed (they delete the key); only overflow is refused.
    let base = if relative { ctx.now as i64 } else { 0 };
    let when = when
        .checked_mul(unit)
        .and_then(|ms| ms.checked_add(base))
        .ok_or_else(|| invalid_expire(a))?;
    let key = &a[1];
    let Some(mut meta) = ctx.lookup(key)? else {
        return Ok(Reply::Int(0));
    };
    if !conditions.allow(meta.expire_at, when) {
        return Ok(Reply::Int(0));
    }
    if when <= ctx.now as i64 {
        ctx.delete_key(key)?;
        return Ok(Reply::Int(1));
    }
    check_key(key, true)?;
    meta.expire_at = Some(when as u64);
    ctx.put_meta(key, &meta)?;
    Ok(Reply::Int(1))
}

fn expire(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, a, SECONDS, true)
}

fn pexpire(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, a, MILLIS, true)
}

fn expireat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, a, SECONDS, false)
}

fn pexpireat(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    expire_generic(ctx, a, MILLIS, false)
}

/// `TTL` and its kin: -2 for no key, -1 for no deadline, else the time left (or the
/// deadline, if `absolute`) in `unit`, seconds rounded to nearest as Redis rounds them.
fn ttl_generic(ctx: &mut Ctx<'_>, key: &[u8], unit: i64, absolute: bool) -> CmdResult {
    let Some(meta) = ctx.lookup(key)? else {
        return Ok(Reply::Int(-2));
    };
    let Some(at) = meta.expire_at else {
        return Ok(Reply::Int(-1));
    };
    let ms = if absolute {
        i128::from(at)
    } else {
        (i128::from(at) - i128::from(ctx.now)).max(0)
    };
    let n = (ms + i128::from(unit / 2)) / i128::from(unit);
    Ok(Reply::Int(n as i64))
}

fn ttl(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, &a[1], SECONDS, false)
}

fn pttl(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, &a[1], MILLIS, false)
}

fn expiretime(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, &a[1], SECONDS, true)
}

fn pexpiretime(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    ttl_generic(ctx, &a[1], MILLIS, true)
}

fn persist(ctx: &mut Ctx<'_>, a: &[Vec<u8>]) -> CmdResult {
    let key = &a[1];
    match ctx.lookup(key)? {
        Some(mut meta) if meta.expire_at.is_some() => {
            meta.expire_at = None;
            ctx.put_meta(key, &meta)?;
            Ok(Reply::Int(1))
        }
        _ => Ok(Reply::Int(0)),
    }
}
