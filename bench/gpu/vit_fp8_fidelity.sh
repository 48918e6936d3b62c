#!/usr/bin/env bash
# The FP8 ViT's fidelity (issue 26: "an FP8 ViT, option only, with its fidelity measured"), in one device call. A
# random-weight checkpoint with InternVL2-8B's whole ViT + projector and a 2-layer LLM (make_model.py --llm-layers
# 2: the first-token logits then carry the ViT's precision rather than 32 layers of the LLM's); Fovea bf16
# (`official`), FP8 of the LLM only (`fp8`) and FP8 of the ViT's linears too (`fp8all`, --quantization fp8-all),
# each dumping its first-token logits on the same photos and prompts; transformers bf16 and float32 on the same
# requests (reference.py); compare.py gives each run's logits error and first-token agreement against both. Only a
# checkpoint makes this comparison: with --load-format dummy the FP8 weights are drawn on their own, not quantized
# from the bf16 ones. No trained InternViT is reachable, so the weights are random (std 0.02, make_model.py).
#
#   bench/gpu/vit_fp8_fidelity.sh [--requests 64] [--tiny]      (--tiny: a CPU rehearsal at tiny shapes)
# Env: OUT (results: compare.json, the logs), WORK (/tmp/fovea_vitfp8), FOVEA_BIN (build-gpu/fovea), PHOTOS,
#      TOKENIZER (.carry/photos, .carry/tokenizers/internlm2/tokenizer.model).
set -uo pipefail
cd "$(dirname "$0")/../.."
here=bench/gpu
requests=64 tiny=0
while [ $# -gt 0 ]; do
  case "$1" in
    --requests) requests=$2; shift 2 ;;
    --tiny) tiny=1; shift ;;
    *) echo "vit_fp8_fidelity.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
W=${WORK:-/tmp/fovea_vitfp8} OUT=${OUT:-$PWD/out/vit_fp8_fidelity} FOVEA=${FOVEA_BIN:-build-gpu/fovea}
tokenizer=${TOKENIZER:-.carry/tokenizers/internlm2/tokenizer.model}
device=cuda model_flags="" ref_flags=""
[ "$tiny" = 1 ] && device=cpu model_flags="--tiny --device cpu --dtype f32" ref_flags="--dtype f32"
rm -rf "$W" && mkdir -p "$W" "$OUT"
rc=0
step() {  # step NAME LIMIT COMMAND...: its output to $W/NAME.log; a failure is noted and the rest still runs
  local name=$1 limit=$2
  shift 2
  timeout -k 5 "$limit" "$@" > "$W/$name.log" 2>&1
  local status=$?
  echo "$name rc=$status"
  [ $status = 0 ] || { rc=$status; tail -n 5 "$W/$name.log"; }
}
step workload 60 python3 $here/workload.py --photos "${PHOTOS:-.carry/photos}" --out "$W" --requests "$requests"
step model 120 python3 $here/make_model.py --out "$W/model" --variant internlm2 --tokenizer "$tokenizer" \
  --template internlm2-chat --llm-layers 2 $model_flags
step prompt 30 python3 $here/prompt_ids.py --fovea "$FOVEA" --tokenizer "$W/model" --variant internlm2 \
  --template internlm2-chat --out "$W/prompt.json"
runs=""
for run in official:none fp8:fp8 fp8all:fp8-all; do
  name=${run%%:*} quantization=${run##*:}
  step "fovea_$name" 150 python3 $here/fovea_run.py --fovea "$FOVEA" --model "$W/model" --tasks "$W/tasks.jsonl" \
    --output "$W/fovea_$name.jsonl" --summary "$W/fovea_$name.json" --log "$W/fovea_${name}_run.log" --name "$name" \
    --backend $device --policy official --extra-args "--quantization $quantization" --timeout 140 \
    --dump-logits "$W/fovea_${name}_logits"
  runs="$runs${runs:+,}$name:official"
done
step reference 240 python3 $here/reference.py --model "$W/model" --work "$W" --out "$W/ref.json" \
  --logits "$W/ref_logits.npz" --requests "$requests" --batch 8 --device $device --fp32-requests "$requests" \
  --skip fwd,vit $ref_flags
step compare 60 python3 $here/compare.py --work "$W" --runs "$runs" --out "$W/compare.json"
python3 - "$W/compare.json" "$W" <<'EOF'
import json, os, sys
sys.path.insert(0, "bench/gpu")
import compare
c = json.load(open(sys.argv[1]))
# What the ViT's FP8 alone changes: fp8all against fp8 (the same FP8 LLM behind both).
a, b = compare.load_fovea_logits(sys.argv[2], "fp8all"), compare.load_fovea_logits(sys.argv[2], "fp8")
if a is not None and b is not None:
    tokens = {name: compare.first_tokens(compare.common.read_jsonl(os.path.join(sys.argv[2], f"fovea_{name}.jsonl")))
              for name in ("fp8all", "fp8")}
    c["fp8all_vs_fp8"] = {"logits_rel_err": compare.rel_errors(a["ids"], a["logits"], b["ids"], b["logits"]),
                          "first_tokens": compare.agreement(tokens["fp8all"], tokens["fp8"], list(tokens["fp8"]))}
    json.dump(c, open(sys.argv[1], "w"), indent=1)
bf = c.get("transformers_bf16_vs_fp32", {})
print(f"transformers bf16 vs float32: logits rel err {bf.get('logits_rel_err')}, first tokens {bf.get('agree')}/{bf.get('n')}")
for name, r in c["runs"].items():
    print(f"{name}: vs float32 {r.get('logits_rel_err_vs_fp32')}, first tokens vs float32 {r.get('vs_fp32')}, "
          f"vs transformers bf16 {r.get('vs_reference')}; vs Fovea bf16 {r.get('logits_rel_err_vs_fovea_official')}, "
          f"first tokens {r.get('vs_fovea_official')}")
print(f"fp8all vs fp8 (the ViT's FP8 alone): {c.get('fp8all_vs_fp8')}")
EOF
cp -f "$W"/*.log "$W"/*.json "$OUT/" 2>/dev/null
exit $rc
