//! The backend conformance suite on the file backend.

#![allow(clippy::unwrap_used, reason = "tests")]

use actionstate_core::{Error, StateLog};
use actionstate_file::{FileConfig, FileLog};
use actionstate_testkit::conformance::{Harness, assert_conforms};
use std::path::PathBuf;
use std::sync::Mutex;
use tempfile::TempDir;

/// Every fresh log in its own temporary directory, kept until the harness is dropped.
#[derive(Default)]
struct FileHarness(Mutex<Vec<TempDir>>);

impl FileHarness {
    fn new_dir(&self) -> PathBuf {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        self.0.lock().unwrap().push(dir);
        path
    }
}

fn data_dir(log: &FileLog) -> PathBuf {
    log.path().parent().unwrap().to_path_buf()
}

impl Harness for FileHarness {
    type Log = FileLog;
    async fn fresh(&self, partitions: u32) -> Result<FileLog, Error> {
        Ok(FileLog::open(FileConfig::new(self.new_dir(), partitions))?)
    }
    async fn reopen(&self, log: FileLog) -> Result<FileLog, Error> {
        let (dir, partitions) = (data_dir(&log), log.identity().partitions);
        drop(log);
        Ok(FileLog::open(FileConfig::new(dir, partitions))?)
    }
    async fn recreate(&self, log: FileLog, partitions: u32) -> Result<FileLog, Error> {
        // An open database's directory cannot be deleted: close it first.
        let dir = data_dir(&log);
        drop(log);
        std::fs::remove_dir_all(&dir).unwrap();
        Ok(FileLog::open(FileConfig::new(dir, partitions))?)
    }
    async fn unreachable(&self) -> Result<FileLog, Error> {
        // A data directory below a regular file cannot be created.
        let file = self.new_dir();
        std::fs::write(&file, b"not a directory").unwrap();
        Ok(FileLog::open(FileConfig::new(file.join("sub"), 1))?)
    }
}

#[tokio::test]
async fn file_log_conforms() {
    assert_conforms(&FileHarness::default()).await;
}

#[tokio::test]
async fn unreachable_file_log_names_the_path() {
    let err = FileHarness::default().unreachable().await.unwrap_err();
    assert!(err.to_string().contains("sub"), "the error does not name the path: {err}");
}
