//! A storage backend that reads a file and keeps every write in memory.
//!
//! redb verifies page checksums only when a database is opened for writing (its integrity
//! check rebuilds state and commits), and its read-only database does not verify at all. A
//! read-only open that was asked to verify ([`FileConfig::verify_on_open`](crate::FileConfig))
//! therefore runs redb's integrity check on this backend: the check reads the file as it is and
//! its writes land here, so the file is never written, and it needs read permission only.

use redb::StorageBackend;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Granularity of the in-memory copies of written ranges.
const CHUNK: u64 = 4096;

#[derive(Debug)]
pub(crate) struct Overlay {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    file: File,
    /// The length the engine sees.
    len: u64,
    /// Bytes of the file still visible below this offset; a shrink hides the rest, and a later
    /// growth reads zeros there, as it would on a real file.
    visible: u64,
    /// Written chunks, by index (`offset / CHUNK`), each `CHUNK` bytes.
    chunks: BTreeMap<u64, Vec<u8>>,
}

impl Overlay {
    pub(crate) fn new(file: File) -> std::io::Result<Overlay> {
        let len = file.metadata()?.len();
        Ok(Overlay { state: Mutex::new(State { file, len, visible: len, chunks: BTreeMap::new() }) })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every update of the state is complete before it can fail, so a poisoned lock holds a
        // consistent state.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    /// Fills `out` with the bytes at `offset` as they were before any write: the file's below
    /// `visible`, zeros above.
    fn read_base(&mut self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        out.fill(0);
        if offset >= self.visible {
            return Ok(());
        }
        let n = usize::try_from(self.visible - offset).unwrap_or(usize::MAX).min(out.len());
        self.file.seek(SeekFrom::Start(offset))?;
        self.file.read_exact(&mut out[..n])
    }

    /// The chunk `index`, copied from the file first if it was never written.
    fn chunk_mut(&mut self, index: u64) -> std::io::Result<&mut Vec<u8>> {
        if !self.chunks.contains_key(&index) {
            let mut bytes = vec![0; CHUNK as usize];
            self.read_base(index * CHUNK, &mut bytes)?;
            self.chunks.insert(index, bytes);
        }
        self.chunks.get_mut(&index).ok_or_else(|| std::io::Error::other("chunk vanished"))
    }
}

/// The chunk holding `offset`, the position in it, and how many of `remaining` bytes lie in it.
fn split(offset: u64, remaining: usize) -> (u64, usize, usize) {
    let index = offset / CHUNK;
    // Both below CHUNK, so they fit a usize.
    let at = (offset % CHUNK) as usize;
    let n = remaining.min(CHUNK as usize - at);
    (index, at, n)
}

impl StorageBackend for Overlay {
    fn len(&self) -> Result<u64, std::io::Error> {
        Ok(self.state().len)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        let mut state = self.state();
        let end = offset.checked_add(out.len() as u64);
        if end.is_none_or(|end| end > state.len) {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "read past the end of the file"));
        }
        let mut done = 0;
        while done < out.len() {
            let pos = offset + done as u64;
            let (index, at, n) = split(pos, out.len() - done);
            match state.chunks.get(&index) {
                Some(chunk) => out[done..done + n].copy_from_slice(&chunk[at..at + n]),
                None => state.read_base(pos, &mut out[done..done + n])?,
            }
            done += n;
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        let mut state = self.state();
        if len < state.len {
            state.visible = state.visible.min(len);
            let first_gone = len.div_ceil(CHUNK);
            state.chunks.split_off(&first_gone);
            // The bytes past the end in the last kept chunk read as zeros if it grows again.
            if let Some(chunk) = state.chunks.get_mut(&(len / CHUNK)) {
                chunk[(len % CHUNK) as usize..].fill(0);
            }
        }
        state.len = len;
        Ok(())
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        let mut state = self.state();
        let mut done = 0;
        while done < data.len() {
            let (index, at, n) = split(offset + done as u64, data.len() - done);
            state.chunk_mut(index)?[at..at + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        state.len = state.len.max(offset + data.len() as u64);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn writes_stay_in_memory_and_the_file_is_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let original: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &original).unwrap();
        let overlay = Overlay::new(File::open(&path).unwrap()).unwrap();
        overlay.write(4000, &[1; 200]).unwrap();
        let mut out = vec![0; 300];
        overlay.read(3950, &mut out).unwrap();
        assert_eq!(&out[..50], &original[3950..4000]);
        assert_eq!(&out[50..250], &[1; 200][..]);
        assert_eq!(&out[250..], &original[4200..4250]);
        // Shrink, then grow: the hidden bytes read as zeros.
        overlay.set_len(4100).unwrap();
        overlay.set_len(9000).unwrap();
        overlay.read(4050, &mut out).unwrap();
        assert_eq!(&out[..50], &[1; 50][..]);
        assert!(out[50..].iter().all(|&b| b == 0));
        assert!(overlay.read(8900, &mut out).is_err(), "a read past the end");
        overlay.write(9000, &[2; 10]).unwrap();
        assert_eq!(overlay.len().unwrap(), 9010);
        assert_eq!(std::fs::read(&path).unwrap(), original);
    }
}
