#!/usr/bin/env bash
# Session 2026-12-06d call 3 (main's binary, .carry/COMMIT). On an H200: the family rows that need more than 80 GB
# (InternVL3-38B bf16, InternVL3-78B FP8). On an 80 GB card: A/B of --block-size 64 against the default 16 on
# InternVL2-8B-shaped dummy weights (bf16 and FP8, alternating), with each run's first tokens compared.
cd "$(dirname "$0")/../.."
R=/tmp/call3; rm -rf $R; mkdir -p $R
save() { tar czf $OUT/call3.tgz -C $R . ; }
tar xJf .carry/bin/bins.tar.xz -C .carry/bin
F=.carry/bin/fovea-main
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv,noheader | tee $R/gpu.txt
mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
if [ "${mem:-0}" -gt 100000 ]; then
  OUT=$R/family WORK=/tmp/fovea_family FOVEA_BIN=$F bench/gpu/family.sh \
    --only internvl3-38b,internvl3-78b-fp8 --budget ${BUDGET:-170} > $R/family_stdout.txt 2>&1
  echo "family rc=$? at ${SECONDS}s"; tail -22 $R/family/family.md 2>/dev/null
  save; exit 0
fi
W=/tmp/fovea_bs; mkdir -p $W $R/bs
python3 bench/gpu/workload.py --photos .carry/photos --out $W --requests 200 > $R/workload.log 2>&1
python3 -c "import sys; sys.path.insert(0, 'bench/gpu'); import family_models as f; \
f.write_model_dir('InternVL2-8B', '$W/model', '.carry/tokenizers')" >> $R/workload.log 2>&1
for rep in $(seq 1 ${REPS:-2}); do for q in none fp8; do for bs in 16 64; do
  tag=$q-bs$bs-$rep; extra=""; [ $q = fp8 ] && extra="--quantization fp8"
  timeout -k 5 60 $F bench --model $W/model --images $W/images --count 96 --backend cuda --load-format dummy \
    --gemm-seconds 0 --no-prefix-cache --vision-cache-tiles 1 --block-size $bs $extra --json $R/bs/$tag.json \
    --first-tokens $R/bs/$tag.tokens > $R/bs/$tag.log 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], round(d['qpm'],1), 'QPM')" \
    $R/bs/$tag.json $tag 2>/dev/null || echo "$tag failed"
done; python3 -c "import json,sys; t=[sorted((j['image'], j['tokens']) \
for j in map(json.loads, open(f))) for f in sys.argv[1:3]]; print(sys.argv[3], 'first tokens equal' if t[0] == t[1] \
else 'first tokens differ in %d of %d' % (sum(a != b for a, b in zip(*t)), len(t[0])))" \
  $R/bs/$q-bs16-$rep.tokens $R/bs/$q-bs64-$rep.tokens "$q rep $rep" 2>&1 | tail -1; done; save; done
