# Sourced by the GPU scripts: the binaries built on the Debian 12 VM and carried in a folder
# (build-call/ by default; bench_in_turn.sh says how it is packed), each NAME as NAME.xz or NAME.
# unpack_prebuilt FOLDER INTO NAME...: each NAME from FOLDER into INTO, uncompressed and executable,
# with FOLDER's libfmt.so* beside them (the VM's libfmt, which the binaries link); returns 1, naming
# the file, where one is in neither form.
unpack_prebuilt() {
  local folder=$1 into=$2 name
  shift 2
  mkdir -p "$into"
  for name in "$@"; do
    if [ -f "$folder/$name.xz" ]; then xz -dc "$folder/$name.xz" > "$into/$name" || return 1
    elif [ -f "$folder/$name" ]; then cp "$folder/$name" "$into/$name" || return 1
    else echo "no $folder/$name(.xz)"; return 1; fi
    chmod +x "$into/$name"
  done
  cp "$folder"/libfmt.so* "$into/" 2>/dev/null
  return 0
}
