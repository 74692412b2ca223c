//! What commands over collections share, whatever their kind: a collection loaded or
//! created, its member records read and written with its size kept exact, and its key saved
//! back or deleted once empty (Redis deletes empty collections); uniformly random members;
//! `*SCAN` over members; and the checks a member must pass before a command's first write.

use super::scan::{self, ScanArgs};
use super::{args, CmdResult, Failure};
use crate::keyspace::encoding::{self, Body, Collection, Kind, Meta};
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;
use rand::Rng;

/// Random picks with repeats one call returns at most (`SRANDMEMBER key -N`): Redis streams
/// any number, this server builds a reply whole in memory.
pub const MAX_REPEATS: u64 = 1 << 20;

/// Bytes of members one call of random picks returns at most, for the same reason (Redis's
/// largest bulk string, `proto-max-bulk-len`).
const MAX_PICKED_BYTES: usize = 512 << 20;

/// A collection one command reads or changes: its header changes here, and [`Coll::save`]
/// writes it back (expiry kept) or deletes the key if the collection is now empty.
pub struct Coll<'k> {
    key: &'k [u8],
    kind: Kind,
    expire_at: Option<u64>,
    header: Collection,
    /// The header as stored (`None`: a new collection, to replace whatever the key holds).
    stored: Option<Collection>,
    /// Whether member records were written.
    wrote: bool,
}

/// A member record: the member (a suffix after the tag) and its value.
pub type Record = (Vec<u8>, Vec<u8>);

impl<'k> Coll<'k> {
    /// `key`'s collection of `kind` (`None`: no such key; WRONGTYPE if another type).
    pub fn load(ctx: &mut Ctx<'_>, key: &'k [u8], kind: Kind) -> Result<Option<Coll<'k>>, Failure> {
        let Some(meta) = ctx.lookup_kind(key, kind)? else {
            return Ok(None);
        };
        let mut coll = Coll::of(key, meta)?;
        coll.stored = Some(coll.header);
        Ok(Some(coll))
    }

    fn of(key: &'k [u8], meta: Meta) -> Result<Coll<'k>, Failure> {
        let Body::Collection(header) = meta.body else {
            return Err(args::err("ERR a collection's key without a header"));
        };
        Ok(Coll {
            key,
            kind: meta.kind,
            expire_at: meta.expire_at,
            header,
            stored: None,
            wrote: false,
        })
    }

    /// A new empty collection of `kind` at `key`, under a version no collection has had;
    /// saving it replaces whatever `key` holds.
    pub fn create(ctx: &Ctx<'_>, key: &'k [u8], kind: Kind) -> Result<Coll<'k>, Failure> {
        Coll::of(key, Meta::collection(kind, ctx.ks.new_version()))
    }

    /// [`Coll::load`], or [`Coll::create`] if there is no such key.
    pub fn load_or_create(
        ctx: &mut Ctx<'_>,
        key: &'k [u8],
        kind: Kind,
    ) -> Result<Coll<'k>, Failure> {
        Ok(match Coll::load(ctx, key, kind)? {
            Some(c) => c,
            None => Coll::create(ctx, key, kind)?,
        })
    }

    /// Members.
    pub fn size(&self) -> u64 {
        self.header.size
    }

    /// The header (a list keeps its ends there too).
    pub fn header(&self) -> &Collection {
        &self.header
    }

    /// The header, to change where a kind keeps more than a size in it (a list's ends,
    /// a sorted set's size as its two records per member count it); `save` writes it back.
    pub fn header_mut(&mut self) -> &mut Collection {
        &mut self.header
    }

    /// The value of a member record.
    pub fn get(
        &self,
        ctx: &mut Ctx<'_>,
        tag: u8,
        member: &[u8],
    ) -> Result<Option<Vec<u8>>, Failure> {
        Ok(ctx.member(self.key, self.header.version, tag, member)?)
    }

    /// Sets a member record; true if the member is new (the size counts it).
    pub fn insert(
        &mut self,
        ctx: &mut Ctx<'_>,
        tag: u8,
        member: &[u8],
        value: &[u8],
    ) -> Result<bool, Failure> {
        let new = self.get(ctx, tag, member)?.is_none();
        ctx.put_member(self.key, self.header.version, tag, member, value)?;
        self.header.size += u64::from(new);
        self.wrote = true;
        Ok(new)
    }

    /// Adds a member record if the member is not there yet (writing nothing if it is, so
    /// `WATCH` sees no change); true if it was added.
    pub fn insert_if_absent(
        &mut self,
        ctx: &mut Ctx<'_>,
        tag: u8,
        member: &[u8],
        value: &[u8],
    ) -> Result<bool, Failure> {
        if self.get(ctx, tag, member)?.is_some() {
            return Ok(false);
        }
        self.insert_new(ctx, tag, member, value)?;
        Ok(true)
    }

    /// Adds a member the caller knows is not there (to a collection it is filling).
    pub fn insert_new(
        &mut self,
        ctx: &mut Ctx<'_>,
        tag: u8,
        member: &[u8],
        value: &[u8],
    ) -> Result<(), Failure> {
        ctx.put_member(self.key, self.header.version, tag, member, value)?;
        self.header.size += 1;
        self.wrote = true;
        Ok(())
    }

    /// Removes a member record; true if it was there.
    pub fn remove(&mut self, ctx: &mut Ctx<'_>, tag: u8, member: &[u8]) -> Result<bool, Failure> {
        if self.get(ctx, tag, member)?.is_none() {
            return Ok(false);
        }
        ctx.delete_member(self.key, self.header.version, tag, member)?;
        self.header.size -= 1;
        self.wrote = true;
        Ok(true)
    }

    /// Empties the collection: saving it deletes the key, its members with it.
    pub fn clear(&mut self) {
        self.header.size = 0;
    }

    /// The member records of `tag` from `from` (inclusive; empty: the first), in order.
    pub fn records(
        &self,
        ctx: &mut Ctx<'_>,
        tag: u8,
        from: &[u8],
    ) -> Result<impl Iterator<Item = Result<Record, Failure>>, Failure> {
        let it = ctx.members(self.key, self.header.version, tag, from, false)?;
        Ok(it.map(|r| r.map_err(Failure::from)))
    }

    /// Every member record of `tag`, in order.
    pub fn all(&self, ctx: &mut Ctx<'_>, tag: u8) -> Result<Vec<Record>, Failure> {
        self.records(ctx, tag, b"")?.collect()
    }

    /// The member records of `tag` at `positions` (0 the first member; repeats allowed), in
    /// the order of `positions`. One scan, from whichever end of the collection is nearer
    /// the positions wanted: a collection's members are ordered, not counted, so reaching
    /// position `p` takes `p` steps (see [`random_positions`]).
    pub fn at_positions(
        &self,
        ctx: &mut Ctx<'_>,
        tag: u8,
        positions: &[u64],
    ) -> Result<Vec<Record>, Failure> {
        let mut wanted = positions.to_vec();
        wanted.sort_unstable();
        wanted.dedup();
        let (Some(&lo), Some(&hi)) = (wanted.first(), wanted.last()) else {
            return Ok(Vec::new());
        };
        let size = self.header.size;
        let rev = size.saturating_sub(lo) < hi + 1;
        let steps = if rev { size.saturating_sub(lo) } else { hi + 1 };
        let scan = ctx.members(self.key, self.header.version, tag, b"", rev)?;
        let mut found: Vec<Option<Record>> = vec![None; wanted.len()];
        for (i, record) in (0..steps).zip(scan) {
            let pos = if rev { size - 1 - i } else { i };
            if let Ok(slot) = wanted.binary_search(&pos) {
                found[slot] = Some(record?);
            }
        }
        let mut bytes = 0usize;
        let mut out = Vec::with_capacity(positions.len());
        for p in positions {
            let Some(Some((m, v))) = wanted.binary_search(p).ok().map(|i| &found[i]) else {
                continue;
            };
            bytes += m.len() + v.len();
            if bytes > MAX_PICKED_BYTES {
                return Err(args::err(format!(
                    "ERR the random members picked are over {MAX_PICKED_BYTES} bytes"
                )));
            }
            out.push((m.clone(), v.clone()));
        }
        Ok(out)
    }

    /// Writes the header back if it changed, or deletes the key if the collection is empty
    /// (or, for a new one, whatever the key held); else tells `WATCH` the members changed.
    pub fn save(self, ctx: &mut Ctx<'_>) -> Result<(), Failure> {
        if self.header.size == 0 {
            ctx.delete_key(self.key)?;
        } else if self.stored != Some(self.header) {
            let meta = Meta {
                kind: self.kind,
                expire_at: self.expire_at,
                body: Body::Collection(self.header),
            };
            ctx.put_meta(self.key, &meta)?;
        } else if self.wrote {
            ctx.touch(self.key);
        }
        Ok(())
    }
}

/// Fails as the store would for the record of `member` in `key`'s collection: called for
/// every member before a command's first write, so a member too long for the store fails
/// the command before it wrote anything (`EXEC` goes on after a failed command).
pub fn check_member(key: &[u8], member: &[u8]) -> Result<(), Failure> {
    let len = encoding::tag_prefix(key, 0, 0).len() + member.len();
    if len > stitchdb::MAX_KEY_LEN {
        return Err(Failure::Store(stitchdb::Error::TooLarge {
            what: "key",
            len,
            limit: stitchdb::MAX_KEY_LEN,
        }));
    }
    Ok(())
}

/// `count` uniformly random positions among `size` members: distinct ones in random order
/// (all of them in order if `count >= size`), or independent picks with repeats (at most
/// [`MAX_REPEATS`]).
///
/// Positions, not seeks: a seek to a random member name would favour the members after the
/// widest gaps between names (`item:1` would hide `item:10` almost always), and Redis's
/// picks are uniform, so a pick counts its way to a uniformly random position instead: one
/// pick reads half the collection at most (counting from the nearer end), and all of a
/// call's picks are read in one scan.
pub fn random_positions(size: u64, count: u64, distinct: bool) -> Result<Vec<u64>, Failure> {
    let mut rng = rand::thread_rng();
    if size == 0 {
        return Ok(Vec::new());
    }
    if !distinct {
        if count > MAX_REPEATS {
            return Err(args::err(format!(
                "ERR value is out of range, this server returns at most {MAX_REPEATS} random \
                 members with repeats"
            )));
        }
        return Ok((0..count).map(|_| rng.gen_range(0..size)).collect());
    }
    if count >= size {
        // The whole collection, in its order, as Redis replies then.
        return Ok((0..size).collect());
    }
    Ok(
        rand::seq::index::sample(&mut rng, size as usize, count as usize)
            .into_iter()
            .map(|i| i as u64)
            .collect(),
    )
}

/// The count of `SRANDMEMBER`, `HRANDFIELD` and `ZRANDMEMBER`: how many, and whether
/// distinct (a negative count asks for picks with repeats).
pub fn random_count(arg: &[u8]) -> Result<(u64, bool), Failure> {
    let n = args::int(arg)?;
    if n == i64::MIN {
        return Err(args::err(
            "ERR value is out of range, value must between -9223372036854775807 and \
             9223372036854775807",
        ));
    }
    Ok((n.unsigned_abs(), n >= 0))
}

/// `HSCAN`, `SSCAN` (and `ZSCAN`): the member records of `tag` after the cursor's, about
/// `COUNT` of them looked at, those passing `MATCH` each shown by `show`.
pub fn scan_records(
    ctx: &mut Ctx<'_>,
    a: &[Vec<u8>],
    kind: Kind,
    tag: u8,
    show: fn(Record, &mut Vec<Reply>),
) -> CmdResult {
    // Redis reads the cursor before the key, and the options only if the key exists.
    ScanArgs::parse(ctx, &a[..3], 2, false)?;
    let Some(coll) = Coll::load(ctx, &a[1], kind)? else {
        return Ok(scan::reply(ctx, None, Vec::new()));
    };
    let opts = ScanArgs::parse(ctx, a, 2, false)?;
    let from = opts.after.clone().unwrap_or_default();
    let mut records = coll
        .records(ctx, tag, &from)?
        .filter(|r| !matches!(r, Ok((m, _)) if opts.after.as_ref() == Some(m)))
        .peekable();
    let mut items = Vec::new();
    let mut last = None;
    for record in records.by_ref().take(opts.count) {
        let record = record?;
        last = Some(record.0.clone());
        if opts.matches(&record.0) {
            show(record, &mut items);
        }
    }
    let more = records.peek().is_some();
    Ok(scan::reply(ctx, last.filter(|_| more), items))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_positions_are_in_range_and_distinct_when_asked() {
        let mut p = random_positions(10, 4, true).unwrap();
        assert_eq!(p.len(), 4);
        p.sort_unstable();
        p.dedup();
        assert_eq!(p.len(), 4);
        assert!(p.iter().all(|&i| i < 10));
        assert_eq!(random_positions(5, 9, true).unwrap(), vec![0, 1, 2, 3, 4]);
        let r = random_positions(2, 50, false).unwrap();
        assert_eq!(r.len(), 50);
        assert!(r.iter().all(|&i| i < 2));
        assert!(random_positions(0, 5, false).unwrap().is_empty());
        assert!(random_positions(1, MAX_REPEATS + 1, false).is_err());
        assert_eq!(random_positions(3, u64::MAX, true).unwrap().len(), 3);
    }

    #[test]
    fn counts_read_as_redis_reads_them() {
        assert_eq!(random_count(b"3").ok(), Some((3, true)));
        assert_eq!(random_count(b"-3").ok(), Some((3, false)));
        assert!(random_count(b"-9223372036854775808").is_err());
        assert_eq!(
            random_count(b"-9223372036854775807").ok(),
            Some((i64::MAX as u64, false))
        );
        assert_eq!(
            random_count(b"9223372036854775807").ok(),
            Some((i64::MAX as u64, true))
        );
    }

    #[test]
    fn members_too_long_for_the_store_are_refused() {
        assert!(check_member(b"k", &[0; 100]).is_ok());
        assert!(check_member(b"k", &vec![0; stitchdb::MAX_KEY_LEN]).is_err());
    }
}
