#!/bin/bash
# On the GPU machine: joins the parts copied into this script's folder, checks every sha256, unpacks the site.
#   usage: bash /tmp/sgl-parts/unpack.sh [DEST=/tmp]
# The first line of SHA256SUMS names the archive (e.g. sglang-site.tar.zst -> DEST/sglang-site), the rest its parts.
# Exit codes (as shared/gpu/build_bundle.sh's unpack.sh): 0 unpacked, or DEST already holds this bundle;
# 3 a part is missing (the machine went cold between carries? carry every part again); 4 a part is damaged or from
# another build; 5 the joined archive's sha256 differs; 6 no way to decompress; 7 the site does not import.
# The site's requirements on the machine's own packages (assumed.txt) are checked there: an unmet one prints a
# WARNING naming it, then the site's key modules must import with the site first on PYTHONPATH
# (`python3 -c 'import sglang, sgl_kernel, flashinfer'`; UNPACK_IMPORT_CHECK replaces that command, for tests).
# They import: exit 0 (on the H100 of 2026-12-07 every import and server worked with five unmet pins). They do not:
# exit 7, with one line naming the failed import and the unmet pins. With every pin met nothing is imported.
set -euo pipefail
P=$(cd "$(dirname "$0")" && pwd); DEST=${1:-/tmp}
read -r WANT ARCHIVE < "$P/SHA256SUMS"
SITE=${ARCHIVE%%.tar*}
PARTS=$(awk 'NR>1 {print $2}' "$P/SHA256SUMS")
if [ -f "$DEST/$SITE/.bundle-sha256" ] && [ "$(cat "$DEST/$SITE/.bundle-sha256")" = "$WANT" ]; then
  echo "unpack.sh: $DEST/$SITE already holds this bundle"; exit 0; fi
miss=""; for p in $PARTS; do [ -f "$P/$p" ] || miss="$miss $p"; done
[ -z "$miss" ] || { echo "unpack.sh: missing parts:$miss (the machine went cold between carries? carry every part again)" >&2; exit 3; }
( cd "$P" && awk 'NR>1' SHA256SUMS | sha256sum -c --quiet >/dev/null 2>&1 ) \
  || { echo "unpack.sh: a part is damaged or comes from another build (carry the parts again)" >&2; exit 4; }
mkdir -p "$DEST"
( cd "$P" && cat $PARTS ) > "$DEST/$ARCHIVE"
echo "$WANT  $DEST/$ARCHIVE" | sha256sum -c --quiet >/dev/null 2>&1 \
  || { rm -f "$DEST/$ARCHIVE"; echo "unpack.sh: the joined archive's sha256 differs (rebuild the bundle)" >&2; exit 5; }
rm -rf "${DEST:?}/$SITE" "${DEST:?}/$SITE.tmp"; mkdir -p "$DEST/$SITE.tmp"
case "$ARCHIVE" in
  *.tar.zst)
    if command -v zstd >/dev/null; then zstd -dc "$DEST/$ARCHIVE" | tar -x -C "$DEST/$SITE.tmp"
    else  # no zstd on the machine: the zstandard wheel carried beside the parts, unzipped with the standard library
      W=$(ls "$P"/zstandard-*-cp312-*.whl 2>/dev/null | head -1)
      [ -n "$W" ] || { echo "unpack.sh: no zstd command and no zstandard wheel beside the parts (carry the last part folder)" >&2; exit 6; }
      python3 - "$W" "$DEST/$ARCHIVE" "$DEST/$SITE.tmp" <<'PY'
import sys, tarfile, tempfile, zipfile
w, arc, out = sys.argv[1:]
d = tempfile.mkdtemp()
zipfile.ZipFile(w).extractall(d)
sys.path.insert(0, d)
import zstandard
with open(arc, "rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as r:
    tarfile.open(fileobj=r, mode="r|").extractall(out)
PY
    fi ;;
  *.tar.xz)
    if command -v xz >/dev/null; then xz -dc "$DEST/$ARCHIVE" | tar -x -C "$DEST/$SITE.tmp"
    else python3 -c "import sys,tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$DEST/$ARCHIVE" "$DEST/$SITE.tmp"; fi ;;
  *.tar)
    tar -x -C "$DEST/$SITE.tmp" -f "$DEST/$ARCHIVE" ;;
  *) echo "unpack.sh: $ARCHIVE: unknown archive type (rebuild the bundle)" >&2; exit 6 ;;
esac
rm -f "$DEST/$ARCHIVE"
# the archive holds one folder named like itself; move it into place
mv "$DEST/$SITE.tmp/$SITE" "$DEST/$SITE" && rmdir "$DEST/$SITE.tmp"
# requirements on the machine's own packages whose versions were unknown where the bundle was built
if [ -s "$P/assumed.txt" ]; then
  unmet=$(python3 - "$P/assumed.txt" <<'PY'
import sys
try:
    from importlib.metadata import PackageNotFoundError, version
    from packaging.requirements import Requirement
except ImportError as e:  # no packaging on the machine: the import check below decides
    print(f"(assumed.txt not checked: {e})")
    sys.exit(0)
for line in open(sys.argv[1]):
    if line.strip():
        r = Requirement(line.strip())
        try:
            v = version(r.name)
        except PackageNotFoundError:
            v = None
        if v is None or not r.specifier.contains(v, prereleases=True):
            print(f"{r} (machine: {v})")
PY
  ) || unmet="(assumed.txt not checked: its reader failed)"
  if [ -n "$unmet" ]; then
    while IFS= read -r u; do echo "unpack.sh: WARNING: unmet: $u" >&2; done <<< "$unmet"
    check=${UNPACK_IMPORT_CHECK:-"python3 -c 'import sglang, sgl_kernel, flashinfer'"}
    if err=$(PYTHONPATH="$DEST/$SITE${PYTHONPATH:+:$PYTHONPATH}" bash -c "$check" 2>&1 >/dev/null); then
      echo "unpack.sh: WARNING: the site imports regardless ($check); check the server's start" >&2
    else
      why=$(printf '%s\n' "$err" | awk 'NF' | tail -n 1)
      echo "unpack.sh: the site does not import ($check: ${why:-failed}) and the machine's packages miss: $(printf '%s\n' "$unmet" | paste -sd ';' - | sed 's/;/; /g') (pin them in the lock and rebuild)" >&2
      exit 7
    fi
  fi
fi
echo "$WANT" > "$DEST/$SITE/.bundle-sha256"
echo "unpack.sh: $DEST/$SITE ready ($(du -sm "$DEST/$SITE" | cut -f1) MiB). export PYTHONPATH=$DEST/$SITE"
