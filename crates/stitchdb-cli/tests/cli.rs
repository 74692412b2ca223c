//! Runs the built `stitchdb` binary against stores in temporary directories.

#![allow(clippy::unwrap_used)]

mod support;

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::run_with_input;
use tempfile::TempDir;

fn run<S: AsRef<OsStr>>(args: &[S]) -> Output {
    run_with_input(args, b"")
}

fn describe(args: &[impl AsRef<OsStr>], out: &Output) -> String {
    let args: Vec<_> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    format!(
        "stitchdb {}: {}\nstdout: {}\nstderr: {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs a command that must succeed; returns its stdout.
fn ok<S: AsRef<OsStr>>(args: &[S]) -> Vec<u8> {
    let out = run(args);
    assert!(out.status.success(), "{}", describe(args, &out));
    out.stdout
}

fn ok_text<S: AsRef<OsStr>>(args: &[S]) -> String {
    String::from_utf8(ok(args)).unwrap()
}

// The exit statuses the README documents; scripts depend on these numbers.
const NOT_FOUND: i32 = 1;
const USAGE: i32 = 2;
const FAILED: i32 = 3;
const CORRUPT: i32 = 4;
const LOCKED: i32 = 5;
const PERMISSION: i32 = 6;
const MISSING: i32 = 7;

/// Runs a command that must fail with exit status `status`; returns its stderr.
fn fails<S: AsRef<OsStr>>(status: i32, args: &[S]) -> String {
    fails_with_input(status, args, b"")
}

fn fails_with_input<S: AsRef<OsStr>>(status: i32, args: &[S], stdin: &[u8]) -> String {
    let out = run_with_input(args, stdin);
    assert_eq!(out.status.code(), Some(status), "{}", describe(args, &out));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.starts_with("stitchdb: error: "), "{stderr}");
    stderr
}

/// Runs `stitchdb ARGS` with the files it writes limited to `blocks` (`ulimit -f` units of the
/// shell), so that a file it grows fills up as on a full disk: writes past the limit fail
/// (EFBIG) instead of killing the process, as SIGXFSZ is ignored.
fn run_with_file_limit<S: AsRef<OsStr>>(blocks: u32, args: &[S]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -f {blocks} && trap '' XFSZ && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_stitchdb"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("start sh")
}

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A temporary directory with a new, empty store in it.
struct Fixture {
    dir: TempDir,
    store: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("test.store");
        ok(&[OsStr::new("init"), store.as_os_str()]);
        Fixture { dir, store }
    }

    /// `stitchdb COMMAND STORE ARGS...`
    fn args(&self, command: &str, rest: &[&str]) -> Vec<std::ffi::OsString> {
        let mut args = vec![command.into(), self.store.clone().into_os_string()];
        args.extend(rest.iter().map(Into::into));
        args
    }

    fn ok(&self, command: &str, rest: &[&str]) -> String {
        ok_text(&self.args(command, rest))
    }

    fn fails(&self, status: i32, command: &str, rest: &[&str]) -> String {
        fails(status, &self.args(command, rest))
    }

    fn file(&self, name: &str, contents: &[u8]) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        path.to_str().unwrap().to_string()
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }

    fn import(&self, contents: &[u8], rest: &[&str]) -> String {
        let file = self.file("input.tsv", contents);
        let mut args = vec![file.as_str()];
        args.extend(rest);
        self.ok("import", &args)
    }
}

// ---- init, put, get, del ------------------------------------------------------------------

#[test]
fn init_creates_a_store_and_refuses_an_existing_path() {
    let f = Fixture::new();
    assert!(f.store.is_file());
    let err = f.fails(FAILED, "init", &[]);
    assert!(err.contains("already exists"), "{err}");

    let other = f.file("not-a-store", b"hello");
    let err = fails(FAILED, &["init", &other]);
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(
        std::fs::read(&other).unwrap(),
        b"hello",
        "init must not touch an existing file"
    );
}

#[test]
fn init_takes_a_zone_size_and_rejects_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("small.store");
    let store = store.to_str().unwrap();
    ok(&["init", store, "--zone-size", "1048576"]);
    ok(&["put", store, "k", "v"]);
    assert_eq!(ok_text(&["get", store, "k"]), "v\n");

    let bad = dir.path().join("bad.store");
    let err = fails(
        USAGE,
        &["init", bad.to_str().unwrap(), "--zone-size", "1000"],
    );
    assert!(err.contains("zone size"), "{err}");
}

#[test]
fn a_failed_init_leaves_no_file_behind() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("new.store");
    let store_arg = store.to_str().unwrap();
    // The disk fills while the store is made (its first zone alone is 8 MiB).
    let args = ["init", store_arg];
    let out = run_with_file_limit(1000, &args);
    assert_eq!(out.status.code(), Some(FAILED), "{}", describe(&args, &out));
    assert!(!store.exists(), "{}", describe(&args, &out));
    // A bad option is refused before any file is made.
    let err = fails(USAGE, &["init", store_arg, "--zone-size", "1000"]);
    assert!(err.contains("zone size 1000"), "{err}");
    assert_eq!(entries(dir.path()), Vec::<String>::new());
    // So init simply works the next time.
    ok(&["init", store_arg]);
    ok(&["put", store_arg, "k", "v"]);
    assert_eq!(ok_text(&["get", store_arg, "k"]), "v\n");
}

#[test]
fn put_get_del() {
    let f = Fixture::new();
    f.ok("put", &["greeting", "hello world"]);
    assert_eq!(f.ok("get", &["greeting"]), "hello world\n");
    f.ok("put", &["greeting", "bye"]);
    assert_eq!(f.ok("get", &["greeting"]), "bye\n");
    f.ok("del", &["greeting"]);
    f.fails(NOT_FOUND, "get", &["greeting"]);
    f.ok("del", &["never-there"]);
}

#[test]
fn a_large_value_is_put_from_a_file_and_read_back_by_range() {
    let f = Fixture::new();
    let value: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let file = f.file("big", &value);
    f.ok("put", &["big", "--from-file", &file]);
    let out = ok(&f.args("get", &["big", "--range", "2999990:100"]));
    assert_eq!(out, &value[2_999_990..]);
    let out = ok(&f.args("get", &["big", "--range", "1000000:4096"]));
    assert_eq!(out, &value[1_000_000..1_004_096]);
    assert!(ok(&f.args("get", &["big", "--range", "3000000:5"])).is_empty());
    let mut whole = value.clone();
    whole.push(b'\n');
    assert_eq!(ok(&f.args("get", &["big"])), whole);
    f.ok("put", &["small", "hello"]);
    assert_eq!(ok(&f.args("get", &["small", "--range", "1:2"])), b"el");
    f.fails(NOT_FOUND, "get", &["none", "--range", "0:1"]);
    // Usage errors clap finds (its own message, status 2).
    for bad in [
        f.args("get", &["big", "--range", "10"]),
        f.args("get", &["big", "--range", "1:x"]),
        f.args("put", &["big"]),
        f.args("put", &["big", "v", "--from-file", &file]),
    ] {
        assert_eq!(run(&bad).status.code(), Some(USAGE), "{bad:?}");
    }
    let err = f.fails(MISSING, "put", &["big", "--from-file", "/nonexistent/file"]);
    assert!(err.contains("/nonexistent/file"), "{err}");
    f.ok("check", &[]);
}

#[test]
fn get_of_a_missing_key_exits_1_saying_not_found() {
    let f = Fixture::new();
    let err = f.fails(NOT_FOUND, "get", &["nope"]);
    assert!(err.contains("not found"), "{err}");
    assert!(err.contains("\"nope\""), "{err}");
}

#[test]
fn keys_and_values_from_the_command_line_are_raw_bytes() {
    let f = Fixture::new();
    // Any bytes but NUL, which no command-line argument can hold.
    let key = OsStr::from_bytes(b"bin\x01\xff");
    let value = OsStr::from_bytes(b"\x01\t\xfe\n");
    let store = f.store.as_os_str();
    ok(&[OsStr::new("put"), store, key, value]);
    assert_eq!(ok(&[OsStr::new("get"), store, key]), b"\x01\t\xfe\n\n");
    assert_eq!(f.ok("scan", &[]), "bin\\x01\\xff\t\\x01\\t\\xfe\\n\n");
}

#[test]
fn a_missing_store_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("absent.store");
    let err = fails(MISSING, &["get", store.to_str().unwrap(), "k"]);
    assert!(err.contains("absent.store"), "{err}");
}

// ---- exit statuses and escaped keys ---------------------------------------------------------

#[test]
fn each_exit_status_means_what_the_readme_says() {
    let f = Fixture::new();
    f.ok("put", &["k", "v"]);
    assert_eq!(f.ok("get", &["k"]), "v\n");
    let err = f.fails(NOT_FOUND, "get", &["absent"]);
    assert!(err.contains("not found"), "{err}");

    // Usage: what clap finds, and what the tool finds (a bad escape).
    let args = f.args("get", &[]);
    assert_eq!(run(&args).status.code(), Some(USAGE));
    let err = f.fails(USAGE, "get", &["--escaped", "bad\\q"]);
    assert!(err.contains("KEY: invalid escape \"\\q\""), "{err}");
    let err = f.fails(USAGE, "scan", &["--escaped", "--start", "\\x4"]);
    assert!(err.contains("--start: invalid escape"), "{err}");

    let input = f.file("bad.tsv", b"no tab\n");
    f.fails(FAILED, "import", &[&input]);

    let junk = f.file("junk.store", &[0x5a; 16384]);
    let err = fails(CORRUPT, &["get", &junk, "k"]);
    assert!(err.contains("not a StitchDB store"), "{err}");

    let db = stitchdb::Db::open(&f.store, stitchdb::Options::default()).unwrap();
    f.fails(LOCKED, "get", &["k"]);
    f.fails(LOCKED, "put", &["k", "v2"]);
    db.close().unwrap();

    fails(MISSING, &["get", &f.path("absent.store"), "k"]);
    f.fails(MISSING, "get", &["k", "--table", "nope"]);
    f.fails(MISSING, "get", &["k", "--snapshot", "nope"]);
    let err = f.fails(MISSING, "import", &[&f.path("absent.tsv")]);
    assert!(err.contains("absent.tsv"), "{err}");
    assert_eq!(f.ok("get", &["k"]), "v\n");
}

#[test]
fn permission_denied_has_its_own_exit_status() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::process::CommandExt;
    let f = Fixture::new();
    std::fs::set_permissions(&f.store, std::fs::Permissions::from_mode(0o000)).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_stitchdb"));
    command.args(f.args("get", &["k"])).env_remove("RUST_LOG");
    // Root reads any file whatever its mode: run as nobody instead.
    if std::fs::metadata("/proc/self").unwrap().uid() == 0 {
        command.uid(65534).gid(65534);
    }
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(PERMISSION), "{stderr}");
    assert!(stderr.contains("permission denied"), "{stderr}");
}

#[test]
fn help_lists_the_exit_statuses() {
    for args in [vec!["--help"], vec!["get", "--help"]] {
        let help = ok_text(&args);
        for line in [
            "Exit status:",
            "  1  get: the key is not in the table",
            "  4  the store is damaged, or is not a StitchDB store",
            "  7  no such store, table, snapshot or input file",
        ] {
            assert!(help.contains(line), "{args:?} lacks {line:?}:\n{help}");
        }
    }
}

#[test]
fn keys_with_nul_bytes_round_trip_through_import_get_put_scan_and_delete() {
    let f = Fixture::new();
    f.import(b"a\\x00b\tnul\\x00value\nplain\tv\nz\\x00\t\\x00\n", &[]);
    assert_eq!(f.ok("get", &["--escaped", "a\\x00b"]), "nul\\x00value\n");
    // Without --escaped an argument is its bytes as they are: a backslash, an x ...
    f.fails(NOT_FOUND, "get", &["a\\x00b"]);

    f.ok("put", &["--escaped", "a\\x00c", "two\\nlines"]);
    // The value printed escaped stays on one line.
    assert_eq!(f.ok("get", &["--escaped", "a\\x00c"]), "two\\nlines\n");
    assert_eq!(
        f.ok("scan", &["--escaped", "--prefix", "a\\x00"]),
        "a\\x00b\tnul\\x00value\na\\x00c\ttwo\\nlines\n"
    );
    assert_eq!(
        keys(&f.ok(
            "scan",
            &["--escaped", "--start", "a\\x00c", "--end", "z\\x00"]
        )),
        ["a\\x00c", "plain"]
    );
    assert_eq!(
        f.ok("export", &["-", "--escaped", "--prefix", "z\\x00"]),
        "z\\x00\t\\x00\n"
    );

    f.ok("del", &["--escaped", "a\\x00b"]);
    f.ok("delete", &["--escaped", "z\\x00"]);
    f.fails(NOT_FOUND, "get", &["--escaped", "a\\x00b"]);
    assert_eq!(keys(&f.ok("scan", &[])), ["a\\x00c", "plain"]);
}

// ---- tables -------------------------------------------------------------------------------

/// What `tables` shows after a table's name when it has the default layout.
const DEFAULT_LAYOUT: &str = "\tmanaged -> quotient -> btree(node=4096) -> linear\n";

#[test]
fn a_table_takes_a_layout_and_refuses_what_it_cannot_hold() {
    let f = Fixture::new();
    f.ok(
        "create-table",
        &["ids", "--layout", "managed -> btree -> fixed(8)"],
    );
    let tables = f.ok("tables", &[]);
    assert!(
        tables.contains("ids\tmanaged -> btree(node=4096) -> fixed(size=8)\n"),
        "{tables}"
    );
    f.ok("put", &["k", "8 bytes!", "--table", "ids"]);
    let err = f.fails(FAILED, "put", &["k", "not 8 bytes", "--table", "ids"]);
    assert!(err.contains("its values are 8 bytes"), "{err}");
    assert_eq!(f.ok("get", &["k", "--table", "ids"]), "8 bytes!\n");
    let err = f.fails(
        USAGE,
        "create-table",
        &["bad", "--layout", "managed -> fixd(8)"],
    );
    assert!(err.contains("\"fixd\": unknown module"), "{err}");
    assert!(!f.ok("tables", &[]).contains("bad"));
    assert!(f
        .ok("stats", &[])
        .contains("layout managed -> btree(node=4096) -> fixed(size=8)"));
}

#[test]
fn a_cow_btree_table_is_made_written_scanned_checked_and_reopened() {
    let f = Fixture::new();
    f.ok("create-table", &["tree", "--layout", "cow-btree"]);
    assert!(f.ok("tables", &[]).contains("tree\tcow-btree(node=4096)\n"));
    for k in ["b", "a", "c"] {
        f.ok("put", &[k, "value", "--table", "tree"]);
    }
    f.ok("del", &["b", "--table", "tree"]);
    assert_eq!(keys(&f.ok("scan", &["--table", "tree"])), ["a", "c"]);
    f.ok("check", &[]);
    assert_eq!(f.ok("get", &["c", "--table", "tree"]), "value\n");
    let err = f.fails(
        USAGE,
        "create-table",
        &["bad", "--layout", "cow-btree(node=1000)"],
    );
    assert!(err.contains("not a power of two"), "{err}");
}

#[test]
fn a_partitioned_table_is_listed_once_and_its_regions_under_it_in_stats() {
    let f = Fixture::new();
    f.ok(
        "create-table",
        &[
            "parts",
            "--layout",
            r#"partition(at="g", at=0x70) -> [managed -> btree -> linear | managed -> fixed(8) | managed -> linear]"#,
        ],
    );
    let layout = "partition(at=\"g\", at=\"p\") -> [managed -> btree(node=4096) -> linear \
                  | managed -> fixed(size=8) | managed -> linear]";
    assert_eq!(
        f.ok("tables", &[]),
        format!("default{DEFAULT_LAYOUT}parts\t{layout}\n")
    );
    f.ok("put", &["a", "any", "--table", "parts"]);
    f.ok("put", &["h", "8 bytes!", "--table", "parts"]);
    let err = f.fails(FAILED, "put", &["i", "short", "--table", "parts"]);
    assert!(err.contains("region 2: "), "{err}");
    assert_eq!(keys(&f.ok("scan", &["--table", "parts"])), ["a", "h"]);
    let stats = f.ok("stats", &[]);
    assert!(stats.contains(&format!("layout {layout}")), "{stats}");
    assert!(
        stats.contains("    region 2") && stats.contains("layout managed -> fixed(size=8)"),
        "{stats}"
    );
    let err = f.fails(
        USAGE,
        "create-table",
        &[
            "bad",
            "--layout",
            r#"partition(at="g") -> [managed -> linear | managed -> fixd(8)]"#,
        ],
    );
    assert!(err.contains("region 2, module 2 \"fixd\""), "{err}");
}

#[test]
fn ctables_lists_each_column_with_its_table_and_layout() {
    let f = Fixture::new();
    assert_eq!(f.ok("ctables", &[]), "");
    let db = stitchdb::Db::open(&f.store, stitchdb::Options::default()).unwrap();
    db.create_row_ctable("r", &["a", "b"], "").unwrap();
    let columns = [("id", "managed -> btree -> array(8)"), ("note", "")];
    db.create_column_ctable("c", &columns).unwrap();
    db.close().unwrap();
    let row_layout = DEFAULT_LAYOUT.trim();
    assert_eq!(
        f.ok("ctables", &[]),
        format!(
            "c\tcolumn\tid\tc:id\tmanaged -> btree(node=4096) -> array(size=8)\n\
             c\tcolumn\tnote\tc:note\t{row_layout}\n\
             r\trow\ta\tr:rows\t{row_layout}\n\
             r\trow\tb\tr:rows\t{row_layout}\n"
        )
    );
    assert!(f
        .ok("tables", &[])
        .contains("c:id\tmanaged -> btree(node=4096) -> array(size=8)\n"));
}

#[test]
fn tables_are_created_listed_and_kept_apart() {
    let f = Fixture::new();
    assert_eq!(f.ok("tables", &[]), format!("default{DEFAULT_LAYOUT}"));
    f.ok("create-table", &["users"]);
    assert_eq!(
        f.ok("tables", &[]),
        format!("default{DEFAULT_LAYOUT}users{DEFAULT_LAYOUT}")
    );
    f.ok("put", &["k", "in users", "--table", "users"]);
    f.ok("put", &["k", "in default"]);
    assert_eq!(f.ok("get", &["k", "--table", "users"]), "in users\n");
    assert_eq!(f.ok("get", &["k"]), "in default\n");
    assert_eq!(f.ok("scan", &["--table", "users"]), "k\tin users\n");

    let err = f.fails(FAILED, "create-table", &["users"]);
    assert!(err.contains("already exists"), "{err}");
}

#[test]
fn using_a_missing_table_errors_clearly() {
    let f = Fixture::new();
    let err = f.fails(MISSING, "put", &["k", "v", "--table", "nope"]);
    assert!(err.contains("no table named \"nope\""), "{err}");
    assert!(err.contains("create-table"), "{err}");
    let err = f.fails(MISSING, "scan", &["--table", "nope"]);
    assert!(err.contains("no table named \"nope\""), "{err}");
}

// ---- scan ---------------------------------------------------------------------------------

fn scan_fixture() -> Fixture {
    let f = Fixture::new();
    // Out of order on purpose: scan must sort.
    f.import(b"b\t2\na\t1\nab\t12\nc\t3\nabc\t123\nb2\t22\n", &[]);
    f
}

fn keys(scan: &str) -> Vec<&str> {
    scan.lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect()
}

#[test]
fn scan_prints_all_pairs_in_key_order() {
    let f = scan_fixture();
    assert_eq!(
        f.ok("scan", &[]),
        "a\t1\nab\t12\nabc\t123\nb\t2\nb2\t22\nc\t3\n"
    );
}

#[test]
fn scan_by_prefix() {
    let f = scan_fixture();
    assert_eq!(keys(&f.ok("scan", &["--prefix", "a"])), ["a", "ab", "abc"]);
    assert_eq!(keys(&f.ok("scan", &["--prefix", "ab"])), ["ab", "abc"]);
    assert_eq!(keys(&f.ok("scan", &["--prefix", "b"])), ["b", "b2"]);
    assert_eq!(f.ok("scan", &["--prefix", "z"]), "");
}

#[test]
fn scan_by_range_start_inclusive_end_exclusive() {
    let f = scan_fixture();
    assert_eq!(
        keys(&f.ok("scan", &["--start", "ab", "--end", "b2"])),
        ["ab", "abc", "b"]
    );
    assert_eq!(keys(&f.ok("scan", &["--start", "b"])), ["b", "b2", "c"]);
    assert_eq!(keys(&f.ok("scan", &["--end", "ab"])), ["a"]);
    assert_eq!(
        keys(&f.ok("scan", &["--start", "aa", "--end", "ac"])),
        ["ab", "abc"]
    );
    assert_eq!(f.ok("scan", &["--start", "c", "--end", "a"]), "");
    assert_eq!(f.ok("scan", &["--start", "b", "--end", "b"]), "");
}

#[test]
fn scan_combines_prefix_range_and_limit() {
    let f = scan_fixture();
    assert_eq!(
        keys(&f.ok("scan", &["--prefix", "a", "--start", "ab"])),
        ["ab", "abc"]
    );
    assert_eq!(
        keys(&f.ok("scan", &["--prefix", "a", "--end", "abc"])),
        ["a", "ab"]
    );
    assert_eq!(
        keys(&f.ok("scan", &["--prefix", "a", "--start", "b"])),
        Vec::<&str>::new()
    );
    assert_eq!(keys(&f.ok("scan", &["--limit", "2"])), ["a", "ab"]);
    assert_eq!(
        keys(&f.ok("scan", &["--start", "b", "--limit", "1"])),
        ["b"]
    );
    assert_eq!(f.ok("scan", &["--limit", "0"]), "");
}

// ---- import and export --------------------------------------------------------------------

/// Canonical TSV (sorted, escaped the way export escapes) of awkward keys and values.
const AWKWARD_TSV: &[u8] = b"\
\t\\x00empty key\n\
back\\\\slash\tC:\\\\dir\\\\\n\
bin\\x01\\xff\\xfe\t\\x80\\x81 raw \\x7f\n\
crlf\\r\\n\tline one\\r\\nline two\n\
empty value\t\n\
tab\\tkey\tvalue\\twith\\ttabs\n\
unicode \xc3\xa9\xe6\x97\xa5\tcontrol \\xc2\\x85 and \xf0\x9f\xa6\x80\n";

#[test]
fn tsv_import_then_export_round_trips_exactly() {
    let f = Fixture::new();
    let out = f.import(AWKWARD_TSV, &[]);
    assert!(out.starts_with("imported 7 lines"), "{out}");
    assert_eq!(ok(&f.args("export", &[])), AWKWARD_TSV);

    // The escapes were decoded on the way in.
    let store = f.store.as_os_str();
    let get = |key: &[u8]| ok(&[OsStr::new("get"), store, OsStr::from_bytes(key)]);
    assert_eq!(get(b"bin\x01\xff\xfe"), b"\x80\x81 raw \x7f\n");
    assert_eq!(get(b"tab\tkey"), b"value\twith\ttabs\n");
    assert_eq!(get(b"crlf\r\n"), b"line one\r\nline two\n");
    assert_eq!(get(b"back\\slash"), b"C:\\dir\\\n");

    // And into a second store through a file.
    let exported = f.path("export.tsv");
    f.ok("export", &[&exported]);
    let g = Fixture::new();
    g.ok("import", &[&exported]);
    assert_eq!(ok(&g.args("export", &[])), AWKWARD_TSV);
}

#[test]
fn tsv_import_accepts_raw_bytes_and_crlf_lines() {
    let f = Fixture::new();
    f.import(b"raw\x01\xff\tv\r\n\r\nplain\tv2\n", &[]);
    assert_eq!(f.ok("scan", &[]), "plain\tv2\nraw\\x01\\xff\tv\n");
}

#[test]
fn jsonl_import_then_export_round_trips_exactly() {
    let jsonl = "{\"key\":\"a\",\"value\":\"plain\"}\n\
                 {\"key\":\"b \\\"quoted\\\"\",\"value\":\"line\\nbreak\\ttab\\\\\"}\n\
                 {\"key\":\"c\",\"value\":\"\"}\n\
                 {\"key\":\"\u{e9}\u{65e5}\",\"value\":\"\u{1f980} \\u0001\"}\n";
    let f = Fixture::new();
    let file = f.file("input.jsonl", jsonl.as_bytes());
    let out = f.ok("import", &[&file]);
    assert!(out.starts_with("imported 4 lines"), "{out}");
    assert_eq!(f.ok("export", &["--format", "jsonl"]), jsonl);
    assert_eq!(f.ok("get", &["b \"quoted\""]), "line\nbreak\ttab\\\n");

    // The format follows the file's extension both ways.
    let exported = f.path("out.jsonl");
    f.ok("export", &[&exported]);
    assert_eq!(std::fs::read_to_string(&exported).unwrap(), jsonl);
}

#[test]
fn jsonl_import_accepts_spaced_objects_and_any_field_order() {
    let f = Fixture::new();
    let file = f.file("in.json", b"{ \"value\": \"v\", \"key\": \"k\" }\n");
    f.ok("import", &[&file]);
    assert_eq!(f.ok("scan", &[]), "k\tv\n");
}

#[test]
fn jsonl_export_of_binary_data_is_an_error_suggesting_tsv() {
    let f = Fixture::new();
    f.import(b"ok\tfine\nzz\t\\xff\n", &[]);
    let err = f.fails(FAILED, "export", &["--format", "jsonl"]);
    assert!(
        err.contains("not UTF-8") && err.contains("--format tsv"),
        "{err}"
    );
    assert!(err.contains("\"zz\""), "{err}");
}

#[test]
fn import_reads_stdin() {
    let f = Fixture::new();
    let out = run_with_input(&f.args("import", &["-"]), b"k1\tv1\nk2\tv2\n");
    assert!(
        out.status.success(),
        "{}",
        describe(&f.args("import", &["-"]), &out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("imported 2 lines"));
    let out = run_with_input(
        &f.args("import", &["-", "--format", "jsonl"]),
        b"{\"key\":\"k3\",\"value\":\"v3\"}\n",
    );
    assert!(out.status.success());
    assert_eq!(keys(&f.ok("scan", &[])), ["k1", "k2", "k3"]);
}

#[test]
fn import_applies_lines_in_order_so_the_last_duplicate_wins() {
    let f = Fixture::new();
    f.import(b"k\tfirst\nk\tsecond\nk\tthird\n", &["--batch", "2"]);
    assert_eq!(f.ok("get", &["k"]), "third\n");
}

#[test]
fn a_malformed_line_stops_import_naming_it_and_keeps_earlier_batches() {
    let f = Fixture::new();
    let input = f.file(
        "bad.tsv",
        b"k1\tv\nk2\tv\nk3\tv\nk4\tv\nk5\tv\nk6\tbad\\q\nk7\tv\n",
    );
    let err = f.fails(FAILED, "import", &[&input, "--batch", "2"]);
    assert!(err.contains("line 6"), "{err}");
    assert!(err.contains("invalid escape \"\\q\""), "{err}");
    assert!(
        err.contains("4 lines up to line 4 imported and durable; no later line was imported"),
        "{err}"
    );
    // Two whole batches went in; the batch holding line 5 never was committed.
    assert_eq!(keys(&f.ok("scan", &[])), ["k1", "k2", "k3", "k4"]);
}

#[test]
fn malformed_lines_of_each_kind_are_named() {
    let f = Fixture::new();
    let cases: [(&str, &[u8], &str); 6] = [
        ("a.tsv", b"k\tv\n\nno tab here\n", "line 3: no TAB"),
        ("b.tsv", b"k\tv\tw\n", "line 1: 2 TABs"),
        (
            "c.tsv",
            b"k\tv\nk\\x4g\tv\n",
            "line 2: key: invalid escape \"\\x4g\"",
        ),
        ("d.tsv", b"k\tv\\\n", "line 1: value: a lone \\"),
        (
            "e.jsonl",
            b"{\"key\":\"k\",\"value\":\"v\"}\n{\"key\":\"k\"}\n",
            "line 2: column 11: missing field `value`",
        ),
        ("f.jsonl", b"[1, 2]\n", "line 1: "),
    ];
    for (name, contents, expected) in cases {
        let input = f.file(name, contents);
        let err = f.fails(FAILED, "import", &[&input]);
        assert!(err.contains(expected), "{name}: {err}");
    }
}

#[test]
fn an_oversized_key_is_refused_naming_its_line() {
    let f = Fixture::new();
    let mut input = b"small\tv\n".to_vec();
    input.extend(vec![b'k'; stitchdb::MAX_KEY_LEN + 1]);
    input.extend(b"\tv\n");
    let input = f.file("big.tsv", &input);
    let err = f.fails(FAILED, "import", &[&input]);
    assert!(
        err.contains("line 2: key of 16385 bytes is over the limit"),
        "{err}"
    );
}

#[test]
fn export_by_prefix_and_table() {
    let f = scan_fixture();
    assert_eq!(f.ok("export", &["--prefix", "ab"]), "ab\t12\nabc\t123\n");
    f.ok("create-table", &["t"]);
    assert_eq!(f.ok("export", &["--table", "t"]), "");
}

/// Imports 200,000 lines into a new store in `dir` through `run`, which must stop it with the
/// disk full; checks that the error reports some lines durable and that, reopened, the store
/// holds every one of them with its value and passes `check`.
fn import_until_the_disk_is_full(dir: &Path, run: impl Fn(&[&str]) -> Output) {
    let store = dir.join("small.store");
    let store = store.to_str().unwrap();
    ok(&["init", store, "--zone-size", "1048576"]);
    let line = |i: u64| format!("key{i:07}\tvalue-{i:07}-{}", "x".repeat(100));
    let mut text = String::new();
    for i in 0..200_000 {
        text += &line(i);
        text.push('\n');
    }
    // The input is kept off the disk that fills.
    let input = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(input.path(), text).unwrap();

    let args = [
        "import",
        store,
        input.path().to_str().unwrap(),
        "--sync-every",
        "1048576",
    ];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(FAILED), "{}", describe(&args, &out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // "... (24000 lines up to line 24000 imported and durable; ...)"
    let (before, _) = stderr
        .split_once(" lines up to line ")
        .unwrap_or_else(|| panic!("no durable count: {stderr}"));
    let durable: usize = before.rsplit(['(', ' ']).next().unwrap().parse().unwrap();
    assert!(durable > 0 && durable < 200_000, "{stderr}");
    assert!(
        stderr.contains(&format!("up to line {durable} imported and durable")),
        "{stderr}"
    );

    // Reopened, the store holds every line reported durable, with its value.
    let scan = ok_text(&["scan", store]);
    let kept: Vec<&str> = scan.lines().collect();
    assert!(kept.len() >= durable, "{} < {durable}", kept.len());
    for (i, kept) in kept.iter().enumerate().take(durable) {
        assert_eq!(*kept, line(i as u64));
    }
    assert!(ok_text(&["check", store]).starts_with("ok: "));
}

#[test]
fn an_import_stopped_by_a_file_size_limit_reports_only_what_is_durable() {
    // The store's file cannot grow past 40 MiB (80,000 blocks of 512 bytes; 80 MiB where the
    // shell counts in KiB): growing it fails, as on a disk without room for another zone.
    // (Below 22 MiB, with these 1 MiB zones, the store would refuse every write: it holds 21
    // zones back; see docs/architecture.md, "Zones and space".)
    let dir = tempfile::tempdir().unwrap();
    import_until_the_disk_is_full(dir.path(), |args| run_with_file_limit(80_000, args));
}

/// A tmpfs of `bytes` mounted on a new temporary directory, unmounted when dropped, a failing
/// test included.
struct Tmpfs(TempDir);

impl Tmpfs {
    /// `None` where mounting is not allowed (not root, or no tmpfs).
    fn mount(bytes: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        mounted.then_some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(self.0.path()).status();
        if !unmounted.is_ok_and(|status| status.success()) {
            eprintln!("could not unmount the tmpfs at {}", self.0.path().display());
        }
    }
}

#[test]
fn an_import_stopped_by_a_full_tmpfs_reports_only_what_is_durable() {
    // A real full disk: writes into the store's sparse zones fail with ENOSPC wherever they
    // land (the log, a run, the manifest), not only when the file grows.
    let Some(tmpfs) = Tmpfs::mount(40 << 20) else {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    };
    import_until_the_disk_is_full(tmpfs.0.path(), |args| run(args));
}

#[test]
fn a_failed_export_leaves_the_destination_as_it_was() {
    let f = Fixture::new();
    let mut input = b"ok\tfine\nzz\t\\xff\n".to_vec();
    for i in 0..100 {
        writeln!(input, "row{i:03}\t{}", "y".repeat(50)).unwrap();
    }
    f.import(&input, &[]);
    let old = b"the previous export\n";
    let dest = f.file("out.jsonl", old);
    let before = entries(f.dir.path());

    // JSON cannot hold the value \xff: the export fails after writing the first pairs.
    let err = f.fails(FAILED, "export", &[&dest]);
    assert!(err.contains("not UTF-8"), "{err}");
    assert!(err.contains("out.jsonl was left as it was"), "{err}");
    assert_eq!(std::fs::read(&dest).unwrap(), old);
    assert_eq!(entries(f.dir.path()), before, "a temporary file was left");
    let err = f.fails(FAILED, "export", &[&f.path("new.jsonl")]);
    assert!(err.contains("new.jsonl was not created"), "{err}");
    assert_eq!(entries(f.dir.path()), before, "a file was left");

    // The disk fills while the export is written.
    let args = f.args("export", &[&dest, "--format", "tsv"]);
    let out = run_with_file_limit(1, &args);
    assert_eq!(out.status.code(), Some(FAILED), "{}", describe(&args, &out));
    assert_eq!(std::fs::read(&dest).unwrap(), old);
    assert_eq!(entries(f.dir.path()), before, "a temporary file was left");

    // A successful export replaces it whole.
    f.ok("export", &[&dest, "--format", "tsv"]);
    assert_eq!(std::fs::read(&dest).unwrap(), ok(&f.args("export", &[])));
    assert_eq!(entries(f.dir.path()), before);
}

// ---- check and stats ----------------------------------------------------------------------

/// Fills a store with enough data to be written out as runs beyond the first zone.
fn big_fixture() -> Fixture {
    let f = Fixture::new();
    let mut input = Vec::new();
    for i in 0..60_000 {
        writeln!(input, "key{i:06}\tvalue-{i:06}-{}", "x".repeat(100)).unwrap();
    }
    f.import(&input, &[]);
    f
}

#[test]
fn check_and_stats_on_a_good_store() {
    let f = big_fixture();
    let report = f.ok("check", &[]);
    assert!(report.starts_with("ok: "), "{report}");
    assert!(report.contains("verified"), "{report}");
    let stats = f.ok("stats", &[]);
    assert!(
        stats.contains("tables:") && stats.contains("default"),
        "{stats}"
    );
}

#[test]
fn check_fails_naming_the_place_after_data_is_corrupted() {
    let f = big_fixture();
    let marker = format!("value-030000-{}", "x".repeat(100));
    let mut bytes = std::fs::read(&f.store).unwrap();
    // Damage every copy of one value (its run block, and any stale log record) beyond the
    // superblock zone, so the run block is hit whatever the layout.
    let first_zone = 8 << 20;
    let hits: Vec<usize> = (first_zone..bytes.len() - marker.len())
        .filter(|&at| bytes[at..].starts_with(marker.as_bytes()))
        .collect();
    assert!(
        !hits.is_empty(),
        "the value was not found in the store file"
    );
    for at in hits {
        bytes[at + 7..at + 13].copy_from_slice(b"BROKEN");
    }
    std::fs::write(&f.store, &bytes).unwrap();

    // Every damaged structure is listed on stdout, with its place; the error sums up.
    let args = f.args("check", &[]);
    let out = run(&args);
    assert_eq!(
        out.status.code(),
        Some(CORRUPT),
        "{}",
        describe(&args, &out)
    );
    let report = String::from_utf8(out.stdout).unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(report.contains("damaged run block"), "{report}");
    assert!(
        report.contains("zone"),
        "the report must say where: {report}"
    );
    assert!(err.contains("found damaged"), "{err}");
}

// ---- locking ------------------------------------------------------------------------------

#[test]
fn a_second_writer_gets_the_locked_error() {
    let f = Fixture::new();
    let db = stitchdb::Db::open(&f.store, stitchdb::Options::default()).unwrap();
    let err = f.fails(LOCKED, "put", &["k", "v"]);
    assert!(err.contains("in use by another process"), "{err}");
    let err = f.fails(LOCKED, "get", &["k"]);
    assert!(err.contains("in use by another process"), "{err}");
    db.close().unwrap();
    f.ok("put", &["k", "v"]);
}

// ---- usage --------------------------------------------------------------------------------

#[test]
fn usage_errors_exit_2() {
    let f = Fixture::new();
    for args in [
        f.args("import", &["-", "--batch", "0"]),
        f.args("scan", &["--limit", "many"]),
        f.args("export", &["--format", "csv"]),
        f.args("put", &["only-a-key"]),
        f.args("tables", &["--log", "info,x=bogus"]),
        vec!["frobnicate".into()],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
    }
}

#[test]
fn help_documents_the_formats() {
    for args in [
        vec!["--help"],
        vec!["import", "--help"],
        vec!["export", "--help"],
    ] {
        let help = ok_text(&args);
        assert!(
            help.contains("KEY<TAB>VALUE") && help.contains("\\xHH"),
            "{help}"
        );
        assert!(
            help.contains("{\"key\": \"...\", \"value\": \"...\"}"),
            "{help}"
        );
    }
}

#[test]
fn a_closed_output_pipe_ends_quietly() {
    let f = big_fixture();
    let mut child = Command::new(env!("CARGO_BIN_EXE_stitchdb"))
        .args(f.args("scan", &[]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---- demo ---------------------------------------------------------------------------------

#[test]
fn demo_runs_twice_on_the_same_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("demo.store");
    let store = store.to_str().unwrap();
    for expected in ["creating store", "reusing store"] {
        let out = ok_text(&["demo", store]);
        assert!(out.contains(expected), "{out}");
        assert!(out.contains("imported 200000 records"), "{out}");
        assert!(out.contains("verified 1000 random records"), "{out}");
        assert!(
            out.contains("prefix scan \"user:001\": 1000 records"),
            "{out}"
        );
        assert!(out.contains("deleted 2000 records"), "{out}");
        assert!(out.contains("check: ok"), "{out}");
        assert!(out.contains("summary:"), "{out}");
    }
    assert_eq!(
        ok_text(&["tables", store]),
        format!("default{DEFAULT_LAYOUT}users{DEFAULT_LAYOUT}")
    );
    let err = fails(
        NOT_FOUND,
        &["get", store, "user:000100", "--table", "users"],
    );
    assert!(err.contains("not found"), "{err}");
}

#[test]
fn demo_uses_the_current_directory_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_stitchdb"))
        .arg("demo")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(Path::new(&dir.path().join("stitchdb-demo.store")).is_file());
}

// ---- compact, defrag ----------------------------------------------------------------------

#[test]
fn compact_and_defrag_reorganize_without_changing_contents() {
    let f = Fixture::new();
    let mut first = Vec::new();
    let mut second = Vec::new();
    for i in 0..30_000 {
        first.extend_from_slice(format!("k{i:06}\tvalue-{i}-{}\n", "x".repeat(40)).as_bytes());
        if i % 3 == 0 {
            second.extend_from_slice(format!("k{i:06}\tVALUE-{i}\n").as_bytes());
        }
    }
    f.import(&first, &[]);
    f.import(&second, &[]);
    let before = f.ok("scan", &[]);
    let compacted = f.ok("compact", &[]);
    assert!(compacted.starts_with("compacted in "), "{compacted}");
    assert!(compacted.contains("runs per level"), "{compacted}");
    let defragged = f.ok("defrag", &["--max-live", "0.9"]);
    assert!(defragged.starts_with("evacuated "), "{defragged}");
    assert!(f
        .fails(USAGE, "defrag", &["--max-live", "0"])
        .contains("--max-live"));
    assert_eq!(f.ok("scan", &[]), before);
    assert!(f.ok("check", &[]).starts_with("ok: "));
    assert_eq!(f.ok("get", &["k000003"]), "VALUE-3\n");
}

// ---- snapshot -------------------------------------------------------------------------------

#[test]
fn snapshots_are_created_listed_read_and_dropped() {
    let f = Fixture::new();
    let store = f.store.to_str().unwrap();
    f.ok("put", &["k", "old"]);
    f.ok("put", &["gone", "1"]);
    let created = ok_text(&["snapshot", "create", store, "v1"]);
    assert!(
        created.starts_with("snapshot \"v1\" at commit "),
        "{created}"
    );
    f.ok("put", &["k", "new"]);
    f.ok("del", &["gone"]);
    assert_eq!(f.ok("get", &["k"]), "new\n");
    assert_eq!(f.ok("get", &["k", "--snapshot", "v1"]), "old\n");
    assert_eq!(f.ok("scan", &["--snapshot", "v1"]), "gone\t1\nk\told\n");
    assert_eq!(
        f.ok("export", &["-", "--snapshot", "v1"]),
        "gone\t1\nk\told\n"
    );
    assert_eq!(f.ok("scan", &[]), "k\tnew\n");
    let listed = ok_text(&["snapshot", "list", store]);
    assert!(listed.starts_with("v1\tseq "), "{listed}");
    let err = fails(FAILED, &["snapshot", "create", store, "v1"]);
    assert!(err.contains("already exists"), "{err}");
    let err = f.fails(MISSING, "get", &["k", "--snapshot", "nope"]);
    assert!(err.contains("no snapshot named \"nope\""), "{err}");
    ok(&["snapshot", "drop", store, "v1"]);
    assert_eq!(ok_text(&["snapshot", "list", store]), "");
    let err = fails(MISSING, &["snapshot", "drop", store, "v1"]);
    assert!(err.contains("no snapshot named"), "{err}");
    f.ok("check", &[]);
}
