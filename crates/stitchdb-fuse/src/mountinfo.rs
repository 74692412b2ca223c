//! `/proc/self/mountinfo`: the mounts this process sees, by mount point.

use std::path::Path;

/// The mounts in `/proc/self/mountinfo`, oldest first: each one's device (`MAJOR:MINOR`) and
/// mount point (unescaped). Empty if it cannot be read.
pub fn mounts() -> Vec<(String, String)> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    info.lines()
        .filter_map(|l| {
            let mut fields = l.split(' ');
            let dev = fields.nth(2)?;
            let mount_point = fields.nth(1)?;
            Some((dev.to_string(), unescape(mount_point)))
        })
        .collect()
}

/// Whether `path` is a mount point now.
pub fn is_mount_point(path: &Path) -> bool {
    // A dead FUSE mount cannot even be resolved: look for the path as given.
    let canon = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let want = canon.to_string_lossy();
    mounts().iter().any(|(_, mp)| *mp == want)
}

/// Mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_a_mount_point_and_names_are_unescaped() {
        assert!(is_mount_point(Path::new("/")));
        assert!(mounts()
            .iter()
            .any(|(dev, mp)| mp == "/" && dev.contains(':')));
        assert_eq!(unescape("a\\040b\\011c\\012d\\134e"), "a b\tc\nd\\e");
    }
}
