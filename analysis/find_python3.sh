#!/usr/bin/env bash
# The one finder of a python3 that can draw the report (imports matplotlib): the first on
# PATH, then the system's (Debian's python3-matplotlib lives there; a pyenv or venv python3
# earlier on PATH often lacks it). Prints its path; exit 1 with the reason if none has it.
#   usage: py=$(analysis/find_python3.sh) || echo "no python3 with matplotlib"
#   (installed beside the report generator as share/cudatrace/report/find_python3.sh)
for p in $(type -ap python3) /usr/bin/python3 /bin/python3; do
  if [[ -x $p ]] && "$p" -c 'import matplotlib' 2>/dev/null; then
    echo "$p"
    exit 0
  fi
done
echo "no python3 with matplotlib (tried: $(type -ap python3 | tr '\n' ' ')/usr/bin/python3; apt-get install python3-matplotlib)" >&2
exit 1
