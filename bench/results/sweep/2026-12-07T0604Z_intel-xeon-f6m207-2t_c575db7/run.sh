# usage: bash run.sh OUTDIR  (from the repository root, after cargo build --release --example sweep)
out=$1; mkdir -p $out
echo "start $(date -u +%FT%TZ) $(cat /proc/loadavg)" > $out/load.txt
r=0
for s in $(cat "$(dirname "$0")/specs.txt"); do
  if [ $((r % 2)) = 0 ]; then
    ./target/release/examples/sweep "$s" --round 0 --threads 1,2 --modes train,infer --warmup 1 --rounds 2 --block 2 >> $out/forge.jsonl 2>/dev/null
    python3 bench/sweep_torch.py "$s" --round 0 --threads 1,2 --modes train,infer --warmup 1 --rounds 2 --block 2 >> $out/torch.jsonl 2>/dev/null
  else
    python3 bench/sweep_torch.py "$s" --round 0 --threads 1,2 --modes train,infer --warmup 1 --rounds 2 --block 2 >> $out/torch.jsonl 2>/dev/null
    ./target/release/examples/sweep "$s" --round 0 --threads 1,2 --modes train,infer --warmup 1 --rounds 2 --block 2 >> $out/forge.jsonl 2>/dev/null
  fi
  echo "$s $(date -u +%FT%TZ) $(cat /proc/loadavg)" >> $out/load.txt
  r=$((r + 1))
done
python3 bench/compare_table.py $out/torch.jsonl $out/forge.jsonl > $out/table.md
