//! Checks on the repository's own text, run by `cargo test` (and so by
//! `scripts/test.sh`):
//!
//! - no Markdown or code file (`.rs`, `.md`, `.sh`, `.py`, `.toml`, `.c`,
//!   and `.ci/run`) refers to the project's working history by number:
//!   the word "stop" or "issue" followed by a number, or "stop" after
//!   "this". A reader outside the project cannot know what those were; a
//!   comment gives the reason itself, and history lives in git and
//!   `CHANGELOG.md`;
//! - every repository path `ARCHITECTURE.md` names in backticks exists.

use std::fs;
use std::path::{Path, PathBuf};

/// Extensions of the files the history-words check reads.
const CHECKED_EXTENSIONS: &[&str] = &["rs", "md", "sh", "py", "toml", "c"];

/// Files without one of those extensions that the check reads as well.
const CHECKED_FILES: &[&str] = &[".ci/run"];

/// Folders never walked: build output, virtual environments, fuzzing
/// output, version control.
const SKIPPED_DIRS: &[&str] = &[
    "target",
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    "artifacts",
    "corpus",
    "coverage",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `path` relative to the repository root, with `/` separators.
fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !SKIPPED_DIRS.contains(&name.as_str()) {
                walk(&path, out);
            }
        } else if kind.is_file() {
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if CHECKED_EXTENSIONS.contains(&ext)
                || CHECKED_FILES.contains(&relative(&path).as_str())
            {
                out.push(path);
            }
        }
    }
}

/// The words of `text` (runs of ASCII letters or digits), lower-cased,
/// each with its line and the text between it and the word before.
fn words(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let (mut line, mut gap, mut word) = (1, String::new(), String::new());
    for c in text.chars().chain(core::iter::once(' ')) {
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_lowercase());
            continue;
        }
        if !word.is_empty() {
            out.push((line, core::mem::take(&mut gap), core::mem::take(&mut word)));
        }
        gap.push(c);
        if c == '\n' {
            line += 1;
        }
    }
    out
}

fn is_number(w: &str) -> bool {
    w.bytes().all(|b| b.is_ascii_digit())
}

/// Every history reference in `text`: (line, the words). Words count as
/// one phrase only when blanks (or, before a number, blanks and a `#`)
/// separate them, so code such as `stop = 0` is not one.
fn history_words(text: &str) -> Vec<(usize, String)> {
    let w = words(text);
    let mut found = Vec::new();
    for pair in w.windows(2) {
        let ((line, _, a), (_, gap, b)) = (&pair[0], &pair[1]);
        let blank = !gap.is_empty() && gap.chars().all(char::is_whitespace);
        let blank_hash = gap.trim_end_matches('#').chars().all(char::is_whitespace)
            && !gap.trim_end_matches('#').is_empty();
        let numbered =
            (a == "stop" || a == "stops" || a == "issue") && is_number(b) && (blank || blank_hash);
        let this_one = a == "this" && b == "stop" && blank;
        if numbered || this_one {
            found.push((*line, format!("{a} {b}")));
        }
    }
    found
}

#[test]
fn history_word_detection() {
    // Built from pieces so that this file passes its own check.
    let stop = ["st", "op"].concat();
    let issue = ["iss", "ue"].concat();
    assert_eq!(history_words(&format!("since {stop} 43 the")).len(), 1);
    assert_eq!(history_words(&format!("see {issue} #17.")).len(), 1);
    assert_eq!(
        history_words(&format!("Measured at this\n{stop}:")).len(),
        1
    );
    assert_eq!(history_words(&format!("{stop}s 40 and 41")).len(), 1);
    assert!(history_words(&format!("the {stop} callback, {issue}s 3x")).is_empty());
    assert!(history_words(&format!("a {stop}_flag 3, nonstop 4")).is_empty());
    assert!(history_words(&format!("let {stop} = 0; {issue}(3)")).is_empty());
}

#[test]
fn no_history_words_in_markdown_or_code() {
    let mut files = Vec::new();
    walk(&root(), &mut files);
    files.sort();
    assert!(
        files.len() > 50,
        "the walk found only {} files",
        files.len()
    );
    let mut problems = Vec::new();
    for path in &files {
        let rel = relative(path);
        let Ok(text) = fs::read_to_string(path) else {
            continue;
        };
        for (line, what) in history_words(&text) {
            problems.push(format!("{rel}:{line}: \"{what}\""));
        }
    }
    assert!(
        problems.is_empty(),
        "history references (give the reason itself; history belongs in git \
         and CHANGELOG.md):\n{}",
        problems.join("\n")
    );
}

/// The backticked spans of `text` that look like repository paths, each
/// with the folder that relative ones are read against: the folder the
/// section's heading names in backticks (`src/arena/`), else the root.
fn architecture_paths(text: &str) -> Vec<(String, String)> {
    let mut base = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let spans: Vec<&str> = line.split('`').skip(1).step_by(2).collect();
        if line.starts_with('#') {
            base = spans
                .iter()
                .find(|s| s.ends_with('/') && looks_like_path(s))
                .map_or(String::new(), |dir| dir.to_string());
        }
        for span in spans {
            // `file.rs::Item::method` names an item in a file.
            let path = span.split("::").next().unwrap_or(span);
            if looks_like_path(path) {
                out.push((base.clone(), path.to_string()));
            }
        }
    }
    out
}

fn looks_like_path(s: &str) -> bool {
    const EXTENSIONS: &[&str] = &[
        ".rs", ".md", ".sh", ".py", ".toml", ".c", ".h", ".png", ".csv", ".json", ".pyi",
    ];
    !s.is_empty()
        && !s.starts_with("../")
        && !s.starts_with('$')
        && !s.contains("://")
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
        && s.chars().any(|c| c.is_ascii_alphabetic())
        && (s.contains('/') || EXTENSIONS.iter().any(|e| s.ends_with(e)))
}

#[test]
fn every_path_architecture_md_names_exists() {
    let root = root();
    let text = fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let paths = architecture_paths(&text);
    assert!(paths.len() > 40, "only {} paths found", paths.len());
    let missing: Vec<String> = paths
        .iter()
        .filter(|(base, p)| !root.join(base).join(p).exists() && !root.join(p).exists())
        .map(|(base, p)| {
            if base.is_empty() {
                p.clone()
            } else {
                format!("{p} (in {base})")
            }
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist:\n{}",
        missing.join("\n")
    );
}
