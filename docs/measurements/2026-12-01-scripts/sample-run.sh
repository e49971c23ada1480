#!/bin/bash
# sample-run.sh: compiles the sampled objects with $SCC, in the built tree
cd /work/speed-tree/nocc
while IFS= read -r line; do eval "$line" || echo "FAILED: ${line:0:80}"; done < /work/speed-logs/sample.sh
