"""The pure logic of the offline site bundles for the GPU machines (docs/sglang.md, "The bundle").

The GPU machines have Python 3.12, glibc 2.39, torch 2.11.0+cu130 and ~190 other packages
(`device_packages.txt`, from .library/device/KINDS.md) but no network. A bundle is one folder,
`site`, of the packages an engine needs beyond the machine's, packed and split into parts small
enough to carry one per command. This module holds what can be tested on a CPU without a network:

- the lock (`name==version --hash=sha256:HEX  # wheel file name`, pip's hash format, so
  `pip download --require-hashes` checks what it fetches);
- the machine's package list (`name` or `name==version` per line);
- the closure check: from the roots, every `Requires-Dist` for CPython 3.12 on Linux x86-64 is
  followed; a requirement the machine satisfies is skipped, one it cannot is carried at the
  lock's version; a requirement no lock line meets (conflict), a package with no lock line
  (missing pin), a wheel not built for cp312 / manylinux <= 2.39 x86-64, and a wheel whose
  Requires-Python excludes the machine's 3.12.3 stop the build with a one-line error;
- the resolver that writes the lock (newest version allowed, as pip picks, no backtracking);
- the install into the site, for the machine's Python whatever Python runs it (`install`, below);
- splitting the archive into parts with SHA256SUMS, and joining them back.

CLI (run by build_sglang_bundle.sh): `lock`, `check`, `install`, `split`, `join`, `target-args`.
Every error is one line: `bundle: <file or package>: <what> (<fix>)`.
"""
from __future__ import annotations

import argparse
import email.parser
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional

try:
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import Version
except ImportError:  # pragma: no cover - a bare Python with pip only
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.specifiers import SpecifierSet
    from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename
    from pip._vendor.packaging.version import Version

HERE = Path(__file__).resolve().parent
# The GPU machines (KINDS.md): CPython 3.12.3 on Linux x86-64, glibc 2.39.
ENV = {"implementation_name": "cpython", "implementation_version": "3.12.3", "os_name": "posix",
       "platform_machine": "x86_64", "platform_release": "", "platform_system": "Linux", "platform_version": "",
       "python_full_version": "3.12.3", "platform_python_implementation": "CPython", "python_version": "3.12",
       "sys_platform": "linux"}
MAX_GLIBC = (2, 39)
MIB = 1 << 20
# A part folder travels with the working tree in one carry of at most 64 MiB (shared/gpu/README.md): 56 MiB leaves
# room for the checkout and for the zstandard wheel that the last part folder also holds.
PART_BYTES = 56 * MIB
LOCK_LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<ver>\S+)\s+--hash=sha256:(?P<sha>[0-9a-f]{64})"
                       r"\s*(?:#\s*(?P<file>\S+\.whl))?\s*$")


class BundleError(Exception):
    """A one-line reason the bundle cannot be built or unpacked."""

    def __init__(self, where: str, what: str, fix: str = ""):
        super().__init__(f"bundle: {where}: {what}" + (f" ({fix})" if fix else ""))


def cn(name: str) -> str:
    return canonicalize_name(name)


# ---------------------------------------------------------------------------------------------- lock
@dataclass(frozen=True)
class Pin:
    name: str
    version: Version
    sha256: str
    filename: str

    @property
    def key(self) -> str:
        return cn(self.name)

    def line(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}  # {self.filename}"


def parse_lock(text: str, where: str = "lock") -> dict[str, Pin]:
    pins: dict[str, Pin] = {}
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = LOCK_LINE.match(line)
        if not m:
            raise BundleError(f"{where}:{no}", f"not a lock line: {line!r}",
                              "write name==version --hash=sha256:<64 hex>  # <wheel file>")
        if not m["file"]:
            raise BundleError(f"{where}:{no}", f"{m['name']} names no wheel file", "end the line with  # <wheel file>")
        name, ver, fname = m["name"], Version(m["ver"]), m["file"]
        wname, wver, _, _ = parse_wheel_filename(fname)
        if cn(wname) != cn(name) or wver != ver:
            raise BundleError(f"{where}:{no}", f"{fname} is not {name}=={ver}", "regenerate the lock")
        if cn(name) in pins:
            raise BundleError(f"{where}:{no}", f"{cn(name)} is pinned twice", "keep one line")
        pins[cn(name)] = Pin(name, ver, m["sha"], fname)
    return pins


def format_lock(pins: Iterable[Pin], header: str = "") -> str:
    head = "".join(f"# {h}\n" for h in header.splitlines())
    return head + "".join(p.line() + "\n" for p in sorted(pins, key=lambda p: p.key))


def parse_names(text: str, where: str) -> dict[str, Optional[Version]]:
    """`name` or `name==version` per line (# comments): the machine's packages, or those left out."""
    out: dict[str, Optional[Version]] = {}
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, ver = line.partition("==")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name.strip()):
            raise BundleError(f"{where}:{no}", f"not a package name: {line!r}", "write name or name==version")
        out[cn(name.strip())] = Version(ver.strip()) if ver.strip() else None
    return out


# ---------------------------------------------------------------------------------------------- wheels
def wheel_problem(filename: str, max_glibc: tuple[int, int] = MAX_GLIBC) -> Optional[str]:
    """Why the GPU machine (CPython 3.12, Linux x86-64, glibc <= max_glibc) cannot install this wheel; None if it can."""
    try:
        _, _, _, tags = parse_wheel_filename(filename)
    except Exception:  # noqa: BLE001 - packaging's InvalidWheelFilename
        return "not a wheel file name"
    for t in tags:
        py_ok = t.interpreter == "cp312" or re.fullmatch(r"py3\d*", t.interpreter) is not None or (t.abi == "abi3" and re.fullmatch(r"cp3(\d+)", t.interpreter)
                                                       and int(t.interpreter[3:]) <= 12)
        abi_ok = t.abi in ("none", "cp312", "abi3")
        if t.platform == "any":
            plat_ok = True
        else:
            m = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", t.platform)
            legacy = {"manylinux1_x86_64": (2, 5), "manylinux2010_x86_64": (2, 12), "manylinux2014_x86_64": (2, 17)}
            glibc = (int(m[1]), int(m[2])) if m else legacy.get(t.platform)
            plat_ok = glibc is not None and glibc <= max_glibc
        if py_ok and abi_ok and plat_ok:
            return None
    return f"built for {'.'.join(sorted(str(t) for t in tags))}, not cp312 / manylinux <= {max_glibc[0]}.{max_glibc[1]} x86_64"


def sha256_file(path: Path, chunk: int = 4 * MIB) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()


def wheel_metadata(path: Path) -> tuple[list[str], str]:
    """(Requires-Dist lines, Requires-Python or "") of a wheel, read from its METADATA."""
    with zipfile.ZipFile(path) as z:
        meta = [n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(meta) != 1:
            raise BundleError(str(path), "no single .dist-info/METADATA", "download the wheel again")
        msg = email.parser.Parser().parsestr(z.read(meta[0]).decode("utf-8"))
    return list(msg.get_all("Requires-Dist") or []), (msg.get("Requires-Python") or "").strip()


def wheel_requires(path: Path) -> list[str]:
    return wheel_metadata(path)[0]


def python_problem(requires_python: str) -> Optional[str]:
    """Why the GPU machine's Python (ENV's 3.12.3) does not meet a Requires-Python; None if it does.

    This, not pip, judges Requires-Python for the site: pip 23.2.1 (the 2-core machine's python3, 3.11.7) checks it
    in `pip install --target --python-version 3.12` against the Python running pip (pypa/pip#12216) and refused
    3.12-only wheels; pip 26.3 checks 3.12. install_site turns pip's check off and runs this one."""
    if not requires_python:
        return None
    try:
        spec = SpecifierSet(requires_python)
    except Exception:  # noqa: BLE001 - packaging's InvalidSpecifier
        return f"has an unreadable Requires-Python {requires_python!r}"
    py = ENV["python_full_version"]
    return None if spec.contains(py, prereleases=True) else f"requires Python {requires_python}, the machine has {py}"


# ---------------------------------------------------------------------------------------------- closure
def active(req: Requirement, extras: Iterable[str]) -> bool:
    """Whether a Requires-Dist line applies on the GPU machine, for the extras asked of its package."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate(dict(ENV, extra=e)) for e in ["", *extras])


@dataclass
class Plan:
    carry: list[str] = field(default_factory=list)  # lock keys that go into the site
    skipped: dict[str, str] = field(default_factory=dict)  # machine package -> why it is not carried
    shadowed: dict[str, str] = field(default_factory=dict)  # machine package carried anyway -> why
    assumed: list[str] = field(default_factory=list)  # "name>=x": machine versions unknown here, checked there
    left_out: dict[str, str] = field(default_factory=dict)  # left-out package -> who asked for it


def _device_decision(name: str, spec: SpecifierSet, device: Mapping[str, Optional[Version]]) -> Optional[str]:
    """None: the machine's package serves; else why it does not."""
    have = device[name]
    if not str(spec):
        return None
    if have is None:
        return None  # unknown here: assumed (Plan.assumed), checked on the machine by unpack.sh (assumed.txt)
    return None if spec.contains(have, prereleases=True) else f"the machine has {have}"


def check_closure(roots: Iterable[str], pins: Mapping[str, Pin], requires: Mapping[str, list[str]],
                  device: Mapping[str, Optional[Version]], left_out: Mapping[str, object] = {},
                  max_glibc: tuple[int, int] = MAX_GLIBC, lock_name: str = "lock",
                  requires_python: Mapping[str, str] = {}) -> Plan:
    """Walk the requirements from `roots`; return what to carry, or raise BundleError (one line).

    `requires[key]` is the Requires-Dist of the locked wheel of `key`, `requires_python[key]` its Requires-Python
    (both read from the wheel; a key absent from `requires_python` declares none)."""
    plan = Plan()
    queue = [(Requirement(r), "the roots") for r in roots]
    seen: set[tuple[str, tuple[str, ...]]] = set()
    while queue:
        req, by = queue.pop(0)
        name = cn(req.name)
        if name in left_out:
            plan.left_out.setdefault(name, by)
            continue
        if name in device and name not in pins:
            why = _device_decision(name, req.specifier, device)
            if why is not None:
                raise BundleError(lock_name, f"{by} needs {name}{req.specifier}, {why}",
                                  f"pin a matching {name} in the lock so the site carries it")
            if str(req.specifier) and device[name] is None:
                plan.assumed.append(f"{name}{req.specifier}")
            plan.skipped.setdefault(name, "on the machine")
            if req.extras:
                raise BundleError(lock_name, f"{by} needs {name}[{','.join(sorted(req.extras))}], a machine package "
                                  "with extras", f"pin {name} in the lock so its extras can be followed")
            continue
        if name not in pins:
            raise BundleError(lock_name, f"no pin for {name}{req.specifier} (needed by {by})",
                              "regenerate the lock: bundle.py lock")
        pin = pins[name]
        if not req.specifier.contains(pin.version, prereleases=True):
            raise BundleError(lock_name, f"conflict: {by} needs {name}{req.specifier}, the lock has {pin.version}",
                              "pin a version both allow, or leave the package out")
        if name in device:
            plan.shadowed.setdefault(name, f"{by} needs {name}{req.specifier}: "
                                     + (_device_decision(name, req.specifier, device) or "pinned"))
        key = (name, tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        if name not in plan.carry:
            problem = wheel_problem(pin.filename, max_glibc)
            if problem:
                raise BundleError(lock_name, f"{pin.filename}: {problem}", "pin a version with a cp312/manylinux wheel")
            problem = python_problem(requires_python.get(name, ""))
            if problem:
                raise BundleError(lock_name, f"{pin.filename}: {problem}", "pin a version that supports Python 3.12")
            plan.carry.append(name)
        if name not in requires:
            raise BundleError(lock_name, f"no metadata read for {name}", "download its wheel (bundle.py check reads it)")
        for line in requires[name]:
            q = Requirement(line)
            if active(q, req.extras):
                queue.append((q, f"{pin.name}=={pin.version}" + (f"[{','.join(sorted(req.extras))}]" if req.extras else "")))
    unused = sorted(set(pins) - set(plan.carry))
    if unused:
        raise BundleError(lock_name, f"pinned but needed by nothing: {', '.join(unused)}", "remove those lines")
    # a device package carried at the lock's version still counts as carried; one skipped then carried is not skipped
    for name in plan.carry:
        plan.skipped.pop(name, None)
    return plan


def resolve(roots: Iterable[str], device: Mapping[str, Optional[Version]], left_out: Mapping[str, object],
            fetch: Callable[[Requirement], tuple[Pin, list[str]]]) -> tuple[list[Pin], dict[str, list[str]]]:
    """Pick a version for every package the roots need beyond the machine's: the first that `fetch` gives
    (pip's choice: the newest the requirement allows, with a cp312/manylinux wheel). No backtracking: a later
    requirement the chosen version does not meet is a conflict, for a person to pin (an == root)."""
    pins: dict[str, Pin] = {}
    requires: dict[str, list[str]] = {}
    queue = [(Requirement(r), "the roots") for r in roots]
    wanted: dict[str, SpecifierSet] = {}
    while queue:
        req, by = queue.pop(0)
        name = cn(req.name)
        if name in left_out:
            continue
        if name in device and name not in pins and _device_decision(name, req.specifier, device) is None:
            if req.extras:
                raise BundleError("resolve", f"{by} needs {name}[{','.join(sorted(req.extras))}], a machine package "
                                  "with extras", "add it to the roots with a pin")
            continue
        wanted[name] = wanted.get(name, SpecifierSet()) & req.specifier
        if name in pins:
            if not req.specifier.contains(pins[name].version, prereleases=True):
                raise BundleError("resolve", f"conflict: {by} needs {name}{req.specifier}, already chose "
                                  f"{pins[name].version}", f"add {name} with a version both allow to the roots")
        else:
            pin, reqs = fetch(Requirement(f"{req.name}{wanted[name]}"))
            pins[name], requires[name] = pin, reqs
        for line in requires[name]:
            q = Requirement(line)
            if active(q, req.extras):
                queue.append((q, f"{pins[name].name}=={pins[name].version}"))
    return sorted(pins.values(), key=lambda p: p.key), requires


# ---------------------------------------------------------------------------------------------- parts
def _check_part_size(part_bytes: int, last_room: int) -> None:
    if part_bytes <= 0:
        raise BundleError("split", f"part size {part_bytes} is not positive", "give a size in bytes > 0")
    if last_room >= part_bytes:
        raise BundleError("split", f"the last part folder needs {last_room} bytes beside its part, more than a part's "
                          f"{part_bytes}", "give a larger part size")


def part_sizes(size: int, part_bytes: int, last_room: int = 0) -> list[int]:
    """Sizes of the parts of a `size`-byte archive: each at most `part_bytes`, the last at most `part_bytes -
    last_room` (the last part folder also holds a wheel of that size), as few parts as that allows."""
    _check_part_size(part_bytes, last_room)
    cap_last = part_bytes - last_room
    sizes, rem = [], size
    while rem > cap_last:
        take = part_bytes if rem > part_bytes else rem - cap_last
        sizes.append(take)
        rem -= take
    return sizes + [rem]


def split(archive: Path, outdir: Path, part_bytes: int = PART_BYTES, last_room: int = 0) -> list[Path]:
    """Cut `archive` into outdir/pNN/<archive>.NN (NN from 01) of at most `part_bytes` each, the last at most
    `part_bytes - last_room` (part_sizes), and write SHA256SUMS (the whole archive first, then each part) into
    every part folder. Returns the part files."""
    size = archive.stat().st_size
    _check_part_size(part_bytes, last_room)
    if -(-(size + last_room) // part_bytes) > 99:  # before listing the sizes: no huge list
        raise BundleError("split", f"{-(-(size + last_room) // part_bytes)} parts of {part_bytes} bytes",
                          "give a larger part size")
    sizes = part_sizes(size, part_bytes, last_room)
    if len(sizes) > 99:
        raise BundleError("split", f"{len(sizes)} parts of {part_bytes} bytes", "give a larger part size")
    outdir.mkdir(parents=True, exist_ok=True)
    parts = []
    with open(archive, "rb") as f:
        for i, n in enumerate(sizes, 1):
            d = outdir / f"p{i:02d}"
            d.mkdir(exist_ok=True)
            p = d / f"{archive.name}.{i:02d}"
            p.write_bytes(f.read(n))
            parts.append(p)
    sums = f"{sha256_file(archive)}  {archive.name}\n" + "".join(f"{sha256_file(p)}  {p.name}\n" for p in parts)
    for p in parts:
        (p.parent / "SHA256SUMS").write_text(sums)
    return parts


def read_sums(path: Path) -> tuple[tuple[str, str], list[tuple[str, str]]]:
    """(sha, archive name), [(sha, part name), ...] from a SHA256SUMS that split wrote."""
    rows = []
    for no, line in enumerate(path.read_text().splitlines(), 1):
        m = re.fullmatch(r"([0-9a-f]{64})  (\S+)", line.strip())
        if not m:
            raise BundleError(f"{path}:{no}", f"not a sha256sum line: {line!r}", "copy SHA256SUMS from the build again")
        rows.append((m[1], m[2]))
    if not rows:
        raise BundleError(str(path), "empty", "copy SHA256SUMS from the build again")
    return rows[0], rows[1:]


def join(folder: Path, dest: Path) -> Path:
    """Join the parts found in `folder` into dest/<archive>, checking every sha256 (as unpack.sh does)."""
    (want, name), parts = read_sums(folder / "SHA256SUMS")
    missing = [p for _, p in parts if not (folder / p).is_file()]
    if missing:
        raise BundleError(str(folder), f"missing parts: {' '.join(missing)}", "carry every part folder again")
    bad = [p for s, p in parts if sha256_file(folder / p) != s]
    if bad:
        raise BundleError(str(folder), f"damaged or from another build: {' '.join(bad)}", "carry those parts again")
    out = dest / name
    with open(out, "wb") as w:
        for _, p in parts:
            w.write((folder / p).read_bytes())
    if sha256_file(out) != want:
        raise BundleError(str(out), "joined archive sha256 mismatch", "rebuild the bundle")
    return out


# ---------------------------------------------------------------------------------------------- pip
def target_args(max_glibc: tuple[int, int] = MAX_GLIBC) -> list[str]:
    """pip's options that choose wheels for the GPU machine (CPython 3.12, manylinux <= max_glibc x86-64), for
    `pip download` and `pip install --target`. pip matches each manylinux tag exactly, hence the list."""
    plats = [f"manylinux_2_{m}_x86_64" for m in range(max_glibc[1], 16, -1)] + ["manylinux2014_x86_64",
                                                                                "manylinux_2_5_x86_64", "manylinux1_x86_64"]
    return ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
            *sum((["--platform", p] for p in plats), [])]


def install_site(wheels: list[Path], site: Path, python: str = sys.executable) -> None:
    """Install `wheels` (no dependencies, no index) into the folder `site` for the GPU machine's Python, whatever
    Python runs pip: every Requires-Python is judged here against 3.12.3 (python_problem) and pip's own check, which
    pip 23.2.1 makes against the running Python, is turned off. Raises BundleError (one line); pip's messages
    go to stderr above it."""
    bad = [(w, p) for w in wheels if (p := python_problem(wheel_metadata(w)[1]))]
    if bad:
        raise BundleError(bad[0][0].name, bad[0][1] + (f" (and {len(bad) - 1} more wheels)" if len(bad) > 1 else ""),
                          "pin a version that supports Python 3.12 and check the lock again")
    cmd = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index", "--no-deps",
           "--no-compile", "--no-warn-script-location", "--root-user-action=ignore", "--ignore-requires-python",
           "--target", str(site), *target_args(), *map(str, wheels)]
    r = subprocess.run(cmd)
    if r.returncode != 0:
        raise BundleError(str(site), f"pip install --target of {len(wheels)} wheels exited {r.returncode}",
                          "pip's error is above")


# ---------------------------------------------------------------------------------------------- CLI
def pip_fetch(wheels: Path, python: str = sys.executable) -> Callable[[Requirement], tuple[Pin, list[str]]]:
    """fetch() for resolve: pip download --no-deps of one requirement for the GPU machine."""

    def fetch(req: Requirement) -> tuple[Pin, list[str]]:
        spec = f"{req.name}{req.specifier}"
        before = set(os.listdir(wheels)) if wheels.is_dir() else set()
        cmd = [python, "-m", "pip", "download", "-q", "--no-deps", *target_args(), "-d", str(wheels), spec]
        r = subprocess.run(["nice", "-n", "19", *cmd], capture_output=True, text=True)
        if r.returncode != 0:
            err = [x for x in r.stderr.splitlines() if x.startswith("ERROR")]
            raise BundleError("resolve", f"pip found no wheel for {spec}: {(err or ['?'])[-1]}", "pin another version")
        cands = [f for f in os.listdir(wheels) if f.endswith(".whl") and cn(parse_wheel_filename(f)[0]) == cn(req.name)
                 and req.specifier.contains(parse_wheel_filename(f)[1], prereleases=True)]
        cands.sort(key=lambda f: (f not in before, parse_wheel_filename(f)[1]))  # the one pip just wrote, else newest
        f = cands[-1]
        name, ver, _, _ = parse_wheel_filename(f)
        print(f"  {name}=={ver}  {os.path.getsize(wheels / f) / MIB:.1f} MiB", file=sys.stderr)
        return Pin(req.name, ver, sha256_file(wheels / f), f), wheel_requires(wheels / f)
    return fetch


def _load(spec_dir: Path, flavour: str):
    pins = parse_lock((spec_dir / f"{flavour}.lock").read_text(), f"{flavour}.lock")
    device = parse_names((spec_dir / "device_packages.txt").read_text(), "device_packages.txt")
    left = parse_names((spec_dir / f"{flavour}_left_out.txt").read_text(), f"{flavour}_left_out.txt")
    roots = [ln.split("#", 1)[0].strip() for ln in (spec_dir / f"{flavour}_roots.txt").read_text().splitlines()]
    return pins, device, left, [r for r in roots if r]


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="bundle.py", description=__doc__.split("\n")[0])
    ap.add_argument("--spec-dir", type=Path, default=HERE, help="folder with <flavour>.lock, _roots, _left_out, device list")
    ap.add_argument("--flavour", default="sglang")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("lock", help="resolve the roots with pip (network) and write <flavour>.lock")
    p.add_argument("wheels", type=Path)
    p = sub.add_parser("check", help="check the wheels against the lock and the machine; write the install list")
    p.add_argument("wheels", type=Path)
    p.add_argument("install_list", type=Path)
    p.add_argument("assumed_list", type=Path, help="requirements on machine packages of unknown version")
    p = sub.add_parser("install", help="pip install --target the wheels of an install list, for the machine's Python")
    p.add_argument("install_list", type=Path, help="one wheel path per line (what check wrote)")
    p.add_argument("site", type=Path)
    sub.add_parser("target-args", help="print pip's wheel-choosing options for the machine, one per line")
    p = sub.add_parser("split")
    p.add_argument("archive", type=Path)
    p.add_argument("outdir", type=Path)
    p.add_argument("--part-mib", type=float, default=PART_BYTES / MIB)
    p.add_argument("--room-bytes", type=int, default=0, help="kept free in every part folder (its small files)")
    p.add_argument("--last-room-bytes", type=int, default=0, help="kept free on top in the last (the wheel it holds)")
    p = sub.add_parser("join")
    p.add_argument("folder", type=Path)
    p.add_argument("dest", type=Path)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "lock":
            _, device, left, roots = _load(a.spec_dir, a.flavour) if (a.spec_dir / f"{a.flavour}.lock").exists() else \
                ({}, parse_names((a.spec_dir / "device_packages.txt").read_text(), "device_packages.txt"),
                 parse_names((a.spec_dir / f"{a.flavour}_left_out.txt").read_text(), "left_out"),
                 [r.split("#")[0].strip() for r in (a.spec_dir / f"{a.flavour}_roots.txt").read_text().splitlines()
                  if r.split("#")[0].strip()])
            a.wheels.mkdir(parents=True, exist_ok=True)
            pins, _ = resolve(roots, device, left, pip_fetch(a.wheels))
            head = (f"{a.flavour} site for the GPU machines (CPython 3.12, glibc 2.39): written by bundle.py lock from "
                    f"{a.flavour}_roots.txt;\nevery package the roots need beyond device_packages.txt, one wheel each.")
            (a.spec_dir / f"{a.flavour}.lock").write_text(format_lock(pins, head))
            print(f"{len(pins)} pins written to {a.spec_dir / (a.flavour + '.lock')}")
        elif a.cmd == "check":
            pins, device, left, roots = _load(a.spec_dir, a.flavour)
            requires, requires_python = {}, {}
            for k, pin in pins.items():
                w = a.wheels / pin.filename
                if not w.is_file():
                    raise BundleError(str(w), "missing", "run the download step again")
                if sha256_file(w) != pin.sha256:
                    raise BundleError(str(w), "sha256 differs from the lock", "delete it and download again")
                requires[k], requires_python[k] = wheel_metadata(w)
            plan = check_closure(roots, pins, requires, device, left, lock_name=f"{a.flavour}.lock",
                                 requires_python=requires_python)
            a.install_list.write_text("".join(f"{a.wheels / pins[k].filename}\n" for k in plan.carry))
            a.assumed_list.write_text("".join(f"{x}\n" for x in sorted(set(plan.assumed))))
            size = sum((a.wheels / pins[k].filename).stat().st_size for k in plan.carry)
            print(f"  closure OK: {len(plan.carry)} wheels to carry ({size / MIB:.1f} MiB as wheels), "
                  f"{len(plan.skipped)} machine packages used, {len(plan.left_out)} left out "
                  f"({', '.join(sorted(plan.left_out))}), {len(plan.shadowed)} carried over the machine's own: "
                  + "; ".join(f"{k} ({v})" for k, v in sorted(plan.shadowed.items()))
                  + f"; {len(set(plan.assumed))} requirements on machine packages of unknown version, checked there")
        elif a.cmd == "install":
            wheels = [Path(x) for x in a.install_list.read_text().splitlines() if x.strip()]
            missing = [w for w in wheels if not w.is_file()]
            if not wheels or missing:
                raise BundleError(str(a.install_list), f"missing wheel {missing[0]}" if missing else "lists no wheel",
                                  "run the check step again")
            install_site(wheels, a.site)
        elif a.cmd == "target-args":
            print("\n".join(target_args()))
        elif a.cmd == "split":
            parts = split(a.archive, a.outdir, int(a.part_mib * MIB) - a.room_bytes, a.last_room_bytes)
            for p in parts:
                print(f"  {p.parent.name}/{p.name}  {p.stat().st_size} bytes")
        elif a.cmd == "join":
            print(join(a.folder, a.dest))
    except BundleError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
