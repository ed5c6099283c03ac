#!/usr/bin/env bash
# Behaviour and speed of this checkout against another revision, side by side in one run:
# the corpus rendered by both (issues, scripts, the issues file-issues would file; diffed),
# a seeded campaign's findings by both (diffed), and `bnfuzz bench` by both, in turn.
#
#   tools/compare_revisions.sh REV [ROUNDS]      (from the repository root, after `make setup`)
#
# REV is checked out in a temporary worktree and imported ahead of this checkout
# (PYTHONPATH), with this checkout's .venv: the frameworks are the same, the code differs.
set -euo pipefail
rev=${1:?usage: tools/compare_revisions.sh REV [ROUNDS]}
rounds=${2:-2}
here=$(pwd)
python=$here/.venv/bin/python
work=$(mktemp -d)
git worktree add -q "$work/old" "$rev"
trap 'git worktree remove --force "$work/old"; rm -rf "$work"' EXIT
as() {  # as SRC COMMAND...: the command with SRC's fuzz package, run outside both trees
  local src=$1; shift
  (cd "$work" && PYTHONPATH=$src "$@")
}
for side in old new; do
  src=$here; [ "$side" = old ] && src=$work/old
  as "$src" "$python" "$here/tools/render_corpus.py" "$work/render-$side" "$here/corpus" > /dev/null 2>&1
  as "$src" "$python" -m fuzz.cli run --pass upstream --max-examples 300 --seed 0 --shrink-seconds 0 --json \
    2> /dev/null | "$python" -c 'import json, sys; print(*sorted(f["signature"] for f in json.load(sys.stdin)["findings"]), sep="\n")' \
    > "$work/findings-$side.txt" || true
done
echo "== rendered corpus: lines that differ ($rev -> this checkout)"
diff -r "$work/render-old" "$work/render-new" | grep '^[<>]' | sort | uniq -c | sort -rn || echo "none"
echo "== seeded campaign (upstream, 300 examples, seed 0): findings that differ"
diff "$work/findings-old.txt" "$work/findings-new.txt" && echo "none ($(wc -l < "$work/findings-new.txt") findings each)"
echo "== bnfuzz bench --pass upstream --seconds 8, value sets per second, in turn"
for r in $(seq "$rounds"); do
  for side in new old; do
    src=$here; [ "$side" = old ] && src=$work/old
    as "$src" "$python" -m fuzz.cli bench --pass upstream --seconds 8 --json 2> /dev/null \
      | "$python" -c 'import json, sys; s = json.load(sys.stdin); print(sys.argv[1], sys.argv[2], *("%s %s" % (k, s[k]["per_second"]) for k in ("naive", "cached_cold", "cached_warm", "campaign")))' "$side" "$r"
  done
done
