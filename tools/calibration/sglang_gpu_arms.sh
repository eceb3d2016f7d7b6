#!/bin/bash
# Carried in the last chunk of the live-SGLang payload directory, which the user supplies (SGLang's wheels and their
# dependencies in chunks .whl/1..N): copy this file into .whl/N next to that chunk's site/ and convert_eagle_for_sglang.py.
# On the lent GPU: SGLang 0.5.17 (EAGLE topk 1, 5 steps, rejection sampling, decode CUDA graphs) in float16
# and bfloat16, correct arms and the speculation-off control, plus the planted nofix arm in float16; the
# project's suites against each. Phases (one call each, back to back while the machine is warm):
#   setup   (carry .whl/N, after device_stage.sh of chunks 1..N-1): install, start the arms
#   suites  (no carry): every suite on every arm, in parallel; results under $OUT
set -u
: "${OUT:?OUT must be set}"
PHASE=${1:?phase}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
exec > >(tee -a "$OUT/$PHASE.log") 2>&1
C=$(cd "$(dirname "$0")" && pwd); R=/tmp/arms; P=/tmp/payload; SITE=/tmp/site; MODELS=/tmp/models; PROJ=$PWD; L=/tmp/logs
mkdir -p $P $L
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
COMMON="--model-path $PROJ/fixtures/vllm_models/target --attention-backend triton --sampling-backend pytorch --grammar-backend none --context-length 1024 --max-total-tokens 32768 --max-running-requests 8 --mem-fraction-static 0.05 --mm-feature-transport cpu --random-seed 1234 --host 127.0.0.1 --enable-metrics --log-level info --disable-prefill-cuda-graph --cuda-graph-max-bs 8"
SPEC="--speculative-algorithm EAGLE --speculative-draft-model-path $MODELS/eagle_sgl --speculative-num-steps 5 --speculative-eagle-topk 1 --speculative-num-draft-tokens 6 --speculative-use-rejection-sampling --mem-fraction-static 0.08"  # the draft weights count too: 0.05 is too little
# name port dtype env... -- args
start() {
  local name=$1 port=$2 dtype=$3; shift 3; local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  setsid env "${envs[@]}" PYTHONPATH=$R/site:$SITE python3 -m sglang.launch_server $COMMON --dtype $dtype --port $port "$@" > $L/$name.log 2>&1 < /dev/null &
  echo $! > $L/$name.pid; echo "$name: pid $! port $port $dtype at $(el)s"
}
ready() {
  local i; for i in $(seq 1 "$3"); do
    kill -0 "$(cat $L/$1.pid)" 2>/dev/null || { echo "$1 died at $(el)s:"; tail -25 $L/$1.log; return 1; }
    [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$2/health)" = 200 ] && grep -q "ready to roll" $L/$1.log && { echo "$1 ready at $(el)s"; return 0; }
    sleep 1; done; echo "$1 not ready after $3 s"; tail -15 $L/$1.log; return 1
}
ARMS16="natural16:30001 nofix16:30002 guards16:30003 fix16:30004 base16:30005"
ARMSBF="naturalbf:30011 guardsbf:30013 fixbf:30014 basebf:30015"
case $PHASE in
setup)
  cp "$C"/* $P/ 2>/dev/null; mkdir -p $R && cp -r "$C"/gpu_arms.sh "$C"/site $R/ || exit 3
  MISSING=$(cd $P && while read -r _ f; do [ -e "${f#\*}" ] || echo -n "${f#\*} "; done < SHA256SUMS)
  [ -z "$MISSING" ] || { echo "PAYLOAD INCOMPLETE: $MISSING"; exit 4; }
  (cd $P && sha256sum -c --quiet SHA256SUMS) || { echo "PAYLOAD CORRUPT"; exit 4; }
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE $P/*.whl > $L/pip.log 2>&1 || { tail -20 $L/pip.log; exit 5; }
  python3 $P/convert_eagle_for_sglang.py $PROJ/fixtures/vllm_models/eagle $MODELS/eagle_sgl >/dev/null || exit 3
  echo "installed at $(el)s"
  PYTHONPATH=$PROJ:$SITE python3 -c "import aiohttp, scipy, pytest, requests, tqdm, tokenizers; import specsuite.cli.main, specsuite.pytest_plugin.plugin; print('suites import ok')" || echo "SUITES IMPORT FAILED"
  start natural16 30001 float16 X=1 -- $SPEC
  ready natural16 30001 360 || exit 7
  start nofix16 30002 float16 SGL_PLANT=1 -- $SPEC
  start guards16 30003 float16 SGL_PLANT=1 SGL_SAMPLER=fixed -- $SPEC
  start fix16 30004 float16 SGL_SAMPLER=fixed -- $SPEC
  start base16 30005 float16 X=1 --
  start naturalbf 30011 bfloat16 X=1 -- $SPEC
  start guardsbf 30013 bfloat16 SGL_PLANT=1 SGL_SAMPLER=fixed -- $SPEC
  start fixbf 30014 bfloat16 SGL_SAMPLER=fixed -- $SPEC
  start basebf 30015 bfloat16 X=1 --
  for a in $ARMS16 $ARMSBF; do ready ${a%%:*} ${a##*:} 300; done
  grep -h "gpu-plant" $L/*.log | sort | uniq -c | head
  nvidia-smi --query-gpu=memory.used --format=csv
  echo "setup done at $(el)s" ;;
suites)
  cd $PROJ
  S="--lossless-samples 120 --lossless-two-sample-size 100 --lossless-greedy-prompts 12 --lossless-concurrencies 1,8 --lossless-temperatures 1.0,0.7,0.4,0.7:0.9"
  pt() { local tag=$1 limit=$2; shift 2; PYTHONPATH=$PROJ:$SITE timeout "$limit" python3 -m pytest suites -q -p no:cacheprovider -rfE --results-dir /tmp/res/$tag --junitxml=/tmp/res_$tag.xml "$@" > /tmp/pt_$tag.log 2>&1; echo "$tag: exit $? $(tail -1 /tmp/pt_$tag.log) at $(el)s"; }
  U=http://127.0.0.1
  M="correctness or integrity or lossless"
  pt base16_self 420 -m "$M" --server-url $U:30005 --lossless-reference-url $U:30005 --require-server-url $S &
  pt basebf_self 420 -m "$M" --server-url $U:30015 --lossless-reference-url $U:30015 --require-server-url $S &
  pt natural16 420 -m "$M" --server-url $U:30001 --lossless-reference-url $U:30005 --require-server-url $S &
  pt guards16 420 -m "$M" --server-url $U:30003 --lossless-reference-url $U:30005 --require-server-url $S &
  (ready fix16 30004 150 && pt fix16 420 -m "$M" --server-url $U:30004 --lossless-reference-url $U:30005 --require-server-url $S) &
  pt naturalbf 420 -m "$M" --server-url $U:30011 --lossless-reference-url $U:30015 --require-server-url $S &
  pt guardsbf 420 -m "$M" --server-url $U:30013 --lossless-reference-url $U:30015 --require-server-url $S &
  pt fixbf 420 -m "$M" --server-url $U:30014 --lossless-reference-url $U:30015 --require-server-url $S &
  pt nofix16 420 -m "correctness or lossless" --server-url $U:30002 --lossless-reference-url $U:30005 --require-server-url $S &
  (ready fix16 30004 150 && pt fix16_gsm8k_perf 420 -m "gsm8k or perf" --server-url $U:30004 --require-server-url --gsm8k-num-questions 50) &
  (ready fix16 30004 150; PYTHONPATH=$PROJ:$SITE timeout 420 python3 -c 'import sys; from specsuite.cli.main import main; sys.exit(main())' run --server-url $U:30002 --baseline-url $U:30004 --results-dir /tmp/res/main --run-id nofix-vs-fix > /tmp/pt_main_nofix_vs_fix.log 2>&1; echo "main nofix vs fix: exit $? at $(el)s") &
  (ready fix16 30004 150; PYTHONPATH=$PROJ:$SITE timeout 420 python3 -c 'import sys; from specsuite.cli.main import main; sys.exit(main())' run --server-url $U:30004 --profile nightly --results-dir /tmp/res/main_fix --run-id fix-alone > /tmp/pt_main_fix_nightly.log 2>&1; echo "main fix alone nightly: exit $? at $(el)s") &
  wait
  for a in $ARMS16 $ARMSBF; do echo "== ${a%%:*}: $(grep -c -i 'traceback' $L/${a%%:*}.log) tracebacks"; done
  grep -h "gpu-plant" $L/*.log | sort | uniq -c | head -5
  (cd /tmp && tar czf $OUT/suites.tgz res_*.xml pt_*.log res) ; (cd $L && tar czf $OUT/server_logs.tgz *.log) ;;
esac
echo "$PHASE done at $(el)s"
