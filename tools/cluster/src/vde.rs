//! The VDE side of a cluster: one `vde_switch` per node, one `wirefilter` per link between two
//! nodes' switches, all in one temporary folder of Unix sockets ([`Net`]), and a link's
//! management socket, through which its loss, duplication and delay change while it runs
//! ([`Mgmt`]).
//!
//! Every process is a child of this one, in a process group of its own (a terminal's Ctrl-C
//! is this process's to handle), owned by a [`Net`] that stops them when it is dropped (at the
//! end, on Ctrl-C, on an error); and each reads its console from a pipe this process holds, so
//! that even if this process is killed outright they see their input close and exit (both
//! programs end on end of input when not daemons).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::spec::Filter;

/// How long a switch or a wirefilter may take to make its socket.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a management command may take to answer.
const MGMT_TIMEOUT: Duration = Duration::from_secs(5);

/// The VDE processes of one run and their socket folder.
pub struct Net {
    /// The temporary folder of every socket.
    pub dir: PathBuf,
    processes: Vec<Process>,
}

struct Process {
    name: String,
    child: Child,
    /// Held open: the process's console; closing it ends the process.
    _stdin: ChildStdin,
}

impl Net {
    /// Makes a fresh socket folder under the system's temporary folder.
    pub fn new() -> Result<Net> {
        let base = std::env::temp_dir();
        for n in 0..1000u32 {
            let dir = base.join(format!("tessera-cluster-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(Net { dir, processes: Vec::new() }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
            }
        }
        bail!("no free name for a socket folder in {}", base.display())
    }

    /// The socket folder of node `index`'s switch.
    pub fn switch_dir(&self, index: usize) -> PathBuf {
        self.dir.join(format!("sw{index}"))
    }

    /// The management socket of link `index`'s wirefilter.
    pub fn mgmt_path(&self, index: usize) -> PathBuf {
        self.dir.join(format!("wf{index}"))
    }

    /// Starts node `index`'s switch and waits for its socket.
    pub fn start_switch(&mut self, index: usize, node: &str) -> Result<PathBuf> {
        let dir = self.switch_dir(index);
        let mut cmd = Command::new("vde_switch");
        cmd.arg("-s").arg(&dir);
        self.spawn(format!("switch of {node}"), cmd, &dir.join("ctl"))?;
        Ok(dir)
    }

    /// Starts link `index`'s wirefilter between two switches with `filter`, waits for its
    /// management socket and connects to it.
    pub fn start_wirefilter(
        &mut self,
        index: usize,
        link: &str,
        ends: [&Path; 2],
        filter: Filter,
    ) -> Result<Mgmt> {
        let mgmt = self.mgmt_path(index);
        let mut cmd = Command::new("wirefilter");
        cmd.arg("-v").arg(format!("{}:{}", ends[0].display(), ends[1].display()));
        cmd.arg("-M").arg(&mgmt);
        cmd.args(["-l", &filter.loss.to_string(), "-D", &filter.dup.to_string()]);
        cmd.args(["-d", &filter.delay_ms.to_string()]);
        self.spawn(format!("wirefilter of link {link}"), cmd, &mgmt)?;
        Mgmt::connect(&mgmt)
    }

    fn spawn(&mut self, name: String, mut cmd: Command, socket: &Path) -> Result<()> {
        cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::piped());
        // A process group of its own: a terminal's Ctrl-C reaches this process (which stops the
        // VDE processes after the nodes) and not the network under the nodes' feet.
        cmd.process_group(0);
        let mut child = cmd.spawn().with_context(|| format!("starting {cmd:?} ({name})"))?;
        let stdin = child.stdin.take().expect("piped");
        let start = Instant::now();
        while !socket.exists() {
            if let Some(status) = child.try_wait()? {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                bail!("{name} ({cmd:?}) exited with {status}: {}", err.trim());
            }
            if start.elapsed() > START_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                bail!("{name} ({cmd:?}) made no socket {} in {START_TIMEOUT:?}", socket.display());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.processes.push(Process { name, child, _stdin: stdin });
        Ok(())
    }

    /// The name and process id of every VDE process, as started.
    pub fn processes(&self) -> impl Iterator<Item = (&str, u32)> {
        self.processes.iter().map(|p| (p.name.as_str(), p.child.id()))
    }

    /// The first VDE process that has exited on its own, if any, with its status.
    pub fn exited(&mut self) -> Option<String> {
        self.processes.iter_mut().find_map(|p| match p.child.try_wait() {
            Ok(Some(status)) => Some(format!("the {} exited ({status})", p.name)),
            _ => None,
        })
    }
}

impl Drop for Net {
    /// Stops every process, last started first, and removes the socket folder.
    fn drop(&mut self) {
        for p in self.processes.iter_mut().rev() {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A session on a wirefilter's management socket: one command at a time, each answered by a
/// status line (`1000 Success`) and a prompt.
pub struct Mgmt {
    stream: UnixStream,
}

/// The prompt that ends each answer.
const PROMPT: &str = "VDEwf$ ";

impl Mgmt {
    fn connect(path: &Path) -> Result<Mgmt> {
        let stream = UnixStream::connect(path)
            .with_context(|| format!("connecting to {}", path.display()))?;
        stream.set_read_timeout(Some(MGMT_TIMEOUT))?;
        let mut m = Mgmt { stream };
        m.read_answer().context("the wirefilter's greeting")?;
        Ok(m)
    }

    fn read_answer(&mut self) -> Result<String> {
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !got.ends_with(PROMPT.as_bytes()) {
            let n = self.stream.read(&mut buf).context("reading from the wirefilter")?;
            if n == 0 {
                bail!("the wirefilter closed its management socket");
            }
            got.extend_from_slice(&buf[..n]);
        }
        Ok(String::from_utf8_lossy(&got[..got.len() - PROMPT.len()]).into_owned())
    }

    /// Sends `command` and returns its answer, failing unless it says `1000 Success`.
    pub fn command(&mut self, command: &str) -> Result<String> {
        self.stream.write_all(format!("{command}\n").as_bytes())?;
        let answer = self.read_answer().with_context(|| format!("wirefilter `{command}`"))?;
        if !answer.lines().any(|l| l.trim() == "1000 Success") {
            bail!("wirefilter `{command}` failed: {}", answer.trim());
        }
        Ok(answer)
    }

    /// Sets the loss, both ways.
    pub fn set_loss(&mut self, percent: f64) -> Result<()> {
        self.command(&format!("loss {percent}")).map(drop)
    }

    /// Sets the duplication, both ways.
    pub fn set_dup(&mut self, percent: f64) -> Result<()> {
        self.command(&format!("dup {percent}")).map(drop)
    }

    /// Sets the delay, both ways.
    pub fn set_delay(&mut self, ms: u64) -> Result<()> {
        self.command(&format!("delay {ms}")).map(drop)
    }

    /// The wirefilter's own account of its loss, delay and duplication, one line: `loss
    /// 10+0U/10+0U, delay 0+0U/0+0U, dup 0+0U/0+0U` (left to right / right to left, as
    /// `showinfo` gives them).
    pub fn settings(&mut self) -> Result<String> {
        let info = self.command("showinfo")?;
        Ok(settings_of(&info))
    }
}

/// [`Mgmt::settings`] from the text of `showinfo`.
fn settings_of(info: &str) -> String {
    let mut out = Vec::new();
    for (label, name) in [("Loss", "loss"), ("Delay", "delay"), ("Dup", "dup")] {
        let values = info.lines().find_map(|l| {
            let rest = l.strip_prefix(label)?;
            let words: Vec<&str> = rest.split_whitespace().collect();
            match words.as_slice() {
                ["L->R", lr, "R->L", rl, ..] => Some(format!("{lr}/{rl}")),
                _ => None,
            }
        });
        out.push(format!("{name} {}", values.as_deref().unwrap_or("?")));
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn showinfo_reads_as_one_line() {
        let info = "0000 DATA END WITH '.'\nWireFilter: bidirectional\nLoss   L->R 10+0U   \
                    R->L 10+0U\nLburst L->R 0+0U   R->L 0+0U\nDelay  L->R 20+0U   R->L 20+0U\n\
                    Dup    L->R 5+0U   R->L 5+0U\n.\n1000 Success\n\n";
        assert_eq!(settings_of(info), "loss 10+0U/10+0U, delay 20+0U/20+0U, dup 5+0U/5+0U");
    }
}
