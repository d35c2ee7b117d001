# Source this on a lent GPU machine (no package registry there) to import our pinned TVM and the packages its
# image lacks, carried from here as two folders git ignores (each call carries at most 64 MiB):
#   .dev1/libtvm_compiler.so.xz.a  the first 32 MiB of TVM's compiler library, xz-compressed (57 MiB in all)
#   .dev2/libtvm_compiler.so.xz.b  the rest of it, the rest of the apache-tvm wheel (tvm_rest.tar.xz),
#                                  apache-tvm-ffi, sqlalchemy, xgboost-cpu, ... (*.whl)
# bench/device_pack.sh makes both. Carry .dev1 in one call and .dev2 in the next while the machine is warm (30 s):
# both unpack into /tmp/site.
SITE=/tmp/site
mkdir -p "$SITE/tvm/lib"
if [ -f .dev1/libtvm_compiler.so.xz.a ]; then
    cp .dev1/libtvm_compiler.so.xz.a "$SITE/" || return 1
fi
if [ -d .dev2 ]; then
    cat "$SITE/libtvm_compiler.so.xz.a" .dev2/libtvm_compiler.so.xz.b | xz -dc > "$SITE/tvm/lib/libtvm_compiler.so" \
        || return 1
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        .dev2/*.whl || return 1
    tar xJf .dev2/tvm_rest.tar.xz -C "$SITE" || return 1
fi
export PYTHONPATH="$SITE:$PWD" PYTHONUNBUFFERED=1
