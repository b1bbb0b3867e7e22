#!/usr/bin/env bash
# build_sglang_bundle.sh OUTDIR
#
# Builds, on a networked x86-64 machine, the offline SGLang 0.5.17 site for the GPU machines (Python 3.12,
# glibc 2.39, torch 2.11.0+cu130 and ~190 packages of their own, no network): `sglang-site`, its own folder
# (SGLang's pins clash with the vLLM bundle's: docs/sglang.md). Steps:
#   1 download the wheels of sglang.lock (pip --require-hashes: every sha256 as locked; cached in $BUNDLE_WORK)
#   2 check the closure against the machine's package list (bundle.py check; one-line errors)
#   3 install them with pip --target (no deps, no index) for the machine's Python 3.12, whatever Python runs this
#     (bundle.py install: Requires-Python is judged against 3.12, not the running Python), and trim what the
#     server does not load
#   4 pack: tar | zstd -$ZSTD_LEVEL -T$THREADS (the packing figures in docs/sglang.md)
#   5 split into part folders of at most $PART_MIB MiB, everything in them counted: OUTDIR/p01, p02, ... each with
#     its part, SHA256SUMS, unpack.sh, assumed.txt, MANIFEST.txt; the last also holds the zstandard wheel (unpack
#     without a zstd command), so its part is smaller by the wheel's size
# Environment: BUNDLE_WORK (/tmp/sglang-bundle-work), PART_MIB (50: a part folder and the checkout (9 MiB) must fit one
#              64 MiB carry), ZSTD_LEVEL (10), THREADS (2), KEEP_FLASH_OPS (0: leave out sgl_kernel's FA3 library,
#              see docs/sglang.md), PYTHON (python3 with pip and packaging; any Python 3 version: the wheels are
#              chosen and installed for 3.12).
# Idempotent: wheels are cached; the site and archive are rebuilt only when the lock, the trims or the settings change.
set -Eeuo pipefail
trap 'echo "build_sglang_bundle.sh: FAILED (line $LINENO: $BASH_COMMAND)" >&2' ERR
die() { echo "build_sglang_bundle.sh: ERROR: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: build_sglang_bundle.sh OUTDIR"
T0=$(date +%s)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUTDIR=$(realpath -m -- "$1")
WORK=$(realpath -m -- "${BUNDLE_WORK:-/tmp/sglang-bundle-work}")
PART_MIB=${PART_MIB:-50}; ZSTD_LEVEL=${ZSTD_LEVEL:-10}; THREADS=${THREADS:-2}; KEEP_FLASH_OPS=${KEEP_FLASH_OPS:-0}
PY=${PYTHON:-python3}
NICE=(nice -n 19)
SITE=sglang-site; ARCHIVE=$SITE.tar.zst
for t in "$PY" zstd tar sha256sum nice realpath; do command -v "$t" >/dev/null || die "missing tool: $t (install it)"; done
"$PY" -c "import packaging" 2>/dev/null || die "$PY has no packaging module (pip install packaging, or PYTHON=...)"
if [ -d "$OUTDIR" ]; then
  other=$(find "$OUTDIR" -mindepth 1 -maxdepth 1 ! -name 'p[0-9][0-9]')
  [ -z "$other" ] || die "$OUTDIR holds files this script did not write ($other): give an empty or new folder"
fi
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
mapfile -t TARGET < <("$PY" "$HERE/bundle.py" target-args)   # --python-version 3.12 ... --platform manylinux_...
[ "${#TARGET[@]}" -gt 0 ] || die "bundle.py target-args printed nothing ($PY cannot run bundle.py?)"
mkdir -p "$WORK/wheels"

el "1/5 downloading the wheels of sglang.lock into $WORK/wheels (cached; sha256 checked by pip)"
"${NICE[@]}" "$PY" -m pip download -q --disable-pip-version-check --no-deps --require-hashes "${TARGET[@]}" \
    -d "$WORK/wheels" -r "$HERE/sglang.lock" \
    2> >(grep -v "is ignored: it is neither a file nor a directory" >&2 || true) \
  || die "pip download failed (network? or a wheel's sha256 differs from sglang.lock: regenerate with bundle.py lock)"

el "2/5 checking the closure against the GPU machine's packages"
"${NICE[@]}" "$PY" "$HERE/bundle.py" check "$WORK/wheels" "$WORK/install.txt" "$WORK/assumed.txt" \
  || die "closure check failed (the line above says what and how to fix it)"

STAMP=$( { cat "$HERE/sglang.lock" "$HERE/trim.txt" "$HERE/bundle.py"; echo "$ZSTD_LEVEL $KEEP_FLASH_OPS"; sed -n '/^# >>> site/,/^# <<< site/p' "$0"; } | sha256sum | cut -c1-16)
if [ -f "$WORK/$ARCHIVE" ] && [ "$(cat "$WORK/build.stamp" 2>/dev/null)" = "$STAMP" ]; then
  el "3-4/5 site and archive up to date (stamp $STAMP): reused"
else
# >>> site
  rm -f "$WORK/build.stamp"; rm -rf "$WORK/stage"; mkdir -p "$WORK/stage"; S="$WORK/stage/$SITE"
  el "3/5 installing $(wc -l < "$WORK/install.txt") wheels into $S and trimming"
  "${NICE[@]}" "$PY" "$HERE/bundle.py" install "$WORK/install.txt" "$S" \
    || die "pip install --target failed (the line above says why)"
  before=$(du -sm "$S" | cut -f1)
  # trim.txt: one glob per line, relative to the site (# why); each must match, so a changed layout stops here
  while read -r g; do
    g=${g%%#*}; g=$(echo "$g" | xargs); [ -n "$g" ] || continue
    [ "$g" = "sgl_kernel/flash_ops.abi3.so" ] && [ "$KEEP_FLASH_OPS" = 1 ] && continue
    compgen -G "$S/$g" >/dev/null || die "trim.txt: $g matches nothing in the site (the wheel layout changed: fix trim.txt)"
    for f in $S/$g; do rm -rf "$f"; done
  done < "$HERE/trim.txt"
  find "$S" -name __pycache__ -prune -exec rm -rf {} +
  if [ -d "$S/bin" ]; then   # console scripts: the GPU machine's python3, not this machine's interpreter
    for f in "$S"/bin/*; do head -c2 "$f" | grep -q '#!' && sed -i '1s|^#!.*python.*$|#!/usr/bin/env python3|' "$f"; done
  fi
  echo "  site: ${before} MiB installed, $(du -sm "$S" | cut -f1) MiB after trims, $(find "$S" -type f | wc -l) files"
  el "4/5 packing: tar | zstd -$ZSTD_LEVEL -T$THREADS"
  "${NICE[@]}" tar --sort=name --mtime='2026-01-01 00:00:00Z' --owner=0 --group=0 --numeric-owner -C "$WORK/stage" \
      -cf - "$SITE" | "${NICE[@]}" zstd -q -"$ZSTD_LEVEL" -T"$THREADS" -o "$WORK/$ARCHIVE.tmp" -f
  mv "$WORK/$ARCHIVE.tmp" "$WORK/$ARCHIVE"; echo "$STAMP" > "$WORK/build.stamp"
# <<< site
fi

el "5/5 splitting into parts of at most $PART_MIB MiB under $OUTDIR"
rm -rf "$WORK/parts"
ZW=$(grep -o '[^/]*zstandard-[^/]*\.whl$' "$WORK/install.txt" | head -1)
[ -n "$ZW" ] || die "no zstandard wheel in the install list (sglang requires it; the lock changed?)"
ROOM=65536   # SHA256SUMS, unpack.sh, assumed.txt, MANIFEST.txt and the folder itself: about 16 KiB
"$PY" "$HERE/bundle.py" split "$WORK/$ARCHIVE" "$WORK/parts" --part-mib "$PART_MIB" --room-bytes "$ROOM" \
    --last-room-bytes "$(stat -c %s "$WORK/wheels/$ZW")" || die "split failed (the line above says why)"
LAST=$(ls -d "$WORK"/parts/p[0-9][0-9] | tail -1)
for d in "$WORK"/parts/p[0-9][0-9]; do
  cp "$HERE/unpack.sh" "$WORK/assumed.txt" "$d/"
  { echo "# $ARCHIVE for the GPU machines: $(ls -d "$WORK"/parts/p* | wc -l) parts; the site holds (sglang.lock less the machine's):"
    sed 's|.*/||' "$WORK/install.txt"; } > "$d/MANIFEST.txt"
done
cp "$WORK/wheels/$ZW" "$LAST/"
for d in "$WORK"/parts/p[0-9][0-9]; do   # what one call carries beside the checkout (64 MiB in all)
  big=$(du -sb "$d" | cut -f1)
  [ "$big" -le $((PART_MIB * 1048576)) ] || die "part folder $(basename "$d") is $big bytes, over PART_MIB=$PART_MIB MiB (its small files outgrew ROOM=$ROOM)"
done
rm -rf "$OUTDIR" && mkdir -p "$(dirname "$OUTDIR")" && mv "$WORK/parts" "$OUTDIR"
TOTAL=$(stat -c %s "$WORK/$ARCHIVE")
echo "== bundle: $OUTDIR ($(ls -d "$OUTDIR"/p* | wc -l) parts, $ARCHIVE $TOTAL bytes, sha256 $(head -c16 "$OUTDIR/p01/SHA256SUMS")...)"
for d in "$OUTDIR"/p[0-9][0-9]; do echo "   $(basename "$d"): $(du -b "$d" | cut -f1) bytes in all"; done
el "done"
