//! `Client::display_timing` and `Link::set_page_only` against page-check's stand-in daemon: a
//! real sealed memfd timing page at 60 Hz (Tests/libvsync/page-server.h), built here with `cc`
//! against the library under test, until vsyncd's own page is on this branch.
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct PageDaemon {
    child: Child,
    socket: PathBuf,
}

impl Drop for PageDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn page_daemon() -> PageDaemon {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("page-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("page-check");
    let mut cc = Command::new("cc");
    cc.args(["-std=gnu11", "-pthread", "-I"]).arg(repo.join("include")).arg(repo.join("Tests/libvsync/page-check.c"));
    // The library this crate linked (build.rs's directory of links, with the SONAME), else the system's.
    if let Some(lib) = option_env!("VSYNC_LIB_DIR") {
        cc.arg("-L").arg(lib).arg(format!("-Wl,-rpath,{lib}"));
    }
    let cc = cc.arg("-lvsync").arg("-o").arg(&exe).output().expect("cc");
    assert!(cc.status.success(), "cc page-check.c: {}", String::from_utf8_lossy(&cc.stderr));
    let socket = dir.join("p.sock");
    let mut child = Command::new(&exe).arg("serve").arg(&socket).arg("5").stdout(Stdio::piped()).spawn().unwrap();
    // Its first line says it listens.
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert!(line.starts_with("serving"), "the stand-in daemon said {line:?}");
    PageDaemon { child, socket }
}

#[test]
fn display_timing_reads_the_page_and_predicts_the_next_vblank() {
    let daemon = page_daemon();
    let client = vsync::Client::connect(Some(&daemon.socket)).unwrap();
    let link = client.link(Some("display:1"), |_| {}).unwrap();
    link.set_page_only(true).unwrap();
    // The stand-in writes display 1's record on its first vblank, within a frame.
    let deadline = Instant::now() + Duration::from_secs(2);
    let timing = loop {
        match client.display_timing(1, 0) {
            Ok(t) => break t,
            Err(vsync::Error::NotOnTimingPage(_)) if Instant::now() < deadline => {
                client.dispatch(Some(Duration::from_millis(5))).unwrap();
            }
            Err(e) => panic!("display_timing: {e}"),
        }
    };
    assert!(timing.is_on() && timing.is_current());
    assert_eq!((timing.display_id, timing.refresh_mhz, timing.period_ns), (1, 60_000, 16_666_666));
    assert!((timing.period - 16_666_666.667).abs() < 0.001, "{}", timing.period);
    let at = client.display_timing(1, timing.last_timestamp_ns).unwrap();
    assert!(at.next_sequence > at.last_sequence);
    let frames = (at.next_sequence - at.last_sequence) as f64;
    assert_eq!(at.next_ns - at.last_timestamp_ns, (frames * at.period).round() as u64);
    match client.display_timing(2, 0) {
        Err(e @ vsync::Error::NotOnTimingPage(_)) => assert_eq!(e.errno(), vsync::sys::VSYNC_ENOTONPAGE),
        other => panic!("display 2: {other:?}"),
    }
}
