//! What the list and sorted-set commands share: their command tables' shorthand, a
//! collection's header loaded, changed and saved back (the key deleted once the collection
//! is empty, as Redis deletes empty collections), Redis's `start..=end` index ranges, and
//! the checks an argument or a member's record must pass before a command's first write.

use super::{DataFn, Failure, Keys, Run, Spec};
use crate::keyspace::encoding::{self, Body, Collection, Kind, Meta};
use crate::keyspace::Ctx;

/// A command over data.
pub const fn cmd(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: Keys,
    f: DataFn,
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        keys,
        run: Run::Data(f),
    }
}

/// The key is the first argument.
pub const KEY: Keys = Keys::Range {
    first: 1,
    last: 1,
    step: 1,
};

/// A source and a destination key.
pub const SRC_DST: Keys = Keys::Range {
    first: 1,
    last: 2,
    step: 1,
};

/// A collection as stored: the caller changes its header `c`, and [`Stored::save`] writes
/// it back (expiry kept).
pub struct Stored {
    kind: Kind,
    expire_at: Option<u64>,
    /// The header.
    pub c: Collection,
}

impl Stored {
    fn from_meta(meta: Meta) -> Result<Stored, Failure> {
        match meta.body {
            Body::Collection(c) => Ok(Stored {
                kind: meta.kind,
                expire_at: meta.expire_at,
                c,
            }),
            Body::String(_) => Err(super::args::err("ERR a collection key without a header")),
        }
    }

    /// `key`'s collection of `kind` (`None`: no such key; `WrongType` if another type).
    pub fn load(ctx: &mut Ctx<'_>, key: &[u8], kind: Kind) -> Result<Option<Stored>, Failure> {
        ctx.lookup_kind(key, kind)?
            .map(Stored::from_meta)
            .transpose()
    }

    /// A new empty collection of `kind`, under a version no collection has had.
    pub fn create(ctx: &Ctx<'_>, kind: Kind) -> Result<Stored, Failure> {
        Stored::from_meta(Meta::collection(kind, ctx.ks.new_version()))
    }

    /// [`Stored::load`], or [`Stored::create`] if there is no such key.
    pub fn load_or_create(ctx: &mut Ctx<'_>, key: &[u8], kind: Kind) -> Result<Stored, Failure> {
        match Stored::load(ctx, key, kind)? {
            Some(s) => Ok(s),
            None => Stored::create(ctx, kind),
        }
    }

    /// The members' version.
    pub fn version(&self) -> u64 {
        self.c.version
    }

    /// Writes the header back, or deletes the key if the collection is now empty (with any
    /// member records left, in one range delete).
    pub fn save(self, ctx: &mut Ctx<'_>, key: &[u8]) -> Result<(), Failure> {
        if self.c.size == 0 {
            ctx.delete_key(key)?;
            return Ok(());
        }
        let meta = Meta {
            kind: self.kind,
            expire_at: self.expire_at,
            body: Body::Collection(self.c),
        };
        ctx.put_meta(key, &meta)?;
        Ok(())
    }
}

/// Redis's range of elements `start..=end` over `len` of them (negative: from the end, -1 the
/// last), clamped to the collection, as a half-open range `lo..hi`; `None` if empty.
pub fn span(start: i64, end: i64, len: u64) -> Option<(u64, u64)> {
    let len = i128::from(len);
    let from_end = |i: i64| {
        let i = i128::from(i);
        if i < 0 {
            len + i
        } else {
            i
        }
    };
    let lo = from_end(start).max(0);
    let hi = from_end(end);
    if lo > hi || lo >= len {
        return None;
    }
    // Both are within 0..=len now, so they fit.
    Some((lo as u64, (hi.min(len - 1) + 1) as u64))
}

/// A count that must not be negative (`LPOP`'s, `ZPOPMIN`'s), as Redis's
/// `getPositiveLongFromObjectOrReply` reads it.
pub fn positive(arg: &[u8]) -> Result<u64, Failure> {
    match super::args::int(arg) {
        Ok(n) if n >= 0 => Ok(n as u64),
        _ => Err(super::args::err(
            "ERR value is out of range, must be positive",
        )),
    }
}

/// Fails as the store would for a member record of `key` whose key is `extra` bytes past
/// the collection's prefix and tag: called for every member before a command's first write,
/// so a member too long for the store fails the command before it wrote anything.
pub fn check_record(key: &[u8], extra: usize) -> Result<(), Failure> {
    let len = encoding::members_prefix(key, 0).len() + 1 + extra;
    if len > stitchdb::MAX_KEY_LEN {
        return Err(Failure::Store(stitchdb::Error::TooLarge {
            what: "key",
            len,
            limit: stitchdb::MAX_KEY_LEN,
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_follow_redis_index_rules() {
        assert_eq!(span(0, -1, 3), Some((0, 3)));
        assert_eq!(span(-2, -1, 3), Some((1, 3)));
        assert_eq!(span(-100, 1, 3), Some((0, 2)));
        assert_eq!(span(1, 100, 3), Some((1, 3)));
        assert_eq!(span(2, 1, 3), None);
        assert_eq!(span(3, 5, 3), None);
        assert_eq!(span(0, -4, 3), None);
        assert_eq!(span(0, 0, 0), None);
        assert_eq!(span(i64::MIN, i64::MAX, 3), Some((0, 3)));
        assert_eq!(span(0, i64::MIN, 3), None);
    }
}
