//! The crate against a real vsyncd on its timer source (`vsyncd --source timer:60`): the
//! binary from $VSYNCD_BIN, else this checkout's Swift build (.build/debug or release, the newer).
use std::cell::{Cell, RefCell};
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

struct Daemon {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
}

fn vsyncd_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("VSYNCD_BIN") {
        return PathBuf::from(bin);
    }
    let build = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.build");
    let mut found: Vec<PathBuf> = ["debug", "release"].iter().map(|c| build.join(c).join("vsyncd")).filter(|p| p.exists()).collect();
    found.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    found.pop().expect("no vsyncd: build it with 'swift build' or set VSYNCD_BIN")
}

impl Daemon {
    fn start(name: &str) -> Daemon {
        Daemon::start_with(name, &[])
    }

    /// With more of vsyncd's options.
    fn start_with(name: &str, extra: &[&str]) -> Daemon {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("vsyncd-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("vsyncd.sock");
        let child = Command::new(vsyncd_binary())
            .args(["--source", "timer:60", "--log-level", "warning", "--socket"])
            .arg(&socket)
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .expect("cannot start vsyncd");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !handshakes(&socket) {
            assert!(Instant::now() < deadline, "vsyncd did not listen on {} within 20 s", socket.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        Daemon { child, dir, socket }
    }
}

/// Up once a client finishes the handshake (the socket is SOCK_SEQPACKET: std cannot connect to it).
fn handshakes(socket: &Path) -> bool {
    socket.exists() && vsync::Client::connect(Some(socket)).is_ok()
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Dispatches until `done` or 10 s.
fn dispatch_until(client: &vsync::Client, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "nothing within 10 s");
        client.dispatch(Some(Duration::from_millis(100))).unwrap();
    }
}

#[test]
fn frames_come_at_the_chosen_rate() {
    let daemon = Daemon::start("rate");
    let client = vsync::Client::connect(Some(&daemon.socket)).unwrap();
    let frames = RefCell::new(Vec::new());
    let link = client.link(None, |f: &vsync::Frame| frames.borrow_mut().push(*f)).unwrap();
    link.set_rate(0.0, 0.0, 30.0).unwrap();
    dispatch_until(&client, || frames.borrow().len() >= 8);
    let frames = frames.borrow();
    assert!(frames.iter().all(|f| f.divisor == 2 && f.sequence % 2 == 0 && f.is_synthetic()), "{frames:?}");
    for w in frames.windows(2) {
        assert_eq!(w[1].sequence - w[0].sequence, 2 * (1 + w[1].skipped as u64), "{w:?}");
        assert_eq!(w[1].interval_ns, 2 * w[1].duration_ns);
    }
    assert_eq!(frames[0].timelines()[0].sequence, frames[0].target_sequence);
    assert_eq!(link.refresh().unwrap(), (60_000, 16_666_667));
    assert_eq!(link.max_fps().unwrap(), 60);
}

#[test]
fn the_fd_polls_readable_when_there_is_work() {
    extern "C" {
        fn poll(fds: *mut [i32; 2], n: u64, timeout: i32) -> i32;
    }
    let daemon = Daemon::start("fd");
    let client = vsync::Client::connect(Some(&daemon.socket)).unwrap();
    assert_eq!(client.as_fd().as_raw_fd(), client.as_raw_fd());
    let count = Cell::new(0);
    let _link = client.link(Some("timer"), |_: &vsync::Frame| count.set(count.get() + 1)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while count.get() < 3 {
        assert!(Instant::now() < deadline);
        // struct pollfd { int fd; short events; short revents; }: POLLIN = 1 in the low half.
        let mut pfd = [client.as_raw_fd(), 1];
        let ready = unsafe { poll(&mut pfd, 1, 1000) };
        assert!(ready >= 0);
        client.dispatch(Some(Duration::ZERO)).unwrap();
    }
}

#[test]
fn displays_are_listed() {
    let daemon = Daemon::start("displays");
    let client = vsync::Client::connect(Some(&daemon.socket)).unwrap();
    let displays = client.displays().unwrap();
    assert_eq!(displays.len(), 1, "{displays:?}");
    let d = &displays[0];
    assert_eq!((d.name.as_str(), d.state, d.refresh_mhz), ("timer", vsync::DisplayState::On, 60_000));
    assert!(d.is_primary() && d.device_path.is_empty(), "{d:?}");
    // The timer source has no variable refresh (protocol 5).
    assert!(!d.is_variable() && !d.is_variable_capable() && d.min_interval_ns == 0 && d.max_interval_ns == 0, "{d:?}");
}

#[test]
fn errors_are_an_enum_with_the_line() {
    let missing = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("no-such-vsyncd.sock");
    let error = vsync::Client::connect(Some(&missing)).err().expect("connected to nothing");
    assert!(matches!(error, vsync::Error::NoDaemon(_)), "{error:?}");
    assert_eq!(error.errno(), 111);
    assert!(error.to_string().starts_with(&format!("no vsyncd at {}", missing.display())), "{error}");
    let as_std: &dyn std::error::Error = &error;
    assert!(!as_std.to_string().is_empty());

    let daemon = Daemon::start("errors");
    let client = vsync::Client::connect(Some(&daemon.socket)).unwrap();
    let invalid = client.link(Some("crtc:0"), |_: &vsync::Frame| {}).err().expect("crtc:0 accepted");
    assert!(matches!(&invalid, vsync::Error::InvalidArgument(m) if m.contains("'crtc:0'")), "{invalid:?}");
    let link = client.link(None, |_: &vsync::Frame| {}).unwrap();
    let range = link.set_rate(40.0, 10.0, 0.0).unwrap_err();
    assert!(matches!(&range, vsync::Error::InvalidArgument(m) if m.starts_with("vsync_link_set_rate")), "{range:?}");
    // A display that does not exist comes through the link's error closure.
    let errors = Rc::new(RefCell::new(Vec::new()));
    let missing_display = client.link(Some("display:99"), |_: &vsync::Frame| {}).unwrap();
    let seen = errors.clone();
    missing_display.on_error(move |e: &vsync::Error| seen.borrow_mut().push(e.clone())).unwrap();
    dispatch_until(&client, || !errors.borrow().is_empty());
    assert!(matches!(errors.borrow()[0], vsync::Error::NoDisplay(_)), "{:?}", errors.borrow());
}

#[test]
fn a_panic_in_a_closure_is_resumed_from_dispatch() {
    let daemon = Daemon::start("panic");
    let client = vsync::Client::connect(Some(&daemon.socket)).unwrap();
    let _link = client.link(None, |f: &vsync::Frame| panic!("frame {} hurt", f.sequence)).unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for _ in 0..100 {
            client.dispatch(Some(Duration::from_millis(100))).unwrap();
        }
    }));
    let payload = outcome.expect_err("the closure's panic did not reach dispatch's caller");
    let message = payload.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.starts_with("frame ") && message.ends_with(" hurt"), "{message}");
    // The client still works after the panic.
    let count = Cell::new(0);
    let _second = client.link(None, |_: &vsync::Frame| count.set(count.get() + 1)).unwrap();
    drop(_link);
    dispatch_until(&client, || count.get() >= 2);
}

#[test]
fn links_dropped_in_any_order_and_from_inside_a_closure() {
    let daemon = Daemon::start("drops");
    let client = vsync::Client::connect(Some(&daemon.socket)).unwrap();
    let a_count = Cell::new(0);
    let b_count = Rc::new(Cell::new(0));
    let b_seen = b_count.clone();
    // Link b lives inside a's closure, which drops it on a's second frame.
    let b = RefCell::new(Some(client.link(None, move |_: &vsync::Frame| b_seen.set(b_seen.get() + 1)).unwrap()));
    let a = client.link(None, |_: &vsync::Frame| {
        a_count.set(a_count.get() + 1);
        if a_count.get() == 2 {
            b.borrow_mut().take();
        }
    })
    .unwrap();
    dispatch_until(&client, || a_count.get() >= 5);
    assert!(b.borrow().is_none());
    let b_final = b_count.get();
    dispatch_until(&client, || a_count.get() >= 7);
    assert_eq!(b_count.get(), b_final, "a dropped link still got frames");
    drop(a);
}

/// Every fourth frame's work lasts a period and 2 ms from the tick's receipt, longer than the period
/// it had: exactly those are AppDeadlineMissed. The others take no time: on time when their tick came
/// in time (right after the last one, read by its target); held back, the app's only after its own
/// overrun. The counts are the verdicts'.
#[test]
fn frames_whose_work_overruns_are_app_deadline_missed() {
    use vsync::FrameReason::*;
    let daemon = Daemon::start("reasons");
    let client = vsync::Client::connect(Some(&daemon.socket)).unwrap();
    let latest: Cell<Option<vsync::Frame>> = Cell::new(None);
    let link = client.link(None, |f: &vsync::Frame| latest.set(Some(*f))).unwrap();
    let mut verdicts = Vec::new();
    let mut last = None;
    while verdicts.len() < 24 {
        client.dispatch(Some(Duration::from_millis(100))).unwrap();
        let Some(frame) = latest.take() else { continue };
        let overran = verdicts.len() % 4 == 1;
        let in_time = frame.skipped == 0 && frame.received_ns <= frame.target_timestamp_ns;
        let end = if overran { frame.received_ns + frame.duration_ns + 2_000_000 } else { frame.received_ns };
        std::thread::sleep(Duration::from_nanos(end.saturating_sub(vsync::now_ns())));
        verdicts.push((overran, in_time, link.frame_done(&frame, end).unwrap()));
        last = Some(frame);
    }
    for (i, &(overran, in_time, reason)) in verdicts.iter().enumerate() {
        // Held back by the app's own overrun just before it, a frame is the app's.
        let after_overrun = i > 0 && verdicts[i - 1].0;
        let expected: &[vsync::FrameReason] = if overran {
            &[AppDeadlineMissed]
        } else if in_time {
            &[OnTime]
        } else if after_overrun {
            &[OnTime, DeliveryLate, DaemonLate, AppDeadlineMissed]
        } else {
            &[OnTime, DeliveryLate, DaemonLate]
        };
        assert!(expected.contains(&reason), "frame {i}: {verdicts:?}");
    }
    assert!(verdicts.iter().filter(|v| !v.0 && v.1).count() >= 12, "{verdicts:?}");
    let counts = link.frame_counts().unwrap();
    let on_time = verdicts.iter().filter(|v| v.2 == OnTime).count() as u64;
    assert_eq!((counts.frames, counts.late), (24, 24 - on_time));
    let missed = verdicts.iter().filter(|v| v.2 == AppDeadlineMissed).count() as u64;
    assert_eq!((counts.count(AppDeadlineMissed), counts.count(OnTime)), (missed, on_time));
    assert_eq!(AppDeadlineMissed.name(), "appDeadlineMissed");
    // A frame is judged once; a frame the library did not fill is no frame.
    let again = link.frame_done(&last.unwrap(), 0);
    assert!(matches!(again, Err(vsync::Error::InvalidArgument(_))), "{again:?}");
    let blank = link.frame_done(&vsync::Frame::default(), 0);
    assert!(matches!(blank, Err(vsync::Error::InvalidArgument(_))), "{blank:?}");
}

/// Under sparse vblank sampling, hardware ticks keep the display's vblank events on: no frame is
/// model-timed over 150 frames, past the model's learning and a 2 s burst interval (without them
/// most are). Turned off on the running link, model-timed frames come.
#[test]
fn hardware_ticks_keep_frames_off_the_model_until_turned_off() {
    let daemon = Daemon::start_with("hardware", &["--vblank-sampling", "sparse"]);
    let client = vsync::Client::connect(Some(&daemon.socket)).unwrap();
    let frames = RefCell::new(Vec::new());
    let link = client.link(None, |f: &vsync::Frame| frames.borrow_mut().push(*f)).unwrap();
    link.set_hardware_ticks(true).unwrap();
    dispatch_until(&client, || frames.borrow().len() >= 150);
    assert!(frames.borrow().iter().all(|f| !f.is_model_timed()), "{:?}", frames.borrow());
    link.set_hardware_ticks(false).unwrap();
    frames.borrow_mut().clear();
    dispatch_until(&client, || frames.borrow().iter().any(|f| f.is_model_timed()));
}
