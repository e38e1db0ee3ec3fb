//! Prints frame ticks from vsyncd at a chosen rate.
//!
//!     cargo run --example ticks -- [--fps N] [--frames N] [--display NAME] [--socket PATH]
use std::cell::Cell;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let (mut fps, mut frames, mut display, mut socket) = (0.0f64, 0u64, None::<String>, None::<PathBuf>);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let Some(value) = args.next() else {
            eprintln!("ticks: {flag} needs a value\nusage: ticks [--fps N] [--frames N] [--display NAME] [--socket PATH]");
            return ExitCode::from(64);
        };
        match flag.as_str() {
            "--fps" => fps = value.parse().unwrap_or(0.0),
            "--frames" => frames = value.parse().unwrap_or(0),
            "--display" => display = Some(value),
            "--socket" => socket = Some(PathBuf::from(value)),
            _ => {
                eprintln!("ticks: unknown option {flag}");
                return ExitCode::from(64);
            }
        }
    }
    match run(fps, frames, display.as_deref(), socket.as_deref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ticks: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(fps: f64, frames: u64, display: Option<&str>, socket: Option<&std::path::Path>) -> Result<(), vsync::Error> {
    let client = vsync::Client::connect(socket)?;
    let seen = Cell::new(0u64);
    let link = client.link(display, |f: &vsync::Frame| {
        let latency_us = vsync::now_ns().saturating_sub(f.timestamp_ns) / 1000;
        let flags = if f.is_synthetic() { "synthetic" } else if f.is_predicted() { "predicted" } else { "hardware" };
        println!(
            "seq {}  t {:.6}  target {:.6}  interval {:.3} ms  divisor {}  skipped {}  flags {}  latency {} us",
            f.sequence,
            f.timestamp_ns as f64 / 1e9,
            f.target_timestamp_ns as f64 / 1e9,
            f.interval_ns as f64 / 1e6,
            f.divisor,
            f.skipped,
            flags,
            latency_us
        );
        seen.set(seen.get() + 1);
    })?;
    link.on_error(|e: &vsync::Error| eprintln!("ticks: {e}"))?;
    link.set_rate(0.0, 0.0, fps)?;
    while frames == 0 || seen.get() < frames {
        client.dispatch(None)?;
    }
    let (mhz, _) = link.refresh()?;
    println!("{} frames; display {:.3} Hz (max {} fps)", seen.get(), mhz as f64 / 1000.0, link.max_fps()?);
    Ok(())
}
