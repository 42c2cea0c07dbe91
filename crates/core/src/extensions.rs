//! Loading SQLite extensions (shared libraries) into a connection. Only the C API is enabled,
//! and only for the duration of the load: the SQL function `load_extension()` stays refused,
//! so SQL text (which may come from elsewhere) can never load a library.

use crate::error::{Error, Result};
use rusqlite::{ffi, Connection};
use std::ffi::{c_char, c_int, CStr, CString};

/// An extension: its file, and the entry point (SQLite's default derivation when `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    pub path: String,
    pub entry_point: Option<String>,
}

impl Extension {
    pub fn new(path: String, entry_point: Option<String>) -> Result<Extension> {
        if path.is_empty() || path.contains('\0') {
            return Err(Error::Type("an extension path must be a non-empty string without NUL".into()));
        }
        if entry_point.as_deref().is_some_and(|e| e.is_empty() || e.contains('\0')) {
            return Err(Error::Type("an extension entry point must be a non-empty string without NUL".into()));
        }
        Ok(Extension { path, entry_point })
    }

    /// Loads the extension into `conn`. The error names the file and says what SQLite said.
    pub fn load(&self, conn: &Connection) -> Result<()> {
        self.check_files()?;
        let path = CString::new(self.path.as_str()).map_err(|_| Error::Type("an extension path may not contain NUL".into()))?;
        let entry = match &self.entry_point {
            Some(e) => Some(CString::new(e.as_str()).map_err(|_| Error::Type("an extension entry point may not contain NUL".into()))?),
            None => None,
        };
        // SAFETY: the handle is only passed to SQLite calls below, while `conn` lives.
        let db = unsafe { conn.handle() };
        let mut errmsg: *mut c_char = std::ptr::null_mut();
        // SAFETY: the handle is valid while `conn` lives and is used by this thread only; the
        // strings are NUL-terminated and outlive the calls; `errmsg` is NULL or a string
        // SQLite allocated, freed once with sqlite3_free below.
        let (rc, message) = unsafe {
            set_c_api(db, true);
            let rc = ffi::sqlite3_load_extension(
                db,
                path.as_ptr(),
                entry.as_ref().map_or(std::ptr::null(), |e| e.as_ptr()),
                &mut errmsg,
            );
            set_c_api(db, false);
            let message = if errmsg.is_null() {
                None
            } else {
                let m = CStr::from_ptr(errmsg).to_string_lossy().into_owned();
                ffi::sqlite3_free(errmsg.cast());
                Some(m)
            };
            (rc, message)
        };
        if rc == ffi::SQLITE_OK {
            return Ok(());
        }
        let why = message.unwrap_or_else(|| crate::error::code_message(rc));
        Err(Error::sqlite(rc, format!("could not load the extension '{}': {why}", self.path)))
    }

    /// The files SQLite will try (the path, then the path with the platform's suffix) must
    /// be regular files where they exist: the loader opens a FIFO and waits on it forever,
    /// holding a process-wide lock that even `process.exit()` then waits for.
    fn check_files(&self) -> Result<()> {
        let suffix = if cfg!(windows) {
            ".dll"
        } else if cfg!(target_os = "macos") {
            ".dylib"
        } else {
            ".so"
        };
        for candidate in [self.path.clone(), format!("{}{suffix}", self.path)] {
            if let Ok(meta) = std::fs::metadata(&candidate) {
                if !meta.is_file() {
                    return Err(Error::Range(format!(
                        "could not load the extension '{}': '{candidate}' is not a regular file",
                        self.path
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Turns extension loading through the C API on or off (never the SQL function).
///
/// # Safety
/// `db` is a valid connection handle used by the calling thread only.
unsafe fn set_c_api(db: *mut ffi::sqlite3, on: bool) {
    let mut now: c_int = 0;
    ffi::sqlite3_db_config(db, ffi::SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, on as c_int, &mut now as *mut c_int);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_directory_is_refused_before_the_loader_sees_it() {
        let dir = std::env::temp_dir().join(format!("quietsqlite-ext-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("pipe");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let conn = Connection::open_in_memory().unwrap();
        for path in [fifo.to_string_lossy().into_owned(), dir.to_string_lossy().into_owned()] {
            match Extension::new(path.clone(), None).unwrap().load(&conn) {
                Err(Error::Range(m)) => assert!(m.contains("is not a regular file"), "{m}"),
                other => panic!("{path}: {other:?}"),
            }
        }
        // `pipe` names no file, but `pipe.so` is what the loader tries next.
        std::fs::remove_file(&fifo).unwrap();
        let made = std::process::Command::new("mkfifo").arg(dir.join("pipe.so")).status().unwrap();
        assert!(made.success());
        assert!(matches!(Extension::new(fifo.to_string_lossy().into_owned(), None).unwrap().load(&conn), Err(Error::Range(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_file_fails_clearly_and_sql_cannot_load() {
        let conn = Connection::open_in_memory().unwrap();
        let ext = Extension::new("/nonexistent/quietsqlite-ext.so".into(), None).unwrap();
        let e = ext.load(&conn).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/quietsqlite-ext.so"), "{e}");
        let sql = conn.query_row("SELECT load_extension('/nonexistent/x.so')", [], |r| r.get::<_, i64>(0));
        assert!(sql.unwrap_err().to_string().contains("not authorized"));
        assert!(Extension::new(String::new(), None).is_err());
    }
}
