//! The hand-written declarations in `vsync::sys` against the C header: a C program compiled with
//! `cc` against `vsync/vsync.h` prints every struct's size and field offsets and every constant,
//! and each must equal what Rust has. Header: $VSYNC_INCLUDE_DIR, else this checkout's include/.
use std::collections::HashMap;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;
use vsync::sys::*;

fn include_dir() -> PathBuf {
    std::env::var_os("VSYNC_INCLUDE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include"))
}

const STRUCTS: &[(&str, &[&str])] = &[
    ("vsync_frame_timeline", &["sequence", "presentation_ns"]),
    (
        "vsync_frame",
        &[
            "struct_size", "display_id", "sequence", "timestamp_ns", "target_timestamp_ns", "duration_ns", "skipped",
            "flags", "interval_ns", "received_ns", "divisor", "reserved", "target_sequence", "timeline_count",
            "reserved2", "timelines", "generation", "reserved3",
        ],
    ),
    (
        "vsync_display_event",
        &[
            "struct_size", "kind", "display_id", "reserved", "refresh_mhz", "period_ns", "generation", "reserved2",
            "flags", "reserved3", "min_interval_ns", "max_interval_ns", "monotonic_ns", "realtime_ns",
        ],
    ),
    (
        "vsync_display",
        &[
            "struct_size", "display_id", "crtc_id", "connector_id", "state", "flags", "refresh_mhz", "period_ns",
            "width", "height", "name", "device_path", "bus_path", "edid_make", "edid_model", "edid_serial",
            "generation", "residual_rms_ns", "residual_p99_ns", "residual_samples", "min_interval_ns", "max_interval_ns",
        ],
    ),
    (
        "vsync_display_timing",
        &[
            "struct_size", "display_id", "generation", "flags", "last_sequence", "last_timestamp_ns",
            "anchor_sequence", "anchor_ns", "period_ns", "period_frac", "reserved", "period", "refresh_mhz",
            "min_interval_ns", "max_interval_ns", "updated_ns", "next_sequence", "next_ns",
        ],
    ),
    ("vsync_frame_counts", &["struct_size", "reason_count", "frames", "late", "by_reason"]),
];

fn constants() -> Vec<(&'static str, i64)> {
    vec![
        ("VSYNC_VERSION_MAJOR", VSYNC_VERSION_MAJOR as i64),
        ("VSYNC_VERSION_MINOR", VSYNC_VERSION_MINOR as i64),
        ("VSYNC_VERSION_MICRO", VSYNC_VERSION_MICRO as i64),
        ("VSYNC_VERSION", VSYNC_VERSION as i64),
        ("VSYNC_ENODAEMON", VSYNC_ENODAEMON as i64),
        ("VSYNC_EACCES", VSYNC_EACCES as i64),
        ("VSYNC_ECONNECT", VSYNC_ECONNECT as i64),
        ("VSYNC_ECONNLOST", VSYNC_ECONNLOST as i64),
        ("VSYNC_EREFUSED", VSYNC_EREFUSED as i64),
        ("VSYNC_ENODISPLAY", VSYNC_ENODISPLAY as i64),
        ("VSYNC_EDISPLAYGONE", VSYNC_EDISPLAYGONE as i64),
        ("VSYNC_EREQUEST", VSYNC_EREQUEST as i64),
        ("VSYNC_EPROTO", VSYNC_EPROTO as i64),
        ("VSYNC_EINVAL", VSYNC_EINVAL as i64),
        ("VSYNC_ENOMEM", VSYNC_ENOMEM as i64),
        ("VSYNC_ETIMEDOUT", VSYNC_ETIMEDOUT as i64),
        ("VSYNC_ENOTCONN", VSYNC_ENOTCONN as i64),
        ("VSYNC_EBUSY", VSYNC_EBUSY as i64),
        ("VSYNC_ENOPAGE", VSYNC_ENOPAGE as i64),
        ("VSYNC_ENOTONPAGE", VSYNC_ENOTONPAGE as i64),
        ("VSYNC_EAGAIN", VSYNC_EAGAIN as i64),
        ("VSYNC_TIMING_ON", VSYNC_TIMING_ON as i64),
        ("VSYNC_TIMING_CURRENT", VSYNC_TIMING_CURRENT as i64),
        ("VSYNC_FRAME_HARDWARE", VSYNC_FRAME_HARDWARE as i64),
        ("VSYNC_FRAME_PREDICTED", VSYNC_FRAME_PREDICTED as i64),
        ("VSYNC_FRAME_SYNTHETIC", VSYNC_FRAME_SYNTHETIC as i64),
        ("VSYNC_FRAME_VARIABLE", VSYNC_FRAME_VARIABLE as i64),
        ("VSYNC_FRAME_MODEL_TIMED", VSYNC_FRAME_MODEL_TIMED as i64),
        ("VSYNC_DISPLAY_MODE_CHANGED", VSYNC_DISPLAY_MODE_CHANGED as i64),
        ("VSYNC_DISPLAY_OFF", VSYNC_DISPLAY_OFF as i64),
        ("VSYNC_DISPLAY_ON", VSYNC_DISPLAY_ON as i64),
        ("VSYNC_DISPLAY_VARIABLE_REFRESH_CHANGED", VSYNC_DISPLAY_VARIABLE_REFRESH_CHANGED as i64),
        ("VSYNC_DISPLAY_WAITING", VSYNC_DISPLAY_WAITING as i64),
        ("VSYNC_DISPLAY_STATE_OFF", VSYNC_DISPLAY_STATE_OFF as i64),
        ("VSYNC_DISPLAY_STATE_ON", VSYNC_DISPLAY_STATE_ON as i64),
        ("VSYNC_DISPLAY_FLAG_HARDWARE_CLOCK", VSYNC_DISPLAY_FLAG_HARDWARE_CLOCK as i64),
        ("VSYNC_DISPLAY_FLAG_SYNTHETIC", VSYNC_DISPLAY_FLAG_SYNTHETIC as i64),
        ("VSYNC_DISPLAY_FLAG_PRIMARY", VSYNC_DISPLAY_FLAG_PRIMARY as i64),
        ("VSYNC_DISPLAY_FLAG_INTERRUPT_TIMESTAMPS", VSYNC_DISPLAY_FLAG_INTERRUPT_TIMESTAMPS as i64),
        ("VSYNC_DISPLAY_FLAG_VARIABLE", VSYNC_DISPLAY_FLAG_VARIABLE as i64),
        ("VSYNC_DISPLAY_FLAG_VARIABLE_CAPABLE", VSYNC_DISPLAY_FLAG_VARIABLE_CAPABLE as i64),
        ("VSYNC_MAX_DISPLAYS", VSYNC_MAX_DISPLAYS as i64),
        ("VSYNC_REASON_ON_TIME", VSYNC_REASON_ON_TIME as i64),
        ("VSYNC_REASON_APP_DEADLINE_MISSED", VSYNC_REASON_APP_DEADLINE_MISSED as i64),
        ("VSYNC_REASON_DAEMON_LATE", VSYNC_REASON_DAEMON_LATE as i64),
        ("VSYNC_REASON_DELIVERY_LATE", VSYNC_REASON_DELIVERY_LATE as i64),
        ("VSYNC_REASON_PRESENT_SCHEDULING", VSYNC_REASON_PRESENT_SCHEDULING as i64),
        ("VSYNC_REASON_PREDICTION_ERROR", VSYNC_REASON_PREDICTION_ERROR as i64),
        ("VSYNC_REASON_VARIABLE_REFRESH", VSYNC_REASON_VARIABLE_REFRESH as i64),
        ("VSYNC_REASON_DISPLAY_OFF", VSYNC_REASON_DISPLAY_OFF as i64),
        ("VSYNC_REASON_PREDICTED_WHILE_OFF", VSYNC_REASON_PREDICTED_WHILE_OFF as i64),
        ("VSYNC_REASON_MODE_CHANGE", VSYNC_REASON_MODE_CHANGE as i64),
        ("VSYNC_REASON_UNKNOWN", VSYNC_REASON_UNKNOWN as i64),
        ("VSYNC_REASON_COUNT", VSYNC_REASON_COUNT as i64),
        ("VSYNC_JANK_PRESENT_THRESHOLD_NS", VSYNC_JANK_PRESENT_THRESHOLD_NS as i64),
        ("VSYNC_JANK_DEADLINE_THRESHOLD_NS", VSYNC_JANK_DEADLINE_THRESHOLD_NS as i64),
        ("VSYNC_JANK_START_THRESHOLD_NS", VSYNC_JANK_START_THRESHOLD_NS as i64),
    ]
}

/// What Rust says: "struct size", "struct.field offset", "CONSTANT value".
fn rust_layout() -> HashMap<String, i64> {
    macro_rules! record {
        ($map:ident, $t:ident, $($f:ident),*) => {
            $map.insert(stringify!($t).to_string(), size_of::<$t>() as i64);
            $($map.insert(format!("{}.{}", stringify!($t), stringify!($f)), offset_of!($t, $f) as i64);)*
        };
    }
    let mut m = HashMap::new();
    record!(m, vsync_frame_timeline, sequence, presentation_ns);
    record!(m, vsync_frame, struct_size, display_id, sequence, timestamp_ns, target_timestamp_ns, duration_ns,
            skipped, flags, interval_ns, received_ns, divisor, reserved, target_sequence, timeline_count, reserved2,
            timelines, generation, reserved3);
    record!(m, vsync_display_event, struct_size, kind, display_id, reserved, refresh_mhz, period_ns, generation,
            reserved2, flags, reserved3, min_interval_ns, max_interval_ns, monotonic_ns, realtime_ns);
    record!(m, vsync_display, struct_size, display_id, crtc_id, connector_id, state, flags, refresh_mhz, period_ns,
            width, height, name, device_path, bus_path, edid_make, edid_model, edid_serial, generation,
            residual_rms_ns, residual_p99_ns, residual_samples, min_interval_ns, max_interval_ns);
    record!(m, vsync_display_timing, struct_size, display_id, generation, flags, last_sequence, last_timestamp_ns,
            anchor_sequence, anchor_ns, period_ns, period_frac, reserved, period, refresh_mhz, min_interval_ns,
            max_interval_ns, updated_ns, next_sequence, next_ns);
    record!(m, vsync_frame_counts, struct_size, reason_count, frames, late, by_reason);
    for (name, value) in constants() {
        m.insert(name.to_string(), value);
    }
    m
}

/// What C says, from a program compiled against the header.
fn c_layout() -> HashMap<String, i64> {
    let mut source = String::from("#include <stddef.h>\n#include <stdio.h>\n#include <vsync/vsync.h>\nint main(void) {\n");
    for (name, fields) in STRUCTS {
        source += &format!("    printf(\"{name} %zu\\n\", sizeof(struct {name}));\n");
        for f in *fields {
            source += &format!("    printf(\"{name}.{f} %zu\\n\", offsetof(struct {name}, {f}));\n");
        }
    }
    for (name, _) in constants() {
        source += &format!("    printf(\"{name} %lld\\n\", (long long)({name}));\n");
    }
    source += "    return 0;\n}\n";
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let (c, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&c, source).unwrap();
    let cc = Command::new("cc").arg("-I").arg(include_dir()).arg(&c).arg("-o").arg(&exe).output().expect("cc");
    assert!(cc.status.success(), "cc failed: {}", String::from_utf8_lossy(&cc.stderr));
    let out = Command::new(&exe).output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn every_struct_and_constant_matches_the_header() {
    let (rust, c) = (rust_layout(), c_layout());
    assert_eq!(rust.len(), c.len(), "the C program printed other names: {:?}", c.keys());
    let mut wrong: Vec<String> = rust
        .iter()
        .filter(|(k, v)| c.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: Rust {v}, C {:?}", c.get(k)))
        .collect();
    wrong.sort();
    assert!(wrong.is_empty(), "sys.rs disagrees with vsync.h:\n{}", wrong.join("\n"));
}

/// Every function the header declares is declared in sys.rs (and no other).
#[test]
fn every_header_function_is_declared() {
    let header = std::fs::read_to_string(include_dir().join("vsync/vsync.h")).unwrap();
    let sys = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/sys.rs")).unwrap();
    let mut declared: Vec<&str> = header
        .lines()
        .filter(|l| !l.starts_with("typedef") && !l.starts_with([' ', '/', '#']) && l.contains('('))
        .filter_map(|l| l[..l.find('(').unwrap()].split([' ', '*']).last())
        .filter(|n| n.starts_with("vsync_"))
        .collect();
    let mut rust: Vec<&str> = sys
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub fn "))
        .map(|l| &l[..l.find('(').unwrap()])
        .collect();
    declared.sort();
    rust.sort();
    assert!(declared.len() >= 19, "{declared:?}");
    assert_eq!(declared, rust);
}

#[test]
fn the_library_is_the_headers_version() {
    assert_eq!(vsync::library_version(), (VSYNC_VERSION_MAJOR, VSYNC_VERSION_MINOR, VSYNC_VERSION_MICRO));
}
