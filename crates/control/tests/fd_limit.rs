//! At the file-descriptor limit the control server neither spins nor gives
//! up: the workers keep forwarding, the accept loops back off instead of
//! retrying at full speed, and once descriptors are free again the API
//! answers.

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Child-process half: holds `FD_LIMIT_COUNT` connections to
/// `FD_LIMIT_HOLD` until its standard input closes (does nothing in a
/// normal test run).
#[test]
fn hold_connections() {
    let Ok(addr) = std::env::var("FD_LIMIT_HOLD") else { return };
    let n: usize = std::env::var("FD_LIMIT_COUNT").unwrap().parse().unwrap();
    let held: Vec<TcpStream> = (0..n).filter_map(|_| TcpStream::connect(&addr).ok()).collect();
    eprintln!("holding {} connections", held.len());
    let _ = std::io::stdin().read(&mut [0u8; 1]);
}

/// The `stat` file of this process's thread `name`, opened now (at the
/// limit no descriptor is left to open it).
fn thread_stat(name: &str) -> std::fs::File {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        if std::fs::read_to_string(dir.join("comm")).unwrap().trim() == name {
            return std::fs::File::open(dir.join("stat")).unwrap();
        }
    }
    panic!("no thread {name}");
}

/// CPU time (user + system, in clock ticks) read from an open `stat` file.
fn ticks(stat: &mut std::fs::File) -> u64 {
    use std::io::Seek;
    let mut text = String::new();
    stat.rewind().unwrap();
    stat.read_to_string(&mut text).unwrap();
    // After the parenthesised name: state is field 3, utime 14, stime 15.
    let f: Vec<&str> = text[text.rfind(')').unwrap() + 2..].split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Sets this process's soft limit on open files to `soft` with util-linux's
/// `prlimit`; returns the previous soft limit.
fn set_fd_limit(soft: u64) -> u64 {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let old = line.split_whitespace().nth(3).unwrap().parse().unwrap();
    let pid = std::process::id().to_string();
    let ok = Command::new("prlimit")
        .args(["--pid", &pid, &format!("--nofile={soft}:")])
        .status()
        .expect("prlimit (util-linux) runs");
    assert!(ok.success());
    old
}

#[test]
fn at_the_descriptor_limit_the_router_forwards_and_answers() {
    if std::env::var("FD_LIMIT_HOLD").is_ok() {
        return;
    }
    let env = common::start(common::scratch("fd-limit"), |c| c.max_connections = 4096);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        common::generation(&common::client(&env, Some(common::ADMIN)).await).await
    });
    let mut control = thread_stat("control");
    // Leave 16 descriptors free, then let another process take them all.
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    let old = set_fd_limit(open + 16);
    let mut holder = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "hold_connections", "--nocapture", "--test-threads=1"])
        .env("FD_LIMIT_HOLD", &env.addr)
        .env("FD_LIMIT_COUNT", "200")
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let rx = |env: &common::Env| env.plane.snapshot().ports[0].counters.rx;
    let (t0, rx0) = (ticks(&mut control), rx(&env));
    std::thread::sleep(Duration::from_secs(1));
    let (t1, rx1) = (ticks(&mut control), rx(&env));
    // 100 ticks per second: a spinning accept loop would use about 100.
    assert!(t1 - t0 < 30, "the control thread used {} ticks in 1 s", t1 - t0);
    assert!(rx1 > rx0, "the workers stopped forwarding");
    drop(holder.stdin.take());
    holder.wait().unwrap();
    set_fd_limit(old);
    let start = Instant::now();
    rt.block_on(async {
        loop {
            let c = control::client::Client::connect(&env.addr, Some(common::ADMIN)).await;
            if let Ok(c) = c {
                if c.router().get_status(control::pb::GetStatusRequest {}).await.is_ok() {
                    break;
                }
            }
            assert!(start.elapsed() < Duration::from_secs(10), "the API did not come back");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}
