//! This process's device writes and peak memory, from Linux's `/proc/self` (`None` elsewhere,
//! or where the kernel does not keep I/O accounting).

use std::fs;

/// Bytes this process has sent toward the storage device: `write_bytes` in `/proc/self/io`
/// (counted when pages are dirtied or direct I/O is issued, so it includes data still waiting
/// for writeback) less `cancelled_write_bytes` (dirty data of files deleted or truncated
/// before writeback, which never lands). `bench/compare.py` measures other processes the same
/// way.
pub fn device_write_bytes() -> Option<u64> {
    let io = fs::read_to_string("/proc/self/io").ok()?;
    let written = field(&io, "write_bytes:")?;
    let cancelled = field(&io, "cancelled_write_bytes:").unwrap_or(0);
    Some(written.saturating_sub(cancelled))
}

/// The peak resident set size in bytes (`VmHWM` in `/proc/self/status`).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    field(&status, "VmHWM:").map(|kib| kib * 1024)
}

/// "2 * Intel(R) Xeon(R) ..." like db_bench's `CPU:` line, from `/proc/cpuinfo`.
pub fn cpu_description() -> Option<String> {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").ok()?;
    let models: Vec<&str> = cpuinfo
        .lines()
        .filter_map(|line| line.strip_prefix("model name"))
        .filter_map(|rest| rest.split_once(':'))
        .map(|(_, model)| model.trim())
        .collect();
    Some(format!("{} * {}", models.len(), models.first()?))
}

/// The number after `name` on the line that starts with it (`VmHWM:   1234 kB` gives 1234).
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_found_by_their_line_prefix() {
        let status = "VmPeak:\t  10 kB\nVmHWM:\t    1234 kB\n";
        assert_eq!(field(status, "VmHWM:"), Some(1234));
        assert_eq!(field("write_bytes: 4096\n", "write_bytes:"), Some(4096));
        assert_eq!(field("cancelled_write_bytes: 7\n", "write_bytes:"), None);
    }

    #[test]
    fn this_process_has_a_peak_rss() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_bytes().is_some_and(|b| b > 0));
        }
    }
}
