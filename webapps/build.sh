#!/usr/bin/env bash
# Build the vendored Live API web console, unchanged, from its own lock file.
#
#   webapps/build.sh [SRC] [OUT]    (make webapp)
#     SRC  the vendored source (default webapps/live-api-web-console): upstream
#          google-gemini/live-api-web-console at e4de0d367dfc22fd9b9f0fd80bd86ecfea4e8b57, every file
#          as upstream has it (checked: its git tree id must be upstream's, below)
#     OUT  where the static site goes (default SRC/build, which upstream's own .gitignore ignores)
#
# Only the npm registry is reached. No file of the app changes: the build is steered by
# environment variables alone:
#   npm_config_ignore_scripts=true  @google/genai 0.14.0 depends on test-server-sdk, whose
#                                   postinstall downloads a binary from GitHub (fails offline); no
#                                   other install script matters here (core-js: a banner; fsevents:
#                                   macOS; @parcel/watcher: sass --watch only)
#   DISABLE_ESLINT_PLUGIN=true      with CI=true (as .ci/run sets) CRA treats lint warnings as
#                                   errors and fails on the app's own unused import (store-logger.ts:19)
#   GENERATE_SOURCEMAP=false        13 MB -> 2.4 MB of output, and 25% less build time
#   REACT_APP_GEMINI_API_KEY        baked into the bundle (App.tsx:26); the emulator takes any key
#   BROWSERSLIST_IGNORE_OLD_DATA=1  quiets the caniuse-lite age warning
# The built site is kept in a cache keyed by the source's tree id and Node's major version
# (~/.cache/faultlab/webapps), so a fresh clone on the same machine (CI) copies 2.4 MB instead of
# rebuilding (npm ci 36-54 s + build 46-61 s on 2 cores, 1.7 GB of memory at its peak).
set -euo pipefail

UPSTREAM_REPO=google-gemini/live-api-web-console
UPSTREAM_COMMIT=e4de0d367dfc22fd9b9f0fd80bd86ecfea4e8b57
UPSTREAM_TREE=c6126b18ad43ea947faf18c61fd158d74f970d35   # git rev-parse $UPSTREAM_COMMIT^{tree}
KEY=${WEBAPP_API_KEY:-faultlab-lab-key}

SRC=$(cd "${1:-$(dirname "$0")/live-api-web-console}" && pwd)
OUT=${2:-$SRC/build}

# 1. The source is upstream's, byte for byte: the tree id of its files (those its .gitignore does
#    not ignore: node_modules/ and build/ may be there) equals the upstream commit's tree id.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/webapp-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
index=$tmp/index
top=$(git -C "$SRC" rev-parse --show-toplevel)
rel=$(realpath --relative-to="$top" "$SRC")
GIT_INDEX_FILE=$index git -C "$top" add -- "$rel"
tree=$(GIT_INDEX_FILE=$index git -C "$top" write-tree --prefix="$rel/")
if [ "$tree" != "$UPSTREAM_TREE" ]; then
  echo "build-webapp: $SRC is not $UPSTREAM_REPO@$UPSTREAM_COMMIT (tree $tree, want $UPSTREAM_TREE)" >&2
  exit 1
fi

node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || { echo "build-webapp: needs Node.js >= 18 (@google/genai 0.14); node is $(node --version)" >&2; exit 1; }
cache=${FAULTLAB_WEBAPP_CACHE:-$HOME/.cache/faultlab/webapps}/live-api-web-console-$UPSTREAM_TREE-node$node_major-$KEY

# 2. Build once per (source, Node major, key), in a copy outside the checkout.
if [ ! -f "$cache/build/index.html" ]; then
  work=$tmp/src && mkdir "$work"
  # The files of the checked tree only (those the temporary index holds), not node_modules/.
  (cd "$top" && GIT_INDEX_FILE=$index git ls-files -z -- "$rel" | xargs -0 cp --parents -t "$work")
  app=$work/$rel
  s=$(date +%s)
  (cd "$app" && npm_config_ignore_scripts=true npm ci --no-audit --no-fund)
  m=$(date +%s)
  (cd "$app" && CI=true DISABLE_ESLINT_PLUGIN=true GENERATE_SOURCEMAP=false \
     BROWSERSLIST_IGNORE_OLD_DATA=1 REACT_APP_GEMINI_API_KEY="$KEY" npm run build)
  e=$(date +%s)
  grep -q "$KEY" "$app"/build/static/js/main.*.js || { echo "build-webapp: the key is not in the bundle" >&2; exit 1; }
  mkdir -p "$cache"
  rm -rf "$cache/build.tmp" && cp -a "$app/build" "$cache/build.tmp" && mv "$cache/build.tmp" "$cache/build"
  printf '{"repo": "%s", "commit": "%s", "tree": "%s", "node": "%s", "npm_ci_s": %d, "build_s": %d}\n' \
    "$UPSTREAM_REPO" "$UPSTREAM_COMMIT" "$tree" "$(node --version)" $((m - s)) $((e - m)) > "$cache/build-info.json"
fi

# 3. The site where the profile serves it from.
rm -rf "$OUT" && mkdir -p "$(dirname "$OUT")" && cp -a "$cache/build" "$OUT"
echo "build-webapp: $OUT ($(du -sh "$OUT" | cut -f1)) from $UPSTREAM_REPO@${UPSTREAM_COMMIT:0:7}; $(cat "$cache/build-info.json")"
