//! What `SCAN`, `HSCAN`, `SSCAN` and `ZSCAN` share: their cursor and options, and their reply.
//! Each walks its own ordered source from where the cursor stands (see
//! `keyspace::cursors`).

use super::{args, Failure};
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;

/// A scan call's arguments.
pub struct ScanArgs {
    /// Where to continue: after this position (`None`: from the start).
    pub after: Option<Vec<u8>>,
    /// `MATCH pattern`.
    pub pattern: Option<Vec<u8>>,
    /// `COUNT n` (10): about how many elements to look at.
    pub count: usize,
    /// `TYPE t` (`SCAN` only).
    pub kind: Option<Vec<u8>>,
}

impl ScanArgs {
    /// Reads the cursor at `a[at]` and the options after it (`TYPE` only if `allow_type`).
    pub fn parse(
        ctx: &Ctx<'_>,
        a: &[Vec<u8>],
        at: usize,
        allow_type: bool,
    ) -> Result<ScanArgs, Failure> {
        let cursor: u64 = std::str::from_utf8(&a[at])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| args::err("ERR invalid cursor"))?;
        let mut out = ScanArgs {
            after: ctx.ks.cursors.resume(cursor),
            pattern: None,
            count: 10,
            kind: None,
        };
        let mut i = at + 1;
        while i < a.len() {
            let value = a.get(i + 1).ok_or_else(args::syntax)?;
            if args::is(&a[i], "count") {
                let n = args::int(value)?;
                if n < 1 {
                    return Err(args::syntax());
                }
                out.count = n as usize;
            } else if args::is(&a[i], "match") {
                // `*` matches everything: skip the matching.
                out.pattern = (value.as_slice() != b"*").then(|| value.clone());
            } else if allow_type && args::is(&a[i], "type") {
                out.kind = Some(value.to_ascii_lowercase());
            } else {
                return Err(args::syntax());
            }
            i += 2;
        }
        Ok(out)
    }

    /// Whether `name` passes `MATCH`.
    pub fn matches(&self, name: &[u8]) -> bool {
        self.pattern
            .as_ref()
            .is_none_or(|p| args::glob(p, name, false))
    }
}

/// The reply: the next cursor (0 when `resume_after` is `None`: the scan is done) and the
/// elements.
pub fn reply(ctx: &Ctx<'_>, resume_after: Option<Vec<u8>>, items: Vec<Reply>) -> Reply {
    let cursor = resume_after.map_or(0, |p| ctx.ks.cursors.save(p));
    Reply::Array(vec![Reply::bulk(cursor.to_string()), Reply::Array(items)])
}
