#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (make fuzz). The
# targets are found, not listed by hand: every func FuzzXxx(f *testing.F)
# in a _test.go file outside jepsen/ (its own module, with no decoders).
#
#   scripts/fuzz.sh            run each target for FUZZTIME (default 30s)
#   scripts/fuzz.sh -list      print "<package dir> <target>" per target
#
# A failing target stops the run; its input is kept under the package's
# testdata/fuzz, as go test -fuzz does, for the seed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}

list() {
	find . -name '*_test.go' -not -path './jepsen/*' -not -path './.git/*' | while read -r file; do
		sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*\*testing\.F).*/\1/p' "$file" |
			while read -r fn; do echo "$(dirname "$file") $fn"; done
	done | sort
}

if [ "${1:-}" = "-list" ]; then
	list
	exit 0
fi
n=0
while read -r pkg fn; do
	echo "== $fn ($pkg, $FUZZTIME)"
	"$GO" test -run '^$' -fuzz "^${fn}\$" -fuzztime "$FUZZTIME" "$pkg"
	n=$((n + 1))
done < <(list)
echo "fuzz: $n targets, $FUZZTIME each, no failure"
