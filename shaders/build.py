"""Build lazyfuel's SPIR-V from the GLSL compute shaders in this folder.

Each `<kernel>.comp` in this folder (found by name: a new op only adds its file) is compiled
once per element width (1, 2, 4, 8, 16 bytes) and memory mode
with glslc (`--target-env=vulkan1.2`, `-DWIDTH=<w>`, `-DSSBO` for storage buffers), checked with
spirv-val, and written as `<kernel>_w<width>.spv` (device addresses) and
`<kernel>_w<width>_ssbo.spv` (storage buffers; not for the `ADDRESS_ONLY` kernels) to
`lazyfuel/backends/vulkan/spirv/` (committed and packaged), or to `--out DIR`. `--check`
rebuilds into a temporary folder and exits 1 if the committed SPIR-V differs.

    python shaders/build.py            # rebuild the committed SPIR-V
    python shaders/build.py --check    # fail if it is stale
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "lazyfuel" / "backends" / "vulkan" / "spirv"
KERNELS = tuple(sorted(p.stem for p in HERE.glob("*.comp")))  # every shader here: a new op adds its file
WIDTHS = (1, 2, 4, 8, 16)
MODES = {"": [], "_ssbo": ["-DSSBO"]}  # file-name suffix -> extra glslc flags
ADDRESS_ONLY = ("host_gather", "select_fill")  # kernels built for device addresses only (no `_ssbo` variant)
TARGET = "vulkan1.2"


def outputs() -> list[tuple[str, str, int, list[str]]]:
    """(output file name, kernel, width, extra flags) for every SPIR-V module the build writes."""
    return [(f"{k}_w{w}{suffix}.spv", k, w, flags) for k in KERNELS for w in WIDTHS
            for suffix, flags in MODES.items() if not (suffix and k in ADDRESS_ONLY)]


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found; install it (Debian: apt-get install glslc spirv-tools)")
    return found


def build(out: Path) -> list[Path]:
    """Compile every variant into `out`; return the files written. Raises on any compiler error."""
    glslc, spirv_val = _tool("glslc"), _tool("spirv-val")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, kernel, width, flags in outputs():
        target = out / name
        subprocess.run(
            [glslc, f"--target-env={TARGET}", "-O", f"-DWIDTH={width}", *flags, "-I", str(HERE),
             str(HERE / f"{kernel}.comp"), "-o", str(target)],
            check=True,
        )
        subprocess.run([spirv_val, "--target-env", TARGET, str(target)], check=True)
        written.append(target)
    return written


def stale(committed: Path = DEFAULT_OUT) -> list[str]:
    """Names of committed modules that differ from a fresh build (or are missing or extra)."""
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        fresh = {p.name: p.read_bytes() for p in Path(tmp).glob("*.spv")}
    have = {p.name: p.read_bytes() for p in committed.glob("*.spv")}
    return sorted(n for n in fresh.keys() | have.keys() if fresh.get(n) != have.get(n))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    parser.add_argument("--check", action="store_true", help="fail if the committed SPIR-V is stale")
    args = parser.parse_args(argv)
    if args.check:
        bad = stale(args.out)
        if bad:
            print(f"stale SPIR-V in {args.out}: {' '.join(bad)}; run python shaders/build.py")
            return 1
        print(f"SPIR-V in {args.out} is up to date")
        return 0
    for path in build(args.out):
        print(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
