#!/usr/bin/env python3
"""The files of the MCP workload, beside bench/gen-tree.py's tree, for
bench/mcp-servers.sh and scripts/orderfile alike: bench/small.txt (about
2 KB), bench/dir50 (50 entries), bench/big.txt (8 MB), each with the markers
the bench checks answers for. Usage: workload-files.py ROOT"""
import os, sys

root = sys.argv[1]
os.makedirs(f"{root}/bench/dir50")
with open(f"{root}/bench/small.txt", "w") as f:
    f.write("SMALL_FIRST_LINE_MARKER\n"
            + "".join(f"line {i:03} of a small text file, about two kilobytes\n" for i in range(38))
            + "SMALL_LAST_LINE_MARKER\n")
for i in range(50):
    with open(f"{root}/bench/dir50/entry_{i:02}.txt", "w") as f:
        f.write(f"entry {i}\n")
line = "the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnopqrstuv\n"
with open(f"{root}/bench/big.txt", "w") as f:
    f.write("BIG_FIRST_LINE_MARKER\n" + line * (8 * 1024 * 1024 // len(line)) + "BIG_LAST_LINE_MARKER\n")
