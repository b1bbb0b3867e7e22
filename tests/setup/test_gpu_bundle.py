"""common/setup/gpu_bundle: the SGLang site bundle's pure logic (lock, the closure check against the GPU
machine's package list, parts and SHA256SUMS), the install step for the machine's Python 3.12 run from another
Python, and unpack.sh's exit codes on a tiny fake bundle. No network."""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DIR = REPO / "common" / "setup" / "gpu_bundle"
H = "a" * 64


def _module():
    spec = importlib.util.spec_from_file_location("gpu_bundle", DIR / "bundle.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_bundle"] = mod
    spec.loader.exec_module(mod)
    return mod


B = _module()
V = B.Version


def pin(name, ver, fname=None):
    return B.Pin(name, V(ver), H, fname or f"{name.replace('-', '_')}-{ver}-py3-none-any.whl")


def pins(*ps):
    return {p.key: p for p in ps}


# ------------------------------------------------------------------------------------------------ lock
def test_lock_round_trip_and_pip_hash_format():
    ps = [pin("b-pkg", "1.0"), pin("A_pkg", "2.0.post1", "A_pkg-2.0.post1-cp312-cp312-manylinux_2_34_x86_64.whl")]
    text = B.format_lock(ps, "header line")
    assert text.splitlines()[0] == "# header line"
    # pip's requirements-file hash syntax, so `pip download --require-hashes -r` checks every wheel
    assert f"A_pkg==2.0.post1 --hash=sha256:{H}  # A_pkg-2.0.post1-cp312-cp312-manylinux_2_34_x86_64.whl" in text
    back = B.parse_lock(text)
    assert set(back) == {"a-pkg", "b-pkg"} and back["a-pkg"].version == V("2.0.post1")


@pytest.mark.parametrize("line, words", [
    ("foo>=1.0 --hash=sha256:" + H + "  # foo-1.0-py3-none-any.whl", "not a lock line"),
    ("foo==1.0 --hash=sha256:abc  # foo-1.0-py3-none-any.whl", "not a lock line"),
    ("foo==1.0 --hash=sha256:" + H, "names no wheel file"),
    ("foo==1.0 --hash=sha256:" + H + "  # foo-1.1-py3-none-any.whl", "is not foo==1.0"),
])
def test_bad_lock_lines_are_one_line_errors_naming_the_line(line, words):
    with pytest.raises(B.BundleError) as e:
        B.parse_lock("# c\n" + line, "sglang.lock")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("bundle: sglang.lock:2:") and words in msg


def test_a_package_pinned_twice_is_refused():
    line = "foo==1.0 --hash=sha256:" + H + "  # foo-1.0-py3-none-any.whl"
    with pytest.raises(B.BundleError, match="pinned twice"):
        B.parse_lock(line + "\n" + line.replace("foo==", "Foo=="))


def test_the_committed_lock_and_lists_parse():
    p = B.parse_lock((DIR / "sglang.lock").read_text(), "sglang.lock")
    assert p["sglang"].version == V("0.5.17")  # recipes/engine/sglang.yaml's version
    assert "sglang==0.5.17" in (DIR / "sglang_roots.txt").read_text()
    dev = B.parse_names((DIR / "device_packages.txt").read_text(), "device_packages.txt")
    assert dev["torch"] == V("2.11.0") and dev["transformers"] == V("5.17.0") and "numpy" in dev
    # every locked wheel installs on the GPU machine
    assert [q.filename for q in p.values() if B.wheel_problem(q.filename)] == []


# ------------------------------------------------------------------------------------------------ wheel tags
@pytest.mark.parametrize("fname, ok", [
    ("sglang-0.5.17-cp312-cp312-manylinux_2_34_x86_64.whl", True),
    ("x-1-cp310-abi3-manylinux2014_x86_64.whl", True),
    ("x-1-py3-none-any.whl", True),
    ("interegular-0.3.3-py37-none-any.whl", True),  # a generic Python 3 tag, any minor
    ("x-1-py2-none-any.whl", False),
    ("x-1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", True),
    ("x-1-cp312-cp312-manylinux_2_39_x86_64.whl", True),
    ("x-1-cp312-cp312-manylinux_2_40_x86_64.whl", False),  # newer glibc than the machine's 2.39
    ("x-1-cp311-cp311-manylinux_2_17_x86_64.whl", False),
    ("x-1-cp313-abi3-manylinux_2_17_x86_64.whl", False),   # abi3 from 3.13 up
    ("x-1-cp312-cp312-manylinux_2_17_aarch64.whl", False),
    ("x-1-cp312-cp312-musllinux_1_2_x86_64.whl", False),
    ("x-1-cp312-cp312-win_amd64.whl", False),
])
def test_wheel_tags_for_cp312_and_glibc_2_39(fname, ok):
    assert (B.wheel_problem(fname) is None) == ok


# ------------------------------------------------------------------------------------------------ closure
DEVICE = {"torch": V("2.11.0"), "transformers": V("5.17.0"), "numpy": None, "requests": None}


def test_closure_skips_what_the_machine_satisfies_and_carries_the_rest():
    ps = pins(pin("sglang", "0.5.17"), pin("transformers", "5.12.1"), pin("fastapi", "1.0"), pin("starlette", "2.0"))
    req = {"sglang": ["torch==2.11.0", "transformers==5.12.1", "fastapi", "numpy>=1.2", "requests",
                      "av==16; platform_machine == 'aarch64'", "extra-thing; extra == 'diffusion'"],
           "transformers": ["numpy>=1.17"], "fastapi": ["starlette<3,>=1"], "starlette": []}
    plan = B.check_closure(["sglang==0.5.17"], ps, req, DEVICE)
    assert plan.carry == ["sglang", "transformers", "fastapi", "starlette"]
    assert set(plan.skipped) == {"torch", "numpy", "requests"}  # torch 2.11.0 fits; unknown versions are assumed
    assert "transformers" in plan.shadowed and "5.12.1" in plan.shadowed["transformers"]
    assert sorted(set(plan.assumed)) == ["numpy>=1.17", "numpy>=1.2"]  # checked on the machine by unpack.sh


def test_a_machine_package_at_a_version_the_requirement_refuses_needs_a_pin():
    with pytest.raises(B.BundleError) as e:
        B.check_closure(["sglang"], pins(pin("sglang", "1")), {"sglang": ["transformers==5.12.1"]}, DEVICE)
    msg = str(e.value)
    assert "\n" not in msg and "transformers==5.12.1" in msg and "the machine has 5.17.0" in msg and "pin" in msg


def test_a_conflict_names_both_sides():
    ps = pins(pin("sglang", "1"), pin("openai", "3.0"), pin("other", "1"))
    req = {"sglang": ["openai==2.6.1", "other"], "other": [], "openai": []}
    with pytest.raises(B.BundleError, match=r"conflict: sglang==1 needs openai==2.6.1, the lock has 3.0"):
        B.check_closure(["sglang"], ps, req, DEVICE)


def test_a_missing_pin_and_an_unused_pin_are_refused():
    with pytest.raises(B.BundleError, match=r"no pin for xgrammar==0.2.1 \(needed by sglang==1\)"):
        B.check_closure(["sglang"], pins(pin("sglang", "1")), {"sglang": ["xgrammar==0.2.1"]}, DEVICE)
    with pytest.raises(B.BundleError, match="pinned but needed by nothing: stale"):
        B.check_closure(["sglang"], pins(pin("sglang", "1"), pin("stale", "1")), {"sglang": [], "stale": []}, DEVICE)


def test_a_wheel_not_for_the_machine_is_refused():
    ps = pins(pin("sglang", "1", "sglang-1-cp312-cp312-manylinux_2_40_x86_64.whl"))
    with pytest.raises(B.BundleError, match="not cp312 / manylinux <= 2.39 x86_64"):
        B.check_closure(["sglang"], ps, {"sglang": []}, DEVICE)


def test_extras_are_followed_and_left_out_packages_recorded():
    ps = pins(pin("sglang", "1"), pin("flashinfer-python", "0.6"), pin("cu13-libs", "1"))
    req = {"sglang": ["flashinfer_python[cu13]==0.6", "py-spy"],
           "flashinfer-python": ["cu13-libs; extra == 'cu13'", "cu12-libs; extra == 'cu12'"], "cu13-libs": []}
    plan = B.check_closure(["sglang"], ps, req, DEVICE, left_out={"py-spy": None})
    assert plan.carry == ["sglang", "flashinfer-python", "cu13-libs"] and plan.left_out == {"py-spy": "sglang==1"}


def test_resolve_pins_each_package_once_and_stops_at_the_machine():
    calls = []
    avail = {"sglang": ("1", ["transformers==5.12.1", "torch==2.11.0", "lib>=2", "numpy"]),
             "transformers": ("5.12.1", ["lib"]), "lib": ("2.5", [])}

    def fetch(req):
        calls.append(str(req))
        ver, reqs = avail[B.cn(req.name)]
        assert req.specifier.contains(ver)
        return pin(req.name, ver), reqs
    got, requires = B.resolve(["sglang==1"], DEVICE, {}, fetch)
    assert [p.key for p in got] == ["lib", "sglang", "transformers"] and calls == ["sglang==1", "transformers==5.12.1", "lib>=2"]
    plan = B.check_closure(["sglang==1"], {p.key: p for p in got}, requires, DEVICE)  # what resolve writes, check accepts
    assert sorted(plan.carry) == ["lib", "sglang", "transformers"]


def test_resolve_without_backtracking_reports_the_conflict():
    avail = {"a": ("1", ["c"]), "b": ("1", ["c<2"]), "c": ("3", [])}
    fetch = lambda req: (pin(req.name, avail[B.cn(req.name)][0]), avail[B.cn(req.name)][1])  # noqa: E731
    with pytest.raises(B.BundleError, match=r"conflict: b==1 needs c<2, already chose 3 \(add c"):
        B.resolve(["a", "b"], DEVICE, {}, fetch)


# ------------------------------------------------------------------------------------------------ Requires-Python
@pytest.mark.parametrize("requires_python, ok", [
    ("", True), (">=3.12", True), (">=3.10,<3.13", True), ("==3.12.*", True), ("~=3.12.0", True),
    ("<3.12", False), (">=3.13", False), ("==3.11.*", False),
])
def test_requires_python_is_judged_against_the_machines_3_12_3(requires_python, ok):
    problem = B.python_problem(requires_python)
    assert (problem is None) == ok
    if not ok:
        assert problem == f"requires Python {requires_python}, the machine has 3.12.3"


def test_the_closure_refuses_a_wheel_whose_requires_python_excludes_3_12():
    ps = pins(pin("sglang", "1"), pin("old-lib", "1"))
    req = {"sglang": ["old-lib"], "old-lib": []}
    plan = B.check_closure(["sglang"], ps, req, DEVICE, requires_python={"sglang": ">=3.12", "old-lib": ">=3.8"})
    assert plan.carry == ["sglang", "old-lib"]
    with pytest.raises(B.BundleError) as e:
        B.check_closure(["sglang"], ps, req, DEVICE, requires_python={"sglang": ">=3.12", "old-lib": "<3.12"})
    msg = str(e.value)
    assert "\n" not in msg and msg == ("bundle: lock: old_lib-1-py3-none-any.whl: requires Python <3.12, the machine "
                                       "has 3.12.3 (pin a version that supports Python 3.12)")


def _wheel(folder: Path, name: str, ver: str, requires_python: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel of one module `name` (its __init__ holds the version), built by hand: no network, no build
    backend. METADATA carries Requires-Python and Requires-Dist; RECORD has the sha256 of every other file."""
    di = f"{name}-{ver}.dist-info"
    files = {f"{name}/__init__.py": f"VERSION = {ver!r}\n",
             f"{di}/METADATA": "Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {ver}\n"
             + (f"Requires-Python: {requires_python}\n" if requires_python else "")
             + "".join(f"Requires-Dist: {r}\n" for r in requires),
             f"{di}/WHEEL": "Wheel-Version: 1.0\nGenerator: test_gpu_bundle\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).rstrip(b'=').decode()},"
                     f"{len(body.encode())}\n" for path, body in files.items()) + f"{di}/RECORD,,\n"
    out = folder / f"{name}-{ver}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as z:
        for path, body in {**files, f"{di}/RECORD": record}.items():
            z.writestr(path, body)
    return out


def _tiny_spec(tmp_path: Path, wheels: list[Path], roots: str) -> Path:
    """A spec folder like common/setup/gpu_bundle's, flavour `tiny`: a lock naming the wheels with their sha256."""
    spec = tmp_path / "spec"
    spec.mkdir()
    lock = [B.Pin(B.parse_wheel_filename(w.name)[0], B.parse_wheel_filename(w.name)[1], B.sha256_file(w), w.name)
            for w in wheels]
    (spec / "tiny.lock").write_text(B.format_lock(lock, "two tiny wheels that need the GPU machine's Python"))
    (spec / "tiny_roots.txt").write_text(roots + "\n")
    (spec / "tiny_left_out.txt").write_text("")
    (spec / "device_packages.txt").write_text("torch==2.11.0\n")
    return spec


def _bundle_py(python: str, *args: str) -> subprocess.CompletedProcess:
    # PYTHONNOUSERSITE and no PIP_* from the caller: the interpreter's own pip, as build_sglang_bundle.sh runs it
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PYTHONNOUSERSITE": "1"}
    return subprocess.run([python, str(DIR / "bundle.py"), *args], capture_output=True, text=True, timeout=120, env=env)


def _interpreter(which: str) -> str:
    """The Python that runs the builder: `python3` on PATH (its default), the interpreter this venv was made from,
    or pytest's own. On the 2-core machine the first two are 3.11.7 with pip 23.2.1, pytest's 3.11.7 with pip 26.3:
    pip 23.2.1 checks Requires-Python against the Python running it even with --python-version 3.12."""
    py = {"python3 on PATH": shutil.which("python3"), "pytest's python": sys.executable,
          "the venv's base python": str(Path(sys.base_prefix) / "bin" / "python3")}[which]
    if not py or not Path(py).exists():
        pytest.skip(f"no {which} here")
    if subprocess.run([py, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        pytest.skip(f"{which} ({py}) has no pip")
    return py


@pytest.mark.parametrize("which", ["python3 on PATH", "the venv's base python", "pytest's python"])
def test_the_install_step_installs_wheels_that_need_python_3_12_from_another_python(tmp_path, which):
    py = _interpreter(which)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    ws = [_wheel(wheels, "tinyroot", "1.0", ">=3.12", ("tinydep>=2",)), _wheel(wheels, "tinydep", "2.0", ">=3.12,<3.13")]
    spec = _tiny_spec(tmp_path, ws, "tinyroot==1.0")
    r = _bundle_py(py, "--spec-dir", str(spec), "--flavour", "tiny", "check", str(wheels), str(tmp_path / "install.txt"),
                   str(tmp_path / "assumed.txt"))
    assert r.returncode == 0, r.stderr
    assert "closure OK: 2 wheels to carry" in r.stdout
    site = tmp_path / "stage" / "tiny-site"
    r = _bundle_py(py, "install", str(tmp_path / "install.txt"), str(site))
    version = subprocess.run([py, "-c", "import sys, pip; print(sys.version.split()[0], pip.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    assert r.returncode == 0, f"Python, pip {version}: {r.stderr}"
    assert (site / "tinyroot" / "__init__.py").read_text() == "VERSION = '1.0'\n"
    assert (site / "tinydep" / "__init__.py").read_text() == "VERSION = '2.0'\n"
    assert sorted(p.name for p in site.glob("*.dist-info")) == ["tinydep-2.0.dist-info", "tinyroot-1.0.dist-info"]
    assert not list(site.rglob("__pycache__"))  # --no-compile: no bytecode of the running Python's version


def test_the_install_step_still_refuses_a_wheel_not_for_python_3_12(tmp_path):
    """Turning pip's check off does not let a wheel through that the machine's Python cannot run: install judges
    each wheel against 3.12.3 first and runs no pip (one line, naming the wheel)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    ok = _wheel(wheels, "tinyroot", "1.0", ">=3.12")
    old = _wheel(wheels, "tinyold", "1.0", "<3.12")
    (tmp_path / "install.txt").write_text(f"{ok}\n{old}\n")
    site = tmp_path / "site"
    r = _bundle_py(sys.executable, "install", str(tmp_path / "install.txt"), str(site))
    assert r.returncode == 1 and not site.exists()
    assert r.stderr == ("bundle: tinyold-1.0-py3-none-any.whl: requires Python <3.12, the machine has 3.12.3 (pin a "
                        "version that supports Python 3.12 and check the lock again)\n")
    # and the closure check stops it earlier, naming the lock
    spec = _tiny_spec(tmp_path, [ok, old], "tinyroot\ntinyold")
    r = _bundle_py(sys.executable, "--spec-dir", str(spec), "--flavour", "tiny", "check", str(wheels),
                   str(tmp_path / "i.txt"), str(tmp_path / "a.txt"))
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert r.stderr.startswith("bundle: tiny.lock: tinyold-1.0-py3-none-any.whl: requires Python <3.12")


# ------------------------------------------------------------------------------------------------ parts
def test_split_and_join_round_trip_with_checksums(tmp_path):
    arc = tmp_path / "x-site.tar.zst"
    data = bytes(range(256)) * 41  # 10,496 bytes -> 3 parts of 4,000
    arc.write_bytes(data)
    parts = B.split(arc, tmp_path / "out", 4000)
    assert [p.relative_to(tmp_path / "out").as_posix() for p in parts] == \
        ["p01/x-site.tar.zst.01", "p02/x-site.tar.zst.02", "p03/x-site.tar.zst.03"]
    assert [p.stat().st_size for p in parts] == [4000, 4000, 2496]
    (want, name), rows = B.read_sums(parts[0].parent / "SHA256SUMS")
    assert name == "x-site.tar.zst" and want == B.sha256_file(arc) and [r[1] for r in rows] == [p.name for p in parts]
    assert all((p.parent / "SHA256SUMS").read_text() == (parts[0].parent / "SHA256SUMS").read_text() for p in parts)
    flat = tmp_path / "flat"
    flat.mkdir()
    for d in (tmp_path / "out").iterdir():
        for f in d.iterdir():
            shutil.copy(f, flat / f.name)
    dest = tmp_path / "dest"
    dest.mkdir()
    assert B.join(flat, dest).read_bytes() == data
    (flat / "x-site.tar.zst.02").write_bytes(b"y" * 4000)  # damaged
    with pytest.raises(B.BundleError, match="damaged or from another build: x-site.tar.zst.02"):
        B.join(flat, dest)
    (flat / "x-site.tar.zst.03").unlink()
    with pytest.raises(B.BundleError, match="missing parts: x-site.tar.zst.03"):
        B.join(flat, dest)


@pytest.mark.parametrize("size, part, room, want", [
    (10_496, 4000, 0, [4000, 4000, 2496]),
    (10_496, 4000, 1000, [4000, 4000, 2496]),        # the last part already leaves the room
    (10_496, 4000, 2000, [4000, 4000, 496, 2000]),   # it would not: one more part, the last at most 4000 - 2000
    (8_000, 4000, 1, [4000, 1, 3999]),
    (100, 4000, 3999, [99, 1]),
    (0, 4000, 0, [0]),
])
def test_part_sizes_keep_room_in_the_last_folder_for_the_wheel(size, part, room, want):
    got = B.part_sizes(size, part, room)
    assert got == want and sum(got) == size
    assert all(0 < n <= part for n in got[:-1]) and got[-1] + room <= part


def test_the_real_bundle_at_56_mib_takes_11_parts_so_the_last_folder_fits_with_its_wheel():
    """Measured 2026-12-06: sglang-site.tar.zst 584,381,683 bytes, zstandard wheel 5,546,993 bytes. Ten parts of
    56 MiB left a last folder of 61,462,550 bytes, which with a 4-6 MiB checkout passes the 64 MiB carry."""
    sizes = B.part_sizes(584_381_683, 56 * B.MIB - 65536, 5_546_993)
    assert len(sizes) == 11 and max(sizes) <= 56 * B.MIB - 65536 and sizes[-1] + 5_546_993 <= 56 * B.MIB - 65536


def test_split_refuses_a_silly_part_size(tmp_path):
    arc = tmp_path / "a.tar"
    arc.write_bytes(b"z" * 1000)
    with pytest.raises(B.BundleError, match="not positive"):
        B.split(arc, tmp_path / "o", 0)
    with pytest.raises(B.BundleError, match="100 parts of 10 bytes"):
        B.split(arc, tmp_path / "o", 10)
    with pytest.raises(B.BundleError, match="needs 10 bytes beside its part, more than a part's 10"):
        B.split(arc, tmp_path / "o", 10, last_room=10)


# ------------------------------------------------------------------------------------------------ unpack.sh
def _fake_bundle(tmp_path, packer: str, assumed: str = "", extra: dict | None = None):
    """A tiny sglang-site archive split into 3 parts, every part folder copied into one /tmp/parts-like folder
    (``extra``: more files of the site, name under sglang-site/ -> bytes)."""
    buf = io.BytesIO()
    files = {"sglang-site/sglang/__init__.py": b"__version__ = '0.5.17'\n",
             "sglang-site/big.bin": bytes(range(256)) * 64,
             **{f"sglang-site/{k}": v for k, v in (extra or {}).items()}}
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, body in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            t.addfile(info, io.BytesIO(body))
    ext = {"zstd": ".tar.zst", "xz": ".tar.xz", "none": ".tar"}[packer]
    arc = tmp_path / f"sglang-site{ext}"
    raw = buf.getvalue()
    if packer == "none":
        arc.write_bytes(raw)
    else:
        arc.write_bytes(subprocess.run([packer, "-c"], input=raw, capture_output=True, check=True).stdout)
    parts = B.split(arc, tmp_path / "out", max(1, arc.stat().st_size // 3 + 1))
    assert len(parts) == 3
    flat = tmp_path / "parts"
    flat.mkdir()
    for d in sorted((tmp_path / "out").iterdir()):
        shutil.copy(DIR / "unpack.sh", d / "unpack.sh")
        (d / "assumed.txt").write_text(assumed)
        for f in d.iterdir():
            shutil.copy(f, flat / f.name)
    return flat


def _unpack(flat, dest):
    return subprocess.run(["bash", str(flat / "unpack.sh"), str(dest)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("packer", [p for p in ("zstd", "xz") if shutil.which(p)] + ["none"])
def test_unpack_joins_checks_and_is_idempotent(tmp_path, packer):
    flat = _fake_bundle(tmp_path, packer)
    dest = tmp_path / "dest"
    r = _unpack(flat, dest)
    assert r.returncode == 0, r.stderr
    assert (dest / "sglang-site" / "sglang" / "__init__.py").read_text() == "__version__ = '0.5.17'\n"
    assert (dest / "sglang-site" / "big.bin").read_bytes() == bytes(range(256)) * 64
    assert not list(dest.glob("sglang-site.tar*")) and not (dest / "sglang-site.tmp").exists()
    r = _unpack(flat, dest)
    assert r.returncode == 0 and "already holds this bundle" in r.stdout


def test_unpack_exit_3_on_a_missing_part_and_4_on_a_damaged_one(tmp_path):
    flat = _fake_bundle(tmp_path, "none")
    dest = tmp_path / "dest"
    p2 = flat / "sglang-site.tar.02"
    body = p2.read_bytes()
    p2.write_bytes(body[:-1] + bytes([body[-1] ^ 1]))
    r = _unpack(flat, dest)
    assert r.returncode == 4 and "damaged" in r.stderr and not (dest / "sglang-site").exists()
    p2.unlink()
    r = _unpack(flat, dest)
    assert r.returncode == 3 and "missing parts: sglang-site.tar.02" in r.stderr


def _unpack_env(tmp_path, assumed: str, extra: dict | None = None, check: str | None = None):
    """unpack.sh with assumed.txt on a bare PATH (this Python's folder first); ``check``: UNPACK_IMPORT_CHECK."""
    pytest.importorskip("packaging")
    flat = _fake_bundle(tmp_path, "none", assumed=assumed, extra=extra)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    if check is not None:
        env["UNPACK_IMPORT_CHECK"] = check
    return subprocess.run(["bash", str(flat / "unpack.sh"), str(tmp_path / "dest")], capture_output=True, text=True,
                          timeout=60, env=env)


UNMET = "pytest>=1\nno-such-package-xyz>=1\n"  # the first is met, the second cannot be
KEY_MODULES = {f"{m}/__init__.py": b"" for m in ("sgl_kernel", "flashinfer")}


def test_unpack_warns_of_unmet_pins_and_exits_0_when_the_site_imports(tmp_path):
    dest = tmp_path / "dest"
    # the check runs with the unpacked site first on PYTHONPATH: its sglang, not another
    site = f"{dest}/sglang-site/"
    check = f"python3 -c 'import sglang, sys; sys.exit(0 if sglang.__file__.startswith(\"{site}\") else 9)'"
    r = _unpack_env(tmp_path, UNMET, check=check)
    assert r.returncode == 0, r.stderr
    unmet = [ln for ln in r.stderr.splitlines() if "unmet:" in ln]
    assert unmet == ["unpack.sh: WARNING: unmet: no-such-package-xyz>=1 (machine: None)"]  # pytest>=1 holds
    assert "imports regardless" in r.stderr
    assert (dest / "sglang-site" / ".bundle-sha256").exists()


def test_unpack_default_import_check_finds_the_sites_key_modules(tmp_path):
    r = _unpack_env(tmp_path, UNMET, extra=KEY_MODULES)  # sglang, sgl_kernel and flashinfer in the site only
    assert r.returncode == 0, r.stderr
    assert "WARNING: unmet: no-such-package-xyz>=1" in r.stderr


def test_unpack_exit_7_when_pins_are_unmet_and_the_site_does_not_import(tmp_path):
    r = _unpack_env(tmp_path, UNMET)  # the default check: the fake site has no sgl_kernel
    assert r.returncode == 7, r.stderr
    last = [ln for ln in r.stderr.splitlines() if "does not import" in ln]
    assert len(last) == 1 and "No module named 'sgl_kernel'" in last[0]
    assert "no-such-package-xyz>=1 (machine: None)" in last[0] and "pytest" not in last[0]
    assert not (tmp_path / "dest" / "sglang-site" / ".bundle-sha256").exists()  # a rerun checks again
    again = tmp_path / "again"
    again.mkdir()
    r = _unpack_env(again, UNMET, check="false")  # a check that fails silently is named as such
    assert r.returncode == 7 and "(false: failed)" in r.stderr


def test_unpack_imports_nothing_when_every_pin_is_met(tmp_path):
    r = _unpack_env(tmp_path, "pytest>=1\n", check="false")
    assert r.returncode == 0 and "WARNING" not in r.stderr, r.stderr
