//! Compiles quietsqlite's SQLite and links it as a static library.
//!
//! Source: the sqlite3mc-src crate's amalgamation (SQLite3 Multiple Ciphers, built without
//! OpenSSL). Released amalgamations carry a parser generated without
//! SQLITE_ENABLE_UPDATE_DELETE_LIMIT, so that option alone does not enable
//! `DELETE/UPDATE ... ORDER BY ... LIMIT`: the grammar rules are missing. We replace the
//! amalgamation's parse.c section with parser/parse-udl.c, the same section of an amalgamation
//! SQLite generated with the option (see parser/update.mjs), but only after checking that the
//! section we replace is the one parse-udl.c was made for (parser/replaces.txt); any other
//! grammar stops the build. Options: compile-options.txt, the only list.
use std::fs;
use std::path::{Path, PathBuf};

const BEGIN: &[u8] = b"/************** Begin file parse.c ***";
const END: &[u8] = b"/************** End of parse.c ***";

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let options_path = manifest.join("compile-options.txt");
    let parser_path = manifest.join("parser/parse-udl.c");
    let replaces_path = manifest.join("parser/replaces.txt");
    for p in [&options_path, &parser_path, &replaces_path] {
        println!("cargo:rerun-if-changed={}", p.display());
    }

    let src_dir = sqlite3mc_src::source_dir();
    let amalgamation = read(&src_dir.join(sqlite3mc_src::SOURCE_FILE));
    let udl_parser = read(&parser_path);
    let expected = fs::read_to_string(&replaces_path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", replaces_path.display()));
    let expected = expected.lines().next().unwrap_or("").trim();

    let (start, end) = section_bounds(&amalgamation)
        .unwrap_or_else(|e| panic!("sqlite3mc-src {}: {e}", sqlite3mc_src::SQLITE_VERSION));
    let found = format!("{:016x}", fnv1a64(&amalgamation[start..end]));
    if found != expected {
        panic!(
            "the parser of SQLite {} (sqlite3mc-src) is not the one parser/parse-udl.c replaces \
             (fingerprint {found}, expected {expected}): the grammar changed, so regenerate \
             parse-udl.c from an UPDATE/DELETE LIMIT amalgamation of this SQLite version with \
             `node crates/sqlite/parser/update.mjs` (see its header)",
            sqlite3mc_src::SQLITE_VERSION
        );
    }
    match section_bounds(&udl_parser) {
        Ok((0, n)) if n == udl_parser.len() => {}
        _ => panic!("{} must hold exactly one parse.c section", parser_path.display()),
    }

    // The generated parser accepts ORDER BY/LIMIT on UPDATE and DELETE; SQLite's code keys
    // its handling of a build without the option on this macro, which a UDL-capable
    // amalgamation defines first thing.
    let mut source = Vec::with_capacity(amalgamation.len() + udl_parser.len());
    source.extend_from_slice(b"#define SQLITE_UDL_CAPABLE_PARSER 1\n");
    source.extend_from_slice(&amalgamation[..start]);
    source.extend_from_slice(&udl_parser);
    source.extend_from_slice(&amalgamation[end..]);
    let source_path = out.join("sqlite3.c");
    write_if_changed(&source_path, &source);

    let mut build = cc::Build::new();
    build.file(&source_path).include(src_dir).warnings(false);
    for define in defines(&options_path) {
        build.flag(format!("-D{define}"));
    }
    if std::env::var("CARGO_CFG_WINDOWS").is_err() {
        // A platform probe rather than an option: localtime_r exists wherever Windows is not.
        build.flag("-DHAVE_LOCALTIME_R");
    }
    // The library is linked statically and the addon exports none of its functions, so
    // nothing can interpose on them: calls between SQLite's public functions (mutexes,
    // sqlite3_value_*, ...) may be inlined or made directly (experiment 032).
    build.flag_if_supported("-fno-semantic-interposition");
    build.compile("quietsqlite_sqlite3");
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Rewrites only on change, so an unchanged source keeps its timestamp.
fn write_if_changed(path: &Path, bytes: &[u8]) {
    if fs::read(path).is_ok_and(|old| old == bytes) {
        return;
    }
    fs::write(path, bytes).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// Byte range of the one parse.c section: from its Begin marker to the end of the line of
/// its End marker.
fn section_bounds(text: &[u8]) -> Result<(usize, usize), String> {
    let begins = find_all(text, BEGIN);
    let ends = find_all(text, END);
    let (&[start], &[end_mark]) = (begins.as_slice(), ends.as_slice()) else {
        return Err(format!(
            "expected one parse.c section, found {} begin and {} end markers",
            begins.len(),
            ends.len()
        ));
    };
    if end_mark < start {
        return Err("parse.c section ends before it begins".into());
    }
    let end = text[end_mark..].iter().position(|&b| b == b'\n').map_or(text.len(), |i| end_mark + i + 1);
    Ok((start, end))
}

fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    haystack.windows(needle.len()).enumerate().filter(|(_, w)| *w == needle).map(|(i, _)| i).collect()
}

/// A change detector, not a security check: the inputs come from Cargo.lock-pinned sources.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The defines of the [options] and [build] sections of compile-options.txt ([defaults] only
/// records what SQLite reports unasked), validated so that a typo cannot reach the compiler
/// command line as anything but a macro definition.
fn defines(path: &Path) -> Vec<String> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut out = Vec::new();
    let mut compiled: Option<bool> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('[') {
            compiled = match line {
                "[options]" | "[build]" => Some(true),
                "[defaults]" => Some(false),
                _ => panic!("{}:{}: unknown section {line}", path.display(), n + 1),
            };
            continue;
        }
        match compiled {
            Some(true) => {}
            Some(false) => continue,
            None => panic!("{}:{}: a define before any section", path.display(), n + 1),
        }
        let (name, value) = line.split_once('=').unwrap_or((line, ""));
        let name_ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        let value_ok = value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok || !value_ok || (line.contains('=') && value.is_empty()) {
            panic!("{}:{}: not NAME or NAME=VALUE: {line}", path.display(), n + 1);
        }
        out.push(line.to_string());
    }
    out
}
