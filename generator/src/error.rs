//! Errors of a generator run. Invariant: every error names the input file and, where it
//! comes from inside a document, the schema path (a JSON pointer) within it.

use std::fmt;
use std::path::{Path, PathBuf};

/// Why a generator run stopped. Nothing is written when a run returns one.
#[derive(Debug)]
pub struct Error {
    /// The input (or output) file concerned.
    pub file: PathBuf,
    /// Where in the document, as a JSON pointer (`/spec/versions/0/schema/...`); empty for
    /// the whole file.
    pub schema_path: String,
    /// What is wrong.
    pub message: String,
}

impl Error {
    /// An error about `file` at `schema_path`.
    pub fn new(file: &Path, schema_path: impl Into<String>, message: impl Into<String>) -> Self {
        Error { file: file.to_path_buf(), schema_path: schema_path.into(), message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.schema_path.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.message)
        } else {
            write!(f, "{}: at {}: {}", self.file.display(), self.schema_path, self.message)
        }
    }
}

impl std::error::Error for Error {}

/// Result of generator steps.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Escapes one JSON-pointer segment (`~` → `~0`, `/` → `~1`).
pub fn pointer_segment(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}
