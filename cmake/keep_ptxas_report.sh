#!/bin/sh
# The CUDA compiler launcher (CMakeLists.txt): runs the compile command it is
# given (ccache and nvcc, which compiles with --resource-usage) and keeps
# ptxas's report of each kernel's registers, stack frame and spills in
# OBJECT.ptxas beside the object, for tests/unit/kernel_resources_test.cpp.
# Everything else the compile prints (errors, warnings) passes through. ccache
# replays the report on a cache hit, so a warm rebuild writes it too.
obj=""
prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && obj=$a
  prev=$a
done
err=$(mktemp "${TMPDIR:-/tmp}/cmha-ptxas.XXXXXX") || exit 1
"$@" 2>"$err"
rc=$?
report='^ptxas info|^ +[0-9]+ bytes stack frame'
if [ "$rc" -eq 0 ] && [ -n "$obj" ]; then
  grep -E "$report" "$err" >"$obj.ptxas.tmp"
  mv "$obj.ptxas.tmp" "$obj.ptxas"
fi
grep -vE "$report" "$err" >&2
rm -f "$err"
exit "$rc"
