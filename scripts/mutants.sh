#!/usr/bin/env bash
# Mutation testing of the engine (docs/testing.md): every mutant of
# scripts/mutants.txt is put into a scratch copy of the committed tree in
# turn, rebuilt and tested; prints a table and "N of M killed". Exit status
# 0 when every mutant is killed.
#
#   bash scripts/mutants.sh                  all mutants
#   bash scripts/mutants.sh --only 'timer'   the mutants whose id matches
#   bash scripts/mutants.sh --markdown F     the table as Markdown in F too
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec python3 scripts/mutants.py "$@"
