import Foundation
import Testing
import VsyncCore

/// The Debian packages Scripts/package.sh builds (Scripts/test.sh builds them before the
/// suite): what each holds and depends on, the maintainer scripts, and that the packaged
/// binaries and library serve ticks with the Swift toolchain hidden.
@Suite("Debian packages", .serialized)
struct PackageTests {
    static var directory: URL {
        if let dir = ProcessInfo.processInfo.environment["VSYNCD_DEB_DIR"] { return URL(fileURLWithPath: dir) }
        return SystemdUnitTests.repository.appendingPathComponent("out/deb")
    }

    /// The .deb of `package`; a missing one fails the test (build them with Scripts/package.sh).
    static func deb(_ package: String) throws -> String {
        let name = "\(package)_\(VsyncVersion.string)_amd64.deb"
        let path = directory.appendingPathComponent(name).path
        try #require(FileManager.default.fileExists(atPath: path), "no \(path): run Scripts/package.sh first")
        return path
    }

    static func dpkgDeb(_ arguments: [String]) throws -> String {
        let result = try Command.run(["dpkg-deb"] + arguments)
        try #require(result.status == 0, "dpkg-deb \(arguments.joined(separator: " ")): \(result.output)")
        return result.output
    }

    static func contents(_ package: String) throws -> [String] {
        // "drwxr-xr-x root/root 0 2026-11-23 12:00 ./usr/bin/" → "/usr/bin/"; links keep " -> target".
        try dpkgDeb(["-c", try deb(package)]).split(separator: "\n").map { line in
            String(line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true).last ?? "").replacingOccurrences(of: "./", with: "/")
        }
    }

    static func field(_ package: String, _ name: String) throws -> String {
        try dpkgDeb(["-f", try deb(package), name]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func vsyncdHoldsTheDaemonProbeUnitsAndManPagesAndNeedsNothingSwift() throws {
        let files = try Self.contents("vsyncd")
        for path in ["/usr/bin/vsyncd", "/usr/bin/vsync-probe", "/lib/systemd/system/vsyncd.service",
                     "/lib/systemd/system/vsyncd.socket", "/usr/share/man/man8/vsyncd.8.gz",
                     "/usr/share/man/man1/vsync-probe.1.gz", "/usr/share/doc/vsyncd/PROTOCOL.md.gz",
                     "/usr/share/doc/vsyncd/copyright"] {
            #expect(files.contains(path), "vsyncd's package has no \(path): \(files)")
        }
        let depends = try Self.field("vsyncd", "Depends")
        #expect(depends.contains("libdrm2"), "Depends: \(depends)")
        #expect(!depends.lowercased().contains("swift"), "Depends: \(depends)")

        let work = try Self.extract(["vsyncd"])
        defer { try? FileManager.default.removeItem(at: work) }
        let service = try String(contentsOf: work.appendingPathComponent("lib/systemd/system/vsyncd.service"), encoding: .utf8)
        #expect(service.contains("\nExecStart=/usr/bin/vsyncd "), "\(service)")
        #expect(!service.contains("/usr/local"), "\(service)")
        // The binaries need no library from the toolchain: only libdrm, the C++ runtime and libc.
        for binary in ["vsyncd", "vsync-probe"] {
            let needed = try Command.run(["sh", "-c", "readelf -d '\(work.path)/usr/bin/\(binary)' | sed -n 's/.*NEEDED.*\\[\\(.*\\)\\]/\\1/p'"])
            let libraries = needed.output.split(separator: "\n").map(String.init)
            #expect(!libraries.isEmpty && libraries.allSatisfy { !$0.contains("swift") && !$0.contains("Foundation") && !$0.contains("dispatch") },
                    "\(binary) needs \(libraries)")
            let runpath = try Command.run(["sh", "-c", "readelf -d '\(work.path)/usr/bin/\(binary)' | grep -E 'RUNPATH|RPATH' || true"])
            #expect(runpath.output.isEmpty, "\(binary) has a run path: \(runpath.output)")
        }
    }

    @Test func vsyncdEnablesAndStartsTheSocketTheDebianWay() throws {
        let work = try Self.extract([])
        defer { try? FileManager.default.removeItem(at: work) }
        _ = try Self.dpkgDeb(["-e", try Self.deb("vsyncd"), work.appendingPathComponent("DEBIAN").path])
        let postinst = try String(contentsOf: work.appendingPathComponent("DEBIAN/postinst"), encoding: .utf8)
        #expect(postinst.contains("deb-systemd-helper enable 'vsyncd.socket'"), "\(postinst)")
        #expect(postinst.contains("deb-systemd-invoke $_dh_action 'vsyncd.socket'"), "\(postinst)")
        // An upgrade restarts the socket, which stops a running daemon (it Requires= the socket):
        // the next client starts the new one.
        #expect(postinst.contains("_dh_action=restart"), "\(postinst)")
        // The service is started by its first client, never by the package.
        #expect(!postinst.contains("deb-systemd-invoke $_dh_action 'vsyncd.service'")
                && !postinst.contains("deb-systemd-invoke start 'vsyncd.service'"), "\(postinst)")
        let service = try String(contentsOf: SystemdUnitTests.repository.appendingPathComponent("systemd/vsyncd.service"), encoding: .utf8)
        #expect(service.contains("\nRequires=vsyncd.socket\n"), "stopping the socket must stop the daemon")
        // Removal stops the socket, and with it the daemon.
        let prerm = try String(contentsOf: work.appendingPathComponent("DEBIAN/prerm"), encoding: .utf8)
        #expect(prerm.contains("deb-systemd-invoke stop 'vsyncd.socket'"), "\(prerm)")
        let postrm = try String(contentsOf: work.appendingPathComponent("DEBIAN/postrm"), encoding: .utf8)
        #expect(postrm.contains("deb-systemd-helper purge 'vsyncd.socket'"), "\(postrm)")
    }

    @Test func libvsyncPackagesSplitRuntimeAndDevelopmentWithSymbols() throws {
        let runtime = try Self.contents("libvsync1")
        let triplet = "x86_64-linux-gnu"
        #expect(runtime.contains("/usr/lib/\(triplet)/libvsync.so.1.0.0"), "\(runtime)")
        #expect(runtime.contains { $0.hasPrefix("/usr/lib/\(triplet)/libvsync.so.1 -> libvsync.so.1.0.0") }, "\(runtime)")
        #expect(!runtime.contains { $0.contains("libvsync.so ->") || $0.hasSuffix(".h") }, "\(runtime)")
        #expect(try Self.field("libvsync1", "Depends").hasPrefix("libc6"), "libvsync1 should need libc alone")
        #expect(!(try Self.field("libvsync1", "Depends")).contains(","), "libvsync1 should need libc alone")

        let dev = try Self.contents("libvsync-dev")
        for path in ["/usr/include/vsync/vsync.h", "/usr/lib/\(triplet)/pkgconfig/vsync.pc", "/usr/share/man/man3/libvsync.3.gz",
                     "/usr/include/vsync/vsync-glib.h", "/usr/include/vsync/vsync-qt.h",
                     "/usr/lib/\(triplet)/pkgconfig/vsync-glib.pc", "/usr/lib/\(triplet)/pkgconfig/vsync-qt.pc",
                     "/usr/share/doc/libvsync-dev/examples/vsync-glib.c", "/usr/share/doc/libvsync-dev/examples/vsync-qt.cpp"] {
            #expect(dev.contains(path), "libvsync-dev has no \(path): \(dev)")
        }
        #expect(dev.contains { $0.hasPrefix("/usr/lib/\(triplet)/libvsync.so -> libvsync.so.1") }, "\(dev)")
        #expect(try Self.field("libvsync-dev", "Depends").contains("libvsync1 (= \(VsyncVersion.string))"))
        // The main-loop adapters are headers: GLib and Qt are what the program builds with, not
        // something libvsync-dev or libvsync1 must pull in.
        #expect(try Self.field("libvsync-dev", "Suggests") == "libglib2.0-dev, qt6-base-dev")

        // The symbols file: every function of the header, at the version that brought it.
        let work = try Self.extract([])
        defer { try? FileManager.default.removeItem(at: work) }
        _ = try Self.dpkgDeb(["-e", try Self.deb("libvsync1"), work.appendingPathComponent("DEBIAN").path])
        let symbols = try String(contentsOf: work.appendingPathComponent("DEBIAN/symbols"), encoding: .utf8)
        let shlibs = try String(contentsOf: work.appendingPathComponent("DEBIAN/shlibs"), encoding: .utf8)
        #expect(shlibs.contains("libvsync 1 libvsync1"), "\(shlibs)")
        let exported = symbols.split(separator: "\n").filter { $0.hasPrefix(" vsync_") }
        #expect(exported.count == 25, "\(symbols)")
    }

    /// The packaged programs and library, with the toolchain hidden: vsyncd on its timer source
    /// serves the packaged C example (built against libvsync-dev) ticks; vsync-probe gives its
    /// one-line no-display error.
    @Test(.timeLimit(.minutes(2)))
    func packagedBinariesServeTicksWithoutTheSwiftToolchain() throws {
        let root = try Self.extract(["vsyncd", "libvsync1", "libvsync-dev"])
        defer { try? FileManager.default.removeItem(at: root) }
        let lib = root.appendingPathComponent("usr/lib/x86_64-linux-gnu")
        let example = root.appendingPathComponent("example")
        let build = try Command.run(["sh", "-c", "cc -I'\(root.path)/usr/include' '\(SystemdUnitTests.repository.path)/examples/vsync-ticks.c' -L'\(lib.path)' -lvsync -o '\(example.path)'"])
        try #require(build.status == 0, "\(build.output)")

        let bin = root.appendingPathComponent("usr/bin").path
        let socket = root.appendingPathComponent("vsyncd.sock").path
        let script = """
            set -u
            echo "versions: $('\(bin)/vsyncd' --version) $('\(bin)/vsync-probe' --version)"
            '\(bin)/vsync-probe' list; echo "probe status $?"
            '\(bin)/vsyncd' --source timer:60 --socket '\(socket)' --log-level warning & daemon=$!
            i=0; while [ ! -S '\(socket)' ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
            LD_LIBRARY_PATH='\(lib.path)' '\(example.path)' --socket '\(socket)' --fps 20 --frames 10; echo "client status $?"
            kill -TERM $daemon; wait $daemon; echo "daemon status $?"
            """
        let result = try LibvsyncTests.withoutToolchain("sh -c \(Self.quote(script))")
        let output = result.output
        #expect(result.status == 0, "\(output)")
        #expect(output.contains("versions: \(VsyncVersion.string) \(VsyncVersion.string)\n"), "\(output)")
        let probe = output.split(separator: "\n").filter { $0.hasPrefix("vsync-probe:") || $0.contains("no DRM device") }
        #expect(probe.count == 1 && output.contains("probe status 1\n"), "vsync-probe list should fail with one line: \(output)")
        #expect(output.contains("client status 0\n") && output.contains("daemon status 0\n"), "\(output)")
        LibvsyncTests.expectTicks(output, count: 10, divisor: 3)
    }

    /// A fresh directory with `packages` unpacked into it.
    static func extract(_ packages: [String]) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("vsyncd-deb-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for package in packages { _ = try dpkgDeb(["-x", try deb(package), dir.path]) }
        return dir
    }

    static func quote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
}
