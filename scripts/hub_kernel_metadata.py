#!/usr/bin/env python3
"""Write (or check) the metadata.json of a Hub kernel build variant.

    python3 scripts/hub_kernel_metadata.py examples/hub_kernel/build/torch-neuron
    python3 scripts/hub_kernel_metadata.py --check examples/hub_kernel/build/torch-neuron

The Kernels library loads a variant only with a metadata.json naming the
kernel, its backend and licence; with a digest of the variant's files it
also verifies them on every load (a local kernel with no digest loads with a
warning).  The digest is computed by the Kernels library itself
(kernels._rust.Digest.hash_variant: every file but metadata.json and
__pycache__), so what this writes is what the loader checks.  The build id,
which the loader uses as the module name and to tell builds apart, carries
the first bytes of a hash over that digest: a changed file is a new build.
"""
import argparse
import hashlib
import json
import os
import sys


def digest_of(variant):
    from kernels._rust import Digest, DigestAlgorithm
    d = Digest.hash_variant(DigestAlgorithm.SHA256, variant)
    return {"algorithm": "sha256", "files": dict(sorted(d.files.items()))}


def metadata_for(variant, name, version, license, backend, python_depends):
    digest = digest_of(variant)
    build = hashlib.sha256(json.dumps(digest, sort_keys=True).encode()).hexdigest()[:10]
    return {
        "id": f"_{name.replace('-', '_')}_{backend}_{build}",
        "name": name,
        "version": version,
        "license": license,
        "python-depends": list(python_depends),
        "backend": {"type": backend},
        "digest": digest,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variant", help="the build variant directory, e.g. build/torch-neuron")
    ap.add_argument("--name", default="neuronsim-layers")
    ap.add_argument("--version", type=int, default=1)
    ap.add_argument("--license", default="Apache-2.0")
    ap.add_argument("--backend", default="neuron")
    ap.add_argument("--python-depends", nargs="*", default=["nki"])
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if metadata.json is not what this would write")
    a = ap.parse_args(argv)
    if not os.path.isdir(a.variant):
        ap.error(f"{a.variant}: not a directory")
    want = metadata_for(a.variant, a.name, a.version, a.license, a.backend, a.python_depends)
    path = os.path.join(a.variant, "metadata.json")
    if a.check:
        try:
            with open(path) as f:
                have = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 1
        if have != want:
            print(f"{path} is stale: run scripts/hub_kernel_metadata.py {a.variant}", file=sys.stderr)
            return 1
        print(f"{path}: up to date ({len(want['digest']['files'])} files)")
        return 0
    with open(path, "w") as f:
        json.dump(want, f, indent=2)
        f.write("\n")
    print(f"wrote {path}: id {want['id']}, {len(want['digest']['files'])} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
