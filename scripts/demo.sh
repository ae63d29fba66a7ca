#!/usr/bin/env bash
# tessera's first command for a newcomer: installs the dependencies, builds the `tessera`
# binary, makes a 1-minute 1080p sample with audio (once) and transcodes it with two
# segment workers, then shows what came out.
#
#   scripts/demo.sh
#
# Everything it writes is under ./demo/ (gitignored): sample.mp4, sample-out.mp4, report.json.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-${HOME:-/root}/.cargo}/bin:$PATH"

step() { printf '\n==> %s\n' "$*"; }

step "dependencies (scripts/setup-deps.sh)"
bash scripts/setup-deps.sh

step "build (cargo build --release -p tessera-cli)"
cargo build --release -p tessera-cli

mkdir -p demo
IN=demo/sample.mp4
OUT=demo/sample-out.mp4
REPORT=demo/report.json

if [[ -s $IN ]]; then
  step "sample: reusing $IN"
else
  step "sample: generating $IN (60 s, 1920x1080, 30 fps, testsrc2 + 440 Hz sine, libx264 veryfast)"
  # Written under a temporary name and renamed, so an interrupted run leaves no half file behind.
  ffmpeg -hide_banner -loglevel error -nostdin -y \
    -f lavfi -i "testsrc2=size=1920x1080:rate=30:duration=60" \
    -f lavfi -i "sine=frequency=440:sample_rate=48000:duration=60" \
    -c:v libx264 -preset veryfast -pix_fmt yuv420p \
    -c:a aac -b:a 128k -ac 2 \
    -shortest -movflags +faststart -f mp4 "$IN.part"
  mv -f "$IN.part" "$IN"
fi

step "transcode: target/release/tessera transcode $IN -o $OUT --workers 2 --report $REPORT"
start=$SECONDS
target/release/tessera transcode "$IN" -o "$OUT" --workers 2 --report "$REPORT"
echo "took $((SECONDS - start)) s"

step "output: ffprobe $OUT"
ffprobe -v error \
  -show_entries format=format_name,duration,size,bit_rate:stream=index,codec_type,codec_name,profile,width,height,pix_fmt,r_frame_rate,sample_rate,channels \
  -of default=noprint_wrappers=0 "$OUT"

step "report: $REPORT"
cat "$REPORT"
echo

# Decoded video frames (ffprobe -count_frames decodes the whole stream).
count_frames() {
  ffprobe -v error -select_streams v:0 -count_frames \
    -show_entries stream=nb_read_frames -of csv=p=0 "$1"
}

step "frame counts (decoded)"
in_frames=$(count_frames "$IN")
out_frames=$(count_frames "$OUT")
printf 'input  %-24s %s frames\n' "$IN" "$in_frames"
printf 'output %-24s %s frames\n' "$OUT" "$out_frames"
if [[ $in_frames == "$out_frames" ]]; then
  echo "OK: every input frame is in the output"
else
  echo "MISMATCH: input has $in_frames frames, output $out_frames" >&2
  exit 1
fi
