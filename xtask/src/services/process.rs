//! Process control for the local servers: starting a JVM detached from the terminal, pid files,
//! whether a pid still runs the process we started, stopping it, the waits' polling and timeouts,
//! free ports, atomic writes and log tails. Knows nothing of Kafka or Fluss.

use anyhow::{Context, Result, bail};
use std::fs::{self, File};
use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long `up` waits for a server to answer.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
const KILL_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the waits look again.
pub(crate) const POLL: Duration = Duration::from_millis(250);

/// The `java` of `JAVA_HOME`, or the one on the `PATH`.
pub(crate) fn java() -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(home) if Path::new(&home).join("bin").join("java").is_file() => Path::new(&home).join("bin").join("java"),
        _ => PathBuf::from("java"),
    }
}

/// Starts `cmd` (a server's JVM) with no input and its output in `log`, detached: in its own
/// process group, so that a Ctrl-C in the terminal that ran `up` later does not reach it. `what`
/// names it in the error.
pub(crate) fn spawn_detached(cmd: &mut Command, log: File, what: &str) -> Result<Child> {
    cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(cmd, 0);
    cmd.spawn().with_context(|| format!("starting the {what}: {cmd:?}"))
}

pub(crate) fn read_pid(path: &Path) -> Result<Option<u32>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(text.trim().parse().ok()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn have_proc() -> bool {
    Path::new("/proc/self/stat").exists()
}

/// Whether `pid` is a live JVM running `main_class` with `config` among the arguments after it;
/// a pid that was reused by another process, or a process that is exiting, is not.
pub(crate) fn process_runs(pid: u32, main_class: &str, config: &Path) -> bool {
    if have_proc() {
        process_alive(pid)
            && fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| cmdline_runs(&cmdline, main_class, config))
    } else {
        // Without /proc the best available check is that the pid exists.
        process_alive(pid)
    }
}

/// Whether `pid` exists and has not exited; a zombie (exited, not yet reaped) has.
fn process_alive(pid: u32) -> bool {
    if have_proc() {
        fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| proc_stat_state(&stat).is_some_and(|state| !matches!(state, 'Z' | 'X' | 'x')))
    } else {
        Command::new("kill")
            .args(["-0", &pid.to_string()])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }
}

/// The state letter of a `/proc/<pid>/stat` line, which follows the parenthesised command name.
fn proc_stat_state(stat: &str) -> Option<char> {
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Whether a NUL-separated `/proc/<pid>/cmdline` names `main_class` and, after it, `config`.
pub(crate) fn cmdline_runs(cmdline: &[u8], main_class: &str, config: &Path) -> bool {
    let config = config.to_string_lossy();
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    args.iter()
        .position(|arg| *arg == main_class.as_bytes())
        .is_some_and(|at| args[at + 1..].iter().any(|arg| *arg == config.as_bytes()))
}

fn signal(pid: u32, signal: &str) -> Result<()> {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .context("running `kill`")?;
    if !status.success() {
        eprintln!("==> `kill -{signal} {pid}` failed ({status}); the process may have exited");
    }
    Ok(())
}

/// SIGTERM (a clean shutdown), then SIGKILL if the process is still there after [`STOP_TIMEOUT`].
/// The caller has made sure that `pid` is the process it means.
pub(crate) fn stop_process(pid: u32) -> Result<()> {
    let gone_within = |timeout: Duration| {
        let deadline = Instant::now() + timeout;
        while process_alive(pid) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(POLL);
        }
        true
    };
    signal(pid, "TERM")?;
    if gone_within(STOP_TIMEOUT) {
        return Ok(());
    }
    eprintln!("==> pid {pid} still running {}s after SIGTERM; sending SIGKILL", STOP_TIMEOUT.as_secs());
    signal(pid, "KILL")?;
    if gone_within(KILL_TIMEOUT) {
        return Ok(());
    }
    bail!("pid {pid} survived SIGKILL")
}

/// `n` distinct ports on 127.0.0.1 that were free a moment ago: the listeners are held open
/// together so that the kernel hands out different ports, then closed for the server to bind.
pub(crate) fn free_port_list(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .context("finding free ports on 127.0.0.1")?;
    Ok(listeners.iter().map(|l| l.local_addr().map(|a| a.port())).collect::<std::io::Result<Vec<_>>>()?)
}

/// Resident memory of a process in KiB, from `/proc/<pid>/status`.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// `N MiB resident`, a process's resident memory as `status` shows it.
pub(crate) fn resident(pid: u32) -> Option<String> {
    rss_kib(pid).map(|kib| format!("{:.0} MiB resident", kib as f64 / 1024.0))
}

/// Why a child that `up` started cannot come up any more, if it has exited: `{who} exited
/// (STATUS)`, or `waiting for {who} failed: ERROR`.
pub(crate) fn child_exited(child: &mut Child, who: &str) -> Option<String> {
    match child.try_wait() {
        Ok(Some(status)) => Some(format!("{who} exited ({status})")),
        Ok(None) => None,
        Err(e) => Some(format!("waiting for {who} failed: {e}")),
    }
}

/// `last lines of PATH:` and the last `lines` lines of the log file `path`, for an error.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    format!("last lines of {}:\n{}", path.display(), tail(path, lines))
}

pub(crate) fn tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

pub(crate) fn write_atomic(path: &Path, contents: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, contents).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

pub(crate) fn remove_file_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e).with_context(|| format!("removing {}", path.display())),
        _ => Ok(()),
    }
}

pub(crate) fn remove_dir_if_exists(path: &Path) -> Result<()> {
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e).with_context(|| format!("removing {}", path.display())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_states_read_from_proc_stat() {
        assert_eq!(proc_stat_state("22809 (java) S 1 22809 22809 0 -1"), Some('S'));
        assert_eq!(proc_stat_state("7 (odd) name) Z 1 7"), Some('Z'));
        assert_eq!(proc_stat_state("garbage"), None);
        assert!(process_alive(std::process::id()));
        assert!(resident(std::process::id()).is_some_and(|r| r.ends_with(" MiB resident")));
    }
}
