#!/bin/bash
# On the GPU machine: joins the parts copied into this script's folder, checks every sha256, unpacks the site.
#   usage: bash /tmp/sgl-parts/unpack.sh [DEST=/tmp]
# The first line of SHA256SUMS names the archive (e.g. sglang-site.tar.zst -> DEST/sglang-site), the rest its parts.
# Exit codes (as shared/gpu/build_bundle.sh's unpack.sh): 0 unpacked, or DEST already holds this bundle;
# 3 a part is missing (the machine went cold between carries? carry every part again); 4 a part is damaged or from
# another build; 5 the joined archive's sha256 differs; 6 no way to decompress; 7 the site's requirements on the
# machine's own packages (assumed.txt) do not hold there.
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
  python3 - "$P/assumed.txt" <<'PY' || { echo "unpack.sh: the machine's packages do not meet the site's requirements above (pin them in the lock and rebuild)" >&2; exit 7; }
import sys
from importlib.metadata import PackageNotFoundError, version
from packaging.requirements import Requirement
bad = []
for line in open(sys.argv[1]):
    if line.strip():
        r = Requirement(line.strip())
        try:
            v = version(r.name)
        except PackageNotFoundError:
            v = None
        if v is None or not r.specifier.contains(v, prereleases=True):
            bad.append(f"{r} (machine: {v})")
for b in bad:
    print("unpack.sh: unmet:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
fi
echo "$WANT" > "$DEST/$SITE/.bundle-sha256"
echo "unpack.sh: $DEST/$SITE ready ($(du -sm "$DEST/$SITE" | cut -f1) MiB). export PYTHONPATH=$DEST/$SITE"
