//! [`Surface`]: what the host needs of anything it serves over the store (the mount, the
//! Redis server, the process's signals): a way to wait for its end, and a way to ask it to
//! stop. Closures rather than a trait, so a surface of any crate plugs in without this
//! crate knowing its type.

/// Asks a surface to stop; callable from any thread, more than once, and harmless once the
/// surface has ended (the host may ask one whose end it has not heard of yet).
pub(crate) type Stop = Box<dyn Fn() + Send + Sync>;

/// Blocks until the surface has ended (by itself, or after a [`Stop`]), with everything it
/// served finished; its error, if it failed.
pub(crate) type Wait = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// Something served over the store that ends by itself (a client's `SHUTDOWN`, an
/// `umount`) or when asked to.
pub struct Surface {
    name: String,
    stop: Stop,
    wait: Wait,
}

impl Surface {
    /// A surface called `name` in log lines ("mount /mnt/s", "redis 127.0.0.1:6379"), which
    /// `stop` asks to end (from any thread, more than once, maybe after it ended by itself)
    /// and `wait` waits for, returning once everything it served is finished.
    pub fn new(
        name: impl Into<String>,
        stop: impl Fn() + Send + Sync + 'static,
        wait: impl FnOnce() -> Result<(), String> + Send + 'static,
    ) -> Surface {
        Surface {
            name: name.into(),
            stop: Box::new(stop),
            wait: Box::new(wait),
        }
    }

    /// Its parts: the name, the stop and the wait.
    pub(crate) fn into_parts(self) -> (String, Stop, Wait) {
        (self.name, self.stop, self.wait)
    }
}
