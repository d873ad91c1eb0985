//! The control thread runs on a core no worker is pinned to, so that
//! answering the control API never takes cycles from a poll-mode worker.

use std::sync::Arc;

/// The `Cpus_allowed_list` of this process's thread named `name`.
fn allowed_cpus_of_thread(name: &str) -> Option<String> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
        if comm.trim() == name {
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            let line = status.lines().find(|l| l.starts_with("Cpus_allowed_list:"))?;
            return Some(line.split(':').nth(1)?.trim().to_string());
        }
    }
    None
}

#[test]
fn the_control_thread_stays_off_the_workers_cores() {
    let cores = runtime::config::available_cores();
    if cores.len() < 2 {
        eprintln!("one core only: nothing to keep apart");
        return;
    }
    let text = format!(
        r#"
        [io]
        backend = "synthetic"
        [io.synthetic]
        pacing = "wall"
        traffic = [{{ name = "web", port = 0, rate_pps = 1000, template = "ipv4-udp" }}]
        [workers]
        cores = [{}]
        [[ports]]
        id = 0
        [[ports]]
        id = 1
        [[pipeline]]
        kind = "port-forward"
        port = 1
        "#,
        cores[0]
    );
    let cfg = runtime::config::parse(&text, "placement.toml".as_ref()).unwrap();
    let plane: Arc<control::Plane> =
        control::Plane::new(runtime::start::<()>(cfg.clone()).unwrap(), cfg);
    let ccfg = control::ControlConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        metrics_listen: None,
        allow_unauthenticated: true,
        ..Default::default()
    };
    let server = control::serve::<()>(plane.clone(), &ccfg).expect("control server starts");
    let mut allowed = None;
    for _ in 0..100 {
        allowed = allowed_cpus_of_thread("control");
        if allowed.as_deref() == Some(&cores[1].to_string()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(allowed, Some(cores[1].to_string()), "the worker is on core {}", cores[0]);
    plane.stop();
    server.shutdown();
}
