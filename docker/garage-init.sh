#!/bin/sh
# The compose farm's one-shot Garage setup, through Garage's admin API (v2): lay out the single
# node, import the farm's access key, create the buckets and allow the key on them. Safe to run
# again: what exists is left as it is. Needs only sh, sed and curl (the official Garage image
# has no shell, so this runs in tessera/cli).
#
# Environment: GARAGE_ADMIN_URL, GARAGE_ADMIN_TOKEN, TESSERA_S3_ACCESS_KEY_ID,
# TESSERA_S3_SECRET_ACCESS_KEY, TESSERA_BUCKETS (comma-separated). The token is sent in a
# header read from stdin by curl, never on a command line.
set -eu
: "${GARAGE_ADMIN_URL:?}" "${GARAGE_ADMIN_TOKEN:?}" "${TESSERA_S3_ACCESS_KEY_ID:?}"
: "${TESSERA_S3_SECRET_ACCESS_KEY:?}" "${TESSERA_BUCKETS:?}"
say() { echo "garage-init: $*" >&2; }
body=$(mktemp)
trap 'rm -f "$body"' EXIT

# api METHOD PATH [JSON]: the HTTP status on stdout, the answer in $body.
api() {
  printf 'Authorization: Bearer %s\n' "$GARAGE_ADMIN_TOKEN" | curl -sS -m 20 -o "$body" \
    -w '%{http_code}' -X "$1" -H @- -H 'Content-Type: application/json' \
    ${3:+--data "$3"} "$GARAGE_ADMIN_URL$2" || echo 000
}
# must METHOD PATH [JSON]: api, failing the init on anything but 200.
must() {
  status=$(api "$@")
  [ "$status" = 200 ] || { say "$1 $2: HTTP $status: $(cat "$body")"; exit 1; }
}
# field NAME: the first string or number value of "NAME" in $body (Garage pretty-prints).
field() {
  sed -n "s/^ *\"$1\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}\$/\1/p" "$body" | head -n 1
}

# 1. Wait for the admin API (Garage starts in a second or two; 60 s at most).
tries=0
until [ "$(api GET /v2/GetClusterStatus 2>/dev/null)" = 200 ]; do
  tries=$((tries + 1))
  [ $tries -lt 120 ] || { say "no answer from $GARAGE_ADMIN_URL in 60 s"; exit 1; }
  sleep 0.5
done

# 2. The layout: this node in zone dc1, once.
must GET /v2/GetClusterLayout
version=$(field version)
if [ "${version:-0}" = 0 ]; then
  must GET '/v2/GetNodeInfo?node=self'
  node=$(field nodeId)
  [ -n "$node" ] || { say "no node id in GetNodeInfo: $(cat "$body")"; exit 1; }
  must POST /v2/UpdateClusterLayout \
    "{\"roles\":[{\"id\":\"$node\",\"zone\":\"dc1\",\"capacity\":10000000000,\"tags\":[]}]}"
  must POST /v2/ApplyClusterLayout '{"version":1}'
  say "layout applied (node ${node%"${node#????????????????}"}...)"
fi

# 3. The farm's key.
key=$TESSERA_S3_ACCESS_KEY_ID
case $(api GET "/v2/GetKeyInfo?id=$key") in
  200) ;;
  404) must POST /v2/ImportKey \
         "{\"accessKeyId\":\"$key\",\"secretAccessKey\":\"$TESSERA_S3_SECRET_ACCESS_KEY\",\"name\":\"tessera\"}"
       say "key $key imported" ;;
  *) say "GetKeyInfo $key: $(cat "$body")"; exit 1 ;;
esac

# 4. The buckets, each allowed to the key.
for bucket in $(echo "$TESSERA_BUCKETS" | tr ',' ' '); do
  case $(api GET "/v2/GetBucketInfo?globalAlias=$bucket") in
    200) ;;
    404) must POST /v2/CreateBucket "{\"globalAlias\":\"$bucket\"}"; say "bucket $bucket created" ;;
    *) say "GetBucketInfo $bucket: $(cat "$body")"; exit 1 ;;
  esac
  id=$(field id)
  must POST /v2/AllowBucketKey \
    "{\"bucketId\":\"$id\",\"accessKeyId\":\"$key\",\"permissions\":{\"read\":true,\"write\":true,\"owner\":true}}"
done
say "ready: buckets $TESSERA_BUCKETS"
