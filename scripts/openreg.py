"""Build PyTorch's reference out-of-tree backend OpenReg (``torch_openreg``) and give it a venv.

    .venv/bin/python scripts/openreg.py                 # build (or reuse) and print the python
    .venv/bin/python scripts/openreg.py --from-venv DIR # pack an existing build.sh venv instead

The source and its build script live beside the checkout, in ``../shared/openreg`` (PyTorch's
own copy, BSD-3; ``--src`` names another). The build is cached per torch version as a wheel in
``~/.cache/torchport/openreg/<torch version>/`` (``--cache``), so it compiles once (4.5-8 min
on 2 cores) and every later call only installs.

Where it is installed: OpenReg autoloads through the ``torch.backends`` entry-point group, so
once installed in an environment *every* ``import torch`` there renames PrivateUse1 to
``openreg`` and the Python test devices (simdev, quirkdev, hostdev, accdev) can no longer
claim it. The wheel therefore goes into an overlay venv (``<cache>/venv``) that sees every
package of the interpreter running this script (a ``site.addsitedir`` line in a ``.pth``) and
adds ``torch_openreg`` on top; its ``bin/torchport`` runs the project's torchport there. Pass
``--venv PATH`` to install into another venv (the project's own, knowing the cost above).

The last line printed is the overlay's python; ``--check`` prints what the accelerator API
answers there.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SRC = HERE.parent.parent / "shared" / "openreg"
DIST = "torch_openreg"
# dist-info files that belong to an installation, not to a wheel
NOT_IN_WHEEL = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}
CHECK = (
    "import torch, torch_openreg; "
    "print(torch.__version__, torch.accelerator.current_accelerator(), "
    "torch.accelerator.device_count())"
)


def log(msg: str) -> None:
    print(f"[openreg] {msg}", file=sys.stderr, flush=True)


def torch_version() -> str:
    """The torch of this interpreter, read with backend autoload off (a half-installed
    backend must not break the question)."""
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.__version__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python*/site-packages"))
    if not found:
        raise SystemExit(f"no site-packages under {venv}: is it a venv?")
    return found[0]


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def pack_wheel(built_venv: Path, out_dir: Path) -> Path:
    """A wheel made from ``torch_openreg`` as installed in ``built_venv`` (the venv
    ``build.sh`` installs into), so an existing build is reused without compiling again."""
    from importlib import metadata

    site = site_packages(built_venv)
    dists = list(metadata.distributions(name=DIST, path=[str(site)]))
    if not dists:
        raise SystemExit(f"{DIST} is not installed in {built_venv}")
    dist = dists[0]
    info = f"{DIST}-{dist.version}.dist-info"
    wheel_meta = (site / info / "WHEEL").read_text()
    tag = next(
        line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:")
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{DIST}-{dist.version}-{tag}.whl"
    partial = target.with_suffix(".partial")
    records = []
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel in dist.files or []:
            rel_s = str(rel)
            name = Path(rel_s).name
            if "__pycache__" in rel_s or rel_s.startswith(".."):
                continue
            if rel_s.startswith(info + "/") and name in NOT_IN_WHEEL:
                continue
            data = (site / rel_s).read_bytes()
            zf.writestr(rel_s, data)
            records.append(f"{rel_s},{_record_hash(data)},{len(data)}")
        records.append(f"{info}/RECORD,,")
        zf.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    partial.replace(target)
    return target


def build(src: Path, cache: Path, version: str, jobs: int) -> Path:
    """Compile with the source's own build.sh into a builder venv in the cache."""
    script = src / "build.sh"
    if not script.is_file():
        raise SystemExit(
            f"no build script at {script}: pass --src (the folder holding build.sh and src/)"
        )
    env = {
        **os.environ,
        "VENV": str(cache / "build-venv"),
        "WORK": str(cache / "build"),
        "JOBS": str(jobs),
        "TORCH_SPEC": os.environ.get("TORCH_SPEC", f"torch=={version.split('+')[0]}"),
    }
    log(f"building from {src} (several minutes; log in {cache / 'build.log'})")
    with open(cache / "build.log", "w") as out:
        rc = subprocess.call(["bash", str(script)], env=env, stdout=out, stderr=subprocess.STDOUT)
    if rc != 0:
        raise SystemExit(f"build.sh failed (rc={rc}): see {cache / 'build.log'}")
    return cache / "build-venv"


def overlay_venv(path: Path) -> Path:
    """A venv that sees this interpreter's packages and adds its own on top."""
    python = path / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    base = sysconfig.get_paths()["purelib"]
    (site_packages(path) / "_torchport_overlay.pth").write_text(
        f"import site; site.addsitedir({base!r})\n"
    )
    launcher = path / "bin" / "torchport"
    launcher.write_text(
        f"#!{python}\nimport sys\nfrom torchport.interfaces.cli import main\nsys.exit(main())\n"
    )
    launcher.chmod(0o755)
    return python


def install(wheel: Path, python: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--force-reinstall",
            str(wheel),
        ],
        check=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=DEFAULT_SRC)
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--from-venv", type=Path, default=None)
    parser.add_argument("--venv", type=Path, default=None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args(argv)

    version = torch_version()
    cache = args.cache or Path.home() / ".cache" / "torchport" / "openreg" / version
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob(f"{DIST}-*.whl"))
    if args.rebuild or not wheels:
        built = args.from_venv or build(args.src, cache, version, args.jobs)
        wheels = [pack_wheel(built, cache)]
        log(f"wheel {wheels[0]}")
    else:
        log(f"cached wheel {wheels[-1]}")
    python = (args.venv / "bin" / "python") if args.venv else overlay_venv(cache / "venv")
    marker = python.parent.parent / f".{DIST}-{wheels[-1].name}"
    if not marker.exists():
        install(wheels[-1], python)
        marker.write_text("")
    check = subprocess.run(
        [str(python), "-c", CHECK], capture_output=True, text=True, cwd="/", check=False
    )
    if check.returncode != 0:
        sys.stderr.write(check.stderr)
        raise SystemExit(f"{DIST} does not import in {python}")
    log(f"torch, accelerator, device count: {check.stdout.strip()}")
    print(python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
