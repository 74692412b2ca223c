//! The control file's protocol (docs/kvfs.md, "Control directory"): each write(2) at offset
//! 0 is one command line, parsed here into a [`Command`]; the reply is one line read back at
//! offset 0 from the same open file: `ok\n`, `ok VALUE\n` or `err ERRNO-NAME message\n`
//! (`txn summary`'s value is lines of their own, after `ok\n`).
//! A failed command also fails its write(2) with that errno.

use stitchdb::PatchGroupError;

/// The longest command accepted (a longer write is `EINVAL`).
pub const MAX_COMMAND: usize = 4096;

/// A patchgroup's id as the protocol spells it (the engine's `GroupId`).
pub type Gid = u64;

/// A command of the control file: the first word names the subsystem, whose commands are an
/// enum of their own (a new subsystem adds a variant here and its words to [`parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `pg ...`: patchgroups.
    Pg(PgCommand),
    /// `txn ...`: transactions.
    Txn(TxnCommand),
}

/// The transaction commands. A transaction belongs to the control file handle that began it:
/// the handle's last close aborts it if it is still open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnCommand {
    /// `txn begin snapshot|serializable`: a new transaction; the reply is its id, and its
    /// tree is `/.stitch/txns/ID`.
    Begin { serializable: bool },
    /// `txn summary ID`: what it changed so far, a line each: `added PATH`, `changed PATH`,
    /// `removed PATH`, then `bytes N`.
    Summary(u64),
    /// `txn commit ID`: commits it, durably; a conflict fails with `EBUSY`, naming a path.
    Commit(u64),
    /// `txn abort ID`: drops it.
    Abort(u64),
}

/// The patchgroup commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgCommand {
    /// `pg create`: a group owned by the calling process, closed when it exits;
    /// `pg create detached`: a group owned by no process, open until `pg close`.
    Create { detached: bool },
    /// `pg depend AFTER BEFORE`: AFTER's changes reach the disk after BEFORE's.
    Depend { after: Gid, before: Gid },
    /// `pg engage G`: the calling process's changes belong to G from now on.
    Engage(Gid),
    /// `pg disengage G`: ends one engagement of G by the calling process.
    Disengage(Gid),
    /// `pg sync G`: G's changes (and what they follow) are durable when it answers.
    Sync(Gid),
    /// `pg close G`: forgets G (its changes still reach the disk in order).
    Close(Gid),
}

/// Why a command failed: the errno its write(2) fails with, and the reply's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandError {
    /// The errno.
    pub errno: i32,
    /// What went wrong, for people.
    pub message: String,
}

impl CommandError {
    /// A failure with `errno`.
    pub fn new(errno: i32, message: impl Into<String>) -> CommandError {
        CommandError {
            errno,
            message: message.into(),
        }
    }

    /// The errno and message of the engine's refusal (the table of docs/kvfs.md).
    pub fn from_engine(e: &stitchdb::Error) -> CommandError {
        let errno = match e {
            stitchdb::Error::PatchGroup(pg) => match pg {
                PatchGroupError::Unknown(_) => libc::ENOENT,
                PatchGroupError::Sealed(_) => libc::EINVAL,
                PatchGroupError::Engaged(_) => libc::EBUSY,
                // Both are the rule that makes cycles unconstructable.
                PatchGroupError::DependenciesFixed(_) | PatchGroupError::SelfDependency(_) => {
                    libc::ELOOP
                }
                PatchGroupError::Patch(_) => libc::EIO,
            },
            stitchdb::Error::Closed => libc::EIO,
            _ => libc::EIO,
        };
        if errno == libc::EIO {
            tracing::error!("patchgroup command failed: {e}");
        }
        CommandError::new(errno, e.to_string())
    }
}

fn invalid(message: impl Into<String>) -> CommandError {
    CommandError::new(libc::EINVAL, message)
}

/// Parses one command line (a trailing newline is allowed; words are separated by spaces).
pub fn parse(bytes: &[u8]) -> Result<Command, CommandError> {
    if bytes.len() > MAX_COMMAND {
        return Err(invalid(format!("a command is at most {MAX_COMMAND} bytes")));
    }
    let line = std::str::from_utf8(bytes).map_err(|_| invalid("a command is UTF-8 text"))?;
    let line = line.strip_suffix('\n').unwrap_or(line);
    if line.contains('\n') {
        return Err(invalid("one command per write"));
    }
    let words: Vec<&str> = line.split_ascii_whitespace().collect();
    let id = |w: &str| {
        w.parse::<u64>()
            .map_err(|_| invalid(format!("{w:?} is not a transaction id")))
    };
    let gid = |w: &str| {
        w.parse::<Gid>()
            .map_err(|_| invalid(format!("{w:?} is not a patchgroup id")))
    };
    match words.as_slice() {
        ["pg", "create"] => Ok(Command::Pg(PgCommand::Create { detached: false })),
        ["pg", "create", "detached"] => Ok(Command::Pg(PgCommand::Create { detached: true })),
        ["pg", "depend", after, before] => Ok(Command::Pg(PgCommand::Depend {
            after: gid(after)?,
            before: gid(before)?,
        })),
        ["pg", "engage", g] => Ok(Command::Pg(PgCommand::Engage(gid(g)?))),
        ["pg", "disengage", g] => Ok(Command::Pg(PgCommand::Disengage(gid(g)?))),
        ["pg", "sync", g] => Ok(Command::Pg(PgCommand::Sync(gid(g)?))),
        ["pg", "close", g] => Ok(Command::Pg(PgCommand::Close(gid(g)?))),
        ["txn", "begin", "snapshot"] => Ok(Command::Txn(TxnCommand::Begin {
            serializable: false,
        })),
        ["txn", "begin", "serializable"] => Ok(Command::Txn(TxnCommand::Begin {
            serializable: true,
        })),
        ["txn", "summary", t] => Ok(Command::Txn(TxnCommand::Summary(id(t)?))),
        ["txn", "commit", t] => Ok(Command::Txn(TxnCommand::Commit(id(t)?))),
        ["txn", "abort", t] => Ok(Command::Txn(TxnCommand::Abort(id(t)?))),
        ["txn", ..] => Err(invalid(
            "usage: txn begin snapshot|serializable | txn summary|commit|abort ID",
        )),
        ["pg", ..] => Err(invalid(
            "usage: pg create [detached] | pg depend AFTER BEFORE | pg engage|disengage|sync|close G",
        )),
        _ => Err(invalid("unknown command")),
    }
}

/// The reply line of a command's outcome.
pub fn reply(outcome: &Result<Option<String>, CommandError>) -> Vec<u8> {
    match outcome {
        Ok(None) => b"ok\n".to_vec(),
        // A value of lines (a summary) starts on the line after `ok`.
        Ok(Some(v)) if v.contains('\n') => format!("ok\n{v}").into_bytes(),
        Ok(Some(v)) => format!("ok {v}\n").into_bytes(),
        Err(e) => {
            // One line, whatever the message holds.
            let message = e.message.replace('\n', " ");
            format!("err {} {message}\n", errno_name(e.errno)).into_bytes()
        }
    }
}

/// The symbolic name of the errnos commands answer.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EINVAL => "EINVAL",
        libc::ENOENT => "ENOENT",
        libc::EBUSY => "EBUSY",
        libc::ELOOP => "ELOOP",
        libc::EPERM => "EPERM",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::ESRCH => "ESRCH",
        libc::EROFS => "EROFS",
        libc::ENOSPC => "ENOSPC",
        libc::EACCES => "EACCES",
        _ => "EIO",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_and_garbage_is_einval() {
        assert_eq!(
            parse(b"pg create\n"),
            Ok(Command::Pg(PgCommand::Create { detached: false }))
        );
        assert_eq!(
            parse(b"pg depend 3 2"),
            Ok(Command::Pg(PgCommand::Depend {
                after: 3,
                before: 2
            }))
        );
        assert_eq!(
            parse(b"pg  engage   7\n"),
            Ok(Command::Pg(PgCommand::Engage(7)))
        );
        for bad in [
            &b""[..],
            b"\n",
            b"pg",
            b"pg engage",
            b"pg engage x",
            b"pg engage -1",
            b"pg engage 1 2",
            b"pg create\npg create\n",
            b"txn begin",
            b"txn begin later",
            b"txn commit",
            b"txn commit x",
            b"txn abort 1 2",
            b"\xff\xfe",
            &[b'a'; MAX_COMMAND + 1],
        ] {
            assert_eq!(
                parse(bad).map_err(|e| e.errno),
                Err(libc::EINVAL),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn transaction_commands_parse() {
        assert_eq!(
            parse(b"txn begin serializable\n"),
            Ok(Command::Txn(TxnCommand::Begin { serializable: true }))
        );
        assert_eq!(
            parse(b"txn commit 7"),
            Ok(Command::Txn(TxnCommand::Commit(7)))
        );
        assert_eq!(
            parse(b"txn summary 7"),
            Ok(Command::Txn(TxnCommand::Summary(7)))
        );
    }

    #[test]
    fn replies_are_one_line_but_summaries() {
        assert_eq!(reply(&Ok(Some("12".into()))), b"ok 12\n");
        assert_eq!(
            reply(&Ok(Some("added /a\nbytes 1\n".into()))),
            b"ok\nadded /a\nbytes 1\n"
        );
        assert_eq!(reply(&Ok(None)), b"ok\n");
        let e = CommandError::new(libc::EINVAL, "a\nb");
        assert_eq!(reply(&Err(e)), b"err EINVAL a b\n");
    }
}
