//! What an operator should do about a log that could not be opened: one hint, chosen by the
//! error's kind, so that a file problem never gets broker advice and a damaged store never
//! gets "close the other process".

use actionstate_file::FileError;
use actionstate_recovery::LogConfig;
use std::io::ErrorKind;

/// The hint for `error`, raised while opening `config`, or `None` when the error says all
/// there is to say (a bad URL, a changed log).
pub fn for_open(error: &anyhow::Error, config: &LogConfig) -> Option<String> {
    for cause in error.chain() {
        if let Some(file) = FileError::find(cause) {
            return file_hint(file);
        }
    }
    for cause in error.chain() {
        if let Some(actionstate_core::Error::Backend(backend)) = cause.downcast_ref::<actionstate_core::Error>()
            && backend.is_retryable()
        {
            return server_hint(config);
        }
    }
    None
}

fn file_hint(error: &FileError) -> Option<String> {
    Some(match error {
        FileError::Locked { .. } => {
            "another process has this data directory open (a data directory admits one process at a time): stop it \
             first"
                .to_owned()
        }
        FileError::Corrupt { .. } | FileError::UnknownFormat { .. } => {
            "the file is damaged or is not an actionstate store; nothing was written to it: restore the data \
             directory from a backup"
                .to_owned()
        }
        FileError::Io { source, .. } => match source.kind() {
            ErrorKind::NotFound => "no store there: name a data directory an actionstate store wrote (e.g. after \
                                    `actionstate demo --log file:DIR`)"
                .to_owned(),
            ErrorKind::PermissionDenied => "check the permissions of the data directory and its files".to_owned(),
            ErrorKind::ReadOnlyFilesystem => "the file system is mounted read-only".to_owned(),
            _ => "check that the path names a data directory this user can read".to_owned(),
        },
        FileError::NeedsRecovery { .. } => {
            "its writer did not close it: open it for writing once (restart its writer, or run `actionstate verify` \
             on a copy you may write), then read it again"
                .to_owned()
        }
        FileError::PartitionsChanged { stored, .. } => {
            format!("the store has {stored} partitions: drop `partitions=` from the URL, or give {stored}")
        }
        _ => return None,
    })
}

fn server_hint(config: &LogConfig) -> Option<String> {
    // The scheme names the service `cargo xtask services` starts (`kafka`, `fluss`).
    let url = config.to_string();
    let service = url.split(':').next().filter(|s| matches!(*s, "kafka" | "fluss"))?;
    Some(format!(
        "is the cluster reachable, and does it accept these credentials? (for a local one, `cargo xtask services up \
         {service}` starts it and writes its address to target/services/{service}.env)"
    ))
}

/// A hint attached to an error as its outermost context: `main` prints it on a line of its
/// own after the error.
#[derive(Debug)]
pub struct Hint(pub String);

impl std::fmt::Display for Hint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `error` with the hint for it, when there is one.
pub fn with_hint(error: anyhow::Error, config: &LogConfig) -> anyhow::Error {
    match for_open(&error, config) {
        Some(hint) => error.context(Hint(hint)),
        None => error,
    }
}
