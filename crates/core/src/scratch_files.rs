//! Files quietsqlite creates for its own use and deletes when done with them: the file behind
//! `:memory:` (and behind `deserialize()`, and `serialize()`'s copy), and a backup's copy
//! until it is renamed into place. They are listed here while they exist, so that a process
//! that exits before they are done with (`process.exit()` during a backup) still deletes them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

static FILES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn files() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    FILES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Lists a file just created.
pub(crate) fn track(file: &Path) {
    files().push(file.to_path_buf());
}

/// Takes a file off the list: it is no longer ours to delete (a backup renamed into place).
pub(crate) fn untrack(file: &Path) {
    files().retain(|f| f != file);
}

/// Deletes a listed file with the `-wal`, `-shm` and `-journal` SQLite may have made beside it.
pub(crate) fn remove(file: &Path) {
    untrack(file);
    delete(file);
}

/// Deletes every listed file: the process is exiting.
pub fn remove_all() {
    for file in std::mem::take(&mut *files()) {
        delete(&file);
    }
}

fn delete(file: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = file.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_files_are_deleted_with_their_companions_and_untracked_ones_stay() {
        let dir = std::env::temp_dir().join(format!("qs-scratch-{}", crate::connection::unpredictable_name()));
        std::fs::create_dir(&dir).unwrap();
        let [a, b] = [dir.join("a.db"), dir.join("b.db")];
        for f in [&a, &b] {
            std::fs::write(f, b"x").unwrap();
            track(f);
        }
        std::fs::write(dir.join("a.db-wal"), b"x").unwrap();
        untrack(&b);
        remove_all();
        assert!(!a.exists() && !dir.join("a.db-wal").exists());
        assert!(b.exists(), "untracked: not ours to delete");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
