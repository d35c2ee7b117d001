#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run this project (its image has torch, nvcc and numpy, no TVM and no
# package registry) into two folders git ignores, each under the 64 MiB a call may carry; bench/device_env.sh
# unpacks them there. Run once here, in the repository's root:   bash bench/device_pack.sh
set -euo pipefail
cd "$(dirname "$0")/.."
for d in .dev1 .dev2; do grep -qx "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >> .git/info/exclude; done
rm -rf .dev1 .dev2 && mkdir -p .dev1 .dev2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the device's python3 is 3.12; the TVM pins are the project's (shared/notes/tvm.md)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$work" \
    apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1 xgboost-cpu sqlalchemy greenlet platformdirs \
    jsonschema jsonschema-specifications referencing rpds-py tornado
mv "$work"/apache_tvm_ffi-*.whl "$work"/[!a]*.whl .dev2/
mkdir "$work/tvm" && (cd "$work/tvm" && unzip -q "$work"/apache_tvm-*.whl)
# the compiler library is 259 MB (92 MB deflated in the wheel): xz brings it to ~57 MiB, which with the
# working tree (~9.5 MB) is more than a call carries: its first 32 MiB go in .dev1, the rest with .dev2
xz -T0 -9 -c "$work/tvm/tvm/lib/libtvm_compiler.so" > "$work/libtvm_compiler.so.xz"
rm "$work/tvm/tvm/lib/libtvm_compiler.so"
split -b 32M -a 1 "$work/libtvm_compiler.so.xz" "$work/libtvm_compiler.so.xz."
mv "$work/libtvm_compiler.so.xz.a" .dev1/ && mv "$work/libtvm_compiler.so.xz.b" .dev2/
tar cJf .dev2/tvm_rest.tar.xz -C "$work/tvm" .
du -sh .dev1 .dev2
