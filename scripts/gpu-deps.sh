# shellcheck shell=bash
# shellcheck disable=SC2034  # deps_cmake_args and prebuilt are read by the scripts that source this
# Sourced by the GPU-machine scripts (gpu-check, gpu-quick, gpu-ab). When RINGLM_DEPS_DEBS names a
# folder of Debian packages (`scripts/gpu-check --collect-debs DIR`), unpacks them into a private
# prefix, points pkg-config and the loader at it, and sets deps_cmake_args (extra CMake
# arguments); otherwise deps_cmake_args is empty and the system's packages are used.
# When RINGLM_PREBUILT names an archive of scripts/gpu-pack, unpacks it into build-cuda/ (the
# binaries; their libraries in build-cuda/lib, put on the loader's path) and sets prebuilt=1:
# the callers skip configuring and building.
deps_cmake_args=()
if [ -n "${RINGLM_DEPS_DEBS:-}" ]; then
  deps_prefix=$(mktemp -d /tmp/ringlm-deps.XXXXXX)
  for deb in "$RINGLM_DEPS_DEBS"/*.deb; do dpkg -x "$deb" "$deps_prefix"; done
  for pc in "$deps_prefix"/usr/lib/*/pkgconfig/*.pc; do
    [ -f "$pc" ] || continue
    sed -i "s|^prefix=/usr|prefix=$deps_prefix/usr|" "$pc"
  done
  PKG_CONFIG_PATH="$(echo "$deps_prefix"/usr/lib/*/pkgconfig)${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  LD_LIBRARY_PATH="$deps_prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH LD_LIBRARY_PATH
  deps_cmake_args=(-DCMAKE_PREFIX_PATH="$deps_prefix/usr"
    -DCMAKE_CXX_FLAGS="-isystem $deps_prefix/usr/include")
fi
prebuilt=0
if [ -n "${RINGLM_PREBUILT:-}" ]; then
  mkdir -p build-cuda
  tar -xJf "$RINGLM_PREBUILT" -C build-cuda
  LD_LIBRARY_PATH="$PWD/build-cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
  prebuilt=1
  echo "prebuilt binaries ($(tr '\n' ' ' <build-cuda/PACKED))"
fi
