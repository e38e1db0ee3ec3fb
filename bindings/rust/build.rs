//! Finds libvsync to link: $LIBVSYNC_DIR, else this checkout's Swift build (.build/release or
//! .build/debug, the newer), else the system's (the libvsync-dev package, or Scripts/install.sh).
//! A library found by directory is linked through a directory of links in OUT_DIR holding both
//! `libvsync.so` and its SONAME `libvsync.so.1` (a Swift build has only the first), and tests and
//! examples get that directory as their run path.
use std::env;
use std::path::{Path, PathBuf};

fn library_in(dir: &Path) -> Option<PathBuf> {
    ["libvsync.so.1", "libvsync.so"].iter().map(|n| dir.join(n)).find(|p| p.exists())
}

fn main() {
    println!("cargo:rerun-if-env-changed=LIBVSYNC_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let found = match env::var_os("LIBVSYNC_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            match library_in(&dir) {
                Some(lib) => Some(lib),
                None => panic!("LIBVSYNC_DIR={} holds no libvsync.so: build it with 'swift build --product vsync'", dir.display()),
            }
        }
        None => {
            let build = manifest.join("../../.build");
            let mut candidates: Vec<PathBuf> =
                ["release", "debug"].iter().filter_map(|c| library_in(&build.join(c))).collect();
            candidates.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
            candidates.pop()
        }
    };
    if let Some(lib) = found {
        let lib = lib.canonicalize().unwrap_or(lib);
        println!("cargo:rerun-if-changed={}", lib.display());
        let links = PathBuf::from(env::var("OUT_DIR").unwrap()).join("lib");
        std::fs::create_dir_all(&links).unwrap();
        for name in ["libvsync.so", "libvsync.so.1"] {
            let link = links.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&lib, &link).unwrap();
        }
        println!("cargo:rustc-link-search=native={}", links.display());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", links.display());
        println!("cargo:libdir={}", links.display());
        // For tests that build C programs against the same library (tests/timing_page.rs).
        println!("cargo:rustc-env=VSYNC_LIB_DIR={}", links.display());
    }
    println!("cargo:rustc-link-lib=dylib=vsync");
}
