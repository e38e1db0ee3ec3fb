#!/usr/bin/env bash
# Fuzzes the wire protocol decoders with libFuzzer, both sides: what a
# client sends must never crash vsyncd, nor what vsyncd sends a client.
#
#   Scripts/fuzz.sh [--runs N] [--seconds S] [--target client|server|all] [--fresh] [--seed N]
#
#   server  ClientMessage.decode: what vsyncd decodes from every client datagram.
#   client  ServerMessage.decode: what DisplayLink decodes from every daemon datagram.
# Each harness also checks the round trip: an accepted message re-encodes to bytes that decode
# to the same message (free text cut as the writer cuts it), and re-encoding is stable.
#
# Defaults: --runs 1000000 per harness (the documented full run), --target all. CI: --runs 20000.
# Builds are cached under .build-fuzz/ (rebuilt when VsyncCore or Fuzz/ change); the corpus
# grows in .build-fuzz/corpus/<target> across runs (--fresh starts it from the seeds again).
# Exits non-zero if a harness crashes or breaks a property; the input is saved under
# .build-fuzz/artifacts/<target>/ and the full log in .build-fuzz/logs/<target>.log.
#
# Why swiftc and not `swift build -Xswiftc -sanitize=fuzzer`: with that flag every executable
# in the package (vsyncd, vsync-probe, ...) fails to link, "multiple definition of 'main'"
# (libFuzzer brings its own main; checked with Swift 6.3.1), and a harness target would need
# unsafeFlags in Package.swift. The codec is pure Swift with no dependencies, so each harness is
# compiled with the VsyncCore sources as one module: it runs the codec exactly as shipped.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/.build-fuzz

runs=""
seconds=""
target=all
fresh=0
seed=""
usage() { echo "usage: Scripts/fuzz.sh [--runs N] [--seconds S] [--target client|server|all] [--fresh] [--seed N]" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) runs=${2:?}; shift 2 ;;
        --seconds) seconds=${2:?}; shift 2 ;;
        --target) target=${2:?}; shift 2 ;;
        --fresh) fresh=1; shift ;;
        --seed) seed=${2:?}; shift 2 ;;
        -h|--help) usage ;;
        *) echo "fuzz.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
case "$target" in
    all) targets=(server client) ;;
    server|client) targets=("$target") ;;
    *) echo "fuzz.sh: --target must be client, server or all, not '$target'" >&2; exit 2 ;;
esac
# --seconds alone means "for that long"; otherwise a run count (default 1,000,000).
if [[ -z "$runs" ]]; then
    if [[ -n "$seconds" ]]; then runs=-1; else runs=1000000; fi
fi

SWIFTC=$(command -v swiftc || true)
[[ -n "$SWIFTC" ]] || { echo "fuzz.sh: swiftc not found: put the Swift toolchain's bin directory on PATH" >&2; exit 1; }
# libFuzzer ships inside the Swift toolchain (clang's runtime); the distro's libclang-rt would
# not match its version, so nothing is installed: we only check it is there.
RT=$(dirname "$(dirname "$SWIFTC")")/lib/clang
if [[ -z "$(find "$RT" -name 'libclang_rt.fuzzer*.a' 2>/dev/null | head -1)" ]]; then
    echo "fuzz.sh: libFuzzer runtime not found under $RT: install a Swift toolchain for Linux from swift.org (it ships libclang_rt.fuzzer)" >&2
    exit 1
fi
LINKER=()
if command -v ld.lld >/dev/null 2>&1 || [[ -x "$(dirname "$SWIFTC")/ld.lld" ]]; then
    LINKER=(-use-ld=lld)   # gold prints hundreds of harmless ASan "Cannot export local symbol" warnings
fi

mkdir -p "$OUT/logs" "$OUT/seeds"
rm -f "$OUT/fuzz-seeds" "$OUT/fuzz-seeds.stamp"   # from an older layout of this script
# Compile from a snapshot: other engineers edit VsyncCore while this runs, and swiftc aborts
# when an input changes mid-build.
rm -rf "$OUT/src.new" && mkdir -p "$OUT/src.new"
cp -r Sources/VsyncCore Fuzz "$OUT/src.new/"
rm -rf "$OUT/src" && mv "$OUT/src.new" "$OUT/src"
mapfile -t core < <(find "$OUT/src/VsyncCore" -name '*.swift' | sort)
stamp=$( (cat "${core[@]}" "$OUT"/src/Fuzz/*.swift; echo "${LINKER[*]:-}") | sha256sum | cut -c1-16)

build() {  # build NAME STAMPKEY swiftc-args...
    local name=$1 key=$2; shift 2
    if [[ -x "$OUT/$name" && "$(cat "$OUT/$name.stamp" 2>/dev/null)" == "$key" ]]; then
        echo "fuzz.sh: $name is up to date"
        return
    fi
    echo "fuzz.sh: building $name"
    local t0=$SECONDS
    if ! "$SWIFTC" -parse-as-library -O -g -module-name VsyncFuzz "$@" -o "$OUT/$name" 2>"$OUT/logs/$name.build.log"; then
        grep -v 'Cannot export local symbol' "$OUT/logs/$name.build.log" | tail -30 >&2
        echo "fuzz.sh: building $name failed (log: $OUT/logs/$name.build.log)" >&2
        exit 1
    fi
    echo "$key" >"$OUT/$name.stamp"
    echo "fuzz.sh: built $name in $((SECONDS - t0)) s"
}

status=0
for t in "${targets[@]}"; do
    if [[ $t == server ]]; then harness=ServerSideDecoder; else harness=ClientSideDecoder; fi
    build "fuzz-$t" "$stamp" -sanitize=fuzzer,address "${LINKER[@]}" \
        "${core[@]}" "$OUT/src/Fuzz/FuzzCheck.swift" "$OUT/src/Fuzz/Seeds.swift" "$OUT/src/Fuzz/$harness.swift"

    # Seeds: real encoded messages from the codec itself, written by the harness (Fuzz/Seeds.swift)
    # and regenerated on every run, never committed.
    rm -rf "$OUT/seeds/$t" && mkdir -p "$OUT/seeds/$t"
    VSYNC_FUZZ_SEEDS="$OUT/seeds/$t" "$OUT/fuzz-$t" >"$OUT/logs/$t.seeds.log" 2>&1 || {
        cat "$OUT/logs/$t.seeds.log" >&2; echo "fuzz.sh: writing the $t seeds failed" >&2; exit 1; }

    corpus=$OUT/corpus/$t
    artifacts=$OUT/artifacts/$t
    [[ $fresh == 1 ]] && rm -rf "$corpus"
    mkdir -p "$corpus" "$artifacts"
    args=(-runs="$runs" -max_len=4200 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix="$artifacts/")
    [[ -n "$seconds" ]] && args+=(-max_total_time="$seconds")
    [[ -n "$seed" ]] && args+=(-seed="$seed")
    log=$OUT/logs/$t.log
    echo "fuzz.sh: fuzzing $t ($harness): ${args[*]}"
    rc=0
    # Swift's own backtracer runs inside ASan on a trap and reports a bogus ASan error from its
    # memory reader; off, libFuzzer prints the real stack ("Swift runtime failure: ...").
    SWIFT_BACKTRACE=enable=no "$OUT/fuzz-$t" "${args[@]}" "$corpus" "$OUT/seeds/$t" >"$log" 2>&1 || rc=$?
    # The summary: libFuzzer's DONE and Done lines, final stats, and any crash report.
    grep -E '^#[0-9]+[[:space:]]+DONE|^Done [0-9]+ runs|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|FUZZ PROPERTY BROKEN|^==[0-9]+==ERROR|^SUMMARY|deadly signal|Test unit written|Fatal error' "$log" | sed "s/^/[$t] /" || true
    # Where it crashed: the runtime failure and the first frames in the codec.
    grep -E 'Swift runtime failure|/(VsyncCore|Fuzz)/([A-Za-z+]+/)*[A-Za-z+]+\.swift:[0-9]+' "$log" | head -4 | sed "s/^ */[$t]   /" || true
    if [[ $rc != 0 ]]; then
        echo "fuzz.sh: $t FAILED (libFuzzer exit $rc); crashing input in $artifacts/, log $log" >&2
        status=1
    else
        echo "fuzz.sh: $t passed: no crash, corpus $(ls "$corpus" | wc -l) inputs"
    fi
done
exit $status
