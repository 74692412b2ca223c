//! How Redis values are laid out over ordered tables (specified in `docs/format.md`, "Redis
//! keyspace"), as Kvrocks and SableDB lay them out over RocksDB:
//!
//! - one **metadata record** per key in the database's `keys` table: its type, expiry, and a
//!   string's value inline, or a collection's version and size (and a list's ends);
//! - a collection's **members** in the `members` table, each under the key's length, the key,
//!   the collection's version and a tag, so a collection's members are one contiguous range
//!   that one range delete removes (`DEL` of any collection is O(1));
//! - an **expiry index** in the `expires` table: the deadline then the key, so the keys due
//!   are a prefix of the table.

/// The format of metadata records this code writes (byte 0 of each).
pub const META_FORMAT: u8 = 1;

/// A Redis value's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string (and a bitmap, and a number).
    String,
    /// A hash.
    Hash,
    /// A list.
    List,
    /// A set.
    Set,
    /// A sorted set.
    ZSet,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::String => 0,
            Kind::Hash => 1,
            Kind::List => 2,
            Kind::Set => 3,
            Kind::ZSet => 4,
        }
    }

    fn from_code(c: u8) -> Option<Kind> {
        Some(match c {
            0 => Kind::String,
            1 => Kind::Hash,
            2 => Kind::List,
            3 => Kind::Set,
            4 => Kind::ZSet,
            _ => return None,
        })
    }

    /// The name `TYPE` replies with.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
        }
    }
}

/// A collection's header: which members are its own, how many, and a list's ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collection {
    /// Members are stored under this version; a new collection under the same key gets a new
    /// one, so members of an old one still waiting to be reclaimed never show through.
    pub version: u64,
    /// Members (fields, elements).
    pub size: u64,
    /// A list's first element's index, and the index past its last (`head..tail`); both 0
    /// for other types. Lists start in the middle of the index space (`LIST_ORIGIN`), so
    /// pushes at either end never run out of room.
    pub head: u64,
    /// See `head`.
    pub tail: u64,
}

/// The middle of a list's index space, where a new list's first element goes.
pub const LIST_ORIGIN: u64 = 1 << 63;

/// What a key's metadata record holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// The value's type.
    pub kind: Kind,
    /// When the key expires (Unix milliseconds), if it does.
    pub expire_at: Option<u64>,
    /// A string's value, or a collection's header.
    pub body: Body,
}

/// A string's value or a collection's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// The string's bytes, inline.
    String(Vec<u8>),
    /// A collection's header; its members are in the `members` table.
    Collection(Collection),
}

impl Meta {
    /// A string without expiry.
    pub fn string(value: Vec<u8>) -> Meta {
        Meta {
            kind: Kind::String,
            expire_at: None,
            body: Body::String(value),
        }
    }

    /// An empty collection of `kind` under `version`, without expiry.
    pub fn collection(kind: Kind, version: u64) -> Meta {
        let origin = if kind == Kind::List { LIST_ORIGIN } else { 0 };
        Meta {
            kind,
            expire_at: None,
            body: Body::Collection(Collection {
                version,
                size: 0,
                head: origin,
                tail: origin,
            }),
        }
    }

    /// Whether the key has expired at `now` (Unix milliseconds).
    pub fn expired(&self, now: u64) -> bool {
        self.expire_at.is_some_and(|at| at <= now)
    }

    /// A collection's header (`None` for a string).
    pub fn coll(&self) -> Option<&Collection> {
        match &self.body {
            Body::Collection(c) => Some(c),
            Body::String(_) => None,
        }
    }

    /// A collection's header, to change (`None` for a string).
    pub fn coll_mut(&mut self) -> Option<&mut Collection> {
        match &mut self.body {
            Body::Collection(c) => Some(c),
            Body::String(_) => None,
        }
    }

    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let extra = match &self.body {
            Body::String(v) => v.len(),
            Body::Collection(_) => 32,
        };
        let mut out = Vec::with_capacity(10 + extra);
        out.push(META_FORMAT);
        out.push(self.kind.code());
        out.extend_from_slice(&self.expire_at.unwrap_or(0).to_be_bytes());
        match &self.body {
            Body::String(v) => out.extend_from_slice(v),
            Body::Collection(c) => {
                for n in [c.version, c.size, c.head, c.tail] {
                    out.extend_from_slice(&n.to_be_bytes());
                }
            }
        }
        out
    }

    /// Reads a record, or says what is wrong with it.
    pub fn decode(b: &[u8]) -> Result<Meta, String> {
        if b.len() < 10 {
            return Err(format!("a metadata record of {} bytes", b.len()));
        }
        if b[0] != META_FORMAT {
            return Err(format!(
                "metadata format {} (this build reads {META_FORMAT})",
                b[0]
            ));
        }
        let kind = Kind::from_code(b[1]).ok_or_else(|| format!("unknown type code {}", b[1]))?;
        let expire = be64(&b[2..10]);
        let body = if kind == Kind::String {
            Body::String(b[10..].to_vec())
        } else {
            if b.len() != 42 {
                return Err(format!("a collection header of {} bytes", b.len()));
            }
            Body::Collection(Collection {
                version: be64(&b[10..18]),
                size: be64(&b[18..26]),
                head: be64(&b[26..34]),
                tail: be64(&b[34..42]),
            })
        };
        Ok(Meta {
            kind,
            expire_at: (expire != 0).then_some(expire),
            body,
        })
    }
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Tags that follow the version in a member's key, one per kind of member record.
pub mod tag {
    /// A hash's field; the record's value is the field's value.
    pub const FIELD: u8 = b'f';
    /// A set's member; the value is empty.
    pub const MEMBER: u8 = b'm';
    /// A list's element, under its index (8 bytes, big-endian); the value is the element.
    pub const INDEX: u8 = b'i';
    /// A sorted set's member; the value is its score (`score_key`'s 8 bytes).
    pub const ZMEMBER: u8 = b'z';
    /// A sorted set's score (8 bytes, `score_key`) then member; the value is empty. This
    /// index orders the members by score, then by member bytes, as Redis orders them.
    pub const ZSCORE: u8 = b's';
}

/// The prefix every member of `key`'s collection at `version` shares.
pub fn members_prefix(key: &[u8], version: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + key.len());
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&version.to_be_bytes());
    out
}

/// The prefix of the member records of one `tag` of a collection.
pub fn tag_prefix(key: &[u8], version: u64, tag: u8) -> Vec<u8> {
    let mut out = members_prefix(key, version);
    out.push(tag);
    out
}

/// The member record's key: the collection's prefix, `tag`, then `member`.
pub fn member_key(key: &[u8], version: u64, tag: u8, member: &[u8]) -> Vec<u8> {
    let mut out = tag_prefix(key, version, tag);
    out.extend_from_slice(member);
    out
}

/// The least key greater than every key starting with `prefix` (`None`: there is none).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A score as 8 bytes that sort as the scores do (-inf first, +inf last; -0 as 0).
pub fn score_key(score: f64) -> [u8; 8] {
    let score = if score == 0.0 { 0.0 } else { score };
    let bits = score.to_bits();
    let ordered = if bits >> 63 == 1 {
        !bits
    } else {
        bits ^ (1 << 63)
    };
    ordered.to_be_bytes()
}

/// The score `score_key` encoded.
pub fn score_from_key(b: &[u8]) -> f64 {
    let ordered = be64(b);
    let bits = if ordered >> 63 == 1 {
        ordered ^ (1 << 63)
    } else {
        !ordered
    };
    f64::from_bits(bits)
}

/// A list element's index as the 8 bytes after its tag.
pub fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// The expiry index's key for `key` expiring at `at`.
pub fn expiry_key(at: u64, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + key.len());
    out.extend_from_slice(&at.to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// The deadline and key an expiry index key holds.
pub fn split_expiry_key(b: &[u8]) -> Option<(u64, &[u8])> {
    (b.len() >= 8).then(|| (be64(&b[..8]), &b[8..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_records_round_trip() {
        let mut m = Meta::collection(Kind::List, 7);
        m.expire_at = Some(123);
        m.coll_mut().unwrap().size = 3;
        assert_eq!(Meta::decode(&m.encode()).unwrap(), m);
        let s = Meta::string(b"hello".to_vec());
        assert_eq!(Meta::decode(&s.encode()).unwrap(), s);
        assert!(Meta::decode(b"\x02\x00").is_err());
        assert!(Meta::decode(&[1, 9, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }

    #[test]
    fn scores_sort_as_numbers() {
        let scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -f64::MIN_POSITIVE,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            1.5,
            1e300,
            f64::INFINITY,
        ];
        for w in scores.windows(2) {
            assert!(score_key(w[0]) < score_key(w[1]), "{} < {}", w[0], w[1]);
        }
        for s in scores {
            assert_eq!(score_from_key(&score_key(s)), s);
        }
        assert_eq!(score_key(-0.0), score_key(0.0));
    }

    #[test]
    fn a_prefix_end_bounds_exactly_the_prefix() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff\xff"), None);
    }
}
