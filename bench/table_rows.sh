# Sourced by the bench/*_table.sh scripts: runs `myriad sim` once per entry of the array `rows`
# ("row name|extra flags") and prints one markdown row per run, made by a Python program that
# gets the report file, the row name and the run's wall seconds as its arguments. The caller
# sets `rows` (a global array) before calling; `myriad_bin` names the binary for it too.
#   table_rows SCENARIO OUT_DIR PYTHON_PROGRAM [extra sim flags for every row...]
myriad_bin=build/release/myriad
table_rows() {
  local scenario=$1 out=$2 program=$3
  shift 3
  mkdir -p "$out"
  local i=0 row name flags file start wall
  for row in "${rows[@]}"; do
    name=${row%%|*}
    flags=${row#*|}
    file="$out/row$i.json"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$myriad_bin" sim "$scenario" "$@" $flags --quiet --no-progress --output "$file"
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    python3 -c "$program" "$file" "$name" "$wall"
    i=$((i + 1))
  done
}
