//! Shared by the transaction tests: running a step that must wait for a lock.

/// Runs `step` on another thread and checks that it waits (for a lock); then runs
/// `unblock` here, and returns what `step` did once it could go on.
pub fn waits<T: Send>(step: impl FnOnce() -> T + Send, unblock: impl FnOnce()) -> T {
    std::thread::scope(|s| {
        let waiting = s.spawn(step);
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!waiting.is_finished(), "the step should wait for a lock");
        unblock();
        waiting.join().unwrap()
    })
}
