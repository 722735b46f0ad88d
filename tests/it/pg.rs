//! A throwaway PostgreSQL cluster per test: initdb into a temp dir, pg_ctl on
//! a free loopback port, stopped (and removed) on drop.

use crate::support::free_port;
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

pub struct PgCluster {
    dir: TempDir,
    bin: PathBuf,
    pub port: u16,
}

fn bin_dir() -> PathBuf {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if p.join("initdb").exists() {
            return p;
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path().join("bin"))
                .filter(|p| p.join("initdb").exists())
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found.pop().expect("PostgreSQL server binaries (initdb) are not installed: run .ci/run or apt-get install postgresql")
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Runs a server binary, as the `postgres` user when we are root (initdb
/// and postgres refuse to run as root).
fn run_pg(bin: &Path, args: &[&str]) {
    let status = if is_root() {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(bin)
            .args(args)
            .status()
    } else {
        Command::new(bin).args(args).status()
    }
    .expect("a PostgreSQL binary runs");
    assert!(status.success(), "{} {:?} failed", bin.display(), args);
}

impl PgCluster {
    pub fn start() -> PgCluster {
        let bin = bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("costwatch-pg")
            .tempdir()
            .unwrap();
        if is_root() {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(ok.success());
        }
        let data = dir.path().join("data");
        run_pg(
            &bin.join("initdb"),
            &[
                "-A",
                "trust",
                "-U",
                "postgres",
                "-D",
                data.to_str().unwrap(),
                "--no-sync",
            ],
        );
        let c = PgCluster {
            dir,
            bin,
            port: free_port(),
        };
        c.start_again();
        c
    }

    fn data(&self) -> String {
        self.dir.path().join("data").to_string_lossy().into_owned()
    }

    pub fn start_again(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("log");
        run_pg(
            &self.bin.join("pg_ctl"),
            &[
                "-D",
                &self.data(),
                "-o",
                &opts,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "start",
            ],
        );
    }

    pub fn stop(&self) {
        run_pg(
            &self.bin.join("pg_ctl"),
            &["-D", &self.data(), "-m", "fast", "-w", "stop"],
        );
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let pg_ctl = self.bin.join("pg_ctl");
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(pg_ctl);
            c
        } else {
            Command::new(pg_ctl)
        };
        let _ = cmd
            .args(["-D", &self.data(), "-m", "immediate", "stop"])
            .output();
    }
}
